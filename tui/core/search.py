"""The capacity search of `servewatch sweep --search`: the bracket [highest PASS, lowest not-PASS] and the next probe.

Pure, standard library only. The live loop (``tui.sources.load.capacity_search``) and every reader of a record file
(`sweep`'s summary, `report`, `accept`) call the same functions on the same level rows, so the bracket a search
steered by and the bracket a reader shows are computed by one rule:

- A level's state combines its rounds (``tui.core.levels.combine_states``: FAIL if any FAILs, PASS only if all do).
- A level whose labelled load was not delivered (``LevelRow.not_reached``: the delivered-load check of
  ``tui.core.evidence``) is never an end of the bracket, whatever its verdict.
- The upper end: the lowest delivered level above the lower end that is not PASS. A FAIL, or a level that ended
  UNDECIDED (or with too little evidence) at its cap, which counts as not passing and is said so.
- The lower end: the highest delivered PASS below the lowest delivered FAIL. Without a delivered FAIL, or without a
  delivered PASS below it, there is no bracket (and no search: the reason is given).
- The next probe: the middle of the bracket (concurrency: an integer strictly inside; a rate: 3 significant digits).
- The search stops when the bracket is within the precision (``(high - low) / low <= precision``; concurrency also
  at ``high - low <= 1``), when a probe could not finish within the budget (the probes' recorded durations so far
  plus one probe's cap, ``--max-step-seconds`` times the rounds, over the budget), or when the next probe's level was
  already tried and did not move the bracket (its load was not delivered).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.defaults import SEARCH_BUDGET_MINUTES, SEARCH_PRECISION
from tui.core.levels import combine_states
from tui.core.snapshot_parts import LevelRow
from tui.core.states import FAIL, PASS
from tui.core.textfmt import fmt_level, fmt_pct

# why a search stopped (``capacity_bracket.stopped_by``)
PRECISION, BUDGET, UNDELIVERED, INTERRUPTED, NO_PASS, NO_FAIL = (
    "precision", "budget", "undelivered", "interrupted", "no_pass", "no_fail")


def parse_precision(text: str | float) -> float:
    """``--precision``: ``10%`` or ``0.1`` (a fraction of the lower end, in (0, 1)); ValueError otherwise."""
    s = str(text).strip()
    try:
        v = float(s[:-1]) / 100.0 if s.endswith("%") else float(s)
    except ValueError:
        raise ValueError(f"--precision must be a percentage (10%) or a fraction (0.1), got {s!r}") from None
    if not (math.isfinite(v) and 0.0 < v < 1.0):
        raise ValueError(f"--precision must be more than 0 and less than 100% (0.1 = 10%), got {s!r}")
    return v


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """What bounds the search: the precision (a fraction of the lower end), the budget (seconds of probes) and one
    probe's cap (seconds: the step cap times the rounds a probe runs)."""

    precision: float = SEARCH_PRECISION
    budget_s: float = SEARCH_BUDGET_MINUTES * 60.0
    probe_cap_s: float = 0.0

    def block(self) -> dict[str, float]:
        """The run header's ``load.search`` (a reader recomputes the stop rule from it)."""
        return {"precision": self.precision, "budget_s": self.budget_s, "probe_cap_s": self.probe_cap_s}

    @classmethod
    def from_block(cls, block: Any) -> SearchSettings | None:
        """The settings a run header's ``load.search`` names; None when it names none (or not as numbers)."""
        if not isinstance(block, Mapping):
            return None
        vals = [block.get(k) for k in ("precision", "budget_s", "probe_cap_s")]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                   for v in vals):
            return None
        return cls(float(vals[0]), float(vals[1]), float(vals[2]))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Point:
    """One level of the sweep: its rounds combined."""

    level: float
    state: str
    delivered: bool  # False: the labelled load was not delivered (never an end)
    probe: bool  # a search probe (its step records say ``search_probe``), not a ladder level
    seconds: float  # recorded step time of the level (all rounds)
    evidence: dict = field(default_factory=dict)


