"""A judged drill as one document (``drill --json`` and ``report --json`` on a drill file print exactly it) and as
text (``format_text``: the same document in words, for ``drill`` and ``report``). Every reader renders the document,
never the judgement again, so text, JSON, the acceptance report and the HTML page say the same thing.

``{"drill": {"verdict", "reason", "disturbance", "time_to_recover_s", "impact", "baseline", "recovery", "server",
...}}`` (docs/recovery.md lists every key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tui.core.drill.judge import DrillResult
from tui.core.phases import DRILL_EXIT, DRILL_WORDS, fmt_duration, fmt_interval
from tui.core.snapshot import Verdict
from tui.core.textfmt import fmt_pct

SCHEMA = "servewatch.drill/1"


def verdict_dict(v: Verdict | None, **extra: Any) -> dict[str, Any] | None:
    """A level's usual verdict as the drill document carries it."""
    if v is None:
        return None
    return {"state": v.state, "reason": v.reason, "n": v.n, "good": v.good,
            "good_fraction": (v.good / v.n) if v.n else None, "window_s": round(v.elapsed_s, 3),
            "missing": v.missing, **extra}


def drill_document(res: DrillResult, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The drill document of ``res``; ``settings``: the verdict's settings it was judged at (the report's block)."""
    plan = res.plan
    f = res.finding
    hdr = res.header
    tgt_b = hdr.get("target")
    tgt: Mapping = tgt_b if isinstance(tgt_b, Mapping) else {}
    ttr = None if res.ttr is None else {"low": round(res.ttr[0], 3), "high": round(res.ttr[1], 3)}
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "verdict": res.verdict,
        "reason": res.reason,
        "exit_code": DRILL_EXIT[res.verdict],
        "synthetic": res.synthetic,
        "run_id": hdr.get("run_id"),
        "target": {"url": tgt.get("url"), "model": tgt.get("model")},
        "load": None if plan is None else {"mode": plan.mode, "level": plan.level,
                                           "unit": "req/s" if plan.mode == "open" else "concurrency"},
        "disturbance": res.disturbance,
        "start": res.start,
        "reference": res.ref,
        "time_to_recover_s": ttr,
        "recovery_point": None if f is None else f.point,
        "rto_s": None if plan is None else plan.rto_s,
        "impact": res.impact,
        "baseline": verdict_dict(res.baseline),
        "recovery": verdict_dict(res.recovery),
        "hold": None if f is None or f.hold is None else verdict_dict(f.hold, start=f.held_from,
                                                                     hold_s=None if plan is None else plan.hold_s),
        "after_rto": verdict_dict(res.after_rto),
        "server": res.server,
        "rollback": res.rollback,
        "phases": [p.to_dict() for p in res.phases],
        "overall": res.overall.to_dict(),
        "windows": _windows_block(res),
        "settings": _settings(res, settings),
        "evidence_problems": list(res.problems),
        "notes": list(res.notes),
        "series": res.series,
    }
    return {"drill": doc}


def _windows_block(res: DrillResult) -> dict[str, Any] | None:
    f = res.finding
    if f is None:
        return None
    lb = f.last_below
    below = [w for w in f.windows if not w.at_target(res.target)]
    return {"complete": len(f.windows), "below_target": len(below), "holds_tried": f.tries,
            "last_below_target": None if lb is None else {"start_s": round(lb.start - f.ref, 3), "n": lb.n,
                                                          "good": lb.good}}


def _settings(res: DrillResult, verdict_settings: Mapping[str, Any] | None) -> dict[str, Any]:
    plan = res.plan
    out: dict[str, Any] = {}
    if plan is not None:
        out = {"baseline_s": plan.baseline_s, "recovery_s": plan.recovery_s, "recovery_window_s": plan.window_s,
               "step_s": plan.step_s, "hold_s": plan.hold_s, "rto_s": plan.rto_s,
               "requests_per_month": plan.requests_per_month}
    if verdict_settings:
        out["verdict"] = dict(verdict_settings)
    return out


# ------------------------------------------------------------------ text


def _verdict_line(v: Mapping | None) -> str:
    if not v:
        return "N/A"
    frac = "" if v.get("good_fraction") is None else f", {fmt_pct(v['good_fraction'], 1)} good of {v['n']}"
    return f"{v['state']}{frac}"


def _counts_row(p: Mapping) -> list[str]:
    return [str(p.get("name")), str(p.get("sent", 0)), str(p.get("good", 0)), str(p.get("slow", 0)),
            str((p.get("failed") or {}).get("total", 0)), str(p.get("cancelled", 0)), str(p.get("excluded", 0))]


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [list(head), *rows]) for i in range(len(head))]
    fmt = [f"{{:<{widths[0]}}}"] + [f"{{:>{w}}}" for w in widths[1:]]
    return ["  " + "  ".join(fmt[i].format(c) for i, c in enumerate(r)) for r in [list(head), *rows]]


def format_text(doc: Mapping[str, Any]) -> str:
    """The drill document in words (outside strings are data: the caller's sink makes them safe)."""
    d = doc["drill"]
    out: list[str] = []
    load = d.get("load") or {}
    tgt = d.get("target") or {}
    dist = d.get("disturbance") or {}
    head = f"drill: {tgt.get('url') or 'unknown target'}"
    if load:
        lv = f"{load.get('level'):g} req/s" if load.get("mode") == "open" else f"concurrency {load.get('level'):g}"
        head += f", {'open' if load.get('mode') == 'open' else 'closed'} loop at {lv}"
    out.append(head)
    if dist.get("description"):
        out.append(f"disturbance: {dist['description']}")
    if d.get("synthetic"):
        out.append("SYNTHETIC: the records are labelled synthetic; this drill proves nothing about a server")
    ttr = d.get("time_to_recover_s")
    ttr_text = "no recovery point" if ttr is None else f"time to recover {fmt_interval(ttr['low'], ttr['high'])}"
    rto = d.get("rto_s")
    out.append(f"  verdict={d['verdict']}  ({DRILL_WORDS.get(d['verdict'], d['verdict'])}; {ttr_text}; RTO "
               f"{fmt_duration(rto)})")
    out.append(f"    {d['reason']}")
    for p in d.get("evidence_problems") or []:
        out.append(f"    evidence problem: {p}")
    out.append(f"  baseline: {_verdict_line(d.get('baseline'))}; recovery phase: {_verdict_line(d.get('recovery'))}")
    if d.get("hold"):
        h = d["hold"]
        out.append(f"  hold from the best candidate: {_verdict_line(h)}")
    rows = [_counts_row(p) for p in d.get("phases") or []] + [_counts_row(d.get("overall") or {"name": "overall"})]
    out += _table(["phase", "sent", "good", "slow", "failed", "cancelled", "open"], rows)
    classes = (d.get("overall") or {}).get("failed", {}).get("by_class") or {}
    if classes:
        out.append("  failed by class: " + ", ".join(f"{k} {v}" for k, v in classes.items()))
    imp = d.get("impact") or {}
    if imp:
        share = imp.get("error_budget_share")
        until = "the recovery point" if d.get("recovery_point") is not None else "the drill's end"
        line = (f"  impact: {imp.get('requests', 0)} requests sent from the disturbance to {until}: "
                f"{imp.get('failed', 0)} failed, {imp.get('slow', 0)} slow")
        if share is not None:
            line += (f"; {_share(share)} of a monthly error budget ({imp['error_budget']:,.0f} not-good requests "
                     f"of {imp['requests_per_month']:,.0f} a month at the target; the month from "
                     f"{imp.get('requests_per_month_from')})")
        out.append(line)
    out += _server_lines(d.get("server") or {})
    for r in d.get("rollback") or []:
        if not r.get("can_fire"):
            out.append(f"  rollback rule {r['name']}: can never fire at this target")
            continue
        held = fmt_duration(r.get("long_window_held_s"))
        if r.get("fires"):
            when = r.get("after_disturbance_s")
            at = "" if when is None else f" {fmt_duration(when)} after the disturbance started"
            out.append(f"  rollback rule {r['name']} ({r['burn_rate']:g}x burn over {r['long_window']} and "
                       f"{r['short_window']}) would have fired{at} (its {r['long_window']} window held only the "
                       f"drill's {held})")
        else:
            out.append(f"  rollback rule {r['name']} ({r['burn_rate']:g}x burn over {r['long_window']} and "
                       f"{r['short_window']}) would not have fired (its {r['long_window']} window held the drill's "
                       f"{held})")
    for n in d.get("notes") or []:
        out.append(f"  note: {n}")
    return "\n".join(out) + "\n"


def _share(x: float) -> str:
    if x == 0:
        return "0%"
    if x < 0.0001:
        return f"{100 * x:.2g}%"
    return f"{100 * x:.3g}%"


def _server_lines(s: Mapping[str, Any]) -> list[str]:
    parts = []
    if s.get("queue_recovered_s") is not None:
        low, hi = s.get("queue_recovered_low_s"), s["queue_recovered_s"]
        when = (fmt_interval(low, hi) if isinstance(low, (int, float)) and hi - low > 1.0
                else fmt_duration(hi))
        parts.append(f"queue back at its baseline level ({s.get('queue_baseline_waiting'):g} waiting) after {when}")
    if s.get("health_after_s") is not None:
        parts.append(f"/health answered again {fmt_duration(s['health_after_s'])} after the fault started")
    if s.get("cold_ttft_ms") is not None:
        base = s.get("baseline_ttft_p50_ms")
        parts.append(f"cold-start TTFT {s['cold_ttft_ms']:.0f} ms (median of the first "
                     f"{len(s.get('cold_ttft_first_ms') or [])} after the restart; baseline P50 "
                     f"{'N/A' if base is None else f'{base:.0f} ms'})")
    out = [f"  server: {'; '.join(parts)}"] if parts else []
    out += [f"  server: {n}" for n in s.get("notes") or []]
    return out
