"""`servewatch accept`: the acceptance report (acceptance.md, .json, .html) from record files, a quality result
and the budget.  Argparse glue around ``tui.core.acceptance``.

Exit codes: 0 ready for real traffic, 1 something failed, 3 evidence missing, 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui import __version__
from tui.cli.options import (
    INPUT,
    OUTPUT_DIR,
    UsageError,
    add_acceptance_arguments,
    add_budget_arguments,
    add_required_level_argument,
    add_run_argument,
    add_server_log_argument,
    add_teaching_argument,
    epilog,
    fraction,
    margin_fraction,
    non_negative_float,
    path_arg,
    positive_int,
)
from tui.cli.quality import _err, _httpx_version, _now_iso
from tui.core import acceptance as A
from tui.core import quality as Q
from tui.core.grade import acceptance_grade, changed_settings
from tui.core.quality.policy import QualityPolicy
from tui.core.slos import ttft_or_default
from tui.core.textsafe import term

#: the report files of one run, written together as one set (``tui.sources.outfiles.write_set``)
REPORT_FILES = ("acceptance.md", "acceptance.json", "acceptance.html")
ACCEPT_EXIT_DOC = ("exit codes: 0 ready for real traffic, 1 something failed (budget, measured load or quality), "
                   "3 evidence missing or not acceptance-grade (a window under 10 min, a target under 0.9, alpha "
                   "above 0.05; a file re-judged at weaker settings than its run's), 2 bad usage or unreadable input")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch accept`."""
    parser.description = (
        "Write the acceptance report (acceptance.md, acceptance.json, acceptance.html): budget, environment, load "
        "configuration, measured results per level, quality, cost basis, rollback conditions and the three-part "
        "conclusion. 'Ready for real traffic' only when the budget fits, the load test PASSes and quality PASSes."
    )
    parser.epilog = epilog("servewatch accept --records run.jsonl --quality quality-result.json --params 8B "
                           "--gpu-gib 80 --out report/",
                           codes=ACCEPT_EXIT_DOC)
    path_arg(parser, "--records", role=INPUT, nargs="+", required=True, metavar="FILE",
                        help="record files (JSON Lines, v1; required, no default; - reads standard input)")
    path_arg(parser, "--quality", role=INPUT, default=None, metavar="FILE",
                        help="result JSON of `servewatch quality` (default: none, quality is not run)")
    path_arg(parser, "--drill", role=INPUT, nargs="+", default=[], metavar="FILE",
             help="recovery evidence: drill files of `servewatch drill`, each judged at its own settings and held to "
                  "accept's floors, in a Recovery section beside the rollback rules (default: none; the report then "
                  "says 'no recovery evidence')")
    path_arg(parser, "--rollback", role=INPUT, default=None, metavar="FILE",
                        help="extra rollback conditions: one rule per line, or a JSON list (default: none)")
    path_arg(parser, "--out", role=OUTPUT_DIR, files=REPORT_FILES, default=".", metavar="DIR",
             help="directory for the report files (default: .); they are written together: a run's "
                  "acceptance.md, .json and .html replace the previous run's as one set (docs/acceptance.md)")
    parser.add_argument("--gpu-hour-usd", type=non_negative_float, default=None, metavar="USD",
                        help="price of one GPU-hour in USD (default: none, no cost figures)")
    parser.add_argument("--gpus", type=positive_int, default=None, metavar="N",
                        help="GPUs one replica uses, for the cost (default: --tp when given, else 1, said as assumed)")
    parser.add_argument("--no-html", action="store_true", help="do not write acceptance.html")
    parser.add_argument("--model", default=None, metavar="NAME",
                        help="judge only the record files of this model (header target.model); files of other "
                             "models are left out, said (default: none; files of different models or targets are "
                             "refused, exit 2)")
    qp = parser.add_argument_group("quality policy (accept's own, never the quality file's; defaults as `quality`)")
    qp.add_argument("--quality-margin", type=margin_fraction, default=Q.DEFAULT_MARGIN, metavar="FRACTION",
                    help="largest acceptable drop in pass rate (default 0.05 = 5 points)")
    qp.add_argument("--quality-alpha", type=fraction, default=Q.DEFAULT_ALPHA, metavar="FRACTION",
                    help="error level of the quality tests (default 0.05)")
    qp.add_argument("--quality-min-cases", type=positive_int, default=Q.DEFAULT_MIN_CASES, metavar="N",
                    help="fewest usable paired cases with which quality PASS is possible (default 20)")
    add_run_argument(parser, several_files=True)
    add_required_level_argument(parser)
    add_acceptance_arguments(parser)
    add_budget_arguments(parser)
    add_teaching_argument(parser)
    add_server_log_argument(parser)
    from tui.cli.chainopts import add_verify_key_argument

    add_verify_key_argument(parser)


