"""The catalogue of runs: one SQLite file (standard library ``sqlite3``) that `servewatch index DIR...` builds or
updates and `history`, `compare run:ID` read.

Tables: ``meta`` (the schema name, ``servewatch.runs/1``: a SQLite file without it is not a catalogue and is
never written), ``files`` (every file looked at: its absolute path, size, modification time in ns, SHA-256, how
many runs it held, or why it holds none) and ``runs`` (one row per run judged: ``tui.core.history.COLUMNS``, the
per-level verdicts as JSON).

**Known unchanged** (re-indexing is a no-op): a file whose size and modification time (ns) are those catalogued
is not read at all; when either differs its SHA-256 is computed, and a file whose content is the same (touched,
copied back) only gets its new size and time; a file whose content changed is judged again, its old runs replaced
(new run ids). ``--rehash`` hashes every file even when size and time agree (an edit that kept both). A
catalogued file that is gone from a folder indexed again loses its rows (said).

Each file's update is one transaction: an interrupted index leaves every file catalogued either as before or as
now. A corrupt or foreign file given as the catalogue raises :class:`CatalogueProblem` (one line).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core.history import COLUMNS, catalogue_row
from tui.sources.infiles import open_input

__all__ = ["CANDIDATE_SUFFIXES", "DEFAULT_NAME", "SCHEMA", "CatalogueProblem", "IndexReport", "RunRef", "candidates",
           "file_sha256", "index_dirs", "open_catalogue", "query_runs", "resolve_ref"]

SCHEMA = "servewatch.runs/1"
DEFAULT_NAME = "servewatch-runs.sqlite"
#: the files looked at: record files and the other tools' exports (JSON, JSON Lines, CSV, YAML); servewatch's own
#: exports beside them (``.meta.json``, ``.llmd.json``, a CSV with its ``.meta.json``) are not runs
CANDIDATE_SUFFIXES = (".jsonl", ".json", ".csv", ".yaml", ".yml")
OWN_OUTPUTS = (".meta.json", ".llmd.json")

_INTEGER = ("run_no", "exit_code", "synthetic", "requests")
_REAL = ("judged_level", "capacity", "goodput_rps", "goodput_level", "started_at", "ended_at")
_RUN_COLUMNS = ", ".join(f"{c} {'INTEGER' if c in _INTEGER else 'REAL' if c in _REAL else 'TEXT'}" for c in COLUMNS)
_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL, runs INTEGER NOT NULL, problem TEXT, indexed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, {_RUN_COLUMNS}, indexed_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS runs_path ON runs(path);
CREATE INDEX IF NOT EXISTS runs_started ON runs(started_at);
"""


class CatalogueProblem(Exception):
    """The catalogue file cannot be used (corrupt, not SQLite, another program's database, unwritable): one line."""


def _problem(path: str, exc: BaseException) -> CatalogueProblem:
    return CatalogueProblem(f"{path}: not a usable servewatch runs catalogue ({exc})")


