"""`servewatch select`: the decision table across measured candidates (issue 40). Argparse glue around
``tui.core.select_guard`` (are the candidates comparable?) and ``tui.core.choice`` (the decision rule).

    servewatch select --candidate a=a.jsonl --candidate b=b1.jsonl,b2.jsonl --quality a=qa.json --quality b=qb.json \\
        --gpu-hour-usd a=2.5 --gpu-hour-usd b=1.1 --html select.html

Each candidate is judged by `accept`'s own code (``tui.cli.acceptance_doc.acceptance_document``), with the candidate's
record files, its quality file and budget file, and the shared flags: at its measured capacity (the bracket's lower
end) unless ``--required-level`` is given, so its acceptance state and reasons are exactly what the printed
`servewatch accept` command gives. Exit codes: 0 a choice, 1 no ready candidate, 3 not enough evidence to rank
(not comparable, costs that cannot be set side by side, settings below the floors, SYNTHETIC input), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.cli.acceptance_doc import AcceptSettings, QualityPolicyFlags, acceptance_document
from tui.cli.chainopts import verify_key_flag
from tui.cli.declare import Settings, block, build, flag, path, settings_from, switch
from tui.cli.options import OUTPUT, Acceptance, UsageError, epilog, positive_float
from tui.cli.runref import db_flag, is_ref, resolve_run
from tui.core import quality as Q

SELECT_EXIT_DOC = ("exit codes: 0 a choice (the ready candidate with the lowest cost per 1M good output tokens), 1 no "
                   "ready candidate (what each lacks is printed), 3 not enough evidence to rank (candidates that are not "
                   "comparable without --allow-different, costs that cannot be set side by side, settings below the "
                   "acceptance floors, SYNTHETIC input: never 0), 2 bad usage or unreadable input")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
#: the flags passed through to `accept` for every candidate when they differ from the default: (name, flag);
#: the SLOs (``Slos``), then the other verdict settings (``Acceptance``), the quality policy and the key variable
SHARED = (("ttft_ms", "--slo-ttft-ms"), ("tpot_ms", "--slo-tpot-ms"), ("itl_ms", "--slo-itl-ms"),
          ("e2e_ms", "--slo-e2e-ms"), ("ttft_of", "--ttft-of"), ("target", "--target"), ("alpha", "--alpha"),
          ("min_window_minutes", "--min-window-minutes"), ("min_requests", "--min-requests"),
          ("quality_margin", "--quality-margin"), ("quality_alpha", "--quality-alpha"),
          ("quality_min_cases", "--quality-min-cases"), ("verify_key_env", "--verify-key-env"))


@dataclass(frozen=True, kw_only=True)
class Candidates(Settings):
    """The candidates and what each is judged with."""

    GROUP = "candidates (NAME: letters, digits, . _ -; one --candidate each)"

    candidates: list[str] = flag(
        "--candidate", action="append", default=[], metavar="NAME=FILE",
        help="a candidate and its record files, NAME=FILE[,FILE...] (repeat per candidate; required, no default)")
    quality: list[str] = flag(
        "--quality", action="append", default=[], metavar="NAME=FILE",
        help="a candidate's `servewatch quality` result (default: none: that candidate's quality is not run, so it "
             "is not ready); the files must share one baseline by the servers' facts")
    budgets: list[str] = flag(
        "--budget", action="append", default=[], metavar="NAME=FILE",
        help="a candidate's saved budget JSON (`servewatch budget --out` or --out-dir) (default: the budget record "
             "in its record files, else unknown)")
    gpu_hour_usd: list[str] = flag(
        "--gpu-hour-usd", action="append", default=[], metavar="USD",
        help="price of one GPU-hour: USD for every candidate, or NAME=USD (default: none: without prices the "
             "ranking is in GPU-hours, only when every candidate ran on the same hardware)")
    gpus: list[str] = flag(
        "--gpus", action="append", default=[], metavar="N",
        help="GPUs one replica uses: N for every candidate, or NAME=N (default: the budget's --tp, else 1, said as "
             "assumed)")
    allow_different: list[str] = flag(
        "--allow-different", action="append", default=[], metavar="LIST",
        help="a comma list of differences to rank anyway: workload, slos, target, arrival, tokenizer, cache_policy; "
             "printed beside the choice (default: none: NOT ENOUGH EVIDENCE, exit 3)")
    required_level: float | None = flag(
        "--required-level", "--level", type=positive_float, default=None, metavar="LEVEL",
        help="judge every candidate at this level, as accept --required-level does (default: each at its measured "
             "capacity)")


@dataclass(frozen=True, kw_only=True)
class SelectSettings(Settings):
    """`servewatch select`."""

    DESCRIPTION = (
        "Choose among measured candidates: check that they measured one workload at one SLO, judge each as "
        "`servewatch accept` does (at its measured capacity), and choose the ready one with the lowest cost per 1M "
        "good output tokens at its capacity; a near-tie within the capacity brackets is said.")
    EPILOG = epilog("servewatch select --candidate small=small.jsonl --candidate big=big.jsonl --quality "
                    "small=q-small.json --quality big=q-big.json --gpu-hour-usd 2.5 --html select.html",
                    codes=SELECT_EXIT_DOC)

    cand: Candidates = block(Candidates)
    acceptance: Acceptance = block(Acceptance)
    quality_policy: QualityPolicyFlags = block(QualityPolicyFlags,
                                               title="quality policy (accept's; defaults as `quality`)")
    verify_key_env: str | None = verify_key_flag()
    db: str | None = db_flag(what="--candidate NAME=run:ID")
    json: bool = switch("--json", help="print the decision as JSON (choice, candidates)")
    html: str | None = path(
        "--html", role=OUTPUT, metavar="FILE", default=None,
        help="also write the decision table and its chart (cost per 1M good tokens against measured capacity, the "
             "Pareto front marked, each bracket an error bar) as one self-contained HTML page (default: none)")


# ------------------------------------------------------------------ flags


def _pairs(values: Sequence[str], flag: str, names: Sequence[str] | None, *, plain: bool = False) -> dict[str, str]:
    """NAME=VALUE pairs (``plain``: a bare VALUE is for every candidate, key "")."""
    out: dict[str, str] = {}
    for raw in values:
        name, sep, value = str(raw).partition("=")
        if not sep:
            if not plain:
                raise UsageError(f"{flag} takes NAME=VALUE, got {raw!r}")
            name, value = "", name
        name, value = name.strip(), value.strip()
        if not value:
            raise UsageError(f"{flag} {raw!r}: no value")
        if names is not None and name and name not in names:
            raise UsageError(f"{flag} {raw!r}: no --candidate named {name!r} (candidates: {', '.join(names)})")
        if name in out:
            raise UsageError(f"{flag}: {name or 'the value for every candidate'} given twice")
        out[name] = value
    return out


def _catalogued(value: str, name: str, settings: SelectSettings) -> str:
    """A record file of a candidate: ``run:ID`` is the catalogue's file (``tui.cli.runref``), which must hold that
    run alone (select reads whole files, as accept does)."""
    file, run_no, words = resolve_run(value, None, settings.db, f"--candidate {name}")
    if run_no is not None:
        raise UsageError(f"--candidate {name}: {words} is one of several runs in its file; select reads whole "
                         "record files: give a file holding that run alone")
    return file


def _candidates(settings: SelectSettings) -> dict[str, list[str]]:
    from tui.cli.evidence_files import same_file_as

    given = settings.cand.candidates
    if not given:
        raise UsageError("select: give the candidates, --candidate NAME=FILE[,FILE...] for each")
    out: dict[str, list[str]] = {}
    for name, files in _pairs(given, "--candidate", None).items():
        if not NAME.match(name):
            raise UsageError(f"--candidate {name!r}: a name is 1-40 letters, digits, '.', '_' or '-' (starting with a "
                             "letter or digit)")
        paths = [p.strip() for p in files.split(",") if p.strip()]
        if not paths:
            raise UsageError(f"--candidate {name}: give its record files, NAME=FILE[,FILE...]")
        paths = [_catalogued(p, name, settings) for p in paths]
        for p in paths:
            if p == "-":
                raise UsageError(f"--candidate {name}: standard input cannot be one candidate among several")
            if not os.path.isfile(p):
                raise UsageError(f"--candidate {name}: cannot read {p}: "
                                 + ("is a folder" if os.path.isdir(p) else "no such file"))
        out[name] = paths
    if any(is_ref(f) for fs in _pairs(given, "--candidate", None).values() for f in fs.split(",")):
        from tui.sources.outfiles import own_input_problem

        problem = own_input_problem([("--html", settings.html)],
                                    [(f"--candidate {n}", p) for n, ps in out.items() for p in ps])
        if problem:
            raise UsageError(problem)
    earlier_candidates: dict[object, str] = {}  # the files of the candidates before this one
    for name, paths in out.items():
        for p in paths:
            same = same_file_as(p, dict(earlier_candidates))
            if same is not None:
                raise UsageError(f"--candidate {name}: {p} is another candidate's file ({same}): one measurement "
                                 "cannot be two candidates")
        for p in paths:
            same_file_as(p, earlier_candidates)
    return out


def _number(flag: str, text: str, kind: type) -> Any:
    try:
        v = kind(text)
    except ValueError:
        raise UsageError(f"{flag}: not a number: {text!r}") from None
    if kind is float and not (v == v and 0 <= v < 1e9):
        raise UsageError(f"{flag}: a price >= 0, got {text!r}")
    if kind is int and v < 1:
        raise UsageError(f"{flag}: a whole number >= 1, got {text!r}")
    return v


#: the verdict settings among SHARED (their names in ``Acceptance.given``): passed on only when given (a file is
#: otherwise judged at its run's own)
VERDICT_SETTINGS = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_ms", "e2e_ms": "e2e_ms",
                    "ttft_of": "ttft_of", "target": "target", "alpha": "alpha", "min_window_minutes": "min_window_s",
                    "min_requests": "min_requests"}


def _shared_argv(settings: SelectSettings) -> list[str]:
    """The shared flags as accept's argv: the verdict settings the user gave (issue 35: each file is otherwise
    judged at its run's own settings), the quality policy and key flags that differ from accept's defaults."""
    acc, qp, slos = settings.acceptance, settings.quality_policy, settings.acceptance.slos
    values: dict[str, Any] = {
        "ttft_ms": slos.ttft_ms, "tpot_ms": slos.tpot_ms, "itl_ms": slos.itl_ms, "e2e_ms": slos.e2e_ms,
        "ttft_of": slos.ttft_of, "target": acc.target, "alpha": acc.alpha,
        "min_window_minutes": acc.min_window_minutes, "min_requests": acc.min_requests,
        "quality_margin": qp.quality_margin, "quality_alpha": qp.quality_alpha,
        "quality_min_cases": qp.quality_min_cases, "verify_key_env": settings.verify_key_env}
    defaults = {"quality_margin": Q.DEFAULT_MARGIN, "quality_alpha": Q.DEFAULT_ALPHA,
                "quality_min_cases": Q.DEFAULT_MIN_CASES, "verify_key_env": None}
    out: list[str] = []
    for name, flag_name in SHARED:
        v = values[name]
        if name in VERDICT_SETTINGS:
            if VERDICT_SETTINGS[name] not in acc.given:
                continue
        elif v == defaults.get(name):
            continue
        out += [flag_name, "off" if v is None else (f"{v:g}" if isinstance(v, float) else str(v))]
    return out


class _AcceptParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (the candidate's flags as accept reads them)
        raise UsageError(f"select: {message}")


def _accept(name: str, argv: list[str]) -> Any:
    """`accept`'s document for one candidate (its bad input: one line naming the candidate, exit 2)."""
    p = build(_AcceptParser(prog="servewatch accept", add_help=False), AcceptSettings)
    try:
        return acceptance_document(settings_from(AcceptSettings, p.parse_args(argv)))
    except UsageError as exc:
        raise UsageError(f"--candidate {name}: {exc}") from None


