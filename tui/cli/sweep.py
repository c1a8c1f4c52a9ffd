"""`servewatch sweep`: step the load up from low until the gate breaks; measured capacity beside the candidate."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace

from tui.cli.declare import Settings, block, flag, path, switch
from tui.cli.loadtest import SweepLoadSettings
from tui.cli.options import OUTPUT, UsageError, epilog, percentiles_flag, positive_float, positive_int
from tui.core.defaults import SEARCH_BUDGET_MINUTES, SEARCH_PRECISION
from tui.core.search import SearchSettings, parse_precision
from tui.core.sweep import DEFAULT_MAX_LEVEL, default_ladder, format_sweep, sweep_summary


def _precision(text: str) -> float:
    try:
        return parse_precision(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True, kw_only=True)
class Sweep(Settings):
    GROUP = "sweep (each step runs until its verdict is PASS or FAIL, at most --max-step-seconds)"

    max_level: int | None = flag(
        "--max-level", type=positive_int, default=None, metavar="N",
        help=f"top of the default ladder 1,2,4,... (default: twice the memory-only candidate when budget inputs are "
             f"given, else {DEFAULT_MAX_LEVEL})")
    continue_after_fail: bool = switch("--continue-after-fail",
                                       help="keep climbing after a step FAILs (default: stop there)")
    sweep_json: str | None = path("--sweep-json", role=OUTPUT, default=None, metavar="FILE",
                                  help="also write the sweep table as JSON (default: none)")


@dataclass(frozen=True, kw_only=True)
class Search(Settings):
    GROUP = ("capacity search (--search: after the ladder, bisect between its last PASS and first FAIL; each probe a "
             "full step judged by the same verdict)")

    search: bool = switch("--search",
                          help="bisect the capacity bracket after the ladder (default: off, the ladder only)")
    precision: float | None = flag(
        "--precision", type=_precision, default=None, metavar="FRACTION",
        help=f"stop when (high - low) / low is within this, 10%% or 0.1 (default: {SEARCH_PRECISION * 100:g}%%; "
             "concurrency also stops at adjacent integers)")
    search_budget_minutes: float | None = flag(
        "--search-budget-minutes", type=positive_float, default=None, metavar="MINUTES",
        help=f"no probe is started that could run past this much probing, a probe's cap being --max-step-seconds "
             f"(default: {SEARCH_BUDGET_MINUTES:g})")


@dataclass(frozen=True, kw_only=True)
class SweepSettings(SweepLoadSettings):
    """`servewatch sweep`: the flags of `run` (no trace; the ladder optional) plus the sweep's own."""

    DESCRIPTION = ("Capacity sweep: step the load up from low until the gate breaks; the measured capacity beside "
                   "the memory-only candidate.")
    EPILOG = epilog("servewatch sweep --url http://127.0.0.1:8080 --params 8B --gpu-gib 80 --max-step-seconds 900",
                    "servewatch sweep --url http://127.0.0.1:8080 --concurrency 1,2,4,8,16 --sweep-json sweep.json",
                    "servewatch sweep --url http://127.0.0.1:8080 --rate 1,2,4,8 --search --precision 10%")

    sweep: Sweep = block(Sweep)
    capacity_search: Search = block(Search)
    percentiles: tuple[float, ...] | None = percentiles_flag()


def run(settings: SweepSettings) -> int:
    """`servewatch sweep`."""
    from tui.cli.budgetflags import budget_from_args, budget_given, budget_title
    from tui.cli.evidence_files import analyse_file
    from tui.cli.loadtest import config_or_usage, record_run, step_plan
    from tui.cli.loadtest import say as _print
    from tui.core.budget.memory import MEMORY_FLAGS, MemoryMissing
    from tui.sources.evidence_reader import LAST_RUN

    given = None
    try:  # no budget is made up: without budget inputs the ladder does not depend on any model
        if budget_given(settings.budget):
            given = budget_from_args(settings.budget)
    except (ValueError, OSError) as exc:
        raise UsageError(f"bad budget: {exc}") from None
    # without its memory input the budget is completed from the run header (the engine's KV space, NVML) after
    # the run; the ladder cannot lean on a candidate not known yet
    budget = None if isinstance(given, MemoryMissing) else given
    load = settings.load
    if load.concurrency is None and load.rate is None:
        ladder = default_ladder(budget.candidate if budget is not None else None, settings.sweep.max_level)
        settings = replace(settings, load=replace(load, concurrency=ladder))
    cfg = config_or_usage(settings)
    cfg.until_decided = True  # --requests / --duration, when given, only bound a step further
    cfg.stop_on_fail = not settings.sweep.continue_after_fail
    search = settings.capacity_search
    if not search.search and (search.precision is not None or search.search_budget_minutes is not None):
        raise UsageError("--precision and --search-budget-minutes bound the capacity search: give --search too")
    precision = SEARCH_PRECISION if search.precision is None else search.precision
    budget_minutes = SEARCH_BUDGET_MINUTES if search.search_budget_minutes is None else search.search_budget_minutes
    if search.search:
        if cfg.trace is not None:
            raise UsageError("--search bisects the ladder's levels: not with --trace (one level, the trace's rate)")
        cfg.search = SearchSettings(precision, budget_minutes * 60.0, (cfg.step_duration or 0.0) * cfg.rounds)
    unit = cfg.level_unit  # concurrency, req/s; sessions, sessions/s (issue 23)
    if isinstance(given, MemoryMissing):
        about = (f"budget: {given.inputs.model or 'the model'}: memory input missing (read from the run header when "
                 f"the server states its KV space, or give {MEMORY_FLAGS}); no candidate for the ladder")
    elif budget is None:
        about = "budget: unknown (give --params/--config/--budget for a memory-only candidate)"
    else:
        about = f"budget: {budget_title(budget)}, memory-only candidate {budget.candidate}"
    _print(f"servewatch sweep: {unit} ladder {','.join(f'{v:g}' for v in cfg.levels)}; {step_plan(cfg)}; {about}")
    if cfg.search is not None:
        _print(f"search: then bisect between the last PASS and the first FAIL to within {precision:.0%} of the "
               f"lower end, probes for at most {budget_minutes:g} min (each at most "
               f"{cfg.search.probe_cap_s:g} s)")
    recorded = record_run(cfg)
    if recorded.failed is not None:
        return recorded.failed
    record = cfg.record
    assert record is not None  # record_run named it
    acceptance = settings.acceptance
    mon = analyse_file(record, acceptance.monitor_config(), given, pick_run=LAST_RUN,  # this run only,
                       judge_at=acceptance.judge_at())  # at the settings its header states (the flags')
    summary = sweep_summary(mon.snapshot(), mon.budget if isinstance(given, MemoryMissing) else budget, record)
    summary["record"] = record
    if summary.get("capacity_bracket") is not None:
        from tui.core.grade import acceptance_grade

        weak = acceptance_grade(cfg.monitor)
        if weak:  # short windows (quick checks) say so beside the bracket
            summary["capacity_bracket"]["not_acceptance_grade"] = weak
    _print("")
    sys.stdout.write(format_sweep(summary))
    sweep_json = settings.sweep.sweep_json
    if sweep_json:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(sweep_json, json.dumps(summary, indent=2, default=str))
        except OSError as exc:
            raise UsageError(f"cannot write {sweep_json}: {exc.strerror or exc}") from None
        _print(f"sweep table written to {sweep_json}")
    _print(f"records: {record} (servewatch report / replay / accept read it)")
    return recorded.stop_code(summary["exit_code"])  # stopped by Ctrl-C / SIGTERM: 130 / 143 after the summary
