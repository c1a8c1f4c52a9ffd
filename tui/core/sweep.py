"""Capacity sweep: measured capacity beside the memory-only candidate, and what limits.

Pure: reads the per-level rows of a ``Snapshot`` (``Monitor.level_rows()``) and a budget.
"""

from __future__ import annotations

import math
from typing import Any

from tui.core.report import fmt_level, fmt_pct
from tui.core.snapshot import FAIL, PASS, LevelRow

TPOT_GROWTH = 1.5  # TPOT rising by more than this factor is named as a limit


def default_ladder(candidate: int | None, limit: int | None = None) -> list[float]:
    """1, 2, 4, 8, ... up to ``limit`` or twice the memory-only candidate (which is included)."""
    top = limit if limit else max(1, 2 * (candidate or 0))
    out, c = [], 1
    while c <= top:
        out.append(float(c))
        c *= 2
    if out[-1] != top:
        out.append(float(top))
    return out


def _by_level(rows: tuple[LevelRow, ...]) -> dict[float, list[LevelRow]]:
    out: dict[float, list[LevelRow]] = {}
    for r in rows:
        if r.level is not None:
            out.setdefault(r.level, []).append(r)
    return dict(sorted(out.items()))


def level_state(rows: list[LevelRow]) -> str:
    """A level PASSes only when every round at it PASSes; any FAIL makes it FAIL."""
    states = [r.verdict.state for r in rows]
    if any(s == FAIL for s in states):
        return FAIL
    if states and all(s == PASS for s in states):
        return PASS
    return states[-1] if states else "NONE"


def measured_capacity(rows: tuple[LevelRow, ...]) -> float | None:
    """The highest level that PASSes (every round), or None."""
    passing = [lvl for lvl, rs in _by_level(rows).items() if level_state(rs) == PASS]
    return max(passing) if passing else None


def _p95(r: LevelRow) -> float | None:
    return r.window.ttft[1].value_ms


def limiting_factors(rows: tuple[LevelRow, ...], budget=None) -> list[str]:
    """Plain sentences: which bound limits (memory or load) and why (queueing, TPOT, errors)."""
    levels = _by_level(rows)
    if not levels:
        return ["no measured levels"]
    cap = measured_capacity(rows)
    cand = None if budget is None else budget.candidate
    out: list[str] = []
    above = [lvl for lvl in levels if cap is None or lvl > cap]
    first_bad = next((lvl for lvl in above if level_state(levels[lvl]) != PASS), None)
    if cap is not None and cand is not None and cap >= cand:
        out.append(f"memory limits first: the measured capacity ({cap:g}) reaches the memory-only candidate ({cand}); "
                   "levels above the candidate would need more KV cache than the budget has")
    elif cand is not None:
        what = "no level passed" if cap is None else f"the measured capacity ({cap:g})"
        out.append(f"load limits first: {what}, below the memory-only candidate ({cand}): memory is not the bottleneck")
    if first_bad is None:
        if cap is not None and max(levels) == cap:
            out.append(f"every level tested passed; the highest tested ({cap:g}) is a lower bound on capacity")
        return out
    bad = levels[first_bad][-1]
    base = levels[min(levels)][0]
    state = level_state(levels[first_bad])
    lead = f"at {fmt_level(first_bad)} the verdict is {state}"
    reasons = []
    if bad.max_waiting:
        reasons.append(f"queueing: up to {bad.max_waiting:g} requests waited at the server")
    p95_bad, p95_base = _p95(bad), _p95(base)
    slo = bad.verdict.slo_ttft_ms
    if p95_bad is not None and not math.isinf(p95_bad):
        if bad is not base and p95_base is not None and p95_base < p95_bad:
            reasons.append(f"TTFT P95 rose from {p95_base:.0f} ms at {fmt_level(base.level)} to {p95_bad:.0f} ms "
                           f"(SLO {slo:g} ms)")
        elif p95_bad > slo:
            reasons.append(f"TTFT P95 is {p95_bad:.0f} ms against an SLO of {slo:g} ms")
    t_bad, t_base = bad.window.tpot_ms_p50, base.window.tpot_ms_p50
    if t_bad and t_base and t_bad / t_base > TPOT_GROWTH:
        reasons.append(f"TPOT grew from {t_base:.1f} to {t_bad:.1f} ms per token")
    if bad.window.failed:
        reasons.append(f"{bad.window.failed} requests failed")
    out.append(lead + (": " + "; ".join(reasons) if reasons else ""))
    # effective throughput can fall as concurrency rises: say so when it does
    gp = [(lvl, rs[-1].window.goodput_per_s) for lvl, rs in levels.items() if rs[-1].window.goodput_per_s is not None]
    if len(gp) >= 2:
        best = max(gp, key=lambda x: x[1])
        last = gp[-1]
        if last[0] != best[0] and last[1] < 0.9 * best[1]:
            out.append(f"goodput fell from {best[1]:.2f} good req/s at {best[0]:g} to {last[1]:.2f} at {last[0]:g}: "
                       "more concurrency delivered fewer good requests")
    return out


