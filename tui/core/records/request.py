"""The request record and the one outcome rule: good / slow / failed / excluded, and the TTFT derivation.

TTFT is derived (``t_first_token - t_sent``), never trusted from a field. The outcome names are the vocabulary of
``tui.core.outcomes``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tui.core.defaults import SLO_TTFT_MS
from tui.core.outcomes import CANCELLED, EXCLUDED, FAILED, GOOD, SLOW, Outcome


@dataclass(slots=True)
class RequestRecord:
    id: str
    t_sent: float
    t_end: float
    complete: bool
    t_intended: float
    t_first_token: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    error_detail: str | None = None
    phase: str = "measure"
    level: float | None = None
    round: int = 1
    token_offsets: list[float] | None = None
    retried: int = 0

    @property
    def ttft_ms(self) -> float | None:
        """Client TTFT in ms (the one derivation, ``outcome_rule``); None when no token arrived."""
        return _TTFT_ONLY(self)[1]

    @property
    def ttft(self) -> float | None:
        """Client TTFT in seconds (``ttft_ms / 1000``); None when no token arrived."""
        ms = _TTFT_ONLY(self)[1]
        return None if ms is None else ms / 1000.0

    @property
    def latency(self) -> float:
        return self.t_end - self.t_sent

    def outcome(self, slo_ttft_s: float) -> str:
        """``good`` | ``slow`` | ``failed`` | ``excluded``: ``outcome_rule`` with the SLO given in seconds."""
        return outcome_rule(slo_ttft_s * 1000.0)(self)[0]

    def is_good(self, slo_ttft_s: float) -> bool:
        """Completed AND TTFT within the SLO (``outcome_rule``). A fast failure is never good."""
        return self.outcome(slo_ttft_s) == GOOD


# ---------------------------------------------------------------- the rule (its one definition)


def slo_microseconds(slo_ttft_ms: float) -> float:
    """The SLO in whole microseconds, the resolution at which TTFTs are judged."""
    return float(round(slo_ttft_ms * 1000.0))


@functools.lru_cache(maxsize=32)
def outcome_rule(slo_ttft_ms: float) -> Callable[[RequestRecord], tuple[Outcome, float | None]]:
    """The good / slow / failed / excluded rule and the TTFT derivation, in ONE place.

    Returns ``classify(record) -> (outcome, ttft_ms)``, built once per SLO: the Monitor calls it for
    every request (its hot path), ``RequestRecord.outcome``/``is_good``/``ttft`` go through it too.

    - TTFT (ms) = ``(t_first_token - t_sent) * 1000``, ``None`` without a first token.
    - TTFT and elapsed times are judged in whole microseconds, rounded to the nearest: a TTFT is
      within the SLO when ``round_half_up(ttft_us) <= slo_us``. Epoch-second floats resolve about
      0.24 us, so a TTFT recorded as exactly the SLO (``t_first_token = t_sent + 1.0`` with an SLO of
      1000 ms) can come out as 999.99976 or 1000.00024 ms; at 1 us it is exactly the SLO, and good.
    - complete means ``complete: true``, no ``error``, and nothing in the record saying otherwise
      (``contradiction`` says which: an HTTP status, when given, of 2xx; a finish reason that is not an abort or an
      error; at least one output token when counted): a record that contradicts itself is failed.
    - ``good``: complete, a first token, TTFT within the SLO.
    - ``slow``: ``complete``, no ``error``, a first token, TTFT over the SLO.
    - ``excluded``: ``error == "cancelled"`` while the outcome was still open: a first token within
      the SLO, or no first token and ``t_end - t_sent`` (the time at the cancellation) within the SLO.
      It stays in the record file and is counted and shown, but is not judged.
    - ``failed``: everything else: not complete, an error, no first token. A cancelled request whose
      first token came after the SLO, or which had none when it had already waited longer than the
      SLO, is failed: it could no longer have been good.

    ``round_half_up(x)`` is ``(x + 0.5) // 1.0``: no function call on the hot path.
    """
    slo_us = slo_microseconds(slo_ttft_ms)

    def classify(r: RequestRecord) -> tuple[Outcome, float | None]:
        tf = r.t_first_token
        err = r.error
        if tf is None:
            if err == CANCELLED and ((r.t_end - r.t_sent) * 1000.0 * 1000.0 + 0.5) // 1.0 <= slo_us:
                return EXCLUDED, None  # no first token yet, but the SLO had not passed either
            return FAILED, None
        ttft = (tf - r.t_sent) * 1000.0
        if err is None:
            if r.complete:
                # the first three checks of ``contradiction`` (the hot path of every reader): 2xx, a finish reason that is not an
                # abort or an error, at least one output token
                st = r.http_status
                ot = r.output_tokens
                fr = r.finish_reason
                if ((st is None or 200 <= st < 300) and (ot is None or ot >= 1)
                        and (fr is None or fr not in BAD_FINISH_REASONS)):
                    return (GOOD if (ttft * 1000.0 + 0.5) // 1.0 <= slo_us else SLOW), ttft
            return FAILED, ttft
        if err == CANCELLED and (ttft * 1000.0 + 0.5) // 1.0 <= slo_us:
            return EXCLUDED, ttft
        return FAILED, ttft

    return classify


#: finish reasons that say the generation did not end normally (a record that says complete with one is not)
BAD_FINISH_REASONS: Final = frozenset({"abort", "error", "aborted", "cancelled"})


def contradiction(r: RequestRecord) -> str | None:
    """Why a record that says ``complete`` (and no error) contradicts itself, or None (shown and counted). A record
    that says complete is complete only if nothing else in it says otherwise: an HTTP status, when given, of 2xx; a
    finish reason, when given, that is not an abort or an error; at least one output token when a count is given
    (``outcome_rule`` applies the same three checks inline). Fewer tokens than asked is normal (a model may stop
    early) and not a contradiction."""
    if not r.complete or r.error is not None:
        return None
    if r.http_status is not None and not 200 <= r.http_status < 300:
        return f"complete with HTTP status {r.http_status}"
    if r.output_tokens is not None and r.output_tokens < 1:
        return "complete with 0 output tokens"
    if r.finish_reason is not None and r.finish_reason in BAD_FINISH_REASONS:
        return f"complete with finish reason {r.finish_reason!r}"
    if r.t_first_token is None:
        return "complete without a first token"
    return None


_TTFT_ONLY = outcome_rule(SLO_TTFT_MS)  # the TTFT part of the rule does not depend on the SLO
