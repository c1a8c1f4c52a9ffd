"""The console in live mode (Pilot) against the second real peer: vLLM 0.32 (CPU) + SmolLM2-135M, 4 sequences.

A closed loop at concurrency 8 on ``--max-num-seqs 4`` (the session's ``vllm_server``), 16-token prompts, 24 output
tokens with ignore_eos, 16 requests, no GPU sampler and no budget given. Eight clients on four sequences: four of
them wait, so vLLM's own queue gauges (``vllm:num_requests_waiting`` / ``_running``) and its KV-cache usage fill the
queue pane while the latency, good-fraction, requests and levels panes fill from the records. The machine has no
GPU: the GPU pane says "no GPU telemetry" (never a made-up figure). The panes are read once the run has finished
(every request is in), waiting on conditions polled through ``pilot.pause`` with a bounded deadline.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

from tests.support.calibrate import bound_s, measure_peer
from tui.app import build_app
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import LineIssue, QueueSample, RequestRecord, read_file
from tui.sources.base import MonitorSink
from tui.sources.live import LiveSource
from tui.sources.load import LoadConfig
from tui.widgets import fmt
from tui.widgets.bars import HeaderBar

SIZE = (140, 48)
REQUESTS = 16
OUT = 24
DEADLINE_S = 60.0  # a bound for a failing run; a passing one takes a few seconds


async def wait_for(pilot, pred, what: str, source: LiveSource, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert source.error is None, f"the live run failed: {source.error}"
        if time.monotonic() > deadline:
            snap = pilot.app.console_screen.snapshot
            raise AssertionError(f"timed out waiting for {what}; last progress: {source.last_progress!r}; "
                                 f"queue: {None if snap is None else snap.queue}")
        await pilot.pause(0.05)


def text(app, wid: str) -> str:
    return app.query_one(wid).visual.plain


async def test_live_console_fills_every_pane_from_vllm(vllm_server, tmp_path):
    record = tmp_path / "live.jsonl"
    speed = await asyncio.to_thread(measure_peer, vllm_server.openai_url, prompt_words=16, output_tokens=OUT,
                                    model=vllm_server.model)
    bound = max(DEADLINE_S, bound_s(speed, REQUESTS))
    cfg = LoadConfig(url=vllm_server.base_url, mode="closed", levels=[8], input_tokens=(16, 16),
                     output_tokens=(OUT, OUT), ignore_eos=True, requests=REQUESTS, record=str(record),
                     metrics_interval=0.2, progress_interval=0, gpu=False, api_key_env=None, read_timeout=120.0)
    source = LiveSource(cfg)
    sink = MonitorSink(Monitor(MonitorConfig(), budget=None, source=source.label))
    app = build_app(source, sink, None, export_dir=tmp_path / "exports")

    async with app.run_test(size=SIZE) as pilot:

        def finished() -> bool:
            snap = app.console_screen.snapshot
            return (source.finished and snap is not None and snap.requests_total == REQUESTS
                    and snap.seq == sink.snapshot().seq)  # the screen shows the last record

        await wait_for(pilot, finished, f"the {REQUESTS} requests of the run on screen", source, bound)
        assert source.error is None
        snap = app.console_screen.snapshot
        assert "LIVE" in app.query_one(HeaderBar).visual.plain

        # queue pane: vLLM's engine, its waiting and running gauges over the run (waiting > 0 at some point:
        # 8 clients, 4 sequences), the KV-cache usage it reports, the client's in-flight count
        q = snap.queue
        queue = text(app, "#queue-text")
        assert q.source == "vllm" and "server  vllm" in queue, queue
        assert max(q.waiting_series) > 0 and max(q.running_series) == 4, (q.waiting_series, q.running_series)
        assert q.max_waiting is not None and q.max_waiting > 0 and f"max waiting {fmt.num(q.max_waiting)}" in queue
        for label, value in (("waiting", q.waiting), ("running", q.running), ("in-flight", q.client_in_flight)):
            assert value is not None, (label, q)
            row = next(line for line in queue.splitlines() if line.startswith(label))
            assert row.split()[1] == fmt.num(value), (label, row)
        assert q.kv_cache_usage is not None and 0 <= q.kv_cache_usage <= 1
        kv = next(line for line in queue.splitlines() if line.startswith("KV cache"))
        assert fmt.pct(q.kv_cache_usage, 0) in kv and "N/A" not in kv, kv

        # latency pane: TTFT percentiles with their n (every request completed)
        ttft = text(app, "#ttft-text")
        c = snap.cumulative
        assert c.completed == REQUESTS and c.failed == 0
        p50 = next(p for p in c.ttft if p.label == "P50")
        assert p50.value_ms is not None and p50.value_ms > 0
        n_row = next(line for line in ttft.splitlines() if line.startswith("n "))
        assert n_row.split()[-1] == f"{c.completed:,}", ttft
        p50_row = next(line for line in ttft.splitlines() if line.startswith("P50"))
        assert "N/A" not in p50_row, ttft
        # good-fraction pane: the cumulative figure and its n
        good = text(app, "#good-text")
        assert c.good.n == REQUESTS and re.search(rf"{re.escape(fmt.pct(c.good.fraction))}\s+n {REQUESTS}", good), good
        # requests pane: a row per request (16 < its cap), every one counted
        assert app.query_one("#requests").row_count == REQUESTS
        assert f"{REQUESTS:,} in all" in app.query_one("#requests").border_subtitle
        # levels pane: the one level, with its request count
        levels = text(app, "#sweep-text")
        assert len(snap.levels) == 1 and snap.levels[0].level == 8 and snap.levels[0].max_waiting > 0
        assert fmt.level(8) in levels, levels
        # GPU pane: no GPU on this machine, and it says so
        gpu = text(app, "#gpu-text")
        assert not snap.gpu.available and "no GPU telemetry" in gpu, gpu

        await pilot.press("q")
        deadline = time.monotonic() + DEADLINE_S
        while app.return_value is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert app.return_value in (0, 1, 3)

    assert source.finished and not source._thread.is_alive() and source.error is None
    items = list(read_file(str(record)))
    assert not [i for i in items if isinstance(i, LineIssue)]
    ids = Counter(r.id for r in items if isinstance(r, RequestRecord))
    assert len(ids) == REQUESTS and set(ids.values()) == {1}
    assert sink.snapshot().requests_total == REQUESTS
    # what the queue pane drew is what vLLM reported in the record file
    waits = [s.waiting for s in items if isinstance(s, QueueSample) and s.source == "vllm" and s.waiting is not None]
    assert max(waits) == q.max_waiting
