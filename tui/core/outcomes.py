"""The request outcomes: the vocabulary of the one outcome rule (``tui.core.records.request.outcome_rule``).

A vocabulary module at the bottom of ``tui.core``: it imports nothing from the project, so every layer can name
an outcome without importing the record format.
"""

from __future__ import annotations

from typing import Final, Literal

#: A request's outcome (the value is what reports and --json carry).
Outcome = Literal["good", "slow", "failed", "excluded"]
GOOD: Final = "good"
SLOW: Final = "slow"
FAILED: Final = "failed"
EXCLUDED: Final = "excluded"
OUTCOMES: tuple[Outcome, ...] = (GOOD, SLOW, FAILED, EXCLUDED)

#: The error class of a request the client cancelled (``request.error``); excluded while its outcome was still open.
CANCELLED: Final = "cancelled"

#: The error class of a request the CLIENT could not carry out: its own resources ran out (file descriptors, local
#: ports, network buffers; ``tui.core.clientlimit``). Never the server's failure: unknown while its outcome was still
#: open (the rule of a cancellation), and a level with any cannot PASS.
CLIENT: Final = "client"
