"""The history of runs (`servewatch index` / `history`): one catalogue row per run judged, the history table and
the trend series per deployment (standard library only; the SQLite file is ``tui.sources.runs_db``).

A catalogue row says what the report says of the run, at the run's own settings: the served model (what the
server said of itself, else the model asked, said so: ``tui.core.identity``), the engine, the workload line
(``tui.core.workload``), the settings judged at, the verdict at the judged level and per level, the measured
capacity (the highest level that PASSes), the goodput, the digest chain's verification and the dates.

- **goodput**: the highest goodput (good requests per second) any measured level reached, with that level
  (``goodput_level``): what the deployment delivered within its SLOs, whatever the load asked; the judged level's
  own goodput is in the level rows. An import without a time axis (``source.time_axis`` none: its send times are
  stand-ins) has none (unknown, never a rate computed from stand-in times).
- **deployment**: the served model, the engine and the target URL (``deployment_of``): the runs of one deployment
  form one trend line.
- **acceptance grade**: a run judged at settings below the acceptance floors (a window under 10 minutes, ...:
  ``tui.core.grade``) has them in ``not_grade``; its PASS and its capacity are marked, as the report marks them.
- **date**: the run header's ``started_at``, else the first request's send time (an import), in UTC; an import
  whose times are relative or stand-ins (``source.time_axis`` relative / none: placed from 2000-01-01) has no
  date ("unknown", left out of the trend lines and counted).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import tui.core.identity as identity
import tui.core.provenance as provenance
import tui.core.workload as workload
from tui.core.redact import run_secrets, scrub
from tui.core.textsafe import term

#: the catalogue's columns (the SQLite table ``runs``; ``tui.sources.runs_db``), in order
COLUMNS: Final = ("path", "run_no", "run_id", "sha256", "digest", "digest_summary", "target_url", "claimed_model",
                  "served_model", "engine", "build", "workload", "settings", "verdict", "exit_code", "judged_level",
                  "level_unit", "levels", "capacity", "goodput_rps", "goodput_level", "started_at", "ended_at",
                  "source_kind", "tool", "format", "synthetic", "requests", "not_grade")
#: the history table's columns (``table``)
TABLE: Final = ("run", "date (UTC)", "served model", "engine", "workload", "verdict", "capacity", "goodput req/s")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def catalogue_row(*, path: str, run_no: int, sha256: str, header: Mapping[str, Any], report: Mapping[str, Any],
                  integrity: Mapping[str, Any] | None, exit_code: int, first_t: float | None,
                  last_t: float | None, fmt: str | None, synthetic: bool,
                  not_grade: Sequence[str] = ()) -> dict[str, Any]:
    """The catalogue row of one judged run (``report``: the report's JSON document; ``not_grade``: why the
    settings it was judged at are below the acceptance floors, ``tui.core.grade.acceptance_grade``)."""
    ident = identity.identity_of(header)
    judged = report.get("judged") or {}
    src = provenance.source_block(header) or {}
    # no time axis (stand-in send times: ``source.time_axis`` none): a rate per second would be made up
    rates = src.get("time_axis") != "none"
    levels = [{"level": r.get("level"), "round": r.get("round"), "verdict": r.get("verdict"), "n": r.get("n"),
               "good_fraction": r.get("good_fraction"), "goodput_rps": r.get("goodput_rps") if rates else None}
              for r in report.get("levels") or []]
    best = max((r for r in levels if _num(r["goodput_rps"]) is not None), key=lambda r: r["goodput_rps"],
               default=None)
    # an import whose times are relative (or stand-ins) has no date: its clock starts at a placeholder origin
    absolute = src.get("time_axis") not in ("relative", "none")
    started = _num(header.get("started_at")) or (first_t if absolute else None)
    vs = report.get("verdict_settings") or {}
    lines = vs.get("lines") if isinstance(vs, Mapping) else None
    target = header.get("target") if isinstance(header.get("target"), Mapping) else {}
    assert isinstance(target, Mapping)
    return scrub({  # what the header may carry unredacted never reaches the catalogue (tui.core.redact.run_secrets)
        "path": path, "run_no": run_no, "run_id": header.get("run_id") if isinstance(header.get("run_id"), str) else None,
        "sha256": sha256,
        "digest": (integrity or {}).get("state"), "digest_summary": (integrity or {}).get("summary"),
        "target_url": str(target.get("url"))[:300] if target.get("url") else None,
        "claimed_model": ident.claimed_model, "served_model": ident.served_model, "engine": ident.engine,
        "build": ident.build, "workload": workload.describe_header(header),
        "settings": (report.get("slo") or {}).get("text") if not lines else "; ".join(str(x) for x in lines),
        "verdict": judged.get("state"), "exit_code": exit_code, "judged_level": _num(judged.get("level")),
        "level_unit": judged.get("unit"), "levels": levels,
        "capacity": _num(judged.get("measured_capacity")) if judged.get("has_measured_capacity") else None,
        "goodput_rps": None if best is None else best["goodput_rps"],
        "goodput_level": None if best is None else best["level"],
        "started_at": started, "ended_at": last_t if absolute or _num(header.get("started_at")) else None,
        "source_kind": src.get("kind"), "tool": src.get("tool") or header.get("tool"), "format": fmt,
        "synthetic": synthetic, "requests": report.get("requests_total"),
        "not_grade": "; ".join(str(x) for x in not_grade) or None,
    }, run_secrets(header))


def date_text(t: Any) -> str:
    v = _num(t)
    if v is None or v <= 0:
        return "unknown"
    try:
        return datetime.fromtimestamp(v, tz=UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "unknown"


def model_shown(row: Mapping[str, Any]) -> str:
    """The served model; the model asked (said so) when the server's own name was not recorded."""
    if row.get("served_model"):
        return str(row["served_model"])
    if row.get("claimed_model"):
        return f"{row['claimed_model']} (asked; served not recorded)"
    return "unknown"


