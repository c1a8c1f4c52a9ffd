"""Compare two runs level by level: is the candidate's good fraction NOT WORSE than the base's?

Per matched level the difference d = p_cand - p_base of the good fractions gets a Newcombe hybrid score
interval (built from the two Wilson intervals of ``stats.wilson``) at one-sided level ``alpha``:
- NOT WORSE when the lower bound of d is above -margin (the evidence shows any drop is below the margin),
- WORSE when the upper bound of d is below -margin (the evidence shows a drop larger than the margin),
- otherwise NOT ENOUGH EVIDENCE.
Each side's counts are divided by its variance inflation factor first (bursty outcomes: the effective
sample), the VIF being the largest ``stats.dispersion_vif`` over batch lengths of 15, 30, 60 and 120 s, each
at its upper 95% confidence bound (so that a VIF estimated from few batches is not taken as exact).
A run without a time axis (no start times) or a sampled run gets NOT ENOUGH EVIDENCE with that reason; so does a
comparison ``tui.core.compare_guard`` refuses (the same run on both sides; a different served model, engine or
workload, or an unknown workload, unless allowed).
This is a one-shot test on two finished runs (not re-checked as data arrives), so a fixed-n interval is
valid here. Levels match by value (within 5%) and loop mode. Pure, standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, cast

import tui.core.compare_guard as guard
import tui.core.defaults as defaults
import tui.core.evidence as evidence
import tui.core.prefix_cache as prefix_cache
import tui.core.stats as stats
import tui.core.workload as workload
from tui.core.compare_doc import CompareDoc, CompareLevel, LevelSummary
from tui.core.exitcodes import synthetic_exit
from tui.core.importers.limits import source_of, tool_of, ttft_definition, verdict_limit
from tui.core.outcomes import CLIENT, EXCLUDED, GOOD
from tui.core.records.request import RequestRecord
from tui.core.slos import SLO_JSON_KEYS, SLO_TABLE, Slos, metric_values, slo_rule
from tui.core.stats import latency_cell, latency_json
from tui.core.textfmt import fmt_pct
from tui.core.textsafe import md, md_code
from tui.core.verdict import BATCH_MULTS

NOT_WORSE, WORSE, NOT_ENOUGH = "NOT WORSE", "WORSE", "NOT ENOUGH EVIDENCE"
EXIT = {NOT_WORSE: 0, WORSE: 1, NOT_ENOUGH: 3}
LEVEL_TOLERANCE = 0.05
BATCH_SECONDS = tuple(defaults.BATCH_S * k for k in BATCH_MULTS)  # 15, 30, 60 and 120 s: the judge's batch lengths


#: The latency metrics of issue 21, as the JSON names them (``ttft_ms``, ...; ``tui.core.slos.SLO_TABLE``), in the
#: order every view lists them, and their names.
LATENCY_NAMES = {k.json_key: k.name for k in SLO_TABLE}


@dataclass
class LevelStats:
    level: float | None
    mode: str | None
    n: int = 0  # measured requests judged (cancelled-while-open excluded)
    good: int = 0
    excluded_open: int = 0
    unjudged: int = 0  # nothing missed, an SLO in force not judgeable: unknown, not compared (said)
    client: int = 0  # failed in the client (its own resources ran out, issue 36): unknown, never the server's
    ttft_ms: list[float] = field(default_factory=list)
    tpot_ms: list[float] = field(default_factory=list)
    outcomes: list[tuple[float, bool]] = field(default_factory=list)  # (t_end, good)
    #: per SLO_JSON_KEYS: the completed requests' values (ms) of that metric (``_metric_values``)
    latency: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in SLO_JSON_KEYS})
    t0: float | None = None
    t1: float | None = None

    def vif(self) -> float | None:
        """Largest batch-means VIF over several batch lengths, each taken at its upper 95% confidence
        bound (None when none can be estimated)."""
        if not self.outcomes or self.t0 is None:
            return None
        if not all(math.isfinite(t - self.t0) for t, _g in self.outcomes):
            return None  # a time axis that is not finite: no batches, the VIF is unknown
        best = None
        for length in BATCH_SECONDS:
            buckets: dict[int, list[int]] = {}
            for t, g in self.outcomes:
                b = buckets.setdefault(int((t - self.t0) // length), [0, 0])
                b[0] += g
                b[1] += 1
            v = stats.dispersion_vif([(g, n) for g, n in buckets.values()])
            if v is not None:
                v *= _upper_factor(sum(1 for _, n in buckets.values() if n > 0) - 1)
                best = v if best is None else max(best, v)
        return best

    def summary(self, has_axis: bool) -> LevelSummary:
        lo, hi = stats.wilson(self.good, self.n)
        pct = stats.percentiles(sorted(self.ttft_ms))
        span = (self.t1 - self.t0) if (has_axis and self.t0 is not None and self.t1 is not None) else None
        if span is not None and not math.isfinite(span):
            span = None  # not a duration anyone measured: unknown
        vif = self.vif() if has_axis else None
        tp = sorted(self.tpot_ms)
        return {
            "level": self.level, "mode": self.mode, "n": self.n, "good": self.good,
            "good_fraction": self.good / self.n if self.n else None, "wilson_95": [lo, hi],
            "excluded_cancelled_open": self.excluded_open,
            "not_judgeable": self.unjudged,
            "client_limited": self.client,
            "ttft_ms": {p.label: {"value": p.value_ms, "n": p.n, "supported": p.supported, "n_needed": p.n_needed}
                        for p in pct},
            "tpot_ms_p50": stats.nearest_rank(tp, 0.5) if tp else None,
            "latency": {k: latency_json(stats.percentiles(sorted(v))) for k, v in self.latency.items()},
            "goodput_per_s": (self.good / span) if span and span > 0 else None,
            "seconds": span, "vif": vif, "n_eff": (self.n / max(1.0, vif)) if vif else self.n,
        }


def _upper_factor(df: int, conf: float = 0.95) -> float:
    """df / chi2_{1-conf}(df): turns a dispersion estimate on ``df`` degrees of freedom into its upper
    ``conf`` confidence bound (Wilson-Hilferty approximation of the chi-square quantile)."""
    if df < 1:
        return 1.0
    z = NormalDist().inv_cdf(1.0 - conf)
    a = 2.0 / (9.0 * df)
    q = df * max(1e-9, 1.0 - a + z * math.sqrt(a)) ** 3
    return df / q


def level_stats(requests: Iterable[RequestRecord], slo_ttft_s: float, slos: Slos | None = None,
                dups: evidence.Duplicates | None = None) -> dict[tuple[float | None, str | None], LevelStats]:
    """Measured requests grouped by (level, mode=None), judged by the one rule (``tui.core.slos.slo_rule``: every
    SLO in ``slos``, else the TTFT SLO ``slo_ttft_s`` alone); cancelled requests whose outcome was still open are
    excluded (counted), as the Monitor does. Each request counts once: the one duplicate rule
    (``tui.core.evidence.Duplicates``, ``dups``: a fresh one when not given) leaves out and counts the copies."""
    in_force = Slos(ttft_ms=slo_ttft_s * 1000.0) if slos is None else slos
    rule = slo_rule(in_force)
    check = (dups if dups is not None else evidence.Duplicates()).check
    out: dict[Any, LevelStats] = {}
    for r in requests:
        if check(r.id, r.t_sent, r.t_first_token, r.t_end):
            continue  # a duplicate: counted by ``dups``, never judged twice
        if r.phase != "measure":
            continue
        st = out.get(r.level)
        if st is None:
            st = out[r.level] = LevelStats(r.level, None)
        outcome, ttft_ms, _ = rule(r)
        if outcome == EXCLUDED:
            if r.error is None:  # completed, nothing missed, an SLO in force not judgeable on the record
                st.unjudged += 1
            elif r.error == CLIENT:  # the client's own resources ran out: unknown (hold_client_limited)
                st.client += 1
            else:
                st.excluded_open += 1
            continue
        good = outcome == GOOD
        st.n += 1
        st.good += good
        st.outcomes.append((r.t_end, good))
        st.t0 = r.t_sent if st.t0 is None else min(st.t0, r.t_sent)
        st.t1 = r.t_end if st.t1 is None else max(st.t1, r.t_end)
        if r.complete and r.error is None and ttft_ms is not None:
            st.ttft_ms.append(ttft_ms)
            for key, v in zip(SLO_JSON_KEYS, metric_values(r, in_force.ttft_of), strict=True):
                if v is not None and math.isfinite(v):
                    st.latency[key].append(v)
            if r.output_tokens and r.output_tokens > 1:
                st.tpot_ms.append(1000.0 * (r.t_end - r.t_first_token) / (r.output_tokens - 1))  # type: ignore[operator]
    return out


def latency_change(base: dict[str, dict], cand: dict[str, dict]) -> dict[str, dict[str, float | None]]:
    """Per metric, candidate minus base of each supported percentile (ms); None where either side has none.
    Descriptive: the verdict is on the good fraction."""
    out: dict[str, dict[str, float | None]] = {}
    for key in SLO_JSON_KEYS:
        b, c = base.get(key) or {}, cand.get(key) or {}
        row: dict[str, float | None] = {}
        for q in stats.keys():
            vb, vc = b.get(q), c.get(q)
            row[q] = (vc - vb) if isinstance(vb, (int, float)) and isinstance(vc, (int, float)) else None
        out[key] = row
    return out


def newcombe(g1: float, n1: float, g2: float, n2: float, z: float) -> tuple[float, float, float]:
    """(d, lo, hi) for d = p1 - p2, Newcombe's hybrid score interval from two Wilson intervals."""
    p1, p2 = g1 / n1, g2 / n2
    l1, u1 = stats.wilson(g1, n1, z)  # type: ignore[arg-type]
    l2, u2 = stats.wilson(g2, n2, z)  # type: ignore[arg-type]
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)  # type: ignore[operator]
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)  # type: ignore[operator]
    return d, lo, hi


