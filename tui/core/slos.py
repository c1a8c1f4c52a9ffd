"""The SLOs a serving team signs (TTFT, TPOT, inter-token latency, end to end) and the ONE outcome rule.

A request is **good** when it completed AND meets every SLO in force (``Slos.in_force``); an SLO set to None is
off (not judged). Each metric has one derivation here (``metric_values``), and the rule (``slo_rule``) says, per
request, its outcome, the TTFT judged and which SLOs it missed (``MISS_*`` bits) or could not be judged on
(``NOJUDGE_*`` bits: the record lacks a field the SLO needs; never good). ``tui.core.records.request.outcome_rule``
is the TTFT-only special case of this rule.

Derivations (docs/statistics.md):

- answer TTFT = ``(t_first_answer if t_first_reasoning is not None else t_first_token) - t_sent``; any TTFT =
  ``t_first_token - t_sent``. A stream that reasoned and never answered has no answer TTFT: with the TTFT SLO on
  ``answer`` it missed the SLO (the user never saw an answer).
- TPOT = ``(t_last_token - t_first_token) * 1000 / (tokens - 1)`` with tokens = ``usage_output_tokens``, else
  ``output_chunks``, else ``output_tokens``; needs ``t_last_token`` and tokens >= 2.
- ITL = ``itl_max_ms`` (the largest gap between two consecutive tokens), else from ``token_offsets``.
- E2E = ``(t_last_token if not None else t_end) - t_sent``.
- every time is judged in whole microseconds, rounded to the nearest (``round_half_up(x_us) <= slo_us``): a value
  recorded as exactly its SLO is within it, whatever the float noise of epoch seconds.
- a request with fewer than 2 tokens and a last-token time has no inter-token time: TPOT and ITL are met
  vacuously (nothing to judge: no gap the user could have seen); without a last-token time (older files) TPOT
  and ITL cannot be judged.

This module imports nothing but the vocabularies: ``tui.core.records`` builds on it (the record type is any
object with the request record's attributes, ``TimedRequest``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

import tui.core.defaults as defaults
from tui.core.outcomes import CANCELLED, CLIENT, EXCLUDED, FAILED, GOOD, SLOW, Outcome

TtftOf = Literal["answer", "any"]
TTFT_OF: tuple[TtftOf, ...] = ("answer", "any")

#: the SLO names, in the order they are shown and judged
SLO_NAMES: Final = ("TTFT", "TPOT", "ITL", "E2E")
MISS_TTFT, MISS_TPOT, MISS_ITL, MISS_E2E = 1, 2, 4, 8
MISS_BITS: Final = (MISS_TTFT, MISS_TPOT, MISS_ITL, MISS_E2E)
#: "not judgeable" bits: the miss bit shifted left by NOJUDGE_SHIFT (an SLO in force the record lacks a field for)
NOJUDGE_SHIFT: Final = 4
NOJUDGE_TTFT, NOJUDGE_TPOT, NOJUDGE_ITL, NOJUDGE_E2E = 16, 32, 64, 128
MISS_MASK: Final = 15

#: what each SLO needs that a record may lack (the sentence of "not judgeable")
NEEDS: Final = {
    "TTFT": "first-token times",
    "TPOT": "last-token times",
    "ITL": "inter-token gaps (itl_max_ms or token_offsets)",
    "E2E": "end times",
}

#: finish reasons that say the generation did not end normally (a record that says complete with one is not)
BAD_FINISH_REASONS: Final = frozenset({"abort", "error", "aborted", "cancelled"})


class TimedRequest(Protocol):
    """What the rule reads of a request record (``tui.core.records.request.RequestRecord`` has it all)."""

    @property
    def t_sent(self) -> float: ...
    @property
    def t_end(self) -> float: ...
    @property
    def complete(self) -> bool: ...
    @property
    def t_first_token(self) -> float | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def http_status(self) -> int | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def token_offsets(self) -> list[float] | None: ...
    @property
    def t_first_answer(self) -> float | None: ...
    @property
    def t_first_reasoning(self) -> float | None: ...
    @property
    def t_last_token(self) -> float | None: ...
    @property
    def output_chunks(self) -> int | None: ...
    @property
    def usage_output_tokens(self) -> int | None: ...
    @property
    def itl_max_ms(self) -> float | None: ...


def _check_ms(name: str, v: float | None) -> None:
    if v is not None and not (v > 0 and v != float("inf")):
        raise ValueError(f"the {name} SLO must be a number of milliseconds > 0 (or off), got {v!r}")


@dataclass(frozen=True, slots=True)
class Slos:
    """The SLOs in force (milliseconds; None: off, not judged) and which TTFT the TTFT SLO judges."""

    ttft_ms: float | None = defaults.SLO_TTFT_MS
    tpot_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None
    ttft_of: TtftOf = "answer"
    #: what the TTFT of the file judged is, when it is not servewatch's own (an import: "first chunk, as vllm
    #: bench measures"); shown instead of "answer" / "any" (``describe``, the JSON's ``ttft_of``)
    ttft_label: str | None = None

    def __post_init__(self) -> None:
        for name, v in zip(SLO_NAMES, self.limits()):
            _check_ms(name, v)
        if self.ttft_of not in TTFT_OF:
            raise ValueError(f"ttft_of must be one of {TTFT_OF}, got {self.ttft_of!r}")

    def limits(self) -> tuple[float | None, float | None, float | None, float | None]:
        """(ttft_ms, tpot_ms, itl_ms, e2e_ms), in the order of ``SLO_NAMES``."""
        return self.ttft_ms, self.tpot_ms, self.itl_ms, self.e2e_ms

    def in_force(self) -> tuple[str, ...]:
        """The names of the SLOs judged, in the order of ``SLO_NAMES`` ("TTFT", "TPOT", ...)."""
        return tuple(name for name, v in zip(SLO_NAMES, self.limits()) if v is not None)

    def ttft_shown(self) -> str:
        """Which TTFT is judged, in words: "answer", "any", or another tool's definition (``ttft_label``)."""
        return self.ttft_label or self.ttft_of

    def describe(self) -> str:
        """"TTFT <= 1000 ms (answer), TPOT <= 50 ms"; "no latency SLO (completion only)" with every SLO off."""
        parts = []
        for name, v in zip(SLO_NAMES, self.limits()):
            if v is not None:
                parts.append(f"{name} <= {v:g} ms" + (f" ({self.ttft_shown()})" if name == "TTFT" else ""))
        return ", ".join(parts) if parts else "no latency SLO (completion only)"


