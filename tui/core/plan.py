"""From one replica's SLO-judged evidence to a fleet: how many replicas a demand needs, with spares, and what
it costs (`servewatch plan`). Pure, standard library only.

The method (docs/planning.md):

- **The capacity bracket** of one replica: ``[lo, hi]``, lo the highest level that PASSes, hi the lowest level
  above it that does not (FAIL, UNDECIDED or INSUFFICIENT_WINDOW: a level not decided counts as not passing and
  is said). A level whose labelled load was not delivered is never an end. The verdicts are those of
  ``tui.core.capacity.measure_capacity`` (the rule `report`, `sweep` and `accept` use), re-judged at the SLO and
  target given. Open loop: the ends are rates (req/s). Closed loop: the ends are concurrencies, turned into rates
  with Little's law (L = lambda x W, so lambda = L / W: the throughput measured at that concurrency).
- **Replicas needed** at the peak: ``low = ceil(peak / hi)``, ``high = ceil(peak / lo)``; plus ``spare``
  (N+spare) gives ``replicas_total``. ``high`` is the answer the evidence supports (each replica then carries at
  most lo, a rate that PASSed); ``low`` is where the capacity could be at best.
- **The anchor rule** beside it: ``ceil(1.2 x peak / max measured throughput)`` (llm-d's planner rule), and one
  sentence on why the two differ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.capacity import Capacity, CapRow
from tui.core.levels import level_key
from tui.core.snapshot import LevelRow
from tui.core.states import PASS
from tui.core.textsafe import term

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12
ANCHOR_FACTOR = 1.2  # llm-d's planner rule: ceil(1.2 x QPS / qps_per_replica)
_EPS = 1e-9  # a quotient within this of a whole number is that number (20 / 10 is 2, not 3)


@dataclass(frozen=True, slots=True)
class LevelEvidence:
    """One level of the primary loop mode: its verdict over every round and file, and what was measured there."""

    level: float
    state: str
    n: int  # measured requests (all rounds, files)
    good: int
    req_per_s: float | None  # measured throughput, weighted by each row's requests
    output_tok_per_req: float | None  # measured output tokens per completed request
    delivered: bool  # False: some row of this level did not deliver its labelled load (never a bracket end)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "state": self.state, "n": self.n, "good": self.good,
                "req_per_s": self.req_per_s, "output_tok_per_req": self.output_tok_per_req,
                "delivered": self.delivered}


@dataclass(frozen=True, slots=True)
class Bracket:
    """The capacity bracket of one replica, as rates (req/s) per replica."""

    mode: str | None
    unit: str  # the level unit: "req/s" or "concurrency"
    lo: LevelEvidence | None  # the highest PASS level (delivered)
    hi: LevelEvidence | None  # the lowest delivered level above lo that does not PASS
    lo_rate: float | None  # req/s per replica at lo (closed loop: Little's law)
    hi_rate: float | None
    notes: tuple[str, ...] = ()


def level_evidence(rows: Iterable[CapRow], capacity: Capacity) -> list[LevelEvidence]:
    """The levels of ``capacity``'s primary mode with what their rows measured (ascending level)."""
    if not capacity.tables:
        return []
    t = capacity.tables[0]
    mine = [c.row for c in rows if c.mode == t.mode]
    out = []
    for s in t.levels:
        if s.level is None:
            continue
        rs = [r for r in mine if r.level == s.level]
        n = sum(r.window.good.n for r in rs)
        good = sum(r.window.good.good for r in rs)
        tp = [(r.window.req_per_s, r.window.good.n) for r in rs if r.window.req_per_s is not None]
        w = sum(k for _, k in tp)
        rps = (sum(v * k for v, k in tp) / w if w else (tp[0][0] if tp else None))
        tok = [(r.window.output_tok_per_s, r.window.req_per_s) for r in rs
               if r.window.output_tok_per_s is not None and r.window.req_per_s]
        per_req = (sum(a for a, _ in tok) / sum(b for _, b in tok)) if tok else None
        delivered = not any(r.not_reached or r.saturated or r.verdict.reason.startswith("degraded") for r in rs)
        out.append(LevelEvidence(float(s.level), s.state, n, good, rps, per_req, delivered))
    return out


