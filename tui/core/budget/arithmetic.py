"""The budget arithmetic (the teaching script, with names, in whole bytes), its stated assumptions and the
variants; :func:`compute_budget` and :func:`teaching_case`.
"""

from __future__ import annotations

import math
from typing import Any

from tui.core.budget.formats import KV_DTYPES, UNQUANTIZED_BYTES, WEIGHT_FORMATS
from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.results import BudgetResult, Variant
from tui.core.budget.vocab import GIB, BudgetError

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
    seq_bytes = kv_per_seq_bytes(inputs)
    if inputs.kv_space_bytes:
        # the KV space was given (flag or the engine's own figure): it is the cache budget as it stands
        cache_budget_bytes = inputs.kv_space_bytes
        candidate = cache_budget_bytes // seq_bytes
        shortfall_bytes = max(0, seq_bytes - cache_budget_bytes) if candidate == 0 else 0
    else:
        cache_budget_bytes = gpu_bytes - weights_bytes - margin_bytes
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
    out = []
    if inputs.kv_space_bytes:
        out.append(f"KV cache space given as {inputs.kv_space_bytes:,} bytes ({inputs.kv_space_bytes / GIB:.3f} GiB): "
                   "the cache budget is that space; the GPU size, weights and runtime margin are not subtracted")
    if inputs.kv_space_bytes:  # no margin enters the budget: none is stated (a figure nobody gave, issue 22)
        out += ["activation peak and fragmentation not measured: they are assumed to fit outside the KV space; "
                f"the KV cache is counted in whole blocks of {inputs.block_size} tokens"]
    else:
        out += [
            f"runtime margin {inputs.margin_gib:.2f} GiB per GPU is an allowance, not measured "
            "(CUDA context, CUDA graphs, allocator and communication workspaces)",
            "activation peak not measured: prefill activations, logits and sampler buffers are assumed "
            "to fit inside the runtime margin",
            "fragmentation not measured: allocator fragmentation is assumed to fit inside the runtime margin; "
            f"the KV cache is counted in whole blocks of {inputs.block_size} tokens",
        ]
    out += [
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
