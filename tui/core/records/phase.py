"""A drill's phase record (``servewatch drill``, issue 39; docs/record-format.md ``phase``): validated here, read
by ``tui.core.drill``.
"""

from __future__ import annotations

from tui.core.phases import PHASE_EVENTS, PHASE_NAMES
from tui.core.records.model import PhaseRecord
from tui.core.records.schema import COUNT_MAX, RecordError, is_num


def _num(d: dict, key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if not is_num(v):
        raise RecordError(f"field {key!r} must be a finite number, got {v!r:.40}")
    return float(v)


def parse_phase(d: dict) -> PhaseRecord:
    """A drill's phase record: a known name and event, a time, and the step it names (both or neither of ``level``
    and ``round``); anything else makes the line a bad line (file and line, counted)."""
    name, ev = d.get("name"), d.get("event")
    if name not in PHASE_NAMES:
        raise RecordError("field 'name' of a phase must be 'baseline', 'disturbance' or 'recovery'")
    if ev not in PHASE_EVENTS:
        raise RecordError("field 'event' of a phase must be 'start' or 'end'")
    t = _num(d, "t")
    if t is None:
        raise RecordError("missing required field 't'")
    level = _num(d, "level")
    rnd = d.get("round")
    if rnd is not None and not (type(rnd) is int and 1 <= rnd <= COUNT_MAX):
        raise RecordError(f"field 'round' of a phase must be a whole number >= 1, got {rnd!r:.40}")
    if (level is None) != (rnd is None) or (level is not None and level <= 0):
        raise RecordError("a phase names its step with both 'level' (> 0) and 'round' (>= 1), or neither")
    info = {k: v for k, v in d.items() if k not in ("type", "t", "name", "event", "level", "round")}
    return PhaseRecord(t=t, name=name, event=ev, level=level, round=rnd, info=info)