def read_rollback_file(path: str) -> list[str]:
    """User rollback rules: a JSON list (strings or objects) or one rule per line (# comments). Raises ValueError."""
    from tui.core.bounds import MAX_SMALL_FILE_BYTES
    from tui.sources.infiles import read_input

    try:
        text = read_input(path, MAX_SMALL_FILE_BYTES, "rollback file").decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read rollback file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    from tui.core.acceptance import parse_rollback_rules

    return parse_rollback_rules(text, path)


def one_target(runs: list, model: str | None, notes: list[str]) -> list:
    """The runs judged together: all of one model and one target URL. Files of different models or targets are
    refused (UsageError, listing them) unless ``model`` picks one; the others are then left out, said."""
    from tui.core.runs import target_of

    if model is not None:
        kept = [r for r in runs if target_of(r.snapshot.header)[0] == model]
        for r in runs:
            if r not in kept:
                notes.append(f"{r.source} left out: model {target_of(r.snapshot.header)[0] or 'unknown'}, not {model}")
        if not kept:
            raise UsageError(f"--model {model}: no record file is of that model")
        runs = kept
    models = {target_of(r.snapshot.header)[0] for r in runs} - {None}
    urls = {target_of(r.snapshot.header)[1] for r in runs} - {None}
    if len(models) > 1 or len(urls) > 1:
        for r in runs:
            m, u = target_of(r.snapshot.header)
            _err(f"  {r.source}: model {m or 'unknown'}, url {u or 'unknown'}")
        what = "models" if len(models) > 1 else "targets"
        raise UsageError(f"the record files are of different {what} (listed above): one verdict cannot combine "
                         "them; give the files of one deployment, or --model NAME")
    from tui.core.identity import identity_of, same_model

    served = [m for m in (identity_of(r.snapshot.header).served_model for r in runs) if m]
    if any(not same_model(a, served[0]) for a in served[1:]):  # the same --model, different servers' models
        for r in runs:
            _err(term(f"  {r.source}: {identity_of(r.snapshot.header).line()}"))
        raise UsageError("the record files are of different served models (listed above): one verdict cannot "
                         "combine them; give the files of one deployment")
    return runs


def _tp(args: argparse.Namespace) -> int | None:
    """``--tp`` as a whole number (the budget flags keep their text until the budget reads them); bad: exit 2."""
    v = getattr(args, "tp", None)
    if v is None:
        return None
    try:
        tp = int(v)
    except (TypeError, ValueError):
        raise UsageError(f"--tp must be a whole number >= 1, got {v!r}") from None
    if tp < 1:
        raise UsageError(f"--tp must be a whole number >= 1, got {v!r}")
    return tp


@dataclass
class Accepted:
    """What `accept` judged, before anything is written: the acceptance document, the runs it read (with their
    HTML samplers), the Monitor settings, the notes on the inputs, and each file's digest-chain verification.
    `servewatch select` reads each candidate through :func:`acceptance_document`, so its acceptance state is
    exactly `accept`'s."""

    doc: dict
    runs: list
    samplers: dict
    cfg: Any
    input_notes: list[str]
    integrity: list
    settings_docs: list


