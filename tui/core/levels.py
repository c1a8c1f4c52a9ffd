"""Which load level a measured verdict is about: one rule for `report`, `accept` and the console's sweep.

The judged level is ``required_level`` when given, else the highest level tested (of the primary mode:
closed loop before open loop). Several rounds (or files) of that level combine into one state: FAIL if
any FAILs, PASS only if all PASS, else the weakest of the rest. The measured capacity (the highest level
that PASSes) is reported beside it, never instead of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED
from tui.core.textfmt import fmt_level

UNITS = {"closed": "concurrency", "open": "req/s"}


class LevelNotInFile(ValueError):
    """A level asked for that the record files do not contain (a usage error: exit 2)."""

    def __init__(self, level: float, present: Sequence[float | None], unit: str = "level") -> None:
        self.level = level
        self.present = tuple(present)
        shown = ", ".join(fmt_level(x) for x in present) or "none"
        super().__init__(f"level {level:g} is not in the record file; levels present ({unit}): {shown}")


def level_key(level: float | None) -> float:
    return -math.inf if level is None else level


def combine_states(states: Iterable[str]) -> str:
    """One state for a level tested in several rounds/files: FAIL if any FAIL, PASS only if all PASS."""
    s = list(states)
    if not s:
        return INSUFFICIENT_WINDOW
    if FAIL in s:
        return FAIL
    if all(x == PASS for x in s):
        return PASS
    if INSUFFICIENT_WINDOW in s:
        return INSUFFICIENT_WINDOW
    return UNDECIDED


@dataclass(frozen=True, slots=True)
class JudgedLevel:
    level: float | None
    mode: str | None
    unit: str
    state: str
    rounds: int  # rows (rounds x files) combined at the judged level
    why: str  # "--required-level 4" or "the highest level tested"
    capacity: float | None  # highest PASSing level of the primary mode
    has_capacity: bool
    present: tuple[float | None, ...]  # levels of the primary mode, ascending

    def describe(self) -> str:
        """'judged level: concurrency 8 (the highest level tested) ...; measured capacity: concurrency 4'."""
        lvl = f"{self.unit} {fmt_level(self.level)}"
        cap = (f"{self.unit} {fmt_level(self.capacity)} (the highest level that PASSes)" if self.has_capacity
               else "none (no level PASSes)")
        rounds = f", {self.rounds} rounds combined" if self.rounds > 1 else ""
        return f"judged level: {lvl} ({self.why}{rounds}): {self.state}; measured capacity: {cap}"


def row_mode(row_mode_field: str | None, header: Mapping | None) -> str | None:
    """A level row's loop mode: its own, else the run header's load mode; only "closed"/"open" count."""
    if row_mode_field in ("closed", "open"):
        return row_mode_field
    ld = header.get("load") if header else None
    m = ld.get("mode") if isinstance(ld, Mapping) else None
    return m if m in ("closed", "open") else None


@dataclass(frozen=True, slots=True)
class LevelState:
    """One level of one loop mode: its rounds (and files) combined into one state."""

    level: float | None
    state: str
    rounds: int


@dataclass(frozen=True, slots=True)
class ModeTable:
    """The levels of one loop mode, ascending, and the measured capacity: the highest level that PASSes."""

    mode: str | None
    unit: str
    levels: tuple[LevelState, ...]
    capacity: float | None  # None with has_capacity True: the recorded load (no level recorded) PASSes
    has_capacity: bool

    def state_of(self, level: float | None) -> str:
        return next(s.state for s in self.levels if s.level == level)


def mode_tables(rows: Iterable[tuple[float | None, str | None, str]]) -> list[ModeTable]:
    """THE capacity rule. ``rows``: (level, mode, state) per level row (round, file). One table per loop
    mode, the primary mode (closed loop, then open loop) first; [] when there are no rows."""
    by_mode: dict[str | None, dict[float | None, list[str]]] = {}
    for lv, m, st in rows:  # one pass: the work per level stays the same however many levels there are
        by_mode.setdefault(m, {}).setdefault(lv, []).append(st)
    out = []
    for mode in sorted(by_mode, key=lambda m: (m != "closed", m != "open", str(m))):
        groups = by_mode[mode]
        present = sorted(groups, key=level_key)
        states = tuple(LevelState(lv, combine_states(groups[lv]), len(groups[lv])) for lv in present)
        passing = [s.level for s in states if s.state == PASS]
        out.append(ModeTable(mode, UNITS.get(str(mode), "level"), states, passing[-1] if passing else None,
                             bool(passing)))
    return out


def judge_level(rows: Iterable[tuple[float | None, str | None, str]], required_level: float | None = None) -> JudgedLevel | None:
    """``rows``: (level, mode, state) per level row (round, file). None when there are no rows.

    Raises LevelNotInFile when ``required_level`` is given and not among the primary mode's levels."""
    tables = mode_tables(rows)
    if not tables:
        if required_level is not None:
            raise LevelNotInFile(required_level, ())
        return None
    t = tables[0]
    present = tuple(s.level for s in t.levels)
    level: float | None
    if required_level is not None:
        if required_level not in present:
            raise LevelNotInFile(required_level, present, t.unit)
        level, why = required_level, f"--required-level {required_level:g}"
    else:
        level = present[-1]
        why = "the highest level tested" if len(present) > 1 else "the only level tested"
    at = next(s for s in t.levels if s.level == level)
    return JudgedLevel(
        level=level, mode=t.mode, unit=t.unit, state=at.state, rounds=at.rounds, why=why,
        capacity=t.capacity, has_capacity=t.has_capacity, present=present,
    )