def slo_microseconds(slo_ms: float) -> float:
    """An SLO in whole microseconds, the resolution at which times are judged."""
    return float(round(slo_ms * 1000.0))


def miss_names(bits: int) -> tuple[str, ...]:
    """The SLO names of the miss bits (the low nibble), in order: ``miss_names(3) == ("TTFT", "TPOT")``."""
    return tuple(name for name, b in zip(SLO_NAMES, MISS_BITS) if bits & b)


def nojudge_names(bits: int) -> tuple[str, ...]:
    """The SLO names of the not-judgeable bits (the high nibble), in order."""
    return miss_names(bits >> NOJUDGE_SHIFT)


def combo_name(bits: int) -> str:
    """"TTFT+TPOT" for the miss bits 3 (the key of ``WindowStat.miss_combos``)."""
    return "+".join(miss_names(bits))


# ---------------------------------------------------------------- the derivations (one definition each)


def answer_ttft_ms(r: TimedRequest) -> float | None:
    """Time to the first ANSWER token (ms): the first token when the stream carried no reasoning."""
    tf = r.t_first_answer if r.t_first_reasoning is not None else r.t_first_token
    return None if tf is None else (tf - r.t_sent) * 1000.0


def any_ttft_ms(r: TimedRequest) -> float | None:
    """Time to the first token of any kind, reasoning or answer (ms)."""
    tf = r.t_first_token
    return None if tf is None else (tf - r.t_sent) * 1000.0


def tpot_tokens(r: TimedRequest) -> int | None:
    """The output length TPOT divides by: the server's ``usage`` count, else the chunks seen, else the client's."""
    n = r.usage_output_tokens
    if n is None:
        n = r.output_chunks
        if n is None:
            n = r.output_tokens
    return n


def tpot_ms(r: TimedRequest) -> float | None:
    """(last token - first token) / (tokens - 1), ms; None without a last-token time or with fewer than 2 tokens."""
    tl = r.t_last_token
    tf = r.t_first_token
    n = tpot_tokens(r)
    if tl is None or tf is None or n is None or n < 2:
        return None
    return (tl - tf) * 1000.0 / (n - 1)


def itl_ms(r: TimedRequest) -> float | None:
    """The largest gap between two consecutive tokens (ms): ``itl_max_ms``, else from ``token_offsets``."""
    v = r.itl_max_ms
    if v is not None:
        return v
    offs = r.token_offsets
    if offs is not None and len(offs) >= 2:
        return max(b - a for a, b in zip(offs, offs[1:])) * 1000.0
    return None


def e2e_ms(r: TimedRequest) -> float:
    """Request sent to last token (ms); ``t_end`` stands in without a last-token time (it is never earlier)."""
    tl = r.t_last_token
    return ((r.t_end if tl is None else tl) - r.t_sent) * 1000.0