def _evidence(level: float, state: str, rows: Sequence[LevelRow], probe: bool, upper: bool) -> dict:
    """The evidence of a level: the combined verdict; n, good fraction and interval of the deciding round (upper
    end: the first that is not PASS; lower end: the one with the lowest interval); every round's reason."""
    if upper:
        pick = next((r for r in rows if r.verdict.state != PASS), rows[0])
    else:
        pick = min(rows, key=lambda r: -1.0 if r.window.good.lo is None else r.window.good.lo)
    g = pick.window.good
    out = {"level": level, "verdict": state, "n": g.n, "good": g.good, "good_fraction": g.fraction,
           "wilson_95": [g.lo, g.hi], "reason": pick.verdict.reason, "rounds": len(rows), "probe": probe}
    if len(rows) > 1:
        out["n_all_rounds"] = sum(r.window.good.n for r in rows)
    nr = next((_not_held(r) for r in rows if _not_held(r)), None)
    if nr:
        out["not_delivered"] = nr
    return out


def _not_held(r: LevelRow) -> str | None:
    """Why a round's level was not the load it is labelled with: not delivered (``not_reached``), the load
    generator saturated (its results not valid), or a load worker lost (degraded); None: held."""
    if r.not_reached:
        return r.not_reached
    if r.saturated:
        return "client saturated: the load generator's results are not valid"
    if r.verdict.reason.startswith("degraded"):
        return "degraded: a load worker was lost, the level was not held"
    return None


def points_from_rows(rows: Iterable[LevelRow], mode: str | None = None) -> list[Point]:
    """One point per level (ascending) of the rows of ``mode`` (None: every row with a level)."""
    by: dict[float, list[LevelRow]] = {}
    for r in rows:
        if r.level is None or (mode is not None and r.mode is not None and r.mode != mode):
            continue
        by.setdefault(float(r.level), []).append(r)
    out = []
    for lv in sorted(by):
        rs = sorted(by[lv], key=lambda r: r.round)
        state = combine_states(r.verdict.state for r in rs)
        probe = any(r.search_probe for r in rs)
        ev = _evidence(lv, state, rs, probe, upper=state != PASS)
        out.append(Point(lv, state, not any(_not_held(r) for r in rs), probe,
                         sum(r.step_s or 0.0 for r in rs), ev))
    return out


@dataclass(frozen=True, slots=True)
class Bracket:
    low: Point | None
    high: Point | None
    why: str | None  # no bracket: why not (and what is known instead)
    stop: str | None  # NO_PASS / NO_FAIL when there is no bracket
    notes: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.low is not None and self.high is not None


def bracket(points: Sequence[Point], unit: str = "level") -> Bracket:
    """The capacity bracket of these points (see the module doc)."""
    ok = [p for p in points if p.delivered]
    fails = [p for p in ok if p.state == FAIL]
    skipped = [p for p in points if not p.delivered and p.state == FAIL]
    passes = [p for p in ok if p.state == PASS]
    undelivered = (f"; {unit} {', '.join(fmt_level(p.level) for p in skipped)} FAILed with load not delivered, "
                   "so not an end" if skipped else "")
    if not fails:
        if passes and passes[-1] is ok[-1] and ok[-1].level == points[-1].level:
            why = (f"no level FAILed: the capacity is above the top level tested ({unit} "
                   f"{fmt_level(passes[-1].level)} PASSed); raise --max-level or the ladder to bracket it")
        elif passes:
            why = (f"no level FAILed: the capacity is at least {unit} {fmt_level(passes[-1].level)} (the highest "
                   "PASS); the levels above it did not decide")
        else:
            why = "no level FAILed and none PASSed: nothing to bracket"
        return Bracket(None, None, why + undelivered, NO_FAIL)
    first_fail = fails[0]
    below = [p for p in passes if p.level < first_fail.level]
    if not below:
        return Bracket(None, None, f"no level below the first FAIL ({unit} {fmt_level(first_fail.level)}) PASSed: "
                       "the capacity is below the lowest level tested" + undelivered, NO_PASS)
    low = below[-1]
    high = next(p for p in ok if p.level > low.level and p.state != PASS)
    notes = []
    above = [p for p in passes if p.level > high.level]
    if above:
        notes.append(f"non-monotonic: {unit} {', '.join(fmt_level(p.level) for p in above)} PASSed above the "
                     f"bracket's upper end ({fmt_level(high.level)}); repeat those levels before trusting the bracket")
    if high.state != FAIL:
        notes.append(f"the upper end {unit} {fmt_level(high.level)} ended {high.state} at its cap: counted as not "
                     "passing (a longer --max-step-seconds may decide it)")
    notes += [f"{unit} {fmt_level(p.level)} was not delivered: never an end"
              f" ({p.evidence.get('not_delivered', 'the load was not delivered')})" for p in points if not p.delivered]
    return Bracket(low, high, None, None, tuple(notes))


