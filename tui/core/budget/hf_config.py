"""Hugging Face config.json (already parsed into a dict) -> :class:`BudgetInputs`: the per-architecture readers
(Llama, Mistral, Qwen, Gemma 1-3, Mixtral, DeepSeek MLA) and the quantization formats a config declares, each with
its stated assumptions. Reading the file is ``tui.sources.budget_files``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.vocab import BudgetError

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


#: the largest value a config's whole numbers may take (checked before any loop or product uses them): a config of
#: 10**30 layers is refused at once instead of counted layer by layer
MAX_CONFIG_LAYERS = 10_000
MAX_CONFIG_INT = 1 << 31
_MAXIMA = {"num_hidden_layers": MAX_CONFIG_LAYERS, "first_k_dense_replace": MAX_CONFIG_LAYERS,
           "max_window_layers": MAX_CONFIG_LAYERS, "num_nextn_predict_layers": MAX_CONFIG_LAYERS}


def _in_range(key: str, value: int) -> int:
    top = _MAXIMA.get(key, MAX_CONFIG_INT)
    if value > top:
        raise BudgetError(f"config field {key!r} must be at most {top:,}, got {value!r:.40}")
    return value


def _need(cfg: Mapping[str, Any], key: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BudgetError(f"config field {key!r} must be a positive whole number, got {value!r:.40}")
    return _in_range(key, value)


def _opt_int(cfg: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = cfg.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BudgetError(f"config field {key!r} must be a whole number, got {value!r:.40}")
    return _in_range(key, value)


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
        if isinstance(pattern, bool) or not isinstance(pattern, int) or not 1 <= pattern <= MAX_CONFIG_INT:
            raise BudgetError(f"config sliding_window_pattern must be a positive whole number, got {pattern!r:.40}")
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
