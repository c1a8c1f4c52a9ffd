"""`servewatch compare BASE CAND`: two runs (any importable format) level by level, with a three-way verdict
on the good fraction. Thin glue: reading is ``tui.sources.evidence_reader`` (each file read once: its requests
and its digest chain), the statistics are
``tui.core.compare``. Exit codes: 0 NOT WORSE, 1 WORSE, 3 NOT ENOUGH EVIDENCE, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

import tui.core.defaults as D
from tui.cli.chainopts import verify_key
from tui.cli.evidence_files import same_file_as
from tui.cli.options import INPUT, OUTPUT, judge_at_from_args, path_arg, slos_from_args
from tui.core.exitcodes import UsageError
from tui.core.slos import Slos
from tui.core.textsafe import term
from tui.core.verdict_settings import GOOD_FIELDS, worst_exit
from tui.sources.evidence_monitor import NoRequests, compare_run
from tui.sources.evidence_probe import input_problem
from tui.sources.evidence_reader import ReadSettings, open_evidence

__all__ = ["NoRequests", "add_arguments", "load_run", "run"]

COMPARE_EXIT_DOC = ("exit codes: 0 NOT WORSE, 1 WORSE (some level), 3 NOT ENOUGH EVIDENCE (also: the same run on both "
                    "sides; a different served model, engine or workload, or an unknown workload, without "
                    "--allow-different FIELD; re-judged at weaker SLOs than a run's), 2 bad usage or input")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tui.cli.options import add_slo_arguments, fraction

    parser.description = ("Compare a candidate run with a base run level by level (levels match within 5%): n, good "
                          "fraction with its interval, TTFT P50/P95/P99, TPOT, goodput, and per level NOT WORSE / "
                          "WORSE / NOT ENOUGH EVIDENCE on the good fraction.")
    from tui.cli.options import epilog

    parser.epilog = epilog("servewatch compare base.jsonl cand.jsonl --margin 0.02", codes=COMPARE_EXIT_DOC)
    path_arg(parser, "base", role=INPUT, help="the base run (record file or another tool's output, or run:ID: a run "
             "of the catalogue, servewatch index / history)")
    path_arg(parser, "cand", role=INPUT, help="the candidate run (the same kinds)")
    add_slo_arguments(parser)
    parser.add_argument("--margin", type=fraction, default=D.COMPARE_MARGIN, metavar="FRACTION",
                        help=f"largest acceptable drop in good fraction (default {D.COMPARE_MARGIN:g} = "
                             f"{D.COMPARE_MARGIN * 100:g} points)")
    parser.add_argument("--alpha", type=fraction, default=D.COMPARE_ALPHA, metavar="FRACTION",
                        help=f"one-sided error level of each decision (default {D.COMPARE_ALPHA:g})")
    from tui.cli.options import positive_int

    parser.add_argument("--base-run", dest="base_run", type=positive_int, default=None, metavar="N",
                        help="run N (1-based) of a base file holding several runs (default: none; such a file is "
                             "refused, exit 2, with the list)")
    parser.add_argument("--cand-run", dest="cand_run", type=positive_int, default=None, metavar="N",
                        help="run N of a candidate file holding several runs (default: none, as --base-run)")
    parser.add_argument("--allow-different", dest="allow_different", action="append", default=[],
                        metavar="LIST",
                        help="a comma-separated list of differences to compare anyway: model (the served model), engine, "
                             "workload (request shape, lengths, shared prefixes, dataset, prompt cache; or a workload "
                             "that is unknown); the allowed difference is printed beside the verdict (default: none: "
                             "such runs are not comparable, NOT ENOUGH EVIDENCE, exit 3). The same run on both sides "
                             "is never compared")
    parser.add_argument("--allow-different-workload", dest="allow_different_workload", action="store_true",
                        help="the same as --allow-different workload (kept for scripts)")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of markdown")
    path_arg(parser, "--out", role=OUTPUT, metavar="FILE", default=None,
             help="also write the JSON comparison to FILE (default: none)")
    from tui.cli.report import add_html_argument

    add_html_argument(parser, "the comparison")
    from tui.cli.chainopts import add_verify_key_argument

    add_verify_key_argument(parser)
    from tui.cli.runref import add_db_argument

    add_db_argument(parser, what="run:ID")


def load_run(path: str, pick_run: int | None = None, slo_ttft_ms: float = D.SLO_TTFT_MS,
             slos: Slos | None = None) -> dict:
    """{"label", "header", "requests", "issues", "problems"} of any readable run, through the evidence reader
    (``tui.sources.evidence_monitor.compare_run``); raises OSError, ImportProblem, NoRequests, SeveralRuns."""
    with open_evidence(path, ReadSettings(pick_run=pick_run, watch=False)) as ev:
        return compare_run(ev, slo_ttft_ms, slos)


def run(args: argparse.Namespace) -> int:
    from tui.cli.report import runs_problem
    from tui.core.compare import compare, to_markdown
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.importing import ImportProblem

    key, key_name = verify_key(args)  # a missing key variable: bad usage
    args = _catalogued(args)  # run:ID: the catalogue's file and run (tui.cli.runref)
    if getattr(args, "html", None):
        from tui.cli.report import html_sampler

        html_sampler(args.html)  # the folder checked before the files are read
    if args.out:
        from tui.sources.outfiles import output_file_problem

        problem = output_file_problem(args.out)
        if problem:
            raise UsageError(f"--out {args.out}: {problem}")
    drilled = _drill_compare(args, key, key_name)  # two drill files: time to recover and impact (issue 39)
    if drilled is not None:
        return drilled
    slos = slos_from_args(args)
    slo_ttft_ms = D.SLO_TTFT_MS if slos.ttft_ms is None else slos.ttft_ms
    allow = _allowed(args)
    judge_at = judge_at_from_args(args, GOOD_FIELDS)  # compare judges which request is good: the SLOs alone
    runs = []
    chains = []
    seen: dict[object, str] = {}
    same_file = None
    for path, pick in ((args.base, args.base_run), (args.cand, args.cand_run)):
        problem = input_problem(path) if path != "-" else f"cannot read {path}: compare reads two files, not standard input"
        if problem:  # a FIFO, a device, a folder, a missing file: one line before anything is read
            raise UsageError(problem)
        same_file = same_file_as(path, seen) or same_file  # the same path, a link to it, or identical bytes
        settings = ReadSettings(pick_run=pick, verify_key=key, key_name=key_name, watch=False, verify_imported=True)
        try:
            with open_evidence(path, settings) as ev:  # one pass: the requests and the digest chain
                runs.append(compare_run(ev, slo_ttft_ms, slos, judge_at=judge_at))
                chains.append(ev.integrity)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile) as exc:
            raise runs_problem(exc) from None
        except (ImportProblem, NoRequests) as exc:  # any other ValueError is a bug, not bad input
            raise UsageError(exc) from None
    if same_file is not None and (args.base_run or args.cand_run) and args.base_run != args.cand_run:
        same_file = None  # two different runs of one file: the run ids and the request data still say if they are one
    slos, sides = judged_at(runs, judge_at)
    slo_ttft_ms = D.SLO_TTFT_MS if slos.ttft_ms is None else slos.ttft_ms
    result = compare(runs[0], runs[1], slo_ttft_ms=slo_ttft_ms, margin=args.margin, alpha=args.alpha, slos=slos,
                     allow_different=allow, same_file=same_file)
    result["verdict_settings"] = {"judged_at": slos.describe(),
                                  **{side: res.to_dict() for side, res in zip(("base", "candidate"), sides)}}
    code, why = worst_exit(result["exit_code"], zip(("base", "candidate"), sides))
    if why:  # re-judged at weaker SLOs than a run's: its verdict is not the runs' (exit 3)
        result["exit_code"] = code
        result["settings_exit"] = "; ".join(why)
    integrity = _integrity(args, result, chains)
    text = json.dumps(result, indent=2, default=str)
    files = []  # the JSON and the page of one comparison: written together (tui.sources.outfiles.write_set)
    if args.out:
        files.append((args.out, text + "\n"))
    if getattr(args, "html", None):
        files.append((args.html, compare_page(result, runs, slos, slo_ttft_ms)))
    if files:
        from tui.sources.outfiles import OutputRefused, SetIncomplete, write_set

        try:
            write_set(files)
        except (OutputRefused, SetIncomplete) as exc:
            raise UsageError(f"cannot write {' and '.join(str(p) for p, _ in files)}: {exc}") from None
        except OSError as exc:
            raise UsageError(f"cannot write {' and '.join(str(p) for p, _ in files)}: {exc.strerror or exc}; "
                             "nothing was replaced") from None
    sys.stdout.write(text + "\n" if args.json else integrity + to_markdown(result))
    if result.get("synthetic") and result["exit_code"] == 3 and result["verdict"] == "NOT WORSE":
        from tui.core.exitcodes import SYNTHETIC_NEVER_0

        print(f"servewatch: {SYNTHETIC_NEVER_0}", file=sys.stderr)
    return int(result["exit_code"])


def _catalogued(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with each ``run:ID`` replaced by its file and run number (``tui.cli.runref.resolve_run``); the
    outputs are then checked against the files resolved (the own-input guard saw only ``run:ID``)."""
    from tui.cli.runref import resolve_run

    db = getattr(args, "db", None)
    base, base_run, _ = resolve_run(args.base, args.base_run, db, "base")
    cand, cand_run, _ = resolve_run(args.cand, args.cand_run, db, "candidate")
    if (base, base_run, cand, cand_run) == (args.base, args.base_run, args.cand, args.cand_run):
        return args
    from tui.sources.outfiles import own_input_problem

    problem = own_input_problem([("--out", args.out), ("--html", getattr(args, "html", None))],
                                [("base", base), ("cand", cand)])
    if problem:
        raise UsageError(problem)
    out = argparse.Namespace(**vars(args))
    out.base, out.base_run, out.cand, out.cand_run = base, base_run, cand, cand_run
    return out