def judge(base: dict, cand: dict, margin: float, alpha: float) -> dict[str, Any]:
    """Three-way verdict on one matched level from the two summaries."""
    if not base["n"] or not cand["n"]:
        return {"verdict": NOT_ENOUGH, "reason": "a side has no judged requests at this level"}
    vb, vc = max(1.0, base["vif"] or 1.0), max(1.0, cand["vif"] or 1.0)
    z = NormalDist().inv_cdf(1.0 - alpha)
    d, lo, hi = newcombe(cand["good"] / vc, cand["n"] / vc, base["good"] / vb, base["n"] / vb, z)
    out = {"difference": d, "interval": [lo, hi], "confidence_one_sided": 1.0 - alpha, "margin": margin,
           "vif_base": vb, "vif_cand": vc, "n_eff_base": base["n"] / vb, "n_eff_cand": cand["n"] / vc}
    if lo > -margin:
        out.update(verdict=NOT_WORSE, reason=f"the drop is below {100 * margin:.1f} points (lower bound "
                                              f"{100 * lo:+.1f} points)")
    elif hi < -margin:
        out.update(verdict=WORSE, reason=f"the drop exceeds {100 * margin:.1f} points (upper bound "
                                          f"{100 * hi:+.1f} points)")
    else:
        out.update(verdict=NOT_ENOUGH, reason=f"interval {100 * lo:+.1f} to {100 * hi:+.1f} points straddles "
                                              f"-{100 * margin:.1f}: more requests needed")
    if vb > 1.0 or vc > 1.0:
        out["reason"] += (f" (effective n after the dependence correction: {base['n'] / vb:.0f} base, "
                          f"{cand['n'] / vc:.0f} candidate)")
    return out


