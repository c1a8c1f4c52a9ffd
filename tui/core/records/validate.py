"""Field validation: the checks every record type's fields go through (finite numbers, counts, wall-clock times),
and one request record's validation, the hot path of every reader (``parse_request``: a fast path for the records a
servewatch writer writes, every check in turn for any other). ``tui.core.records.parse`` builds the other record
types with the same checks."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, NoReturn

from tui.core.records.request import RequestRecord
from tui.core.records.schema import (
    COUNT_MAX,
    INT_MAX,
    PHASES,
    T_MAX_EPOCH,
    T_MIN_EPOCH,
    RecordError,
    is_num,
)


def _num(d: dict, key: str, required: bool = False) -> float | None:
    v = d.get(key)
    if v is None:
        if required:
            raise RecordError(f"missing required field {key!r}")
        return None
    if not is_num(v):
        raise RecordError(f"field {key!r} must be a finite number, got {v!r:.40}")
    return float(v)


def _fraction(d: dict, key: str) -> float | None:
    """A share 0..1 (the engines' KV cache usage gauges are fractions): anything else is refused, not shown as
    500% of the KV space in use."""
    v = _num(d, key)
    if v is not None and not 0.0 <= v <= 1.0:
        raise RecordError(f"field {key!r} must be a fraction from 0 to 1, got {v!r:.40}")
    return v


def _int(d: dict, key: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if not is_num(v):
        raise RecordError(f"field {key!r} must be a number, got {v!r:.40}")
    if not -_INT_MAX <= v <= _INT_MAX:
        raise RecordError(f"field {key!r} is out of range (|x| <= 2**63), got {v!r:.40}")
    return int(v)


_T_MIN = T_MIN_EPOCH
_T_MAX = T_MAX_EPOCH
_COUNT_MAX = COUNT_MAX
_INT_MAX = INT_MAX


def _bad_time(key: str, v: Any) -> str:
    if type(v) not in _NUM_TYPES:
        return f"field {key!r} must be a finite number, got {v!r:.40}"
    if not _isfinite(v):
        return f"field {key!r} must be a finite number, got {v!r:.40}"
    return (f"field {key!r} is not a wall-clock time between 2000-01-01 and 2100-01-01 "
            f"(epoch seconds), got {v!r:.40}")


def _count(d: dict, key: str) -> int | None:
    """A non-negative integer count (tokens, rounds, retries): finite, at most 2**53."""
    v = d.get(key)
    if v is None:
        return None
    if not is_num(v) or v != int(v):
        raise RecordError(f"field {key!r} must be a whole number, got {v!r:.40}")
    if not 0 <= v <= _COUNT_MAX:
        raise RecordError(f"field {key!r} must be a count between 0 and 2**53, got {v!r:.40}")
    return int(v)


def _str(d: dict, key: str) -> str | None:
    v = d.get(key)
    if v is None:
        return None
    return v if isinstance(v, str) else str(v)


_NUM_TYPES = (int, float)
_isfinite = math.isfinite


def _opt_num(d: dict, key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if type(v) not in _NUM_TYPES or not _isfinite(v):
        raise RecordError(f"field {key!r} must be a finite number, got {v!r:.40}")
    return v


#: the fields a request record written by servewatch always has (``request_to_dict``), read in one C call
_REQUEST_KEYS = ("id", "t_sent", "t_end", "complete", "t_first_token", "t_intended", "phase", "error", "input_tokens",
                 "output_tokens", "http_status", "round", "level", "finish_reason", "error_detail")
_REQUEST_FIELDS = operator.itemgetter(*_REQUEST_KEYS)


#: ``"type"`` and the fields of ``_REQUEST_FIELDS``, read in one C call by the fast path of ``parse_request``
_STANDARD_FIELDS = operator.itemgetter("type", *_REQUEST_KEYS)


def parse_request(d: dict) -> RequestRecord:
    """Validate one request record (the hot path of every reader: keep it lean).

    The fast path: a record with the fields a servewatch writer always writes (``request_to_dict``), each of the
    type and in the range that needs no conversion, is made into its record after one compound test (its further
    fields, a run's stream fields, then read as ``_parse_request`` reads them); any other record (a field missing,
    an int time, a value out of range, token offsets, anything to refuse) goes through ``_parse_request``, which
    makes every check in turn and words the first that fails. The fast path accepts only
    records ``_parse_request`` accepts unchanged, into the same record (a property test holds the two equal:
    tests/unit/core/records/test_parse_fast.py)."""
    if len(d) >= STANDARD_KEYS:
        try:
            (typ, rid, t_sent, t_end, complete, t_first, t_int, phase, error, itok, otok, status, rnd, level, fr,
             ed) = _STANDARD_FIELDS(d)
        except KeyError:
            return _parse_request(d)
        if (typ == "request" and type(rid) is str and type(t_sent) is float and type(t_end) is float
                and _T_MIN <= t_sent <= t_end < _T_MAX and (complete is True or complete is False)
                and (t_first is None or (type(t_first) is float and t_sent <= t_first <= t_end))
                and (t_int is None or (type(t_int) is float and _T_MIN <= t_int < _T_MAX))
                and (phase == "measure" or phase == "warmup") and (error is None or type(error) is str)
                and (itok is None or (type(itok) is int and 0 <= itok <= _COUNT_MAX))
                and (otok is None or (type(otok) is int and 0 <= otok <= _COUNT_MAX))
                and (status is None or (type(status) is int and 100 <= status <= 599))
                and (rnd is None or (type(rnd) is int and 1 <= rnd <= _COUNT_MAX))
                and (level is None or (type(level) in _NUM_TYPES and -_COUNT_MAX <= level <= _COUNT_MAX))
                and (fr is None or type(fr) is str) and (ed is None or type(ed) is str)):
            if len(d) == STANDARD_KEYS:
                return _make_standard(rid, t_sent, t_end, complete, t_sent if t_int is None else t_int, t_first,
                                      itok, otok, fr, status, error, ed, phase, level, 1 if rnd is None else rnd,
                                      None, 0)
            rt = d.get("retried")  # more fields (a run's stream fields): read as _parse_request reads them
            if d.get("token_offsets") is None and (rt is None or (type(rt) is int and 0 <= rt <= _COUNT_MAX)):
                rec = RequestRecord(rid, t_sent, t_end, complete, t_sent if t_int is None else t_int, t_first, itok,
                                    otok, fr, status, error, ed, phase, level, 1 if rnd is None else rnd, None,
                                    rt or 0)
                _read_token_fields(d, rec)
                _check_token_claims(rec)
                return rec
    return _parse_request(d)


#: what the fast path makes of a standard record: the record, except in a forked reader (``standard_as_arguments``)
_make_standard: Callable[..., Any] = RequestRecord


def _arguments(*args: Any) -> tuple:
    return args


def standard_as_arguments() -> None:
    """From now on, in this process, the fast path gives a standard record as the tuple of its ``RequestRecord``
    arguments (``RequestRecord(*args)`` is the record it would have made): only the forked reader of a large file
    calls it (``tui.sources.parallel_read``), which carries those tuples as they are to the judging process."""
    global _make_standard
    _make_standard = _arguments


def _parse_request(d: dict) -> RequestRecord:
    """``parse_request`` with every check made in turn (any record; the first problem worded)."""
    get = d.get
    extra = len(d) > STANDARD_KEYS  # more than the fields every servewatch record has: maybe issue 21's
    try:
        (rid, t_sent, t_end, complete, t_first, t_int, phase, error, itok, otok, status, rnd, level, fr,
         ed) = _REQUEST_FIELDS(d)
    except KeyError:  # a field left out (other writers, hand-written files): absent reads as null
        extra = True
        rid, t_sent, t_end, complete = get("id"), get("t_sent"), get("t_end"), get("complete")
        t_first, t_int, phase, error = get("t_first_token"), get("t_intended"), get("phase", "measure"), get("error")
        itok, otok, status, rnd = get("input_tokens"), get("output_tokens"), get("http_status"), get("round")
        level, fr, ed = get("level"), get("finish_reason"), get("error_detail")
    if rid is None or t_sent is None or t_end is None or complete is None:
        for key in ("id", "t_sent", "t_end", "complete"):
            if get(key) is None:
                raise RecordError(f"missing required field {key!r}")
    if type(t_sent) not in _NUM_TYPES or not _T_MIN <= t_sent < _T_MAX:
        raise RecordError(_bad_time("t_sent", t_sent))
    if type(t_end) not in _NUM_TYPES or not _T_MIN <= t_end < _T_MAX:
        raise RecordError(_bad_time("t_end", t_end))
    if complete is not True and complete is not False:
        raise RecordError("field 'complete' must be true or false")
    if t_first is not None and (type(t_first) not in _NUM_TYPES or t_first - t_first != 0):
        t_first = _opt_num(d, "t_first_token")
    if t_int is not None and (type(t_int) not in _NUM_TYPES or not _T_MIN <= t_int < _T_MAX):
        raise RecordError(_bad_time("t_intended", t_int))
    if t_end < t_sent:
        raise RecordError("t_end is before t_sent")
    if t_first is not None and not (t_sent <= t_first <= t_end):
        raise RecordError("t_first_token is outside [t_sent, t_end]")
    if phase != "measure" and phase != "warmup":
        raise RecordError(f"field 'phase' must be one of {PHASES}, got {phase!r:.40}")
    if error is not None and type(error) is not str:
        raise RecordError("field 'error' must be a string or null")
    offsets = get("token_offsets")
    if offsets is not None and not (isinstance(offsets, list) and all(is_num(x) for x in offsets)):
        raise RecordError("field 'token_offsets' must be a list of numbers")
    if itok is not None and (type(itok) is not int or not 0 <= itok <= _COUNT_MAX):
        itok = _count(d, "input_tokens")
    if otok is not None and (type(otok) is not int or not 0 <= otok <= _COUNT_MAX):
        otok = _count(d, "output_tokens")
    if status is not None and (type(status) is not int or not 100 <= status <= 599):
        status = _int(d, "http_status")
        if status is not None and not 100 <= status <= 599:
            raise RecordError(f"field 'http_status' must be an HTTP status (100-599), got {status!r:.40}")
    if rnd is not None and (type(rnd) is not int or not 1 <= rnd <= _COUNT_MAX):
        rnd = _count(d, "round")
        if rnd is not None and rnd < 1:
            raise RecordError("field 'round' must be >= 1")
    if level is not None and (type(level) not in _NUM_TYPES or not -_COUNT_MAX <= level <= _COUNT_MAX):
        level = _opt_num(d, "level")
        if level is not None and not -_COUNT_MAX <= level <= _COUNT_MAX:
            raise RecordError(f"field 'level' is out of range (|x| <= 2**53), got {level!r:.40}")
    retried = get("retried") or 0
    if type(retried) is not int or not 0 <= retried <= _COUNT_MAX:
        retried = _count(d, "retried") or 0
    rec = RequestRecord(
        str(rid),
        t_sent,
        t_end,
        complete,
        t_sent if t_int is None else t_int,
        t_first,
        itok,
        otok,
        fr if fr is None or type(fr) is str else str(fr),
        status,
        error,
        ed if ed is None or type(ed) is str else str(ed),
        phase,
        level,
        1 if rnd is None else rnd,
        offsets,
        retried,
    )
    if extra:
        _read_token_fields(d, rec)
        _check_token_claims(rec)
    return rec


#: "type" and the fields of ``_REQUEST_FIELDS``: a record with no more keys than these has none of the optional ones
STANDARD_KEYS = len(_REQUEST_KEYS) + 1
#: the optional per-token fields of issue 21 (docs/record-format.md): times, counts, milliseconds
_TOKEN_TIMES = ("t_first_answer", "t_first_reasoning", "t_last_token")
_TOKEN_COUNTS = ("output_chunks", "reasoning_chunks", "usage_output_tokens", "usage_input_tokens",
                 "usage_reasoning_tokens", "input_tokens_asked", "output_tokens_asked")
_TOKEN_MS = ("itl_max_ms", "itl_p50_ms", "itl_p95_ms")


def _read_token_fields(d: dict, rec: RequestRecord) -> None:
    """The optional token fields, validated like the others: times inside [t_first_token, t_end] (a first answer,
    first reasoning or last token cannot come before the first token of any kind), counts whole and >= 0,
    milliseconds finite and >= 0. Read only when the record has more keys than the standard ones.

    Written out field by field (no loop, no ``setattr``): this runs for every request of a file a run wrote since
    the full SLOs, and the loop form cost a fifth of the report's time (bench/bench_report.py --stream-fields);
    the error paths are the functions below."""
    get = d.get
    tf = rec.t_first_token
    te = rec.t_end
    if tf is None:
        tf = te = _NAN  # every comparison false: a time given without a first token is refused below
    v = get("t_first_answer")
    if v is not None:
        if type(v) not in _NUM_TYPES or not tf <= v <= te:
            _bad_token_time(rec, "t_first_answer", v)
        rec.t_first_answer = v
    v = get("t_first_reasoning")
    if v is not None:
        if type(v) not in _NUM_TYPES or not tf <= v <= te:
            _bad_token_time(rec, "t_first_reasoning", v)
        rec.t_first_reasoning = v
    v = get("t_last_token")
    if v is not None:
        if type(v) not in _NUM_TYPES or not tf <= v <= te:
            _bad_token_time(rec, "t_last_token", v)
        rec.t_last_token = v
    v = get("output_chunks")
    if v is not None:
        rec.output_chunks = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "output_chunks")
    v = get("reasoning_chunks")
    if v is not None:
        rec.reasoning_chunks = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "reasoning_chunks")
    v = get("usage_output_tokens")
    if v is not None:
        rec.usage_output_tokens = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "usage_output_tokens")
    v = get("usage_input_tokens")
    if v is not None:
        rec.usage_input_tokens = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "usage_input_tokens")
    v = get("usage_reasoning_tokens")
    if v is not None:
        rec.usage_reasoning_tokens = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "usage_reasoning_tokens")
    v = get("input_tokens_asked")
    if v is not None:
        rec.input_tokens_asked = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "input_tokens_asked")
    v = get("output_tokens_asked")
    if v is not None:
        rec.output_tokens_asked = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "output_tokens_asked")
    v = get("itl_max_ms")
    if v is not None:
        if type(v) not in _NUM_TYPES or not 0 <= v < _INF:
            _bad_token_ms("itl_max_ms", v)
        rec.itl_max_ms = v
    v = get("itl_p50_ms")
    if v is not None:
        if type(v) not in _NUM_TYPES or not 0 <= v < _INF:
            _bad_token_ms("itl_p50_ms", v)
        rec.itl_p50_ms = v
    v = get("itl_p95_ms")
    if v is not None:
        if type(v) not in _NUM_TYPES or not 0 <= v < _INF:
            _bad_token_ms("itl_p95_ms", v)
        rec.itl_p95_ms = v
    v = get("cached_tokens")  # issue 23: the server's prefix-cache count (null: it did not say)
    if v is not None:
        rec.cached_tokens = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "cached_tokens")
        v = get("cached_tokens_source")
        if v is not None:
            if type(v) is not str or len(v) > 80:
                raise RecordError(f"field 'cached_tokens_source' must be a short string, got {v!r:.40}")
            rec.cached_tokens_source = v
    v = get("session")
    if v is not None:  # issue 23: session workloads (docs/record-format.md)
        _read_session_fields(d, rec, v)
    if (v := get("embedding_dim")) is not None:  # issue 41: an embeddings answer (no token stream)
        _read_embedding_dim(d, rec, v)


def _read_embedding_dim(d: dict, rec: RequestRecord, v: object) -> None:
    """``embedding_dim`` >= 1, on a record with no token (a first-token time or a token count beside it: bad line)."""
    dim = v if type(v) is int and 1 <= v <= _COUNT_MAX else _count(d, "embedding_dim")
    if dim is None or dim < 1:
        raise RecordError(f"field 'embedding_dim' must be a whole number >= 1, got {v!r:.40}")
    if rec.t_first_token is not None or rec.output_chunks or rec.usage_output_tokens or rec.output_tokens:
        raise RecordError("field 'embedding_dim' (an embeddings answer, no token stream) is given with first-token "
                          "times or output tokens")
    rec.embedding_dim = dim


def _read_session_fields(d: dict, rec: RequestRecord, session: object) -> None:
    """A session workload's ``session`` (a string), ``turn`` (whole, >= 1) and ``context_tokens`` (whole, >= 0)."""
    if type(session) is not str or not session:
        raise RecordError(f"field 'session' must be a non-empty string, got {session!r:.40}")
    rec.session = session
    v = d.get("turn")
    if v is not None:
        if type(v) is not int or not 1 <= v <= _COUNT_MAX:
            v = _count(d, "turn")
            if v is not None and v < 1:
                raise RecordError("field 'turn' must be >= 1")
        rec.turn = v
    v = d.get("context_tokens")
    if v is not None:
        rec.context_tokens = v if type(v) is int and 0 <= v <= _COUNT_MAX else _count(d, "context_tokens")


_NAN = math.nan
_INF = math.inf


def _bad_token_time(rec: RequestRecord, key: str, v: object) -> NoReturn:
    if type(v) not in _NUM_TYPES or not _T_MIN <= v < _T_MAX:  # type: ignore[operator]
        raise RecordError(_bad_time(key, v))
    if rec.t_first_token is None:
        raise RecordError(f"field {key!r} is given but t_first_token is null")
    raise RecordError(f"{key} is outside [t_first_token, t_end]")


def _bad_token_ms(key: str, v: object) -> NoReturn:
    raise RecordError(f"field {key!r} must be a finite number of milliseconds >= 0, got {v!r:.40}")


#: slack of the token-claim checks, ms: the writers round times to 1 us and gaps to 1 us; other tools round more
_CLAIM_SLACK_MS = 1.0


def _check_token_claims(rec: RequestRecord) -> None:
    """The token fields checked against each other: a record is a claim, and one that contradicts itself is a bad
    line, never judged. The gap quantiles are ordered (P50 <= P95 <= largest); the largest gap fits inside the span
    from the first to the last token, and is at least the mean gap over the chunks seen (an ``itl_max_ms`` edited
    down to meet an ITL SLO no longer fits the times beside it); reasoning chunks are among the chunks seen; the
    first answer and first reasoning tokens are not after the last token."""
    p50, p95, top = rec.itl_p50_ms, rec.itl_p95_ms, rec.itl_max_ms
    slack = _CLAIM_SLACK_MS
    if p50 is not None and p95 is not None and p50 > p95 + slack:
        raise RecordError("itl_p50_ms is above itl_p95_ms")
    if top is not None:
        for name, q in (("itl_p50_ms", p50), ("itl_p95_ms", p95)):
            if q is not None and q > top + slack:
                raise RecordError(f"{name} is above itl_max_ms (the largest gap)")
    oc, rc = rec.output_chunks, rec.reasoning_chunks
    if oc is not None and rc is not None and rc > oc:
        raise RecordError("reasoning_chunks is more than output_chunks")
    last, first = rec.t_last_token, rec.t_first_token
    if last is None or first is None:
        return
    for name in ("t_first_answer", "t_first_reasoning"):
        t = getattr(rec, name)
        if t is not None and t > last:
            raise RecordError(f"{name} is after t_last_token")
    if top is not None:
        span_ms = (last - first) * 1000.0
        if top > span_ms + slack:
            raise RecordError("itl_max_ms is longer than the time from the first to the last token")
        if oc is not None and oc >= 2 and top < span_ms / (oc - 1) - slack:
            raise RecordError("itl_max_ms is shorter than the mean gap between the chunks seen "
                              "(t_last_token - t_first_token over output_chunks - 1)")


#: the run header's fields that are JSON objects when present (docs/record-format.md): a list or a number there is a
#: malformed header line, reported and counted, never handed to the commands that read inside them
