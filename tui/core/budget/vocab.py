"""The budget's shared terms: GiB, the saved-budget schema, the memory-only candidate's note, the verify tolerance
and :class:`BudgetError`.
"""

from __future__ import annotations

GIB = 2**30
SCHEMA = "servewatch.budget/1"

CANDIDATE_NOTE = (
    "The memory-only candidate is a concurrency number to load-test, not a concurrency limit: "
    "it counts memory only, and only a load test shows what the deployment sustains."
)

# Results saved in a budget file may be rounded for display; GiB figures must agree with the
# recomputation to within half of the last printed digit (0.01 GiB), counts must agree exactly.
VERIFY_TOLERANCE_GIB = 0.005


class BudgetError(ValueError):
    """Bad budget input, an unreadable budget file, or a saved budget that does not recompute."""
