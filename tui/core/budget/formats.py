"""Weight formats (bytes per parameter, overheads included) and KV cache element types, with their aliases.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.budget.vocab import BudgetError

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
