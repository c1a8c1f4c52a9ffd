"""`servewatch compare BASE CAND`: two runs (any importable format) level by level, with a three-way verdict
on the good fraction. Thin glue: reading is ``tui.sources.importing.open_run``, the statistics are
``tui.core.compare``. Exit codes: 0 NOT WORSE, 1 WORSE, 3 NOT ENOUGH EVIDENCE, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tui.core.exitcodes import UsageError

COMPARE_EXIT_DOC = "exit codes: 0 NOT WORSE, 1 WORSE (some level), 3 NOT ENOUGH EVIDENCE, 2 bad usage or input"


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    from tui.cli.options import fraction, positive_float

    parser.description = ("Compare a candidate run with a base run level by level (levels match within 5%): n, good "
                          "fraction with its interval, TTFT P50/P95/P99, TPOT, goodput, and per level NOT WORSE / "
                          "WORSE / NOT ENOUGH EVIDENCE on the good fraction.")
    from tui.cli.options import epilog

    parser.epilog = epilog("servewatch compare base.jsonl cand.jsonl --margin 0.02", codes=COMPARE_EXIT_DOC)
    parser.add_argument("base", help="the base run (record file or another tool's output)")
    parser.add_argument("cand", help="the candidate run")
    parser.add_argument("--slo-ttft-ms", type=positive_float, default=1000.0, metavar="MS",
                        help="a request is good when it completes with TTFT at most this (default 1000)")
    parser.add_argument("--margin", type=fraction, default=0.02, metavar="FRACTION",
                        help="largest acceptable drop in good fraction (default 0.02 = 2 points)")
    parser.add_argument("--alpha", type=fraction, default=0.05, metavar="FRACTION",
                        help="one-sided error level of each decision (default 0.05)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of markdown")
    parser.add_argument("--out", metavar="FILE", default=None, help="also write the JSON comparison to FILE (default: none)")


class NoRequests(ValueError):
    """A readable file without one usable request record (bad input, exit 2)."""


def load_run(path: str) -> dict:
    """{"label", "header", "requests", "issues"} of any readable run; raises OSError, ImportProblem (another
    tool's file that cannot be imported) or NoRequests; any other exception is a bug."""
    from tui.core.records import LineIssue, RequestRecord, RunHeader
    from tui.sources.importing import open_run

    items, _src = open_run(path)
    header: dict = {}
    reqs, issues = [], 0
    for it in items:
        if type(it) is RequestRecord:
            reqs.append(it)
        elif isinstance(it, RunHeader):
            header = header or it.data
        elif isinstance(it, LineIssue):
            issues += 1
    if not reqs:
        raise NoRequests(f"{path}: no usable request records ({issues} problem lines)")
    return {"label": path, "header": header, "requests": reqs, "issues": issues}


def cmd_compare(args: argparse.Namespace) -> int:
    from tui.core.compare import compare, to_markdown
    from tui.sources.importing import ImportProblem

    runs = []
    for path in (args.base, args.cand):
        if not os.path.isfile(path):
            raise UsageError(f"cannot read {path}: {'is a folder' if os.path.isdir(path) else 'no such file'}")
        try:
            runs.append(load_run(path))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (ImportProblem, NoRequests) as exc:  # any other ValueError is a bug, not bad input
            raise UsageError(exc) from None
    result = compare(runs[0], runs[1], slo_ttft_ms=args.slo_ttft_ms, margin=args.margin, alpha=args.alpha)
    text = json.dumps(result, indent=2, default=str)
    if args.out:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(args.out, text + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    sys.stdout.write(text + "\n" if args.json else to_markdown(result))
    return int(result["exit_code"])
