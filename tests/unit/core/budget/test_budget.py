"""Memory budget engine: the teaching case, model configs, formats, JSON, CLI and a property test.

GiB = 2**30 bytes throughout.
"""

from __future__ import annotations

import json
import math
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import TESTS
from tui.cli import main as cli_main
from tui.cli.budget import format_budget_text
from tui.cli.budgetflags import BudgetFlags, budget_from_args
from tui.cli.declare import parse as parse_settings
from tui.core.budget import (
    CANDIDATE_NOTE,
    GIB,
    KV_DTYPES,
    SCHEMA,
    WEIGHT_FORMATS,
    BudgetError,
    BudgetInputs,
    BudgetResult,
    Variant,
    budget_from_dict,
    budget_to_dict,
    compute_budget,
    inputs_from_hf_config,
    teaching_case,
)
from tui.sources.budget_files import load_budget

CONFIGS = TESTS / "configs"


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def run_cli(argv: list[str]) -> int:
    return cli_main(["budget", *argv])


# ---------------------------------------------------------------- the teaching case


def test_teaching_case_reproduces_exactly():
    r = teaching_case()
    assert r.inputs == BudgetInputs()
    assert r.weights_bytes == 7_000_000_000 * 2
    assert round(r.weights_gib, 2) == 13.04
    assert r.margin_gib == 3.0
    # 2 (K, V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes x 4096 tokens
    assert r.kv_per_seq_bytes == 2 * 32 * 8 * 128 * 2 * 4096 == GIB // 2
    assert r.kv_per_seq_gib == 0.5
    assert round(r.cache_budget_gib, 2) == 7.96
    assert r.cache_budget_gib == pytest.approx(24 - 14e9 / GIB - 3)
    assert r.candidate == 15 == math.floor(r.cache_budget_gib / 0.5)
    assert r.fits


def test_teaching_case_at_8192_tokens():
    r = compute_budget(BudgetInputs(max_seq=8192))
    assert r.kv_per_seq_gib == 1.0
    assert r.candidate == 7


def test_teaching_case_variants():
    variants = {v.name: v for v in teaching_case().variants}
    assert len(variants) == 3
    ctx = variants["context x2 (max_seq 8192)"]
    assert (ctx.kv_per_seq_gib, ctx.candidate) == (1.0, 7)
    assert round(ctx.weights_gib, 2) == 13.04 and round(ctx.cache_budget_gib, 2) == 7.96
    q4 = next(v for k, v in variants.items() if k.startswith("4-bit weights"))
    # 7e9 x (4 + (16 + 4)/128) bits / 8 = 3,636,718,750 bytes: the scale and zero are paid for
    assert q4.weights_gib == 3_636_718_750 / GIB
    assert q4.weights_gib > 7e9 * 0.5 / GIB  # not "ideal" 4-bit
    assert q4.candidate == 35
    fp8 = variants["fp8 KV cache"]
    assert (fp8.kv_per_seq_gib, fp8.candidate) == (0.25, 31)


# ---------------------------------------------------------------- public parameter counts


@pytest.mark.parametrize(
    "name, published",
    [
        ("llama-3-8b", 8_030_261_248),
        ("mistral-7b-v0.1", 7_241_732_096),
        ("qwen2-7b", 7_615_616_512),
        ("mixtral-8x7b", 46_702_792_704),
    ],
)
def test_public_parameter_counts_exact(name, published):
    assert inputs_from_hf_config(cfg(name)).params == published


@pytest.mark.parametrize(
    "name, derived, published, rel",
    [
        # Published figures below are the rounded ones on the model cards; the derived value is
        # the structure count (asserted exactly so a change in the counting shows up).
        ("qwen3-8b", 8_190_735_360, 8.2e9, 0.005),  # "8.2B", non-embedding 6.95B (checked below)
        ("gemma-2-9b", 9_241_705_984, 9.24e9, 0.001),  # "9.24B"
        ("gemma-2b", 2_506_172_416, 2.51e9, 0.002),  # Gemma 1 2B: "2.51B"
        ("gemma-3-270m", 268_098_176, 268e6, 0.001),  # "268M" (170M embedding + 100M transformer)
        ("deepseek-v3", 671_026_419_200, 671e9, 0.001),  # "671B", main model without the MTP module
        ("deepseek-v2-lite", 15_706_484_224, 15.7e9, 0.001),  # "15.7B", q_lora_rank null
    ],
)
def test_structure_counts_against_published_rounded_figures(name, derived, published, rel):
    params = inputs_from_hf_config(cfg(name)).params
    assert params == derived
    assert params == pytest.approx(published, rel=rel)


