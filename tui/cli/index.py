"""`servewatch index DIR... [--db FILE]`: catalogue every run found under the folders in one SQLite file
(``tui.sources.runs_db``), each run judged as `report` judges it (``tui.sources.run_document``). Re-indexing an
unchanged file is a no-op (size and modification time, then SHA-256: ``tui.sources.runs_db``).

Exit codes: 0 indexed (files that hold no run are listed with why), 2 bad usage, a folder missing, or a
catalogue that cannot be used.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from dataclasses import dataclass

from tui.cli.declare import Settings, path, switch
from tui.cli.options import APPEND, INPUT_DIR, UsageError, epilog
from tui.core.textsafe import term

INDEX_EXIT_DOC = ("exit codes: 0 indexed (files holding no run are listed with the reason), 2 bad usage, a folder "
                  "missing or a catalogue file that is not one")
SHOWN_SKIPS = 20


def default_db(settings: IndexSettings) -> str | None:
    """``--db``, else servewatch-runs.sqlite in the first DIR."""
    from tui.sources.runs_db import DEFAULT_NAME

    dirs = settings.dirs or []
    return settings.db or (os.path.join(dirs[0], DEFAULT_NAME) if dirs and isinstance(dirs[0], str) else None)


@dataclass(frozen=True, kw_only=True)
class IndexSettings(Settings):
    """`servewatch index DIR...`."""

    DESCRIPTION = (
        "Catalogue every run found under the folders (servewatch record files, and the other tools' exports "
        "servewatch imports: .jsonl, .json, .csv, .yaml) in one SQLite file: run id, file and digest status, target, "
        "served model, engine, workload, settings, per-level verdicts, measured capacity, goodput, dates. Re-indexing "
        "reads only new and changed files. servewatch history shows the catalogue; compare takes run:ID.")
    EPILOG = epilog("servewatch index runs/ --db runs/servewatch-runs.sqlite", codes=INDEX_EXIT_DOC)

    dirs: list[str] = path("dirs", role=INPUT_DIR, metavar="DIR", nargs="+", help="folders to look in (recursively)")
    db: str | None = path("--db", role=APPEND, metavar="FILE", default=None, default_from=default_db,
                          help="the catalogue to build or update (default: servewatch-runs.sqlite in the first DIR)")
    rehash: bool = switch("--rehash", help="hash every file even when its size and modification time are unchanged "
                                          "(default: those two decide, then SHA-256)")
    json: bool = switch("--json", help="print what was indexed as JSON")


@dataclass(frozen=True)
class IndexJob:
    dirs: tuple[str, ...]
    db: str
    rehash: bool
    json: bool


def run(settings: IndexSettings) -> int:
    db = default_db(settings)
    assert db is not None  # dirs is required
    return index(IndexJob(dirs=tuple(settings.dirs), db=db, rehash=settings.rehash, json=settings.json))


def _judge(path: str, run_no: int | None):
    from tui.sources.run_document import judge_run

    return judge_run(path, pick_run=run_no)


def index(s: IndexJob) -> int:
    from tui.core.history import table
    from tui.sources.outfiles import output_target_problem
    from tui.sources.runs_db import CatalogueProblem, index_dirs, open_catalogue

    for d in s.dirs:
        if not os.path.isdir(d):
            raise UsageError(f"{d}: not a folder" if os.path.exists(d) else f"{d}: no such folder")
    problem = output_target_problem(s.db)
    if problem:
        raise UsageError(f"--db {s.db} {problem}")
    folder = os.path.dirname(os.path.abspath(s.db))
    if not os.path.isdir(folder):
        raise UsageError(f"--db {s.db}: its folder {folder} does not exist")
    try:
        with open_catalogue(s.db, create=True) as con:
            rep = index_dirs(con, s.dirs, _judge, db_path=s.db, rehash=s.rehash)
    except CatalogueProblem as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"--db {s.db}: {exc.strerror or exc}") from None
    except sqlite3.Error as exc:  # a catalogue damaged part-way, or locked by another index past the timeout
        raise UsageError(f"--db {s.db}: not a usable servewatch runs catalogue ({exc})") from None
    summary = {"db": s.db, "dirs": list(s.dirs), "files_read": rep.read, "unchanged": rep.unchanged,
               "touched": rep.touched, "gone": rep.gone, "runs_added": rep.runs_added,
               "skipped": [{"file": p, "why": w} for p, w in rep.skipped],
               "added": [{"id": r.get("id"), "file": r["path"], "run": r["run_no"], "verdict": r["verdict"]}
                         for r in rep.added]}
    if s.json:
        print(json.dumps(summary, indent=2, default=str))
        return 0
    print(term(f"indexed {', '.join(s.dirs)} into {s.db}: {rep.read} files read ({rep.runs_added} runs added), "
               f"{rep.unchanged} unchanged, {rep.touched} touched (same content), {rep.gone} gone (rows removed), "
               f"{len(rep.skipped)} holding no run"))
    if rep.added:
        print()
        sys.stdout.write(table(rep.added))
    if rep.skipped:
        print("\nfiles holding no run (not catalogued):")
        for p, why in rep.skipped[:SHOWN_SKIPS]:
            print(term(f"  {p}: {why}"))
        if len(rep.skipped) > SHOWN_SKIPS:
            print(f"  ... and {len(rep.skipped) - SHOWN_SKIPS} more (--json lists every one)")
    return 0
