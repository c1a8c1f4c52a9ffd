"""Two drills compared (``servewatch compare BASE CAND`` on two drill files): time to recover and impact.

NOT WORSE (exit 0), WORSE (1) or NOT ENOUGH EVIDENCE (3), from the two drill documents (``drill_document``):

- NOT ENOUGH EVIDENCE when either drill is INSUFFICIENT or has an evidence problem, when both are the same run, or
  when they are not the same drill: another disturbance (kind, spike factor or length), load (loop, level), recovery
  rule (window, step, hold, RTO) or verdict settings (SLOs, target);
- WORSE when the candidate did not recover and the base did; when both recovered and the candidate's time to
  recover is later beyond the step's resolution (its interval starts after the base's ends); or when the
  candidate's impact (failed + slow requests) exceeds the base's by more than three standard deviations of the
  difference of two Poisson counts (``3 sqrt(a + b) + 1``);
- NOT WORSE otherwise (a candidate that recovered where the base did not is better).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tui.core.phases import INSUFFICIENT, NOT_RECOVERED, RECOVERED, fmt_interval

NOT_WORSE, WORSE, NOT_ENOUGH = "NOT WORSE", "WORSE", "NOT ENOUGH EVIDENCE"
COMPARE_EXIT = {NOT_WORSE: 0, WORSE: 1, NOT_ENOUGH: 3}
#: what must be the same for two drills to be compared (key in the document, words)
SAME = (("disturbance.kind", "disturbance"), ("disturbance.spike.factor", "spike factor"),
        ("disturbance.spike.duration_s", "spike length"), ("load.mode", "loop"), ("load.level", "load level"),
        ("settings.recovery_window_s", "recovery window"), ("settings.step_s", "step"), ("settings.hold_s", "hold"),
        ("settings.rto_s", "RTO"), ("settings.verdict.slos", "SLOs"), ("settings.verdict.target", "target"))


def _get(d: Mapping, path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _bad(d: Mapping) -> int:
    imp = d.get("impact") or {}
    return int(imp.get("failed") or 0) + int(imp.get("slow") or 0)


def _summary(label: str, d: Mapping) -> dict[str, Any]:
    return {"label": label, "verdict": d.get("verdict"), "time_to_recover_s": d.get("time_to_recover_s"),
            "impact_bad": _bad(d), "impact_requests": (d.get("impact") or {}).get("requests"),
            "error_budget_share": (d.get("impact") or {}).get("error_budget_share"), "run_id": d.get("run_id"),
            "synthetic": bool(d.get("synthetic")), "evidence_problems": list(d.get("evidence_problems") or [])}


def compare_drills(base: Mapping, cand: Mapping, base_label: str = "base", cand_label: str = "candidate") -> dict:
    """``{"compare": {...}}`` of two drill documents (each ``{"drill": {...}}``); see the module doc."""
    b, c = base["drill"], cand["drill"]
    reasons: list[str] = []
    verdict = NOT_WORSE
    for side, d in (("base", b), ("candidate", c)):
        if d.get("verdict") == INSUFFICIENT:
            reasons.append(f"the {side} drill is INSUFFICIENT: {d.get('reason')}")
        elif d.get("evidence_problems"):
            reasons.append(f"the {side} drill has evidence problems: {d['evidence_problems'][0]}")
    if b.get("run_id") and b.get("run_id") == c.get("run_id"):
        reasons.append(f"both sides are the same run (run id {b.get('run_id')}): a drill compared with itself")
    diffs = [f"{words} ({_get(b, k)} vs {_get(c, k)})" for k, words in SAME if _get(b, k) != _get(c, k)]
    if diffs:
        reasons.append("not the same drill: " + "; ".join(diffs))
    if reasons:
        verdict = NOT_ENOUGH
    else:
        vb, vc = b.get("verdict"), c.get("verdict")
        tb, tc = b.get("time_to_recover_s"), c.get("time_to_recover_s")
        if vb == RECOVERED and vc == NOT_RECOVERED:
            verdict = WORSE
            reasons.append("the base recovered, the candidate did not")
        elif vb == NOT_RECOVERED and vc == RECOVERED:
            reasons.append("the candidate recovered, the base did not")
        if verdict == NOT_WORSE and tb and tc:
            if tc["low"] > tb["high"]:
                verdict = WORSE
                reasons.append(f"the candidate recovered later: {fmt_interval(tc['low'], tc['high'])} "
                               f"against {fmt_interval(tb['low'], tb['high'])}")
            else:
                reasons.append(f"time to recover {fmt_interval(tc['low'], tc['high'])} against "
                               f"{fmt_interval(tb['low'], tb['high'])}: not later beyond the step")
        xb, xc = _bad(b), _bad(c)
        bound = 3.0 * math.sqrt(xb + xc) + 1.0
        if xc - xb > bound:
            verdict = WORSE
            reasons.append(f"the candidate's impact is larger: {xc} failed or slow requests against {xb} (more than "
                           f"the {bound:.0f} two counts of the same rate differ by)")
        else:
            reasons.append(f"impact {xc} failed or slow requests against {xb}: within {bound:.0f} (chance)")
    synthetic = bool(b.get("synthetic") or c.get("synthetic"))
    return {"compare": {"kind": "drill", "verdict": verdict, "exit_code": COMPARE_EXIT[verdict], "reasons": reasons,
                        "synthetic": synthetic, "base": _summary(base_label, b), "candidate": _summary(cand_label, c)}}


def format_compare(doc: Mapping) -> str:
    """The comparison in words."""
    c = doc["compare"]
    out = [f"compare drills: {c['base']['label']} (base) vs {c['candidate']['label']} (candidate)"]
    for side in ("base", "candidate"):
        s = c[side]
        t = s.get("time_to_recover_s")
        ttr = "not recovered" if not t else fmt_interval(t["low"], t["high"])
        out.append(f"  {side}: {s['verdict']}, time to recover {ttr}, impact {s['impact_bad']} failed or slow of "
                   f"{s.get('impact_requests') or 0} requests")
    out.append(f"  verdict={c['verdict']}")
    out += [f"    {r}" for r in c["reasons"]]
    return "\n".join(out) + "\n"