def test_qwen3_non_embedding_count_and_qk_norm():
    i = inputs_from_hf_config(cfg("qwen3-8b"))
    embeddings = 2 * 151936 * 4096  # untied embed_tokens + lm_head
    assert i.params - embeddings == pytest.approx(6.95e9, rel=0.001)
    # q_norm + k_norm (128 each) per layer: the difference between Qwen3 and a plain Llama count
    no_qk = {**cfg("qwen3-8b"), "model_type": "llama"}
    assert i.params - inputs_from_hf_config(no_qk).params == 36 * 2 * 128


def test_qwen2_qkv_bias_is_counted():
    qwen = inputs_from_hf_config(cfg("qwen2-7b"))
    as_llama = inputs_from_hf_config({**cfg("qwen2-7b"), "model_type": "llama"})
    assert qwen.params - as_llama.params == 28 * (3584 + 2 * 512)


def test_head_dim_from_config_is_used_not_hidden_over_heads():
    gemma2 = inputs_from_hf_config(cfg("gemma-2-9b"))
    assert 3584 // 16 == 224 and gemma2.head_dim == 256
    gemma3 = inputs_from_hf_config(cfg("gemma-3-270m"))
    assert 640 // 4 == 160 and gemma3.head_dim == 256
    llama = inputs_from_hf_config(cfg("llama-3-8b"))  # no head_dim key: hidden / heads
    assert llama.head_dim == 128


def test_tied_embeddings_counted_once():
    tied = inputs_from_hf_config({**cfg("llama-3-8b"), "tie_word_embeddings": True})
    assert inputs_from_hf_config(cfg("llama-3-8b")).params - tied.params == 128256 * 4096


def test_deepseek_v3_weights_from_quantization_config_and_mtp_note():
    i = inputs_from_hf_config(cfg("deepseek-v3"))
    assert i.weights == "fp8"
    assert any("num_nextn_predict_layers" in n for n in i.notes)
    assert inputs_from_hf_config(cfg("deepseek-v3"), weights="bf16").weights == "bf16"


def test_gemma3_nested_text_config():
    text = cfg("gemma-3-270m")
    text.pop("model_type")
    nested = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text}
    i = inputs_from_hf_config(nested)
    flat = inputs_from_hf_config(cfg("gemma-3-270m"))
    assert (i.params, i.sliding_layers, i.sliding_window) == (flat.params, flat.sliding_layers, flat.sliding_window)
    assert any("vision" in n for n in i.notes)


def test_unsupported_model_type_and_unknown_override_are_clear_errors():
    with pytest.raises(BudgetError, match="not supported"):
        inputs_from_hf_config({**cfg("llama-3-8b"), "model_type": "phi3"})
    with pytest.raises(BudgetError, match="unknown budget override"):
        inputs_from_hf_config(cfg("llama-3-8b"), max_sequence=5)
    with pytest.raises(BudgetError, match="hidden_size"):
        inputs_from_hf_config({**cfg("llama-3-8b"), "hidden_size": None})


# ---------------------------------------------------------------- KV cache geometry


def test_mla_kv_per_token_is_one_latent_without_kv_doubling():
    i = inputs_from_hf_config(cfg("deepseek-v3"), weights="bf16")
    r = compute_budget(i)
    assert i.mla_latent_dim == 512 + 64
    assert r.kv_bytes_per_token == 61 * (512 + 64) * 2 == 70_272
    assert r.kv_per_seq_bytes == 70_272 * 4096
    # the latent is replicated on every tensor-parallel GPU, not split
    assert compute_budget(i.replace(tp=8)).kv_per_seq_bytes == r.kv_per_seq_bytes
    assert compute_budget(i.replace(kv_dtype="fp8")).kv_bytes_per_token == 61 * 576
    lite = compute_budget(inputs_from_hf_config(cfg("deepseek-v2-lite")))
    assert lite.kv_bytes_per_token == 27 * 576 * 2


