"""Formatting for the console: numbers to short strings, severity classes to theme variables.

Pure presentation: nothing here computes a metric; it only turns values the
``Snapshot`` already holds into text. ``None`` always renders as ``N/A``.
"""

from __future__ import annotations

import math

from tui.core.textsafe import console

NA_TEXT = "N/A"

#: Severity class (tui.core.snapshot GOOD/WARN/BAD/NA) -> theme variable.
SEVERITY_VAR = {"good": "$sw-good", "warn": "$sw-warn", "bad": "$sw-bad", "na": "$sw-na"}
#: Request outcome -> theme variable.
OUTCOME_VAR = {"good": "$sw-good", "slow": "$sw-warn", "failed": "$sw-bad"}
#: Verdict state -> (words shown, theme variable).
VERDICT_STYLE = {
    "PASS": ("PASS", "$sw-good"),
    "FAIL": ("FAIL", "$sw-bad"),
    "UNDECIDED": ("UNDECIDED", "$sw-warn"),
    "INSUFFICIENT_WINDOW": ("INSUFFICIENT WINDOW", "$sw-warn"),
}


def esc(text: object) -> str:
    """Escape outside text (ids, file names, reasons) for Textual markup: ``tui.core.textsafe.console`` (every ``[``
    escaped, a trailing backslash shown as ``\\x5c``, control and format characters shown visibly). Textual's own
    ``escape`` left ``gpu[`` and ``x\\`` able to break the console's markup (a MarkupError: exit 70)."""
    return console(text)


def sev(text: str, severity: str | None, bold: bool = False) -> str:
    """Markup colouring ``text`` (already escaped) by a severity class."""
    var = SEVERITY_VAR.get(severity or "na", "$sw-na")
    return f"[{'bold ' if bold else ''}{var}]{text}[/]"


def na(text: str = NA_TEXT) -> str:
    return f"[$sw-na]{text}[/]"


def ms(v: float | None, unit: bool = True) -> str:
    if v is None:
        return NA_TEXT
    if math.isinf(v):
        return "inf"
    if v >= 100_000:
        return f"{v / 1000:.0f} s" if unit else f"{v / 1000:.0f}s"
    return f"{v:.0f} ms" if unit else f"{v:.0f}"


def pct(v: float | None, digits: int = 1) -> str:
    if v is None:
        return NA_TEXT
    return f"{100.0 * v:.{digits}f}%"


def interval(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return NA_TEXT
    return f"{100.0 * lo:.1f}–{100.0 * hi:.1f}%"


def gib(v: float | None, digits: int = 2) -> str:
    if v is None:
        return NA_TEXT
    return f"{v:.{digits}f} GiB"


def num(v: float | int | None, digits: int = 0) -> str:
    if v is None:
        return NA_TEXT
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else "-inf" if v < 0 else "nan"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def count(n: int) -> str:
    return f"{n:,d}"


def level(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:g}"


def duration(seconds: float | None) -> str:
    """H:MM:SS (record time, never wall clock)."""
    if seconds is None or not math.isfinite(seconds):
        return NA_TEXT
    s = max(0, int(seconds))
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def clip(text: str, width: int) -> str:
    """Cut plain text to ``width`` cells with an ellipsis."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def clip_left(text: str, width: int) -> str:
    """Cut plain text to ``width`` cells keeping its end (file names): '…/logs/run.jsonl'."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1):] if width > 1 else "…"


def bar(fraction: float | None, width: int) -> tuple[int, int]:
    """(filled, empty) cells for a 0..1 fraction."""
    if fraction is None or width <= 0:
        return 0, max(0, width)
    f = min(1.0, max(0.0, fraction))
    filled = int(round(f * width))
    return filled, width - filled


_SPARK = "▁▂▃▄▅▆▇█"


def spark(values, width: int, lo: float | None = None, hi: float | None = None) -> str:
    """A one-row sparkline string of the newest ``width`` values (empty string when none)."""
    vals = [v for v in values if v is not None and math.isfinite(v)][-max(0, width):]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = hi - lo
    if span <= 0:
        return _SPARK[0] * len(vals) if hi <= 0 else _SPARK[3] * len(vals)
    out = []
    for v in vals:
        i = int((min(hi, max(lo, v)) - lo) / span * (len(_SPARK) - 1) + 0.5)
        out.append(_SPARK[i])
    return "".join(out)
