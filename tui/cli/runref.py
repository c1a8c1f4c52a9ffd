"""``run:ID`` wherever a command takes a record file (`compare`): a run of the catalogue (`servewatch index`,
``tui.sources.runs_db``) stands for its file and its run number. A shared module (no command): the commands
that take ``run:ID`` declare :func:`db_flag` and call :func:`resolve_run`.

The file must still be there and hold what was catalogued: its SHA-256 is computed and compared with the
catalogue's, and a file changed since is refused (one line, exit 2: re-index it), so ``run:3`` always means the
run the history showed.
"""

from __future__ import annotations

import os
from typing import Any

from tui.cli.declare import path
from tui.cli.options import INPUT, UsageError

PREFIX = "run:"


def is_ref(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX) and not os.path.exists(value)


def default_db() -> str:
    from tui.sources.runs_db import DEFAULT_NAME

    return DEFAULT_NAME


def db_flag(*, what: str) -> Any:
    """``--db FILE``: the runs catalogue that ``what`` (``run:ID``) is read from."""
    return path("--db", role=INPUT, metavar="FILE", default=None,
                help=f"the runs catalogue (servewatch index) that {what} read from (default: "
                     "./servewatch-runs.sqlite)")


def resolve_run(value: str, run: int | None, db: str | None, what: str) -> tuple[str, int | None, str | None]:
    """(path, run number, the catalogue's words for it) of ``value``: a ``run:ID`` resolved through the
    catalogue ``db`` (``run`` must not be given with it), else ``value`` itself with ``run``."""
    if not is_ref(value):
        return value, run, None
    from tui.sources.runs_db import CatalogueProblem, file_sha256, open_catalogue, resolve_ref

    if run is not None:
        raise UsageError(f"{what} {value}: a catalogued run is one run already; give no run number with it")
    db = db or default_db()
    try:
        with open_catalogue(db, create=False) as con:
            ref = resolve_ref(con, value)
    except CatalogueProblem as exc:
        raise UsageError(str(exc)) from None
    try:
        sha = file_sha256(ref.path)
    except OSError as exc:
        raise UsageError(f"{value}: its file {ref.path} cannot be read ({exc.strerror or exc}); re-index") from None
    if sha != ref.sha256:
        raise UsageError(f"{value}: its file {ref.path} has changed since it was catalogued (SHA-256 "
                         f"{ref.sha256[:12]}... then, {sha[:12]}... now): servewatch index its folder again")
    return ref.path, (ref.run_no if ref.runs_in_file > 1 else None), f"{value} ({ref.path}, run {ref.run_no})"
