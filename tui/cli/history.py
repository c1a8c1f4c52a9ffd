"""`servewatch history [--db FILE] [--model M] [--since DATE] [--html OUT]`: the catalogued runs
(`servewatch index`) as one table, oldest first: date, served model, engine, workload, verdict, measured
capacity, goodput; ``--html`` writes the trend page (capacity and goodput over time per deployment).

Exit codes: 0 shown, 2 bad usage or a catalogue that cannot be read.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from tui.cli.declare import Settings, flag, path, switch
from tui.cli.options import OUTPUT, UsageError, epilog
from tui.cli.runref import db_flag, default_db

HISTORY_EXIT_DOC = "exit codes: 0 shown, 2 bad usage or a catalogue file that cannot be read"


@dataclass(frozen=True, kw_only=True)
class HistorySettings(Settings):
    """`servewatch history`."""

    DESCRIPTION = ("The history of the catalogued runs (servewatch index): date, served model, engine, workload, "
                   "verdict, measured capacity and goodput per run, oldest first; run:ID names a run for "
                   "compare. --html: capacity and goodput over time per deployment.")
    EPILOG = epilog("servewatch history --db runs/servewatch-runs.sqlite --since 2026-01-01 --html trend.html",
                    codes=HISTORY_EXIT_DOC)

    db: str | None = db_flag(what="history")
    model: str | None = flag("--model", default=None, metavar="NAME",
                             help="only runs whose served (else asked) model contains NAME, any case (default: all)")
    since: str | None = flag("--since", default=None, metavar="DATE",
                             help="only runs started on or after DATE (YYYY-MM-DD or YYYY-MM-DDTHH:MM, UTC) (default: "
                                  "all)")
    html: str | None = path("--html", role=OUTPUT, metavar="FILE", default=None,
                            help="also write the trend page (capacity and goodput over time per deployment) to FILE "
                                 "(opens from file://, fetches nothing; default: none)")
    json: bool = switch("--json", help="print the runs as JSON")


@dataclass(frozen=True)
class HistoryQuery:
    db: str
    model: str | None
    since: float | None
    since_text: str | None
    html: str | None
    json: bool


def parse_since(text: str | None) -> float | None:
    if text is None:
        return None
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise UsageError(f"--since {text!r}: expected a date, YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)")


def run(settings: HistorySettings) -> int:
    return history(HistoryQuery(db=settings.db or default_db(), model=settings.model,
                                since=parse_since(settings.since), since_text=settings.since, html=settings.html,
                                json=settings.json))


def history(s: HistoryQuery) -> int:
    from tui.core.history import table, trends
    from tui.sources.runs_db import CatalogueProblem, open_catalogue, query_runs

    if s.html:
        from tui.sources.outfiles import output_file_problem

        problem = output_file_problem(s.html)
        if problem:
            raise UsageError(f"--html {s.html}: {problem}")
    try:
        with open_catalogue(s.db, create=False) as con:
            rows = query_runs(con, model=s.model, since=s.since)
    except CatalogueProblem as exc:
        raise UsageError(str(exc)) from None
    filters = ", ".join(x for x in (f"model contains {s.model!r}" if s.model else "",
                                    f"since {s.since_text}" if s.since_text else "") if x) or "all runs"
    if s.html:
        from tui.html.history import history_html
        from tui.sources.outfiles import write_text_atomic

        try:
            write_text_atomic(s.html, history_html(rows, trends(rows), db=s.db, filters=filters))
        except OSError as exc:
            raise UsageError(f"cannot write {s.html}: {exc.strerror or exc}") from None
    if s.json:
        print(json.dumps({"db": s.db, "filters": filters, "runs": rows}, indent=2, default=str))
        return 0
    from tui.core.textsafe import term

    print(term(f"catalogue {s.db}: {len(rows)} runs ({filters}); run:ID names one for servewatch compare"))
    if rows:
        sys.stdout.write(table(rows))
    if s.html:
        print(term(f"trend page: {s.html}"))
    return 0
