"""The acceptance document of `servewatch accept` (its settings, ``AcceptSettings``, and what it judges,
``acceptance_document``): shared by `accept`, which writes it, and `select`, which judges each candidate with it
(so a candidate's acceptance state is exactly `accept`'s). Argparse-free glue around ``tui.core.acceptance``.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui import __version__
from tui.cli.budgetflags import BudgetFlags
from tui.cli.chainopts import verify_key_flag
from tui.cli.declare import Settings, block, flag, path, switch
from tui.cli.options import (
    INPUT,
    OUTPUT_DIR,
    Acceptance,
    UsageError,
    epilog,
    fraction,
    margin_fraction,
    non_negative_float,
    percentiles_flag,
    positive_int,
    required_level_flag,
    run_flag,
    server_log_flag,
    teaching_flag,
)
from tui.cli.quality_files import httpx_version, now_iso
from tui.cli.quality_files import warn as _err
from tui.core import acceptance as A
from tui.core import quality as Q
from tui.core.grade import acceptance_grade, changed_settings
from tui.core.quality.policy import QualityPolicy
from tui.core.slos import ttft_or_default
from tui.core.textsafe import term

__all__ = ["ACCEPT_EXIT_DOC", "REPORT_FILES", "AcceptSettings", "Accepted", "QualityPolicyFlags", "accept_chart_data",
           "acceptance_document"]

#: the report files of one run, written together as one set (``tui.sources.outfiles.write_set``)
REPORT_FILES = ("acceptance.md", "acceptance.json", "acceptance.html")
ACCEPT_EXIT_DOC = ("exit codes: 0 ready for real traffic, 1 something failed (budget, measured load or quality), "
                   "3 evidence missing or not acceptance-grade (a window under 10 min, a target under 0.9, alpha "
                   "above 0.05; a file re-judged at weaker settings than its run's), 2 bad usage or unreadable input")


@dataclass(frozen=True, kw_only=True)
class QualityPolicyFlags(Settings):
    """accept's own quality policy (never the quality file's)."""

    GROUP = "quality policy (accept's own, never the quality file's; defaults as `quality`)"

    quality_margin: float = flag("--quality-margin", type=margin_fraction, default=Q.DEFAULT_MARGIN, metavar="FRACTION",
                         help="largest acceptable drop in pass rate (default 0.05 = 5 points)")
    quality_alpha: float = flag("--quality-alpha", type=fraction, default=Q.DEFAULT_ALPHA, metavar="FRACTION",
                        help="error level of the quality tests (default 0.05)")
    quality_min_cases: int = flag("--quality-min-cases", type=positive_int, default=Q.DEFAULT_MIN_CASES, metavar="N",
                          help="fewest usable paired cases with which quality PASS is possible (default 20)")


@dataclass(frozen=True, kw_only=True)
class AcceptSettings(Settings):
    """`servewatch accept`."""

    DESCRIPTION = (
        "Write the acceptance report (acceptance.md, acceptance.json, acceptance.html): budget, environment, load "
        "configuration, measured results per level, quality, cost basis, rollback conditions and the three-part "
        "conclusion. 'Ready for real traffic' only when the budget fits, the load test PASSes and quality PASSes."
    )
    EPILOG = epilog("servewatch accept --records run.jsonl --quality quality-result.json --params 8B "
                    "--gpu-gib 80 --out report/",
                    codes=ACCEPT_EXIT_DOC)

    records: list[str] = path("--records", role=INPUT, nargs="+", required=True, metavar="FILE",
                              help="record files (JSON Lines, v1; required, no default; - reads standard input)")
    quality: str | None = path("--quality", role=INPUT, default=None, metavar="FILE",
                               help="result JSON of `servewatch quality` (default: none, quality is not run)")
    drill: list[str] = path("--drill", role=INPUT, nargs="+", default=[], metavar="FILE",
                            help="recovery evidence: drill files of `servewatch drill`, each judged at its own settings "
                                 "and held to accept's floors, in a Recovery section beside the rollback rules "
                                 "(default: none; the report then says 'no recovery evidence')")
    rollback: str | None = path("--rollback", role=INPUT, default=None, metavar="FILE",
                                help="extra rollback conditions: one rule per line, or a JSON list (default: none)")
    out: str = path("--out", role=OUTPUT_DIR, files=REPORT_FILES, default=".", metavar="DIR",
                    help="directory for the report files (default: .); they are written together: a run's "
                         "acceptance.md, .json and .html replace the previous run's as one set (docs/acceptance.md)")
    gpu_hour_usd: float | None = flag("--gpu-hour-usd", type=non_negative_float, default=None, metavar="USD",
                                      help="price of one GPU-hour in USD (default: none, no cost figures)")
    gpus: int | None = flag("--gpus", type=positive_int, default=None, metavar="N",
                            help="GPUs one replica uses, for the cost (default: --tp when given, else 1, said as "
                                 "assumed)")
    no_html: bool = switch("--no-html", help="do not write acceptance.html")
    model: str | None = flag("--model", default=None, metavar="NAME",
                             help="judge only the record files of this model (header target.model); files of other "
                                  "models are left out, said (default: none; files of different models or targets "
                                  "are refused, exit 2)")
    quality_policy: QualityPolicyFlags = block(QualityPolicyFlags)
    run: int | None = run_flag(several_files=True)
    required_level: float | None = required_level_flag()
    acceptance: Acceptance = block(Acceptance)
    budget: BudgetFlags = block(BudgetFlags)
    teaching: bool = teaching_flag()
    server_log: str | None = server_log_flag()
    verify_key_env: str | None = verify_key_flag()
    percentiles: tuple[float, ...] | None = percentiles_flag()


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


@dataclass
class Accepted:
    """What `accept` judged, before anything is written: the acceptance document, the runs it read (with their
    HTML samplers), the Monitor settings, the notes on the inputs, and each file's digest-chain verification.
    `servewatch select` reads each candidate through :func:`acceptance_document`, so its acceptance state is
    exactly `accept`'s."""

    doc: Any  # tui.core.acceptance.AcceptanceDoc
    runs: list
    samplers: dict
    cfg: Any
    input_notes: list[str]
    integrity: list
    settings_docs: list


