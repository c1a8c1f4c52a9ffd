"""Severity classes (good / warn / bad / na) and the rule that colours a good fraction.

A vocabulary module at the bottom of ``tui.core``: it imports nothing from the project. The UI maps each class to
a theme variable (``$sw-good``, ``$sw-warn``, ``$sw-bad``, ...); it never decides one.
"""

from __future__ import annotations

from typing import Final, Literal

# Severity classes the UI maps to theme variables ($sw-good, $sw-warn, $sw-bad, ...)
Severity = Literal["good", "warn", "bad", "na"]
GOOD: Final = "good"
WARN: Final = "warn"
BAD: Final = "bad"
NA: Final = "na"

#: how far below the target a good fraction is still shown as a warning rather than bad
WARN_BAND: Final = 0.05


def fraction_severity(frac: float | None, target: float) -> Severity:
    """Green at/above target, yellow within 5 points below, red further below."""
    if frac is None:
        return NA
    if frac >= target:
        return GOOD
    if frac >= target - WARN_BAND:
        return WARN
    return BAD