def _plus(side: dict, good: int, total: int) -> dict:
    return {**side, "good": side["good"] + good, "n": side["n"] + total}


def hold_against_unreadable(j: dict[str, Any], base: dict, cand: dict, lost_base: int, lost_cand: int,
                            margin: float, alpha: float) -> dict[str, Any]:
    """A WORSE must hold even if the candidate's unreadable request lines (refused by the reader) had all been good
    and the base's all failed; a NOT WORSE the other way round. Otherwise NOT ENOUGH EVIDENCE, naming the counts."""
    v = j["verdict"]
    if not (lost_base or lost_cand) or v not in (WORSE, NOT_WORSE):
        return j
    if v == WORSE:
        alt = judge(_plus(base, 0, lost_base), _plus(cand, lost_cand, lost_cand), margin, alpha)
    else:
        alt = judge(_plus(base, lost_base, lost_base), _plus(cand, 0, lost_cand), margin, alpha)
    if alt["verdict"] == v:
        return {**j, "reason": j["reason"] + f"; holds whatever the outcome of the unreadable request lines "
                                              f"(base {lost_base}, candidate {lost_cand})"}
    return {**j, "verdict": NOT_ENOUGH, "reason": (
        f"{lost_base + lost_cand} request lines unreadable (base {lost_base}, candidate {lost_cand}): counted "
        f"against this verdict they would change {v}; judged on the readable lines: {j['reason']}")}