def search_bracket(rows: Iterable[LevelRow], levels: Sequence[LevelEvidence], mode: str | None,
                   unit: str) -> Bracket:
    """The bracket by the capacity search's own rule (``tui.core.search.bracket`` on these level rows: what
    `sweep --search` steered by and `report` shows), with the rates of its ends; where the search rule finds no
    bracket (no level FAILed, or none PASSed below the first FAIL), :func:`capacity_bracket`'s open-ended one."""
    from tui.core.search import bracket, points_from_rows

    br = bracket(points_from_rows(list(rows), mode), unit)
    if not br.found:
        return capacity_bracket(levels, mode, unit)
    assert br.low is not None and br.high is not None
    return capacity_bracket(levels, mode, unit, ends=(br.low.level, br.high.level), notes=br.notes)


def capacity_bracket(levels: Sequence[LevelEvidence], mode: str | None, unit: str,
                     ends: tuple[float, float] | None = None, notes: Iterable[str] = ()) -> Bracket:
    """[highest PASS below the lowest FAIL, lowest not-PASS above it] over the delivered levels (a level not
    delivered, saturated or degraded is never an end); closed loop converted to req/s."""
    notes = list(notes)
    ok = [lv for lv in levels if lv.delivered]
    if ends is not None:  # the search rule's ends (its notes already say what is undecided or not delivered)
        lo = next((lv for lv in levels if lv.level == ends[0]), None)
        hi = next((lv for lv in levels if lv.level == ends[1]), None)
    else:
        for lv in levels:
            if not lv.delivered:
                notes.append(f"{unit} {lv.level:g}: the labelled load was not delivered, so it is no end of the "
                             "bracket")
        fails = [lv for lv in ok if lv.state == "FAIL"]
        # the search's rule (tui.core.search): the lower end is the highest PASS below the lowest FAIL
        passing = [lv for lv in ok if lv.state == PASS and (not fails or lv.level < fails[0].level)]
        lo = max(passing, key=lambda lv: level_key(lv.level)) if passing else None
        above = [lv for lv in ok if lv.state != PASS and (lo is None or lv.level > lo.level)]
        hi = min(above, key=lambda lv: level_key(lv.level)) if above else None
        if hi is not None and hi.state != "FAIL":
            notes.append(f"the upper end, {unit} {hi.level:g}, ended {hi.state} (not decided): counted as not "
                         "passing; the capacity may be higher")
        if hi is not None and any(lv.state == PASS and lv.level > hi.level for lv in ok):
            notes.append(f"non-monotonic: a level above the upper end ({unit} {hi.level:g}) PASSed; repeat the "
                         "sweep before trusting the plan")
    if mode == "closed":
        lo_rate = None if lo is None else lo.req_per_s
        hi_rate = None if hi is None else hi.req_per_s
        for name, e, r in (("lower", lo, lo_rate), ("upper", hi, hi_rate)):
            if e is not None and r:
                notes.append(f"Little's law at the {name} end: concurrency {e.level:g} / {r:.4g} req/s measured = "
                             f"{e.level / r:.3g} s mean time in the system per request")
        if lo_rate is not None and hi_rate is not None and hi_rate < lo_rate:
            notes.append(f"throughput fell from {lo_rate:.3g} req/s at concurrency {lo.level:g} to {hi_rate:.3g} at "  # type: ignore[union-attr]
                         f"{hi.level:g}: the upper end is taken as {lo_rate:.3g} req/s")  # type: ignore[union-attr]
            hi_rate = lo_rate
    else:
        lo_rate = None if lo is None else lo.level
        hi_rate = None if hi is None else hi.level
    return Bracket(mode, unit, lo, hi, lo_rate, hi_rate, tuple(notes))


