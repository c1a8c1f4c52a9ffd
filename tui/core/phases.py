"""The drill's vocabulary (issue 39, ``servewatch drill``): its phases, disturbance kinds and verdicts, the durations
its flags take, and what the console draws of a drill (``DrillView``: the phases as bands, the recovery point as a
marker, one line for the verdict bar).

Low in ``tui.core`` (standard library only, nothing of the project): the record format reads phase records with it,
the snapshot carries a ``DrillView``; the drill's judgement is ``tui.core.drill``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

#: The three phases of a drill, in order (a phase record's ``name``).
PhaseName = Literal["baseline", "disturbance", "recovery"]
BASELINE: Final = "baseline"
DISTURBANCE: Final = "disturbance"
RECOVERY: Final = "recovery"
PHASE_NAMES: tuple[PhaseName, ...] = (BASELINE, DISTURBANCE, RECOVERY)
PHASE_EVENTS = ("start", "end")

#: What disturbs the service: the load multiplied for a time (``--spike``), a command (``--fault-cmd``), an operator's
#: act marked by a key or SIGUSR1 (``--fault-manual``).
DisturbanceKind = Literal["spike", "fault_cmd", "fault_manual"]
SPIKE: Final = "spike"
FAULT_CMD: Final = "fault_cmd"
FAULT_MANUAL: Final = "fault_manual"
DISTURBANCE_KINDS: tuple[DisturbanceKind, ...] = (SPIKE, FAULT_CMD, FAULT_MANUAL)

#: The drill's verdict (the values are what ``--json`` carries); exit 0 / 1 / 3.
DrillState = Literal["RECOVERED", "NOT_RECOVERED", "INSUFFICIENT"]
RECOVERED: Final = "RECOVERED"
NOT_RECOVERED: Final = "NOT_RECOVERED"
INSUFFICIENT: Final = "INSUFFICIENT"
DRILL_STATES: tuple[DrillState, ...] = (RECOVERED, NOT_RECOVERED, INSUFFICIENT)
DRILL_EXIT: dict[str, int] = {RECOVERED: 0, NOT_RECOVERED: 1, INSUFFICIENT: 3}
#: How the verdict reads in text ("NOT RECOVERED", as the issue writes it).
DRILL_WORDS: dict[str, str] = {RECOVERED: "RECOVERED", NOT_RECOVERED: "NOT RECOVERED", INSUFFICIENT: "INSUFFICIENT"}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_S = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
MAX_DURATION_S = 7 * 24 * 3600.0  # a week: longer is a typo, never a drill


def parse_duration(text: str) -> float:
    """``120s``, ``2m``, ``1.5min``, ``500ms``, ``1h`` or bare seconds (``90``) -> seconds (> 0, at most a week).
    Raises ValueError with the accepted forms."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"expected a duration such as 120s, 2m or 90 (seconds), got {str(text)[:40]!r}")
    unit = m.group(2).lower() if m.group(2) else None
    v = float(m.group(1)) * _UNIT_S[unit]
    if not (math.isfinite(v) and 0 < v <= MAX_DURATION_S):
        raise ValueError(f"a duration must be above 0 and at most a week, got {str(text)[:40]!r}")
    return v


def parse_spike(text: str) -> tuple[float, float]:
    """``--spike KxDUR``: ``3x:60s``, ``3x60s`` or ``2.5x:2m`` -> (factor, seconds); the factor above 1 and at most
    100. Raises ValueError."""
    s = str(text).strip()
    m = re.match(r"^(\d+(?:\.\d*)?)\s*[xX]\s*:?\s*(.+)$", s)
    if not m:
        raise ValueError(f"expected KxDURATION such as 3x:60s (the load times K for DURATION), got {s[:40]!r}")
    k = float(m.group(1))
    if not (math.isfinite(k) and 1 < k <= 100):
        raise ValueError(f"the spike's factor must be above 1 and at most 100, got {m.group(1)!r}")
    return k, parse_duration(m.group(2))


def fmt_duration(seconds: float | None) -> str:
    """A drill duration for text: ``"4 s"``, ``"2.5 s"``, ``"1 min 30 s"``; ``"N/A"`` when unknown."""
    if seconds is None or seconds != seconds:
        return "N/A"
    if seconds < 60:
        return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if s else f"{m} min"


def fmt_interval(low: float, high: float) -> str:
    """A time-to-recover interval: ``"3-4 s"``, ``"0 s"`` when both ends agree, ``"55 s-1 min 5 s"``."""
    if high <= low:
        return fmt_duration(high)
    a, b = fmt_duration(low), fmt_duration(high)
    if a.endswith(" s") and b.endswith(" s") and "min" not in a + b:
        return f"{a[:-2]}-{b}"
    return f"{a}-{b}"


def fmt_clock(seconds: float) -> str:
    """``m:ss`` (``"0:42"``, ``"12:05"``) for the console's "disturbance 0:42 ago"."""
    s = max(0, int(seconds))
    return f"{s // 60}:{s % 60:02d}"


@dataclass(frozen=True, slots=True)
class PhaseBand:
    """One phase on the drill's timeline (epoch seconds; ``end`` None while it runs)."""

    name: str  # baseline | disturbance | recovery
    start: float
    end: float | None
    label: str = ""  # "spike 3x", "fault: kill -9 ...", "operator's act"


@dataclass(frozen=True, slots=True)
class DrillView:
    """What the console shows of a drill: the phases as bands over the time from the drill's first phase to ``now``,
    the recovery point as a marker, and the verdict bar's line ("disturbance 0:42 ago, rolling good 62%, not yet
    recovered"). Computed by ``tui.core.drill.live``; the widgets only draw it."""

    bands: tuple[PhaseBand, ...]
    now: float
    recovery_point: float | None
    line: str
    state: str | None = None  # the drill's verdict once decided (RECOVERED / NOT_RECOVERED / INSUFFICIENT), else None
    rolling_good: float | None = None

    def cells(self, width: int) -> list[tuple[str, bool]]:
        """``width`` cells over [first phase start, now]: each cell's phase name ("" before any) and whether the
        recovery point falls in it (the marker)."""
        width = max(1, int(width))
        if not self.bands:
            return [("", False)] * width
        t0 = self.bands[0].start
        t1 = max(self.now, max((b.end or self.now) for b in self.bands))
        span = max(t1 - t0, 1e-9)
        out: list[tuple[str, bool]] = []
        mark = None
        if self.recovery_point is not None and t0 <= self.recovery_point <= t1:
            mark = min(width - 1, int((self.recovery_point - t0) / span * width))
        for i in range(width):
            mid = t0 + (i + 0.5) / width * span
            name = ""
            for b in self.bands:
                end = b.end if b.end is not None else self.now
                if b.start <= mid < end or (b.end is None and mid >= b.start):
                    name = b.name
            if not name:  # an instant phase (a marked act) still shows in its cell
                for b in self.bands:
                    if b.end is not None and b.end - b.start < span / width and t0 + i / width * span <= b.start < \
                            t0 + (i + 1) / width * span:
                        name = b.name
            out.append((name, i == mark))
        return out


def is_drill_header(header: Mapping | None) -> bool:
    """Whether a run header is a drill's (its ``load`` block holds ``drill``): here, low in the core, so a reader can
    tell a drill's file without importing the drill's judgement (``tui.core.drill``)."""
    load = header.get("load") if isinstance(header, Mapping) else None
    return isinstance(load, Mapping) and "drill" in load
