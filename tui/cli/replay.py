"""`servewatch replay FILE` and `servewatch` with no arguments: the console on a record file.

Exit code when the console closes: the verdict on screen at that moment
(0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW / UNDECIDED), 2 for bad usage or an unreadable file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tui.core.defaults as D
from tui.cli.budgetflags import BudgetFlags
from tui.cli.chainopts import verify_key_flag
from tui.cli.console import ConsoleFlags, ConsoleSettings, Rolling, Speed
from tui.cli.declare import Settings, block, flag, path, positional, switch
from tui.cli.options import INPUT, Acceptance, UsageError, epilog, percentiles_flag, positive_int, teaching_flag
from tui.core.exitcodes import ExitCode
from tui.core.slos import Slos
from tui.sources.evidence_reader import ReplayPlan

__all__ = ["ConsoleSettings", "ReplaySettings", "run", "run_default"]


@dataclass(frozen=True, kw_only=True)
class Replaying(Settings):
    GROUP = "replay"

    follow: bool = switch("--follow", help="keep reading as the file grows (like tail -f)")
    run: int | None = flag("--run", type=positive_int, default=None, metavar="N",
                           help="replay run N (1-based) of a file holding several runs (default: none; such a file is "
                                "refused, exit 2, with the list; with --follow the first run, runs appended later left "
                                "out)")
    baseline: str | None = path("--baseline", role=INPUT, metavar="FILE", default=None,
                                help="a base run (any importable format): its per-level good fraction is drawn beside "
                                     "this run's in the sweep pane (default: none)")


@dataclass(frozen=True, kw_only=True)
class ReplaySettings(Settings):
    """`servewatch replay FILE`."""

    DESCRIPTION = "The console replaying a record file (as recorded, faster, or following a growing file)."
    EPILOG = epilog("servewatch replay run.jsonl --speed 8 --theme light",
                    "servewatch replay run.jsonl --follow --rolling-requests 200",
                    codes="exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, "
                          "3 INSUFFICIENT_WINDOW or UNDECIDED; 2 bad usage or unreadable input")

    file: str = positional("file", role=INPUT, metavar="FILE",
                           help="record file (JSON Lines, format servewatch.record/1)")
    speed: Speed = block(Speed)
    replay: Replaying = block(Replaying)
    console: ConsoleFlags = block(ConsoleFlags)
    acceptance: Acceptance = block(Acceptance)
    rolling: Rolling = block(Rolling)
    budget: BudgetFlags = block(BudgetFlags)
    teaching: bool = teaching_flag()
    verify_key_env: str | None = verify_key_flag()
    percentiles: tuple[float, ...] | None = percentiles_flag()


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


def run_console(path: str | os.PathLike, settings: ReplaySettings, budget: Any, *, label: str | None = None,
                speed: float = D.REPLAY_SPEED, budget_origin: str | None = None, baseline: dict | None = None,
                plan: ReplayPlan | None = None) -> int:
    """The console replaying ``path`` with ``settings`` (the no-argument console's are a replay's of the sample)."""
    from tui.sources.replay import ReplaySource, validate_record_file

    try:
        cfg = settings.acceptance.monitor_config(settings.rolling.rolling_seconds, settings.rolling.rolling_requests)
    except ValueError as exc:
        raise UsageError(exc) from None
    follow = settings.replay.follow
    from tui.sources.evidence_reader import plan_replay  # other tools' files, recognised by content

    plan = plan if plan is not None else plan_replay(os.fspath(path), follow)
    if plan.error:
        raise UsageError(plan.error)
    if plan.refusal:
        raise UsageError(plan.refusal)
    play, line_parser = plan.play, plan.line_parser
    pick = settings.replay.run
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
    from tui.cli.console import open_console

    key, key_name = verify_key(settings.verify_key_env)  # a missing key variable: bad usage
    source = ReplaySource(play, speed=speed, max_speed=settings.speed.max_speed, follow=follow,
                          label=label or os.fspath(path), line_parser=line_parser, run=pick, verify_key=key,
                          key_name=key_name)
    return open_console(source, settings.console, budget, cfg, budget_origin=budget_origin, baseline=baseline,
                        judge_at=settings.acceptance.judge_at())


def _replay_check(play: str, pick: int | None) -> str | None:
    """``replay_check`` with several runs (or --run N beyond them) refused in one line (exit 2, the list)."""
    from tui.cli.evidence_files import runs_problem
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
    from tui.cli.evidence_files import runs_problem
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.evidence_reader import check_runs

    try:
        check_runs(play, pick)
    except (SeveralRuns, RunNotInFile) as exc:
        raise runs_problem(exc) from None
    except OSError as exc:
        raise UsageError(f"cannot read {play}: {exc.strerror or exc}") from None


def run(settings: ReplaySettings) -> int:
    """`servewatch replay FILE`: the console replaying a record file."""
    from tui.sources.evidence_reader import WATCH, plan_replay

    plan = plan_replay(settings.file, settings.replay.follow)  # the one probe: a watch recording, records, an export
    if plan.kind == WATCH:  # a `servewatch watch --record` file
        from tui.cli.watchfiles import replay_watch_file

        return replay_watch_file(settings.file, settings.acceptance, settings.console.theme)
    from tui.cli.budgetflags import view_budget

    try:
        budget, origin = view_budget(settings.budget, settings.teaching, [settings.file])
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    baseline = None
    if settings.replay.baseline:
        found = load_baseline(settings.replay.baseline, settings.acceptance.slos.ttft_ms, settings.acceptance.slos)
        if isinstance(found, str):
            raise UsageError(found)
        baseline = found
    return run_console(settings.file, settings, budget, speed=float(settings.speed.speed or D.REPLAY_SPEED),
                       budget_origin=origin, baseline=baseline, plan=plan)


def load_baseline(path: str, slo_ttft_ms: float | None, slos: Slos | None = None) -> dict | str:
    """The base run's per-level good fractions for the sweep pane, or a one-line problem."""
    from tui.core.compare import baseline_levels
    from tui.sources.evidence_monitor import NoRequests, load_run
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


def run_default(settings: ConsoleSettings) -> int:
    """`servewatch` with no command: the console replaying the bundled sample run. The budget is unknown for
    the recorded real run (nobody gave one for it); the teaching case shows with the teaching log or --teaching."""
    from tui.cli.budgetflags import view_budget

    path = default_sample_path()
    if path is None:
        raise UsageError("the bundled sample run (sample_logs/default.jsonl or seed.jsonl) was not found")
    speed = settings.speed.speed
    if speed is None:
        speed = _sample_speed(path)
    # the sample replayed as `replay` would with the console's flags (its acceptance settings: the defaults)
    replay = ReplaySettings(file=str(path), speed=settings.speed, console=settings.console,
                            acceptance=settings.acceptance, teaching=settings.teaching)
    try:
        budget, origin = view_budget(replay.budget, replay.teaching, [path])
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    code = run_console(path, replay, budget, label=f"sample_logs/{path.name}", speed=float(speed),
                       budget_origin=origin)
    # the bundled sample is a demonstration, not the user's evidence: quitting it is a success (0), whatever its
    # verdict (`replay FILE` keeps the verdict's code); a console ended by its driver (129, 143) or Ctrl-C (130)
    # keeps that code
    return int(ExitCode.PASS) if code in (ExitCode.PASS, ExitCode.FAIL, ExitCode.INSUFFICIENT) else code