def replicas_for(rate: float, per_replica: float | None) -> int | None:
    """ceil(rate / per_replica): the replicas that carry ``rate`` at ``per_replica`` each (None: unknown)."""
    if per_replica is None or not per_replica > 0:
        return None
    if rate <= 0:
        return 0
    q = rate / per_replica
    return max(1, math.ceil(q - _EPS))


def _add(v: int | None, k: int) -> int | None:
    return None if v is None else v + k


@dataclass(frozen=True, slots=True)
class DemandWindow:
    start_s: float
    end_s: float
    arrivals: int

    @property
    def rate(self) -> float:
        return self.arrivals / (self.end_s - self.start_s) if self.end_s > self.start_s else 0.0


def demand_windows(offsets: Sequence[float], window_s: float) -> list[DemandWindow]:
    """Arrivals per window of ``window_s`` seconds from the first arrival (offsets ascending, from 0). The last
    window ends at the last arrival; a last window shorter than half a window is merged into the one before (its
    rate over a sliver of time would be noise). Raises ValueError when the trace is shorter than one window."""
    if not window_s > 0:
        raise ValueError("the demand window must be > 0 seconds")
    span = offsets[-1] if offsets else 0.0
    if len(offsets) < 2 or span < window_s:
        raise ValueError(f"the trace spans {span:g} s, less than one demand window of {window_s:g} s: "
                         "give a shorter --demand-window-minutes")
    bounds = []
    t = 0.0
    while t + window_s <= span + _EPS:
        bounds.append((t, t + window_s))
        t += window_s
    tail = span - t
    if tail > _EPS:
        if tail >= window_s / 2:
            bounds.append((t, span))
        else:
            bounds[-1] = (bounds[-1][0], span)
    out = []
    i = 0
    for k, (a, b) in enumerate(bounds):
        last = k == len(bounds) - 1
        j = i
        while j < len(offsets) and (offsets[j] < b or (last and offsets[j] <= b)):
            j += 1
        out.append(DemandWindow(a, b, j - i))
        i = j
    return out


@dataclass
class PlanInputs:
    """What `servewatch plan` gathered: the evidence (one replica) and the demand."""

    levels: list[LevelEvidence]
    bracket: Bracket
    peak_rate: float
    peak_from: str  # "--peak-rate" or "trace FILE, window ..."
    spare: int = 1
    gpus_per_replica: int = 1
    gpus_from: str = "default 1"
    gpu_hour_usd: float | None = None
    windows: list[DemandWindow] | None = None  # a trace's demand over time
    window_s: float | None = None
    memory_candidate: int | None = None  # per replica (a concurrency), None: unknown
    memory_origin: str | None = None
    capacity_limits: tuple[str, ...] = ()  # measure_capacity's sentences (capacity beside the candidate, limits)
    workload: str = ""
    slos: str = ""
    target: float = 0.95
    trace_lengths: tuple[float, float] | None = None  # the trace's mean (input, output) tokens
    evidence_lengths: tuple[float | None, float | None] | None = None
    synthetic: bool = False
    synthetic_demand: bool = False  # the trace says it is synthetic (its first comment line)
    not_acceptance_grade: list[str] = field(default_factory=list)
    check_command: str = ""
    trace_command: str | None = None
    sources: list[str] = field(default_factory=list)
    #: what the records say against themselves (a broken digest chain, a load not delivered...): the problems that
    #: forbid PASS at some level, once each; any of them and the plan is not one to act on
    evidence_problems: list[str] = field(default_factory=list)
    #: what the servers said against the evidence's claims (tui.core.identity.evidence_identity): a model claimed
    #: but not served, a budget of another model, a GPU budget for a run without a GPU; any of them: exit 3
    identity_problems: list[str] = field(default_factory=list)


def _cost(replicas: int | None, gpus: int, price: float | None) -> float | None:
    if replicas is None or price is None:
        return None
    return replicas * gpus * price


def _pair(low: Any, high: Any) -> dict[str, Any]:
    return {"low": low, "high": high}