def acceptance_document(settings: AcceptSettings) -> Accepted:
    """Everything `accept` judges, from its settings: the document and what it was built from (raises
    UsageError for bad usage or unreadable input). Nothing is written."""
    from tui.cli.budgetflags import server_log_from_args, view_budget

    try:
        cfg = settings.acceptance.monitor_config()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from tui.sources.outfiles import output_target_problem

    for name in REPORT_FILES:  # a link planted in the output folder: refused before the records are read
        problem = output_target_problem(Path(settings.out) / name)
        if problem:
            raise UsageError(f"{Path(settings.out) / name} {problem}")
    try:
        budget, budget_origin = view_budget(settings.budget, settings.teaching, settings.records)
    except (ValueError, OSError) as exc:
        raise UsageError(f"bad budget: {exc}") from None
    server_log = server_log_from_args(settings.server_log, settings.budget)  # the engine's startup-log figures
    if settings.gpu_hour_usd is not None and not settings.gpu_hour_usd < 1e9:
        raise UsageError("--gpu-hour-usd must be a price >= 0")
    user_rules: list[str] = []
    if settings.rollback:
        try:
            user_rules = read_rollback_file(settings.rollback)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    quality_doc = quality_integrity = None
    if settings.quality:
        from tui.cli.chainopts import verify_key
        from tui.cli.quality_files import read_quality_file

        try:  # the digest (and with --verify-key-env the signature) is checked by the report, never skipped
            quality_doc, quality_integrity = read_quality_file(settings.quality, verify_key(settings.verify_key_env)[0])
            Q.recheck(quality_doc)
        except (ValueError, Q.SetError) as exc:
            raise UsageError(f"{settings.quality}: {exc}") from None

    runs = []
    record_budget = None
    from tui.core.budget.memory import MemoryMissing

    pending = isinstance(budget, MemoryMissing)
    input_notes: list[str] = []
    samplers: dict[str, object] = {}  # per record file, the HTML charts' bounded sample (tui.core.chartdata)
    from tui.cli.evidence_files import files_judge_at, judged_monitors
    from tui.core.chartdata import RunSampler

    judge_at = files_judge_at(settings.records, settings.run, settings.acceptance.judge_at(settings.required_level),
                              settings.model)

    tap_for = None if settings.no_html else (lambda: RunSampler(cfg.slos))
    # issue 35: each file judged at its run's settings, the flags given, or one common setting (files_judge_at)
    for mon, sampler in judged_monitors(settings.records, settings.run, settings.verify_key_env, cfg, budget,
                                        budget_origin, input_notes, tap_for, judge_at=judge_at):
        snap = mon.snapshot()  # limited by what the file supports (tui.sources.evidence_monitor.JudgedMonitor)
        for issue in snap.malformed_examples:
            _err(str(issue))
        if (budget is None or pending) and snap.budget is not None and record_budget is None:
            # a budget given without its memory: the first file's header completed it (NVML, the engine's KV space)
            record_budget = (snap.budget, mon.budget_origin if pending else f"budget record in {mon.source}")
        runs.append(A.RunInput(source=mon.source, snapshot=snap, received=snap.tokens))  # counted tokens, run-wide
        samplers[mon.source] = sampler
    runs = one_target(runs, settings.model, input_notes)
    from tui.cli.evidence_files import judged_settings

    cfg, required_level, settings_docs, weaker = judged_settings(runs, cfg, settings.required_level)
    if pending:
        budget, budget_origin = record_budget if record_budget is not None else (None, None)
    elif budget is None and record_budget is not None:  # the first file's budget record (verified on load)
        budget, budget_origin = record_budget
    try:
        A.measured_section(runs, None, required_level)  # a level not in the files: exit 2 before writing
    except A.LevelNotInFile as exc:
        if required_level is None or "required_level" in settings.acceptance.given:
            raise UsageError(str(exc)) from None
        # the level the RUNS name (their verdict_settings) is not in them: the highest tested, never "ready"
        weaker.append(f"the runs' required level {required_level:g} is not in the files: judged at the highest "
                      "level tested")
        required_level = None
    drills = read_drills(settings, cfg)
    doc = A.build_acceptance(
        runs=runs,
        budget=budget,
        budget_source=budget_origin,
        quality=quality_doc,
        quality_source=settings.quality,
        cost=A.CostInputs(gpu_hour_usd=settings.gpu_hour_usd, gpus=settings.gpus, tp=settings.budget.tp_value()),
        rollback_rules=user_rules,
        rollback_source=settings.rollback,
        slo_ttft_ms=ttft_or_default(cfg.slos),
        slos=cfg.slos,
        target=cfg.target,
        alpha=cfg.alpha,
        min_window_s=cfg.min_window_s,
        required_level=required_level,
        generator={"servewatch": __version__, "python": platform.python_version(), "httpx": httpx_version()},
        generated_at=now_iso(),
        quality_policy=QualityPolicy(settings.quality_policy.quality_margin, settings.quality_policy.quality_alpha,
                                     settings.quality_policy.quality_min_cases),
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


def read_drills(settings: AcceptSettings, cfg: Any) -> list[dict]:
    """``--drill FILE...``: each drill file judged at its own settings (its run header's; the flags given re-judge as
    everywhere), its document and the floors it is below (``tui.core.grade``), for the Recovery section."""
    from tui.cli.chainopts import verify_key
    from tui.cli.drillopts import judge_file, read_drill
    from tui.core.runs import RunNotInFile, SeveralRuns, target_of
    from tui.sources.evidence_probe import input_problem
    from tui.sources.importing import ImportProblem

    key, key_name = verify_key(settings.verify_key_env)
    out = []
    for file in settings.drill:
        problem = input_problem(file)
        if problem:
            raise UsageError(problem)
        try:
            mon, col = read_drill(file, cfg, pick_run=settings.run, verify_key=key, key_name=key_name,
                                  judge_at=settings.acceptance.judge_at(settings.required_level))
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile, ImportProblem) as exc:
            raise UsageError(f"{file}: {exc}") from None
        if not col.active:
            raise UsageError(f"--drill {file}: not a drill file (its run header has no load.drill: record one with "
                             "`servewatch drill`)")
        doc = judge_file(mon, col)
        out.append({"source": file, "drill": doc["drill"], "not_acceptance_grade": acceptance_grade(mon.cfg),
                    "target": list(target_of(col.header))})
    return out


def accept_chart_data(doc: Any, runs: list, samplers: dict, cfg: Any) -> Any:
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