def _command(argv: Sequence[str]) -> str:
    shown = list(argv)
    if "--no-html" in shown:
        shown.remove("--no-html")
    if "--out" in shown:
        i = shown.index("--out")
        del shown[i:i + 2]
    return "servewatch accept " + " ".join(shlex.quote(a) for a in shown)


# ------------------------------------------------------------------ one candidate


def _judge(name: str, files: list[str], required_level: float | None, quality: str | None, budget: str | None,
           price: str | None, gpus: str | None, shared: list[str]) -> tuple[Any, Any, Any]:
    """(CandidateInput, its run headers, its quality document) of one candidate, judged by `accept`'s code."""
    import tempfile

    from tui.core.choice import CandidateInput, measured_from
    from tui.core.select_guard import quality_tie_problems

    argv = ["--records", *files, "--no-html", "--out", tempfile.gettempdir()]
    for name_, value in (("--quality", quality), ("--budget", budget), ("--gpu-hour-usd", price), ("--gpus", gpus)):
        if value is not None:
            argv += [name_, value]
    argv += shared
    first = _accept(name, argv + (["--required-level", f"{required_level:g}"] if required_level else []))
    measured = measured_from(first.runs, first.doc["measured"]["levels"])
    level = required_level if required_level else measured.low
    judged_at = (first.doc["measured"].get("judged") or {}).get("level")
    if level is not None and not required_level and level != judged_at:
        argv += ["--required-level", f"{level:g}"]
        a = _accept(name, argv)
    else:
        a = first
        if required_level:
            argv += ["--required-level", f"{required_level:g}"]
    doc = a.doc
    c = doc["conclusion"]
    reasons = list(c["missing_or_failed"])
    headers = [r.snapshot.header for r in a.runs]
    qdoc = None
    if quality is not None:
        from tui.cli.quality_files import read_quality_file

        try:
            qdoc, _integrity = read_quality_file(quality, None)
        except ValueError as exc:
            raise UsageError(f"{quality}: {exc}") from None
        tie = quality_tie_problems(qdoc, headers)
        reasons += [f"Quality (select): {t}." for t in tie]
    ready = bool(c["ready_for_traffic"]) and not (qdoc is not None and quality_tie_problems(qdoc, headers))
    kinds = {_hardware(h) for h in headers}
    hardware = kinds.pop() if len(kinds) == 1 else ("mixed: " + "; ".join(sorted(str(k) for k in kinds)))
    b, q, cost = doc["budget"], doc["quality"], doc["cost"]
    judged = doc["measured"].get("judged") or {}
    cand = CandidateInput(
        name=name, ready=ready, reasons=tuple(reasons), accept_exit=int(doc["exit_code"]), measured=measured,
        synthetic=bool(doc.get("synthetic")),
        budget={"fits": b.get("fits"), "memory_only_candidate": b.get("memory_only_candidate"),
                "source": b.get("source"), "given": b.get("given")},
        quality={"state": q.get("state"), "source": q.get("source"), "not_acceptance_grade": q.get("not_acceptance_grade")},
        usd_per_gpu_hour=cost.get("gpu_hour_usd"), gpus=int(cost.get("gpus") or 1),
        gpus_from=str(cost.get("gpus_from") or ""), hardware=hardware, sources=tuple(r.source for r in a.runs),
        accept_command=_command(argv), judged=str(judged.get("text") or ""),
        not_acceptance_grade=tuple(c.get("not_acceptance_grade") or ()))
    return cand, headers, (qdoc, doc["slo"])


