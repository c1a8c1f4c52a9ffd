"""`servewatch compare BASE CAND`: two runs (any importable format) level by level, with a three-way verdict
on the good fraction. Thin glue: reading is ``tui.sources.evidence_reader`` (each file read once: its requests
and its digest chain), the statistics are
``tui.core.compare``. Exit codes: 0 NOT WORSE, 1 WORSE, 3 NOT ENOUGH EVIDENCE, 2 bad input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from typing import Any

import tui.core.defaults as D
from tui.cli.chainopts import verify_key, verify_key_flag
from tui.cli.declare import Settings, flag, path, positional, switch
from tui.cli.evidence_files import runs_problem, same_file_as
from tui.cli.options import (
    INPUT,
    OUTPUT,
    epilog,
    fraction,
    given_flags,
    html_flag,
    judge_at_from_args,
    percentiles_flag,
    positive_int,
    slo_flags,
)
from tui.cli.runref import db_flag, resolve_run
from tui.core.exitcodes import UsageError
from tui.core.slos import Slos
from tui.core.textsafe import term
from tui.core.verdict_settings import GOOD_FIELDS, worst_exit
from tui.sources.evidence_monitor import NoRequests, compare_run
from tui.sources.evidence_probe import input_problem
from tui.sources.evidence_reader import ReadSettings, open_evidence

__all__ = ["CompareSettings", "NoRequests", "run"]

COMPARE_EXIT_DOC = ("exit codes: 0 NOT WORSE, 1 WORSE (some level), 3 NOT ENOUGH EVIDENCE (also: the same run on both "
                    "sides; a different served model, engine or workload, or an unknown workload, without "
                    "--allow-different FIELD; re-judged at weaker SLOs than a run's), 2 bad usage or input")


@dataclass(frozen=True, kw_only=True)
class CompareSettings(Settings):
    """`servewatch compare BASE CAND`."""

    DESCRIPTION = ("Compare a candidate run with a base run level by level (levels match within 5%): n, good "
                   "fraction with its interval, TTFT P50/P95/P99, TPOT, goodput, and per level NOT WORSE / "
                   "WORSE / NOT ENOUGH EVIDENCE on the good fraction.")
    EPILOG = epilog("servewatch compare base.jsonl cand.jsonl --margin 0.02", codes=COMPARE_EXIT_DOC)

    base: str = positional("base", role=INPUT, help="the base run (record file or another tool's output, or run:ID: a "
                           "run of the catalogue, servewatch index / history)")
    cand: str = positional("cand", role=INPUT, help="the candidate run (the same kinds)")
    slos: Slos = slo_flags()
    margin: float = flag("--margin", type=fraction, default=D.COMPARE_MARGIN, metavar="FRACTION",
                         help=f"largest acceptable drop in good fraction (default {D.COMPARE_MARGIN:g} = "
                              f"{D.COMPARE_MARGIN * 100:g} points)")
    alpha: float = flag("--alpha", type=fraction, default=D.COMPARE_ALPHA, metavar="FRACTION",
                        help=f"one-sided error level of each decision (default {D.COMPARE_ALPHA:g})")
    base_run: int | None = flag("--base-run", type=positive_int, default=None, metavar="N",
                                help="run N (1-based) of a base file holding several runs (default: none; such a file "
                                     "is refused, exit 2, with the list)")
    cand_run: int | None = flag("--cand-run", type=positive_int, default=None, metavar="N",
                                help="run N of a candidate file holding several runs (default: none, as --base-run)")
    allow_different: list[str] = flag(
        "--allow-different", action="append", default=[], metavar="LIST",
        help="a comma-separated list of differences to compare anyway: model (the served model), engine, workload "
             "(request shape, lengths, shared prefixes, dataset, prompt cache; or a workload that is unknown); the "
             "allowed difference is printed beside the verdict (default: none: such runs are not comparable, NOT "
             "ENOUGH EVIDENCE, exit 3). The same run on both sides is never compared")
    allow_different_workload: bool = switch("--allow-different-workload",
                                            help="the same as --allow-different workload (kept for scripts)")
    json: bool = switch("--json", help="print the comparison as JSON instead of markdown")
    out: str | None = path("--out", role=OUTPUT, metavar="FILE", default=None,
                           help="also write the JSON comparison to FILE (default: none)")
    html: str | None = html_flag("the comparison")
    verify_key_env: str | None = verify_key_flag()
    db: str | None = db_flag(what="run:ID")
    given: frozenset[str] = given_flags()
    percentiles: tuple[float, ...] | None = percentiles_flag()


def run(settings: CompareSettings) -> int:
    from tui.core.compare import compare, to_markdown
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.importing import ImportProblem

    key, key_name = verify_key(settings.verify_key_env)  # a missing key variable: bad usage
    settings = _catalogued(settings)  # run:ID: the catalogue's file and run (tui.cli.runref)
    if settings.html:
        from tui.cli.reporting import html_sampler

        html_sampler(settings.html)  # the folder checked before the files are read
    if settings.out:
        from tui.sources.outfiles import output_file_problem

        problem = output_file_problem(settings.out)
        if problem:
            raise UsageError(f"--out {settings.out}: {problem}")
    drilled = _drill_compare(settings, key, key_name)  # two drill files: time to recover and impact (issue 39)
    if drilled is not None:
        return drilled
    slos = settings.slos
    slo_ttft_ms = D.SLO_TTFT_MS if slos.ttft_ms is None else slos.ttft_ms
    allow = _allowed(settings)
    # compare judges which request is good: the SLOs alone (its --alpha is its own test's)
    judge_at = judge_at_from_args(slos, settings.given, alpha=settings.alpha, fields=GOOD_FIELDS)
    runs = []
    chains = []
    seen: dict[object, str] = {}
    same_file = None
    for file, pick in ((settings.base, settings.base_run), (settings.cand, settings.cand_run)):
        problem = input_problem(file) if file != "-" else f"cannot read {file}: compare reads two files, not standard input"
        if problem:  # a FIFO, a device, a folder, a missing file: one line before anything is read
            raise UsageError(problem)
        same_file = same_file_as(file, seen) or same_file  # the same path, a link to it, or identical bytes
        read = ReadSettings(pick_run=pick, verify_key=key, key_name=key_name, watch=False, verify_imported=True)
        try:
            with open_evidence(file, read) as ev:  # one pass: the requests and the digest chain
                runs.append(compare_run(ev, slo_ttft_ms, slos, judge_at=judge_at))
                chains.append(ev.integrity)
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile) as exc:
            raise runs_problem(exc) from None
        except (ImportProblem, NoRequests) as exc:  # any other ValueError is a bug, not bad input
            raise UsageError(exc) from None
    if same_file is not None and (settings.base_run or settings.cand_run) and settings.base_run != settings.cand_run:
        same_file = None  # two different runs of one file: the run ids and the request data still say if they are one
    slos, sides = judged_at(runs, judge_at)
    slo_ttft_ms = D.SLO_TTFT_MS if slos.ttft_ms is None else slos.ttft_ms
    result = compare(runs[0], runs[1], slo_ttft_ms=slo_ttft_ms, margin=settings.margin, alpha=settings.alpha, slos=slos,
                     allow_different=allow, same_file=same_file)
    result["verdict_settings"] = {"judged_at": slos.describe(),
                                  **{side: res.to_dict() for side, res in zip(("base", "candidate"), sides)}}
    code, why = worst_exit(result["exit_code"], zip(("base", "candidate"), sides))
    if why:  # re-judged at weaker SLOs than a run's: its verdict is not the runs' (exit 3)
        result["exit_code"] = code
        result["settings_exit"] = "; ".join(why)
    integrity = _integrity(settings, result, chains)
    text = json.dumps(result, indent=2, default=str)
    files = []  # the JSON and the page of one comparison: written together (tui.sources.outfiles.write_set)
    if settings.out:
        files.append((settings.out, text + "\n"))
    if settings.html:
        files.append((settings.html, compare_page(result, runs, slos, slo_ttft_ms)))
    _write_outputs(files)
    sys.stdout.write(text + "\n" if settings.json else integrity + to_markdown(result))
    if result.get("synthetic") and result["exit_code"] == 3 and result["verdict"] == "NOT WORSE":
        from tui.core.exitcodes import SYNTHETIC_NEVER_0

        print(f"servewatch: {SYNTHETIC_NEVER_0}", file=sys.stderr)
    return int(result["exit_code"])


def _catalogued(settings: CompareSettings) -> CompareSettings:
    """``settings`` with each ``run:ID`` replaced by its file and run number (``tui.cli.runref.resolve_run``); the
    outputs are then checked against the files resolved (the own-input guard saw only ``run:ID``)."""
    base, base_run, _ = resolve_run(settings.base, settings.base_run, settings.db, "base")
    cand, cand_run, _ = resolve_run(settings.cand, settings.cand_run, settings.db, "candidate")
    if (base, base_run, cand, cand_run) == (settings.base, settings.base_run, settings.cand, settings.cand_run):
        return settings
    from tui.sources.outfiles import own_input_problem

    problem = own_input_problem([("--out", settings.out), ("--html", settings.html)], [("base", base), ("cand", cand)])
    if problem:
        raise UsageError(problem)
    return replace(settings, base=base, base_run=base_run, cand=cand, cand_run=cand_run)


def _drill_compare(settings: CompareSettings, key: bytes | None, key_name: str) -> int | None:
    """`compare` of two drill files (``tui.core.drill.compare``); None when neither is a drill. One drill and one
    other run is bad usage (a drill compares with a drill)."""
    from tui.core.drill import is_drill_header
    from tui.sources.evidence_reader import run_header_of

    sides = ((settings.base, settings.base_run), (settings.cand, settings.cand_run))
    kinds = [is_drill_header(run_header_of(p, pick) or {}) if p != "-" else False for p, pick in sides]
    if not any(kinds):
        return None
    if not all(kinds):
        which = "base" if kinds[0] else "candidate"
        raise UsageError(f"the {which} is a drill file and the other is not: a drill compares with a drill "
                         "(time to recover and impact)")
    from tui.cli.drillopts import judge_file, read_drill
    from tui.core.drill import compare_drills, format_compare
    from tui.core.exitcodes import synthetic_exit
    from tui.core.monitor import MonitorConfig
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.importing import ImportProblem

    docs: list[Any] = []
    judge_at = judge_at_from_args(settings.slos, settings.given, alpha=settings.alpha, fields=GOOD_FIELDS)
    for file, pick in sides:
        try:
            mon, col = read_drill(file, MonitorConfig(slos=settings.slos), pick_run=pick, verify_key=key,
                                  key_name=key_name, judge_at=judge_at)
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile) as exc:
            raise runs_problem(exc) from None
        except ImportProblem as exc:
            raise UsageError(exc) from None
        docs.append(judge_file(mon, col))
    result = compare_drills(docs[0], docs[1], settings.base, settings.cand)
    c = result["compare"]
    code, why = synthetic_exit(int(c["exit_code"]), bool(c["synthetic"]))
    c["exit_code"], c["synthetic_exit"] = code, why
    text = json.dumps(result, indent=2, default=str)
    files = []
    if settings.out:
        files.append((settings.out, text + "\n"))
    if settings.html:
        from tui.html.drill import compare_drills_html

        files.append((settings.html, compare_drills_html(result, docs)))
    _write_outputs(files)
    sys.stdout.write(text + "\n" if settings.json else term(format_compare(result), keep_newlines=True))
    if why:
        print(f"servewatch: {term(why)}", file=sys.stderr)
    return code


def _allowed(settings: CompareSettings) -> frozenset[str]:
    """The fields of ``--allow-different`` (and its alias ``--allow-different-workload``); an unknown field is bad
    usage (one line, exit 2)."""
    from tui.core.compare_guard import parse_allow

    try:
        allow = parse_allow(settings.allow_different or [])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if settings.allow_different_workload:
        allow |= {"workload"}
    return allow


def judged_at(runs: list, judge_at: Any) -> tuple[Slos, list]:
    """The SLOs both runs are judged at (issue 35): each run's own where they agree, the flags given, and where
    the runs were judged at different SLOs, both at the strictest of them (``common_values``); and each side's
    ``Resolution`` (what it states, what changed, whether weaker)."""
    from tui.core.verdict_settings import common_values, read_header, resolve

    files = [read_header(r.get("header")) for r in runs]
    at = common_values(files, judge_at)
    sides = [resolve(f, at) for f in files]
    return sides[0].effective.slos, sides


def _integrity(settings: CompareSettings, result: Any, chains: list) -> str:
    """Both files' digest chains (verified while they were read: ``tui.core.chain``) into
    ``result["records_integrity"]``; when either chain is broken or a signature fails, NOT WORSE becomes
    NOT ENOUGH EVIDENCE (exit 3) with the reason. Returns the markdown lines saying so."""
    from tui.core.compare import EXIT, NOT_ENOUGH, NOT_WORSE

    first: list[str] = []
    lines = ["Records integrity (digest chain), per run judged:"]
    found: dict = {}
    problems: list[str] = []
    for (side, file), ri in zip((("base", settings.base), ("candidate", settings.cand)), chains, strict=True):
        found[side] = ri.to_dict()
        first.append(term(f"{side}: {ri.summary}"))
        lines.append(term(f"  {side} {file}: {ri.summary}"))
        lines.extend(term(f"    {d}") for d in ri.details)
        problems.extend(f"{side} {file}: {p}" for p in ri.problems)
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


def compare_page(result: Any, runs: list, slos: Slos, slo_ttft_ms: float) -> str:
    """The comparison's HTML page (``tui.html.compare_html``): the result and, for the TTFT distribution at the
    judged level, both runs' requests (``tui.core.chartdata.compare_cdf``)."""
    from tui.core.chartdata import compare_cdf, compare_levels
    from tui.html import compare_html

    doc = json.loads(json.dumps(result, default=str))
    cd = compare_cdf(doc, runs[0]["requests"], runs[1]["requests"], slos)
    return compare_html(doc, compare_levels(doc), cd, slos.ttft_ms)


def _write_outputs(files: list[tuple[str, str]]) -> None:
    """``--out`` and ``--html`` written together (``tui.sources.outfiles.write_set``: all or none); a refusal or an
    OS error is one line, exit 2."""
    if not files:
        return
    from tui.sources.outfiles import OutputRefused, SetIncomplete, write_set

    where = " and ".join(str(p) for p, _ in files)
    try:
        write_set(files)
    except (OutputRefused, SetIncomplete) as exc:
        raise UsageError(f"cannot write {where}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write {where}: {exc.strerror or exc}; nothing was replaced") from None
