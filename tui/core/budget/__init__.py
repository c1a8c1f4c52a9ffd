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

The package, along those seams (each module imports the ones it needs by module path, never this ``__init__``):

- ``vocab``: GiB, the schema, the candidate's note, :class:`BudgetError`;
- ``formats``: weight formats and KV cache element types;
- ``inputs``: :class:`BudgetInputs` (validated); ``results``: :class:`BudgetResult`, :class:`Variant`;
- ``arithmetic``: :func:`compute_budget`, its assumptions and variants, :func:`teaching_case`;
- ``hf_config``: :func:`inputs_from_hf_config`, the per-architecture readers of an already parsed config.json;
- ``serialize``: the budget as JSON-ready data and back, recomputed and verified (:func:`budget_from_dict`).

No file is read here: ``tui.sources.budget_files`` reads a saved budget or a config.json and hands the parsed
data over. This ``__init__`` re-exports the public names for callers outside the package.
"""

from __future__ import annotations

from tui.core.budget.arithmetic import (
    compute_budget,
    kv_bytes_per_token_per_layer,
    kv_heads_per_gpu,
    kv_per_seq_bytes,
    teaching_case,
    weights_bytes_total,
)
from tui.core.budget.formats import (
    KV_DTYPES,
    Q4_K_BPW,
    Q4_K_M_Q6_SHARE,
    Q6_K_BPW,
    UNQUANTIZED_BYTES,
    WEIGHT_FORMATS,
    WeightFormat,
    normalize_kv_dtype,
    normalize_weights,
)
from tui.core.budget.hf_config import (
    SUPPORTED_MODEL_TYPES,
    inputs_from_hf_config,
)
from tui.core.budget.inputs import (
    MAX_GIB,
    MAX_PARAMS,
    BudgetInputs,
)
from tui.core.budget.results import (
    BudgetResult,
    Variant,
)
from tui.core.budget.serialize import (
    budget_from_dict,
    budget_to_dict,
    budget_to_json,
    inputs_from_dict,
    inputs_to_dict,
)
from tui.core.budget.vocab import (
    CANDIDATE_NOTE,
    GIB,
    SCHEMA,
    VERIFY_TOLERANCE_GIB,
    BudgetError,
)

__all__ = [
    "BudgetError",
    "BudgetInputs",
    "BudgetResult",
    "CANDIDATE_NOTE",
    "GIB",
    "KV_DTYPES",
    "MAX_GIB",
    "MAX_PARAMS",
    "Q4_K_BPW",
    "Q4_K_M_Q6_SHARE",
    "Q6_K_BPW",
    "SCHEMA",
    "SUPPORTED_MODEL_TYPES",
    "UNQUANTIZED_BYTES",
    "VERIFY_TOLERANCE_GIB",
    "Variant",
    "WEIGHT_FORMATS",
    "WeightFormat",
    "budget_from_dict",
    "budget_to_dict",
    "budget_to_json",
    "compute_budget",
    "inputs_from_dict",
    "inputs_from_hf_config",
    "inputs_to_dict",
    "kv_bytes_per_token_per_layer",
    "kv_heads_per_gpu",
    "kv_per_seq_bytes",
    "normalize_kv_dtype",
    "normalize_weights",
    "teaching_case",
    "weights_bytes_total",
]
