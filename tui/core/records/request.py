"""The request record and the TTFT-only outcome rule (the one rule is ``tui.core.slos.slo_rule``).

TTFT is derived (``t_first_token - t_sent``, or the first answer token's time when the stream carried reasoning),
never trusted from a field. The outcome names are the vocabulary of
``tui.core.outcomes``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from tui.core.outcomes import GOOD, Outcome
from tui.core.slos import BAD_FINISH_REASONS as BAD_FINISH_REASONS
from tui.core.slos import Slos, answer_ttft_ms, slo_rule
from tui.core.slos import slo_microseconds as slo_microseconds


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
    # issue 21 (all optional; docs/record-format.md; the derivations in tui.core.slos)
    t_first_answer: float | None = None  # first ANSWER token; None when the stream carried no reasoning
    t_first_reasoning: float | None = None  # first reasoning token; None when none
    t_last_token: float | None = None  # last token of any kind
    output_chunks: int | None = None  # token-carrying chunks seen (reasoning + answer)
    reasoning_chunks: int | None = None  # of which reasoning
    usage_output_tokens: int | None = None  # the server's usage.completion_tokens
    usage_input_tokens: int | None = None  # usage.prompt_tokens
    usage_reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens
    itl_max_ms: float | None = None  # the largest gap between two consecutive tokens
    itl_p50_ms: float | None = None  # gap quantiles of this request (nearest rank)
    itl_p95_ms: float | None = None
    input_tokens_asked: int | None = None  # the prompt length the load generator asked for (input_tokens: the server's)
    output_tokens_asked: int | None = None  # the output length it asked for (max_tokens)
    # issue 23, session workloads (all optional; absent: not a session workload)
    session: str | None = None  # "<run id>-s<seq>": the conversation this request is a turn of
    turn: int | None = None  # its turn, 1-based
    context_tokens: int | None = None  # tokens of the whole prompt as sent (prefix + history + this user message)
    # issue 23: prompt tokens the server says it served from its prefix cache (None: it did not say), and where
    # the figure came from ("usage.prompt_tokens_details" or "llama.cpp timings.cache_n"; tui.core.prefix_cache)
    cached_tokens: int | None = None
    cached_tokens_source: str | None = None
    # issue 41: an embeddings answer (``--api embeddings``): the length of the vector returned. Such an answer
    # streams no tokens: complete without a first token, judged on E2E; TTFT, TPOT and ITL not judgeable
    embedding_dim: int | None = None

    @property
    def ttft_ms(self) -> float | None:
        """Client (answer) TTFT in ms (the one derivation, ``outcome_rule``); None when no (answer) token arrived."""
        return answer_ttft_ms(self)

    @property
    def ttft(self) -> float | None:
        """Client TTFT in seconds (``ttft_ms / 1000``); None when no token arrived."""
        ms = answer_ttft_ms(self)
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


# ---------------------------------------------------------------- the rule (its one definition: tui.core.slos)


@functools.lru_cache(maxsize=32)
def outcome_rule(slo_ttft_ms: float) -> Callable[[RequestRecord], tuple[Outcome, float | None]]:
    """The TTFT-only special case of the one rule (``tui.core.slos.slo_rule``): ``classify(record) -> (outcome,
    ttft_ms)`` with the TTFT SLO ``slo_ttft_ms`` (the answer TTFT: the first token when the stream carried no
    reasoning) and no other SLO in force. Judged in whole microseconds (a TTFT exactly at the SLO is within it);
    ``tui.core.slos`` documents the rule (good / slow / failed / excluded, the cancellation rule, the
    self-contradicting records)."""
    rule = slo_rule(Slos(ttft_ms=slo_ttft_ms))

    def classify(r: RequestRecord) -> tuple[Outcome, float | None]:
        outcome, ttft, _ = rule(r)
        return outcome, ttft

    return classify


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
    if r.t_first_token is None and r.embedding_dim is None:  # an embeddings answer streams no token
        return "complete without a first token"
    return None

