"""`servewatch live`: the console watching a live load test, recorded like `run`.

    servewatch live --url http://127.0.0.1:8080 --concurrency 1,2,4 --theme light

Exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or
UNDECIDED; 2 bad usage or a server that cannot be reached. The load flags and the settings built from them
are those of `run` (:mod:`tui.cli.loadtest`); the console flags those of `replay`.
"""

from __future__ import annotations

import argparse
import sys

from tui.cli.loadtest import add_load_arguments, config_or_usage, console_monitor_config, trace_lines
from tui.cli.options import UsageError, add_console_arguments, add_rolling_arguments, epilog
from tui.core.exitcodes import ExitCode
from tui.core.textsafe import term

EPILOG = epilog("servewatch live --url http://127.0.0.1:8080 --concurrency 1,2,4 --theme light",
                codes="exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, "
                      "3 INSUFFICIENT_WINDOW or UNDECIDED; 2 bad usage or a server that cannot be reached")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch live`: those of `run` plus every console flag `replay` takes
    (--theme, --themes-dir, --export-dir, --rolling-seconds, --rolling-requests)."""
    parser.description = "The console watching a live load test, recorded like `run`."
    parser.epilog = EPILOG
    add_load_arguments(parser, trace=True)
    from tui.cli.drillopts import add_drill_arguments

    add_drill_arguments(parser, console=True)  # `live --drill`: the drill in the console (issue 39)
    add_console_arguments(parser)
    add_rolling_arguments(parser)
    from tui.cli.options import add_server_log_argument

    add_server_log_argument(parser)


def run(args: argparse.Namespace) -> int:
    """`servewatch live`: the console watching a live load test (recorded like `run`)."""
    from tui.cli.budget import view_budget
    from tui.cli.replay import open_console
    from tui.sources.live import LiveSource

    cfg = config_or_usage(args)
    plan = None
    if args.drill:
        from tui.cli.drillopts import plan_from_args

        if cfg.trace is not None:
            raise UsageError("--drill runs at one steady load: not with --trace")
        plan = plan_from_args(args, cfg)
    elif args.spike is not None or args.fault_cmd is not None or args.fault_manual:
        raise UsageError("--spike, --fault-cmd and --fault-manual need --drill (or `servewatch drill`)")
    for line in trace_lines(cfg):
        print(term(line), flush=True)
    try:
        budget, budget_origin = view_budget(args)  # no budget flags: unknown, never the teaching case
        mcfg = console_monitor_config(args, cfg)
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    from tui.cli.options import server_log_from_args
    from tui.core.budgetview import server_log_sentence

    server_log = server_log_from_args(args)  # --server-log FILE: printed beside the memory-only candidate
    candidate = getattr(budget, "candidate", None)  # None: unknown, or the memory input still missing
    log_line = server_log_sentence(candidate if isinstance(candidate, int) else None, server_log)
    if log_line:
        print(term(log_line), flush=True)
    source = LiveSource(cfg, drill=plan)
    code = open_console(source, args, budget, mcfg, budget_origin=budget_origin, server_log=server_log)
    try:  # the terminal may be gone (the console closed on SIGHUP or a closed input)
        print(term(f"record file: {source.record_path}"), flush=True)
        if log_line:
            print(term(log_line), flush=True)
        if source.error:
            print(f"servewatch: {term(source.error)}", file=sys.stderr)
    except OSError:
        pass
    return ExitCode.INSUFFICIENT if code is None else int(code)
