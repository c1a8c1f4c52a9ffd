"""Memory budget: does a model fit on a GPU, and how many sequences' KV cache fit beside it?

Pure domain, standard library only.  The arithmetic is the teaching script, with names:

    weights        = params x bytes_per_param                      (bytes, split over tp GPUs)
    cache_budget   = gpu_memory - weights - runtime_margin          (bytes per GPU)
    kv_per_seq     = 2 (K and V) x layers x kv_heads x head_dim
                     x bytes_per_element x tokens                   (bytes per GPU)
    candidate      = floor(cache_budget / kv_per_seq)               (sequences)

The candidate is MEMORY-ONLY: a number worth load-testing, never a concurrency limit.
Everything is computed in whole bytes; GiB = 2**30 bytes and is only used for display.
See docs/budget.md for the formats, the model configs and the assumptions.

Why ~1,000 lines: the budget arithmetic is short; most of the module is the per-architecture readers of
Hugging Face config.json (Llama, Mistral, Qwen, Gemma 1-3, Mixtral, DeepSeek MLA) and the quantization formats,
each with its stated assumptions, kept beside the arithmetic they feed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

GIB = 2**30
SCHEMA = "servewatch.budget/1"

CANDIDATE_NOTE = (
    "The memory-only candidate is a concurrency number to load-test, not a concurrency limit: "
    "it counts memory only, and only a load test shows what the deployment sustains."
)

# Results saved in a budget file may be rounded for display; GiB figures must agree with the
# recomputation to within half of the last printed digit (0.01 GiB), counts must agree exactly.
VERIFY_TOLERANCE_GIB = 0.005


class BudgetError(ValueError):
    """Bad budget input, an unreadable budget file, or a saved budget that does not recompute."""


# --------------------------------------------------------------------------------------------
# Weight formats and KV cache element types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightFormat:
    """How many bytes one parameter costs in a weight format, overheads included.

    bits_per_weight   payload plus any per-group/per-block scale and zero-point, averaged per weight
    bytes_per_row     extra bytes per output row of each quantized matrix (per-channel scales)
    bytes_per_tensor  extra bytes per quantized matrix (per-tensor scales)
    quantized         True when embeddings/norms keep bf16 while the linear layers use this format
    """

    name: str
    bits_per_weight: float
    description: str
    quantized: bool = True
    bytes_per_row: int = 0
    bytes_per_tensor: int = 0


# Unquantized parameters (embeddings, untied lm_head, norms, biases, MoE routers) of a quantized
# checkpoint are stored in bf16.
UNQUANTIZED_BYTES = 2

# GGUF Q4_K_M is a mix of block types; the share of weights assumed to be Q6_K.
Q4_K_BPW = 144 * 8 / 256  # 4.5: 256 weights -> 128 B of 4-bit quants + 12 B 6-bit scales/mins + 2 x fp16
Q6_K_BPW = 210 * 8 / 256  # 6.5625: 256 weights -> 128 B low bits + 64 B high bits + 16 B int8 scales + fp16
Q4_K_M_Q6_SHARE = 1 / 6

WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat("fp32", 32.0, "fp32: 4 bytes per parameter", quantized=False),
        WeightFormat("bf16", 16.0, "bf16: 2 bytes per parameter", quantized=False),
        WeightFormat("fp16", 16.0, "fp16: 2 bytes per parameter", quantized=False),
        WeightFormat(
            "fp8",
            8.0,
            "fp8 (e4m3): 1 byte per weight plus one fp32 scale (4 bytes) per weight matrix",
            bytes_per_tensor=4,
        ),
        WeightFormat(
            "int8",
            8.0,
            "int8: 1 byte per weight plus one fp32 scale (4 bytes) per output channel",
            bytes_per_row=4,
        ),
        WeightFormat(
            "gptq",
            4 + (16 + 4) / 128,
            "GPTQ 4-bit, group 128: 4 bits per weight + one fp16 scale and one 4-bit zero per 128 weights "
            "= 4.15625 bits per weight (no act-order g_idx)",
        ),
        WeightFormat(
            "awq",
            4 + (16 + 4) / 128,
            "AWQ 4-bit, group 128: 4 bits per weight + one fp16 scale and one 4-bit zero per 128 weights "
            "= 4.15625 bits per weight",
        ),
        WeightFormat(
            "nf4",
            4 + 32 / 64,
            "bitsandbytes NF4, no double quant: 4 bits per weight + one fp32 absmax per 64 weights "
            "= 4.5 bits per weight",
        ),
        WeightFormat(
            "nf4-dq",
            4 + 8 / 64 + 32 / (64 * 256),
            "bitsandbytes NF4 with double quant: 4 bits per weight + one 8-bit absmax per 64 weights "
            "+ one fp32 constant per 256 absmax blocks = 4.127 bits per weight",
        ),
        WeightFormat(
            "q8_0",
            34 * 8 / 32,
            "GGUF Q8_0: blocks of 32 weights in 34 bytes (32 int8 + one fp16 scale) = 8.5 bits per weight",
        ),
        WeightFormat(
            "q4_k_m",
            (1 - Q4_K_M_Q6_SHARE) * Q4_K_BPW + Q4_K_M_Q6_SHARE * Q6_K_BPW,
            "GGUF Q4_K_M: assumed 5/6 of quantized weights in Q4_K (4.5 bits per weight) and 1/6 in Q6_K "
            "(6.5625 bits per weight) = 4.84375 bits per weight; llama.cpp's real rule puts attn_v and "
            "ffn_down of about half the layers in Q6_K, so the true share varies by model",
        ),
    )
}

_WEIGHT_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp8_e4m3": "fp8",
    "e4m3": "fp8",
    "gptq-g128": "gptq",
    "gptq_g128": "gptq",
    "gptq-int4": "gptq",
    "awq-g128": "awq",
    "awq_g128": "awq",
    "bnb-nf4": "nf4",
    "nf4_dq": "nf4-dq",
    "nf4-double-quant": "nf4-dq",
    "bnb-nf4-dq": "nf4-dq",
    "gguf-q8_0": "q8_0",
    "q8-0": "q8_0",
    "gguf-q4_k_m": "q4_k_m",
    "q4-k-m": "q4_k_m",
}

KV_DTYPES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1}  # bytes per cached element
_KV_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def normalize_weights(name: str) -> str:
    """Canonical weight-format name ("GPTQ" -> "gptq"); raises BudgetError for unknown formats."""
    key = str(name).strip().lower()
    key = _WEIGHT_ALIASES.get(key, key)
    if key not in WEIGHT_FORMATS:
        raise BudgetError(f"unknown weight format {name!r}; choose one of: {', '.join(WEIGHT_FORMATS)}")
    return key


def normalize_kv_dtype(name: str) -> str:
    """Canonical KV cache dtype name; raises BudgetError for unknown dtypes."""
    key = str(name).strip().lower()
    key = _KV_ALIASES.get(key, key)
    if key not in KV_DTYPES:
        raise BudgetError(f"unknown KV cache dtype {name!r}; choose one of: {', '.join(KV_DTYPES)}")
    return key


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


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One "what if" beside the base case; GiB per GPU."""

    name: str
    weights_gib: float
    kv_per_seq_gib: float
    cache_budget_gib: float
    candidate: int


