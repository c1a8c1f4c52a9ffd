"""Measured capacity and what limits it: ONE function for the console's sweep pane, `sweep` and `accept`.

``measure_capacity(rows, candidate)`` takes the level rows (one per level, round and file) with their
loop mode and returns a ``Capacity``: the per-level states of the primary mode (rounds combined by
``tui.core.levels.mode_tables``, the one rule), the measured capacity (the highest level that PASSes),
and the sentences that set it beside the memory-only candidate and explain what limits it (errors,
slow first tokens, queueing, TPOT growth, client saturation, falling goodput). The Monitor puts one
in every snapshot (``Snapshot.capacity``); the acceptance report and `servewatch sweep` call it on
their level rows. Pure, standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tui.core.levels import ModeTable, level_key, mode_tables, row_mode
from tui.core.snapshot_parts import LevelRow
from tui.core.states import FAIL, PASS
from tui.core.textfmt import fmt_level, fmt_pct


def _pct(v: float) -> str:
    return fmt_pct(v, 1)


@dataclass(frozen=True, slots=True)
class CapRow:
    """One level row with where it came from and its loop mode (the row's own, else the run header's)."""

    source: str
    mode: str | None
    row: LevelRow


@dataclass(frozen=True, slots=True)
class Capacity:
    mode: str | None  # the primary loop mode (closed before open); None: not recorded
    unit: str  # "concurrency", "req/s" or "level"
    tables: tuple[ModeTable, ...]  # one per loop mode, primary first
    n_by_level: tuple[tuple[str | None, float | None, int], ...]  # (mode, level, measured requests), all rounds
    capacity: float | None  # the highest level of the primary mode that PASSes (every round, every file)
    has_capacity: bool  # True with capacity None: the recorded load (no level recorded) PASSes
    candidate: int | None  # the memory-only candidate the limits compare with (as the budget gives it)
    limits: tuple[str, ...]  # capacity beside the candidate, then what limits it
    notes: tuple[str, ...]  # e.g. non-monotonic results
    axis_candidate: int | None  # the candidate as a mark on the level axis (None: not on it)
    axis_candidate_note: str | None  # why it is not on the axis ("no budget given", ...)

    @property
    def capacity_text(self) -> str:
        if self.has_capacity and self.capacity is None:
            return "the recorded load (no level recorded)"
        return f"{self.unit} {fmt_level(self.capacity)}"


def cap_rows(source: str, levels: Iterable[LevelRow], header: Mapping | None) -> list[CapRow]:
    return [CapRow(source, row_mode(r.mode, header), r) for r in levels]


class RunLevels(Protocol):
    """What ``snapshot_rows`` reads of a run: a ``tui.core.snapshot.Snapshot`` (which carries a ``Capacity``, so
    this module names its shape, not the class)."""

    @property
    def source(self) -> str: ...

    @property
    def levels(self) -> Sequence[LevelRow]: ...

    @property
    def header(self) -> Mapping[str, object]: ...


def snapshot_rows(snap: RunLevels, source: str | None = None) -> list[CapRow]:
    return cap_rows(source or snap.source, snap.levels, snap.header)


def axis_candidate(budget_candidate: int | None, fits: bool | None, mode: str | None) -> tuple[int | None, str | None]:
    """The memory-only candidate as a mark on the level axis, or (None, why not)."""
    if budget_candidate is None:
        return None, "no budget given"
    if not fits or budget_candidate < 1:
        return None, "budget does not fit"
    if mode == "open":  # levels are req/s, the candidate is a concurrency: not one axis
        return None, "a concurrency: not on this req/s axis"
    return budget_candidate, None


def budget_candidate(budget: object) -> tuple[int | None, bool | None]:
    """(memory-only candidate, fits) of a budget result; (None, None) without a budget."""
    if budget is None:
        return None, None
    cand = getattr(budget, "candidate", None)
    if not isinstance(cand, int) or isinstance(cand, bool):
        return None, None
    return cand, bool(getattr(budget, "fits", cand >= 1))


def goodput_drop(rows: Sequence[LevelRow], unit: str = "level") -> str | None:
    """Effective throughput can fall as load rises: one sentence when the highest level's goodput is
    more than 10% below the best level's (rows of one mode, ascending level)."""
    gp = [(r.level, r.window.goodput_per_s) for r in rows if r.window.goodput_per_s is not None]
    if len(gp) < 2:
        return None
    best = max(gp, key=lambda x: x[1])
    last = gp[-1]
    if last[0] == best[0] or not last[1] < 0.9 * best[1]:
        return None
    return (f"Goodput fell from {best[1]:.2f} good requests/s at {unit} {fmt_level(best[0])} to {last[1]:.2f} at "
            f"{unit} {fmt_level(last[0])}: more load delivered fewer good requests.")