def deployment_of(row: Mapping[str, Any]) -> str:
    """One deployment: the served model, the engine and the target URL (a trend line); a run that names none of
    them is a line of its own (its file), never joined to other unknown runs."""
    if not (row.get("served_model") or row.get("claimed_model") or row.get("engine") or row.get("target_url")):
        return f"unknown deployment: {row.get('path')} run {row.get('run_no')}"
    return f"{model_shown(row)} | {row.get('engine') or 'engine unknown'} | {row.get('target_url') or 'url unknown'}"


def capacity_text(row: Mapping[str, Any]) -> str:
    """The measured capacity; marked ``(not acceptance-grade)`` when the run was judged below the floors."""
    cap = _num(row.get("capacity"))
    unit = row.get("level_unit") or "level"
    if cap is None:
        return "none"
    return f"{unit} {cap:g}" + (" (not acceptance-grade)" if row.get("not_grade") else "")


def goodput_text(row: Mapping[str, Any]) -> str:
    gp = _num(row.get("goodput_rps"))
    if gp is None:
        return "unknown"
    lv = _num(row.get("goodput_level"))
    return f"{gp:.2f}" + ("" if lv is None else f" (at {lv:g})")


def verdict_text(row: Mapping[str, Any]) -> str:
    text = str(row.get("verdict") or "unknown")
    if row.get("not_grade") and text == "PASS":  # the report's label (tui.core.grade.grade_label)
        text += f" (not acceptance-grade: {row['not_grade']})"
    if row.get("synthetic"):
        text = "SYNTHETIC " + text
    if row.get("digest") not in (None, "intact"):
        text += f" (digest {row.get('digest')})"
    return text


def copies(rows: Sequence[Mapping[str, Any]]) -> dict[Any, Any]:
    """{id: the id of the first row holding the same run}: the same file content and run number (a run copied
    to another folder or name is one run, shown once in the trends and marked in the table)."""
    first: dict[tuple, Any] = {}
    out: dict[Any, Any] = {}
    for r in rows:
        key = (r.get("sha256"), r.get("run_no"))
        if key[0] is None:
            continue
        if key in first:
            out[r.get("id")] = first[key]
        else:
            first[key] = r.get("id")
    return out


def table_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The history table's cells (``TABLE``), oldest first; every string from a file made safe for a terminal; a
    copy of an earlier row's run is marked ``(copy of run:N)``."""
    out = []
    dup = copies(rows)
    for r in rows:
        verdict = verdict_text(r) + (f" (copy of run:{dup[r.get('id')]})" if r.get("id") in dup else "")
        out.append([f"run:{r.get('id')}", date_text(r.get("started_at")), model_shown(r), r.get("engine") or "unknown",
                    r.get("workload") or "unknown", verdict, capacity_text(r), goodput_text(r)])
    return [[term(str(c)) for c in row] for row in out]


def table(rows: Sequence[Mapping[str, Any]], width: int = 60) -> str:
    """The history as an aligned text table (a cell wider than ``width`` is cut with ...)."""
    cells = [list(TABLE)] + [[c if len(c) <= width else c[:width - 3] + "..." for c in row] for row in table_rows(rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(TABLE))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def trends(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per deployment, its runs in date order: (date, capacity, goodput, verdict, run id) for the trend page;
    a run without a date is left out of the lines and counted (``undated``); a copy of a run is one point."""
    out: dict[str, list[dict[str, Any]]] = {}
    undated = 0
    dup = copies(rows)
    for r in sorted(rows, key=lambda r: _num(r.get("started_at")) or 0.0):
        if r.get("id") in dup:  # one run, one point
            continue
        t = _num(r.get("started_at"))
        if t is None or t <= 0:
            undated += 1
            continue
        out.setdefault(deployment_of(r), []).append({
            "t_ms": t * 1000.0, "date": date_text(t), "capacity": _num(r.get("capacity")),
            "goodput_rps": _num(r.get("goodput_rps")), "verdict": r.get("verdict"),
            "run": f"run:{r.get('id')}" + (" (not acceptance-grade)" if r.get("not_grade") else ""),
            "unit": r.get("level_unit"), "synthetic": bool(r.get("synthetic"))})
    return {"deployments": out, "undated": undated, "synthetic": any(bool(r.get("synthetic")) for r in rows)}
