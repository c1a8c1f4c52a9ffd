"""The console replaying a hostile record file (issue 36, finding 3): a GPU name ending in ``[`` crashed it (exit 70, a
MarkupError), Rich/Textual markup from a record was read as markup, and ESC/CR/LF reached the screen raw. Every
string of the record file and the file's own name carry the payloads of tests/support/hostile.py; the console must
replay it to the end, show the values as text (escaped, visible) and never put a control character on the screen,
in every pane, maximised, with the other latency views and with the help screen open."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from tests.support.hostile import control_bytes, forged_lines, hostile_records, write_jsonl
from tui.app import build_app
from tui.core.monitor import Monitor, MonitorConfig
from tui.sources.base import MonitorSink
from tui.sources.replay import ReplaySource

SIZE = (160, 50)
DEADLINE_S = 20.0


def _screen(app) -> str:
    console = Console(width=app.size.width, file=io.StringIO(), record=True, force_terminal=True, color_system=None)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


async def _until(pilot, pred, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


def _problems(text: str) -> list[str]:
    return [repr(c) for c in sorted(set(control_bytes(text)))] + forged_lines(text)[:2]


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_console_replays_a_hostile_record_file_as_data(tmp_path):
    name = tmp_path / "run[\x1b]0;title\x07 [b]x[ \\.jsonl"
    path = write_jsonl(name, hostile_records(n=12, fail_every=5))
    src = ReplaySource(path, poll_interval=0.02, max_speed=True)
    sink = MonitorSink(Monitor(MonitorConfig(), budget=None, source=src.label))
    app = build_app(src, sink, None, export_dir=tmp_path / "exports")
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: src.finished and app.console_screen.last_seq == sink.snapshot().seq, "replay end")
        await pilot.pause(0.05)
        seen = {"console": _screen(app)}
        for key in ("1", "2", "3", "4", "5", "6", "7"):  # each pane maximised (the key again restores the grid)
            await pilot.press(key)
            await pilot.pause(0.05)
            seen[f"pane {key}"] = _screen(app)
            await pilot.press(key)
        for n in range(4):  # the latency pane's other views
            await pilot.press("l")
            await pilot.pause(0.05)
            seen[f"latency view {n}"] = _screen(app)
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        seen["help"] = _screen(app)
        assert app.return_code in (None, 0)
    bad = {k: _problems(v) for k, v in seen.items() if _problems(v)}
    assert not bad, bad
    text = seen["console"]
    assert "gpu-sample:" in text  # the GPU name is shown, as text
    assert "\\x1b" in text  # its ESC shown visibly
    assert "[bold red]markup[/]" in "".join(seen.values())  # markup from a record shows as written, not read
