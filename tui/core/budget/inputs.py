"""What the budget needs (:class:`BudgetInputs`, the teaching case by default), validated into finite numbers.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from tui.core.budget.formats import normalize_kv_dtype, normalize_weights
from tui.core.budget.vocab import BudgetError

# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

# Sanity bounds that keep every figure a finite number (far above any real model or GPU).
MAX_PARAMS = 1e15
MAX_GIB = 1e6

_INT_FIELDS_MIN = {
    "layers": 1,
    "kv_heads": 1,
    "head_dim": 1,
    "max_seq": 1,
    "tp": 1,
    "block_size": 1,
    "sliding_window": 0,
    "sliding_layers": 0,
    "mla_latent_dim": 0,
    "quant_rows": 0,
    "quant_tensors": 0,
    "max_position": 0,
    "kv_space_bytes": 0,
}


@dataclass(frozen=True)
class BudgetInputs:
    """Everything the budget needs.  The defaults are the teaching case (a 7B model on a 24 GiB GPU).

    params            total parameter count (parameters)
    weights           weight format name, see WEIGHT_FORMATS
    gpu_gib           memory of ONE GPU (GiB)
    margin_gib        runtime margin per GPU: CUDA context, graphs, workspaces (GiB, an allowance)
    layers            layers that hold a KV cache
    kv_heads          KV heads of the whole model (split over tp)
    head_dim          elements per head
    max_seq           tokens one sequence may hold (prompt + output)
    kv_dtype          KV cache element type, see KV_DTYPES
    tp                tensor-parallel GPUs
    block_size        tokens per paged KV block

    Config-derived (defaults mean "not known"):
    unquantized_params  parameters kept in bf16 by quantized formats (embeddings, untied lm_head,
                        norms, biases, routers); 0 = no split known, everything treated as quantized
    quant_rows          output rows of all quantized matrices (per-channel scales); 0 = estimate
    quant_tensors       number of quantized matrices (per-tensor scales); 0 = estimate
    sliding_window      tokens a sliding-window layer keeps (0 = no sliding window)
    sliding_layers      how many of `layers` use the sliding window
    mla_latent_dim      elements of the MLA latent cached per token per layer (0 = ordinary K/V heads)
    max_position        the model's max_position_embeddings (0 = unknown), only checked
    kv_space_bytes      the KV cache space per GPU given directly (bytes): ``--kv-cache-gib``, or the engine's own
                        figure (vLLM ``cache_config_info`` ``kv_cache_memory_bytes``). 0 = not given: the cache
                        budget is gpu_gib - weights - margin. When given, the cache budget IS this space (the
                        GPU size, weights and margin are not subtracted from it)
    model               display name
    notes               extra assumptions carried from the model config
    """

    params: float = 7e9
    weights: str = "bf16"
    gpu_gib: float = 24.0
    margin_gib: float = 3.0
    layers: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    max_seq: int = 4096
    kv_dtype: str = "bf16"
    tp: int = 1
    block_size: int = 16
    unquantized_params: float = 0
    quant_rows: int = 0
    quant_tensors: int = 0
    sliding_window: int = 0
    sliding_layers: int = 0
    mla_latent_dim: int = 0
    max_position: int = 0
    kv_space_bytes: int = 0
    model: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", normalize_weights(self.weights))
        object.__setattr__(self, "kv_dtype", normalize_kv_dtype(self.kv_dtype))
        for name in ("params", "gpu_gib", "margin_gib", "unquantized_params"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise BudgetError(f"{name} must be a finite number, got {value!r}")
        if not 0 < self.params <= MAX_PARAMS:
            raise BudgetError(f"params must be > 0 and <= {MAX_PARAMS:g}, got {self.params!r}")
        if not 0 < self.gpu_gib <= MAX_GIB:
            raise BudgetError(f"gpu_gib must be > 0 and <= {MAX_GIB:g}, got {self.gpu_gib!r}")
        if not 0 <= self.margin_gib <= MAX_GIB:
            raise BudgetError(f"margin_gib must be >= 0 and <= {MAX_GIB:g}, got {self.margin_gib!r}")
        if not 0 <= self.unquantized_params <= self.params:
            raise BudgetError(
                f"unquantized_params must be between 0 and params ({self.params:.0f}), got {self.unquantized_params!r}"
            )
        for name, minimum in _INT_FIELDS_MIN.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise BudgetError(f"{name} must be a whole number, got {value!r}")
            if value < minimum:
                raise BudgetError(f"{name} must be >= {minimum}, got {value}")
        if self.sliding_layers > self.layers:
            raise BudgetError(f"sliding_layers ({self.sliding_layers}) cannot exceed layers ({self.layers})")
        if self.sliding_layers and not self.sliding_window:
            raise BudgetError("sliding_layers given without a sliding_window")
        if not isinstance(self.model, str):
            raise BudgetError(f"model must be a string, got {self.model!r}")
        notes = self.notes
        if isinstance(notes, str) or not all(isinstance(n, str) for n in notes):
            raise BudgetError("notes must be a list of strings")
        object.__setattr__(self, "notes", tuple(notes))

    def replace(self, **changes: Any) -> BudgetInputs:
        return dataclasses.replace(self, **changes)