def metric_values(r: TimedRequest, ttft_of: TtftOf = "answer") -> tuple[float | None, float | None, float | None,
                                                                      float | None]:
    """(ttft_ms, tpot_ms, itl_ms, e2e_ms) of one request; None where the record cannot give it."""
    ttft = answer_ttft_ms(r) if ttft_of == "answer" else any_ttft_ms(r)
    return ttft, tpot_ms(r), itl_ms(r), e2e_ms(r)


def _no_gap(r: TimedRequest) -> bool:
    """Fewer than 2 tokens with a last-token time: no inter-token time exists (TPOT and ITL met vacuously)."""
    if r.t_last_token is None:
        return False
    n = r.output_chunks
    if n is None:
        n = tpot_tokens(r)
    return n is not None and n < 2


# ---------------------------------------------------------------- the rule (its one definition)


def _complete(r: TimedRequest) -> bool:
    """complete, no error, and nothing in the record saying otherwise (2xx when given, a finish reason that is not
    an abort or an error, at least one output token when counted): the inline checks of ``contradiction``."""
    st = r.http_status
    ot = r.output_tokens
    fr = r.finish_reason
    return ((st is None or 200 <= st < 300) and (ot is None or ot >= 1)
            and (fr is None or fr not in BAD_FINISH_REASONS))


Rule = Callable[[TimedRequest], tuple[Outcome, float | None, int]]


