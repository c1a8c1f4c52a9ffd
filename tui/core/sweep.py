"""Capacity sweep: the ladder, the per-level table, measured capacity beside the memory-only candidate.

Pure. The capacity and the explanation of what limits (queueing, TPOT, errors, falling goodput) come from
``tui.core.capacity.measure_capacity``, the one function the acceptance report and the console's sweep pane
(through ``Snapshot.capacity``) use too, so the three always agree.
"""

from __future__ import annotations

from typing import Any

from tui.core.acceptance import RunInput, measured_section
from tui.core.capacity import CapRow, cap_rows, measure_capacity
from tui.core.search import capacity_bracket, format_bracket
from tui.core.slos import SLO_JSON_KEYS
from tui.core.snapshot import LevelRow, Snapshot
from tui.core.states import FAIL
from tui.core.stats import latency_value
from tui.core.textfmt import fmt_level, fmt_pct
from tui.core.textsafe import term

#: Top of the default sweep ladder when no budget (so no memory-only candidate) is given: 1, 2, 4, ..., 64.
DEFAULT_MAX_LEVEL = 64


def default_ladder(candidate: int | None, limit: int | None = None) -> list[float]:
    """1, 2, 4, 8, ... up to ``limit``, else twice the memory-only candidate (included) when a budget was given,
    else DEFAULT_MAX_LEVEL. No example model decides the ladder."""
    if limit:
        top = limit
    elif candidate is not None:
        top = max(1, 2 * candidate)
    else:
        top = DEFAULT_MAX_LEVEL
    out, c = [], 1
    while c <= top:
        out.append(float(c))
        c *= 2
    if out[-1] != top:
        out.append(float(top))
    return out


def level_states(rows: tuple[LevelRow, ...], header: dict | None = None) -> dict[float | None, str]:
    """One verdict per level of the primary mode (all rounds): FAIL if any round FAILs, PASS only if every
    round PASSes (``tui.core.levels.mode_tables``)."""
    t = measure_capacity(_rows(rows, header)).tables
    return {s.level: s.state for s in t[0].levels} if t else {}


def measured_capacity(rows: tuple[LevelRow, ...], header: dict | None = None) -> float | None:
    """The highest level that PASSes (every round), or None (``tui.core.capacity.measure_capacity``)."""
    return measure_capacity(_rows(rows, header)).capacity


def _rows(rows: tuple[LevelRow, ...], header: dict | None) -> list[CapRow]:
    return cap_rows("", rows, header)


def sweep_summary(snapshot: Snapshot, budget: Any = None, source: str = "") -> dict[str, Any]:
    cand = None if budget is None else budget.candidate
    m = measured_section([RunInput(source or snapshot.source, snapshot)], cand, None)
    states = [s["state"] for t in m["by_mode"][:1] for s in t["levels"]]
    cap = m["measured_capacity"]
    if m["has_measured_capacity"]:
        code = 0
    elif FAIL in states:
        code = 1
    else:
        code = 3
    out = {
        "schema": "servewatch.sweep/1",
        "unit": m["unit"],
        "levels": m["levels"],
        "measured_capacity": cap,
        "memory_only_candidate": cand,
        "limits": m["capacity_vs_memory"] + m["notes"],
        "exit_code": code,
        "good": snapshot.slos.describe(),
    }
    br = capacity_bracket(snapshot.levels, snapshot.header, m["unit"], m["primary_mode"])
    if br is not None:  # a `sweep --search` (issue 26)
        out["capacity_bracket"] = br
    return out


def _p95(block: Any) -> str:
    return latency_value(block, "p95") if isinstance(block, dict) else "N/A"


def _latency_lines(s: dict[str, Any]) -> list[str]:
    """Per level: P95 of TTFT, TPOT, inter-token and end-to-end, and goodput in requests and tokens."""
    out = ["", "Latency P95 (ms) and goodput per level",
           f"  {s['unit'][:11]:>11} rnd  TTFT P95  TPOT P95   ITL P95   E2E P95  goodput/s  good tok/s  missed"]
    for r in s["levels"]:
        lat = r.get("latency") or {}
        g, gt = r.get("goodput_rps"), r.get("goodput_tok_s")
        missed = ", ".join(f"{k} {v}" for k, v in (r.get("misses") or {}).items() if v) or "-"
        out.append(f"  {fmt_level(r['level']):>11} {r['round']:>3} "
                   + "".join(f"{_p95(lat.get(k)):>9} " for k in SLO_JSON_KEYS)
                   + f"{'N/A' if g is None else f'{g:.2f}':>10} {'N/A' if gt is None else f'{gt:.1f}':>11}  {missed}")
    out.append("  (TPOT = (last - first token) / (tokens - 1); ITL = largest gap between two tokens; E2E = sent to "
               "last token; N/A: the records do not carry it)")
    return out


def format_sweep(s: dict[str, Any]) -> str:
    lines = [f"Capacity sweep (measured; good = completed AND {s.get('good') or 'TTFT <= SLO'})",
             (f"  {s['unit'][:11]:>11} rnd      n  good%  interval      P50      P95      P99   TPOT  req/s  tok/s "
             "goodput  wait  GPU GiB  verdict")]

    def ms(t, k):
        v = t[k]["value_ms"]
        if v is None:
            return "N/A"
        return ("inf" if v == "inf" else f"{v:.0f}") + ("" if t[k]["supported"] else "*")

    def f(v, d=2):
        return "N/A" if v is None else f"{v:.{d}f}"

    for r in s["levels"]:
        lo, hi = r["wilson_95"]
        lines.append(
            f"  {fmt_level(r['level']):>11} {r['round']:>3} {r['n']:>6} {fmt_pct(r['good_fraction'], 1):>6} "
            f"{fmt_pct(lo):>4}-{fmt_pct(hi):<5} {ms(r['ttft_ms'], 'P50'):>8} {ms(r['ttft_ms'], 'P95'):>8} "
            f"{ms(r['ttft_ms'], 'P99'):>8} {f(r['tpot_ms_p50'], 1):>6} {f(r['req_per_s']):>6} "
            f"{f(r['output_tok_per_s'], 1):>6} {f(r['goodput_per_s']):>7} {f(r['max_waiting'], 0):>5} "
            f"{f(r['peak_gpu_gib']):>8}  {r['verdict']}" + ("  (client saturated)" if r["saturated"] else ""))
    lines.append("  (* = insufficient n for that percentile; goodput = good requests per second)")
    lines += _latency_lines(s)
    cap, cand = s["measured_capacity"], s["memory_only_candidate"]
    lines.append("")
    lines.append(f"measured capacity: {'none (no level passed)' if cap is None else fmt_level(cap)}    "
                 f"memory-only candidate: {'unknown' if cand is None else cand} (a number to test, not a limit)")
    lines += [f"  - {line}" for line in s["limits"]]
    if s.get("capacity_bracket"):
        lines += format_bracket(s["capacity_bracket"])
    return "\n".join(term(line) for line in lines) + "\n"  # outside text stays on its line (tui.core.textsafe)
