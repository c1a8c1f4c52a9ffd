"""Record format v1, its constants: the schema name and version, the record types, the error classes, the
wall-clock range of record times, and the two error types every reader reports (``RecordError``, ``LineIssue``).

The bottom of ``tui.core.records``: it imports nothing from the project.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

SCHEMA = "servewatch.record/1"
SCHEMA_VERSION = 1

PHASES = ("warmup", "measure")

#: Error classes a load generator writes into ``request.error``.
ERROR_CLASSES = (
    "connect",
    "connect_timeout",
    "read_timeout",
    "http_4xx",
    "http_429",
    "http_5xx",
    "stream_reset",
    "malformed_stream",
    "stream_error",
    "empty_response",
    "cancelled",
    "client",  # the client's own resources ran out (EMFILE, ENFILE, EADDRNOTAVAIL, ENOBUFS): not the server's
    "worker_lost",  # the load worker process that sent it died or got stuck: outcome unknown, counted failed
    "other",
)

# "seal": the digest chain's final record (tui.core.chain; docs/record-format.md "Digest chain"); "phase": a drill's
# phase (tui.core.phases; docs/record-format.md "phase")
KNOWN_TYPES = ("run", "request", "gpu", "queue", "budget", "step", "host", "watch", "seal", "phase")


class RecordError(ValueError):
    """A record that cannot be used: bad JSON, missing/ill-typed required field."""


#: Record times are epoch seconds of a real clock: from 2000-01-01 (anything earlier is a stamp that is not a wall
#: clock's, such as ``t_sent = 1.0``, which once gave a "window" of 30,000,001 minutes) to 2100-01-01.
T_MIN_EPOCH: Final = 946_684_800.0
T_MAX_EPOCH: Final = 4_102_444_800.0
#: the largest count (tokens, rounds, retries) a record may carry: 2**53, where a float still holds every integer
COUNT_MAX: Final = 2**53
INT_MAX: Final = 2**63


@dataclass(slots=True)
class LineIssue:
    """A line that could not be used, with where it came from."""

    source: str
    line: int
    reason: str
    kind: str = "malformed"  # "malformed" | "truncated" | "unknown_type"
    #: what the refused line was, as far as its raw JSON still says: True a measured request, False no request the
    #: verdict judges (another record type, a warmup request), None cannot tell (not JSON, truncated, no type)
    request: bool | None = None
    #: the (level, round) a refused measured request line still names; None: unknown (it may belong to any level)
    level_round: tuple[float | None, int] | None = None

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


def is_num(v: Any) -> bool:
    """A finite int or float (not a bool): what every numeric record field must be."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)