@dataclass(frozen=True)
class BudgetResult:
    """The budget, per GPU.  candidate is memory-only: a number to load-test, not a limit.

    cache_budget_gib is never negative (0 when weights + margin already exceed the GPU);
    shortfall_gib says how much memory is missing for even one sequence when it does not fit.
    The *_bytes fields are the exact integers the GiB figures come from.
    """

    inputs: BudgetInputs
    weights_gib: float
    margin_gib: float
    kv_per_seq_gib: float
    cache_budget_gib: float
    candidate: int
    fits: bool
    assumptions: tuple[str, ...]
    variants: tuple[Variant, ...]
    shortfall_gib: float = 0.0
    gpu_bytes: int = 0
    weights_bytes: int = 0
    margin_bytes: int = 0
    kv_per_seq_bytes: int = 0
    cache_budget_bytes: int = 0
    kv_bytes_per_token: int = 0  # all layers, one token, per GPU, before sliding windows and blocks
    kv_tokens_per_seq: int = 0  # tokens a full-attention layer holds after block rounding

    @property
    def gpu_gib(self) -> float:
        return self.inputs.gpu_gib

    @property
    def note(self) -> str:
        return CANDIDATE_NOTE

    @property
    def verdict(self) -> str:
        if self.fits:
            return (
                f"fits: memory-only candidate {self.candidate} sequences per deployment "
                f"(a number to load-test, not a limit)"
            )
        return (
            f"does not fit: weights + runtime margin + one sequence's KV cache need "
            f"{self.shortfall_gib:.2f} GiB more than the {self.gpu_gib:g} GiB GPU"
        )

    def predicted_used_gib(self, concurrency: float) -> float:
        """Per-GPU memory the budget predicts at `concurrency` full-length sequences (GiB)."""
        concurrency = max(0, concurrency)
        if self.kv_per_seq_bytes or self.weights_bytes:
            used_bytes = self.weights_bytes + self.margin_bytes + concurrency * self.kv_per_seq_bytes
            return used_bytes / GIB
        return self.weights_gib + self.margin_gib + concurrency * self.kv_per_seq_gib

    @property
    def ceiling_gib(self) -> float:
        """Weights + margin + the whole cache budget (GiB per GPU)."""
        return (self.weights_bytes + self.margin_bytes + self.cache_budget_bytes) / GIB


