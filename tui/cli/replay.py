"""`servewatch replay FILE` and `servewatch` with no arguments: the console on a record file.

Exit code when the console closes: the verdict on screen at that moment
(0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW / UNDECIDED), 2 for bad usage or an unreadable file.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import tui.core.defaults as D
from tui.cli.options import (
    INPUT,
    UsageError,
    add_acceptance_arguments,
    add_budget_arguments,
    add_console_arguments,
    add_console_default_arguments,  # noqa: F401 (the no-argument console's flags live with the shared options)
    add_rolling_arguments,
    add_speed_arguments,
    add_teaching_argument,
    epilog,
    path_arg,
    positive_int,
    slos_from_args,
)
from tui.cli.report import monitor_config_from_args
from tui.core.exitcodes import ExitCode
from tui.core.slos import Slos
from tui.sources.evidence_reader import ReplayPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch replay`."""
    parser.description = "The console replaying a record file (as recorded, faster, or following a growing file)."
    parser.epilog = epilog("servewatch replay run.jsonl --speed 8 --theme light",
                           "servewatch replay run.jsonl --follow --rolling-requests 200",
                           codes="exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, "
                                 "3 INSUFFICIENT_WINDOW or UNDECIDED; 2 bad usage or unreadable input")
    path_arg(parser, "file", role=INPUT, metavar="FILE", help="record file (JSON Lines, format servewatch.record/1)")
    add_speed_arguments(parser, f"default: {D.REPLAY_SPEED:g}, as recorded")
    g = parser.add_argument_group("replay")
    g.add_argument("--follow", action="store_true", help="keep reading as the file grows (like tail -f)")
    g.add_argument("--run", dest="run", type=positive_int, default=None, metavar="N",
                   help="replay run N (1-based) of a file holding several runs (default: none; such a file is "
                        "refused, exit 2, with the list; with --follow the first run, runs appended later left out)")
    path_arg(g, "--baseline", role=INPUT, metavar="FILE", default=None,
                   help="a base run (any importable format): its per-level good fraction is drawn beside this "
                        "run's in the sweep pane (default: none)")
    add_console_arguments(parser)
    add_acceptance_arguments(parser)
    add_rolling_arguments(parser)
    add_budget_arguments(parser)
    add_teaching_argument(parser)
    from tui.cli.chainopts import add_verify_key_argument

    add_verify_key_argument(parser)


def default_sample_path() -> Path | None:
    """The bundled sample run: sample_logs/default.jsonl, else sample_logs/seed.jsonl."""
    from tui.samples import default_sample

    try:
        return Path(default_sample())
    except FileNotFoundError:
        return None


def _sample_speed(path: Path) -> float:
    """A speed that plays the sample in under 45 s (a power of two, at least 1x), so a newcomer sees every verdict
    within a minute."""
    first = last = None
    try:
        from tui.core.records import read_file
        from tui.sources.replay import record_time

        for item in read_file(str(path)):
            t = record_time(item)
            if t is None:
                continue
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
    except OSError:
        return 1.0
    if first is None or last is None:
        return 1.0
    span = last - first
    speed = 1.0
    while span / speed > 45.0 and speed < 1024:
        speed *= 2
    return speed


def run_console(path: str | os.PathLike, args: argparse.Namespace, budget: Any, *, label: str | None = None,
                speed: float = D.REPLAY_SPEED, budget_origin: str | None = None, baseline: dict | None = None,
                plan: ReplayPlan | None = None) -> int:
    from tui.sources.replay import ReplaySource, validate_record_file

    try:
        cfg = monitor_config_from_args(args)
    except ValueError as exc:
        raise UsageError(exc) from None
    follow = bool(getattr(args, "follow", False))
    from tui.sources.evidence_reader import plan_replay  # other tools' files, recognised by content

    plan = plan if plan is not None else plan_replay(os.fspath(path), follow)
    if plan.error:
        raise UsageError(plan.error)
    if plan.refusal:
        raise UsageError(plan.refusal)
    play, line_parser = plan.play, plan.line_parser
    pick = getattr(args, "run", None)
    if line_parser is None and plan.kind is not None and not follow:  # a regular record file: one pass checks
        problem = _replay_check(str(play), pick)  # it holds records, and one run or --run N (never merged)
        if problem:
            raise UsageError(problem.replace(str(play), os.fspath(path)))
    elif line_parser is None:  # a file to wait for, a pipe, a special file: said before reading
        problem = validate_record_file(play, follow=follow)
        if problem:
            raise UsageError(problem.replace(str(play), os.fspath(path)))
        if not follow:  # several runs are never merged: refused without --run, listed
            _check_runs(str(play), pick)
    from tui.cli.chainopts import verify_key

    key, key_name = verify_key(args)  # a missing key variable: bad usage
    source = ReplaySource(play, speed=speed, max_speed=bool(getattr(args, "max_speed", False)),
                          follow=follow, label=label or os.fspath(path), line_parser=line_parser, run=pick,
                          verify_key=key, key_name=key_name)
    from tui.cli.options import judge_at_from_args

    return open_console(source, args, budget, cfg, budget_origin=budget_origin, baseline=baseline,
                        judge_at=judge_at_from_args(args))


def _replay_check(play: str, pick: int | None) -> str | None:
    """``replay_check`` with several runs (or --run N beyond them) refused in one line (exit 2, the list)."""
    from tui.cli.report import runs_problem
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.evidence_reader import replay_check

    try:
        return replay_check(play, pick)
    except (SeveralRuns, RunNotInFile) as exc:
        raise runs_problem(exc) from None
    except OSError as exc:
        return f"{play}: cannot read ({exc.strerror or exc})"