def _drill_compare(args: argparse.Namespace, key: bytes | None, key_name: str) -> int | None:
    """`compare` of two drill files (``tui.core.drill.compare``); None when neither is a drill. One drill and one
    other run is bad usage (a drill compares with a drill)."""
    from tui.core.drill import is_drill_header
    from tui.sources.evidence_reader import run_header_of

    kinds = [is_drill_header(run_header_of(p, pick) or {}) if p != "-" else False
             for p, pick in ((args.base, args.base_run), (args.cand, args.cand_run))]
    if not any(kinds):
        return None
    if not all(kinds):
        which = "base" if kinds[0] else "candidate"
        raise UsageError(f"the {which} is a drill file and the other is not: a drill compares with a drill "
                         "(time to recover and impact)")
    from tui.cli.drillopts import judge_file, read_drill
    from tui.cli.report import runs_problem
    from tui.core.drill import compare_drills, format_compare
    from tui.core.exitcodes import synthetic_exit
    from tui.core.monitor import MonitorConfig
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.importing import ImportProblem

    docs = []
    judge_at = judge_at_from_args(args, GOOD_FIELDS)
    for path, pick in ((args.base, args.base_run), (args.cand, args.cand_run)):
        try:
            mon, col = read_drill(path, MonitorConfig(slos=slos_from_args(args)), pick_run=pick, verify_key=key,
                                  key_name=key_name, judge_at=judge_at)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile) as exc:
            raise runs_problem(exc) from None
        except ImportProblem as exc:
            raise UsageError(exc) from None
        docs.append(judge_file(mon, col))
    result = compare_drills(docs[0], docs[1], args.base, args.cand)
    c = result["compare"]
    code, why = synthetic_exit(int(c["exit_code"]), bool(c["synthetic"]))
    c["exit_code"], c["synthetic_exit"] = code, why
    text = json.dumps(result, indent=2, default=str)
    files = []
    if args.out:
        files.append((args.out, text + "\n"))
    if getattr(args, "html", None):
        from tui.html.drill import compare_drills_html

        files.append((args.html, compare_drills_html(result, docs)))
    if files:
        from tui.sources.outfiles import OutputRefused, SetIncomplete, write_set

        try:
            write_set(files)
        except (OutputRefused, SetIncomplete) as exc:
            raise UsageError(f"cannot write {' and '.join(str(p) for p, _ in files)}: {exc}") from None
        except OSError as exc:
            raise UsageError(f"cannot write {' and '.join(str(p) for p, _ in files)}: {exc.strerror or exc}") from None
    sys.stdout.write(text + "\n" if args.json else term(format_compare(result), keep_newlines=True))
    if why:
        print(f"servewatch: {term(why)}", file=sys.stderr)
    return code