def within(low: float, high: float, precision: float, integer: bool) -> bool:
    """The stop rule: the bracket's width relative to its lower end within the precision (integers: also adjacent)."""
    if integer and high - low <= 1:
        return True
    return low > 0 and (high - low) / low <= precision + 1e-12


def midpoint(low: float, high: float, integer: bool) -> float:
    """The next probe: the middle, an integer strictly inside for concurrency, 3 significant digits for a rate."""
    if integer:
        return float((int(low) + int(high)) // 2)
    mid = (low + high) / 2.0
    short = float(f"{mid:.3g}")
    return short if low < short < high else mid


@dataclass(frozen=True, slots=True)
class Plan:
    """What the search does next: probe ``level``, or stop (``stop``, ``why``)."""

    bracket: Bracket
    level: float | None
    stop: str | None
    why: str
    spent_s: float


def plan_next(points: Sequence[Point], settings: SearchSettings, integer: bool, unit: str = "level",
              tried: Iterable[float] = ()) -> Plan:
    """The next probe of the search, or why it stops (see the module doc). ``tried``: levels probed already
    beyond those in ``points`` (a probe that recorded no measured request)."""
    br = bracket(points, unit)
    spent = sum(p.seconds for p in points if p.probe)
    if not br.found:
        assert br.stop is not None and br.why is not None
        return Plan(br, None, br.stop, br.why, spent)
    lo, hi = br.low, br.high
    assert lo is not None and hi is not None
    if within(lo.level, hi.level, settings.precision, integer):
        adj = " (adjacent levels)" if integer and hi.level - lo.level <= 1 else ""
        return Plan(br, None, PRECISION, f"the bracket is within {fmt_pct(settings.precision, 0)} of its lower "
                    f"end{adj}", spent)
    nxt = midpoint(lo.level, hi.level, integer)
    seen = {p.level for p in points} | {float(x) for x in tried}
    if nxt in seen:
        return Plan(br, None, UNDELIVERED, f"{unit} {fmt_level(nxt)} was probed and its load was not delivered: "
                    "the search cannot narrow the bracket further", spent)
    if spent + settings.probe_cap_s > settings.budget_s:
        return Plan(br, None, BUDGET, (f"the next probe could run {settings.probe_cap_s:g} s, past the search "
                                       f"budget ({spent:.0f} s of {settings.budget_s:g} s spent)"), spent)
    return Plan(br, nxt, None, f"probe {unit} {fmt_level(nxt)} (bracket {fmt_level(lo.level)} to "
                f"{fmt_level(hi.level)})", spent)


def _probe_entry(p: Point) -> dict:
    e = p.evidence
    return {"level": p.level, "verdict": p.state, "n": e.get("n"), "good_fraction": e.get("good_fraction"),
            "wilson_95": e.get("wilson_95"), "delivered": p.delivered, "seconds": round(p.seconds, 3)}


def capacity_bracket(rows: Iterable[LevelRow], header: Mapping | None, unit: str, mode: str | None) -> dict | None:
    """``capacity_bracket`` of a sweep's summary (`--sweep-json`), or None when the run was not a search (its header
    has no ``load.search``): low, high, unit, the evidence of both ends, the probes, the search's seconds and why it
    stopped (recomputed from the rows with the recorded settings: a run cut short says ``interrupted``)."""
    ld = header.get("load") if isinstance(header, Mapping) else None
    settings = SearchSettings.from_block(ld.get("search") if isinstance(ld, Mapping) else None)
    if settings is None:
        return None
    pts = points_from_rows(rows, mode)
    plan = plan_next(pts, settings, mode == "closed", unit)
    br = plan.bracket
    lo, hi = br.low, br.high
    stop, why = plan.stop, plan.why
    if stop is None:
        stop, why = INTERRUPTED, f"the run ended before the search did (next: {plan.why})"
    width = None if lo is None or hi is None or lo.level <= 0 else (hi.level - lo.level) / lo.level
    return {
        "low": None if lo is None else lo.level, "high": None if hi is None else hi.level, "unit": unit,
        "low_evidence": None if lo is None else dict(lo.evidence),
        "high_evidence": None if hi is None else dict(hi.evidence),
        "high_not_fail": hi is not None and hi.state != FAIL,
        "width": width,
        "probes": [_probe_entry(p) for p in pts if p.probe],
        "search_seconds": round(plan.spent_s, 3),
        "stopped_by": stop, "why": why, "notes": list(br.notes),
        "precision": settings.precision, "budget_s": settings.budget_s, "probe_cap_s": settings.probe_cap_s,
    }


def _ev_text(e: Mapping) -> str:
    lo, hi = (e.get("wilson_95") or [None, None])[:2]
    txt = (f"{e.get('verdict')}, n {e.get('n')}, good {fmt_pct(e.get('good_fraction'), 1)} "
           f"[{fmt_pct(lo, 1)}-{fmt_pct(hi, 1)}]")
    return txt + (" (search probe)" if e.get("probe") else " (ladder)")


def format_bracket(b: Mapping) -> list[str]:
    """The bracket as text lines (`sweep`, `report`)."""
    unit = b.get("unit") or "level"
    probes = b.get("probes") or []
    took = (f"{len(probes)} probe{'' if len(probes) == 1 else 's'}, {b.get('search_seconds', 0):.0f} s of probes "
            f"(budget {b.get('budget_s', 0) / 60:g} min)")
    if b.get("low") is None or b.get("high") is None:
        return [f"capacity bracket: none: {b.get('why')} ({took})"]
    lo_e, hi_e = b.get("low_evidence") or {}, b.get("high_evidence") or {}
    upper = "lowest not-PASS" + (", UNDECIDED counted as not passing" if b.get("high_not_fail") else "")
    width = b.get("width")
    out = [f"capacity bracket: {unit} {fmt_level(b['low'])} to {fmt_level(b['high'])} "
           f"(width {fmt_pct(width, 1)} of the lower end; {took}; stopped: {b.get('stopped_by')}: {b.get('why')})",
           f"  low  {unit} {fmt_level(b['low'])} (highest PASS): {_ev_text(lo_e)}",
           f"  high {unit} {fmt_level(b['high'])} ({upper}): {_ev_text(hi_e)}"]
    if b.get("not_acceptance_grade"):
        out.append(f"  (not acceptance-grade: {', '.join(b['not_acceptance_grade'])}: a quick check, not evidence "
                   "to size a deployment on)")
    if probes:
        out.append("  probes (by level): " + ", ".join(f"{fmt_level(p['level'])} {p['verdict']}"
                                            + ("" if p.get("delivered", True) else " (not delivered)") for p in probes))
    out += [f"  - {n}" for n in b.get("notes") or []]
    return out


__all__ = [
    "BUDGET", "INTERRUPTED", "NO_FAIL", "NO_PASS", "PRECISION", "UNDELIVERED",
    "Bracket", "Plan", "Point", "SearchSettings",
    "bracket", "capacity_bracket", "format_bracket", "midpoint", "parse_precision", "plan_next", "points_from_rows",
    "within",
]