def _diagnose(limiting: list[LevelRow], base_rows: list[LevelRow], unit: str) -> list[str]:
    """Why the limiting level does not pass: errors, slow TTFT, queueing, TPOT growth, client saturation."""
    out: list[str] = []
    n = sum(r.window.good.n for r in limiting)
    if not n:
        return out
    lvl = fmt_level(limiting[0].level)
    failed = sum(r.window.failed for r in limiting)
    slow = sum(r.window.slow for r in limiting)
    waits = [r.max_waiting for r in limiting if r.max_waiting is not None]
    tp = [r.window.tpot_ms_p50 for r in limiting if r.window.tpot_ms_p50 is not None]
    tp0 = [r.window.tpot_ms_p50 for r in base_rows if r.window.tpot_ms_p50 is not None]
    causes = []
    if failed:
        causes.append((failed / n, f"errors: {failed} of {n} requests failed ({_pct(failed / n)})"))
    if slow:
        causes.append((slow / n, (f"slow first tokens: {slow} of {n} requests completed with TTFT over the SLO "
                                 f"({_pct(slow / n)})")))
    causes.sort(key=lambda c: -c[0])
    out += [f"At {unit} {lvl}: " + "; ".join(c[1] for c in causes) + "." if causes else
            f"At {unit} {lvl}: no failed or slow requests, but the window is not yet conclusive."]
    if waits and max(waits) > 0:
        out.append(f"Queueing: the server queue held up to {max(waits):g} waiting requests at {unit} {lvl} "
                   "(queue records): requests waited for a free slot, which adds directly to TTFT.")
    elif waits:
        out.append(f"Queueing: the server reported no waiting requests at {unit} {lvl}.")
    else:
        out.append("Queueing: no server queue telemetry in the records.")
    if tp and tp0 and min(tp0) > 0 and limiting[0].level != base_rows[0].level:
        growth = max(tp) / min(tp0)
        out.append(f"TPOT: the median time per output token grew {growth:.1f}x from the lowest level "
                   f"({min(tp0):.1f} ms to {max(tp):.1f} ms)" + (": decoding slows as the batch grows." if growth >= 1.5
                                                                     else ", not the main limit."))
    if any(r.saturated for r in limiting):
        out.append("The load generator could not keep its schedule at this level (client saturated): "
                   "its results are not valid.")
    return out


def _versus_candidate(t: ModeTable, cap_txt: str, candidate: int | None, untested_above: bool) -> list[str]:
    """The measured capacity beside the memory-only candidate, in one sentence (or none)."""
    capacity, unit = t.capacity, t.unit
    if not t.has_capacity:
        return [("No level PASSes, so there is no measured capacity to set beside the memory-only "
                f"candidate{'' if candidate is None else f' ({candidate})'}.")]
    if t.mode != "closed":
        return [(f"Measured capacity {cap_txt} is a request rate; the memory-only candidate "
                f"{'' if candidate is None else f'({candidate} sequences) '}counts concurrent "
                "sequences, so the two are not directly comparable.")]
    if candidate is None or capacity is None:
        return []
    if capacity < candidate:
        if untested_above:
            return [(f"Measured capacity ({unit} {capacity:g}) is below the memory-only candidate "
                    f"({candidate}): latency limits the deployment before memory does.")]
        return [(f"Measured capacity is at least {unit} {capacity:g}, the highest level tested; "
                f"levels up to the memory-only candidate ({candidate}) were not tested, so "
                "the true capacity may be higher.")]
    if capacity == candidate:
        return [(f"Measured capacity equals the memory-only candidate ({candidate}): memory is "
                "the binding limit at this workload.")]
    return [(f"Measured capacity ({unit} {capacity:g}) exceeds the memory-only candidate "
            f"({candidate}): the budget assumes every sequence holds max_seq tokens; this "
            "workload's sequences are shorter. Full-length sequences would still be limited by memory.")]


def measure_capacity(rows: Iterable[CapRow], candidate: int | None = None, fits: bool | None = None) -> Capacity:
    """The measured capacity of these level rows and what limits it (see the module docstring).

    ``candidate``: the budget's memory-only candidate (None: no budget); ``fits``: whether the budget
    fits (only decides whether the candidate is drawn on the level axis; None: candidate >= 1)."""
    rows = sorted(rows, key=lambda c: (str(c.mode), level_key(c.row.level), c.row.round, c.source))
    tables = tuple(mode_tables((c.row.level, c.mode, c.row.verdict.state) for c in rows))
    n_by: dict[tuple[str | None, float | None], int] = {}
    for c in rows:
        n_by[(c.mode, c.row.level)] = n_by.get((c.mode, c.row.level), 0) + c.row.window.good.n
    fits_ = (candidate is not None and candidate >= 1) if fits is None else fits
    if not tables:
        ax, why = axis_candidate(candidate, fits_, None)
        return Capacity(None, "level", (), (), None, False, candidate, (), (), ax, why)
    t = tables[0]
    cap_txt = ("the recorded load (no level recorded)" if t.has_capacity and t.capacity is None
               else f"{t.unit} {fmt_level(t.capacity)}")
    notes = []
    if t.has_capacity:
        below_fail = [s for s in t.levels if s.state == FAIL and level_key(s.level) < level_key(t.capacity)]
        if below_fail:
            notes.append(f"non-monotonic results: {t.unit} {fmt_level(below_fail[0].level)} FAILed although "
                         f"{cap_txt} PASSed; repeat the ramp before trusting the capacity")
    mrows = [c.row for c in rows if c.mode == t.mode]
    above = [s for s in t.levels if s.state != PASS and (not t.has_capacity or level_key(s.level) > level_key(t.capacity))]
    limits = _versus_candidate(t, cap_txt, candidate, bool(above))
    if above:  # explain the first level that FAILs (the gate broke there); else the first one not yet passing
        failing = [s for s in above if s.state == FAIL]
        limiting_level = (failing or above)[0].level
        limiting = [r for r in mrows if r.level == limiting_level]
        if limiting:
            limits += _diagnose(limiting, [r for r in mrows if r.level == t.levels[0].level], t.unit)
    drop = goodput_drop(mrows, t.unit)
    if drop:
        limits.append(drop)
    ax, why = axis_candidate(candidate, fits_, t.mode)
    return Capacity(t.mode, t.unit, tables, tuple((m, lv, n) for (m, lv), n in n_by.items()), t.capacity,
                    t.has_capacity, candidate, tuple(limits), tuple(notes), ax, why)


__all__ = [
    "CapRow",
    "Capacity",
    "axis_candidate",
    "budget_candidate",
    "cap_rows",
    "goodput_drop",
    "measure_capacity",
    "snapshot_rows",
]
