"""`servewatch live` (the console, driven by Pilot) against the second real peer: vLLM 0.32 (CPU) + SmolLM2-135M.

The command runs as a user types it (``main(["live", ...])``: its flags, its budget, its LiveSource); only
``App.run`` is replaced by a headless ``run_test`` that waits for the run to end, reads the panes, and presses q.
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
from tui.app import ServewatchApp
from tui.cli import main
from tui.core.records import LineIssue, QueueSample, RequestRecord, read_file
from tui.widgets import fmt
from tui.widgets.bars import HeaderBar

SIZE = (140, 48)
REQUESTS = 16
OUT = 24
DEADLINE_S = 60.0  # a bound for a failing run; a passing one takes a few seconds


async def wait_for(pilot, pred, timeout: float) -> str | None:
    """None once ``pred()`` holds; what went wrong when the run failed or the deadline passed."""
    deadline = time.monotonic() + timeout
    source = pilot.app.source
    while not pred():
        if source.error is not None:
            return f"the live run failed: {source.error}"
        if time.monotonic() > deadline:
            snap = pilot.app.console_screen.snapshot
            return (f"timed out; last progress: {source.last_progress!r}; "
                    f"requests on screen: {None if snap is None else snap.requests_total}")
        await pilot.pause(0.05)
    return None


def text(app, wid: str) -> str:
    return app.query_one(wid).visual.plain


def test_servewatch_live_fills_every_pane_from_vllm(vllm_server, tmp_path, monkeypatch, capsys):
    record = tmp_path / "live.jsonl"
    speed = measure_peer(vllm_server.openai_url, prompt_words=16, output_tokens=OUT, model=vllm_server.model, n=3)
    bound = max(DEADLINE_S, bound_s(speed, REQUESTS))
    seen: dict = {}

    async def drive(app: ServewatchApp) -> int | None:
        async with app.run_test(size=SIZE) as pilot:

            def finished() -> bool:
                snap = app.console_screen.snapshot
                return (app.source.finished and snap is not None and snap.requests_total == REQUESTS
                        and snap.seq == app.sink.snapshot().seq)  # the screen shows the last record

            seen["problem"] = await wait_for(pilot, finished, bound)
            seen["snap"] = app.console_screen.snapshot
            for wid in ("#queue-text", "#ttft-text", "#good-text", "#sweep-text", "#gpu-text"):
                seen[wid] = text(app, wid)
            seen["header"] = app.query_one(HeaderBar).visual.plain
            seen["rows"] = app.query_one("#requests").row_count
            seen["requests_subtitle"] = app.query_one("#requests").border_subtitle
            await pilot.press("q")
            deadline = time.monotonic() + DEADLINE_S
            while app.return_value is None and time.monotonic() < deadline:
                await pilot.pause(0.05)
        seen["return_value"] = app.return_value
        seen["source"] = app.source
        seen["sink_total"] = app.sink.snapshot().requests_total
        return app.return_value

    monkeypatch.setattr(ServewatchApp, "run", lambda self, *a, **k: asyncio.run(drive(self)))
    rc = main(["live", "--url", vllm_server.base_url, "--concurrency", "8", "--requests", str(REQUESTS),
               "--input-tokens", "16", "--output-tokens", str(OUT), "--ignore-eos", "--no-gpu",
               "--metrics-interval", "0.2", "--record", str(record), "--api-key-env", "SW_TEST_NO_KEY",
               "--export-dir", str(tmp_path / "exports")])
    out = capsys.readouterr().out
    assert seen.get("problem") is None, seen.get("problem")
    assert rc == seen["return_value"] and rc in (0, 1, 3)  # the exit code is the verdict on screen
    assert f"record file: {record}" in out
    snap = seen["snap"]
    assert "LIVE" in seen["header"]

    # queue pane: vLLM's engine, its waiting and running gauges over the run (waiting > 0 at some point:
    # 8 clients, 4 sequences), the KV-cache usage it reports, the client's in-flight count
    q = snap.queue
    queue = seen["#queue-text"]
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
    ttft = seen["#ttft-text"]
    c = snap.cumulative
    assert c.completed == REQUESTS and c.failed == 0
    p50 = next(p for p in c.ttft if p.label == "P50")
    assert p50.value_ms is not None and p50.value_ms > 0
    n_row = next(line for line in ttft.splitlines() if line.startswith("n "))
    assert n_row.split()[-1] == f"{c.completed:,}", ttft
    p50_row = next(line for line in ttft.splitlines() if line.startswith("P50"))
    assert "N/A" not in p50_row, ttft
    # good-fraction pane: the cumulative figure and its n
    good = seen["#good-text"]
    assert c.good.n == REQUESTS and re.search(rf"{re.escape(fmt.pct(c.good.fraction))}\s+n {REQUESTS}", good), good
    # requests pane: a row per request (16 < its cap), every one counted
    assert seen["rows"] == REQUESTS and f"{REQUESTS:,} in all" in seen["requests_subtitle"]
    # levels pane: the one level, with vLLM's queue seen at it
    assert len(snap.levels) == 1 and snap.levels[0].level == 8 and snap.levels[0].max_waiting > 0
    assert fmt.level(8) in seen["#sweep-text"], seen["#sweep-text"]
    # GPU pane: no GPU on this machine (and --no-gpu), and it says so
    assert not snap.gpu.available and "no GPU telemetry" in seen["#gpu-text"], seen["#gpu-text"]

    source = seen["source"]
    assert source.finished and not source._thread.is_alive() and source.error is None
    items = list(read_file(str(record)))
    assert not [i for i in items if isinstance(i, LineIssue)]
    ids = Counter(r.id for r in items if isinstance(r, RequestRecord))
    assert len(ids) == REQUESTS and set(ids.values()) == {1}
    assert seen["sink_total"] == REQUESTS
    # what the queue pane drew is what vLLM reported in the record file
    waits = [s.waiting for s in items if isinstance(s, QueueSample) and s.source == "vllm" and s.waiting is not None]
    assert max(waits) == q.max_waiting