def acceptance_document(args: argparse.Namespace) -> Accepted:
    """Everything `accept` judges, from its parsed flags: the document and what it was built from (raises
    UsageError for bad usage or unreadable input). Nothing is written."""
    from tui.cli.budget import view_budget
    from tui.cli.report import monitor_config_from_args

    try:
        cfg = monitor_config_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from tui.sources.outfiles import output_target_problem

    for name in REPORT_FILES:  # a link planted in the output folder: refused before the records are read
        problem = output_target_problem(Path(args.out) / name)
        if problem:
            raise UsageError(f"{Path(args.out) / name} {problem}")
    try:
        budget, budget_origin = view_budget(args, args.records)
    except (ValueError, OSError) as exc:
        raise UsageError(f"bad budget: {exc}") from None
    from tui.cli.options import server_log_from_args

    server_log = server_log_from_args(args)  # --server-log FILE: the engine's own startup-log figures
    if args.gpu_hour_usd is not None and not args.gpu_hour_usd < 1e9:
        raise UsageError("--gpu-hour-usd must be a price >= 0")
    user_rules: list[str] = []
    if args.rollback:
        try:
            user_rules = read_rollback_file(args.rollback)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    quality_doc = quality_integrity = None
    if args.quality:
        from tui.cli.chainopts import verify_key
        from tui.cli.quality import read_quality_file

        try:  # the digest (and with --verify-key-env the signature) is checked by the report, never skipped
            quality_doc, quality_integrity = read_quality_file(args.quality, verify_key(args)[0])
            Q.recheck(quality_doc)
        except (ValueError, Q.SetError) as exc:
            raise UsageError(f"{args.quality}: {exc}") from None

    runs = []
    record_budget = None
    from tui.core.budget.memory import MemoryMissing

    pending = isinstance(budget, MemoryMissing)
    input_notes: list[str] = []
    samplers: dict[str, object] = {}  # per record file, the HTML charts' bounded sample (tui.core.chartdata)
    from tui.cli.evidence_files import files_judge_at, judged_monitors
    from tui.core.chartdata import RunSampler

    tap_for = None if args.no_html else (lambda: RunSampler(cfg.slos))
    # issue 35: each file judged at its run's settings, the flags given, or one common setting (files_judge_at)
    for mon, sampler in judged_monitors(args, cfg, budget, budget_origin, input_notes, tap_for,
                                        judge_at=files_judge_at(args)):
        from tui.core.importers.limits import limit_snapshot

        snap = limit_snapshot(mon.snapshot())  # imported: no time axis or a sample -> no verdict
        for issue in snap.malformed_examples:
            _err(str(issue))
        if (budget is None or pending) and snap.budget is not None and record_budget is None:
            # a budget given without its memory: the first file's header completed it (NVML, the engine's KV space)
            record_budget = (snap.budget, mon.budget_origin if pending else f"budget record in {mon.source}")
        runs.append(A.RunInput(source=mon.source, snapshot=snap, received=snap.tokens))  # counted tokens, run-wide
        samplers[mon.source] = sampler
    runs = one_target(runs, args.model, input_notes)
    cfg, required_level, settings_docs, weaker = judged_settings(runs, cfg, args.required_level)
    if pending:
        budget, budget_origin = record_budget if record_budget is not None else (None, None)
    elif budget is None and record_budget is not None:  # the first file's budget record (verified on load)
        budget, budget_origin = record_budget
    try:
        A.measured_section(runs, None, required_level)  # a level not in the files: exit 2 before writing
    except A.LevelNotInFile as exc:
        from tui.cli.options import given_settings

        if required_level is None or "required_level" in given_settings(args):
            raise UsageError(str(exc)) from None
        # the level the RUNS name (their verdict_settings) is not in them: the highest tested, never "ready"
        weaker.append(f"the runs' required level {required_level:g} is not in the files: judged at the highest "
                      "level tested")
        required_level = None
    drills = read_drills(args, cfg)
    doc = A.build_acceptance(
        runs=runs,
        budget=budget,
        budget_source=budget_origin,
        quality=quality_doc,
        quality_source=args.quality,
        cost=A.CostInputs(gpu_hour_usd=args.gpu_hour_usd, gpus=args.gpus, tp=_tp(args)),
        rollback_rules=user_rules,
        rollback_source=args.rollback,
        slo_ttft_ms=ttft_or_default(cfg.slos),
        slos=cfg.slos,
        target=cfg.target,
        alpha=cfg.alpha,
        min_window_s=cfg.min_window_s,
        required_level=required_level,
        generator={"servewatch": __version__, "python": platform.python_version(), "httpx": _httpx_version()},
        generated_at=_now_iso(),
        quality_policy=QualityPolicy(args.quality_margin, args.quality_alpha, args.quality_min_cases),
        settings_changed=changed_settings(cfg),
        not_acceptance_grade=acceptance_grade(cfg),
        input_notes=input_notes,
        server_log=server_log,
        quality_integrity=quality_integrity,
        verdict_settings=settings_docs,
        rejudged_weaker=weaker,
        drills=drills,
    )
    integrity = [(r.source, r.snapshot.records_integrity) for r in runs if r.snapshot.records_integrity is not None]
    if any(ri.state != "unverified" or ri.problems for _src, ri in integrity):  # the digest chain: none, no section
        doc["records_integrity"] = [{"source": src, **ri.to_dict()} for src, ri in integrity]
    return Accepted(doc, runs, samplers, cfg, input_notes, integrity, settings_docs)