def test_mistral_sliding_window_bounds_the_cache():
    i = inputs_from_hf_config(cfg("mistral-7b-v0.1"))
    assert (i.sliding_window, i.sliding_layers) == (4096, 32)
    at_4k = compute_budget(i.replace(max_seq=4096))
    at_32k = compute_budget(i.replace(max_seq=32768))
    assert at_32k.kv_per_seq_gib == at_4k.kv_per_seq_gib == 0.5
    llama = compute_budget(inputs_from_hf_config(cfg("llama-3-8b"), max_seq=32768))
    assert llama.kv_per_seq_gib == 4.0  # no window: 8x the cache at 8x the context
    assert any("sliding window" in a for a in at_32k.assumptions)


def test_gemma2_alternates_local_and_global_layers():
    i = inputs_from_hf_config(cfg("gemma-2-9b"), max_seq=8192)
    assert (i.sliding_window, i.sliding_layers) == (4096, 21)
    per_token_layer = 2 * 8 * 256 * 2
    assert compute_budget(i).kv_per_seq_bytes == per_token_layer * (21 * 8192 + 21 * 4096)


def test_gemma3_five_local_one_global():
    i = inputs_from_hf_config(cfg("gemma-3-270m"), max_seq=32768)
    assert (i.sliding_window, i.sliding_layers) == (512, 15)
    r = compute_budget(i)
    assert r.kv_bytes_per_token == 18 * 2 * 1 * 256 * 2
    assert r.kv_per_seq_bytes == 1024 * (3 * 32768 + 15 * 512)
    # the same split from the pattern when layer_types is absent, and from sliding_window_pattern
    no_types = {k: v for k, v in cfg("gemma-3-270m").items() if k != "layer_types"}
    assert inputs_from_hf_config(no_types).sliding_layers == 15
    pattern3 = {k: v for k, v in no_types.items() if k != "_sliding_window_pattern"} | {"sliding_window_pattern": 3}
    assert inputs_from_hf_config(pattern3).sliding_layers == 12
    # below the window every layer holds max_seq tokens
    short = compute_budget(i.replace(max_seq=256))
    assert short.kv_per_seq_bytes == 1024 * 18 * 256


def test_qwen_without_sliding_and_mixtral_null_window():
    assert inputs_from_hf_config(cfg("qwen2-7b")).sliding_layers == 0
    assert inputs_from_hf_config(cfg("qwen3-8b")).sliding_layers == 0
    assert inputs_from_hf_config(cfg("mixtral-8x7b")).sliding_layers == 0


def test_tensor_parallel_splits_weights_and_kv_heads():
    base = inputs_from_hf_config(cfg("llama-3-8b"))
    r1 = compute_budget(base)
    r2 = compute_budget(base.replace(tp=2))
    assert r2.kv_per_seq_bytes * 2 == r1.kv_per_seq_bytes
    assert r2.weights_bytes == math.ceil(r1.weights_bytes / 2)
    # 8 KV heads over 16 GPUs: each GPU keeps a replica of one head
    r16 = compute_budget(base.replace(tp=16))
    assert r16.kv_per_seq_bytes * 8 == r1.kv_per_seq_bytes
    assert any("replica" in a for a in r16.assumptions)


def test_block_rounding():
    r = compute_budget(BudgetInputs(max_seq=4097))
    assert r.kv_tokens_per_seq == 4112
    assert r.kv_per_seq_bytes == 2 * 32 * 8 * 128 * 2 * 4112
    assert compute_budget(BudgetInputs(max_seq=4097, block_size=1)).kv_tokens_per_seq == 4097
    assert compute_budget(BudgetInputs(max_seq=4096)).kv_tokens_per_seq == 4096  # teaching case unchanged
    # the window rounds up to whole blocks too: 500 tokens -> 512 with 16-token blocks
    g = inputs_from_hf_config(cfg("gemma-3-270m"), max_seq=500)
    assert compute_budget(g).kv_per_seq_bytes == 1024 * 18 * 512