@functools.lru_cache(maxsize=64)
def slo_rule(slos: Slos) -> Rule:
    """The good / slow / failed / excluded rule, in ONE place: ``classify(record) -> (outcome, ttft_ms, misses)``.

    Built once per ``Slos`` (the Monitor calls it for every request: its hot path).

    - ``ttft_ms``: the TTFT judged (``slos.ttft_of``), also when the TTFT SLO is off (shown); None without one.
    - ``good``: complete (``_complete``), a first token, and every SLO in force met.
    - ``slow``: complete, a first token, some SLO in force missed or not judgeable; ``misses`` says which (the
      ``MISS_*`` bits, the ``NOJUDGE_*`` bits above them).
    - ``excluded``: ``error == "cancelled"`` while the outcome was still open: no SLO in force already missed at
      the cancellation (TTFT: a first token within it, or none yet and the time at the cancellation within it;
      E2E: the time at the cancellation within it; ITL: the largest gap seen within it). Counted and shown, not
      judged.
    - ``excluded`` also: ``error == "client"`` (the client's own resources ran out, ``tui.core.clientlimit``) while
      the outcome was still open, by the same test as a cancellation: unknown, never the server's failure (the
      Monitor judges it good for the FAIL side only and forbids PASS). With an HTTP status the server answered:
      the record contradicts itself and is ``failed``.
    - ``excluded`` also: completed, no SLO in force missed, but one could not be judged (the record lacks what it
      needs: its NOJUDGE bit is set): not evidence either way; the Monitor counts it per SLO and blocks PASS.
    - ``failed``: everything else: not complete, an error, no first token; ``misses`` is 0.
    - values are judged in whole microseconds, rounded to the nearest: ``(x_ms * 1000 + 0.5) // 1 <= slo_us``.
    """
    ttft_lim, tpot_lim, itl_lim, e2e_lim = (None if v is None else slo_microseconds(v) for v in slos.limits())
    answer = slos.ttft_of == "answer"
    if tpot_lim is None and itl_lim is None and e2e_lim is None:
        return _ttft_only_rule(ttft_lim, answer)

    def classify(r: TimedRequest) -> tuple[Outcome, float | None, int]:
        t_sent = r.t_sent
        tf = r.t_first_token
        if answer and r.t_first_reasoning is not None:
            ta = r.t_first_answer
        else:
            ta = tf
        ttft = None if ta is None else (ta - t_sent) * 1000.0
        err = r.error
        if tf is None or err is not None or not r.complete or not _complete(r):
            if err != CANCELLED and (err != CLIENT or r.http_status is not None):
                return FAILED, ttft, 0
            el = (r.t_end - t_sent) * 1000.0
            if ttft_lim is not None and ((ttft if ttft is not None else el) * 1000.0 + 0.5) // 1.0 > ttft_lim:
                return FAILED, ttft, 0
            if e2e_lim is not None and (el * 1000.0 + 0.5) // 1.0 > e2e_lim:
                return FAILED, ttft, 0
            if itl_lim is not None:
                gap = itl_ms(r)
                if gap is not None and (gap * 1000.0 + 0.5) // 1.0 > itl_lim:
                    return FAILED, ttft, 0
            return EXCLUDED, ttft, 0
        misses = 0
        if ttft_lim is not None and (ttft is None or (ttft * 1000.0 + 0.5) // 1.0 > ttft_lim):
            misses = MISS_TTFT  # no answer token after reasoning: the user never saw an answer
        if tpot_lim is not None:
            v = tpot_ms(r)
            if v is None:
                if not _no_gap(r):
                    misses |= NOJUDGE_TPOT
            elif (v * 1000.0 + 0.5) // 1.0 > tpot_lim:
                misses |= MISS_TPOT
        if itl_lim is not None:
            v = itl_ms(r)
            if v is None:
                if not _no_gap(r):
                    misses |= NOJUDGE_ITL
            elif (v * 1000.0 + 0.5) // 1.0 > itl_lim:
                misses |= MISS_ITL
        if e2e_lim is not None and (e2e_ms(r) * 1000.0 + 0.5) // 1.0 > e2e_lim:
            misses |= MISS_E2E
        if misses & MISS_MASK:
            return SLOW, ttft, misses
        # nothing missed, but an SLO in force could not be judged: not evidence either way (counted, shown, and
        # PASS is blocked; never counted against the deployment as a miss it was not seen to make)
        return (EXCLUDED if misses else GOOD), ttft, misses

    return classify


def _ttft_only_rule(slo_us: float | None, answer: bool) -> Rule:
    """``slo_rule`` when no SLO but TTFT is in force (the default): the same rule, fewer reads per request."""
    lim = float("inf") if slo_us is None else slo_us

    def classify(r: TimedRequest) -> tuple[Outcome, float | None, int]:
        tf = r.t_first_token
        err = r.error
        if tf is None:
            if _open_error(r, err) and ((r.t_end - r.t_sent) * 1000.0 * 1000.0 + 0.5) // 1.0 <= lim:
                return EXCLUDED, None, 0  # no first token yet, but the SLO had not passed either
            return FAILED, None, 0
        if answer and r.t_first_reasoning is not None:
            ta = r.t_first_answer
            if ta is None:  # reasoning, no answer token (yet)
                if err is None and r.complete and _complete(r):
                    return (GOOD, None, 0) if slo_us is None else (SLOW, None, MISS_TTFT)
                if _open_error(r, err) and ((r.t_end - r.t_sent) * 1000.0 * 1000.0 + 0.5) // 1.0 <= lim:
                    return EXCLUDED, None, 0
                return FAILED, None, 0
            tf = ta
        ttft = (tf - r.t_sent) * 1000.0
        if err is None:
            if r.complete:
                # the first three checks of ``contradiction`` (the hot path of every reader), inline
                st = r.http_status
                ot = r.output_tokens
                fr = r.finish_reason
                if ((st is None or 200 <= st < 300) and (ot is None or ot >= 1)
                        and (fr is None or fr not in BAD_FINISH_REASONS)):
                    if (ttft * 1000.0 + 0.5) // 1.0 <= lim:
                        return GOOD, ttft, 0
                    return SLOW, ttft, MISS_TTFT
            return FAILED, ttft, 0
        if _open_error(r, err) and (ttft * 1000.0 + 0.5) // 1.0 <= lim:
            return EXCLUDED, ttft, 0
        return FAILED, ttft, 0

    return classify


def _open_error(r: TimedRequest, err: str | None) -> bool:
    """An error that leaves the outcome open (judged by the cancellation test): a cancellation, or a failure of the
    client's own resources (``client``) that carries no HTTP status (with one, the server answered)."""
    return err == CANCELLED or (err == CLIENT and r.http_status is None)


# ------------------------------------------------------------------ the run header's ``slo`` block


def header_block(slos: Slos, target: float) -> dict:
    """The run header's ``slo`` block (docs/record-format.md): every SLO in force (ms; None: off), which TTFT the
    TTFT SLO judges, their names and sentence, and the target."""
    return {"ttft_ms": slos.ttft_ms, "tpot_ms": slos.tpot_ms, "itl_ms": slos.itl_ms, "e2e_ms": slos.e2e_ms,
            "ttft_of": slos.ttft_of, "in_force": list(slos.in_force()), "text": slos.describe(), "target": target}


def from_header_block(block: object) -> Slos | None:
    """The SLOs a run header's ``slo`` block records; older files carry only ``ttft_ms`` (the TTFT SLO alone, the
    answer TTFT). None when the block is absent or says nothing usable (a value that is not a positive number reads
    as off; an unknown ``ttft_of`` as ``answer``)."""
    if not isinstance(block, dict):
        return None

    def ms(key: str) -> float | None:
        v = block.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
            return None
        return float(v)

    vals = {k: ms(k) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")}
    if all(v is None for v in vals.values()) and "in_force" not in block:
        return None
    of = block.get("ttft_of")
    return Slos(ttft_ms=vals["ttft_ms"], tpot_ms=vals["tpot_ms"], itl_ms=vals["itl_ms"], e2e_ms=vals["e2e_ms"],
                ttft_of=of if of in TTFT_OF else "answer")