def run(args: argparse.Namespace) -> int:
    """`servewatch accept`."""
    a = acceptance_document(args)
    doc, runs, samplers, cfg, input_notes, integrity = a.doc, a.runs, a.samplers, a.cfg, a.input_notes, a.integrity
    settings_docs = a.settings_docs
    out_dir = Path(args.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
    md = A.render_markdown(doc)
    page = None
    if not args.no_html:
        from tui.html import accept_html

        page = accept_html(doc, accept_chart_data(doc, runs, samplers, cfg))
    contents = (md, json.dumps(doc, indent=2) + "\n", page)
    files = [(out_dir / name, text) for name, text in zip(REPORT_FILES, contents, strict=True)]
    from tui.sources.outfiles import OutputRefused, SetIncomplete, write_set

    try:  # one set: all written first, then renamed together; never this run's md beside another run's html
        removed = write_set(files)
    except (OutputRefused, SetIncomplete) as exc:
        raise UsageError(f"cannot write the report into {out_dir}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write the report into {out_dir}: {exc.strerror or exc}; nothing was replaced (the "
                         "report files there, if any, are still the previous run's, whole)") from None
    written = [str(p) for p, text in files if text is not None]
    c = doc["conclusion"]
    for src, ri in integrity:  # the first lines: what was verified, in the threat model's words (issue 36)
        print(term(f"records {src}: {ri.summary}"))
    if doc.get("banner"):
        print(term(doc["banner"]))
    for note in input_notes:
        print(f"  input: {term(note)}")
    changed = ("  [settings not default: " + ", ".join(c["settings_changed"]) + "]") if c.get("settings_changed") else ""
    print(term(f"acceptance: {c['verdict']}  (budget: {c['budget']}, measured: {c['measured']}, quality: {c['quality']})"
               + changed))
    for x in doc.get("load_configuration") or ():  # issue 23: each run's workload, one line
        if x.get("workload"):
            print(term(f"  workload of {x['source']}: {x['workload']}"))
    for x in doc["identity"]["runs"]:
        print(term(f"  identity of {x['source']}: {x['line']}"))
    if doc["quality"].get("tied"):
        print(f"  {term(doc['quality']['tied'])}")
    if doc["quality"].get("integrity"):
        print(f"  {term(doc['quality']['integrity']['summary'])}")
    if doc["measured"].get("judged"):
        print(f"  {term(doc['measured']['judged']['text'])}")
    for vs in settings_docs:  # what each file was judged at (issue 35)
        for line in vs["lines"]:
            print(term(f"  {vs['source']}: {line.strip()}"))
    if doc["budget"].get("capacity_vs_server"):
        print(f"  {term(doc['budget']['capacity_vs_server'])}")
    for x in (doc.get("recovery") or {}).get("drills") or ():  # issue 39: each drill in one line
        print(term(f"  drill {x['source']}: {x['verdict']}: {x['reason']}"))
    for line in c["missing_or_failed"]:
        print(f"  {term(line)}")
    if c.get("recovery") and not any(str(x).startswith("Recovery:") for x in c["missing_or_failed"]):
        print(f"  {term(c['recovery'])}")
    print(term("wrote " + ", ".join(written)))
    for path in removed:  # --no-html: the previous run's page must not stand beside this run's report
        print(term(f"removed {path} (the previous run's; this run wrote no page)"))
    return int(doc["exit_code"])


def judged_settings(runs: list, cfg, flag_level: float | None) -> tuple:
    """What the record files were judged at together (issue 35): (the Monitor settings, the required level, per
    file its ``verdict_settings`` document, the files re-judged weaker than their runs' with the reason). Files
    judged at different settings (standard input, whose header is read once, by the judging pass, stating others)
    are refused: one verdict is judged at one setting. Also `plan`'s."""
    from tui.core.monitor import config_at
    from tui.core.report import run_state
    from tui.core.verdict_settings import settings_exit

    docs, weaker, effective = [], [], []
    for r in runs:
        src, snap = (r.source, r.snapshot) if hasattr(r, "snapshot") else r
        res = snap.settings
        if res is None:
            continue
        docs.append({"source": src, **res.to_dict(run_state(snap))})
        _code, why = settings_exit(0, res)
        if why:
            weaker.append(f"{src}: {why}")
        effective.append(res.effective)
    if not effective:
        return cfg, flag_level, docs, weaker
    if any(e != effective[0] for e in effective[1:]):
        raise UsageError("the record files are judged at different settings ("
                         + "; ".join(f"{d['source']}: " + next(x for x in d["lines"] if x.startswith("settings:"))
                                     for d in docs)
                         + "): give the settings to judge all of them at as flags")
    return config_at(cfg, effective[0]), effective[0].required_level, docs, weaker


def read_drills(args: argparse.Namespace, cfg) -> list[dict]:
    """``--drill FILE...``: each drill file judged at its own settings (its run header's; the flags given re-judge as
    everywhere), its document and the floors it is below (``tui.core.grade``), for the Recovery section."""
    from tui.cli.chainopts import verify_key
    from tui.cli.drillopts import judge_file, read_drill
    from tui.cli.options import judge_at_from_args
    from tui.core.runs import RunNotInFile, SeveralRuns, target_of
    from tui.sources.evidence_probe import input_problem
    from tui.sources.importing import ImportProblem

    key, key_name = verify_key(args)
    out = []
    for path in args.drill:
        problem = input_problem(path)
        if problem:
            raise UsageError(problem)
        try:
            mon, col = read_drill(path, cfg, pick_run=args.run, verify_key=key, key_name=key_name,
                                  judge_at=judge_at_from_args(args))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile, ImportProblem) as exc:
            raise UsageError(f"{path}: {exc}") from None
        if not col.active:
            raise UsageError(f"--drill {path}: not a drill file (its run header has no load.drill: record one with "
                             "`servewatch drill`)")
        doc = judge_file(mon, col)
        out.append({"source": path, "drill": doc["drill"], "not_acceptance_grade": acceptance_grade(mon.cfg),
                    "target": list(target_of(col.header))})
    return out


