"""Issue 22, live on vLLM (the session ``vllm_server``: SmolLM2-135M, 1 GiB of KV cache on the CPU,
--max-model-len 2048, --max-num-seqs 4): the budget beside a run takes the engine's own KV space, never the
teaching case's 24 GiB GPU, and the memory figures show the engine's KV use over time.

Small on purpose (2-core machines, shared server): 12 requests of 16 tokens at concurrency 4. Waiting is a polled
condition with a bound; nothing asserts a wall-clock speed.
"""

from __future__ import annotations

import json
import time

from tui.app import build_app
from tui.cli import main
from tui.cli.budgetflags import BudgetFlags, view_budget
from tui.cli.declare import parse as parse_settings
from tui.core.budget.memory import MemoryMissing
from tui.core.monitor import Monitor, MonitorConfig
from tui.sources.base import MonitorSink
from tui.sources.live import LiveSource
from tui.sources.load import LoadConfig

REQUESTS = 12
DEADLINE_S = 120.0  # a bound for a failing run; a passing one takes seconds
SIZE = (160, 48)


def _load_flags(server, record) -> list[str]:
    return ["--url", server.base_url, "--model", server.model, "--concurrency", "4", "--requests", str(REQUESTS),
            "--input-tokens", "16", "--output-tokens", "16", "--ignore-eos", "--record", str(record),
            "--metrics-interval", "0.2", "--no-gpu"]


def test_report_budget_takes_vllms_kv_space_and_shows_its_kv_use(vllm_server, tmp_path, capsys):
    record = tmp_path / "run.jsonl"
    config = str(vllm_server.model_dir / "config.json")
    code = main(["run", *_load_flags(vllm_server, record)])
    assert code in (0, 1, 3), capsys.readouterr().err
    capsys.readouterr()
    # the report with --config only: the memory comes from vLLM's own kv_cache_memory_bytes in the run header
    assert main(["report", str(record), "--config", config, "--max-seq", "2048", "--json"]) in (0, 1, 3)
    rep = json.loads(capsys.readouterr().out)
    cap = rep["header"]["server_capacity"]
    assert cap["kv_cache_memory_bytes"] == vllm_server.kv_space_gib * 2**30
    view = rep["budget_view"]
    assert view["known"] and view["memory_only_candidate"] == 22  # floor(1 GiB / (23,040 B x 2048 tokens))
    assert view["memory"].startswith("KV space 1.00 GiB: vLLM's own kv_cache_memory_bytes")
    assert rep["budget"]["kv_space_gib"] == 1.0
    mem = rep["memory"]["engine_kv"]
    assert mem is not None and mem["allocated_gib"] == 1.0 and mem["samples"] >= 1
    assert mem["peak_used_gib"] is not None and 0 < mem["peak_used_gib"] <= 1.0  # 4 sequences held KV blocks
    assert "vLLM kv_cache_usage_perc x kv_cache_memory_bytes" in mem["label"]
    assert main(["report", "--details", str(record), "--config", config, "--max-seq", "2048"]) in (0, 1, 3)
    text = capsys.readouterr().out
    assert "memory_only_candidate=22 sequences" in text and "engine KV cache: peak" in text
    assert "24 GiB" not in text and "24.00 GiB" not in text and "runtime_margin=3.00" not in text


async def test_live_console_budget_waits_for_the_engine_kv_space(vllm_server, tmp_path):
    flags = parse_settings(BudgetFlags, ["--config", str(vllm_server.model_dir / "config.json"), "--max-seq", "2048"])
    budget, origin = view_budget(flags)  # what `servewatch live --config ...` hands the console
    assert isinstance(budget, MemoryMissing)
    cfg = LoadConfig(url=vllm_server.base_url, model=vllm_server.model, mode="closed", levels=[4],
                     input_tokens=(16, 16), output_tokens=(16, 16), ignore_eos=True, requests=REQUESTS,
                     record=str(tmp_path / "live.jsonl"), metrics_interval=0.2, progress_interval=0, gpu=False,
                     api_key_env=None, read_timeout=120.0)
    source = LiveSource(cfg)
    monitor = Monitor(MonitorConfig(), budget=budget, source=source.label, budget_origin=origin)
    from tui.sources.server_log import read_server_log

    monitor.server_log = read_server_log(vllm_server.log_path)  # what `live --server-log FILE` hands the console
    sink = MonitorSink(monitor)
    app = build_app(source, sink, None, export_dir=tmp_path / "exports")
    async with app.run_test(size=SIZE) as pilot:
        def panes() -> tuple[str, str]:
            return (app.query_one("#budget-text").visual.plain, app.query_one("#gpu-text").visual.plain)

        deadline = time.monotonic() + DEADLINE_S
        while not ("22 seq" in panes()[0] and "allocated" in panes()[1]):
            assert source.error is None, f"the live run failed: {source.error}"
            assert time.monotonic() < deadline, f"timed out; panes: {panes()!r}"
            await pilot.pause(0.05)
        budget_text, gpu_text = panes()
        assert "KV space 1.00 GiB" in budget_text and "vLLM's own kv_cache_memory_bytes" in budget_text
        assert "24 GiB" not in budget_text and "GPU 24" not in budget_text
        assert "engine KV cache" in gpu_text and "1.00 GiB allocated" in gpu_text
        assert "predicted KV ceiling 1.00 GiB" in gpu_text
        # beside the candidate: the config's prediction against the engine's allocation, and vLLM's startup line
        assert "allocation predicted vs engine: agree" in budget_text, budget_text
        assert "server log vLLM's startup log: maximum concurrency 22.75x for 2,048 tokens per request" in \
            " ".join(budget_text.split()), budget_text
        await pilot.press("q")
        deadline = time.monotonic() + DEADLINE_S
        while app.return_value is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
    assert source.error is None
