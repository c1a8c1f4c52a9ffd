"""`servewatch report FILE`: the headless verdict on a record file."""

from __future__ import annotations

import argparse
import json
import os
import sys

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord
from tui.core.report import EXIT_CODES_DOC, EXIT_USAGE, build_report, exit_code, format_report


def add_acceptance_arguments(parser: argparse.ArgumentParser) -> None:
    """The SLO / verdict flags shared by report, replay, run and live."""
    from tui.argtypes import fraction, non_negative_float, positive_float, positive_int

    g = parser.add_argument_group("acceptance target")
    g.add_argument("--slo-ttft-ms", type=positive_float, default=1000.0, metavar="MS",
                   help="a request is good when it completes with client TTFT at most this (default 1000)")
    g.add_argument("--target", type=fraction, default=0.95, metavar="FRACTION",
                   help="required good fraction (default 0.95)")
    g.add_argument("--alpha", type=fraction, default=0.05, metavar="A",
                   help="error level of the anytime-valid verdict test (default 0.05)")
    g.add_argument("--min-window-minutes", type=non_negative_float, default=10.0, metavar="MIN",
                   help="minimum observation time before PASS can be declared (default 10)")
    g.add_argument("--min-requests", type=positive_int, default=None, metavar="N",
                   help="minimum measured requests (default: the fewest with which PASS is possible)")


def monitor_config_from_args(args: argparse.Namespace, **extra) -> MonitorConfig:
    d = MonitorConfig()  # defaults for commands without the acceptance flags (the no-argument console)
    kw = dict(
        slo_ttft_ms=getattr(args, "slo_ttft_ms", d.slo_ttft_ms),
        target=getattr(args, "target", d.target),
        alpha=getattr(args, "alpha", d.alpha),
        min_window_s=getattr(args, "min_window_minutes", d.min_window_s / 60.0) * 60.0,
        min_requests=getattr(args, "min_requests", None),
    )
    if getattr(args, "rolling_seconds", None):
        kw["rolling_s"] = args.rolling_seconds
    if getattr(args, "rolling_requests", None):
        kw["rolling_n"] = args.rolling_requests
    kw.update(extra)
    return MonitorConfig(**kw)


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    from tui.budget_cli import add_budget_arguments

    parser.add_argument("file", help="record file (JSON Lines, record format v1)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--level", type=float, default=None,
                        help="the load level the verdict is about (default: the highest recorded)")
    add_acceptance_arguments(parser)
    add_budget_arguments(parser)
    parser.epilog = EXIT_CODES_DOC


def analyse_file(path: str, config: MonitorConfig, budget=None) -> Monitor:
    """Read a whole record file into a Monitor (raises OSError when unreadable)."""
    from tui.sources.importing import open_run  # other tools' files are converted on the fly (by content)

    mon = Monitor(config, budget=budget, source=path)
    add, add_request = mon.add, mon.add_request
    for item in open_run(path)[0]:
        if type(item) is RequestRecord:
            add_request(item)
        else:
            add(item)
    return mon


def run_report(path: str, args: argparse.Namespace, budget=None, out=None, default_budget: bool = True) -> int:
    """Print the report of ``path`` and return its exit code (used by `servewatch run` too).

    Without budget flags the teaching-case budget is used when ``default_budget`` (report, replay);
    `servewatch run` passes False, so a real run is never shown next to an unrelated example budget."""
    out = out or sys.stdout
    try:
        cfg = monitor_config_from_args(args)
    except ValueError as exc:
        print(f"servewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from tui.budget_cli import budget_from_args, budget_given, budget_title

    if budget is None and (default_budget or budget_given(args)):
        try:
            budget = budget_from_args(args)
        except (ValueError, OSError) as exc:
            print(f"servewatch: bad budget: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if not os.path.isfile(path):
        print(f"servewatch: cannot read {path}: no such file", file=sys.stderr)
        return EXIT_USAGE
    try:
        mon = analyse_file(path, cfg, budget)
    except OSError as exc:
        print(f"servewatch: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # ImportProblem: another tool's file that cannot be imported
        print(f"servewatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from tui.core.importers.limits import limit_snapshot

    snap = limit_snapshot(mon.snapshot())  # imported data without a time axis, or a sample: no verdict
    rep = build_report(snap, budget, level=getattr(args, "level", None))
    if budget is not None:
        rep["budget"]["title"] = budget_title(budget)
    for issue in snap.malformed_examples:
        print(f"servewatch: {issue}", file=sys.stderr)
    hidden = snap.malformed + snap.truncated + snap.unknown_types - len(snap.malformed_examples)
    if hidden > 0:
        print(f"servewatch: ... and {hidden} more problem lines (counted in the report)", file=sys.stderr)
    if getattr(args, "json", False):
        out.write(json.dumps(rep, indent=2, default=str) + "\n")
    else:
        from tui.core.importers.limits import describe_source

        line = describe_source(snap.header)
        out.write(format_report(rep) if line is None else f"{line}\n" + format_report(rep))
    return exit_code(rep["measured"]["verdict"]["state"])


def cmd_report(args: argparse.Namespace) -> int:
    return run_report(args.file, args)
