"""The verdict states: the vocabulary every judge, report and screen shares.

A vocabulary module at the bottom of ``tui.core``: it imports nothing from the project.
"""

from __future__ import annotations

from typing import Final, Literal

# Verdict states (the values are what records, reports and --json carry)
VerdictState = Literal["INSUFFICIENT_WINDOW", "UNDECIDED", "PASS", "FAIL"]
INSUFFICIENT_WINDOW: Final = "INSUFFICIENT_WINDOW"
UNDECIDED: Final = "UNDECIDED"
PASS: Final = "PASS"
FAIL: Final = "FAIL"