# ---------------------------------------------------------------- weight formats


def test_format_bits_per_weight():
    bpw = {k: f.bits_per_weight for k, f in WEIGHT_FORMATS.items()}
    assert bpw["fp32"] == 32 and bpw["bf16"] == bpw["fp16"] == 16
    assert bpw["fp8"] == bpw["int8"] == 8
    assert bpw["gptq"] == bpw["awq"] == 4.15625  # 4 + (16-bit scale + 4-bit zero) / 128
    assert bpw["nf4"] == 4.5  # 4 + 32-bit absmax / 64
    assert bpw["nf4-dq"] == 4 + 8 / 64 + 32 / (64 * 256)  # 4.127
    assert bpw["q8_0"] == 8.5  # 34 bytes per 32 weights
    assert bpw["q4_k_m"] == 5 / 6 * 4.5 + 1 / 6 * 6.5625  # 4.84375


def test_formats_order_by_size():
    i = inputs_from_hf_config(cfg("llama-3-8b"))
    size = {name: compute_budget(i.replace(weights=name)).weights_bytes for name in WEIGHT_FORMATS}
    order = ["fp32", "bf16", "q8_0", "int8", "fp8", "q4_k_m", "nf4", "gptq", "nf4-dq"]
    assert [size[a] > size[b] for a, b in zip(order, order[1:])] == [True] * (len(order) - 1)
    assert size["bf16"] == size["fp16"] and size["gptq"] == size["awq"]


def test_quantized_weights_keep_embeddings_in_bf16():
    i = inputs_from_hf_config(cfg("llama-3-8b"), weights="gptq")
    r = compute_budget(i)
    quantized = 8_030_261_248 - i.unquantized_params
    assert i.unquantized_params == 2 * 128256 * 4096 + 32 * 2 * 4096 + 4096
    assert r.weights_bytes == math.ceil(quantized * 4.15625 / 8 + i.unquantized_params * 2)
    fp8 = compute_budget(i.replace(weights="fp8"))
    assert fp8.weights_bytes == quantized + 7 * 32 * 4 + i.unquantized_params * 2  # + one fp32 scale per matrix
    int8 = compute_budget(i.replace(weights="int8"))
    assert int8.weights_bytes == quantized + i.quant_rows * 4 + i.unquantized_params * 2


def test_bare_params_say_everything_was_quantized():
    r = compute_budget(BudgetInputs(weights="awq"))
    assert r.weights_bytes == 3_636_718_750
    assert any("all 7,000,000,000 params treated as quantized" in a for a in r.assumptions)
    assert not any("treated as quantized" in a for a in teaching_case().assumptions)


def test_format_names_are_normalized_and_bad_ones_rejected():
    assert BudgetInputs(weights="GPTQ", kv_dtype="FP8").weights == "gptq"
    with pytest.raises(BudgetError, match="unknown weight format"):
        BudgetInputs(weights="int3")
    with pytest.raises(BudgetError, match="unknown KV cache dtype"):
        BudgetInputs(kv_dtype="int4")


# ---------------------------------------------------------------- does not fit


def test_does_not_fit_gives_zero_never_negative():
    r = compute_budget(BudgetInputs(params=70e9))
    assert (r.candidate, r.fits, r.cache_budget_gib) == (0, False, 0.0)
    assert r.shortfall_gib == pytest.approx(140e9 / GIB + 3 + 0.5 - 24)
    assert "does not fit" in format_budget_text(r)
    # room left, but less than one sequence
    almost = compute_budget(BudgetInputs(gpu_gib=14e9 / GIB + 3 + 0.4))
    assert almost.cache_budget_gib == pytest.approx(0.4)
    assert (almost.candidate, almost.fits) == (0, False)
    assert almost.shortfall_gib == pytest.approx(0.1)


