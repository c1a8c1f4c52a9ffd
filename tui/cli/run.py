"""`servewatch run`: a headless load test against a server, recorded, then the report on the record file.

    servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos
    servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300
    servewatch run --url http://127.0.0.1:8080 --trace azure.csv --trace-window 0-600 --trace-speed 2

Exit codes: those of the report (0 PASS, 1 FAIL, 3 insufficient/undecided); 2 for bad usage or a
server that cannot be reached; 130 after Ctrl-C and 143 after SIGTERM (sending stopped, the record sealed, the
partial verdict printed first). The flags, the settings built from them and the recorded run are shared
with `live` and `sweep` (:mod:`tui.cli.loadtest`).
"""

from __future__ import annotations

import argparse

from tui.cli.loadtest import add_load_arguments, config_or_usage, record_run, say
from tui.cli.options import epilog

EPILOG = epilog("servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos",
                "servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300",
                "servewatch run --url http://127.0.0.1:8080 --trace azure.csv --trace-window 0-600 --trace-speed 2",
                codes="exit codes: those of the report (0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or UNDECIDED); "
                      "2 bad usage or a server that cannot be reached; 130 Ctrl-C, 143 SIGTERM (record sealed, "
                      "partial verdict printed)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch run`."""
    parser.description = "Headless load test against a server, recorded, then the report on the record file."
    parser.epilog = EPILOG
    add_load_arguments(parser, trace=True)
    from tui.cli.report import add_details_argument

    add_details_argument(parser)  # the closing report: short by default, --details the long one


def run(args: argparse.Namespace) -> int:
    """`servewatch run`."""
    cfg = config_or_usage(args)
    recorded = record_run(cfg)
    if recorded.failed is not None:
        return recorded.failed
    from tui.cli.report import LAST_RUN, run_report

    say("")
    args.run = LAST_RUN  # the record file may hold earlier runs (appended): the verdict is on this one
    code = run_report(cfg.record, args, default_budget=False)  # the partial verdict of a stopped run too
    return recorded.stop_code(code)  # stopped by Ctrl-C / SIGTERM: 130 / 143 after the report