def sweep_summary(rows: tuple[LevelRow, ...], budget=None) -> dict[str, Any]:
    table = []
    for r in rows:
        w = r.window
        table.append({
            "level": r.level, "round": r.round, "mode": r.mode, "n": w.good.n, "good_fraction": w.good.fraction,
            "interval": [w.good.lo, w.good.hi],
            "ttft_ms": {p.label: {"value": None if p.value_ms is None or math.isinf(p.value_ms) else p.value_ms,
                                  "supported": p.supported} for p in w.ttft},
            "tpot_ms_p50": w.tpot_ms_p50, "req_per_s": w.req_per_s, "output_tok_per_s": w.output_tok_per_s,
            "goodput_per_s": w.goodput_per_s, "max_waiting": r.max_waiting, "peak_gpu_gib": r.peak_gpu_gib,
            "seconds": w.seconds, "verdict": r.verdict.state, "saturated": r.saturated,
        })
    cap = measured_capacity(rows)
    return {
        "schema": "servewatch.sweep/1",
        "levels": table,
        "measured_capacity": cap,
        "memory_only_candidate": None if budget is None else budget.candidate,
        "limits": limiting_factors(rows, budget),
        "exit_code": 0 if cap is not None else (1 if any(level_state(rs) == FAIL
                                                          for rs in _by_level(rows).values()) else 3),
    }


def format_sweep(s: dict[str, Any]) -> str:
    lines = ["Capacity sweep (measured; good = completed AND TTFT <= SLO)",
             "  level rnd      n  good%   interval       P50      P95      P99   TPOT  req/s  tok/s goodput  wait  GPU GiB  verdict"]

    def ms(t, k):
        v = t[k]["value"]
        return "N/A" if v is None else f"{v:.0f}" + ("" if t[k]["supported"] else "*")

    def f(v, d=2):
        return "N/A" if v is None else f"{v:.{d}f}"

    for r in s["levels"]:
        lo, hi = r["interval"]
        lines.append(
            f"  {fmt_level(r['level']):>5} {r['round']:>3} {r['n']:>6} {fmt_pct(r['good_fraction'], 1):>6} "
            f"{fmt_pct(lo):>5}-{fmt_pct(hi):<6} {ms(r['ttft_ms'], 'P50'):>8} {ms(r['ttft_ms'], 'P95'):>8} "
            f"{ms(r['ttft_ms'], 'P99'):>8} {f(r['tpot_ms_p50'], 1):>6} {f(r['req_per_s']):>6} "
            f"{f(r['output_tok_per_s'], 1):>6} {f(r['goodput_per_s']):>7} {f(r['max_waiting'], 0):>5} "
            f"{f(r['peak_gpu_gib']):>8}  {r['verdict']}" + ("  (client saturated)" if r["saturated"] else ""))
    lines.append("  (* = insufficient n for that percentile; goodput = good requests per second)")
    cap = s["measured_capacity"]
    cand = s["memory_only_candidate"]
    lines.append("")
    lines.append(f"measured capacity: {'none (no level passed)' if cap is None else f'{cap:g}'}    "
                 f"memory-only candidate: {'unknown' if cand is None else cand} (a number to test, not a limit)")
    for line in s["limits"]:
        lines.append(f"  - {line}")
    return "\n".join(lines) + "\n"
