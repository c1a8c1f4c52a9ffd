"""The console in live mode (Pilot) against the real peer: llama-server + Gemma 3 270M, 4 slots, --metrics.

Small on purpose (2-core machines): a closed loop at concurrency 8 on the 4 slots, 16-token prompts,
16 output tokens with ignore_eos, 24 requests, no GPU sampler. Eight clients on four slots means half of
them wait for a slot, so the server's queue (llamacpp:requests_deferred) fills while the Good-fraction
pane counts requests. Waiting is always a condition polled through ``pilot.pause`` with a bounded
deadline; nothing here asserts a wall-clock speed.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

from tests.support.calibrate import bound_s, measure_peer
from tui.app import build_app
from tui.core.budget import teaching_case
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import LineIssue, RequestRecord, read_file
from tui.sources.base import MonitorSink
from tui.sources.live import LiveSource
from tui.sources.load import LoadConfig
from tui.widgets import fmt
from tui.widgets.bars import HeaderBar

SIZE = (120, 40)
REQUESTS = 24
DEADLINE_S = 60.0  # a bound for a failing run; a passing one takes a few seconds


async def wait_for(pilot, pred, what: str, source: LiveSource, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert source.error is None, f"the live run failed: {source.error}"
        if time.monotonic() > deadline:
            snap = pilot.app.console_screen.snapshot
            raise AssertionError(f"timed out waiting for {what}; last progress: {source.last_progress!r}; "
                                 f"good pane: {pilot.app.query_one('#good-text').visual.plain!r}; "
                                 f"queue: {None if snap is None else (snap.queue.waiting, snap.queue.running, snap.queue.client_in_flight)}")
        await pilot.pause(0.05)


async def test_live_console_fills_the_good_fraction_and_queue_panes(llama_server, tmp_path):
    record = tmp_path / "live.jsonl"
    # the bound of a failing run, from this machine's speed now (issue 18): 24 requests, 16 tokens each
    speed = await asyncio.to_thread(measure_peer, llama_server.openai_url, prompt_words=16, output_tokens=16)
    bound = max(DEADLINE_S, bound_s(speed, REQUESTS))
    cfg = LoadConfig(url=llama_server.base_url, mode="closed", levels=[8], input_tokens=(16, 16),
                     output_tokens=(16, 16), ignore_eos=True, requests=REQUESTS, record=str(record),
                     metrics_interval=0.2, progress_interval=0, gpu=False, api_key_env=None, read_timeout=120.0)
    source = LiveSource(cfg)
    budget = teaching_case()
    sink = MonitorSink(Monitor(MonitorConfig(), budget=budget, source=source.label))
    app = build_app(source, sink, budget, export_dir=tmp_path / "exports")
    shown = re.compile(r"\d+\.\d%\s+n [\d,]+")

    async with app.run_test(size=SIZE) as pilot:

        def filled() -> bool:
            snap = app.console_screen.snapshot  # what the panes show now
            if snap is None:
                return False
            q = snap.queue
            busy = max(q.waiting_series, default=0.0) > 0 or max(q.running_series, default=0.0) > 0
            measured = snap.requests_total - snap.warmup_total
            return (measured > 0 and q.source == "llamacpp" and busy
                    and shown.search(app.query_one("#good-text").visual.plain) is not None)

        await wait_for(pilot, filled, "requests in the Good-fraction pane and the llama.cpp queue filling", source,
                       timeout=bound)

        snap = app.console_screen.snapshot
        assert "LIVE" in app.query_one(HeaderBar).visual.plain
        # Good fraction pane: the cumulative figure and its n, as the snapshot holds them
        good = app.query_one("#good-text").visual.plain
        g = snap.cumulative.good
        assert g.n > 0 and f"{fmt.pct(g.fraction)}  n {g.n:,}" in good, good
        assert f"target {fmt.pct(snap.target, 0)}" in good
        # Queue pane: the server's engine, its waiting and running figures, the client's in-flight count
        queue = app.query_one("#queue-text").visual.plain
        q = snap.queue
        assert "server  llamacpp" in queue, queue
        for label, value in (("waiting", q.waiting), ("running", q.running), ("in-flight", q.client_in_flight)):
            assert value is not None, (label, q)
            row = next(line for line in queue.splitlines() if line.startswith(label))
            assert row.split()[1] == fmt.num(value), (label, row)
        assert 0 <= q.client_in_flight <= 8

        await pilot.press("q")
        deadline = time.monotonic() + DEADLINE_S
        while app.return_value is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert app.return_value in (0, 1, 3)  # the verdict on screen when the console closed

    # q stopped the load (in-flight requests, if any, recorded as cancelled) and the thread has ended
    assert source.finished and not source._thread.is_alive()
    assert source.error is None
    items = list(read_file(str(record)))
    assert not [i for i in items if isinstance(i, LineIssue)]
    ids = Counter(r.id for r in items if isinstance(r, RequestRecord))
    assert ids and all(n == 1 for n in ids.values()), [i for i, n in ids.items() if n != 1]
    assert len(ids) <= REQUESTS
    # the console saw every recorded request, each once
    assert sink.snapshot().requests_total == len(ids)