@contextlib.contextmanager
def open_catalogue(path: str, *, create: bool) -> Iterator[sqlite3.Connection]:
    """The catalogue at ``path``, checked (its ``meta`` table names ``SCHEMA``); ``create``: make it when the
    file is missing or empty (`index`); else a missing file is a CatalogueProblem (`history`, `run:ID`)."""
    if os.path.islink(path):
        raise CatalogueProblem(f"{path} is a symbolic link: refusing to open a catalogue through it")
    exists = os.path.exists(path)
    if exists and not os.path.isfile(path):
        raise CatalogueProblem(f"{path} is not a regular file")
    if not exists and not create:
        raise CatalogueProblem(f"{path}: no such catalogue (build one with servewatch index DIR --db {path})")
    fresh = not exists or os.path.getsize(path) == 0
    try:
        target = path if create else Path(os.path.abspath(path)).as_uri() + "?mode=ro"  # read-only: never written
        con = sqlite3.connect(target, uri=not create, timeout=10.0)
    except sqlite3.Error as exc:
        raise _problem(path, exc) from None
    try:
        try:
            con.execute("PRAGMA foreign_keys = ON")
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if fresh and not tables and create:
                with con:
                    con.executescript(_DDL)
                    con.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)", (SCHEMA,))
            else:
                row = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() if "meta" in tables else None
                if row is None or row[0] != SCHEMA:
                    found = "no servewatch schema" if row is None else f"schema {row[0]!r}"
                    raise CatalogueProblem(f"{path}: not a servewatch runs catalogue ({found}); give another --db")
                have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
                missing = [c for c in COLUMNS if c not in have]
                if missing:  # an earlier layout of the same schema: rebuilt from the files, never patched
                    raise CatalogueProblem(f"{path}: a runs catalogue of an earlier layout (no {', '.join(missing)}); "
                                           "remove it and run servewatch index again (it is rebuilt from the files)")
        except sqlite3.Error as exc:
            raise _problem(path, exc) from None
        yield con
    finally:
        con.close()


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open_input(path, "record file") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def candidates(dirs: Sequence[str], skip: Sequence[str] = ()) -> Iterator[str]:
    """The files under ``dirs`` that may hold runs (``CANDIDATE_SUFFIXES``, hidden folders left out, links to
    folders not followed), as absolute paths, sorted; ``skip``: files never looked at (the catalogue itself)."""
    skipped = {os.path.realpath(p) for p in skip}
    seen: set[str] = set()
    for d in dirs:
        for root, subdirs, names in os.walk(d):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            for name in sorted(names):
                if name.startswith(".") or not name.endswith(CANDIDATE_SUFFIXES) or name.endswith(OWN_OUTPUTS):
                    continue
                path = os.path.abspath(os.path.join(root, name))
                if os.path.exists(path + ".meta.json"):  # servewatch's own CSV export
                    continue
                if path in seen or os.path.realpath(path) in skipped:
                    continue
                seen.add(path)
                yield path


@dataclass
class IndexReport:
    """What an index run did: files read (new or changed), unchanged, touched (same content), gone, skipped (with
    why), runs added; every run row added (``added``)."""

    read: int = 0
    unchanged: int = 0
    touched: int = 0
    gone: int = 0
    runs_added: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    added: list[dict] = field(default_factory=list)


Judge = Callable[[str, int | None], Any]


def index_dirs(con: sqlite3.Connection, dirs: Sequence[str], judge: Judge, *, db_path: str,
               rehash: bool = False, say: Callable[[str], None] | None = None) -> IndexReport:
    """Catalogue every run under ``dirs`` (see the module's docstring). ``judge(path, run_no)`` reads one run
    (``tui.sources.run_document.judge_run`` in `index`) and raises ``SeveralRuns`` for a file of several runs
    without ``run_no``, or a ValueError / OSError naming why the file holds no run."""
    from tui.core.runs import SeveralRuns

    rep = IndexReport()
    roots = [os.path.abspath(d) for d in dirs]
    found = set()
    for path in candidates(dirs, skip=[db_path]):
        found.add(path)
        try:
            st = os.stat(path)
        except OSError as exc:
            rep.skipped.append((path, f"cannot read: {exc.strerror or exc}"))
            continue
        old = con.execute("SELECT size, mtime_ns, sha256, problem FROM files WHERE path = ?", (path,)).fetchone()
        if old is not None and not rehash and (old[0], old[1]) == (st.st_size, st.st_mtime_ns):
            rep.unchanged += 1
            if old[3]:
                rep.skipped.append((path, old[3]))
            continue
        try:
            sha = file_sha256(path)
        except OSError as exc:
            rep.skipped.append((path, f"cannot read: {exc.strerror or exc}"))
            continue
        if old is not None and old[2] == sha:
            with con:
                con.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (st.st_size, st.st_mtime_ns, path))
            rep.touched += 1
            if old[3]:
                rep.skipped.append((path, old[3]))
            continue
        if say is not None:
            say(path)
        rows: list[dict] = []
        problem: str | None = None
        try:
            try:
                rows = [_row(judge(path, None), path, 1, sha)]
            except SeveralRuns as exc:
                rows = [_row(judge(path, i), path, i, sha) for i in range(1, len(exc.runs) + 1)]
        except (OSError, ValueError) as exc:  # not a run (a summary, a watch recording, no usable records)
            problem = str(getattr(exc, "strerror", None) or exc)
            if problem.startswith(path + ": "):  # the reason, without the path said beside it
                problem = problem[len(path) + 2:]
            rows = []
        now = time.time()
        with con:  # the file's rows replaced in one transaction
            con.execute("DELETE FROM runs WHERE path = ?", (path,))
            con.execute("INSERT OR REPLACE INTO files(path, size, mtime_ns, sha256, runs, problem, indexed_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", (path, st.st_size, st.st_mtime_ns, sha, len(rows), problem, now))
            for r in rows:
                values = [json.dumps(r[c]) if c == "levels" else r[c] for c in COLUMNS]
                cur = con.execute(f"INSERT INTO runs({', '.join(COLUMNS)}, indexed_at) VALUES "
                                  f"({', '.join('?' for _ in COLUMNS)}, ?)", (*values, now))
                r["id"] = cur.lastrowid
        rep.read += 1
        rep.runs_added += len(rows)
        rep.added.extend(rows)
        if problem:
            rep.skipped.append((path, problem))
    gone = [p for (p,) in con.execute("SELECT path FROM files") if _under(p, roots) and p not in found]
    with con:
        for p in gone:
            con.execute("DELETE FROM runs WHERE path = ?", (p,))
            con.execute("DELETE FROM files WHERE path = ?", (p,))
    rep.gone = len(gone)
    return rep


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _row(judged: Any, path: str, run_no: int, sha: str) -> dict:
    from tui.core.grade import acceptance_grade

    return catalogue_row(path=path, run_no=run_no, sha256=sha, header=judged.header, report=judged.report,
                         integrity=None if judged.integrity is None else judged.integrity.to_dict(),
                         exit_code=judged.exit_code, first_t=judged.first_t, last_t=judged.last_t,
                         fmt=judged.format, synthetic=judged.synthetic,
                         not_grade=acceptance_grade(judged.monitor.cfg))