@settings(max_examples=150, deadline=None)
@given(
    params=st.floats(min_value=1e6, max_value=2e12),
    weights=st.sampled_from(sorted(WEIGHT_FORMATS)),
    gpu_gib=st.floats(min_value=0.5, max_value=2048),
    margin_gib=st.floats(min_value=0, max_value=64),
    layers=st.integers(1, 200),
    kv_heads=st.integers(1, 128),
    head_dim=st.integers(1, 1024),
    max_seq=st.integers(1, 1_000_000),
    kv_dtype=st.sampled_from(sorted(KV_DTYPES)),
    tp=st.integers(1, 16),
    block_size=st.integers(1, 256),
    window=st.integers(0, 100_000),
    mla=st.integers(0, 2048),
)
def test_property_candidate_never_negative_and_fits_in_gpu(
    params, weights, gpu_gib, margin_gib, layers, kv_heads, head_dim, max_seq, kv_dtype, tp, block_size, window, mla
):
    i = BudgetInputs(
        params=params,
        weights=weights,
        gpu_gib=gpu_gib,
        margin_gib=margin_gib,
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        max_seq=max_seq,
        kv_dtype=kv_dtype,
        tp=tp,
        block_size=block_size,
        sliding_window=window,
        sliding_layers=layers // 2 if window else 0,
        mla_latent_dim=mla,
    )
    r = compute_budget(i)
    assert r.candidate >= 0 and r.cache_budget_gib >= 0
    assert r.fits == (r.candidate >= 1)
    if r.fits:
        assert r.predicted_used_gib(r.candidate) <= gpu_gib
        # one more sequence would not fit
        assert r.weights_bytes + r.margin_bytes + (r.candidate + 1) * r.kv_per_seq_bytes > r.gpu_bytes
    for v in r.variants:
        assert v.candidate >= 0 and v.cache_budget_gib >= 0


# ---------------------------------------------------------------- JSON


def test_json_round_trip_recomputes():
    for r in (teaching_case(), compute_budget(inputs_from_hf_config(cfg("gemma-3-270m"), weights="q4_k_m"))):
        d = json.loads(json.dumps(budget_to_dict(r)))
        assert d["schema"] == SCHEMA == "servewatch.budget/1"
        assert set(d) >= {"parameters", "results", "variants", "assumptions", "note"}
        assert d["note"] == CANDIDATE_NOTE
        assert budget_from_dict(d) == r
        assert budget_from_dict({"type": "budget", **d}) == r


def test_saved_results_rounded_to_two_decimals_still_verify():
    d = budget_to_dict(teaching_case())
    for key in ("weights_gib", "cache_budget_gib", "kv_per_seq_gib"):
        d["results"][key] = round(d["results"][key], 2)
    assert budget_from_dict(d).candidate == 15


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda d: d["results"].__setitem__("candidate", 16), "candidate saved 16, recomputed 15"),
        (lambda d: d["results"].__setitem__("weights_gib", 12.0), "weights_gib"),
        (lambda d: d["results"].__setitem__("fits", False), "fits"),
        (lambda d: d["parameters"].__setitem__("gpu_gib", 80.0), "cache_budget_gib"),
        (lambda d: d["variants"][2].__setitem__("candidate", 99), "fp8 KV cache"),
        (lambda d: d.__setitem__("schema", "servewatch.budget/2"), "unsupported budget schema"),
        (lambda d: d.__setitem__("type", "request"), "not a budget record"),
        (lambda d: d["parameters"].__setitem__("layerz", 3), "unknown budget parameter"),
        (lambda d: d["parameters"].__setitem__("layers", 0), "layers must be >= 1"),
        (lambda d: d.pop("results"), "no 'results'"),
    ],
)
def test_tampered_budget_is_rejected(tamper, message):
    d = budget_to_dict(teaching_case())
    tamper(d)
    with pytest.raises(BudgetError, match=message):
        budget_from_dict(d)


