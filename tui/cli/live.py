"""`servewatch live`: the console watching a live load test, recorded like `run`.

    servewatch live --url http://127.0.0.1:8080 --concurrency 1,2,4 --theme light

Exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or
UNDECIDED; 2 bad usage or a server that cannot be reached. The load flags and the settings built from them
are those of `run` (:mod:`tui.cli.loadtest`); the console flags those of `replay`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tui.cli.console import ConsoleFlags, Rolling
from tui.cli.declare import block
from tui.cli.drillopts import DrillFlags
from tui.cli.loadtest import LoadSettings, config_or_usage, console_monitor_config, trace_lines
from tui.cli.options import UsageError, epilog, percentiles_flag, server_log_flag
from tui.core.exitcodes import ExitCode
from tui.core.textsafe import term

EPILOG = epilog("servewatch live --url http://127.0.0.1:8080 --concurrency 1,2,4 --theme light",
                codes="exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, "
                      "3 INSUFFICIENT_WINDOW or UNDECIDED; 2 bad usage or a server that cannot be reached")


@dataclass(frozen=True, kw_only=True)
class LiveSettings(LoadSettings):
    """`servewatch live`: the flags of `run` plus every console flag `replay` takes (--theme, --themes-dir,
    --export-dir, --rolling-seconds, --rolling-requests) and --server-log."""

    DESCRIPTION = "The console watching a live load test, recorded like `run`."
    EPILOG = EPILOG

    drill: DrillFlags = block(DrillFlags, optional=("disturbance",))  # `live --drill`: the drill in the console
    console: ConsoleFlags = block(ConsoleFlags)
    rolling: Rolling = block(Rolling)
    server_log: str | None = server_log_flag()
    percentiles: tuple[float, ...] | None = percentiles_flag()


def run(settings: LiveSettings) -> int:
    """`servewatch live`: the console watching a live load test (recorded like `run`)."""
    from tui.cli.budgetflags import server_log_from_args, view_budget
    from tui.cli.console import open_console
    from tui.sources.live import LiveSource

    cfg = config_or_usage(settings)
    plan = None
    if settings.drill.drill:
        from tui.cli.drillopts import plan_from_args

        if cfg.trace is not None:
            raise UsageError("--drill runs at one steady load: not with --trace")
        plan = plan_from_args(settings, cfg)
    elif settings.drill.disturbance_given():
        raise UsageError("--spike, --fault-cmd and --fault-manual need --drill (or `servewatch drill`)")
    for line in trace_lines(cfg):
        print(term(line), flush=True)
    try:
        budget, budget_origin = view_budget(settings.budget)  # no budget flags: unknown, never the teaching case
        mcfg = console_monitor_config(settings.rolling, cfg)
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    from tui.core.budgetview import server_log_sentence

    server_log = server_log_from_args(settings.server_log, settings.budget)  # beside the memory-only candidate
    candidate = getattr(budget, "candidate", None)  # None: unknown, or the memory input still missing
    log_line = server_log_sentence(candidate if isinstance(candidate, int) else None, server_log)
    if log_line:
        print(term(log_line), flush=True)
    source = LiveSource(cfg, drill=plan)
    code = open_console(source, settings.console, budget, mcfg, budget_origin=budget_origin, server_log=server_log)
    try:  # the terminal may be gone (the console closed on SIGHUP or a closed input)
        print(term(f"record file: {source.record_path}"), flush=True)
        if log_line:
            print(term(log_line), flush=True)
        if source.error:
            print(f"servewatch: {term(source.error)}", file=sys.stderr)
    except OSError:
        pass
    return ExitCode.INSUFFICIENT if code is None else int(code)