def hold_client_limited(j: dict[str, Any], base: dict, cand: dict, margin: float, alpha: float) -> dict[str, Any]:
    """Requests that failed in the client (issue 36: unknown outcomes, never the server's) on either side: NOT WORSE
    is not possible (a client-limited run cannot PASS); WORSE stands only if it holds with the candidate's counted
    good and the base's counted failed; otherwise NOT ENOUGH EVIDENCE, naming the counts."""
    cb, cc = int(base.get("client_limited") or 0), int(cand.get("client_limited") or 0)
    v = j["verdict"]
    if not (cb or cc) or v not in (WORSE, NOT_WORSE):
        return j
    what = (f"client_limited: {cb + cc} requests failed in the client (base {cb}, candidate {cc}; the client's own "
            "resources ran out, their outcome at the server is unknown)")
    if v == WORSE and judge(_plus(base, 0, cb), _plus(cand, cc, cc), margin, alpha)["verdict"] == WORSE:
        return {**j, "reason": j["reason"] + f"; holds whatever their outcome ({what})"}
    return {**j, "verdict": NOT_ENOUGH, "reason": f"{what}: a {v} cannot rest on them; judged without them: "
                                                  f"{j['reason']}"}


def same_level(a: float | None, b: float | None, tol: float = LEVEL_TOLERANCE) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * max(abs(a), abs(b))


def _mode(header: dict) -> str | None:
    load = header.get("load")
    m = load.get("mode") if isinstance(load, dict) else None
    return m if m in ("closed", "open") else None


