"""What the console shows of a drill while it runs or replays (``DrillTracker.view``): the phases as bands, the
recovery point as a marker once the drill is judged, and one line for the verdict bar ("disturbance 0:42 ago,
rolling good 62%, not yet recovered"). Fed the same record blocks as the Monitor (``tui.sources.drill_feed``).

The rolling figure is over the requests FINISHED in the last recovery window (record time): the console's live
estimate. The verdict and the recovery point are the judgement's (``tui.core.drill.judge``), made once the recovery
phase has ended, exactly as ``report`` makes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from tui.core.drill.collect import CODE_EXCLUDED, CODE_GOOD, DrillCollector
from tui.core.drill.judge import DrillResult, judge
from tui.core.drill.settings import DrillPlan, plan_from_header
from tui.core.monitor import Monitor
from tui.core.phases import (
    DISTURBANCE,
    DRILL_WORDS,
    PHASE_NAMES,
    RECOVERY,
    DrillView,
    PhaseBand,
    fmt_clock,
    fmt_duration,
    fmt_interval,
)
from tui.core.slos import Slos
from tui.core.textfmt import fmt_pct

TAIL_SCAN = 50_000  # requests looked at from the newest for the rolling figure, at most


def short_label(plan: DrillPlan) -> str:
    """The disturbance in a word or two, for the console's band legend."""
    if plan.kind == "spike":
        return f"spike {plan.spike_factor:g}x"
    return "fault" if plan.kind == "fault_cmd" else "marked act"


class DrillTracker:
    """A collector plus the console's view of it (see the module doc)."""

    def __init__(self, slos: Slos) -> None:
        self.col = DrillCollector(slos)
        self._latest = 0.0
        self._plan: DrillPlan | None = None
        self._plan_problem: str | None = None
        self._result: DrillResult | None = None
        self._result_key: tuple | None = None

    @property
    def active(self) -> bool:
        return bool(self.col.active)

    def add_many(self, items: Iterable) -> None:
        items = list(items) if not isinstance(items, (list, tuple)) else items
        self.col.add_many(items)
        if self.col.active:
            for it in items:
                t = getattr(it, "t_end", None) or getattr(it, "t", None)
                if isinstance(t, float) and t > self._latest:
                    self._latest = t

    def plan(self) -> DrillPlan | None:
        if self._plan is None and self._plan_problem is None and self.col.active:
            try:
                self._plan = plan_from_header(self.col.header)
            except ValueError as exc:
                self._plan_problem = str(exc)
        return self._plan

    def result(self, mon: Monitor) -> DrillResult | None:
        """The judgement, once the recovery phase has ended (kept until more records arrive)."""
        rec = self.col.phases.get(RECOVERY)
        base = self.col.phases.get("baseline")
        ended = (rec is not None and rec.end is not None) or (
            base is not None and base.end is not None and base.end_info.get("stop") is not None)
        if not ended:
            return None
        key = (self.col.n, mon.finished, len(mon.evidence_problems()))
        if self._result is None or self._result_key != key:
            self._result, self._result_key = judge(self.col, mon), key
        return self._result

    def rolling_good(self, window_s: float) -> tuple[float | None, int]:
        """(good fraction, requests) of the requests that finished in the last ``window_s`` of record time."""
        col = self.col
        lo = self._latest - window_s
        n = good = 0
        i = col.n - 1
        stop = max(-1, col.n - 1 - TAIL_SCAN)
        while i > stop:
            te = col.t_end[i]
            if te >= lo:
                c = col.outcome[i]
                if c != CODE_EXCLUDED:
                    n += 1
                    good += c == CODE_GOOD
            elif col.t_sent[i] < lo - 3600.0:
                break
            i -= 1
        return (good / n if n else None), n

    def view(self, mon: Monitor) -> DrillView | None:
        if not self.col.active:
            return None
        plan = self.plan()
        bands = []
        label = {DISTURBANCE: "disturbance" if plan is None else short_label(plan)}
        for name in PHASE_NAMES:
            p = self.col.phases.get(name)
            if p is not None and p.start is not None:
                bands.append(PhaseBand(name, p.start, p.end, label.get(name, name)))
        now = max(self._latest, max((b.end or b.start for b in bands), default=0.0))
        if plan is None:
            return DrillView(tuple(bands), now, None, f"drill: {self._plan_problem or 'settings unknown'}")
        frac, n = self.rolling_good(plan.window_s)
        target = mon.cfg.target
        res = self.result(mon)
        if res is not None:
            f = res.finding
            words = DRILL_WORDS.get(res.verdict, res.verdict)
            ttr = "" if res.ttr is None else f" in {fmt_interval(*res.ttr)}"
            line = f"drill {words}{ttr} (RTO {fmt_duration(plan.rto_s)}): {res.reason}"
            return DrillView(tuple(bands), now, None if f is None else f.point, line, res.verdict, frac)
        dist = self.col.phases.get(DISTURBANCE)
        roll = "rolling good N/A (nothing finished lately)" if frac is None else f"rolling good {fmt_pct(frac)}"
        if dist is None or dist.start is None:
            base = bands[0].start if bands else now
            line = (f"drill baseline {fmt_clock(now - base)} of {fmt_clock(plan.baseline_s)}, {roll}; the "
                    f"disturbance ({plan.describe_disturbance()}) follows a PASSing baseline")
        else:
            state = ("at or above the target" if frac is not None and frac >= target and n
                     else "not yet recovered")
            line = f"disturbance {fmt_clock(now - dist.start)} ago, {roll}, {state}"
        return DrillView(tuple(bands), now, None, line, None, frac)