def anchor_rule(levels: Sequence[LevelEvidence], peak: float) -> dict[str, Any]:
    """llm-d's planner rule on this sweep: ceil(1.2 x peak / the highest throughput measured, any verdict)."""
    tp = [lv for lv in levels if lv.req_per_s]
    if not tp:
        return {"replicas": None, "throughput_per_replica": None, "at_level": None, "rule": "ceil(1.2 x peak / "
                "max measured throughput)", "good_fraction_there": None, "state_there": None}
    best = max(tp, key=lambda lv: lv.req_per_s or 0.0)
    tput = float(best.req_per_s or 0.0)
    return {"rule": f"ceil({ANCHOR_FACTOR:g} x peak / max measured throughput)", "throughput_per_replica": tput,
            "at_level": best.level, "state_there": best.state,
            "good_fraction_there": (best.good / best.n) if best.n else None,
            "replicas": replicas_for(ANCHOR_FACTOR * peak, tput)}


def _why_anchor(a: dict[str, Any], need: dict[str, Any], b: Bracket, peak: float) -> str:
    if a["replicas"] is None:
        return "The anchor rule has no number: no level of the sweep measured a throughput."
    gf = a["good_fraction_there"]
    there = (f"{b.unit} {a['at_level']:g}, where {'an unknown share' if gf is None else f'{100 * gf:.1f}%'} of "
             f"requests were good and the verdict was {a['state_there']}")
    head = (f"The anchor rule divides the peak by the highest throughput measured, {a['throughput_per_replica']:.3g} "
            f"req/s at {there}, with a fixed 20% margin: {ANCHOR_FACTOR:g} x {peak:g} / "
            f"{a['throughput_per_replica']:.3g} -> {a['replicas']} replicas")
    lo, hi = b.lo_rate, b.hi_rate
    if lo is None:
        return head + "; no level met the SLO, so the SLO-judged plan has no number at all."
    rng = f"{lo:.3g}" + ("" if hi is None or f"{hi:.3g}" == f"{lo:.3g}" else f"-{hi:.3g}")
    nl, nh = need["low"], need["high"]
    tail = f"; the SLO-judged plan divides by the rate at which the SLO still held, {rng} req/s per replica"
    span = f"{nh}" if nl is None or nl == nh else f"{nl}-{nh}"
    ratio = a["throughput_per_replica"] / lo
    if nl is not None and a["replicas"] < nl:
        verdict = (f": {span} replicas, so the anchor rule provisions fewer (its 20% does not cover the gap "
                   f"between the peak throughput and the rate that meets the SLO, {ratio:.2f}x)")
    elif a["replicas"] < nh:
        verdict = (f": {span} replicas, so the anchor rule falls short of the {nh} the evidence supports (the peak "
                   f"throughput is {ratio:.2f}x the highest rate that met the SLO, more than its 20% covers)")
    elif a["replicas"] > nh:
        verdict = (f": {span} replicas, so the anchor rule provisions more (the peak throughput is only "
                   f"{ratio:.2f}x the highest rate that met the SLO: its 20% is more headroom than this SLO needs)")
    else:
        verdict = (f": {span} replicas, so the two agree here (the peak throughput is {ratio:.2f}x the highest "
                   "rate that met the SLO, within the anchor's 20%)")
    return head + tail + verdict + "."