def compare(base: dict, cand: dict, *, slo_ttft_ms: float, margin: float = defaults.COMPARE_MARGIN,
            alpha: float = defaults.ALPHA, slos: Slos | None = None, allow_different_workload: bool = False,
            allow_different: frozenset[str] | set[str] = frozenset(), same_file: str | None = None) -> CompareDoc:
    """``base`` / ``cand``: {"label", "header", "requests": [RequestRecord], "issues": int}. Returns the
    comparison as a JSON-able dict with ``verdict`` and ``exit_code``.

    Refused before any statistic (``tui.core.compare_guard``): the same run on both sides (``same_file``: the
    caller found the two paths to be one file; the same run id; the same request data), never allowed; a different
    served model or engine, and a workload that differs (``tui.core.workload``: the headers', else the lengths the
    requests received) or is unknown, unless ``allow_different`` names the field (``allow_different_workload``:
    the old name of ``"workload"``). A refused comparison is NOT ENOUGH EVIDENCE at every matched level with the
    reason (the figures still shown, what it would have said kept in ``verdict_if_comparable``); an allowed
    difference is named beside the verdict."""
    allow = frozenset(allow_different) | (frozenset({"workload"}) if allow_different_workload else frozenset())
    slo = slo_ttft_ms / 1000.0
    sides = []
    for run in (base, cand):
        header = run.get("header") or {}
        axis = source_of(header).get("time_axis", "epoch")
        lim = verdict_limit(header)
        dups = evidence.Duplicates(times=axis != "none")  # the one duplicate rule (compare_run has applied it)
        lv = level_stats(run["requests"], slo, slos, dups)
        mode = _mode(header)
        sides.append({"label": run["label"], "header": header, "has_axis": axis != "none", "limit": lim,
                      "mode": mode, "duplicates": run.get("duplicates", 0) + dups.copies,
                      "duplicates_problem": run.get("duplicates_problem") or dups.problem(),
                      "levels": {k: v.summary(axis != "none") for k, v in sorted(
                          lv.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))}})
    b, c = sides
    rows, unmatched_c = [], list(c["levels"].keys())
    unmatched_b = []
    modes_conflict = b["mode"] and c["mode"] and b["mode"] != c["mode"]
    for lb, sb in b["levels"].items():
        match = None if modes_conflict else next((lc for lc in unmatched_c if same_level(lb, lc)), None)
        if match is None:
            unmatched_b.append(lb)
            continue
        unmatched_c.remove(match)
        sc = c["levels"][match]
        reasons = [s["limit"][1] for s in (b, c) if s["limit"]]
        for side, run, lvl in (("base", base, lb), ("candidate", cand, match)):
            for p in (run.get("problems") or {}).get(lvl, ()):  # the file held against itself (issue 17)
                reasons.append(f"{side}: {p}")
        for side, s in (("base", b), ("candidate", c)):
            if s["duplicates_problem"]:  # copies left out (by compare_run, or here): counted once, not evidence
                reasons.append(f"{side}: {s['duplicates_problem']}")
        for side, st in (("base", sb), ("candidate", sc)):
            if st.get("not_judgeable"):  # unknown requests left out would bias the comparison either way
                reasons.append(f"{side}: {st['not_judgeable']} requests not judgeable on an SLO in force "
                               "(the records lack what it needs)")
        if reasons:
            j = {"verdict": NOT_ENOUGH, "reason": "; ".join(reasons)}
        else:
            j = judge(sb, sc, margin, alpha)
            j = hold_against_unreadable(j, sb, sc, (base.get("unreadable") or {}).get(lb, 0),
                                        (cand.get("unreadable") or {}).get(match, 0), margin, alpha)
            j = hold_client_limited(j, sb, sc, margin, alpha)
        rows.append({"level_base": lb, "level_cand": match, "base": sb, "cand": sc, **j,
                     "latency": latency_change(sb["latency"], sc["latency"])})
        pcb, pcc = (base.get("prefix_cache") or {}).get(lb), (cand.get("prefix_cache") or {}).get(match)
        if pcb is not None or pcc is not None:  # issue 23: the prefix cache side by side (descriptive)
            rows[-1]["prefix_cache"] = prefix_cache.compare_block(pcb, pcc)
    warnings = []
    tb, tc = tool_of(b["header"]), tool_of(c["header"])
    db, dc = ttft_definition(b["header"]), ttft_definition(c["header"])
    if tb != tc or db != dc:
        warnings.append(f"the runs come from different tools ({tb} vs {tc}) whose TTFT definitions differ: "
                        f"base: {db}; candidate: {dc}. Differences in TTFT (and so in the good fraction) may "
                        "come from the measurement, not the server")
    if modes_conflict:
        warnings.append(f"load modes differ (base {b['mode']} loop, candidate {c['mode']} loop): levels not matched")
    wl = workload.compare_block(b["header"], c["header"], allow_different="workload" in allow,
                                received_base=workload.received(base["requests"]),
                                received_cand=workload.received(cand["requests"]))
    same = guard.same_run(base, cand, same_file)
    ident = guard.identity_block(b["header"], c["header"], allow)
    refusals = ([same] if same else []) + list(ident["reasons"])
    wl_refusal = _hold_workload(wl, rows, warnings)
    if wl_refusal:
        refusals.append(wl_refusal)
    _refuse(rows, refusals)
    allowed = [f for f in ident["allowed"]] + (["workload"] if wl["allowed"] else [])
    not_comparable = "; ".join(refusals) if refusals else None
    verdicts = [r["verdict"] for r in rows]
    if any(v == WORSE for v in verdicts):
        overall = WORSE
    elif verdicts and all(v == NOT_WORSE for v in verdicts):
        overall = NOT_WORSE
    else:
        overall = NOT_ENOUGH
    syn = [s["label"] for s in (b, c) if (s["header"] or {}).get("synthetic")]
    code, synthetic_why = synthetic_exit(EXIT[overall], bool(syn))
    if syn:
        warnings.append(f"SYNTHETIC: {', '.join(syn)} labelled synthetic: the comparison checks the arithmetic, "
                           "nothing about a server" + (f"; {synthetic_why}" if synthetic_why else ""))
    return {
        "schema": "servewatch.compare/1",
        "base": {"file": b["label"], "tool": tb, "ttft_definition": db, "time_axis": b["has_axis"],
                 "source": source_of(b["header"]) or None, "issues": base.get("issues", 0),
                 "duplicates": b["duplicates"]},
        "candidate": {"file": c["label"], "tool": tc, "ttft_definition": dc, "time_axis": c["has_axis"],
                      "source": source_of(c["header"]) or None, "issues": cand.get("issues", 0),
                      "duplicates": c["duplicates"]},
        "slo_ttft_ms": slo_ttft_ms, "margin": margin, "alpha": alpha,
        "slos": (slos or Slos(ttft_ms=slo_ttft_ms)).describe(),
        "levels": cast(list[CompareLevel], rows),  # built as plain dicts above (judge's keys merged in)
        "unmatched": {"base": unmatched_b, "candidate": unmatched_c},
        "warnings": warnings,
        "verdict": overall,
        "workload": wl,
        "identity": {k: v for k, v in ident.items() if k != "reasons"},
        "same_run": same,
        "refusals": refusals,
        "allowed_different": sorted(allow),
        "allowed": allowed,
        "verdict_note": _allowed_note(allowed),
        "reason": (not_comparable if not_comparable else "no level is present in both runs" if not rows else
                   f"{verdicts.count(WORSE)} worse, {verdicts.count(NOT_WORSE)} not worse, "
                   f"{verdicts.count(NOT_ENOUGH)} undecided of {len(rows)} matched levels"),
        "synthetic": bool(syn),
        "exit_code": code,
    }