# --------------------------------------------------------------------------------------------
# The arithmetic
# --------------------------------------------------------------------------------------------


def _round_up(tokens: int, block_size: int) -> int:
    """Tokens rounded up to whole paged blocks."""
    return -(-tokens // block_size) * block_size


def _quant_shape_counts(inputs: BudgetInputs) -> tuple[int, int, bool]:
    """(output rows, matrices) of the quantized weights, and whether they were estimated."""
    rows, tensors = inputs.quant_rows, inputs.quant_tensors
    estimated = False
    if rows == 0:
        rows = math.ceil((inputs.params - inputs.unquantized_params) / 4096)
        estimated = True
    if tensors == 0:
        tensors = 7 * inputs.layers
        estimated = True
    return rows, tensors, estimated


def weights_bytes_total(inputs: BudgetInputs) -> int:
    """Bytes of all weights (every GPU together)."""
    fmt = WEIGHT_FORMATS[inputs.weights]
    if not fmt.quantized:
        return math.ceil(inputs.params * fmt.bits_per_weight / 8)
    quantized_params = inputs.params - inputs.unquantized_params
    rows, tensors, _ = _quant_shape_counts(inputs)
    quantized_bytes = quantized_params * fmt.bits_per_weight / 8
    scale_bytes = rows * fmt.bytes_per_row + tensors * fmt.bytes_per_tensor
    unquantized_bytes = inputs.unquantized_params * UNQUANTIZED_BYTES
    return math.ceil(quantized_bytes + scale_bytes + unquantized_bytes)


def kv_heads_per_gpu(inputs: BudgetInputs) -> int:
    return max(1, inputs.kv_heads // inputs.tp)


def kv_bytes_per_token_per_layer(inputs: BudgetInputs) -> int:
    """Bytes one token adds to one layer's cache on one GPU."""
    bytes_per_element = KV_DTYPES[inputs.kv_dtype]
    if inputs.mla_latent_dim:
        # MLA caches one compressed latent per token (no separate K and V), replicated on every TP rank.
        return inputs.mla_latent_dim * bytes_per_element
    return 2 * kv_heads_per_gpu(inputs) * inputs.head_dim * bytes_per_element


def kv_per_seq_bytes(inputs: BudgetInputs) -> int:
    """Bytes of KV cache one max_seq-long sequence holds on one GPU, in whole blocks."""
    per_token_per_layer = kv_bytes_per_token_per_layer(inputs)
    full_layers = inputs.layers - inputs.sliding_layers
    full_tokens = _round_up(inputs.max_seq, inputs.block_size)
    window_tokens = _round_up(min(inputs.max_seq, inputs.sliding_window), inputs.block_size) if inputs.sliding_layers else 0
    return per_token_per_layer * (full_layers * full_tokens + inputs.sliding_layers * window_tokens)


def _core(inputs: BudgetInputs) -> dict[str, Any]:
    """The teaching script, in bytes per GPU."""
    gpu_bytes = math.floor(inputs.gpu_gib * GIB)
    margin_bytes = math.ceil(inputs.margin_gib * GIB)
    weights_bytes = math.ceil(weights_bytes_total(inputs) / inputs.tp)
    cache_budget_bytes = gpu_bytes - weights_bytes - margin_bytes
    seq_bytes = kv_per_seq_bytes(inputs)
    candidate = cache_budget_bytes // seq_bytes if cache_budget_bytes > 0 else 0
    shortfall_bytes = max(0, weights_bytes + margin_bytes + seq_bytes - gpu_bytes) if candidate == 0 else 0
    return {
        "gpu_bytes": gpu_bytes,
        "margin_bytes": margin_bytes,
        "weights_bytes": weights_bytes,
        "cache_budget_bytes": max(0, cache_budget_bytes),
        "kv_per_seq_bytes": seq_bytes,
        "candidate": int(candidate),
        "fits": candidate >= 1,
        "shortfall_bytes": shortfall_bytes,
    }


def _variant_inputs(inputs: BudgetInputs) -> list[tuple[str, BudgetInputs]]:
    return [
        (f"context x2 (max_seq {inputs.max_seq * 2})", inputs.replace(max_seq=inputs.max_seq * 2)),
        ("4-bit weights (GPTQ/AWQ g128, scale+zero included)", inputs.replace(weights="gptq")),
        ("fp8 KV cache", inputs.replace(kv_dtype="fp8")),
    ]


def _fmt_count(n: float) -> str:
    return f"{n:,.0f}"


def _assumptions(inputs: BudgetInputs) -> tuple[str, ...]:
    fmt = WEIGHT_FORMATS[inputs.weights]
    out = [
        f"runtime margin {inputs.margin_gib:.2f} GiB per GPU is an allowance, not measured "
        "(CUDA context, CUDA graphs, allocator and communication workspaces)",
        "activation peak not measured: prefill activations, logits and sampler buffers are assumed "
        "to fit inside the runtime margin",
        "fragmentation not measured: allocator fragmentation is assumed to fit inside the runtime margin; "
        f"the KV cache is counted in whole blocks of {inputs.block_size} tokens",
        "scheduler limits not applied: max batch size (max_num_seqs), max batched tokens and chunked "
        "prefill can hold concurrency below the candidate",
        f"every sequence is assumed to hold max_seq={inputs.max_seq} tokens (prompt + output) at once; "
        "shorter sequences leave room for more",
        f"weights {fmt.description}",
    ]
    if fmt.quantized:
        if inputs.unquantized_params == 0:
            out.append(
                f"no model config: all {_fmt_count(inputs.params)} params treated as quantized ({fmt.name}); "
                "real checkpoints keep embeddings and norms in bf16, so real weights are somewhat larger"
            )
        else:
            quantized = inputs.params - inputs.unquantized_params
            out.append(
                f"{_fmt_count(quantized)} params of linear layers quantized ({fmt.name}); "
                f"{_fmt_count(inputs.unquantized_params)} params (embeddings, untied lm_head, norms, biases, "
                "MoE routers) kept in bf16"
            )
        if fmt.bytes_per_row or fmt.bytes_per_tensor:
            rows, tensors, estimated = _quant_shape_counts(inputs)
            if estimated:
                out.append(
                    f"{fmt.name} scale count estimated without a config: rows of 4096 weights "
                    f"({_fmt_count(rows)} rows), 7 matrices per layer ({tensors} matrices)"
                )
    out.append(
        f"KV cache {inputs.kv_dtype}: {KV_DTYPES[inputs.kv_dtype]} "
        f"{'byte' if KV_DTYPES[inputs.kv_dtype] == 1 else 'bytes'} per element"
        + ("; fp8 scale factors ignored" if inputs.kv_dtype == "fp8" else "")
    )
    if inputs.tp > 1:
        out.append(
            f"tensor parallel tp={inputs.tp}: weights split evenly over {inputs.tp} GPUs and all figures are "
            "per GPU; replicated embeddings/norms and communication buffers not counted beyond the margin"
        )
        if not inputs.mla_latent_dim:
            per_gpu = kv_heads_per_gpu(inputs)
            if inputs.kv_heads < inputs.tp:
                out.append(
                    f"{inputs.kv_heads} KV heads < tp={inputs.tp}: each GPU holds a replica of 1 KV head"
                )
            elif inputs.kv_heads % inputs.tp:
                out.append(
                    f"{inputs.kv_heads} KV heads do not divide by tp={inputs.tp}: counted {per_gpu} per GPU "
                    "(most engines refuse this split)"
                )
    if inputs.mla_latent_dim:
        out.append(
            f"MLA: one latent of {inputs.mla_latent_dim} elements per token per layer (no separate K and V), "
            "replicated on every tensor-parallel GPU"
        )
    if inputs.sliding_layers:
        out.append(
            f"{inputs.sliding_layers} of {inputs.layers} layers use a {inputs.sliding_window}-token sliding window "
            f"and keep min(max_seq, {inputs.sliding_window}) tokens; assumes the engine frees blocks outside the "
            "window (engines that allocate full context for every layer need more)"
        )
    if inputs.max_position and inputs.max_seq > inputs.max_position:
        out.append(
            f"max_seq={inputs.max_seq} exceeds the model's max_position_embeddings={inputs.max_position}"
        )
    out.extend(inputs.notes)
    out.append("GiB = 2**30 bytes")
    return tuple(out)


def compute_budget(inputs: BudgetInputs) -> BudgetResult:
    """The memory budget per GPU, with variants and assumptions."""
    if not isinstance(inputs, BudgetInputs):
        raise BudgetError(f"compute_budget needs BudgetInputs, got {type(inputs).__name__}")
    base = _core(inputs)
    variants = []
    for name, variant_inputs in _variant_inputs(inputs):
        v = _core(variant_inputs)
        variants.append(
            Variant(
                name=name,
                weights_gib=v["weights_bytes"] / GIB,
                kv_per_seq_gib=v["kv_per_seq_bytes"] / GIB,
                cache_budget_gib=v["cache_budget_bytes"] / GIB,
                candidate=v["candidate"],
            )
        )
    return BudgetResult(
        inputs=inputs,
        weights_gib=base["weights_bytes"] / GIB,
        margin_gib=base["margin_bytes"] / GIB,
        kv_per_seq_gib=base["kv_per_seq_bytes"] / GIB,
        cache_budget_gib=base["cache_budget_bytes"] / GIB,
        candidate=base["candidate"],
        fits=base["fits"],
        assumptions=_assumptions(inputs),
        variants=tuple(variants),
        shortfall_gib=base["shortfall_bytes"] / GIB,
        gpu_bytes=base["gpu_bytes"],
        weights_bytes=base["weights_bytes"],
        margin_bytes=base["margin_bytes"],
        kv_per_seq_bytes=base["kv_per_seq_bytes"],
        cache_budget_bytes=base["cache_budget_bytes"],
        kv_bytes_per_token=kv_bytes_per_token_per_layer(inputs) * inputs.layers,
        kv_tokens_per_seq=_round_up(inputs.max_seq, inputs.block_size),
    )


def teaching_case() -> BudgetResult:
    """7e9 params in bf16 on a 24 GiB GPU, 3 GiB margin, Llama-style KV at 4096 tokens -> 15 sequences."""
    return compute_budget(BudgetInputs())


# --------------------------------------------------------------------------------------------
# Hugging Face config.json -> inputs
# --------------------------------------------------------------------------------------------

SUPPORTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
)

# Gemma 3 multimodal configs leave text_config keys out when they equal the library defaults.
_GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "sliding_window": 4096,
    "tie_word_embeddings": True,
}


