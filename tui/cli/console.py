"""The console as the commands open it: its flags (theme, export folder, rolling window, replay speed) and
``open_console``, shared by `replay`, `live` and the no-argument console (``ConsoleSettings``). Light at import
(the top-level ``--help`` reads the declarations): Textual is imported when a console opens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import tui.core.defaults as D
from tui.cli.declare import CoreDefault, CoreText, Settings, block, flag, path
from tui.cli.options import INPUT_DIR, OUTPUT_DIR, Acceptance, positive_float, positive_int, teaching_flag
from tui.core.exitcodes import ExitCode


@dataclass(frozen=True, kw_only=True)
class ConsoleFlags(Settings):
    """Console options shared by `replay`, `live` and the no-argument console."""

    GROUP = "console"

    theme: str | None = flag("--theme", default=None, metavar="NAME",
                             help="dark, light, high-contrast or one from --themes-dir (default: dark)")
    themes_dir: str | None = path("--themes-dir", role=INPUT_DIR, default=None, metavar="DIR",
                                  help="extra theme TOML files (default: none)")
    export_dir: str = path("--export-dir", role=OUTPUT_DIR, default=CoreDefault("EXPORT_DIR"), metavar="DIR",
                           help=CoreText("where ctrl+s writes the SVG screenshot and JSON snapshot (default "
                                         "./{EXPORT_DIR})"))


@dataclass(frozen=True, kw_only=True)
class Rolling(Settings):
    """The console's rolling window (`replay`, `live`): seconds or requests, not both."""

    GROUP = "rolling window (one of)"

    rolling_seconds: float | None = flag("--rolling-seconds", type=positive_float, default=None, metavar="SECONDS",
                                         exclusive="rolling", help="rolling window length in record time (default 60)")
    rolling_requests: int | None = flag(
        "--rolling-requests", type=positive_int, default=None, metavar="N", exclusive="rolling",
        help="rolling window = the last N requests instead (default: off, the window is in seconds)")


def _speed_help(default_text: str) -> str:
    return f"replay FACTOR times faster than recorded; +/- change it while running ({default_text})"


@dataclass(frozen=True, kw_only=True)
class Speed(Settings):
    """--speed FACTOR or --max-speed (not both): `replay`."""

    GROUP = "replay speed (one of)"

    speed: float | None = flag("--speed", type=positive_float, default=None, metavar="FACTOR", exclusive="speed",
                               help=CoreText(_speed_help("default: {REPLAY_SPEED:g}, as recorded")))
    max_speed: bool = flag("--max-speed", action="store_true", default=False, exclusive="speed",
                           help="replay as fast as possible")


@dataclass(frozen=True, kw_only=True)
class SampleSpeed(Speed):
    """The no-argument console's speed: by default fast enough to show the bundled sample in about a minute."""

    speed: float | None = flag("--speed", type=positive_float, default=None, metavar="FACTOR", exclusive="speed",
                               help=_speed_help("default: fast enough to show the whole sample in about a minute"))


@dataclass(frozen=True, kw_only=True)
class ConsoleSettings(Settings):
    """`servewatch` with no command: the console on the bundled sample run (its flags are the top-level parser's);
    its acceptance settings are the one home's defaults (no flags for them here)."""

    speed: SampleSpeed = block(SampleSpeed)
    console: ConsoleFlags = block(ConsoleFlags)
    teaching: bool = teaching_flag()
    acceptance: Acceptance = block(Acceptance, flags=False)


def open_console(source: Any, console: ConsoleFlags, budget: Any, monitor_config: Any, *,
                 budget_origin: str | None = None, server_log: dict | None = None, judge_at: Any = None,
                 **app_kw: Any) -> int:
    """Run the console on ``source`` until the user quits; returns the verdict's exit code (3 when none).
    ``server_log``: the engine's startup-log figures (``--server-log``), shown in the budget pane; ``judge_at``:
    a replay's flags (issue 35: the file is judged at its run's own settings, re-judged where a flag differs;
    None for a live run, which writes those settings). The console's Monitor is the evidence's
    (``tui.sources.evidence_monitor.JudgedMonitor``): it shows, and exits with, the same state as `report`; its sink
    (``tui.sources.base.DrillSink``) follows a drill's phases."""
    from tui.core.budget.memory import MemoryMissing
    from tui.sources.base import DrillSink
    from tui.sources.evidence_monitor import JudgedMonitor

    monitor = JudgedMonitor(monitor_config, budget=budget, source=source.label, budget_origin=budget_origin,
                            judge_at=judge_at)
    monitor.server_log = dict(server_log) if server_log else None
    sink = DrillSink(monitor)  # a drill's phases and verdict line too (issue 39)
    if isinstance(budget, MemoryMissing):  # the Monitor completes it from the run header; the panes follow snapshots
        budget = None
    app = build_app(source, sink, budget, theme=console.theme, themes_dir=console.themes_dir,
                    export_dir=console.export_dir or D.EXPORT_DIR, **app_kw)
    try:
        code = app.run()
    finally:
        source.stop()
    from tui.core.exitcodes import synthetic_exit
    from tui.core.verdict_settings import settings_exit

    last = sink.snapshot()
    final, settings_why = settings_exit(ExitCode.INSUFFICIENT if code is None else int(code), last.settings)
    final, why = synthetic_exit(final, last.synthetic)
    for said in (settings_why, why):
        if said:
            import sys

            print(f"servewatch: {said}", file=sys.stderr)
    return final


def build_app(source: Any, monitor_sink: Any, budget: Any = None, theme: str | None = None,
              themes_dir: str | os.PathLike | None = None, **kw: Any) -> Any:
    """``tui.app.build_app`` (Textual imported here, when a console opens)."""
    from tui.app import build_app as _build

    return _build(source, monitor_sink, budget, theme=theme, themes_dir=themes_dir, **kw)


__all__ = ["ConsoleFlags", "ConsoleSettings", "Rolling", "SampleSpeed", "Speed", "build_app", "open_console"]
