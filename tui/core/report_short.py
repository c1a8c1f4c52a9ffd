"""The default text of `servewatch report` (and of `run`'s closing report): short, in an order a reviewer reads.

1. the header block: what and from where (the source line of an import, the file, its provenance), what was verified
   (the records' integrity, first), the settings it was judged at and any re-judgement, the identity of what was
   measured and any mismatch, the target and workload, the budget in one line;
2. the verdict line;
3. the per-level table, with the one mark for a percentile too few requests support;
4. at most three lines of reasons;
5. the problems (evidence, input), one each;
6. the conclusion.

Every line is at most ``WIDTH`` characters (wrapped); the rest (token accounting per level, each latency metric,
budget assumptions, server timing, prefix cache) is ``--details`` (``tui.core.report.format_report``), and all of it
is in ``--json``. Pure: it reads the report's JSON document (``build_report`` plus the CLI's additions) only.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from tui.core.levels import fmt_level
from tui.core.stats import INSUFFICIENT_LEGEND, latency_value
from tui.core.textfmt import fmt_pct
from tui.core.textsafe import term

__all__ = ["MAX_PROBLEMS", "MAX_REASON_LINES", "WIDTH", "format_short"]

WIDTH = 120
MAX_REASON_LINES = 3
MAX_PROBLEMS = 12


def _wrap(text: str, first: str = "", rest: str = "    ", width: int = WIDTH) -> list[str]:
    """``text`` (made safe for a terminal) wrapped at ``width``: the first line after ``first``, the others after
    ``rest``; a word is broken only when it is longer than a line (a path, a digest)."""
    return textwrap.wrap(term(text), width=width, initial_indent=first, subsequent_indent=rest,
                         break_long_words=True, break_on_hyphens=False) or [first.rstrip()]


def _cut(lines: list[str], limit: int, more: str) -> list[str]:
    if len(lines) <= limit:
        return lines
    return lines[: limit - 1] + [lines[limit - 1][: WIDTH - len(more) - 1].rstrip() + " " + more]


def _f(v: Any, digits: int = 2) -> str:
    return "N/A" if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.{digits}f}"


def header_block(rep: Mapping, source_line: str | None = None) -> list[str]:
    """What and from where, integrity, settings and re-judgement, identity and mismatches, target, budget."""
    out: list[str] = []
    if rep.get("synthetic"):
        out += _wrap("SYNTHETIC DATA: this record file is labelled synthetic; nothing below is a measurement of a "
                     "real server.", rest="  ")
    ri = rep.get("records_integrity") or {}
    if ri.get("summary"):
        out += _wrap(str(ri["summary"]), rest="  ")
        out += [ln for d in (ri.get("details") or [])[:3] for ln in _wrap(str(d), "  ", "    ")]
        out += [ln for p in (ri.get("problems") or [])[1:4] for ln in _wrap(f"integrity problem: {p}", "  ", "    ")]
    out += _wrap(f"servewatch report: {rep.get('source')}")
    if source_line:
        out += _wrap(source_line, "  ", "    ")
    prov = (rep.get("provenance") or {}).get("text")
    if prov:
        out += _wrap(f"data from: {prov}", "  ", "    ")[:3]
    vs = rep.get("verdict_settings") or {}
    for ln in vs.get("lines") or []:
        out += _wrap(str(ln).strip(), "  " + ("  " if str(ln).startswith("  ") else ""), "    ")
    if (rep.get("exit") or {}).get("settings") and not vs.get("lines"):
        out += _wrap(str(rep["exit"]["settings"]), "  ", "    ")
    ident = rep.get("identity") or {}
    if ident.get("line"):
        out += _wrap(f"identity: {ident['line']}", "  ", "    ")
    for p in ident.get("not_acceptance_grade") or []:
        out += _wrap(f"identity: NOT acceptance-grade: {p}", "  ", "    ")
    tgt = (rep.get("header") or {}).get("target") or {}
    wl = (rep.get("workload") or {}).get("text")
    bits = []
    if isinstance(tgt, Mapping) and tgt.get("url"):
        bits.append(f"target {tgt.get('url')}")
    if wl:
        bits.append(f"workload: {wl}")
    if bits:
        out += _wrap("; ".join(bits), "  ", "    ")
    out += _wrap(f"budget: {_budget_line(rep)}", "  ", "    ")
    return out


def _budget_line(rep: Mapping) -> str:
    bv = rep.get("budget_view") or {}
    if not bv.get("known"):
        return str(bv.get("hint") or "unknown (give --config config.json, --params/--gpu-gib or --budget FILE)")
    cand = bv.get("memory_only_candidate")
    origin = bv.get("origin") or "given"
    teaching = " [TEACHING CASE: an example, not this run's model]" if bv.get("teaching") else ""
    return (f"{bv.get('state')}, memory-only candidate {cand} sequences (a number to test, not a limit; "
            f"{origin}){teaching}")


def verdict_line(rep: Mapping, state_text: str | None = None) -> str:
    m = rep.get("measured") or {}
    v = m.get("verdict") or {}
    judged = rep.get("judged") or {}
    state = state_text or str(v.get("state"))
    where = ""
    if judged.get("level") is not None:
        where = f" at {judged.get('unit') or 'level'} {fmt_level(judged['level'])} ({judged.get('why')})"
    cap = ""
    if judged:
        cap = (f"; measured capacity {judged.get('unit') or 'level'} {fmt_level(judged.get('measured_capacity'))}"
               if judged.get("has_measured_capacity") else "; no level PASSes")
    cand = (rep.get("budget_view") or {}).get("memory_only_candidate")
    if cand is not None:
        cap += f" (memory-only candidate {cand})"
    missing = f": {v['missing']}" if v.get("missing") else ""
    slo = (rep.get("slo") or {}).get("text")
    return f"verdict: {state}{where}{missing}{cap}; judged on {slo}"


def level_table(rows: Sequence[Mapping]) -> list[str]:
    if not rows:
        return ["  no measured level"]
    out = ["  level round      n   good%   TTFT P50      P95      P99   req/s goodput/s  verdict"]
    marked = False
    for r in rows:
        t = r.get("ttft_ms") or {}
        cells = []
        for q in ("p50", "p95", "p99"):
            cell = latency_value(t, q)
            marked = marked or cell.endswith("*")
            cells.append(cell)
        flags = ("  client saturated: not valid" if r.get("saturated") else "") + (
            "  NOT REACHED" if r.get("not_reached") else "")
        out.append(f"  {fmt_level(r.get('level')):>5} {r.get('round'):>5} {r.get('n'):>6} "
                   f"{fmt_pct(r.get('good_fraction'), 1):>7} {cells[0]:>10} {cells[1]:>8} {cells[2]:>8} "
                   f"{_f(r.get('req_per_s')):>7} {_f(r.get('goodput_per_s')):>9}  {r.get('verdict')}{flags}")
    if marked:
        out.append(f"  ({INSUFFICIENT_LEGEND})")
    return out


def problem_lines(rep: Mapping) -> list[str]:
    probs: list[str] = []
    for p in (rep.get("evidence") or {}).get("problems") or []:
        if p not in probs:
            probs.append(str(p))
    ip = rep.get("input_problems") or {}
    counts = [f"{ip[k]} {w}" for k, w in (("malformed", "malformed"), ("truncated", "truncated"),
                                             ("unknown_types", "unknown-type"),
                                             ("duplicate_request_ids", "repeated request id")) if ip.get(k)]
    if counts:
        probs.append("input: " + ", ".join(counts) + " lines (counted, not used)")
    if not probs:
        return []
    out = ["problems (each forbids PASS where it applies):"]
    for p in probs[:MAX_PROBLEMS]:
        out += _cut(_wrap(p, "  - ", "    "), 3, "[...]")
    if len(probs) > MAX_PROBLEMS:
        out.append(f"  ... and {len(probs) - MAX_PROBLEMS} more (--details, --json)")
    return out


def format_short(rep: Mapping, *, source_line: str | None = None, state_text: str | None = None,
                 notes: Sequence[str] = ()) -> str:
    """The default report text of ``rep`` (the report's JSON document). ``state_text``: the verdict as the CLI marks
    it ("PASS (not acceptance-grade: ...)"); ``notes``: lines the CLI adds under the verdict (SYNTHETIC's exit)."""
    out = header_block(rep, source_line)
    out.append("")
    out += _wrap(verdict_line(rep, state_text), rest="    ")
    out += [ln for n in notes for ln in _wrap(n, "    ", "    ")]
    out += level_table(rep.get("levels") or [])
    reason = ((rep.get("measured") or {}).get("verdict") or {}).get("reason")
    if reason:
        out += _cut(_wrap(f"why: {reason}", "  ", "       "), MAX_REASON_LINES, "[... --details]")
    errs = rep.get("errors_by_class") or {}
    if errs:
        out += _wrap("errors: " + ", ".join(f"{k}={v}" for k, v in sorted(errs.items())), "  ", "    ")
    out += problem_lines(rep)
    c = rep.get("conclusion") or {}
    out.append("")
    out += _wrap(f"conclusion: {'READY' if c.get('ready_for_traffic') else 'NOT ready'} for real traffic (budget: "
                 f"{c.get('budget') or 'unknown'}, measured: {c.get('measured')}, quality: {c.get('quality')})")
    for line in (c.get("missing_or_failed") or [])[:4]:
        out += _wrap(line, "  ", "    ")
    out += _wrap("(--details: each latency metric, token accounting per level, budget assumptions, server timing, "
                 "prefix cache; --json: all)", rest=" ")
    return "\n".join(out) + "\n"