def build_plan(p: PlanInputs) -> dict[str, Any]:
    """The plan as a JSON-ready dict (``schema`` servewatch.plan/1) with its exit code."""
    b = p.bracket
    # without a PASS, only a FAIL bounds the capacity from above (a level not decided bounds nothing)
    bounded = b.lo is not None or (b.hi is not None and b.hi.state == "FAIL")
    need = _pair(replicas_for(p.peak_rate, b.hi_rate) if bounded else None, replicas_for(p.peak_rate, b.lo_rate))
    total = _pair(_add(need["low"], p.spare), _add(need["high"], p.spare))
    g = p.gpus_per_replica
    gpus = _pair(None if total["low"] is None else total["low"] * g, None if total["high"] is None else total["high"] * g)
    per_req = b.lo.output_tok_per_req if b.lo is not None else None
    cost: dict[str, Any] = {"gpu_hour_usd": p.gpu_hour_usd, "hours_per_month": HOURS_PER_MONTH}
    if p.gpu_hour_usd is not None:
        ph = _pair(_cost(total["low"], g, p.gpu_hour_usd), _cost(total["high"], g, p.gpu_hour_usd))
        cost["per_hour_usd"] = ph
        cost["per_month_usd"] = {k: None if v is None else v * HOURS_PER_MONTH for k, v in ph.items()}
        tok_h = p.peak_rate * per_req * 3600.0 if per_req else None
        cost["per_1m_output_tokens_usd"] = {k: None if v is None or not tok_h else v / (tok_h / 1e6)
                                            for k, v in ph.items()}
        cost["output_tokens_per_request"] = per_req
        cost["basis"] = (f"replicas_total x {g} GPU(s) x {p.gpu_hour_usd:g} USD per GPU-hour; a month is "
                         f"{HOURS_PER_MONTH:g} h; per 1M output tokens at the peak rate all hour, "
                         + ("output tokens per request unknown" if per_req is None else
                            f"{per_req:.4g} output tokens per request (measured at the capacity level)"))
    else:
        cost["note"] = "no --gpu-hour-usd given: no cost figures"
    anchor = anchor_rule(p.levels, p.peak_rate)
    anchor["why_different"] = _why_anchor(anchor, need, b, p.peak_rate)
    doc: dict[str, Any] = {
        "schema": "servewatch.plan/1",
        "sources": p.sources,
        "synthetic": p.synthetic,
        "synthetic_demand": p.synthetic_demand,
        "workload": p.workload,
        "slos": p.slos,
        "target": p.target,
        "demand": {"peak_rate": p.peak_rate, "from": p.peak_from, "unit": "req/s"},
        "capacity_per_replica": {
            "mode": b.mode, "level_unit": b.unit,
            "lo": None if b.lo is None else b.lo.to_dict(), "hi": None if b.hi is None else b.hi.to_dict(),
            "lo_rate": b.lo_rate, "hi_rate": b.hi_rate, "unit": "req/s",
            "conversion": ("Little's law (lambda = L / W): the closed-loop concurrency at each end is turned into "
                           "the throughput measured there (req/s)") if b.mode == "closed" else None,
            "notes": list(b.notes),
            "levels": [lv.to_dict() for lv in p.levels],
        },
        "memory_only_candidate": {"per_replica": p.memory_candidate if p.memory_candidate is not None else "unknown",
                                  "origin": p.memory_origin, "unit": "concurrent sequences",
                                  "beside_measured": list(p.capacity_limits)},
        "replicas_needed": need,
        "spare": p.spare,
        "spare_meaning": (f"N+{p.spare}: {p.spare} replica(s) can fail or be drained and the rest still carry the "
                          "peak" if p.spare else "N+0: no spare; one replica lost and the peak is not carried"),
        "replicas_total": total,
        "gpus_per_replica": g,
        "gpus_per_replica_from": p.gpus_from,
        "gpus_total": gpus,
        "cost": cost,
        "anchor_rule": anchor,
        "assumptions": assumptions(p),
        "check": {"command": p.check_command,
                  "what": "the fleet behind its balancer at the peak rate, the evidence's workload and this SLO"},
    }
    if p.trace_command:
        doc["check"]["trace_command"] = p.trace_command
    if p.windows is not None:
        doc["schedule"] = schedule(p, total["high"])
    doc["warnings"] = warnings(p)
    code, why = exit_decision(p, need)
    doc["exit"] = {"code": code, "why": why}
    return doc


