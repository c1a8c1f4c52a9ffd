"""Record validation: one decoded JSON value -> one record (``parse_object``, ``parse_request``), and the line and
block parsers every reader goes through (``parse_lines``, ``parse_block``). Readers ignore unknown fields, reject
records missing required fields, count (never raise on) unknown record types; a malformed line is reported with its
file and line number (``LineIssue``) and counted."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any, NoReturn

from tui.core.bounds import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_too_deep, size_text
from tui.core.provenance import check_source_block
from tui.core.records.model import (
    BudgetRecord,
    GpuSample,
    HostSample,
    QueueSample,
    Record,
    RunHeader,
    SealRecord,
    StepRecord,
    UnknownRecord,
    WatchRecord,
)
from tui.core.records.phase import parse_phase
from tui.core.records.request import RequestRecord
from tui.core.records.schema import (
    COUNT_MAX,
    INT_MAX,
    PHASES,
    SCHEMA_VERSION,
    T_MAX_EPOCH,
    T_MIN_EPOCH,
    LineIssue,
    RecordError,
    is_num,
)
from tui.core.records.watch import window_from_record


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
_REQUEST_FIELDS = operator.itemgetter(
    "id", "t_sent", "t_end", "complete", "t_first_token", "t_intended", "phase", "error", "input_tokens",
    "output_tokens", "http_status", "round", "level", "finish_reason", "error_detail",
)


def parse_request(d: dict) -> RequestRecord:
    """Validate one request record (the hot path of every reader: keep it lean)."""
    get = d.get
    extra = len(d) > _STANDARD_KEYS  # more than the fields every servewatch record has: maybe issue 21's
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
_STANDARD_KEYS = 16
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
HEADER_OBJECTS = ("target", "load", "environment", "slo", "server_capacity", "headers")


def parse_object(d: Any) -> Record:
    """Turn one decoded JSON value into a record; raises RecordError."""
    if not isinstance(d, dict):
        raise RecordError("line is not a JSON object")
    typ = d.get("type")
    if typ == "request":
        return parse_request(d)
    if typ == "gpu":
        dev = _int(d, "device")
        return GpuSample(
            t=_num(d, "t", True),  # type: ignore[arg-type]
            device=0 if dev is None else dev,
            name=_str(d, "name"),
            memory_used=_int(d, "memory_used"),
            memory_total=_int(d, "memory_total"),
            utilization=_num(d, "utilization"),
        )
    if typ == "queue":
        return QueueSample(
            t=_num(d, "t", True),  # type: ignore[arg-type]
            source=_str(d, "source") or "unknown",
            waiting=_num(d, "waiting"),
            running=_num(d, "running"),
            kv_cache_usage=_fraction(d, "kv_cache_usage"),
            client_in_flight=_int(d, "client_in_flight"),
        )
    if typ == "host":
        return HostSample(
            t=_num(d, "t", True),  # type: ignore[arg-type]
            cpu_percent=_num(d, "cpu_percent"),
            memory_used=_int(d, "memory_used"),
            memory_total=_int(d, "memory_total"),
            client_cpu_percent=_num(d, "client_cpu_percent"),
            server_rss=_int(d, "server_rss"), server_pid=_int(d, "server_pid"))  # issue 41: a local server's RSS
    if json_too_deep(d):  # the records below are kept whole (a header, a step's info): never nested without end
        raise RecordError(f"nested deeper than {MAX_JSON_DEPTH} levels of objects and lists")
    if typ == "step":
        ev = d.get("event")
        if ev not in ("start", "end"):
            raise RecordError("field 'event' of a step must be 'start' or 'end'")
        _check_step_fields(d, ev)
        info = {k: v for k, v in d.items() if k not in ("type", "t", "event", "level", "round", "mode")}
        sh = d.get("server_histograms")
        if sh is not None and not isinstance(sh, dict):
            raise RecordError("field 'server_histograms' of a step must be an object")
        rnd = _int(d, "round")
        return StepRecord(
            t=_num(d, "t", True),  # type: ignore[arg-type]
            event=ev,
            level=_num(d, "level"),
            round=1 if rnd is None else rnd,
            mode=_str(d, "mode"),
            info=info,
            server_histograms=sh,
        )
    if typ == "run":
        sv = d.get("schema_version")
        if sv is None:
            raise RecordError("missing required field 'schema_version'")
        if not is_num(sv) or int(sv) > SCHEMA_VERSION:
            raise RecordError(f"unsupported schema_version {sv!r:.20} (this reader knows {SCHEMA_VERSION})")
        src = d.get("source")
        if src is not None:
            problem = check_source_block(src)
            if problem:
                raise RecordError(problem)
        for key in HEADER_OBJECTS:  # every reader looks inside these: one of another type is a bad header
            v = d.get(key)
            if v is not None and type(v) is not dict:
                raise RecordError(f"field {key!r} of a run header must be an object, got {type(v).__name__}")
        load = d.get("load")
        if load is not None and load.get("mode") is not None and type(load.get("mode")) is not str:
            raise RecordError("field 'load.mode' of a run header must be a string (closed, open)")
        return RunHeader(d)
    if typ == "budget":
        return BudgetRecord(d)
    if typ == "watch":
        try:
            window_from_record(d)
        except ValueError as exc:
            raise RecordError(f"watch record: {exc}") from None
        return WatchRecord(d)
    if typ == "seal":  # the digest chain's final record: checked by tui.core.chain, not here
        return SealRecord(d)
    if typ == "phase":  # a drill's phase (issue 39)
        return parse_phase(d)
    if typ is None:
        raise RecordError("missing required field 'type'")
    return UnknownRecord(str(typ)[:40], d)


#: the fields of a step record and their types (what the load generator writes: tui.sources.load.steps); a step
#: record with one of the wrong type is a bad line (file and line, counted), never a cross-check silently skipped
_STEP_COUNTS = ("completed", "failed", "worker_lost")
_STEP_NUMBERS = ("duration_s", "output_tok_per_s", "client_cpu_s", "process_cpu_s", "coordinator_cpu_s")
_STEP_OPT_NUMBERS = ("ttft_p50_ms", "lateness_p50_ms", "lateness_p99_ms", "send_overhead_p50_ms",
                     "send_overhead_p99_ms", "duration", "rate")
_STEP_FLAGS = ("saturated", "degraded", "search_probe")
_STEP_TEXTS = ("verdict_reason", "note", "arrival")
_STEP_OBJECTS = ("sessions", "prefix_cache")
_STEP_VERDICTS = ("PASS", "FAIL", "UNDECIDED", "INSUFFICIENT_WINDOW")


def _is_count(v: object) -> bool:
    return type(v) is int and 0 <= v <= _COUNT_MAX


def _check_step_fields(d: dict, ev: str) -> None:
    """The step record's fields, type by type (docs/record-format.md, ``step``); an end record's counts agree
    with each other (``completed + failed == requests``, the ``errors`` classes add up to ``failed``)."""
    req = d.get("requests")
    if req is not None and not _is_count(req):
        raise RecordError(f"field 'requests' of a step must be a whole number, got {req!r:.40}")
    for k in _STEP_COUNTS:
        v = d.get(k)
        if v is not None and not _is_count(v):
            raise RecordError(f"field {k!r} of a step must be a whole number, got {v!r:.40}")
    for k in _STEP_NUMBERS:
        v = d.get(k)
        if v is not None and (type(v) not in _NUM_TYPES or not _isfinite(v)):
            raise RecordError(f"field {k!r} of a step must be a finite number, got {v!r:.40}")
    for k in _STEP_OPT_NUMBERS:
        v = d.get(k)
        if v is not None and (type(v) not in _NUM_TYPES or not _isfinite(v)):
            raise RecordError(f"field {k!r} of a step must be a finite number or null, got {v!r:.40}")
    for k in _STEP_FLAGS:
        v = d.get(k)
        if v is not None and type(v) is not bool:
            raise RecordError(f"field {k!r} of a step must be true or false, got {v!r:.40}")
    for k in _STEP_TEXTS:
        v = d.get(k)
        if v is not None and type(v) is not str:
            raise RecordError(f"field {k!r} of a step must be a string, got {v!r:.40}")
    for k in _STEP_OBJECTS:
        v = d.get(k)
        if v is not None and type(v) is not dict:
            raise RecordError(f"field {k!r} of a step must be an object, got {v!r:.40}")
    phase = d.get("phase")
    if phase is not None and phase not in PHASES:
        raise RecordError(f"field 'phase' of a step must be one of {PHASES}, got {phase!r:.40}")
    verdict = d.get("verdict")
    if verdict is not None and verdict not in _STEP_VERDICTS:
        raise RecordError(f"field 'verdict' of a step must be one of {', '.join(_STEP_VERDICTS)}, got {verdict!r:.40}")
    rel = d.get("percentiles_rel_error")
    if rel is not None and (type(rel) not in _NUM_TYPES or not 0.0 < rel < 1.0):
        raise RecordError(f"field 'percentiles_rel_error' of a step must be a fraction in (0, 1), got {rel!r:.40}")
    stop = d.get("stop")
    if stop is not None and not (type(stop) is dict and type(stop.get("cause")) is str):
        raise RecordError(f"field 'stop' of a step must be an object with a 'cause', got {stop!r:.60}")
    errors = d.get("errors")
    if errors is not None and not (type(errors) is dict and all(type(k) is str and _is_count(v)
                                                                for k, v in errors.items())):
        raise RecordError(f"field 'errors' of a step must map error classes to whole numbers, got {errors!r:.60}")
    if ev != "end":
        return
    done, failed = d.get("completed"), d.get("failed")
    if done is not None and failed is not None and done + failed != req:
        raise RecordError(f"the step record counts {req} requests but {done} completed and {failed} failed")
    if errors is not None and failed is not None and sum(errors.values()) != failed:
        raise RecordError(f"the step record's error classes add up to {sum(errors.values())}, its 'failed' is {failed}")


_decode = json.JSONDecoder().decode


def parse_line(text: str | bytes) -> Record:
    """Parse one JSONL line (without its newline)."""
    try:
        obj = _decode(text) if type(text) is str else json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise RecordError(f"invalid JSON: {str(exc)[:80]}") from None
    return parse_object(obj)


_LINE_ERRORS = (ValueError, RecursionError, OverflowError)


def _refused_request(obj: object) -> tuple[bool | None, tuple[float | None, int] | None]:
    """What a refused line's decoded JSON still says it was (``LineIssue.request``, ``LineIssue.level_round``):
    a measured request and, when its ``level`` and ``round`` are valid values, which level it belonged to."""
    if type(obj) is not dict:
        return None, None  # not JSON (or not an object): it may have been a request of any level
    typ = obj.get("type")
    if typ != "request":
        return (False if type(typ) is str else None), None
    if obj.get("phase", "measure") == "warmup":
        return False, None  # a warmup request: never judged, whatever its outcome
    level, rnd = obj.get("level"), obj.get("round", 1)
    if rnd is None:
        rnd = 1
    if ((level is None or (type(level) in _NUM_TYPES and abs(level) <= _COUNT_MAX))  # NaN, inf, huge ints: False
            and type(rnd) is int and 1 <= rnd <= _COUNT_MAX):
        return True, (level, rnd)
    return True, None


def _line_issue(source: str, lineno: int, exc: BaseException, terminated: bool, obj: object = None) -> LineIssue:
    """The issue a line that could not be used is reported as (one wording for every reader); ``obj``: the line's
    decoded JSON when it decoded (what it still says it was)."""
    request, where = _refused_request(obj)
    if isinstance(exc, RecordError):
        reason = str(exc)
    elif isinstance(exc, OverflowError):  # an integer too large for a float (JSON allows any length)
        reason = f"number out of range: {str(exc)[:80]}"
    else:
        reason = f"invalid JSON: {str(exc)[:80]}"
    if not terminated:
        return LineIssue(source, lineno, f"truncated final line ({reason})", "truncated", request, where)
    return LineIssue(source, lineno, reason, "malformed", request, where)


def _unknown_issue(source: str, lineno: int, rec: UnknownRecord) -> LineIssue:
    return LineIssue(source, lineno, f"unknown record type {rec.type!r} skipped", "unknown_type")


def long_line_issue(source: str, lineno: int, nbytes: int, terminated: bool = True) -> LineIssue:
    """A line longer than ``MAX_LINE_BYTES`` (read past, never held): malformed, counted, and it may have been a
    measured request of any level (``request`` None), as any line that cannot be read."""
    end = "" if terminated else ", the last line, unterminated"
    return LineIssue(source, lineno, f"line longer than the {size_text(MAX_LINE_BYTES)} limit ({nbytes:,} bytes{end}): "
                     "skipped unread", "malformed")


def parse_lines(
    numbered: Iterable[tuple[int, bytes | str | int, bool]], source: str
) -> Iterator[Record | LineIssue]:
    """Parse numbered lines ``(line_number, line, terminated)``; yields records and LineIssue
    objects, never raises. The reference line-by-line reader: ``parse_block`` reports exactly what
    this reports for the same lines (a property test checks it). A line given as an int is the length
    of a line longer than the cap (``LineCut``): reported, never parsed; so is a longer line given whole."""
    decode = _decode
    for lineno, line, terminated in numbered:
        obj = None
        if isinstance(line, int) or len(line) > MAX_LINE_BYTES:
            yield long_line_issue(source, lineno, line if isinstance(line, int) else len(line), terminated)
            continue
        try:
            obj = decode(line) if type(line) is str else json.loads(line)
            if type(obj) is dict and obj.get("type") == "request":
                yield parse_request(obj)
                continue
            rec = parse_object(obj)
        except _LINE_ERRORS as exc:  # RecordError and JSON/Unicode errors are ValueErrors
            if not (line.strip(" \t\r\n") if isinstance(line, str) else line.strip(b" \t\r\n")):
                continue  # a blank line (JSON whitespace only) is not a record
            yield _line_issue(source, lineno, exc, terminated, obj)
            continue
        if isinstance(rec, UnknownRecord):
            yield _unknown_issue(source, lineno, rec)
            continue
        if type(rec) is RunHeader:  # where each run starts (tui.core.runs: the span whose integrity is judged)
            rec.line = lineno
        yield rec


_LINE_BREAK = b"}\n{"
_ARRAY_BREAK = b",\n"  # the newline stays: a line break inside a JSON string is then a decode error
BLOCK_BYTES = 1 << 14  # one json.loads call per ~50 lines: its objects are still in the CPU cache when validated


def parse_block(body: bytes, first_line: int, source: str) -> list[Record | LineIssue]:
    """The records and issues of complete lines: ``body`` is the lines joined by newlines (none at the end), the
    first of them line ``first_line``. Reports exactly what ``parse_lines`` reports for the same lines (every line
    terminated); the fast block reader of reports and replays.

    A run of lines that are each one JSON object (every newline between a ``}`` and a ``{``) is decoded with one
    ``json.loads`` as a JSON array, about twice as fast as one call per line (object keys are shared). The array is
    ``[`` + the lines joined by ``,`` + newline + ``]``: the newline kept between objects cannot sit inside a JSON
    string (strict JSON refuses it), so no element spans two lines, and an array of exactly as many elements as
    lines has each line as one element, the value ``json.loads`` gives for that line alone. Each element is then
    validated as its line would be (a bad record is reported with its own line number). Anything else about a run
    (a blank, not-JSON or non-object line, CRLF endings, whitespace around an object, a line that is not UTF-8)
    sends that run through ``parse_lines`` line by line."""
    out: list = []
    append = out.append
    size = len(body)
    start = 0
    lineno = first_line
    loads = json.loads
    while True:
        end = body.find(b"\n", start + BLOCK_BYTES)
        if end < 0:
            end = size
        piece = body[start:end]
        n = piece.count(b"\n") + 1
        objs = None
        if piece[:1] == b"{" and piece[-1:] == b"}" and piece.count(_LINE_BREAK) == n - 1:
            try:  # every newline is "}\n{": a comma before each (a one-byte pattern, the fastest replace)
                objs = loads(b"[" + piece.replace(b"\n", _ARRAY_BREAK) + b"]")
                objs = objs if len(objs) == n else None
            except (ValueError, RecursionError):  # the line-by-line reader decides (and reports)
                objs = None
        if objs is None:
            out.extend(parse_lines(zip(range(lineno, lineno + n), piece.split(b"\n"), repeat(True)), source))
        else:
            i = lineno
            for obj in objs:
                try:
                    if type(obj) is dict and obj.get("type") == "request":
                        append(parse_request(obj))
                    else:
                        rec = parse_object(obj)
                        if type(rec) is RunHeader:
                            rec.line = i
                        append(_unknown_issue(source, i, rec) if type(rec) is UnknownRecord else rec)
                except _LINE_ERRORS as exc:  # RecordError: worded as parse_lines words it
                    append(_line_issue(source, i, exc, True, obj))
                i += 1
        if end >= size:
            return out
        lineno += n
        start = end + 1