def _check_runs(play: str, pick: int | None) -> None:
    """Refuse (exit 2, with the list) a file of several runs without --run, or --run N beyond them."""
    from tui.cli.report import runs_problem
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.evidence_reader import check_runs

    try:
        check_runs(play, pick)
    except (SeveralRuns, RunNotInFile) as exc:
        raise runs_problem(exc) from None
    except OSError as exc:
        raise UsageError(f"cannot read {play}: {exc.strerror or exc}") from None


def open_console(source: Any, args: argparse.Namespace, budget: Any, monitor_config: Any, *,
                 budget_origin: str | None = None, server_log: dict | None = None, judge_at: Any = None,
                 **app_kw: Any) -> int:
    """Run the console on ``source`` until the user quits; returns the verdict's exit code (3 when none).
    ``server_log``: the engine's startup-log figures (``--server-log``), shown in the budget pane; ``judge_at``:
    a replay's flags (issue 35: the file is judged at its run's own settings, re-judged where a flag differs;
    None for a live run, which writes those settings)."""
    from tui.core.importers.limits import limit_snapshot
    from tui.core.monitor import Monitor
    from tui.sources.base import DrillSink

    class LimitedSink(DrillSink):
        """Every verdict limited by what an imported source supports (no time axis, a sample): the
        console shows, and exits with, the same state as `report`; a drill's phases and verdict line too."""

        def snapshot(self):
            return limit_snapshot(super().snapshot())

    from tui.core.budget.memory import MemoryMissing

    monitor = Monitor(monitor_config, budget=budget, source=source.label, budget_origin=budget_origin,
                      judge_at=judge_at)
    monitor.server_log = dict(server_log) if server_log else None
    sink = LimitedSink(monitor)
    if isinstance(budget, MemoryMissing):  # the Monitor completes it from the run header; the panes follow snapshots
        budget = None
    app = build_app(source, sink, budget, theme=getattr(args, "theme", None),
                    themes_dir=getattr(args, "themes_dir", None),
                    export_dir=getattr(args, "export_dir", None) or D.EXPORT_DIR, **app_kw)
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


def run(args: argparse.Namespace) -> int:
    """`servewatch replay FILE`: the console replaying a record file."""
    from tui.sources.evidence_reader import WATCH, plan_replay

    plan = plan_replay(args.file, bool(args.follow))  # the one probe: a watch recording, records, an export
    if plan.kind == WATCH:  # a `servewatch watch --record` file
        from tui.cli.watch import replay_watch_file

        return replay_watch_file(args.file, args)
    from tui.cli.budget import view_budget

    try:
        budget, origin = view_budget(args, [args.file])
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    baseline = None
    if getattr(args, "baseline", None):
        baseline = load_baseline(args.baseline, args.slo_ttft_ms, slos_from_args(args))
        if isinstance(baseline, str):
            raise UsageError(baseline)
    return run_console(args.file, args, budget, speed=float(args.speed or D.REPLAY_SPEED), budget_origin=origin,
                       baseline=baseline, plan=plan)


def load_baseline(path: str, slo_ttft_ms: float | None, slos: Slos | None = None) -> dict | str:
    """The base run's per-level good fractions for the sweep pane, or a one-line problem."""
    from tui.cli.compare import NoRequests, load_run
    from tui.core.compare import baseline_levels
    from tui.sources.importing import ImportProblem

    if not os.path.isfile(path):
        return f"cannot read baseline {path}: {'is a folder' if os.path.isdir(path) else 'no such file'}"
    try:
        run = load_run(path)
    except OSError as exc:
        return f"cannot read baseline {path}: {exc.strerror or exc}"
    except (ImportProblem, NoRequests) as exc:
        return str(exc)
    return baseline_levels(run["requests"], D.SLO_TTFT_MS if slo_ttft_ms is None else slo_ttft_ms, run["header"],
                           label=path, slos=slos)


def run_default(args: argparse.Namespace) -> int:
    """`servewatch` with no command: the console replaying the bundled sample run. The budget is unknown for
    the recorded real run (nobody gave one for it); the teaching case shows with the teaching log or --teaching."""
    from tui.cli.budget import view_budget

    path = default_sample_path()
    if path is None:
        raise UsageError("the bundled sample run (sample_logs/default.jsonl or seed.jsonl) was not found")
    speed = getattr(args, "speed", None)
    if speed is None:
        speed = _sample_speed(path)
    try:
        budget, origin = view_budget(args, [path])
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    code = run_console(path, args, budget, label=f"sample_logs/{path.name}", speed=float(speed), budget_origin=origin)
    # the bundled sample is a demonstration, not the user's evidence: quitting it is a success (0), whatever its
    # verdict (`replay FILE` keeps the verdict's code); a console ended by its driver (129, 143) or Ctrl-C (130)
    # keeps that code
    return int(ExitCode.PASS) if code in (ExitCode.PASS, ExitCode.FAIL, ExitCode.INSUFFICIENT) else code


def build_app(source: Any, monitor_sink: Any, budget: Any = None, theme: str | None = None,
              themes_dir: str | os.PathLike | None = None, **kw: Any):
    """Re-exported from tui.app for the live mode."""
    from tui.app import build_app as _build

    return _build(source, monitor_sink, budget, theme=theme, themes_dir=themes_dir, **kw)
