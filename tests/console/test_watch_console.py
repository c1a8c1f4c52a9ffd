"""The console in watch mode: Pilot against the in-test metrics server, replay of a watch record
file (same verdict as `report`), and an SVG snapshot of a recorded watch."""

from __future__ import annotations

import json
import math
import time

import pytest

from tests.support.watch_server import MetricsServer
from tui.app import build_app
from tui.core import watch as W
from tui.core.slos import Slos
from tui.sources.watch import MetricsWatcher, WatchSession, make_client
from tui.sources.watch_console import WatchConsoleSource, WatchFileSource, WatchSink
from tui.widgets.bars import HeaderBar
from tui.widgets.panes import GoodFractionPane

SIZE = (120, 40)
DEADLINE_S = 30.0


async def _until(pilot, pred, what, timeout=DEADLINE_S):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def _text(widget) -> str:
    return str(widget.render())


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_console_watches_a_server(tmp_path):
    with MetricsServer("vllm") as ms:
        cfg = W.WatchConfig(slos=Slos(ttft_ms=1000.0), min_window_s=0.0, fail_min_s=0.0)
        source = WatchConsoleSource(
            session=WatchSession(MetricsWatcher(ms.url, client=None), cfg, interval=0.1,
                                 header={"type": "run", "schema_version": 1}),
            client_factory=lambda: make_client({}),  # made on the source's own loop
        )
        sink = WatchSink(source)
        app = build_app(source, sink, None, export_dir=tmp_path / "exports")
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: source.session.watcher.engine == "vllm", "the first scrape")
            ms.state.waiting = 5
            ms.state.running = 3
            ms.state.observe(fast=400, slow=4)
            await _until(pilot, lambda: app.console_screen.snapshot is not None and app.console_screen.snapshot.cumulative.good.n >= 404,
                         "the requests to be counted")
            snap = app.console_screen.snapshot
            assert snap.queue.source == "vllm (server)" and snap.queue.waiting == 5 and snap.queue.running == 3
            assert snap.cumulative.good.fraction == pytest.approx(400 / 404)
            good_text = _text(app.query_one(GoodFractionPane).query_one("#good-text"))
            assert "server-side TTFT: from arrival at the server" in " ".join(good_text.split())
            # one replica, judged from when the watch started: said in the header, always on screen
            assert "WATCH one replica, from watch start" in _text(app.query_one(HeaderBar))
            # the queue grew (0 -> 5) while the requests were counted: never PASS
            assert snap.verdict.state != "PASS" and "queue grew" in snap.verdict.reason
            header = _text(app.query_one(HeaderBar))
            assert "WATCH" in header
            await pilot.press("q")
    # nothing but the metrics page was asked for
    assert set(ms.hits) == {ms.path}


def _watch_file(path, n_windows=24, slow_every=0):
    lines = [json.dumps({"type": "run", "schema": "servewatch.record/1", "schema_version": 1, "synthetic": False,
                         "source": {"kind": "watch", "tool": "servewatch", "version": "0.1.0", "file": None,
                                    "sha256": None, "derived": []},
                         "watch": {"scope": "the whole fleet Prometheus scrapes matching {model_name=\"m\"}"}})]
    for k in range(n_windows):
        slow = 3.0 if slow_every and k % slow_every == 0 else 0.0
        ttft = ((0.1, 280.0), (0.25, 290.0), (0.5, 295.0), (1.0, 298.0), (2.5, 298.0), (math.inf, 298.0 + slow))
        w = W.Window(1_767_225_600.0 + 30 * k, 1_767_225_630.0 + 30 * k, "vllm", "prometheus", ttft=ttft,
                     failed=1.0, waiting_start=2.0, waiting_end=2.0, running=7.0, kv_cache=0.41)
        lines.append(json.dumps(W.window_to_record(w)))
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_replay_of_a_watch_file_gives_the_report_verdict(tmp_path):
    p = _watch_file(tmp_path / "w.jsonl")
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000.0), min_window_s=600.0)
    source = WatchFileSource(str(p), cfg)
    sink = WatchSink(source)
    app = build_app(source, sink, None, export_dir=tmp_path / "exports")
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: source.finished and app.console_screen.snapshot is not None and app.console_screen.last_seq == sink.snapshot().seq,
                     "the replay")
        state = app.console_screen.snapshot.verdict.state
        await pilot.press("q")
    from tui.cli.watch import judge_watch_file

    j, engine, _h, problems = judge_watch_file(str(p), cfg)
    assert not problems and engine == "vllm"
    assert state == j.verdict().state == "PASS"


def test_watch_snapshot(snap_compare, tmp_path):
    p = _watch_file(tmp_path / "w.jsonl", slow_every=5)
    cfg = W.WatchConfig(slos=Slos(ttft_ms=750.0), min_window_s=600.0)
    source = WatchFileSource(str(p), cfg, label="watch-demo.jsonl")
    sink = WatchSink(source)
    app = build_app(source, sink, None, theme="dark")

    async def run_before(pilot):
        end = time.monotonic() + DEADLINE_S
        while not (source.finished and app.console_screen.last_seq == sink.snapshot().seq):
            if time.monotonic() > end:
                raise AssertionError("replay did not finish")
            await pilot.pause(0.02)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_console_from_command_line_arguments(tmp_path):
    """The `servewatch watch` console path: arguments -> source -> console, recording as it goes."""
    from tui.cli import settings_of

    rec = tmp_path / "w.jsonl"
    with MetricsServer("sglang") as ms:
        args = settings_of(["watch", "--metrics-url", ms.url, "--interval", "0.1",
                            "--min-window-minutes", "0", "--record", str(rec)])
        from tui.sources.recorder import Recorder

        recorder = Recorder(str(rec))
        from tui.cli.watch import session_settings

        source = WatchConsoleSource(session_settings(args), emit=recorder.write)
        sink = WatchSink(source)
        app = build_app(source, sink, None, export_dir=tmp_path / "exports")
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: source.session is not None and source.session.windows_recorded >= 1,
                         "a first window")
            ms.state.observe(fast=300)
            await _until(pilot, lambda: app.console_screen.snapshot is not None and app.console_screen.snapshot.cumulative.good.n >= 300,
                         "the requests")
            assert "one replica" in _text(app.query_one(HeaderBar))
            await pilot.press("q")
        recorder.close()
    kinds = [json.loads(x)["type"] for x in rec.read_text().splitlines()]
    assert kinds[0] == "run" and "watch" in kinds


def test_the_watch_console_clock_runs_from_the_start_of_the_watch():
    """issue 37: the watch console's elapsed clock stayed at 0:00:00 (it showed the judged window's length, zero until
    the first window): it runs from the moment the watch started."""

    class Clock:
        t = 1_000_000.0

        def __call__(self) -> float:
            return self.t

    clock = Clock()
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000.0), min_window_s=600.0, fail_min_s=60.0)
    session = WatchSession(MetricsWatcher("http://127.0.0.1:9/metrics", client=None), cfg, clock=clock,
                           header={"type": "run", "schema_version": 1})
    source = WatchConsoleSource(session=session, client_factory=lambda: make_client({}))
    sink = WatchSink(source)
    session.started_at = clock()
    clock.t += 83.0
    assert sink.snapshot().run_elapsed_s == pytest.approx(83.0)