def test_load_budget_file(tmp_path):
    path = tmp_path / "b.json"
    r = compute_budget(inputs_from_hf_config(cfg("qwen2-7b"), gpu_gib=80, max_seq=8192))
    path.write_text(json.dumps(budget_to_dict(r)))
    assert load_budget(path) == r
    bad = budget_to_dict(r)
    bad["results"]["candidate"] += 1
    path.write_text(json.dumps(bad))
    with pytest.raises(BudgetError, match="disagrees with recomputation"):
        load_budget(path)
    path.write_text("{not json")
    with pytest.raises(BudgetError, match="not valid JSON"):
        load_budget(path)
    with pytest.raises(BudgetError, match="cannot read"):
        load_budget(tmp_path / "missing.json")



def test_load_hf_config_names_the_file_for_each_problem(tmp_path):
    from tui.sources.budget_files import load_hf_config

    good = tmp_path / "config.json"
    good.write_text(json.dumps(cfg("llama-3-8b")))
    assert load_hf_config(good) == cfg("llama-3-8b")
    for text, message in (("{not json", "is not valid JSON"), ("[1, 2]", "must be a JSON object"),
                          (b"\xff\xfe", "cannot read model config")):
        bad = tmp_path / "bad.json"
        bad.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(BudgetError, match=message) as exc:
            load_hf_config(bad)
        assert str(bad) in str(exc.value)
    with pytest.raises(BudgetError, match="cannot read model config"):
        load_hf_config(tmp_path / "missing.json")


