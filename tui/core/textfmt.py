"""Text formatting shared by the reports, the console snapshots and the acceptance documents (one definition each).

At the bottom of ``tui.core``: it imports nothing from the project.
"""

from __future__ import annotations

import math


def fmt_pct(v: float | None, digits: int = 0) -> str:
    """A fraction as a percentage (``0.953`` -> ``"95%"``); ``"N/A"`` when unknown."""
    return "N/A" if v is None else f"{100 * v:.{digits}f}%"


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
