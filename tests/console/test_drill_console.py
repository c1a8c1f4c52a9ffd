"""The console on a drill (issue 39): a drill file replayed shows its phases as bands in the good-fraction pane, the
recovery point as a marker, and the drill's line in the verdict bar (its verdict in the bar's box; the console exits
with the drill's code). The file is written by tests/support/drill_files.py from fixed times (no wall clock)."""

from __future__ import annotations

import time

import pytest

from tests.support.drill_files import CFG, fails_until, plan, recovers_at, write_drill
from tui.app import build_app
from tui.core.monitor import Monitor
from tui.core.slos import Slos
from tui.sources.base import DrillSink
from tui.sources.replay import ReplaySource

DEADLINE_S = 20.0


def drill_app(path, label: str = "drill.jsonl"):
    src = ReplaySource(path, max_speed=True, label=label, poll_interval=0.02)
    sink = DrillSink(Monitor(CFG, source=src.label))
    return build_app(src, sink, None, theme="dark"), src, sink


def until_final(src, sink):
    async def run_before(pilot) -> None:
        app = pilot.app
        deadline = time.monotonic() + DEADLINE_S
        while not (src.finished and app.console_screen.last_seq == sink.snapshot().seq):
            if time.monotonic() > deadline:
                raise AssertionError("replay did not finish in time")
            await pilot.pause(0.02)
        await pilot.pause()

    return run_before


def test_drill_phases_and_recovery_point(snap_compare, tmp_path):
    path = write_drill(tmp_path / "drill.jsonl", plan(), recovers_at(4.0))
    app, src, sink = drill_app(path)
    assert snap_compare(app, terminal_size=(120, 40), run_before=until_final(src, sink))


async def test_the_console_shows_the_drill_and_exits_with_its_code(tmp_path):
    for outcome, state, code in ((recovers_at(4.0), "RECOVERED", 0), (fails_until(1e9), "NOT_RECOVERED", 1)):
        path = write_drill(tmp_path / f"{state}.jsonl", plan("fault_cmd"), outcome)
        app, src, sink = drill_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            await until_final(src, sink)(pilot)
            view = sink.snapshot().drill
            assert view is not None and view.state == state
            assert [b.name for b in view.bands] == ["baseline", "disturbance", "recovery"]
            assert (view.recovery_point is not None) == (state == "RECOVERED")
            cells = view.cells(60)
            assert [n for n, _ in cells][0] == "baseline" and [n for n, _ in cells][-1] == "recovery"
            assert sum(1 for _, m in cells if m) == (1 if state == "RECOVERED" else 0)
            bar = str(app.console_screen.query_one("#verdict").render())
            assert f"drill {state.replace('_', ' ')}" in bar
            assert app.console_screen.exit_code() == code
            src.stop()


@pytest.mark.slow
async def test_live_drill_marked_by_the_m_key(tmp_path):
    """`live --drill --fault-manual`: the console's m key marks the operator's act once the baseline has PASSed (the
    key is offered only then); the drill runs its recovery and is judged (nothing was done: RECOVERED)."""
    import asyncio

    from tests.support.slot_server import SlotServer
    from tui.core.drill import DrillPlan
    from tui.core.monitor import MonitorConfig
    from tui.sources.live import LiveSource
    from tui.sources.load.config import LoadConfig

    # 2 req/s: the console and the load share this process; one arrival gap (500 ms) is the delivered-load check's
    # tolerance for dispatch lateness, which a busy 2-core machine used up at 8 and at 4 req/s (the baseline then
    # cannot PASS and the drill ends before the key is offered). Target 0.8: 14 good requests can PASS (alpha 0.2),
    # so the baseline and the hold last 8 s (16 requests).
    cfg_m = MonitorConfig(slos=Slos(ttft_ms=500.0), target=0.8, alpha=0.2, min_window_s=8.0)
    with SlotServer(4, 0.02) as srv:
        cfg = LoadConfig(url=srv.url, mode="open", levels=[2.0], arrival="constant", output_tokens=(4, 4),
                         record=str(tmp_path / "live.jsonl"), progress_interval=0, gpu=False, api_key_env=None,
                         monitor=cfg_m)
        plan = DrillPlan(kind="fault_manual", level=2.0, mode="open", baseline_s=8.0, recovery_s=16.0, window_s=2.0,
                         step_s=0.5, hold_s=8.0, rto_s=4.0)
        source = LiveSource(cfg, drill=plan)
        sink = DrillSink(Monitor(cfg_m, source=source.label))
        app = build_app(source, sink, None)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.console_screen
            deadline = time.monotonic() + 120
            while not source.awaits_mark:
                assert time.monotonic() < deadline and not source.finished, source.last_progress
                assert not screen.check_action("mark_disturbance", ())  # not offered before the baseline PASSes
                await pilot.pause(0.05)
            await pilot.pause(0.3)  # the footer offers the key now
            assert screen.check_action("mark_disturbance", ())
            await pilot.press("m")
            while not source.finished:
                assert time.monotonic() < deadline, source.last_progress
                await pilot.pause(0.1)
            await asyncio.sleep(0)
            deadline = time.monotonic() + 10
            while (sink.snapshot().drill is None or sink.snapshot().drill.state is None) and time.monotonic() < deadline:
                await pilot.pause(0.1)
            view = sink.snapshot().drill
            assert view is not None and view.state == "RECOVERED", view
            assert [b.name for b in view.bands] == ["baseline", "disturbance", "recovery"]
    marks = [x for x in (tmp_path / "live.jsonl").read_text().splitlines() if '"marked_by"' in x]
    assert len(marks) == 1 and "the console's m key" in marks[0]
