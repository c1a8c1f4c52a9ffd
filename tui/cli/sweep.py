"""`servewatch sweep`: step the load up from low until the gate breaks; measured capacity beside the candidate."""

from __future__ import annotations

import argparse
import json
import sys

from tui.cli.options import OUTPUT, UsageError, epilog, path_arg, positive_float, positive_int
from tui.core.defaults import SEARCH_BUDGET_MINUTES, SEARCH_PRECISION
from tui.core.search import SearchSettings, parse_precision
from tui.core.sweep import DEFAULT_MAX_LEVEL, default_ladder, format_sweep, sweep_summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch sweep`: those of `run` (the ladder optional) plus the sweep's own."""
    from tui.cli.loadtest import add_load_arguments

    parser.description = ("Capacity sweep: step the load up from low until the gate breaks; the measured capacity "
                          "beside the memory-only candidate.")
    parser.epilog = epilog("servewatch sweep --url http://127.0.0.1:8080 --params 8B --gpu-gib 80 --max-step-seconds 900",
                           "servewatch sweep --url http://127.0.0.1:8080 --concurrency 1,2,4,8,16 --sweep-json sweep.json",
                           "servewatch sweep --url http://127.0.0.1:8080 --rate 1,2,4,8 --search --precision 10%")
    add_load_arguments(parser)
    for group in parser._mutually_exclusive_groups:  # the ladder may be left to the default
        group.required = False
    s = parser.add_argument_group("sweep (each step runs until its verdict is PASS or FAIL, at most "
                                  "--max-step-seconds)")
    s.add_argument("--max-level", type=positive_int, default=None, metavar="N",
                   help=f"top of the default ladder 1,2,4,... (default: twice the memory-only candidate when "
                        f"budget inputs are given, else {DEFAULT_MAX_LEVEL})")
    s.add_argument("--continue-after-fail", action="store_true",
                   help="keep climbing after a step FAILs (default: stop there)")
    path_arg(s, "--sweep-json", role=OUTPUT, metavar="FILE", help="also write the sweep table as JSON (default: none)")
    q = parser.add_argument_group("capacity search (--search: after the ladder, bisect between its last PASS and first "
                                  "FAIL; each probe a full step judged by the same verdict)")
    q.add_argument("--search", action="store_true",
                   help="bisect the capacity bracket after the ladder (default: off, the ladder only)")
    q.add_argument("--precision", type=_precision, default=None, metavar="FRACTION",
                   help=f"stop when (high - low) / low is within this, 10%% or 0.1 (default: "
                        f"{SEARCH_PRECISION * 100:g}%%; concurrency also stops at adjacent integers)")
    q.add_argument("--search-budget-minutes", type=positive_float, default=None, metavar="MINUTES",
                   help=f"no probe is started that could run past this much probing, a probe's cap being "
                        f"--max-step-seconds (default: {SEARCH_BUDGET_MINUTES:g})")


def _precision(text: str) -> float:
    try:
        return parse_precision(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """`servewatch sweep`."""
    from tui.cli.budget import budget_from_args, budget_given, budget_title
    from tui.cli.loadtest import config_or_usage, record_run, step_plan
    from tui.cli.loadtest import say as _print
    from tui.cli.report import LAST_RUN, analyse_file, monitor_config_from_args
    from tui.core.budget.memory import MEMORY_FLAGS, MemoryMissing

    given = None
    try:  # no budget is made up: without budget inputs the ladder does not depend on any model
        if budget_given(args):
            given = budget_from_args(args)
    except (ValueError, OSError) as exc:
        raise UsageError(f"bad budget: {exc}") from None
    # without its memory input the budget is completed from the run header (the engine's KV space, NVML) after
    # the run; the ladder cannot lean on a candidate not known yet
    budget = None if isinstance(given, MemoryMissing) else given
    if args.concurrency is None and args.rate is None:
        args.concurrency = default_ladder(budget.candidate if budget is not None else None, args.max_level)
    cfg = config_or_usage(args)
    cfg.until_decided = True  # --requests / --duration, when given, only bound a step further
    cfg.stop_on_fail = not args.continue_after_fail
    if not args.search and (args.precision is not None or args.search_budget_minutes is not None):
        raise UsageError("--precision and --search-budget-minutes bound the capacity search: give --search too")
    if args.precision is None:
        args.precision = SEARCH_PRECISION
    if args.search_budget_minutes is None:
        args.search_budget_minutes = SEARCH_BUDGET_MINUTES
    if args.search:
        if cfg.trace is not None:
            raise UsageError("--search bisects the ladder's levels: not with --trace (one level, the trace's rate)")
        cfg.search = SearchSettings(args.precision, args.search_budget_minutes * 60.0,
                                    (cfg.step_duration or 0.0) * cfg.rounds)
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
        _print(f"search: then bisect between the last PASS and the first FAIL to within {args.precision:.0%} of the "
               f"lower end, probes for at most {args.search_budget_minutes:g} min (each at most "
               f"{cfg.search.probe_cap_s:g} s)")
    recorded = record_run(cfg)
    if recorded.failed is not None:
        return recorded.failed
    from tui.cli.options import judge_at_from_args

    mon = analyse_file(cfg.record, monitor_config_from_args(args), given, pick_run=LAST_RUN,  # this run only,
                       judge_at=judge_at_from_args(args))  # at the settings its header states (the flags')
    summary = sweep_summary(mon.snapshot(), mon.budget if isinstance(given, MemoryMissing) else budget, cfg.record)
    summary["record"] = cfg.record
    if summary.get("capacity_bracket") is not None:
        from tui.core.grade import acceptance_grade

        weak = acceptance_grade(cfg.monitor)
        if weak:  # short windows (quick checks) say so beside the bracket
            summary["capacity_bracket"]["not_acceptance_grade"] = weak
    _print("")
    sys.stdout.write(format_sweep(summary))
    if args.sweep_json:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(args.sweep_json, json.dumps(summary, indent=2, default=str))
        except OSError as exc:
            raise UsageError(f"cannot write {args.sweep_json}: {exc.strerror or exc}") from None
        _print(f"sweep table written to {args.sweep_json}")
    _print(f"records: {cfg.record} (servewatch report / replay / accept read it)")
    return recorded.stop_code(summary["exit_code"])  # stopped by Ctrl-C / SIGTERM: 130 / 143 after the summary
