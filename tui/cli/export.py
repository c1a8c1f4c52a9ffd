"""`servewatch export FILE --format csv|parquet|llmd [--out PATH]`: one run's per-request records as one flat
table (CSV with its metadata in ``PATH.meta.json``, or Parquet with it inside), or one step of it as an llm-d
benchmark report (v0.2). Thin glue: the settings (:class:`ExportSettings`, declared; resolved once into an :class:`ExportJob`), then
``tui.sources.export_files.export_run`` reads, judges and writes; the columns are ``tui.core.export_rows``.

Exit codes: 0 written, 3 written but the data is SYNTHETIC (never 0), 2 bad usage or unreadable input.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace
from typing import Any

from tui.cli.chainopts import verify_key_flag
from tui.cli.declare import Settings, block, flag, path, positional, switch
from tui.cli.options import (
    INPUT,
    OUTPUT,
    Acceptance,
    UsageError,
    epilog,
    required_level_flag,
    run_flag,
)
from tui.cli.runref import db_flag, resolve_run
from tui.core.textsafe import term
from tui.core.verdict_settings import JudgeAt

FORMATS = ("csv", "parquet", "llmd")
SUFFIX = {"csv": ".csv", "parquet": ".parquet", "llmd": ".llmd.json"}
EXPORT_EXIT_DOC = ("exit codes: 0 written, 3 written but the data is SYNTHETIC (never 0), 2 bad usage, unreadable "
                   "input or an output refused")


def default_out(settings: ExportSettings) -> str | None:
    """The file written: ``--out``, else FILE with the format's suffix appended (``run.jsonl.csv``)."""
    file = settings.file
    return settings.out or (file + SUFFIX.get(settings.format, ".csv")
                            if isinstance(file, str) and file != "-" else None)


@dataclass(frozen=True, kw_only=True)
class ExportSettings(Settings):
    """`servewatch export FILE`."""

    DESCRIPTION = (
        "One run's per-request records as one flat table: one row per request record, one column per field, with "
        "its level, round, phase, outcome and SLO misses (the report's rule, at the settings the file is judged "
        "at). CSV (the run header and the report's level rows in PATH.meta.json beside it), Parquet (the same "
        "inside, as file metadata; needs pyarrow) or llmd: one step as an llm-d benchmark report v0.2 (JSON). "
        "Columns: docs/record-format.md, \"The export's columns\".")
    EPILOG = epilog("servewatch export run.jsonl --format parquet --out run.parquet", codes=EXPORT_EXIT_DOC)

    file: str = positional("file", role=INPUT, metavar="FILE",
                           help="record file, or another tool's export servewatch imports, or run:ID (a run of the "
                                "catalogue: servewatch index / history, with --db)")
    format: str = flag("--format", choices=FORMATS, default="csv",
                       help="csv (and PATH.meta.json), parquet (pyarrow) or llmd (an llm-d benchmark report of one "
                            "step: the level judged, or --level's) (default csv)")
    out: str | None = path("--out", role=OUTPUT, metavar="FILE", default=None, default_from=default_out,
                           help="the file to write (default: FILE with .csv, .parquet or .llmd.json appended); an "
                                "existing file is refused unless --force is given")
    force: bool = switch("--force", help="replace --out (and its .meta.json) when it exists (default: refuse, exit 2)")
    json: bool = switch("--json", help="print what was written as JSON")
    run: int | None = run_flag()
    required_level: float | None = required_level_flag()
    acceptance: Acceptance = block(Acceptance)
    verify_key_env: str | None = verify_key_flag()
    db: str | None = db_flag(what="run:ID")


@dataclass(frozen=True)
class ExportJob:
    """Everything `export` was asked, resolved (run:ID to its file and run, the default output named)."""

    file: str
    fmt: str
    out: str
    force: bool
    json: bool
    pick_run: int | None
    required_level: float | None
    judge_at: JudgeAt
    verify_key_env: str | None


def export_job(settings: ExportSettings) -> ExportJob:
    # run:ID (a run of the catalogue, servewatch index): its file and run number; the default output is named
    # after that file
    file, pick_run, _words = resolve_run(settings.file, settings.run, settings.db, "FILE")
    out = default_out(replace(settings, file=file))
    if out is None:
        raise UsageError("export reads a file, not standard input: give FILE")
    return ExportJob(file=file, fmt=settings.format, out=out, force=settings.force, json=settings.json,
                     pick_run=pick_run, required_level=settings.required_level,
                     judge_at=settings.acceptance.judge_at(settings.required_level),
                     verify_key_env=settings.verify_key_env)


def run(settings: ExportSettings) -> int:
    return export(export_job(settings))


