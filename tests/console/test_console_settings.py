"""Issue 35: the console (`servewatch replay FILE`) judges a servewatch file at its run's own settings, and a flag
that differs re-judges, shown in its header bar and verdict bar (the core's words), with the exit rule applied on
quit. Before (1a6ea7a) the console judged every file at its flags' defaults: this 11-minute run at 50 ms / 0.99
showed PASS and quit with 0."""

from __future__ import annotations

import argparse

from tests.console.test_app import SIZE, screen_text, settled
from tests.support import evidence_files as E
from tui.app import build_app
from tui.cli.options import add_acceptance_arguments, judge_at_from_args
from tui.cli.report import monitor_config_from_args
from tui.core.monitor import Monitor
from tui.core.slos import Slos
from tui.core.slos import header_block as slo_block
from tui.core.verdict_settings import VerdictSettings, header_block
from tui.sources.base import MonitorSink
from tui.sources.replay import ReplaySource

RUN50 = VerdictSettings(slos=Slos(ttft_ms=50.0), target=0.99, min_window_s=60.0)


def _file(tmp_path):
    recs = E.honest_closed(level=4, seconds=660.0)  # TTFT 200 ms: FAIL at 50 ms, PASS at the default 1000 ms
    recs[0]["verdict_settings"] = header_block(RUN50)
    recs[0]["slo"] = slo_block(RUN50.slos, RUN50.target)
    return E.write(tmp_path / "run50.jsonl", recs)


def _app(path, *flags):
    p = argparse.ArgumentParser()
    add_acceptance_arguments(p)
    args = p.parse_args(list(flags))  # the replay's acceptance flags, parsed as the command parses them
    src = ReplaySource(path, max_speed=True, poll_interval=0.02)
    mon = Monitor(monitor_config_from_args(args), source=src.label, judge_at=judge_at_from_args(args))
    sink = MonitorSink(mon)
    return build_app(src, sink, None), src, sink


async def _quit_code(app, pilot) -> int:
    await pilot.press("q")
    for _ in range(500):
        if app.return_value is not None:
            break
        await pilot.pause(0.02)
    return app.return_value


async def test_the_console_judges_a_file_at_its_runs_settings(tmp_path):
    app, src, sink = _app(_file(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        snap = sink.snapshot()
        assert snap.slos.ttft_ms == 50.0 and snap.verdict.state == "FAIL" and not snap.settings.rejudged
        text = screen_text(app)
        assert "FAIL" in text and "re-judged" not in text
        assert await _quit_code(app, pilot) == 1


async def test_a_flag_that_differs_re_judges_said_in_the_header_and_the_verdict_bar(tmp_path):
    app, src, sink = _app(_file(tmp_path), "--slo-ttft-ms", "1000")
    async with app.run_test(size=(160, 40)) as pilot:
        await settled(pilot, app, src, sink)
        snap = sink.snapshot()
        assert snap.verdict.state == "PASS" and snap.run_verdict.state == "FAIL" and snap.settings.weaker
        text = " ".join(screen_text(app).split())
        assert "re-judged (weaker)" in text  # the header bar
        assert ("re-judged at TTFT <= 1000 ms (the flags given); the run was judged at TTFT <= 50 ms: FAIL; weaker "
                "than the run's settings: exit 3") in text  # the verdict bar, the core's words
        assert await _quit_code(app, pilot) == 3  # PASS on screen, re-judged weaker: never 0


async def test_a_stricter_flag_exits_with_the_re_judged_verdict(tmp_path):
    app, src, sink = _app(_file(tmp_path), "--slo-ttft-ms", "10")
    async with app.run_test(size=(160, 40)) as pilot:
        await settled(pilot, app, src, sink)
        assert sink.snapshot().settings.rejudged and not sink.snapshot().settings.weaker
        assert "re-judged at TTFT <= 10 ms" in " ".join(screen_text(app).split())
        assert await _quit_code(app, pilot) == 1