def _hold_workload(wl: dict, rows: list[dict], warnings: list[str]) -> str | None:
    """Different or unknown workloads: the reason they are not comparable (None: comparable), or with
    ``--allow-different workload`` a warning."""
    diff = "; ".join(wl["differences"])
    if wl.get("unknown"):
        sides = " and ".join(wl["unknown"])
        what = (f"the workload is unknown ({sides}: the header states none and the requests carry no lengths)")
        if wl["comparable"]:
            warnings.append(f"{what} (compared anyway: --allow-different workload)")
            return None
        return f"not comparable: {what}; --allow-different workload compares them anyway"
    if wl.get("basis") == "received":
        warnings.append("a run's header does not state its workload: the lengths the requests received are compared "
                        f"instead; not checked: {', '.join(wl['unchecked'])}")
    elif wl["unchecked"]:
        warnings.append(f"workload not checked for: {', '.join(wl['unchecked'])} (a run's header does not state it)")
    if not wl["differences"]:
        return None
    if wl["comparable"]:
        warnings.append(f"the workloads differ (compared anyway: --allow-different workload): {diff}")
        return None
    return f"not comparable: the workloads differ ({diff}); --allow-different workload compares them anyway"


def _refuse(rows: list[dict], refusals: list[str]) -> None:
    """Each matched level NOT ENOUGH EVIDENCE with the refusals as its reason (what it would have said kept in
    ``verdict_if_comparable``)."""
    if not refusals:
        return
    why = "; ".join(refusals)
    for r in rows:
        r["verdict_if_comparable"] = r.get("verdict_if_comparable", r["verdict"])
        r["reason_if_comparable"] = r.get("reason_if_comparable", r["reason"])
        r["verdict"], r["reason"] = NOT_ENOUGH, why


def _allowed_note(allowed: list[str]) -> str | None:
    """"different served model, engine allowed (--allow-different model,engine)" beside the verdict; None: none."""
    if not allowed:
        return None
    names = ", ".join("served model" if f == "model" else f for f in allowed)
    return f"different {names} allowed (--allow-different {','.join(allowed)})"


def _pct(v: float | None, digits: int = 1) -> str:
    return fmt_pct(v, digits)