def _allowed(args: argparse.Namespace) -> frozenset[str]:
    """The fields of ``--allow-different`` (and its alias ``--allow-different-workload``); an unknown field is bad
    usage (one line, exit 2)."""
    from tui.core.compare_guard import parse_allow

    try:
        allow = parse_allow(getattr(args, "allow_different", None) or [])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "allow_different_workload", False):
        allow |= {"workload"}
    return allow


def judged_at(runs: list, judge_at) -> tuple[Slos, list]:
    """The SLOs both runs are judged at (issue 35): each run's own where they agree, the flags given, and where
    the runs were judged at different SLOs, both at the strictest of them (``common_values``); and each side's
    ``Resolution`` (what it states, what changed, whether weaker)."""
    from tui.core.verdict_settings import common_values, read_header, resolve

    files = [read_header(r.get("header")) for r in runs]
    at = common_values(files, judge_at)
    sides = [resolve(f, at) for f in files]
    return sides[0].effective.slos, sides


def _integrity(args: argparse.Namespace, result: dict, chains: list) -> str:
    """Both files' digest chains (verified while they were read: ``tui.core.chain``) into
    ``result["records_integrity"]``; when either chain is broken or a signature fails, NOT WORSE becomes
    NOT ENOUGH EVIDENCE (exit 3) with the reason. Returns the markdown lines saying so."""
    from tui.core.compare import EXIT, NOT_ENOUGH, NOT_WORSE

    first: list[str] = []
    lines = ["Records integrity (digest chain), per run judged:"]
    found: dict = {}
    problems: list[str] = []
    for (side, path), ri in zip((("base", args.base), ("candidate", args.cand)), chains, strict=True):
        found[side] = ri.to_dict()
        first.append(term(f"{side}: {ri.summary}"))
        lines.append(term(f"  {side} {path}: {ri.summary}"))
        lines.extend(term(f"    {d}") for d in ri.details)
        problems.extend(f"{side} {path}: {p}" for p in ri.problems)
    # the first line of the output says what was verified, in the threat model's words (issue 36)
    rest = {k: v for k, v in result.items() if k != "records_integrity"}
    result.clear()
    result.update({"records_integrity": found, **rest})
    if problems and result.get("verdict") in (NOT_WORSE, NOT_ENOUGH):  # (the levels may have said so already)
        result["verdict"] = NOT_ENOUGH
        result["exit_code"] = EXIT[NOT_ENOUGH]
        result["reason"] = f"cannot say NOT WORSE: records integrity: {problems[0]}"
        lines.append(term(f"  => {result['reason']} (exit {EXIT[NOT_ENOUGH]})"))
    return "; ".join(first) + "\n" + "\n".join(lines) + "\n\n"


def compare_page(result: dict, runs: list, slos: Slos, slo_ttft_ms: float) -> str:
    """The comparison's HTML page (``tui.html.compare_html``): the result and, for the TTFT distribution at the
    judged level, both runs' requests (``tui.core.chartdata.compare_cdf``)."""
    from tui.core.chartdata import compare_cdf, compare_levels
    from tui.html import compare_html

    doc = json.loads(json.dumps(result, default=str))
    cd = compare_cdf(doc, runs[0]["requests"], runs[1]["requests"], slos)
    return compare_html(doc, compare_levels(doc), cd, slos.ttft_ms)