def accept_chart_data(doc: dict, runs: list, samplers: dict, cfg) -> dict:
    """The acceptance page's chart data (``tui.core.chartdata.report_bundle``): the level rows of the document,
    and the judged level's requests, queue and memory from the record file that holds the judged level."""
    from tui.core.chartdata import report_bundle, timeline_rows

    m = doc.get("measured") or {}
    rows = m.get("levels") or []
    judged = dict(m.get("judged") or {})
    level = judged.get("level")
    at = [r for r in rows if r.get("level") == level]
    chosen = next((r for r in at if r.get("verdict") == judged.get("state")), at[-1] if at else None)
    judged["round"] = 1 if chosen is None else chosen.get("round", 1)
    source = None if chosen is None else chosen.get("source")
    run = next((r for r in runs if r.source == source), runs[0] if runs else None)
    snap = None if run is None else run.snapshot
    return report_bundle(rows, judged=judged, candidate=m.get("memory_only_candidate"), slos=cfg.slos,
                         target=cfg.target, timeline=[] if snap is None else timeline_rows(snap.timeline),
                         timeline_omitted=0 if snap is None else snap.timeline_omitted,
                         sampler=None if run is None else samplers.get(run.source),
                         gpu_ceiling_gib=None if snap is None else snap.gpu.ceiling_gib,
                         kv_allocated_gib=None if snap is None else snap.gpu.engine_kv_allocated_gib,
                         kv_ceiling_gib=None if snap is None else snap.gpu.kv_ceiling_gib,
                         several_sources=len({r.get("source") for r in rows}) > 1)

