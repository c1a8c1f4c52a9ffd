"""Text formatting shared by the reports, the console snapshots and the acceptance documents (one definition each).

At the bottom of ``tui.core``: it imports nothing from the project.
"""

from __future__ import annotations


def fmt_pct(v: float | None, digits: int = 0) -> str:
    """A fraction as a percentage (``0.953`` -> ``"95%"``); ``"N/A"`` when unknown."""
    return "N/A" if v is None else f"{100 * v:.{digits}f}%"


def fmt_level(level: float | None) -> str:
    """A load level as written in tables (``"-"`` for a run without levels)."""
    return "-" if level is None else f"{level:g}"
