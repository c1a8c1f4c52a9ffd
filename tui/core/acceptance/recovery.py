"""The acceptance report's Recovery evidence (issue 39): the drills given with ``accept --drill FILE...``, beside the
rollback rules (section 7), and what they add to the conclusion.

A drill is optional: without one the section says "no recovery evidence" and the conclusion names it (it does not
block "ready"). A drill given is evidence like any other: NOT RECOVERED fails the acceptance (exit 1); INSUFFICIENT,
a drill judged at settings below accept's floors (window 10 min, target 0.9, alpha 0.05), a SYNTHETIC drill, or a
drill of another deployment than the record files keeps it from "ready" (exit 3), each named.

Each entry is built by the command line from the drill's document (``tui.core.drill.document``): ``source``,
``drill`` (the document's ``drill`` object), ``not_acceptance_grade`` (the floors it is below), ``target`` (model,
url of its run header).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tui.core.textsafe import md

NO_EVIDENCE = "no recovery evidence"


def _ttr(d: Mapping) -> str:
    t = d.get("time_to_recover_s")
    if not t:
        return "no recovery point"
    return f"{t['low']:g}-{t['high']:g} s" if t["high"] > t["low"] else f"{t['high']:g} s"


def recovery_section(drills: Sequence[Mapping], targets: set[tuple[Any, Any]]) -> dict[str, Any]:
    """The section's document and its effect on the conclusion (``lines``, ``blocks_ready``, ``failed``)."""
    out: dict[str, Any] = {"given": bool(drills), "drills": [], "state": NO_EVIDENCE, "lines": [],
                           "blocks_ready": False, "failed": False, "text": ""}
    if not drills:  # said in the conclusion (``text``), never a reason for "not ready": a drill is optional
        out["text"] = ("Recovery: no recovery evidence (no drill given: servewatch drill measures how the service comes "
                       "back from a spike, a crash or a lost replica; accept --drill FILE adds it).")
        return out
    states = []
    for e in drills:
        d = e.get("drill") or {}
        verdict = str(d.get("verdict"))
        problems: list[str] = []
        if e.get("not_acceptance_grade"):
            problems.append(f"not acceptance-grade ({', '.join(map(str, e['not_acceptance_grade']))})")
        if d.get("synthetic"):
            problems.append("SYNTHETIC")
        tgt = tuple(e.get("target") or (None, None))
        if targets and tgt not in targets:
            problems.append(f"of another deployment than the record files (model {tgt[0]}, url {tgt[1]})")
        settings_why = (d.get("exit") or {}).get("settings")
        if settings_why:
            problems.append(str(settings_why))
        imp = d.get("impact") or {}
        entry = {"source": e.get("source"), "verdict": verdict, "reason": d.get("reason"),
                 "disturbance": (d.get("disturbance") or {}).get("description"),
                 "time_to_recover_s": d.get("time_to_recover_s"), "rto_s": d.get("rto_s"),
                 "impact": {"requests": imp.get("requests"), "failed": imp.get("failed"), "slow": imp.get("slow"),
                            "error_budget_share": imp.get("error_budget_share")},
                 "server": d.get("server"), "rollback": d.get("rollback"),
                 "evidence_problems": list(d.get("evidence_problems") or []), "problems": problems,
                 "exit_code": (d.get("exit") or {}).get("code"), "drill": d}
        out["drills"].append(entry)
        states.append(verdict)
        if verdict == "NOT_RECOVERED":
            out["failed"] = True
            out["lines"].append(f"Recovery: NOT RECOVERED ({e.get('source')}): {d.get('reason')}.")
        elif verdict != "RECOVERED":
            out["blocks_ready"] = True
            out["lines"].append(f"Recovery: {verdict} ({e.get('source')}): {d.get('reason')}.")
        if problems:
            out["blocks_ready"] = True
            out["lines"].append(f"Recovery: the drill {e.get('source')} cannot show readiness: {'; '.join(problems)}.")
    out["state"] = ("NOT_RECOVERED" if "NOT_RECOVERED" in states else "INSUFFICIENT"
                    if any(s != "RECOVERED" for s in states) else "RECOVERED")
    if out["state"] == "RECOVERED" and not out["blocks_ready"]:
        out["text"] = "Recovery: " + "; ".join(
            f"RECOVERED in {_ttr(x['drill'])} after {x['disturbance']} ({x['source']})" for x in out["drills"]) + "."
    else:
        out["text"] = " ".join(out["lines"])
    return out


def md_recovery(doc: Mapping) -> list[str]:
    """Section 7's Recovery evidence in markdown."""
    r = doc.get("recovery") or {}
    L = ["### Recovery (drills)", ""]
    if not r.get("given"):
        L += ["No recovery evidence: no drill was given. `servewatch drill` runs a baseline, a disturbance (a spike, a "
              "fault command such as killing the server, or your own act) and the recovery at one load, and measures "
              "the time to recover and its impact (docs/recovery.md); `accept --drill FILE` adds it here.", ""]
        return L
    L += ["| drill | disturbance | verdict | time to recover | RTO | impact (failed / slow of requests) | budget share "
          "| burn-rate rules |", "|---|---|---|---|---|---|---|---|"]
    for x in r.get("drills") or []:
        d = x.get("drill") or {}
        imp = x.get("impact") or {}
        share = imp.get("error_budget_share")
        fired = [f"{rb['name']} at {rb['after_disturbance_s']:g} s" for rb in x.get("rollback") or []
                 if rb.get("fires") and rb.get("after_disturbance_s") is not None]
        L.append(f"| {md(x.get('source'))} | {md(x.get('disturbance'))} | {x.get('verdict')} | {_ttr(d)} | "
                 f"{x.get('rto_s')} s | {imp.get('failed')} / {imp.get('slow')} of {imp.get('requests')} | "
                 f"{'N/A' if share is None else f'{100 * share:.3g}%'} | {', '.join(fired) or 'would not fire'} |")
    L.append("")
    for x in r.get("drills") or []:
        L.append(f"- {md(x.get('source'))}: {md(x.get('reason'))}")
        srv = x.get("server") or {}
        facts = []
        if srv.get("health_after_s") is not None:
            facts.append(f"/health answered again after {srv['health_after_s']:.3g} s")
        if srv.get("cold_ttft_ms") is not None:
            facts.append(f"cold-start TTFT {srv['cold_ttft_ms']:.0f} ms (baseline P50 "
                         f"{'N/A' if srv.get('baseline_ttft_p50_ms') is None else round(srv['baseline_ttft_p50_ms'])}"
                         " ms)")
        if srv.get("queue_recovered_s") is not None:
            low, hi = srv.get("queue_recovered_low_s"), srv["queue_recovered_s"]
            when = f"{low:.3g}-{hi:.3g} s" if isinstance(low, (int, float)) and hi - low > 1.0 else f"{hi:.3g} s"
            facts.append(f"queue back at its baseline level after {when}")
        if facts:
            L.append(f"  - server: {'; '.join(facts)}")
        for p in x.get("evidence_problems") or []:
            L.append(f"  - evidence problem: {md(p)}")
        for p in x.get("problems") or []:
            L.append(f"  - {md(p)}")
    L += ["", "What a drill proves and does not: one disturbance at one load against this deployment; a fleet needs "
          "its own drill (docs/recovery.md).", ""]
    return L