class _Counter:
    """Tallies parameters: quantizable linear matrices vs parameters kept in bf16."""

    def __init__(self) -> None:
        self.quantized = 0
        self.unquantized = 0
        self.rows = 0
        self.tensors = 0

    def linear(self, in_features: int, out_features: int, count: int = 1) -> None:
        self.quantized += in_features * out_features * count
        self.rows += out_features * count
        self.tensors += count

    def keep(self, n: int) -> None:
        self.unquantized += n

    @property
    def total(self) -> int:
        return self.quantized + self.unquantized


def _need(cfg: Mapping[str, Any], key: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BudgetError(f"config field {key!r} must be a positive whole number, got {value!r}")
    return value


def _opt_int(cfg: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = cfg.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BudgetError(f"config field {key!r} must be a whole number, got {value!r}")
    return value


def _count_sliding_layers(cfg: Mapping[str, Any], model_type: str, layers: int) -> tuple[int, int]:
    """(sliding_window, sliding_layers) from the config's sliding-window description."""
    layer_types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != layers:
            raise BudgetError(f"config layer_types has {len(layer_types)} entries for {layers} layers")
        sliding = sum(1 for t in layer_types if t == "sliding_attention")
        if sliding and not (isinstance(window, int) and window > 0):
            raise BudgetError("config layer_types has sliding layers but no sliding_window")
        return (cast(int, window) if sliding else 0), sliding
    if not (isinstance(window, int) and not isinstance(window, bool) and window > 0):
        return 0, 0
    if model_type == "gemma2":
        return window, (layers + 1) // 2  # layers 0, 2, 4, ... are local
    if model_type in ("gemma3", "gemma3_text"):
        pattern = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6))
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
            raise BudgetError(f"config sliding_window_pattern must be a positive whole number, got {pattern!r}")
        return window, layers - layers // pattern  # every pattern-th layer is global
    if model_type in ("mistral", "mixtral"):
        if cfg.get("use_sliding_window", True) is False:
            return 0, 0
        return window, layers
    if model_type in ("qwen2", "qwen3"):
        if not cfg.get("use_sliding_window", False):
            return 0, 0
        first = _opt_int(cfg, "max_window_layers", layers) or 0
        return window, max(0, layers - min(first, layers))
    return 0, 0