def test_budget_arithmetic_reads_no_files():
    # the budget package gets parsed data only: reading a budget file or a config.json is tui.sources.budget_files
    import ast

    import tui.core.budget

    pkg = pathlib.Path(tui.core.budget.__file__).parent
    files = sorted(pkg.glob("*.py"))
    assert len(files) >= 7
    for f in files:
        tree = ast.parse(f.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not ({"open", "Path"} & names), f"{f.name} opens files"
        assert not ({"read_text", "read_bytes", "open"} & attrs), f"{f.name} reads files"
        assert not ({"pathlib", "os", "io"} & mods), f"{f.name} imports a file-system module"


def test_predicted_used_gib():
    r = teaching_case()
    assert r.predicted_used_gib(0) == pytest.approx(14e9 / GIB + 3)
    assert r.predicted_used_gib(15) == pytest.approx(14e9 / GIB + 3 + 7.5)
    assert r.predicted_used_gib(15) <= 24 < r.predicted_used_gib(16)
    # a result built by hand (no byte fields) still predicts from its GiB figures
    hand = BudgetResult(BudgetInputs(), 13.0, 3.0, 0.5, 8.0, 16, True, (), ())
    assert hand.predicted_used_gib(2) == 17.0
    assert isinstance(Variant("x", 1.0, 0.5, 2.0, 4).candidate, int)


# ---------------------------------------------------------------- CLI


def test_cli_teaching_case_text(capsys):
    assert run_cli([]) == 0
    out = capsys.readouterr().out
    assert "weights=13.04 GiB" in out
    assert "runtime_margin=3.00 GiB" in out
    assert "kv_per_seq=0.50 GiB" in out
    assert "cache_budget=7.96 GiB" in out
    assert "memory_only_candidate=15 sequences" in out
    assert "Assumptions (not measured):" in out
    for word in ("runtime margin", "activation peak", "fragmentation", "scheduler limits"):
        assert word in out
    assert CANDIDATE_NOTE in out
    # the variants table sits beside the base case
    assert "context x2 (max_seq 8192)" in out and "fp8 KV cache" in out


def test_cli_flags_and_config_override(capsys):
    # issue 22: the teaching GPU and margin fill in only with --teaching (labelled), never silently
    assert run_cli(["--max-seq", "8192", "--teaching"]) == 0
    out = capsys.readouterr().out
    assert "memory_only_candidate=7 sequences" in out and "memory from the teaching case (--teaching)" in out
    assert run_cli(["--max-seq", "8192"]) == 3  # issue 37: "does it fit?" unknown without the memory
    out = capsys.readouterr().out
    assert "memory_only_candidate=unknown" in out and "memory input missing" in out and "=7 " not in out
    args = parse_settings(BudgetFlags, ["--config", str(CONFIGS / "llama-3-8b.json"), "--max-seq", "8192",
                                        "--gpu-gib", "80"])
    r = budget_from_args(args)
    assert r.inputs.params == 8_030_261_248 and r.inputs.max_seq == 8192 and r.inputs.gpu_gib == 80
    assert r.kv_per_seq_gib == 1.0
    assert budget_from_args(parse_settings(BudgetFlags, ["--params", "8B"])).inputs.params == 8e9
    assert budget_from_args(parse_settings(BudgetFlags, [])) == teaching_case()


def test_cli_json_out_and_reload(tmp_path, capsys):
    out = tmp_path / "budget.json"
    assert run_cli(["--json", "--out", str(out), "--weights", "awq", "--gpu-gib", "16"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed["results"]["candidate"] == budget_from_dict(printed).candidate
    assert run_cli(["--budget", str(out)]) == 0
    assert f"memory_only_candidate={printed['results']['candidate']} sequences" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--params", "lots"], "--params must be a number"),
        (["--params=-7e9"], "params must be > 0"),
        (["--layers", "2.5"], "--layers must be a whole number"),
        (["--weights", "int3"], "unknown weight format"),
        (["--tp", "0"], "tp must be >= 1"),
        (["--gpu-gib", "nan"], "finite"),
        (["--config", "/nonexistent/config.json"], "cannot read model config"),
        (["--budget", "/nonexistent/budget.json"], "cannot read budget file"),
        (["--budget", "x.json", "--tp", "2"], "cannot be combined"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, fragment, capsys):
    assert run_cli(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert fragment in captured.err
    assert "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_cli_tampered_budget_and_bad_config_exit_2(tmp_path, capsys):
    d = budget_to_dict(teaching_case())
    d["results"]["candidate"] = 40
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(d))
    assert run_cli(["--budget", str(tampered)]) == 2
    assert "disagrees" in capsys.readouterr().err
    weird = tmp_path / "config.json"
    weird.write_text(json.dumps({"model_type": "llama", "hidden_size": "big"}))
    assert run_cli(["--config", str(weird)]) == 2
    err = capsys.readouterr().err
    assert "vocab_size" in err and "Traceback" not in err


def test_cli_does_not_fit(capsys):
    assert run_cli(["--params", "70e9", "--gpu-gib", "24"]) == 1  # issue 37: 1 does not fit
    out = capsys.readouterr().out
    assert "memory_only_candidate=0 sequences" in out and "does not fit" in out
    assert "-" not in out.split("cache_budget=")[1].split()[0]


def test_cli_exit_codes_answer_does_it_fit(capsys):
    """issue 37: `budget` exits 0 fits, 1 does not fit, 3 unknown (no memory given), 2 bad usage."""
    from tui.cli import main

    assert run_cli(["--params", "7e9", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
                    "--gpu-gib", "24"]) == 0
    assert run_cli(["--params", "70e9", "--layers", "80", "--kv-heads", "8", "--head-dim", "128",
                    "--gpu-gib", "40"]) == 1
    assert run_cli(["--params", "70e9", "--layers", "80", "--kv-heads", "8", "--head-dim", "128"]) == 3
    capsys.readouterr()
    assert main(["budget", "--params", "seventy"]) == 2


def test_params_without_geometry_say_so_in_the_first_line(capsys):
    """issue 37: `budget --params 70e9 --gpu-gib 200` used the teaching case's 32 layers x 8 KV heads and said so
    only in the ninth assumption line; the first line says it now (text and the memory-missing form)."""
    for argv in (["--params", "70e9", "--gpu-gib", "200"], ["--params", "70e9"]):
        run_cli(argv)
        first = capsys.readouterr().out.splitlines()[0]
        assert "KV geometry: the TEACHING CASE's 32 layers x 8 KV heads x head_dim 128" in first, first
    run_cli(["--params", "70e9", "--layers", "80", "--kv-heads", "8", "--head-dim", "128", "--gpu-gib", "200"])
    assert "TEACHING" not in capsys.readouterr().out.splitlines()[0]
    run_cli([])  # the teaching case itself is titled the teaching case, not warned about
    first = capsys.readouterr().out.splitlines()[0]
    assert "teaching case" in first and "KV geometry" not in first