def _as_dict(cur: sqlite3.Cursor, row: Sequence[Any]) -> dict:
    d = {c[0]: v for c, v in zip(cur.description, row)}
    try:
        d["levels"] = json.loads(d.get("levels") or "[]")
    except ValueError:
        d["levels"] = []
    d["synthetic"] = bool(d.get("synthetic"))
    return d


def query_runs(con: sqlite3.Connection, *, model: str | None = None, since: float | None = None) -> list[dict]:
    """The catalogued runs, oldest first (undated last); ``model``: the served (else asked) model contains it
    (case-insensitive); ``since``: started at or after (epoch seconds)."""
    sql = "SELECT * FROM runs"
    where: list[str] = []
    params: list[Any] = []
    if model:
        where.append("(instr(lower(coalesce(served_model, claimed_model, '')), lower(?)) > 0)")
        params.append(model)
    if since is not None:
        where.append("started_at >= ?")
        params.append(since)
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_at IS NULL, started_at, id"
    try:
        cur = con.execute(sql, params)
        return [_as_dict(cur, r) for r in cur.fetchall()]
    except sqlite3.Error as exc:
        raise CatalogueProblem(f"the catalogue cannot be read: {exc}") from None


@dataclass(frozen=True)
class RunRef:
    """A catalogued run given as ``run:ID``: the file, its run number, the SHA-256 it had when catalogued."""

    ref: str
    id: int
    path: str
    run_no: int
    sha256: str
    runs_in_file: int


def resolve_ref(con: sqlite3.Connection, ref: str) -> RunRef:
    """``run:ID``: ID the catalogue's number (``history`` shows it) or the run's own id (``run_id``, a unique
    prefix of it). Raises CatalogueProblem (one line) when none or several match."""
    key = ref.split(":", 1)[1].strip() if ":" in ref else ref
    if not key:
        raise CatalogueProblem(f"{ref}: give a run, e.g. run:3 (servewatch history lists them)")
    try:
        cur = con.execute("SELECT r.id, r.path, r.run_no, r.sha256, f.runs FROM runs r JOIN files f ON f.path = r.path "
                          "WHERE (CAST(r.id AS TEXT) = ?) OR (r.run_id = ?) OR (r.run_id LIKE ? ESCAPE '\\')",
                          (key, key, key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"))
        found = cur.fetchall()
    except sqlite3.Error as exc:
        raise CatalogueProblem(f"the catalogue cannot be read: {exc}") from None
    exact = [r for r in found if str(r[0]) == key]
    found = exact or found
    if not found:
        raise CatalogueProblem(f"{ref}: no such run in the catalogue (servewatch history lists them)")
    if len(found) > 1:
        raise CatalogueProblem(f"{ref}: {len(found)} runs match ({', '.join(f'run:{r[0]}' for r in found[:5])}); "
                               "give the catalogue number")
    rid, path, run_no, sha, runs = found[0]
    return RunRef(ref=ref, id=int(rid), path=path, run_no=int(run_no), sha256=sha, runs_in_file=int(runs or 1))