def _hardware(header: Any) -> str | None:
    """What a run ran on, for GPU-hours: the GPU (NVML), or with no GPU the machine (CPUs, memory, OS and host)."""
    from tui.core.identity import identity_of

    ident = identity_of(header)
    if ident.gpu is None:
        return None
    if ident.gpu != "none":
        return ident.gpu
    host = ((header.get("environment") or {}).get("gpu") or {}).get("host") or {}
    cpus, mem = host.get("cpu_count"), host.get("memory_total")
    size = f"{mem / 2**30:.1f} GiB" if isinstance(mem, (int, float)) and not isinstance(mem, bool) else "memory ?"
    return f"none (the CPU of one machine: {cpus or '?'} CPUs, {size}, {ident.host or 'host unknown'})"


# ------------------------------------------------------------------ the command


def run(settings: SelectSettings) -> int:
    """`servewatch select`."""
    from tui.core.choice import decide, format_decision
    from tui.core.select_guard import comparability, parse_allow, shared_baseline

    c = settings.cand
    cands = _candidates(settings)
    names = list(cands)
    qualities = _pairs(c.quality, "--quality", names)
    budgets = _pairs(c.budgets, "--budget", names)
    prices = _pairs(c.gpu_hour_usd, "--gpu-hour-usd", names, plain=True)
    gpus = _pairs(c.gpus, "--gpus", names, plain=True)
    for shown, d, kind in (("--gpu-hour-usd", prices, float), ("--gpus", gpus, int)):
        for v in d.values():
            _number(shown, v, kind)
    try:
        allow = parse_allow(c.allow_different)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    html = settings.html
    if html:
        from tui.sources.outfiles import output_file_problem, own_input_problem

        ins = [("--candidate", p) for ps in cands.values() for p in ps]
        ins += [("--quality", p) for p in qualities.values()] + [("--budget", p) for p in budgets.values()]
        problem = own_input_problem([("--html", html)], ins) or output_file_problem(html)
        if problem:
            raise UsageError(f"--html {html}: {problem}" if not problem.startswith("--html") else problem)
    shared = _shared_argv(settings)
    judged: list[Any] = []
    headers: dict[str, list] = {}
    qdocs: dict[str, Any] = {}
    slo_blocks: dict[str, Any] = {}
    for name, files in cands.items():
        cand, hs, (qdoc, slo) = _judge(name, files, c.required_level, qualities.get(name), budgets.get(name),
                                       prices.get(name, prices.get("")), gpus.get(name, gpus.get("")), shared)
        judged.append(cand)
        headers[name] = hs
        slo_blocks[name] = slo
        if qdoc is not None:
            qdocs[name] = qdoc
    comp = comparability([(n, headers[n]) for n in names], allow, judged=slo_blocks)
    _facts, baseline_problems = shared_baseline(qdocs)
    not_grade = sorted({g for c in judged for g in c.not_acceptance_grade})
    doc = decide(judged, comp, not_grade, baseline_problems)
    if html:
        from tui.cli.reporting import write_html
        from tui.html import select_html

        write_html(html, select_html(doc))
    if settings.json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(format_decision(doc))
        if html:
            print(f"wrote {html}")
    if doc["synthetic"] and doc["exit_code"] != 0:
        from tui.core.exitcodes import SYNTHETIC_NEVER_0

        print(f"servewatch: {SYNTHETIC_NEVER_0}", file=sys.stderr)
    return int(doc["exit_code"])