def _ms(p: Mapping[str, Any]) -> str:
    v = p.get("value")
    if v is None:
        return "N/A"
    s = "inf" if math.isinf(v) else f"{v:.0f}"
    return s if p.get("supported") else f"{s} (n<{p.get('n_needed')})"


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "N/A" if v is None else fmt.format(v)


def _settings_markdown(cmp: CompareDoc) -> list[str]:
    """What each run was judged at (issue 35: ``cmp["verdict_settings"]``, set by the command line)."""
    vs = cmp.get("verdict_settings") or {}
    out = []
    for side in ("base", "candidate"):
        for line in (vs.get(side) or {}).get("lines") or ():
            out.append(f"- {side} {str(line).strip()}")
    if cmp.get("settings_exit"):
        out.append(f"- exit 3: {cmp['settings_exit']}")
    return out


def to_markdown(cmp: CompareDoc) -> str:
    b, c = cmp["base"], cmp["candidate"]
    title = (cmp["verdict"] + (f" ({cmp['verdict_note']})" if cmp.get("verdict_note") else "")
             + (" (SYNTHETIC input: never exits 0)" if cmp.get("synthetic") else ""))
    ident = cmp.get("identity") or {}
    lines = [f"# servewatch compare: {title}", "",
             f"- base: {md_code(b['file'])} ({md(b['tool'])}{'' if b['time_axis'] else ', no time axis'})",
             f"- candidate: {md_code(c['file'])} ({md(c['tool'])}{'' if c['time_axis'] else ', no time axis'})",
             *_identity_markdown(ident),
             *([f"- **the same run on both sides**: {md(cmp['same_run'])}"] if cmp.get("same_run") else []),
             f"- good = completed AND {_good_text(cmp)}; margin {100 * cmp['margin']:.1f} points; "
             f"one-sided confidence {100 * (1 - cmp['alpha']):.0f}%",
             *_workload_markdown(cmp),
             *_settings_markdown(cmp),
             f"- {md(cmp['reason'])}", ""]
    for w in cmp["warnings"]:
        lines.append(f"> WARNING: {md(w)}")
        lines.append("")
    lines.append(f"| level | run | n | good fraction (Wilson 95%) | TTFT {' / '.join(stats.labels())} ms | TPOT P50 ms | goodput/s "
                 "| VIF | verdict |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in cmp["levels"]:
        for name, s in (("base", r["base"]), ("cand", r["cand"])):
            lo, hi = s["wilson_95"]
            t = s["ttft_ms"]
            lvl = r["level_base"] if name == "base" else r["level_cand"]
            lines.append(
                f"| {'-' if lvl is None else f'{lvl:g}'} | {name} | {s['n']} | {_pct(s['good_fraction'])} "
                f"({_pct(lo)}-{_pct(hi)}) | {' / '.join(_ms(t.get(q) or {}) for q in stats.labels())} "
                f"| {_num(s['tpot_ms_p50'], '{:.1f}')} | {_num(s['goodput_per_s'])} | {_num(s['vif'])} "
                f"| {r['verdict'] if name == 'cand' else ''} |")
    lines.append("")  # the table whole, then each level's verdict (a line between rows ends a markdown table)
    for r in cmp["levels"]:
        diff = r.get("difference")
        tail = "" if diff is None else (f"difference {100 * diff:+.1f} points, interval "
                                        f"{100 * r['interval'][0]:+.1f} to {100 * r['interval'][1]:+.1f}; ")
        lines.append(f"- level {'-' if r['level_base'] is None else format(r['level_base'], 'g')}: "
                     f"**{r['verdict']}**: {tail}{md(r['reason'])}")
        for name, s in (("base", r["base"]), ("candidate", r["cand"])):
            if s["excluded_cancelled_open"]:
                lines.append(f"  - {name}: {s['excluded_cancelled_open']} cancelled while still open, not judged")
    if cmp["levels"]:
        lines.append("")
    lines += _latency_markdown(cmp["levels"])
    lines += prefix_cache.compare_markdown(cmp["levels"])  # issue 23
    um = cmp["unmatched"]
    if um["base"] or um["candidate"]:
        fmt = lambda xs: ", ".join("-" if x is None else f"{x:g}" for x in xs) or "none"  # noqa: E731
        lines.append(f"Unmatched levels (listed, not judged): base {fmt(um['base'])}; candidate {fmt(um['candidate'])}")
        lines.append("")
    lines.append(f"Exit code {cmp['exit_code']} (0 NOT WORSE, 1 WORSE, 3 NOT ENOUGH EVIDENCE or SYNTHETIC input, "
                 "2 bad input)")
    return "\n".join(lines) + "\n"


def _identity_markdown(ident: dict) -> list[str]:
    """Both sides' model (claimed and served), engine, build, GPU and host (``tui.core.identity``), and what
    differs."""
    if not ident:
        return []
    out = [f"- base measured: {md((ident.get('base') or {}).get('line'))}",
           f"- candidate measured: {md((ident.get('candidate') or {}).get('line'))}"]
    if ident.get("differences"):
        out.append(f"- differs: {', '.join(ident['differences'])}"
                   + (f" (refused: {', '.join(ident['refused'])})" if ident.get("refused") else "")
                   + (f" (allowed: {', '.join(ident['allowed'])})" if ident.get("allowed") else ""))
    return out


def _workload_markdown(cmp: CompareDoc) -> list[str]:
    wl = cmp.get("workload")
    if not wl:
        return []
    return [f"- base workload: {md(wl['base'])}", f"- candidate workload: {md(wl['candidate'])}"]


def _good_text(cmp: CompareDoc) -> str:
    """What a good request met: the TTFT SLO alone as before, else every SLO in force (``Slos.describe``)."""
    text = cmp.get("slos")
    if not text or text == Slos(ttft_ms=cmp["slo_ttft_ms"]).describe():
        return f"client TTFT <= {cmp['slo_ttft_ms']:g} ms"
    return text




def _latency_markdown(rows: list[CompareLevel]) -> list[str]:
    """Each latency metric base vs candidate per matched level (P50 / P95 / P99 ms and n, and the change)."""
    if not rows:
        return []
    qs = " / ".join(stats.labels())
    out = [f"Latency per matched level, ms: {qs} (n) over completed requests; * too few requests to "
           "support that percentile (raw value shown); N/A: the records do not carry it. Descriptive: the "
           "verdict is on the good fraction.", "",
           f"| level | metric | base | candidate | change {qs} |", "|---|---|---|---|---|"]
    for r in rows:
        lvl = "-" if r["level_base"] is None else format(r["level_base"], "g")
        for key in SLO_JSON_KEYS:
            ch = (r.get("latency") or {}).get(key) or {}
            change = " / ".join("N/A" if ch.get(q) is None else f"{ch[q]:+.1f}" for q in stats.keys())
            out.append(f"| {lvl} | {LATENCY_NAMES[key]} | {latency_cell(r['base']['latency'].get(key))} "
                       f"| {latency_cell(r['cand']['latency'].get(key))} | {change} |")
    out.append("")
    return out


def baseline_levels(requests: Iterable[RequestRecord], slo_ttft_ms: float, header: dict | None = None,
                    label: str = "", slos: Slos | None = None) -> dict:
    """Per-level good fraction of a base run, for the console's sweep pane (`replay CAND --baseline BASE`):
    {"label", "limit", "levels": {level: {"good", "n", "fraction", "lo", "hi"}}}."""
    axis = source_of(header or {}).get("time_axis", "epoch")
    lv = level_stats(requests, slo_ttft_ms / 1000.0, slos, evidence.Duplicates(times=axis != "none"))
    out = {}
    for level, st in lv.items():
        lo, hi = stats.wilson(st.good, st.n)
        out[level] = {"good": st.good, "n": st.n, "fraction": st.good / st.n if st.n else None, "lo": lo, "hi": hi}
    lim = verdict_limit(header)
    return {"label": label, "limit": lim[1] if lim else None, "levels": out}


def baseline_for(baseline: dict | None, level: float | None) -> dict | None:
    """The base run's entry for ``level`` (levels match within 5%), or None."""
    if not baseline or level is None:
        return None
    for lv, entry in baseline.get("levels", {}).items():
        if same_level(lv, level):
            return entry
    return None
