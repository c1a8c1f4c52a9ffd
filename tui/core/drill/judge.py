"""A drill judged (issue 39): its phases counted, the recovery rule applied (``tui.core.drill.recovery``), the impact
and its share of an error budget, the server's side, the acceptance report's burn-rate rules replayed, and the
verdict RECOVERED / NOT_RECOVERED / INSUFFICIENT with its reason (docs/recovery.md).

``judge(collector, monitor)``: the collector holds the drill's requests and phases; the Monitor that read the same
records gives each step's usual verdict and every evidence problem (``Monitor.pass_blocks``: the file held against
itself, its digest chain, delivered load, completeness). An evidence problem of any step of the drill, or of the
drill's own structure, forbids RECOVERED (it becomes INSUFFICIENT with the reason); NOT_RECOVERED stands, as a FAIL
stands.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import tui.core.defaults as D
from tui.core.acceptance.rollback import _WINDOW_HOURS, DEFAULT_BURN_RULES
from tui.core.drill.collect import (
    CODE_EXCLUDED,
    CODE_FAILED,
    CODE_GOOD,
    CODE_SLOW,
    CODE_UNJUDGED,
    DrillCollector,
)
from tui.core.drill.recovery import Finding, SentOrder, after_verdict, find_recovery, grid, queue_back, verdict_until
from tui.core.drill.settings import MONTH_S, DrillPlan, plan_from_header
from tui.core.evidence import level_name
from tui.core.monitor import Monitor
from tui.core.phases import (
    BASELINE,
    DISTURBANCE,
    FAULT_MANUAL,
    INSUFFICIENT,
    NOT_RECOVERED,
    RECOVERED,
    RECOVERY,
    SPIKE,
    fmt_duration,
    fmt_interval,
)
from tui.core.snapshot import Verdict
from tui.core.states import FAIL, PASS, UNDECIDED
from tui.core.stats import nearest_rank

MAX_SERIES = 1500  # chart points at most (a longer drill is drawn with a wider stride)


@dataclass
class PhaseCounts:
    """Requests of one phase (or of the whole drill): each request sent is in exactly one phase."""

    name: str
    start: float | None = None
    end: float | None = None
    step: str | None = None  # "rate 10 req/s round 1"
    sent: int = 0
    good: int = 0
    slow: int = 0
    failed: int = 0
    failed_by_class: dict[str, int] = field(default_factory=dict)
    cancelled: int = 0  # every request cancelled (those cancelled while still open are also ``excluded``)
    excluded: int = 0  # cancelled while still open: not judged
    unjudged: int = 0  # completed, an SLO in force not judgeable on the record: never good

    def add(self, code: int, err: str | None, cancelled: bool) -> None:
        self.sent += 1
        if code == CODE_GOOD:
            self.good += 1
        elif code == CODE_SLOW:
            self.slow += 1
        elif code == CODE_FAILED:
            self.failed += 1
            k = err or "other"
            self.failed_by_class[k] = self.failed_by_class.get(k, 0) + 1
        elif code == CODE_EXCLUDED:
            self.excluded += 1
        elif code == CODE_UNJUDGED:
            self.unjudged += 1
        if cancelled:
            self.cancelled += 1

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "end": self.end, "step": self.step, "sent": self.sent,
                "good": self.good, "slow": self.slow,
                "failed": {"total": self.failed, "by_class": dict(sorted(self.failed_by_class.items()))},
                "cancelled": self.cancelled, "excluded": self.excluded, "unjudged": self.unjudged}


@dataclass
class DrillResult:
    """A drill judged; ``tui.core.drill.document`` renders it."""

    verdict: str
    reason: str
    plan: DrillPlan | None
    header: dict
    target: float
    phases: list[PhaseCounts] = field(default_factory=list)
    overall: PhaseCounts = field(default_factory=lambda: PhaseCounts("overall"))
    disturbance: dict = field(default_factory=dict)
    ref: float | None = None
    finding: Finding | None = None
    ttr: tuple[float, float] | None = None
    impact: dict = field(default_factory=dict)
    baseline: Verdict | None = None
    recovery: Verdict | None = None
    after_rto: Verdict | None = None
    server: dict = field(default_factory=dict)
    rollback: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: list[dict] = field(default_factory=list)
    synthetic: bool = False
    start: float | None = None  # the baseline's start (the chart's 0)


def _insufficient(res: DrillResult, why: str) -> DrillResult:
    res.verdict, res.reason = INSUFFICIENT, why
    return res


def judge(col: DrillCollector, mon: Monitor) -> DrillResult:
    """The drill of ``col`` judged with the verdicts and evidence problems of ``mon`` (see the module doc)."""
    cfg = mon.cfg
    res = DrillResult(INSUFFICIENT, "", None, col.header, cfg.target, synthetic=bool(col.header.get("synthetic")))
    try:
        plan = plan_from_header(col.header)
    except ValueError as exc:
        res.problems.append(str(exc))
        return _insufficient(res, f"not a drill that can be judged: {exc}")
    res.plan = plan
    mode = plan.mode
    steps = plan.planned_steps()
    keys = {s.phase: s.key for s in steps}
    _count_phases(res, col, plan, mode)
    res.problems += _structure_problems(col, plan)
    # every evidence problem of the drill's steps (the run-wide ones first), once each
    for s in steps:
        for p in mon.pass_blocks(s.key):
            if p not in res.problems:
                res.problems.append(p)
    base = col.phases.get(BASELINE)
    res.start = base.start if base is not None else None
    res.baseline = mon.verdict_for(mon.levels.get(keys[BASELINE]))
    rkey = keys.get(RECOVERY)
    res.recovery = mon.verdict_for(mon.levels.get(rkey)) if rkey in mon.levels else None
    dist = col.phases.get(DISTURBANCE)
    res.disturbance = _disturbance_block(plan, dist)
    if base is None or base.start is None:
        return _insufficient(res, "no baseline phase in the file: no steady state to recover to")
    if dist is not None and dist.start is not None:  # the baseline as it stood when the disturbance started
        res.baseline = _baseline_at(col, mon, keys[BASELINE], dist.start)
    if res.baseline.state != PASS:
        return _insufficient(res, f"no steady state to recover to: the baseline is {res.baseline.state} "
                                  f"({res.baseline.reason})")
    if dist is None or dist.start is None:
        stop = (base.end_info.get("stop") or {}) if base.end is not None else {}
        why = stop.get("reason") if isinstance(stop, dict) else None
        return _insufficient(res, "no disturbance: the drill ended after its baseline"
                             + (f" ({why})" if isinstance(why, str) else " (cut short)"))
    rec = col.phases.get(RECOVERY)
    ref = dist.end if plan.kind == SPIKE else dist.start
    if ref is None:
        return _insufficient(res, "the spike has no end record: the drill was cut short during its disturbance")
    res.ref = ref
    sent = SentOrder(col.t_sent, col.t_end, col.outcome, col.ttft_ms)
    end = rec.end if rec is not None and rec.end is not None else None
    if end is None:
        res.problems.append("the recovery phase has no end record: the drill was cut short (judged on what it holds)")
        end = max((t for t in sent.ts if t >= ref), default=ref)
    f = find_recovery(sent, ref, end, plan.window_s, plan.step_s, plan.hold_s, plan.rto_s, cfg)
    res.finding = f
    ttr = f.ttr(plan.step_s, sent)
    res.ttr = None if ttr is None else (round(ttr[0], 3), round(ttr[1], 3))  # as the document gives it, everywhere
    res.after_rto = after_verdict(sent, ref + plan.rto_s, end, cfg) if f.point is None else None
    res.impact = _impact(col, sent, dist.start, f.point if f.point is not None else end, plan, base, cfg.target,
                         res.phases[0].sent if res.phases else 0)
    res.server = _server(col, plan, base, dist, rec, ref, end)
    res.rollback = _rollback(sent, base.start, end, dist.start, cfg.target, plan.step_s)
    res.series = _series(sent, ref, base.start, end, plan.window_s, plan.step_s)
    _decide(res, f, plan)
    if res.verdict == RECOVERED and res.problems:
        res.verdict = INSUFFICIENT
        res.reason = (f"cannot be RECOVERED: {res.problems[0]}"
                      + (f" (and {len(res.problems) - 1} more evidence problems)" if len(res.problems) > 1 else "")
                      + f"; the evidence otherwise says: {res.reason}")
    return res


def _baseline_at(col: DrillCollector, mon: Monitor, key: tuple[float, int], at: float) -> Verdict:
    """The baseline's usual verdict on its requests that ended by ``at`` (the disturbance's start: those still in
    flight then were hit by it, and count in the impact), with every evidence problem of its step still forbidding
    PASS."""
    idx = [i for i in range(col.n) if col.keys[col.key[i]] == key]
    v = verdict_until([col.t_sent[i] for i in idx], [col.t_end[i] for i in idx], [col.outcome[i] for i in idx], at,
                      mon.cfg)
    blocks = mon.pass_blocks(key)
    lost = mon.unreadable_requests(key)
    if lost:
        blocks = [*blocks, f"{lost} request lines of the baseline could not be read"]
    if blocks and v.state == PASS:
        v = dataclasses.replace(v, state=UNDECIDED, reason="cannot PASS: " + "; ".join(blocks))
    return v


def _decide(res: DrillResult, f: Finding, plan: DrillPlan) -> None:
    rto = plan.rto_s
    what = "the spike ended" if plan.kind == SPIKE else "the disturbance started"
    if not f.windows:
        _insufficient(res, f"too little recovery time to decide: no complete {fmt_duration(plan.window_s)} window "
                           "after the disturbance")
        return
    if f.point is not None and res.ttr is not None:
        lo, hi = res.ttr
        span = fmt_interval(lo, hi)
        held = f"the {fmt_duration(plan.hold_s)} after it PASS" if f.hold is None else (
            f"the {fmt_duration(plan.hold_s)} after it PASS ({f.hold.good}/{f.hold.n} good)")
        rule = (f"recovered {span} after {what}: from there every {fmt_duration(plan.window_s)} window held at least "
                f"{res.target:.0%} good and {held}")
        if hi <= rto + 1e-9:
            res.verdict, res.reason = RECOVERED, f"{rule}; within the RTO of {fmt_duration(rto)}"
        elif lo > rto + 1e-9:
            res.verdict, res.reason = NOT_RECOVERED, f"{rule}; later than the RTO of {fmt_duration(rto)}"
        else:
            _insufficient(res, f"{rule}; the interval straddles the RTO of {fmt_duration(rto)}: a smaller --step-s "
                               "decides")
        return
    av = res.after_rto
    if av is not None and av.state == FAIL:
        res.verdict = NOT_RECOVERED
        res.reason = (f"not recovered within the RTO of {fmt_duration(rto)}: the requests sent after it FAIL "
                      f"({av.reason})")
        return
    lb = f.last_below
    if lb is not None and lb.start - res.ref >= rto - 1e-9 and not f.undecided_before_rto:  # type: ignore[operator]
        frac = "no request" if lb.n == 0 else f"{lb.good}/{lb.n} good"
        res.verdict = NOT_RECOVERED
        res.reason = (f"no recovery point within the RTO of {fmt_duration(rto)}: the window from "
                      f"{fmt_duration(lb.start - res.ref)} after {what} holds {frac}, below the "  # type: ignore[operator]
                      f"{res.target:.0%} target (every earlier start is ruled out)")
        return
    if f.hold is not None and f.hold.state == FAIL and not f.undecided_before_rto:
        res.verdict = NOT_RECOVERED
        res.reason = f"no recovery point within the RTO: the hold from the best candidate FAILs ({f.hold.reason})"
        return
    tail = f" (the hold from the best candidate: {f.hold.state}, {f.hold.reason})" if f.hold is not None else ""
    _insufficient(res, "too little recovery time to decide: no recovery point confirmed and the evidence does not "
                       f"rule one out within the RTO of {fmt_duration(rto)}; a longer --recovery-minutes decides"
                  + tail)


def _count_phases(res: DrillResult, col: DrillCollector, plan: DrillPlan, mode: str) -> None:
    by_key: dict[tuple, PhaseCounts] = {}
    for s in plan.planned_steps():
        seen = col.phases.get(s.phase)
        pc = PhaseCounts(s.phase, seen.start if seen else None, seen.end if seen else None,
                         level_name(s.level, s.round, mode))
        by_key[s.key] = pc
    phases = {pc.name: pc for pc in by_key.values()}
    if plan.kind == FAULT_MANUAL:  # an instant: no step, no requests of its own
        seen = col.phases.get(DISTURBANCE)
        phases[DISTURBANCE] = PhaseCounts(DISTURBANCE, seen.start if seen else None, seen.end if seen else None)
    outside = PhaseCounts("outside the drill's steps")
    names = col.error_names
    for i in range(col.n):
        lv, rnd = col.keys[col.key[i]]
        pc = by_key.get((float(lv) if lv is not None else None, rnd), outside)
        e = col.err[i]
        err = names[e] if e >= 0 else None
        c = col.outcome[i]
        canc = bool(col.cancelled[i])
        pc.add(c, err, canc)
        res.overall.add(c, err, canc)
    res.phases = [phases[n] for n in (BASELINE, DISTURBANCE, RECOVERY) if n in phases]
    if outside.sent:
        res.phases.append(outside)
        res.problems.append(f"{outside.sent} request records belong to no step the drill plans: records added or "
                            "relabelled")
    unjudged = res.overall.unjudged
    if unjudged:
        res.problems.append(f"{unjudged} requests completed with an SLO in force that their records cannot be judged "
                            "on (counted not good here)")


def _structure_problems(col: DrillCollector, plan: DrillPlan) -> list[str]:
    out: list[str] = []
    want = {s.phase: s.key for s in plan.planned_steps()}
    for name, seen in col.phases.items():
        out += seen.problems
        if seen.start is None:
            out.append(f"the {name} phase has an end record and no start record")
        elif seen.key != want.get(name):
            out.append(f"the {name} phase's record names the step {seen.key}, the drill plans {want.get(name)}: "
                       "phases relabelled")
        if seen.start is not None and seen.end is not None and seen.end < seen.start:
            out.append(f"the {name} phase ends before it starts")
    base = col.phases.get(BASELINE)
    if base is None or base.end is None or not base.end_info.get("stop"):  # not a recorded stop: all phases, whole
        for name in (BASELINE, DISTURBANCE, RECOVERY):
            ph = col.phases.get(name)
            if ph is None or ph.start is None:
                out.append(f"incomplete: no {name} phase start record (no recorded stop explains it: the drill was "
                           "cut short, or records removed)")
            elif ph.end is None:
                out.append(f"incomplete: no {name} phase end record (no recorded stop explains it: the drill was cut "
                           "short, or records removed)")
    order = [n for n, ev in col.phase_order if ev == "start"]
    expect = [n for n in (BASELINE, DISTURBANCE, RECOVERY) if n in order]
    if order != expect:
        out.append(f"the phases start in the order {', '.join(order)}: phases reordered")
    b, d, r = (col.phases.get(n) for n in (BASELINE, DISTURBANCE, RECOVERY))
    if d is not None and d.start is not None and b is not None and b.start is not None and d.start < b.start:
        out.append("the disturbance starts before the baseline")
    if r is not None and r.start is not None and d is not None and d.end is not None and r.start < d.end - 1e-6:
        out.append("the recovery phase starts before the disturbance ends")
    if col.overflow:
        out.append(f"{col.overflow} requests beyond the {col.n:,} a drill keeps: not judged")
    return out


def _disturbance_block(plan: DrillPlan, dist: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": plan.kind, "start": None if dist is None else dist.start,
                         "end": None if dist is None else dist.end, "description": plan.describe_disturbance()}
    if plan.kind == SPIKE:
        d["spike"] = {"factor": plan.spike_factor, "duration_s": plan.spike_s, "level": plan.spike_level}
    if dist is not None:
        for k in ("command", "exit_status", "output", "output_lines_dropped", "note", "marked_by"):
            for info in (dist.start_info, dist.end_info):
                if k in info:
                    d[k] = info[k]
    return d


def _impact(col: DrillCollector, sent: SentOrder, start: float | None, until: float, plan: DrillPlan, base: Any,
            target: float, n_base: int) -> dict[str, Any]:
    """The failed and slow requests sent from the disturbance's start to the recovery point (else the drill's end),
    and the share of a monthly error budget at the target they burn."""
    pc = PhaseCounts("impact")
    i, j = sent.span(start if start is not None else until, until)
    names = col.error_names
    hit = 0  # sent before the disturbance, still in flight when it started, and not good: its impact too
    if start is not None:
        for k in range(0, i):
            if sent.te[k] > start and sent.code[k] in (CODE_SLOW, CODE_FAILED, CODE_UNJUDGED):
                o = sent.order[k]
                e = col.err[o]
                pc.add(sent.code[k], names[e] if e >= 0 else None, bool(col.cancelled[o]))
                hit += 1
    for k in range(i, j):
        o = sent.order[k]
        e = col.err[o]
        pc.add(sent.code[k], names[e] if e >= 0 else None, bool(col.cancelled[o]))
    base_s = (base.end - base.start) if base.end is not None and base.start is not None else None
    rpm, src = plan.requests_per_month, "--requests-per-month"
    if rpm is None and base_s and base_s > 0 and n_base:
        rpm, src = n_base / base_s * MONTH_S, f"the baseline's rate ({n_base / base_s:.3g} req/s) for 30 days"
    budget = (1.0 - target) * rpm if rpm else None
    bad = pc.failed + pc.slow
    return {"from": start, "to": until, "requests": pc.sent, "in_flight_at_start": hit, "failed": pc.failed,
            "slow": pc.slow,
            "failed_by_class": dict(sorted(pc.failed_by_class.items())), "cancelled": pc.cancelled,
            "excluded": pc.excluded, "requests_per_month": rpm, "requests_per_month_from": src if rpm else None,
            "error_budget": budget, "error_budget_share": (bad / budget) if budget else None}


def _server(col: DrillCollector, plan: DrillPlan, base: Any, dist: Any, rec: Any, ref: float,
            end: float) -> dict[str, Any]:
    """The server's side: its queue back at the baseline level, /health after a restart, the cold start's TTFT."""
    out: dict[str, Any] = {"queue_recovered_s": None, "queue_recovered_low_s": None, "queue_baseline_waiting": None,
                           "health_after_s": None,
                           "cold_ttft_ms": None, "baseline_ttft_p50_ms": None, "notes": []}
    q, level, note, q_low = queue_back(col.queue_t, col.queue_waiting, base.start, base.end or ref, ref, end)
    out["queue_recovered_s"], out["queue_baseline_waiting"], out["queue_recovered_low_s"] = q, level, q_low
    if note:
        out["notes"].append(note)
    bkey = (float(plan.level), 1)
    ttfts = sorted(col.ttft_ms[i] for i in range(col.n)
                   if col.keys[col.key[i]] == bkey and col.outcome[i] in (CODE_GOOD, CODE_SLOW)
                   and not math.isnan(col.ttft_ms[i]))
    out["baseline_ttft_p50_ms"] = nearest_rank(ttfts, 0.5)
    health = (rec.end_info.get("health") if rec is not None else None) or {}
    if plan.kind == SPIKE:
        out["notes"].append("a spike restarts nothing: /health and the cold start are not measured")
        return out
    if not isinstance(health, dict) or not health.get("probed"):
        why = health.get("note") if isinstance(health, dict) else None
        out["notes"].append(f"/health not measured{f': {why}' if why else ''}")
        return out
    down, up = health.get("down_at"), health.get("up_at")
    if not isinstance(down, (int, float)):
        out["notes"].append(f"{health.get('endpoint', '/health')} answered throughout: no restart seen")
        return out
    if not isinstance(up, (int, float)):
        out["notes"].append(f"{health.get('endpoint', '/health')} did not answer again by the drill's end")
        return out
    start = dist.start if dist is not None and dist.start is not None else ref
    out["health_after_s"] = max(0.0, up - start)
    firsts = sorted((col.t_sent[i], col.ttft_ms[i]) for i in range(col.n)
                    if col.t_sent[i] >= up and col.outcome[i] in (CODE_GOOD, CODE_SLOW)
                    and not math.isnan(col.ttft_ms[i]))[:D.DRILL_COLD_REQUESTS]
    if firsts:
        out["cold_ttft_ms"] = statistics.median(v for _t, v in firsts)
        out["cold_ttft_first_ms"] = [round(v, 1) for _t, v in firsts]
    else:
        out["notes"].append("no request completed after /health answered again: no cold-start TTFT")
    return out


def _rollback(sent: SentOrder, start: float, end: float, dist_start: float | None, target: float,
              step: float) -> list[dict[str, Any]]:
    """The acceptance report's default burn-rate rules replayed on the drill's requests (by the time their outcome
    was known): whether each would have fired, and when. The long windows (1 h, 6 h) hold only the drill's own
    traffic (said): a service with hours of good traffic before the fault would fire later, or not at all."""
    ends = sorted((sent.te[k], sent.code[k] != CODE_GOOD) for k in range(len(sent.ts))
                  if sent.code[k] != CODE_EXCLUDED)
    te = [t for t, _b in ends]
    cum_bad = [0]
    for _t, b in ends:
        cum_bad.append(cum_bad[-1] + (1 if b else 0))
    def share(lo: float, hi: float) -> tuple[float | None, int]:
        i, j = bisect.bisect_left(te, lo), bisect.bisect_right(te, hi)
        n = j - i
        return ((cum_bad[j] - cum_bad[i]) / n if n else None), n

    out = []
    budget = 1.0 - target
    times = grid(start, step, start, end + step, step) or [end]
    for name, long_w, short_w, burn, _action in DEFAULT_BURN_RULES:
        thr = burn * budget
        long_s, short_s = _WINDOW_HOURS[long_w] * 3600.0, _WINDOW_HOURS[short_w] * 3600.0
        fired = None
        if thr < 1.0:
            for t in times:
                sl, nl = share(t - long_s, t)
                ss, ns = share(t - short_s, t)
                if sl is not None and ss is not None and sl > thr and ss > thr:
                    fired = t
                    break
        held = min(long_s, end - start)
        out.append({"name": name, "long_window": long_w, "short_window": short_w, "burn_rate": burn,
                    "bad_fraction_threshold": min(1.0, thr), "fires": fired is not None, "at": fired,
                    "after_disturbance_s": (None if fired is None or dist_start is None else fired - dist_start),
                    "long_window_held_s": held, "can_fire": thr < 1.0})
    return out


def _series(sent: SentOrder, ref: float, start: float, end: float, width: float, step: float) -> list[dict]:
    """The recovery chart's points: per window (start s from the baseline's start), its good fraction and the TTFT
    P50/P95 of its completed requests."""
    starts = grid(ref, step, start, end, width)
    stride = max(1, math.ceil(len(starts) / MAX_SERIES))
    out = []
    for s in starts[::stride]:
        w = sent.window(s, width)
        i, j = sent.span(s, s + width)
        out.append({"t": round(s - start, 3), "good": w.fraction, "n": w.n, **_ttfts(sent, i, j)})
    return out


def _ttfts(sent: SentOrder, i: int, j: int) -> dict[str, float | None]:
    """TTFT P50 / P95 (ms) of the completed requests among those in send order [i, j)."""
    tt = sent.ttft
    if tt is None:
        return {"ttft_p50_ms": None, "ttft_p95_ms": None}
    vals = sorted(tt[k] for k in range(i, j) if sent.code[k] in (CODE_GOOD, CODE_SLOW) and not math.isnan(tt[k]))
    p50, p95 = nearest_rank(vals, 0.5), nearest_rank(vals, 0.95)
    return {"ttft_p50_ms": None if p50 is None else round(p50, 2), "ttft_p95_ms": None if p95 is None else round(p95, 2)}
