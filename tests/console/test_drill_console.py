"""The console on a drill (issue 39): a drill file replayed shows its phases as bands in the good-fraction pane, the
recovery point as a marker, and the drill's line in the verdict bar (its verdict in the bar's box; the console exits
with the drill's code). The file is written by tests/support/drill_files.py from fixed times (no wall clock)."""

from __future__ import annotations

import time

from tests.support.drill_files import CFG, fails_until, plan, recovers_at, write_drill
from tui.app import build_app
from tui.core.monitor import Monitor
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