def schedule(p: PlanInputs, static_total: int | None) -> dict[str, Any]:
    """Replicas per demand window (an autoscaling schedule) and its cost beside static peak provisioning."""
    assert p.windows is not None
    b, g, price = p.bracket, p.gpus_per_replica, p.gpu_hour_usd
    rows = []
    sched_h = static_h = 0.0
    known = True
    for w in p.windows:
        lo_n, hi_n = replicas_for(w.rate, b.hi_rate), replicas_for(w.rate, b.lo_rate)
        tot = _add(hi_n, p.spare)
        hours = (w.end_s - w.start_s) / 3600.0
        if tot is None or static_total is None:
            known = False
        else:
            sched_h += tot * g * hours
            static_h += static_total * g * hours
        rows.append({"start_s": round(w.start_s, 3), "end_s": round(w.end_s, 3), "arrivals": w.arrivals,
                     "rate": w.rate, "replicas_needed": _pair(lo_n, hi_n), "replicas_total": tot})
    span_h = (p.windows[-1].end_s - p.windows[0].start_s) / 3600.0
    out: dict[str, Any] = {"window_s": p.window_s, "windows": rows, "span_s": span_h * 3600.0,
                           "replicas_from": "replicas_total high of each window (the end the evidence supports)"}
    out["gpu_hours"] = {"schedule": sched_h if known else None, "static_peak": static_h if known else None}
    if price is not None and known:
        out["cost_usd"] = {"schedule": sched_h * price, "static_peak": static_h * price,
                           "saving_fraction": (1 - sched_h / static_h) if static_h else None}
    return out


def assumptions(p: PlanInputs) -> list[str]:
    out = [
        "even balancing: the balancer gives every replica the same share of the arrivals",
        "identical, independent replicas: each behaves like the one measured, and one's load does not slow another",
        f"the workload of the evidence ({p.workload or 'as recorded'}) and its SLO ({p.slos}, target "
        f"{100 * p.target:g}%): another prompt or output length, cache hit rate or SLO needs new evidence",
        "the capacity of a replica does not change with the fleet's size (no shared bottleneck: network, storage, "
        "the balancer itself)",
        f"the same hardware and software as the evidence's replica ({p.sources[0] if p.sources else 'the records'})",
    ]
    if p.bracket.mode == "closed":
        out.append("closed-loop evidence: the rate per replica is the throughput measured at the bracket's ends "
                   "(Little's law); open-loop arrivals at that rate are burstier than a closed loop and queue more")
    if p.spare:
        out.append(f"N+{p.spare}: failures are independent (a zone or rack failure taking several replicas at once "
                   "needs more spares)")
    if p.windows is not None:
        out.append("the schedule scales at window edges instantly (a replica takes time to start: scale ahead of "
                   "the window)")
    return out


def warnings(p: PlanInputs) -> list[str]:
    out = []
    if p.synthetic:
        out.append("SYNTHETIC evidence: a plan from synthetic data says nothing about a real fleet")
    if p.synthetic_demand:
        out.append("SYNTHETIC demand: the trace says it is synthetic (its first comment line): the schedule shows "
                   "the method, not a real traffic pattern")
    if p.not_acceptance_grade:
        out.append("evidence judged at settings that are not acceptance-grade ("
                   + ", ".join(p.not_acceptance_grade) + "): a quick check, not a plan to buy hardware on")
    for why in p.identity_problems:
        out.append(f"identity: {why}: not acceptance-grade")
    if p.trace_lengths is not None and p.evidence_lengths is not None:
        for name, t, e in zip(("input", "output"), p.trace_lengths, p.evidence_lengths):
            if e is not None and e > 0 and not 0.8 <= t / e <= 1.25:
                out.append(f"workload shift: the trace's mean {name} length ({t:.0f} tokens) differs from the "
                           f"evidence's ({e:.0f}): the measured capacity may not carry over")
    for note in p.bracket.notes:
        if note.startswith("non-monotonic"):
            out.append(note)
    return out


