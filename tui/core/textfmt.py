"""Text formatting shared by the reports, the console snapshots and the acceptance documents (one definition each).

At the bottom of ``tui.core``: it imports nothing from the project.
"""

from __future__ import annotations

import math


def fmt_pct(v: float | None, digits: int = 0) -> str:
    """A fraction as a percentage (``0.953`` -> ``"95%"``); ``"N/A"`` when unknown."""
    return "N/A" if v is None else f"{100 * v:.{digits}f}%"


def fmt_span(seconds: float) -> str:
    """A duration of evidence already collected, never rounded up (``fmt_minutes`` rounds up, as a time still
    needed should be): ``"40 s"``, ``"1 min 6 s"`` under 10 minutes, whole minutes rounded down above
    (``"12 min"``), ``"0 s"`` for none and ``"an unknown time"`` for NaN."""
    if seconds != seconds:
        return "an unknown time"
    if seconds <= 0:
        return "0 s"
    if seconds > 6e7:
        return "over 1e6 min"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 60} min"


def fmt_minutes(seconds: float) -> str:
    """A duration in whole minutes rounded up (``"7 min"``), in whole seconds under a minute (``"40 s"``); a bound
    beyond 1e6 minutes (and for +inf), ``"0 s"`` for none, and ``"an unknown time"`` for NaN: never a made-up
    figure or an OverflowError."""
    if seconds != seconds:  # NaN: a time nobody can state
        return "an unknown time"
    if seconds > 6e7:  # over 1e6 minutes (and +inf)
        return "over 1e6 min"
    if seconds <= 0:  # (and -inf)
        return "0 s"
    m = seconds / 60.0
    if m >= 1:
        return f"{math.ceil(m - 1e-9)} min"
    return f"{math.ceil(seconds)} s"


def fmt_level(level: float | None) -> str:
    """A load level as written in tables (``"-"`` for a run without levels)."""
    return "-" if level is None else f"{level:g}"
