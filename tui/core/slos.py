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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

import tui.core.defaults as defaults
from tui.core.outcomes import CANCELLED, CLIENT, EXCLUDED, FAILED, GOOD, SLOW, Outcome

TtftOf = Literal["answer", "any"]
TTFT_OF: tuple[TtftOf, ...] = ("answer", "any")

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
    @property
    def embedding_dim(self) -> int | None: ...


def _check_ms(name: str, v: float | None) -> None:
    if v is not None and not (v > 0 and v != float("inf")):
        raise ValueError(f"the {name} SLO must be a number of milliseconds > 0 (or off), got {v!r}")


@dataclass(frozen=True, slots=True)
class Slos:
    """The SLOs in force (milliseconds; None: off, not judged) and which TTFT the TTFT SLO judges.

    ``table``: the SLO kinds judged (``SLO_TABLE``; a longer table adds kinds after the four, whose limits are
    ``more``, in the table's order: ``Slos.of`` builds one from the table's keys)."""

    ttft_ms: float | None = defaults.SLO_TTFT_MS
    tpot_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None
    ttft_of: TtftOf = "answer"
    #: what the TTFT of the file judged is, when it is not servewatch's own (an import: "first chunk, as vllm
    #: bench measures"); shown instead of "answer" / "any" (``describe``, the JSON's ``ttft_of``)
    ttft_label: str | None = None
    table: tuple[SloKind, ...] = field(default=(), repr=False)
    more: tuple[float | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.table:
            object.__setattr__(self, "table", SLO_TABLE)
        if tuple(k.key for k in self.table[:4]) != BUILTIN_KEYS:
            raise ValueError("an SLO table starts with the four built-in kinds (TTFT, TPOT, ITL, E2E)")
        more = tuple(self.more) + (None,) * (len(self.table) - 4 - len(self.more))
        if len(more) != len(self.table) - 4:
            raise ValueError("more limits than SLO kinds beyond the four")
        object.__setattr__(self, "more", more)
        for kind, v in zip(self.table, self.limits()):
            _check_ms(kind.name, v)
        if self.ttft_of not in TTFT_OF:
            raise ValueError(f"ttft_of must be one of {TTFT_OF}, got {self.ttft_of!r}")

    @classmethod
    def of(cls, limits: Mapping[str, float | None], table: tuple[SloKind, ...] | None = None,
           ttft_of: TtftOf = "answer", ttft_label: str | None = None) -> Slos:
        """The SLOs of ``limits`` keyed by the table's keys (``"ttft"``, ``"e2e"``, ...; a key left out: off)."""
        t = table or SLO_TABLE
        unknown = set(limits) - {k.key for k in t}
        if unknown:
            raise ValueError(f"no SLO kind {sorted(unknown)[0]!r} in the table")
        v = [limits.get(k.key) for k in t]
        return cls(ttft_ms=v[0], tpot_ms=v[1], itl_ms=v[2], e2e_ms=v[3], ttft_of=ttft_of, ttft_label=ttft_label,
                   table=t, more=tuple(v[4:]))

    def limits(self) -> tuple[float | None, ...]:
        """Each kind's limit (ms, None: off), in the order of ``table`` (ttft_ms, tpot_ms, itl_ms, e2e_ms, ...)."""
        return (self.ttft_ms, self.tpot_ms, self.itl_ms, self.e2e_ms, *self.more)

    def limit(self, key: str) -> float | None:
        """The limit of the kind ``key`` ("ttft", "e2e", ...); None when off."""
        for kind, v in zip(self.table, self.limits()):
            if kind.key == key:
                return v
        raise KeyError(key)

    def names(self) -> tuple[str, ...]:
        """Every kind's name, in the table's order ("TTFT", "TPOT", "ITL", "E2E")."""
        return tuple(k.name for k in self.table)

    def in_force(self) -> tuple[str, ...]:
        """The names of the SLOs judged, in the order of the table ("TTFT", "TPOT", ...)."""
        return tuple(k.name for k, v in zip(self.table, self.limits()) if v is not None)

    def ttft_shown(self) -> str:
        """Which TTFT is judged, in words: "answer", "any", or another tool's definition (``ttft_label``)."""
        return self.ttft_label or self.ttft_of

    def describe(self) -> str:
        """"TTFT <= 1000 ms (answer), TPOT <= 50 ms"; "no latency SLO (completion only)" with every SLO off."""
        parts = []
        for kind, v in zip(self.table, self.limits()):
            if v is not None:
                parts.append(f"{kind.name} <= {v:g} {kind.unit}" + (f" ({self.ttft_shown()})" if kind.key == "ttft"
                                                                   else ""))
        return ", ".join(parts) if parts else "no latency SLO (completion only)"

    def miss_names(self, bits: int) -> tuple[str, ...]:
        """The names of the miss bits of this table (``miss_names`` for a longer table)."""
        return tuple(k.name for i, k in enumerate(self.table) if bits >> i & 1)


def ttft_or_default(slos: Slos) -> float:
    """The TTFT SLO in force, else the default's value: the yardstick of the rules that measure a lateness against
    the TTFT SLO (the delivered load's dispatch lateness, the step record's ``slo_ms``), not a verdict on TTFT."""
    return float(defaults.SLO_TTFT_MS if slos.ttft_ms is None else slos.ttft_ms)


def slo_microseconds(slo_ms: float) -> float:
    """An SLO in whole microseconds, the resolution at which times are judged."""
    return float(round(slo_ms * 1000.0))


def miss_names(bits: int, table: tuple[SloKind, ...] | None = None) -> tuple[str, ...]:
    """The SLO names of the miss bits (below ``NOJUDGE_SHIFT``), in order: ``miss_names(3) == ("TTFT", "TPOT")``."""
    return tuple(k.name for i, k in enumerate(table or SLO_TABLE) if bits >> i & 1)


def nojudge_names(bits: int, table: tuple[SloKind, ...] | None = None) -> tuple[str, ...]:
    """The SLO names of the not-judgeable bits (from ``NOJUDGE_SHIFT`` up), in order."""
    return miss_names(bits >> NOJUDGE_SHIFT, table)


def combo_name(bits: int, table: tuple[SloKind, ...] | None = None) -> str:
    """"TTFT+TPOT" for the miss bits 3 (the key of ``WindowStat.miss_combos``)."""
    return "+".join(miss_names(bits, table))


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
    answer = ttft_of == "answer"
    return tuple(k.derive(r, answer) for k in SLO_TABLE)  # type: ignore[return-value]


def _no_gap(r: TimedRequest) -> bool:
    """Fewer than 2 tokens with a last-token time: no inter-token time exists (TPOT and ITL met vacuously)."""
    if r.t_last_token is None:
        return False
    n = r.output_chunks
    if n is None:
        n = tpot_tokens(r)
    return n is not None and n < 2


def _ttft_of_record(r: TimedRequest, answer: bool) -> float | None:
    return answer_ttft_ms(r) if answer else any_ttft_ms(r)


def _elapsed_ms(r: TimedRequest, answer: bool) -> float | None:
    """At a cancellation: the time from the send to the cancellation (the E2E already spent)."""
    return (r.t_end - r.t_sent) * 1000.0


def _ttft_at_cancel(r: TimedRequest, answer: bool) -> float | None:
    """At a cancellation: the TTFT when a first token came, else the time waited without one."""
    v = _ttft_of_record(r, answer)
    return _elapsed_ms(r, answer) if v is None else v


# ---------------------------------------------------------------- the table: one row per SLO kind


@dataclass(frozen=True, slots=True)
class SloKind:
    """One SLO kind: everything the rest of servewatch needs to judge, store and show it.

    - ``name``: shown ("TTFT"); ``key``: the Monitor's stores, ``WindowStat.latency`` and the chart series
      ("ttft"); ``json_key``: the documents' and the run header's key ("ttft_ms"); ``flag``: the command line
      ("--slo-ttft-ms"); ``unit``: of the limit and the values;
    - ``derive(record, answer)``: the value of one record (None: the record cannot give it), ``answer`` whether
      the TTFT judged is the answer's;
    - ``needs``: what a record must hold to be judged on it (the sentence of "not judgeable");
    - ``at_cancel(record, answer)``: the value already known when a request was cancelled or the client gave up
      (None: this kind is not judged then);
    - ``gapless_met``: met vacuously by a request with no inter-token gap (fewer than 2 tokens with a last-token
      time);
    - ``title``: what the charts and the long report call it; ``help``: what ``flag`` says in ``--help``.
    """

    name: str
    key: str
    json_key: str
    flag: str
    unit: str
    derive: Callable[[TimedRequest, bool], float | None]
    needs: str
    at_cancel: Callable[[TimedRequest, bool], float | None] | None = None
    gapless_met: bool = False
    title: str = ""
    #: the flag's help (``tui.cli.options.add_slo_arguments`` adds one flag per row, "off" or MS; argparse fills in
    #: ``%(default)g``)
    help: str = ""


def _tpot(r: TimedRequest, answer: bool) -> float | None:
    return tpot_ms(r)


def _itl(r: TimedRequest, answer: bool) -> float | None:
    return itl_ms(r)


def _e2e(r: TimedRequest, answer: bool) -> float | None:
    return e2e_ms(r)


#: the SLO kinds, in the order they are shown and judged (their miss bits are 1 << their index)
SLO_TABLE: Final[tuple[SloKind, ...]] = (
    SloKind("TTFT", "ttft", "ttft_ms", "--slo-ttft-ms", "ms", _ttft_of_record, "first-token times",
            at_cancel=_ttft_at_cancel, title="time to first token",
            help="a request is good when it completes AND meets every SLO given: time to first (answer) token at "
                 "most this (default %(default)g; off: not judged)"),
    SloKind("TPOT", "tpot", "tpot_ms", "--slo-tpot-ms", "ms", _tpot, "last-token times", gapless_met=True,
            title="TPOT (time per output token)",
            help="time per output token at most this: (last token - first token) / (tokens - 1), per request "
                 "(default: off)"),
    SloKind("ITL", "itl", "itl_ms", "--slo-itl-ms", "ms", _itl, "inter-token gaps (itl_max_ms or token_offsets)",
            at_cancel=_itl, gapless_met=True, title="inter-token latency (largest gap)",
            help="the largest gap between two consecutive tokens at most this (a stall the user sees; default: off)"),
    SloKind("E2E", "e2e", "e2e_ms", "--slo-e2e-ms", "ms", _e2e, "end times", at_cancel=_elapsed_ms,
            title="end-to-end latency", help="request sent to last token at most this (default: off; MS or off)"),
)
#: the keys of the four kinds every table starts with (the record format's; the Monitor's hot path derives them inline)
BUILTIN_KEYS: Final = ("ttft", "tpot", "itl", "e2e")
#: generated from the table: the names, the Monitor's latency keys, the documents' keys
SLO_NAMES: Final = tuple(k.name for k in SLO_TABLE)
LATENCY_KEYS = tuple(k.key for k in SLO_TABLE)
SLO_JSON_KEYS: Final = tuple(k.json_key for k in SLO_TABLE)
#: miss bits: 1 << the kind's index; "not judgeable" bits: the miss bit shifted left by NOJUDGE_SHIFT (room for 16)
NOJUDGE_SHIFT: Final = 16
MISS_MASK: Final = (1 << NOJUDGE_SHIFT) - 1
MISS_BITS: Final = tuple(1 << i for i in range(len(SLO_TABLE)))
MISS_TTFT, MISS_TPOT, MISS_ITL, MISS_E2E = MISS_BITS
NOJUDGE_TTFT, NOJUDGE_TPOT, NOJUDGE_ITL, NOJUDGE_E2E = (b << NOJUDGE_SHIFT for b in MISS_BITS)
#: what each SLO needs that a record may lack (the sentence of "not judgeable"), by name
NEEDS: Final = {k.name: k.needs for k in SLO_TABLE}


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
    - ``good``: complete (``_complete``), a first token (or, for an embeddings answer, ``embedding_dim``: it
      streams no token), and every SLO in force met. An embeddings answer cannot be judged on TTFT, TPOT or ITL:
      with one in force it is ``excluded`` with that SLO's NOJUDGE bit (never good, and PASS is blocked).
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
    lims = [None if v is None else slo_microseconds(v) for v in slos.limits()]
    ttft_lim = lims[0]
    answer = slos.ttft_of == "answer"
    if all(v is None for v in lims[1:]):
        return _ttft_only_rule(ttft_lim, answer)
    # the kinds in force beyond TTFT: (derive, at_cancel, gapless_met, limit in us, miss bit)
    checks = tuple((k.derive, k.at_cancel, k.gapless_met, lim, 1 << i)
                   for i, (k, lim) in enumerate(zip(slos.table, lims)) if i > 0 and lim is not None)
    at_cancel = tuple((c, lim) for _d, c, _g, lim, _b in checks if c is not None)

    def classify(r: TimedRequest) -> tuple[Outcome, float | None, int]:
        t_sent = r.t_sent
        tf = r.t_first_token
        if answer and r.t_first_reasoning is not None:
            ta = r.t_first_answer
        else:
            ta = tf
        ttft = None if ta is None else (ta - t_sent) * 1000.0
        err = r.error
        untimed = tf is None and r.embedding_dim is not None  # an embeddings answer: complete without tokens
        if (tf is None and not untimed) or err is not None or not r.complete or not _complete(r):
            if err != CANCELLED and (err != CLIENT or r.http_status is not None):
                return FAILED, ttft, 0
            # still open: only what was already missed at the cancellation fails it
            if ttft_lim is not None:
                w = ttft if ttft is not None else (r.t_end - t_sent) * 1000.0
                if (w * 1000.0 + 0.5) // 1.0 > ttft_lim:
                    return FAILED, ttft, 0
            for f, lim in at_cancel:
                c = f(r, answer)
                if c is not None and (c * 1000.0 + 0.5) // 1.0 > lim:
                    return FAILED, ttft, 0
            return EXCLUDED, ttft, 0
        misses = 0
        if ttft_lim is not None and untimed:
            misses = NOJUDGE_TTFT  # no token is streamed: no first-token time to judge
        elif ttft_lim is not None and (ttft is None or (ttft * 1000.0 + 0.5) // 1.0 > ttft_lim):
            misses = MISS_TTFT  # no answer token after reasoning: the user never saw an answer
        for derive, _c, gapless, lim, bit in checks:
            v = derive(r, answer)
            if v is None:
                if not (gapless and _no_gap(r)):
                    misses |= bit << NOJUDGE_SHIFT
            elif (v * 1000.0 + 0.5) // 1.0 > lim:
                misses |= bit
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
            if r.embedding_dim is not None and err is None and r.complete and _complete(r):  # no token streamed
                return (GOOD, None, 0) if slo_us is None else (EXCLUDED, None, NOJUDGE_TTFT)
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
    return {**{k.json_key: v for k, v in zip(slos.table, slos.limits())},
            "ttft_of": slos.ttft_of, "in_force": list(slos.in_force()), "text": slos.describe(), "target": target}


def from_header_block(block: object, table: tuple[SloKind, ...] | None = None) -> Slos | None:
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

    t = table or SLO_TABLE
    vals = {k.key: ms(k.json_key) for k in t}
    if all(v is None for v in vals.values()) and "in_force" not in block:
        return None
    of = block.get("ttft_of")
    return Slos.of(vals, t, ttft_of=of if of in TTFT_OF else "answer")
