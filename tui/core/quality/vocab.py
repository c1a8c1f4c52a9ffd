"""The quality contract's vocabulary: the result schema, the verdict states and their exit codes, the check types,
the defaults, the deterministic sampling, the request error classes and :class:`SetError`.
"""

from __future__ import annotations

from typing import Final, Literal

from tui.core.defaults import QUALITY_ALPHA, QUALITY_MARGIN, QUALITY_MIN_CASES, QUALITY_SEED
from tui.core.exitcodes import ExitCode

RESULT_SCHEMA = "servewatch.quality/1"

#: A quality comparison's state (the value is what the result file and --json carry).
QualityState = Literal["PASS", "FAIL", "NO_EVIDENCE", "NO_BASELINE"]
PASS: Final = "PASS"
FAIL: Final = "FAIL"
NO_EVIDENCE: Final = "NO_EVIDENCE"
NO_BASELINE: Final = "NO_BASELINE"
EXIT_CODES = {PASS: ExitCode.PASS, FAIL: ExitCode.FAIL, NO_EVIDENCE: ExitCode.INSUFFICIENT, NO_BASELINE: ExitCode.INSUFFICIENT}

CHECK_TYPES = ("exact", "contains", "not_contains", "regex", "json", "number")
DEFAULT_DEPTHS = (0.1, 0.5, 0.9)
DEFAULT_LONG_CONTEXT_TOKENS = 3000
DEFAULT_CHARS_PER_TOKEN = 4.0
DEFAULT_SEED = QUALITY_SEED
DEFAULT_MARGIN = QUALITY_MARGIN
DEFAULT_ALPHA = QUALITY_ALPHA
DEFAULT_MIN_CASES = QUALITY_MIN_CASES
MAX_TOKENS_LIMIT = 32768
EXCERPT_CHARS = 200
LOW_PASS_RATE = 0.5  # below this on both sides, a PASS carries a warning about absolute quality

#: Deterministic sampling sent with every request (non-streaming).
SAMPLING = {"temperature": 0.0, "top_p": 1.0, "seed": DEFAULT_SEED, "cache_prompt": False}

#: Error classes of a failed quality request.
ERROR_CLASSES = (
    "connect", "connect_timeout", "tls", "read_timeout", "stream_reset", "http_4xx", "http_429", "http_5xx",
    "malformed_response", "client", "other",
)
#: Error classes on the candidate's side that are scored as failed cases, never dropped: the server took the
#: request and then did not finish the answer (a candidate that hangs or resets on the hard cases must not
#: lose those pairs and so look better).
CANDIDATE_FAILURES = frozenset({"read_timeout", "stream_reset"})

#: Error classes that mean "no HTTP answer at all" (the same set as tui.sources.openai_http.TRANSPORT_ERRORS);
#: ``client``: the client's own resources ran out (file descriptors, ports): the pair is dropped and counted, never
#: scored against the server.
TRANSPORT_ERRORS = frozenset({"connect", "connect_timeout", "tls", "read_timeout", "stream_reset", "client", "other"})


class SetError(ValueError):
    """A regression set (or one of its lines) that cannot be used."""