def exit_decision(p: PlanInputs, need: Mapping[str, Any]) -> tuple[int, str]:
    """0 a plan the evidence supports; 1 no level met the SLO (a FAIL at the lowest level); 3 evidence missing:
    SYNTHETIC, settings not acceptance-grade, no level decided, non-monotonic results, closed-loop evidence (its
    rate per replica is converted, not judged), a workload shift."""
    b = p.bracket
    if p.evidence_problems:
        return 3, ("the records do not support a plan: " + p.evidence_problems[0]
                   + (f" (and {len(p.evidence_problems) - 1} more)" if len(p.evidence_problems) > 1 else ""))
    if b.lo is None:
        if p.levels and p.levels[0].state == "FAIL":
            return 1, "the lowest level of the sweep FAILed the SLO: no replica count carries this demand on this evidence"
        return 3, "no level of the sweep was decided PASS: no capacity to plan from"
    if p.synthetic:
        return 3, "SYNTHETIC evidence: never a plan to act on (exit 3)"
    if p.synthetic_demand:
        return 3, "SYNTHETIC demand (the trace is labelled synthetic): never a plan to act on (exit 3)"
    if p.not_acceptance_grade:
        return 3, "settings not acceptance-grade: " + ", ".join(p.not_acceptance_grade)
    if p.identity_problems:
        return 3, "not acceptance-grade: " + "; ".join(p.identity_problems)
    if any(n.startswith("non-monotonic") for n in b.notes):
        return 3, "non-monotonic results: repeat the sweep"
    if b.mode == "closed":  # the rate is Little's law on a concurrency that PASSed, never an arrival rate judged
        return 3, ("closed-loop evidence: a replica was judged at a concurrency, and its throughput there is not a "
                   "judged arrival rate (open-loop arrivals at that rate keep more requests in flight and queue): "
                   "sweep the replica with --rate (and --search) before acting on this plan")
    shift = [w for w in warnings(p) if w.startswith("workload shift")]
    if shift:
        return 3, "the demand's workload is not the evidence's (workload shift): measure that workload"
    if need["high"] is None:
        return 3, "the capacity per replica is unknown"
    return 0, "the plan stands on the evidence"


def _n(v: Any) -> str:
    return "unknown" if v is None else f"{v}"


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


def _usd_pair(p: Mapping[str, Any]) -> str:
    if p["low"] is None and p["high"] is None:
        return "unknown"
    return _usd(p["low"]) if p["low"] == p["high"] else f"{_usd(p['low'])}-{_usd(p['high'])}"


