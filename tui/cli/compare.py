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


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    from tui.cli.options import positive_int

    parser.add_argument("--base-run", dest="base_run", type=positive_int, default=None, metavar="N",
                        help="run N (1-based) of a base file holding several runs (default: none; such a file is "
                             "refused, exit 2, with the list)")
    parser.add_argument("--cand-run", dest="cand_run", type=positive_int, default=None, metavar="N",
                        help="run N of a candidate file holding several runs (default: none, as --base-run)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of markdown")
    parser.add_argument("--out", metavar="FILE", default=None, help="also write the JSON comparison to FILE (default: none)")
    from tui.cli.chainopts import add_verify_key_argument

    add_verify_key_argument(parser)


class NoRequests(ValueError):
    """A readable file without one usable request record (bad input, exit 2)."""


def load_run(path: str, pick_run: int | None = None, slo_ttft_ms: float = 1000.0) -> dict:
    """{"label", "header", "requests", "issues", "problems"} of any readable run (``problems``: per level, the
    evidence problems that forbid judging it: the file held against itself); raises OSError, ImportProblem
    (another tool's file that cannot be imported), NoRequests, or ``tui.core.runs.SeveralRuns`` with the list when
    the file holds several runs and ``pick_run`` is None (several runs are never merged); any other exception is a
    bug."""
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.core.records import LineIssue, RequestRecord, RunHeader
    from tui.core.runs import RunSplitter
    from tui.sources.importing import open_run

    items, _src = open_run(path)
    splitter = RunSplitter(pick_run)
    header: dict = {}
    reqs: list = []
    issues = 0
    batch: list = []
    mon = Monitor(MonitorConfig(slo_ttft_ms=slo_ttft_ms), source=path)  # the cross-checks of the file (issue 17)

    def take(block: list) -> None:
        nonlocal header, issues
        kept = list(splitter.feed(block))
        mon.add_many(kept)
        for it in kept:
            if type(it) is RequestRecord:
                reqs.append(it)
            elif isinstance(it, RunHeader):
                header = header or it.data
            elif isinstance(it, LineIssue):
                issues += 1

    for it in items:
        batch.append(it)
        if len(batch) >= 4096:
            take(batch)
            batch = []
    take(batch)
    splitter.check(path)
    if not reqs:
        raise NoRequests(f"{path}: no usable request records ({issues} problem lines)")
    mon.finish()
    problems: dict = {}
    for (level, _rnd), _st in mon.levels.items():
        found = mon.pass_blocks((level, _rnd))
        if found:
            problems.setdefault(level, []).extend(p for p in found if p not in problems.get(level, []))
    return {"label": path, "header": header, "requests": reqs, "issues": issues, "problems": problems}


def run(args: argparse.Namespace) -> int:
    from tui.cli.report import runs_problem
    from tui.core.compare import compare, to_markdown
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.importing import ImportProblem

    runs = []
    for path, pick in ((args.base, getattr(args, "base_run", None)), (args.cand, getattr(args, "cand_run", None))):
        if not os.path.isfile(path):
            raise UsageError(f"cannot read {path}: {'is a folder' if os.path.isdir(path) else 'no such file'}")
        try:
            runs.append(load_run(path, pick, args.slo_ttft_ms))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile) as exc:
            raise runs_problem(exc) from None
        except (ImportProblem, NoRequests) as exc:  # any other ValueError is a bug, not bad input
            raise UsageError(exc) from None
    result = compare(runs[0], runs[1], slo_ttft_ms=args.slo_ttft_ms, margin=args.margin, alpha=args.alpha)
    integrity = _integrity(args, result)
    text = json.dumps(result, indent=2, default=str)
    if args.out:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(args.out, text + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    sys.stdout.write(text + "\n" if args.json else to_markdown(result) + integrity)
    if result.get("synthetic") and result["exit_code"] == 3 and result["verdict"] == "NOT WORSE":
        from tui.core.exitcodes import SYNTHETIC_NEVER_0

        print(f"servewatch: {SYNTHETIC_NEVER_0}", file=sys.stderr)
    return int(result["exit_code"])


def _integrity(args: argparse.Namespace, result: dict) -> str:
    """Verify both files' digest chains (a second pass, 1 MiB at a time: ``tui.core.chain``), put the results in
    ``result["records_integrity"]`` and, when either chain is broken or a signature fails, turn NOT WORSE into
    NOT ENOUGH EVIDENCE (exit 3) with the reason. Returns the markdown lines saying so."""
    from tui.cli.chainopts import verify_key
    from tui.core.chain import verify_stream
    from tui.core.compare import EXIT, NOT_ENOUGH, NOT_WORSE

    key, key_name = verify_key(args)
    lines = ["", "Records integrity (digest chain):"]
    found: dict = {}
    problems: list[str] = []
    for side, path in (("base", args.base), ("candidate", args.cand)):
        try:
            with open(path, "rb") as fh:
                ri = verify_stream(fh, key, key_name)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        found[side] = ri.to_dict()
        lines.append(f"  {side} {path}: {ri.summary}")
        problems.extend(f"{side} {path}: {p}" for p in ri.problems)
    result["records_integrity"] = found
    if problems and result.get("verdict") == NOT_WORSE:
        result["verdict"] = NOT_ENOUGH
        result["exit_code"] = EXIT[NOT_ENOUGH]
        result["reason"] = f"cannot say NOT WORSE: records integrity: {problems[0]}"
        lines.append(f"  => {result['reason']} (exit {EXIT[NOT_ENOUGH]})")
    return "\n".join(lines) + "\n"
