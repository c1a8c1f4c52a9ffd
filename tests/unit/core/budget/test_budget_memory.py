"""Issue 22: the memory the budget divides is never a default nobody gave.

A budget described by a model config but without --gpu-gib / --kv-cache-gib carries its KV figures and no
candidate until the run header says the GPU's size (NVML) or the engine's own KV space; otherwise it is unknown
with the missing input named. The engine's KV memory in use (kv_cache_usage x kv_cache_memory_bytes) is kept over
time beside the budget's predicted KV ceiling."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tui.cli import budgetflags
from tui.cli.budgetflags import BudgetFlags
from tui.cli.declare import Settings, block
from tui.cli.declare import parse as parse_settings
from tui.cli.options import teaching_flag
from tui.core.budget.memory import (
    WHY_NO_HEADER,
    MemoryMissing,
    engine_kv_space,
    gpu_for_budget,
    resolve,
)
from tui.core.budget.results import BudgetResult
from tui.core.monitor import Monitor
from tui.core.records import QueueSample, RequestRecord
from tui.core.records.model import RunHeader
from tui.core.report import build_report, format_report

GIB = 2**30
# SmolLM2-135M-Instruct: 30 layers, 3 KV heads, head_dim 64, bf16 -> 23,040 B of KV per token
SMOL = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
        "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "head_dim": 64, "vocab_size": 49152, "max_position_embeddings": 8192, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5}


@pytest.fixture
def smol_config(tmp_path):
    p = tmp_path / "smollm2" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(SMOL))
    return p


@dataclass(frozen=True, kw_only=True)
class _BudgetView(Settings):
    """The budget flags and --teaching, as a view (report, replay, live) declares them."""

    budget: BudgetFlags = block(BudgetFlags)
    teaching: bool = teaching_flag()


def parse(argv):
    return parse_settings(_BudgetView, argv)


def budget_from_args(view):
    return budgetflags.budget_from_args(view.budget, view.teaching)


def view_budget(view):
    return budgetflags.view_budget(view.budget, view.teaching)


def vllm_header(kv_bytes=GIB, url="http://127.0.0.1:8000", gpu=None):
    return {"type": "run", "target": {"url": url, "model": "smollm2-135m"},
            "environment": {"gpu": gpu or {"gpu": "none", "reason": "no GPU telemetry: NVML library not found"}},
            "server_capacity": {"engine": "vllm", "sequences": 22, "tokens_per_sequence": 2048,
                                "total_tokens": 46592, "kv_cache_memory_bytes": kv_bytes, "block_size": 128}}


def nvml_gpu(*totals, name="NVIDIA H200"):
    return {"gpu": "nvidia", "devices": [{"index": i, "name": name, "memory_total": t} for i, t in enumerate(totals)]}


def test_config_without_memory_is_memory_missing_with_the_kv_figures(smol_config):
    m = budget_from_args(parse(["--config", str(smol_config), "--max-seq", "2048"]))
    assert isinstance(m, MemoryMissing)  # before issue 22: a BudgetResult on the teaching 24 GiB GPU (candidate 236)
    assert m.kv_bytes_per_token == 23_040 and m.kv_per_seq_bytes == 23_040 * 2048
    hint = m.hint("why")
    assert "--gpu-gib" in hint and "--kv-cache-gib" in hint and "23,040 B of KV per token" in hint
    assert "24" not in hint.replace("2048", "")  # no teaching GPU size in what is shown
    # the memory flags give a budget as before; --gpu-gib alone too
    r = budget_from_args(parse(["--config", str(smol_config), "--max-seq", "2048", "--gpu-gib", "80"]))
    assert isinstance(r, BudgetResult) and r.inputs.gpu_gib == 80
    ns = parse(["--config", str(smol_config), "--max-seq", "2048", "--kv-cache-gib", "1"])
    r = budget_from_args(ns)
    assert isinstance(r, BudgetResult) and r.inputs.kv_space_bytes == GIB and r.candidate == 22


def test_view_budget_without_memory_hands_the_monitor_a_pending_budget(smol_config):
    budget, origin = view_budget(parse(["--config", str(smol_config)]))
    assert isinstance(budget, MemoryMissing) and origin and "model config" in origin
    with pytest.raises(ValueError, match="--teaching"):
        view_budget(parse(["--config", str(smol_config), "--teaching"]))


def test_engine_kv_space_gives_the_candidate_and_says_where_from(smol_config):
    pending = budget_from_args(parse(["--config", str(smol_config), "--max-seq", "2048"]))
    assert isinstance(pending, MemoryMissing)
    res = resolve(pending, vllm_header())
    assert res.budget is not None and res.budget.candidate == 22  # floor(1 GiB / (23,040 B x 2048)) = 22
    assert res.budget.inputs.kv_space_bytes == GIB
    assert res.memory.startswith("KV space 1.00 GiB: vLLM's own kv_cache_memory_bytes (run header server_capacity)")
    assert not any("3.00 GiB" in a for a in res.budget.assumptions)  # no margin nobody gave
    # none reported: unknown, the missing input named, no candidate
    none = resolve(pending, {"type": "run", "target": {"url": "http://127.0.0.1:8000"}})
    assert none.budget is None and none.hint and "memory input is missing" in none.hint
    assert "no GPU in the run header" in none.hint and "no KV cache space" in none.hint
    assert resolve(pending, {}).why == WHY_NO_HEADER


def test_nvml_gpu_total_comes_first_when_the_server_is_local(smol_config):
    pending = budget_from_args(parse(["--config", str(smol_config), "--max-seq", "2048"]))
    assert isinstance(pending, MemoryMissing)
    res = resolve(pending, vllm_header(gpu=nvml_gpu(141 * GIB)))
    assert res.budget is not None and res.budget.inputs.gpu_gib == 141 and not res.budget.inputs.kv_space_bytes
    assert res.memory and res.memory.startswith("GPU 141.00 GiB: NVML total of device 0 (NVIDIA H200)")
    assert "default allowance" in res.memory  # the margin nobody gave is said to be the default
    # a remote server: this machine's GPUs are not its own -> the engine's KV space instead
    remote = resolve(pending, vllm_header(url="http://10.0.0.7:8000", gpu=nvml_gpu(141 * GIB)))
    assert remote.budget is not None and remote.budget.inputs.kv_space_bytes == GIB
    # two GPUs of one size: per GPU; of different sizes: never a guess
    assert gpu_for_budget(vllm_header(gpu=nvml_gpu(80 * GIB, 80 * GIB)))[0] == 80 * GIB
    total, why = gpu_for_budget(vllm_header(gpu=nvml_gpu(80 * GIB, 24 * GIB)))
    assert total is None and "different" in why


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1073741824", True, float("nan"), None])
def test_engine_kv_space_rejects_what_is_not_a_byte_count(bad):
    assert engine_kv_space(vllm_header(kv_bytes=bad))[0] is None


def _requests(mon, n=5, t0=100.0):
    for i in range(n):
        t = t0 + i
        mon.add(RequestRecord(id=f"r{i}", t_sent=t, t_end=t + 0.5, complete=True, t_intended=t, t_first_token=t + 0.1,
                              phase="measure", level=1, output_tokens=16))


def _queue(t, usage):
    return QueueSample(t=t, source="vllm", waiting=0.0, running=1.0, kv_cache_usage=usage)


def test_monitor_waits_for_the_header_then_shows_the_engine_kv_and_its_memory(smol_config):
    pending = budget_from_args(parse(["--config", str(smol_config), "--max-seq", "2048"]))
    mon = Monitor(budget=pending, budget_origin="model config")
    snap = mon.snapshot()
    assert snap.budget is None and snap.budget_view is not None and not snap.budget_view.known
    assert snap.budget_view.hint and WHY_NO_HEADER in snap.budget_view.hint
    mon.add(RunHeader(data=vllm_header()))
    for i, u in enumerate((0.0, 0.25, 0.5, 0.125)):
        mon.add(_queue(100.0 + i, u))
    _requests(mon)
    snap = mon.snapshot()
    assert snap.budget is not None and snap.budget.candidate == 22
    assert snap.budget_view.memory and "vLLM's own kv_cache_memory_bytes" in snap.budget_view.memory
    g = snap.gpu
    assert g.engine_kv_allocated_gib == 1.0 and g.engine_kv_peak_gib == 0.5 and g.engine_kv_used_gib == 0.125
    assert g.engine_kv_series == (0.0, 0.25, 0.5, 0.125) and g.engine_kv_samples == 4
    assert g.kv_ceiling_gib == 1.0 and g.engine_kv_label and "kv_cache_usage_perc x kv_cache_memory_bytes" in g.engine_kv_label
    assert g.ceiling_gib is None and g.gpu_gib is None  # no GPU size predicted from a KV space
    rep = build_report(snap)
    assert rep["memory"]["engine_kv"]["peak_used_gib"] == 0.5 and rep["memory"]["predicted_kv_ceiling_gib"] == 1.0
    text = format_report(rep)
    assert "engine KV cache: peak 0.500 GiB" in text and "memory_only_candidate=22 sequences" in text
    assert "KV space 1.00 GiB: vLLM's own kv_cache_memory_bytes" in text
    assert "24 GiB" not in text and "runtime_margin=3.00" not in text


def test_monitor_without_any_memory_source_stays_unknown_and_keeps_a_record_budget_out(smol_config):
    pending = budget_from_args(parse(["--config", str(smol_config)]))
    mon = Monitor(budget=pending)
    mon.add(RunHeader(data={"type": "run", "target": {"url": "http://127.0.0.1:8080"},
                            "environment": {"gpu": {"gpu": "none", "reason": "no NVML"}}}))
    _requests(mon)
    snap = mon.snapshot()
    assert snap.budget is None and "memory input is missing" in (snap.budget_view.hint or "")
    text = format_report(build_report(snap))
    assert "memory_only_candidate" not in text and "23,040 B of KV per token" in text


def test_a_kv_cache_usage_beyond_one_is_a_bad_line_not_500_percent_in_use():
    """The engines' KV usage gauges are fractions: a queue sample claiming 5.0 is refused with its line, and the
    engine's KV memory in use never shows more than the space it allocated."""
    from tui.core.records.parse import parse_block, parse_lines

    good = '{"type":"queue","t":1.0,"source":"vllm","waiting":0,"running":1,"kv_cache_usage":0.25}'
    bad = '{"type":"queue","t":2.0,"source":"vllm","waiting":0,"running":1,"kv_cache_usage":5.0}'
    items = list(parse_lines([(1, good, True), (2, bad, True)], "q.jsonl"))
    assert items[0].kv_cache_usage == 0.25
    assert "q.jsonl:2" in str(items[1]) and "fraction from 0 to 1" in str(items[1])
    block = list(parse_block((good + "\n" + bad).encode(), 1, "q.jsonl"))
    assert [type(x).__name__ for x in block] == [type(x).__name__ for x in items]


def test_the_engines_max_model_len_and_block_size_stand_in_for_flags_not_given(smol_config):
    """--config only: the budget takes the engine's max_model_len (2048) and block size (128), says so, and its
    candidate is the engine's own (22); a --max-seq given is kept (4096 -> 11) and not said to be the engine's."""
    hdr = vllm_header()
    hdr["server_capacity"] = {**hdr["server_capacity"], "max_model_len": 2048, "block_size": 128}
    res = resolve(budget_from_args(parse(["--config", str(smol_config)])), hdr)
    assert res.budget is not None and res.budget.candidate == 22
    assert (res.budget.inputs.max_seq, res.budget.inputs.block_size) == (2048, 128)
    assert "max_seq 2,048 = the engine's max_model_len" in res.memory and "blocks of 128" in res.memory
    given = resolve(budget_from_args(parse(["--config", str(smol_config), "--max-seq", "4096"])), hdr)
    assert given.budget is not None and given.budget.candidate == 11 and given.budget.inputs.max_seq == 4096
    assert "max_model_len" not in given.memory