def format_plan(doc: Mapping[str, Any]) -> str:
    """The plan as text (the same content as the JSON)."""
    c = doc["capacity_per_replica"]
    lines = []
    if doc["synthetic"]:
        lines.append("SYNTHETIC evidence: this plan is an illustration, not a plan")
    lines.append("Fleet plan (from one replica's SLO-judged evidence: " + ", ".join(doc["sources"]) + ")")
    lines.append(f"  workload: {doc['workload']}")
    lines.append(f"  good = completed AND {doc['slos']}; target {100 * doc['target']:g}%")
    d = doc["demand"]
    lines.append(f"  demand: peak {d['peak_rate']:g} req/s ({d['from']})")
    unit = c["level_unit"]

    def end(e: Mapping | None, rate: float | None) -> str:
        if e is None:
            return "none"
        lv = f"{unit} {e['level']:g} ({e['state']})"
        return lv if c["mode"] != "closed" else f"{lv} = {_rate(rate)} req/s"

    lines.append(f"  capacity per replica: [{_rate(c['lo_rate'])}, {_rate(c['hi_rate'])}] req/s  "
                 f"(highest PASS: {end(c['lo'], c['lo_rate'])}; lowest not PASS above it: {end(c['hi'], c['hi_rate'])})")
    if c.get("search"):
        sr = c["search"]
        lines.append(f"    from `sweep --search`: {sr['probes']} probe(s), {sr['search_seconds']:.0f} s of probes, stopped "
                     f"by {sr['stopped_by']} ({sr['why']})")
    if c["conversion"]:
        lines.append(f"    closed loop: {c['conversion']}")
    for note in c["notes"]:
        lines.append(f"    note: {note}")
    m = doc["memory_only_candidate"]
    lines.append(f"  memory-only candidate per replica: {m['per_replica']}"
                 + (f" concurrent sequences ({m['origin']})" if m["per_replica"] != "unknown" else
                    " (no budget given and none in the records)") + "  (a number to test, not a limit)")
    for s in m["beside_measured"]:
        lines.append(f"    {s}")
    need, tot, gp = doc["replicas_needed"], doc["replicas_total"], doc["gpus_total"]
    lines.append(f"  replicas_needed at the peak: low {_n(need['low'])}, high {_n(need['high'])}  "
                 "(low = ceil(peak / hi), high = ceil(peak / lo): high is what the evidence supports)")
    lines.append(f"  spare: {doc['spare']}  ({doc['spare_meaning']})")
    lines.append(f"  replicas_total: low {_n(tot['low'])}, high {_n(tot['high'])};  GPUs: {doc['gpus_per_replica']} "
                 f"per replica ({doc['gpus_per_replica_from']}) -> low {_n(gp['low'])}, high {_n(gp['high'])}")
    cost = doc["cost"]
    if "per_hour_usd" in cost:
        ph, pm, pt = cost["per_hour_usd"], cost["per_month_usd"], cost["per_1m_output_tokens_usd"]
        lines.append(f"  cost: per hour {_usd_pair(ph)}; per month ({cost['hours_per_month']:g} h) {_usd_pair(pm)}; "
                     f"per 1M output tokens {_usd_pair(pt)}")
        lines.append(f"    ({cost['basis']})")
    else:
        lines.append(f"  cost: {cost['note']}")
    if "schedule" in doc:
        s = doc["schedule"]
        lines.append(f"  autoscaling schedule (windows of {s['window_s']:g} s; {s['replicas_from']}):")
        lines.append("      start s    end s  arrivals   req/s  needed low-high  total")
        for w in s["windows"]:
            rn = w["replicas_needed"]
            lines.append(f"    {w['start_s']:>9.1f} {w['end_s']:>8.1f} {w['arrivals']:>9} {w['rate']:>7.3g} "
                         f"{_n(rn['low']):>10}-{_n(rn['high']):<5} {_n(w['replicas_total']):>6}")
        gh = s["gpu_hours"]
        if gh["schedule"] is not None:
            lines.append(f"    GPU-hours over the trace's {s['span_s']:g} s: schedule {gh['schedule']:.4g}, static peak "
                         f"provisioning {gh['static_peak']:.4g}")
        if "cost_usd" in s:
            cu = s["cost_usd"]
            sv = cu["saving_fraction"]
            lines.append(f"    cost over the trace: schedule {_usd(cu['schedule'])}, static {_usd(cu['static_peak'])}"
                         + ("" if sv is None else f" (the schedule saves {100 * sv:.0f}%)"))
    a = doc["anchor_rule"]
    lines.append(f"  anchor rule ({a['rule']}): {_n(a['replicas'])} replicas")
    lines.append(f"    {a['why_different']}")
    lines.append("  assumptions:")
    lines += [f"    - {x}" for x in doc["assumptions"]]
    for w in doc["warnings"]:
        lines.append(f"  WARNING: {w}")
    lines.append("  check the plan against the fleet:")
    lines.append(f"    $ {doc['check']['command']}")
    if doc["check"].get("trace_command"):
        lines.append(f"    $ {doc['check']['trace_command']}   (the trace's own arrivals and lengths)")
    lines.append(f"plan: exit {doc['exit']['code']}: {doc['exit']['why']}")
    return "\n".join(term(line) for line in lines) + "\n"  # outside text stays on its line (tui.core.textsafe)


def _rate(v: float | None) -> str:
    return "unknown" if v is None else f"{v:.4g}"


__all__ = ["ANCHOR_FACTOR", "HOURS_PER_MONTH", "Bracket", "DemandWindow", "LevelEvidence", "PlanInputs",
           "anchor_rule", "build_plan", "capacity_bracket", "search_bracket", "demand_windows", "format_plan", "level_evidence",
           "replicas_for"]