def _refusals(s: ExportJob) -> None:
    """Before anything is read: the input is a regular file; no output is the input (the metadata file too);
    an existing output needs --force; Parquet needs pyarrow."""
    from tui.sources.evidence_probe import input_problem
    from tui.sources.export_files import pyarrow_problem, sidecar_of
    from tui.sources.outfiles import output_file_problem, own_input_problem

    problem = input_problem(s.file)
    if problem:
        raise UsageError(problem)
    outs = [("--out", s.out)] + ([("the metadata file", sidecar_of(s.out))] if s.fmt == "csv" else [])
    problem = own_input_problem(outs, [("FILE", s.file)])
    if problem:
        raise UsageError(problem)
    for what, target in outs:
        problem = output_file_problem(target)
        if problem:
            raise UsageError(f"{what} {target}: {problem}")
        if os.path.lexists(target) and not s.force:
            raise UsageError(f"{target} exists: refusing to replace it; give another --out, or --force to replace it")
    if s.fmt == "parquet":
        problem = pyarrow_problem()
        if problem:
            raise UsageError(problem)


def export(s: ExportJob) -> int:
    from tui.cli.chainopts import key_from_env
    from tui.core.exitcodes import synthetic_exit
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.evidence_monitor import NoRequests
    from tui.sources.export_files import ExportRequest, NeedsPyarrow, StepNotInRun, export_run
    from tui.sources.importing import ImportProblem
    from tui.sources.outfiles import OutputRefused, SetIncomplete
    from tui.sources.run_document import NotARun

    key = key_from_env(s.verify_key_env, "--verify-key-env")
    _refusals(s)
    req = ExportRequest(path=s.file, fmt=s.fmt, out=s.out, pick_run=s.pick_run, judge_at=s.judge_at,
                        required_level=s.required_level, verify_key=key,
                        key_name=f"${s.verify_key_env}" if s.verify_key_env else "the key given")
    try:
        res = export_run(req)
    except SeveralRuns as exc:
        for line in exc.listing():
            print(f"servewatch:   {term(line)}", file=sys.stderr)
        raise UsageError(str(exc)) from None
    except (RunNotInFile, ImportProblem, NoRequests, NotARun, StepNotInRun, NeedsPyarrow) as exc:
        raise UsageError(str(exc)) from None
    except (OutputRefused, SetIncomplete) as exc:
        raise UsageError(f"cannot write {s.out}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {s.file} or write {s.out}: {exc.strerror or exc}; nothing was "
                         "written") from None
    code, synthetic_why = synthetic_exit(0, res.synthetic)
    c = res.counts
    judged: Any = res.judged.report.get("judged") or {}
    summary = {"file": s.file, "format": s.fmt, "out": s.out, "files": res.files, "rows": c["rows"],
               "columns": None if s.fmt == "llmd" else _columns(), "counts": c, "synthetic": res.synthetic,
               "judged_at": res.judged.monitor.cfg.slos.describe(), "verdict": judged.get("text"),
               "step": None if res.step is None else {"level": res.step.get("level"), "round": res.step.get("round"),
                                                       "verdict": res.step.get("verdict")},
               "exit_code": code}
    if s.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        _print(s, res, summary)
    if synthetic_why:
        print(f"servewatch: {synthetic_why} (the export is labelled SYNTHETIC in its metadata and every row)",
              file=sys.stderr)
    return code


def _columns() -> int:
    from tui.core.export_rows import COLUMNS

    return len(COLUMNS)


def _print(s: ExportJob, res, summary: dict) -> None:
    c = res.counts
    label = "SYNTHETIC data: " if res.synthetic else ""
    if s.fmt == "llmd":
        st = res.step or {}
        n_steps = len(res.judged.report.get("levels") or [])
        print(term(f"{label}exported {s.file} -> {s.out}: llm-d benchmark report v0.2 of level "
                   f"{st.get('level'):g} round {st.get('round')} ({st.get('verdict')}; {st.get('n')} measured "
                   f"requests), one step of {n_steps} (--level picks another)"))
    else:
        print(term(f"{label}exported {s.file} -> {s.out}: {c['rows']:,} rows x {summary['columns']} columns "
                   f"({c['measured']:,} measured, {c['warmup']:,} warmup, {c['duplicates']:,} duplicates; "
                   f"{c['counted']:,} counted in the report's levels)"))
        if s.fmt == "csv":
            print(term(f"  metadata (run header, settings, the report's level rows, columns): {res.files[1]}"))
        else:
            print("  metadata (run header, settings, the report's level rows, columns): in the file (key servewatch)")
    print(term(f"  judged at: {summary['judged_at']}; the report: {summary['verdict']}"))