def _quant_from_config(cfg: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """Weight format named by a config's quantization_config, with a note."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping):
        return None, None
    method = str(qc.get("quant_method", "")).lower()
    bits = qc.get("bits")
    if method == "fp8":
        note = "config declares fp8 weights; modelled with per-tensor scales"
        if qc.get("weight_block_size"):
            note += " (the checkpoint uses block scales: about +0.002 bits per weight for 128x128 blocks)"
        return "fp8", note
    if method in ("gptq", "awq") and bits == 4:
        return method, f"config declares {method} 4-bit weights; modelled with group size 128"
    if method == "bitsandbytes" and qc.get("load_in_4bit"):
        dq = bool(qc.get("bnb_4bit_use_double_quant"))
        return ("nf4-dq" if dq else "nf4"), "config declares bitsandbytes 4-bit weights (NF4 assumed)"
    return None, f"config quantization_config {method or '?'} not modelled; weights format from flags (default bf16)"


def _model_name(config: Mapping[str, Any], model_type: str) -> str:
    name = config.get("_name_or_path")
    if isinstance(name, str) and name:
        return name
    arch = config.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str):
        return arch[0]
    return model_type


def inputs_from_hf_config(config: Mapping[str, Any], **overrides: Any) -> BudgetInputs:
    """BudgetInputs for a Hugging Face config.json (as a dict).  Keyword overrides win over the config.

    Derives the exact parameter count, the bf16-kept share (embeddings, untied lm_head, norms, biases,
    routers), the KV geometry (head_dim as given, MLA latent, sliding-window layers).
    """
    if not isinstance(config, Mapping):
        raise BudgetError("a model config must be a JSON object")
    unknown = set(overrides) - {f.name for f in dataclasses.fields(BudgetInputs)}
    if unknown:
        raise BudgetError(f"unknown budget override(s): {', '.join(sorted(unknown))}")
    notes: list[str] = []
    cfg: Mapping[str, Any] = config
    model_type = str(config.get("model_type", "")).lower()
    text_cfg = config.get("text_config")
    if isinstance(text_cfg, Mapping):
        inner_type = str(text_cfg.get("model_type", "")).lower()
        if not inner_type and model_type == "gemma3":
            inner_type = "gemma3_text"
        notes.append("multimodal config: text_config used; vision encoder and projector weights not counted")
        cfg, model_type = text_cfg, inner_type
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise BudgetError(
            f"model_type {model_type or '(missing)'!r} is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)} "
            "(or give --params, --layers, --kv-heads, --head-dim by hand)"
        )
    if model_type in ("gemma3", "gemma3_text"):
        cfg = {**_GEMMA3_TEXT_DEFAULTS, **cfg}

    vocab = _need(cfg, "vocab_size")
    hidden = _need(cfg, "hidden_size")
    layers = _need(cfg, "num_hidden_layers")
    heads = _need(cfg, "num_attention_heads")
    kv_heads = _opt_int(cfg, "num_key_value_heads", None) or heads
    head_dim = _opt_int(cfg, "head_dim", None) or hidden // heads
    gemma_family = model_type.startswith("gemma")
    tied = bool(cfg.get("tie_word_embeddings", gemma_family))

    c = _Counter()
    c.keep(vocab * hidden)  # token embeddings
    if not tied:
        c.keep(vocab * hidden)  # lm_head (kept in bf16 by every quantized format modelled here)
    c.keep(hidden)  # final norm

    norms_per_layer = 4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2
    mla_latent = 0

    if model_type in ("deepseek_v2", "deepseek_v3"):
        q_lora = _opt_int(cfg, "q_lora_rank", None)
        kv_lora = _need(cfg, "kv_lora_rank")
        nope = _need(cfg, "qk_nope_head_dim")
        rope = _need(cfg, "qk_rope_head_dim")
        v_dim = _need(cfg, "v_head_dim")
        intermediate = _need(cfg, "intermediate_size")
        experts = _opt_int(cfg, "n_routed_experts", 0) or 0
        shared = _opt_int(cfg, "n_shared_experts", 0) or 0
        moe_inter = _opt_int(cfg, "moe_intermediate_size", 0) or 0
        first_dense = _opt_int(cfg, "first_k_dense_replace", 0) or 0
        moe_freq = _opt_int(cfg, "moe_layer_freq", 1) or 1
        score_bias = str(cfg.get("topk_method", "")) == "noaux_tc"
        mla_latent = kv_lora + rope
        for i in range(layers):
            if q_lora:
                c.linear(hidden, q_lora)  # q_a_proj
                c.keep(q_lora)  # q_a_layernorm
                c.linear(q_lora, heads * (nope + rope))  # q_b_proj
            else:
                c.linear(hidden, heads * (nope + rope))  # q_proj
            c.linear(hidden, kv_lora + rope)  # kv_a_proj_with_mqa
            c.keep(kv_lora)  # kv_a_layernorm
            c.linear(kv_lora, heads * (nope + v_dim))  # kv_b_proj
            c.linear(heads * v_dim, hidden)  # o_proj
            c.keep(norms_per_layer * hidden)
            if experts and i >= first_dense and i % moe_freq == 0:
                c.linear(hidden, moe_inter, 2 * experts)  # routed experts: gate_proj, up_proj
                c.linear(moe_inter, hidden, experts)  # routed experts: down_proj
                if shared:
                    c.linear(hidden, moe_inter * shared, 2)  # shared experts as one MLP
                    c.linear(moe_inter * shared, hidden)
                c.keep(experts * hidden)  # router
                if score_bias:
                    c.keep(experts)  # e_score_correction_bias
            else:
                c.linear(hidden, intermediate, 2)
                c.linear(intermediate, hidden)
        mtp = _opt_int(cfg, "num_nextn_predict_layers", 0) or 0
        if mtp:
            notes.append(
                f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) not counted in params"
            )
    else:
        intermediate = _need(cfg, "intermediate_size")
        q_out = heads * head_dim
        kv_out = kv_heads * head_dim
        qkv_bias = model_type == "qwen2" or bool(cfg.get("attention_bias", False))
        qk_norm = model_type in ("qwen3", "gemma3", "gemma3_text")
        experts = _need(cfg, "num_local_experts") if model_type == "mixtral" else 0
        mlp_bias = bool(cfg.get("mlp_bias", False))
        for _ in range(layers):
            c.linear(hidden, q_out)  # q_proj
            c.linear(hidden, kv_out, 2)  # k_proj, v_proj
            c.linear(q_out, hidden)  # o_proj
            if qkv_bias:
                c.keep(q_out + 2 * kv_out)
                if model_type != "qwen2":
                    c.keep(hidden)  # o_proj bias when attention_bias is set
            if qk_norm:
                c.keep(2 * head_dim)  # q_norm, k_norm
            c.keep(norms_per_layer * hidden)
            mlp_count = max(1, experts)
            c.linear(hidden, intermediate, 2 * mlp_count)  # gate_proj, up_proj (w1, w3)
            c.linear(intermediate, hidden, mlp_count)  # down_proj (w2)
            if mlp_bias:
                c.keep(mlp_count * (2 * intermediate + hidden))
            if experts:
                c.keep(experts * hidden)  # router

    window, sliding_layers = _count_sliding_layers(cfg, model_type, layers)
    max_position = _opt_int(cfg, "max_position_embeddings", 0) or 0

    fields: dict[str, Any] = {
        "params": c.total,
        "unquantized_params": c.unquantized,
        "quant_rows": c.rows,
        "quant_tensors": c.tensors,
        "layers": layers,
        "kv_heads": 1 if mla_latent else kv_heads,
        "head_dim": mla_latent if mla_latent else head_dim,
        "mla_latent_dim": mla_latent,
        "sliding_window": window,
        "sliding_layers": sliding_layers,
        "max_position": max_position,
        "model": _model_name(config, model_type),
    }
    quant_format, quant_note = _quant_from_config(config if "quantization_config" in config else cfg)
    if quant_format and "weights" not in overrides:
        fields["weights"] = quant_format
    if quant_note and not ("weights" in overrides and quant_format):
        notes.append(quant_note)
    if "quantization_config" not in config and "torch_dtype" in config and config["torch_dtype"] != "bfloat16":
        notes.append(f"config torch_dtype is {config['torch_dtype']}; weights counted as served in the chosen format")
    fields["notes"] = tuple(notes) + tuple(overrides.pop("notes", ()))
    fields.update(overrides)
    return BudgetInputs(**fields)


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------

_RESULT_FLOATS = ("weights_gib", "margin_gib", "kv_per_seq_gib", "cache_budget_gib", "shortfall_gib")
_RESULT_EXACT = (
    "candidate",
    "fits",
    "gpu_bytes",
    "weights_bytes",
    "margin_bytes",
    "kv_per_seq_bytes",
    "cache_budget_bytes",
    "kv_bytes_per_token",
    "kv_tokens_per_seq",
)
_RESULT_REQUIRED = ("weights_gib", "kv_per_seq_gib", "cache_budget_gib", "candidate", "fits")


def inputs_to_dict(inputs: BudgetInputs) -> dict[str, Any]:
    d = dataclasses.asdict(inputs)
    d["notes"] = list(inputs.notes)
    return d


def inputs_from_dict(d: Mapping[str, Any]) -> BudgetInputs:
    if not isinstance(d, Mapping):
        raise BudgetError("budget 'parameters' must be a JSON object")
    known = {f.name for f in dataclasses.fields(BudgetInputs)}
    unknown = set(d) - known
    if unknown:
        raise BudgetError(f"unknown budget parameter(s): {', '.join(sorted(unknown))}")
    values = dict(d)
    if "notes" in values:
        if not isinstance(values["notes"], list):
            raise BudgetError("budget parameter 'notes' must be a list of strings")
        values["notes"] = tuple(values["notes"])
    # JSON has one number type: accept 4096.0 for whole-number fields, nothing fractional.
    for name in _INT_FIELDS_MIN:
        v = values.get(name)
        if isinstance(v, float) and v.is_integer():
            values[name] = int(v)
    return BudgetInputs(**values)


def budget_to_dict(result: BudgetResult) -> dict[str, Any]:
    """The budget as JSON-ready data: schema, parameters (inputs), results, variants, assumptions, note."""
    results = {
        "weights_gib": result.weights_gib,
        "margin_gib": result.margin_gib,
        "kv_per_seq_gib": result.kv_per_seq_gib,
        "cache_budget_gib": result.cache_budget_gib,
        "candidate": result.candidate,
        "fits": result.fits,
        "shortfall_gib": result.shortfall_gib,
        "gpu_bytes": result.gpu_bytes,
        "weights_bytes": result.weights_bytes,
        "margin_bytes": result.margin_bytes,
        "kv_per_seq_bytes": result.kv_per_seq_bytes,
        "cache_budget_bytes": result.cache_budget_bytes,
        "kv_bytes_per_token": result.kv_bytes_per_token,
        "kv_tokens_per_seq": result.kv_tokens_per_seq,
        "verdict": result.verdict,
    }
    return {
        "schema": SCHEMA,
        "parameters": inputs_to_dict(result.inputs),
        "results": results,
        "variants": [dataclasses.asdict(v) for v in result.variants],
        "assumptions": list(result.assumptions),
        "assumptions_status": "not measured",
        "note": CANDIDATE_NOTE,
    }


def budget_to_json(result: BudgetResult, indent: int | None = 2) -> str:
    return json.dumps(budget_to_dict(result), indent=indent)


def _disagreements(saved: Mapping[str, Any], fresh: Mapping[str, Any], where: str, floats: tuple[str, ...], exact: tuple[str, ...]) -> list[str]:
    out = []
    for key in floats:
        if key not in saved:
            continue
        s = saved[key]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            out.append(f"{where}{key} saved as {s!r}, not a number")
        elif abs(s - fresh[key]) > VERIFY_TOLERANCE_GIB:
            out.append(f"{where}{key} saved {s:.4f}, recomputed {fresh[key]:.4f}")
    for key in exact:
        if key in saved and (saved[key] != fresh[key] or isinstance(saved[key], bool) != isinstance(fresh[key], bool)):
            out.append(f"{where}{key} saved {saved[key]!r}, recomputed {fresh[key]!r}")
    return out


def budget_from_dict(d: Mapping[str, Any]) -> BudgetResult:
    """Recompute a saved budget from its parameters; raise BudgetError if its saved results disagree.

    Accepts the file shape {"schema": ..., "parameters": ..., "results": ..., ...} and the budget
    record shape (the same keys plus "type": "budget"). Numbers too large for a float (``10**400``) are a
    BudgetError too, never an OverflowError.
    """
    try:
        return _budget_from_dict(d)
    except OverflowError:
        raise BudgetError("a number in the budget is too large to compute with") from None


def _budget_from_dict(d: Mapping[str, Any]) -> BudgetResult:
    if not isinstance(d, Mapping):
        raise BudgetError("a budget must be a JSON object")
    if d.get("type") == "budget" and "schema" not in d and isinstance(d.get("budget"), Mapping):
        d = {**d["budget"], "type": "budget"}  # also the nested record shape {"type": "budget", "budget": {...}}
    if "type" in d and d["type"] != "budget":
        raise BudgetError(f"not a budget record: type is {d['type']!r}")
    if d.get("schema") != SCHEMA:
        raise BudgetError(f"unsupported budget schema {d.get('schema')!r}; expected {SCHEMA!r}")
    if "parameters" not in d:
        raise BudgetError("budget has no 'parameters' to recompute from")
    result = compute_budget(inputs_from_dict(d["parameters"]))
    saved = d.get("results")
    if not isinstance(saved, Mapping):
        raise BudgetError("budget has no 'results' object to verify")
    missing = [k for k in _RESULT_REQUIRED if k not in saved]
    if missing:
        raise BudgetError(f"budget results lack {', '.join(missing)}")
    fresh = budget_to_dict(result)
    problems = _disagreements(saved, fresh["results"], "", _RESULT_FLOATS, _RESULT_EXACT)
    saved_variants = d.get("variants")
    if saved_variants is not None:
        if not isinstance(saved_variants, list) or not all(isinstance(v, Mapping) for v in saved_variants):
            raise BudgetError("budget 'variants' must be a list of objects")
        fresh_variants = {v["name"]: v for v in fresh["variants"]}
        saved_names = [v.get("name") for v in saved_variants]
        if sorted(map(str, saved_names)) != sorted(fresh_variants):
            problems.append(f"variants saved {saved_names!r}, recomputed {list(fresh_variants)!r}")
        else:
            for v in saved_variants:
                problems += _disagreements(
                    v,
                    fresh_variants[v["name"]],
                    f"variant {v['name']!r}: ",
                    ("weights_gib", "kv_per_seq_gib", "cache_budget_gib"),
                    ("candidate",),
                )
    if problems:
        raise BudgetError(
            "saved budget disagrees with recomputation from its parameters: " + "; ".join(problems)
        )
    return result


def load_budget(path: str | Path) -> BudgetResult:
    """Read a saved budget JSON file, recompute it and verify it (BudgetError when it disagrees)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetError(f"cannot read budget file {str(path)!r}: {exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BudgetError(f"budget file {str(path)!r} is not valid JSON: {exc}") from None
    try:
        return budget_from_dict(data)
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from None


def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face config.json (BudgetError when unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetError(f"cannot read model config {str(path)!r}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise BudgetError(f"model config {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BudgetError(f"model config {str(path)!r} must be a JSON object")
    return data
