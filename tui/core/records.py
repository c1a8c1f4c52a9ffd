"""Record format v1: JSON Lines, one object per line, each with a ``"type"``.

Pure parsing and validation; no I/O beyond what the caller hands in.
See ``docs/record-format.md`` for the field-by-field description.

Design rules
- Readers ignore unknown fields, reject records missing required fields, and
  count (never raise on) unknown record types.
- TTFT is derived (``t_first_token - t_sent``), never trusted from a field.
- A malformed line is reported with its file and line number and counted.

Why one module of ~700 lines: the record types, their validation, the one outcome rule and the block reader
are the format's single definition; every reader (report, replay, importers) goes through them, so they stay
together rather than being spread where a second copy could drift.
"""

from __future__ import annotations

import functools
import json
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, BinaryIO, Final, Literal

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
    "other",
)

# "seal": the digest chain's final record (tui.core.chain; docs/record-format.md "Digest chain")
KNOWN_TYPES = ("run", "request", "gpu", "queue", "budget", "step", "host", "watch", "seal")


class RecordError(ValueError):
    """A record that cannot be used: bad JSON, missing/ill-typed required field."""


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

#: A request's outcome (the value is what reports and --json carry).
Outcome = Literal["good", "slow", "failed", "excluded"]
GOOD: Final = "good"
SLOW: Final = "slow"
FAILED: Final = "failed"
EXCLUDED: Final = "excluded"
OUTCOMES: tuple[Outcome, ...] = (GOOD, SLOW, FAILED, EXCLUDED)
CANCELLED = "cancelled"


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


_TTFT_ONLY = outcome_rule(1000.0)  # the TTFT part of the rule does not depend on the SLO


@dataclass(slots=True)
class GpuSample:
    t: float
    device: int
    name: str | None
    memory_used: int | None
    memory_total: int | None
    utilization: float | None = None


@dataclass(slots=True)
class QueueSample:
    t: float
    source: str
    waiting: float | None = None
    running: float | None = None
    kv_cache_usage: float | None = None
    client_in_flight: int | None = None


@dataclass(slots=True)
class HostSample:
    t: float
    cpu_percent: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    client_cpu_percent: float | None = None


@dataclass(slots=True)
class StepRecord:
    """Marks the start or end of one load step (level, round)."""

    t: float
    event: str  # "start" | "end"
    level: float | None
    round: int = 1
    mode: str | None = None  # "closed" | "open"
    info: dict = field(default_factory=dict)


@dataclass(slots=True)
class RunHeader:
    data: dict

    @property
    def synthetic(self) -> bool:
        return bool(self.data.get("synthetic", False))

    @property
    def started_at(self) -> float | None:
        v = self.data.get("started_at")
        return float(v) if _is_num(v) else None  # type: ignore[arg-type]  # (_is_num checked it)


@dataclass(slots=True)
class BudgetRecord:
    data: dict


@dataclass(slots=True)
class WatchRecord:
    """One window of a `servewatch watch` session (see tui.core.watch.window_from_record)."""

    data: dict


@dataclass(slots=True)
class SealRecord:
    """The final record of a chained run (tui.core.chain): its checkpoint; verified by ``ChainVerifier``."""

    data: dict


@dataclass(slots=True)
class UnknownRecord:
    type: str
    data: dict


@dataclass(slots=True)
class LineIssue:
    """A line that could not be used, with where it came from."""

    source: str
    line: int
    reason: str
    kind: str = "malformed"  # "malformed" | "truncated" | "unknown_type"

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


Record = (RequestRecord | GpuSample | QueueSample | HostSample | StepRecord | RunHeader | BudgetRecord | WatchRecord
          | SealRecord | UnknownRecord)


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _num(d: dict, key: str, required: bool = False) -> float | None:
    v = d.get(key)
    if v is None:
        if required:
            raise RecordError(f"missing required field {key!r}")
        return None
    if not _is_num(v):
        raise RecordError(f"field {key!r} must be a finite number, got {v!r:.40}")
    return float(v)


def _int(d: dict, key: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if not _is_num(v):
        raise RecordError(f"field {key!r} must be a number, got {v!r:.40}")
    if not -_INT_MAX <= v <= _INT_MAX:
        raise RecordError(f"field {key!r} is out of range (|x| <= 2**63), got {v!r:.40}")
    return int(v)


#: Record times are epoch seconds of a real clock: from 2000-01-01 (anything earlier is a stamp that is not a wall
#: clock's, such as ``t_sent = 1.0``, which once gave a "window" of 30,000,001 minutes) to 2100-01-01.
T_MIN_EPOCH: Final = 946_684_800.0
T_MAX_EPOCH: Final = 4_102_444_800.0
_T_MIN = T_MIN_EPOCH
_T_MAX = T_MAX_EPOCH
#: the largest count (tokens, rounds, retries) a record may carry: 2**53, where a float still holds every integer
_COUNT_MAX: Final = 2**53
_INT_MAX: Final = 2**63


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
    if not _is_num(v) or v != int(v):
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
    try:
        (rid, t_sent, t_end, complete, t_first, t_int, phase, error, itok, otok, status, rnd, level, fr,
         ed) = _REQUEST_FIELDS(d)
    except KeyError:  # a field left out (other writers, hand-written files): absent reads as null
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
    if offsets is not None and not (isinstance(offsets, list) and all(_is_num(x) for x in offsets)):
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
    return RequestRecord(
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
            kv_cache_usage=_num(d, "kv_cache_usage"),
            client_in_flight=_int(d, "client_in_flight"),
        )
    if typ == "host":
        return HostSample(
            t=_num(d, "t", True),  # type: ignore[arg-type]
            cpu_percent=_num(d, "cpu_percent"),
            memory_used=_int(d, "memory_used"),
            memory_total=_int(d, "memory_total"),
            client_cpu_percent=_num(d, "client_cpu_percent"),
        )
    if typ == "step":
        ev = d.get("event")
        if ev not in ("start", "end"):
            raise RecordError("field 'event' of a step must be 'start' or 'end'")
        info = {k: v for k, v in d.items() if k not in ("type", "t", "event", "level", "round", "mode")}
        rnd = _int(d, "round")
        return StepRecord(
            t=_num(d, "t", True),  # type: ignore[arg-type]
            event=ev,
            level=_num(d, "level"),
            round=1 if rnd is None else rnd,
            mode=_str(d, "mode"),
            info=info,
        )
    if typ == "run":
        sv = d.get("schema_version")
        if sv is None:
            raise RecordError("missing required field 'schema_version'")
        if not _is_num(sv) or int(sv) > SCHEMA_VERSION:
            raise RecordError(f"unsupported schema_version {sv!r:.20} (this reader knows {SCHEMA_VERSION})")
        src = d.get("source")
        if src is not None:
            from tui.core.provenance import check_source_block

            problem = check_source_block(src)
            if problem:
                raise RecordError(problem)
        return RunHeader(d)
    if typ == "budget":
        return BudgetRecord(d)
    if typ == "watch":
        from tui.core.watch import window_from_record

        try:
            window_from_record(d)
        except ValueError as exc:
            raise RecordError(f"watch record: {exc}") from None
        return WatchRecord(d)
    if typ == "seal":  # the digest chain's final record: checked by tui.core.chain, not here
        return SealRecord(d)
    if typ is None:
        raise RecordError("missing required field 'type'")
    return UnknownRecord(str(typ)[:40], d)


_decode = json.JSONDecoder().decode


def parse_line(text: str | bytes) -> Record:
    """Parse one JSONL line (without its newline)."""
    try:
        obj = _decode(text) if type(text) is str else json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise RecordError(f"invalid JSON: {str(exc)[:80]}") from None
    return parse_object(obj)


def iter_lines(chunks: Iterable[bytes], source: str) -> Iterator[tuple[int, bytes, bool]]:
    """Split byte chunks into (line_number, line, terminated) triples.

    The last line of the stream is yielded with ``terminated=False`` when it has
    no newline (a file still being written, or cut short).
    """
    buf = b""
    lineno = 0
    for chunk in chunks:
        buf += chunk
        if b"\n" not in chunk:
            continue
        *whole, buf = buf.split(b"\n")
        for line in whole:
            lineno += 1
            yield lineno, line, True
    if buf:
        lineno += 1
        yield lineno, buf, False


_LINE_ERRORS = (ValueError, RecursionError, OverflowError)


def _line_issue(source: str, lineno: int, exc: BaseException, terminated: bool) -> LineIssue:
    """The issue a line that could not be used is reported as (one wording for every reader)."""
    if isinstance(exc, RecordError):
        reason = str(exc)
    elif isinstance(exc, OverflowError):  # an integer too large for a float (JSON allows any length)
        reason = f"number out of range: {str(exc)[:80]}"
    else:
        reason = f"invalid JSON: {str(exc)[:80]}"
    if not terminated:
        return LineIssue(source, lineno, f"truncated final line ({reason})", "truncated")
    return LineIssue(source, lineno, reason)


def _unknown_issue(source: str, lineno: int, rec: UnknownRecord) -> LineIssue:
    return LineIssue(source, lineno, f"unknown record type {rec.type!r} skipped", "unknown_type")


def parse_lines(
    numbered: Iterable[tuple[int, bytes | str, bool]], source: str
) -> Iterator[Record | LineIssue]:
    """Parse numbered lines ``(line_number, line, terminated)``; yields records and LineIssue
    objects, never raises. The reference line-by-line reader: ``parse_block`` reports exactly what
    this reports for the same lines (a property test checks it)."""
    decode = _decode
    for lineno, line, terminated in numbered:
        try:
            obj = decode(line) if type(line) is str else json.loads(line)
            if type(obj) is dict and obj.get("type") == "request":
                yield parse_request(obj)
                continue
            rec = parse_object(obj)
        except _LINE_ERRORS as exc:  # RecordError and JSON/Unicode errors are ValueErrors
            if not (line.strip(" \t\r\n") if isinstance(line, str) else line.strip(b" \t\r\n")):
                continue  # a blank line (JSON whitespace only) is not a record
            yield _line_issue(source, lineno, exc, terminated)
            continue
        if isinstance(rec, UnknownRecord):
            yield _unknown_issue(source, lineno, rec)
            continue
        yield rec


_LINE_BREAK = b"}\n{"
_ARRAY_BREAK = b"},\n{"  # the newline stays: a line break inside a JSON string is then a decode error
BLOCK_BYTES = 1 << 14  # one json.loads call per ~50 lines: its objects are still in the CPU cache when validated


def parse_block(body: bytes, first_line: int, source: str) -> list[Record | LineIssue]:
    """The records and issues of complete lines: ``body`` is the lines joined by newlines (none at
    the end), the first of them line ``first_line``. Reports exactly what ``parse_lines`` reports
    for the same lines (every line terminated); the fast block reader of reports and replays.

    A run of lines that are each one JSON object (every newline between a ``}`` and a ``{``) is
    decoded with one ``json.loads`` as a JSON array, about twice as fast as one call per line
    (object keys are shared). The array is ``[`` + the lines joined by ``,`` + newline + ``]``: the
    newline kept between objects cannot sit inside a JSON string (strict JSON refuses it), so no
    element spans two lines, and an array of exactly as many elements as lines has each line as
    one element, the value ``json.loads`` gives for that line alone. Each element is then validated
    as its line would be (a bad record is reported with its own line number). Anything else about
    a run (a blank, not-JSON or non-object line, CRLF endings, whitespace around an object, a
    line that is not UTF-8) sends that run through ``parse_lines`` line by line.
    """
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
            try:
                objs = loads(b"[" + piece.replace(_LINE_BREAK, _ARRAY_BREAK) + b"]")
            except (ValueError, RecursionError):  # the line-by-line reader decides (and reports)
                objs = None
            if objs is not None and len(objs) != n:
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
                        append(_unknown_issue(source, i, rec) if type(rec) is UnknownRecord else rec)
                except _LINE_ERRORS as exc:  # RecordError: worded as parse_lines words it
                    append(_line_issue(source, i, exc, True))
                i += 1
        if end >= size:
            return out
        lineno += n
        start = end + 1


def iter_blocks(fh: BinaryIO, source: str, chunk_size: int = 1 << 20,
                tap: Callable[[bytes], None] | None = None) -> Iterator[list[Record | LineIssue]]:
    """Read an open binary stream to its end, ``chunk_size`` bytes at a time (memory bounded by
    the chunk), yielding the records and issues of each chunk's complete lines (``parse_block``);
    an unterminated last line is parsed last, as a truncated line when it is not a record.
    ``tap``: called with every chunk of raw bytes as read, in order (the digest chain's verifier)."""
    lineno = 1
    partial = b""
    read = fh.read
    while True:
        data = read(chunk_size)
        if not data:
            break
        if tap is not None:
            tap(data)
        buf = partial + data if partial else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            partial = buf
            continue
        body, partial = buf[:cut], buf[cut + 1:]
        items = parse_block(body, lineno, source)
        lineno += body.count(b"\n") + 1
        yield items
    if partial:
        yield list(parse_lines(((lineno, partial, False),), source))


def iter_file(fh: BinaryIO, source: str, chunk_size: int = 1 << 20) -> Iterator[Record | LineIssue]:
    """``iter_blocks`` one item at a time."""
    for items in iter_blocks(fh, source, chunk_size):
        yield from items


def read_file(path: str) -> Iterator[Record | LineIssue]:
    """Read a whole record file once (no following). Never raises on content.

    Lines are UTF-8 (the record format): a line with bytes that are not UTF-8 is reported as a
    bad line with its number, like any other line that is not JSON.
    """
    with open(path, "rb") as fh:
        yield from iter_file(fh, path)


def not_a_record_file(usable: int, total: int, first_problem: str | LineIssue | None) -> str | None:
    """The one-line refusal for input that matches no known schema (None when some line is usable).

    ``total`` counts the non-blank lines read, ``usable`` those that parsed as records."""
    if usable > 0:
        return None
    if total == 0:
        return "not a servewatch record file (0 of 0 lines usable: it is empty)"
    first = f"; first problem: {first_problem}" if first_problem is not None else ""
    return f"not a servewatch record file (0 of {total} lines usable{first})"


def scan_usable(items: Iterable[Record | LineIssue]) -> tuple[int, int, LineIssue | None]:
    """(usable, total, first problem) over parsed items, stopping at the first usable record
    (enough to tell a record file from anything else without reading it all)."""
    total = 0
    first: LineIssue | None = None
    for it in items:
        total += 1
        if not isinstance(it, LineIssue):
            return 1, total, first
        if first is None:
            first = it
    return 0, total, first


# ---------------------------------------------------------------- writing

def request_to_dict(r: RequestRecord) -> dict:
    d = {
        "type": "request",
        "id": r.id,
        "t_intended": r.t_intended,
        "t_sent": r.t_sent,
        "t_first_token": r.t_first_token,
        "t_end": r.t_end,
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "finish_reason": r.finish_reason,
        "http_status": r.http_status,
        "complete": r.complete,
        "error": r.error,
        "error_detail": r.error_detail,
        "phase": r.phase,
        "level": r.level,
        "round": r.round,
    }
    if r.token_offsets is not None:
        d["token_offsets"] = r.token_offsets
    if r.retried:
        d["retried"] = r.retried
    return d


def dumps(d: dict) -> str:
    """One JSONL line (with trailing newline)."""
    return json.dumps(d, separators=(",", ":"), allow_nan=False) + "\n"


def source_block(kind: str = "run", *, file: str | None = None, sha256: str | None = None,
                 derived: list[str] | tuple[str, ...] = (), tool: str = "servewatch",
                 version: str | None = None) -> dict:
    """The run header's ``source`` block (see docs/record-format.md): what produced the records."""
    from tui import __version__
    from tui.core.provenance import SOURCE_KINDS

    if kind not in SOURCE_KINDS:
        raise ValueError(f"source kind must be one of {SOURCE_KINDS}, got {kind!r}")
    return {"kind": kind, "tool": tool, "version": version or __version__, "file": file, "sha256": sha256,
            "derived": list(derived)}


def run_header(
    *,
    target: dict | None = None,
    load: dict | None = None,
    environment: dict | None = None,
    synthetic: bool,
    started_at: float | None = None,
    tool_version: str | None = None,
    **extra: Any,
) -> dict:
    """Build a ``run`` header dict. ``synthetic`` is mandatory on purpose."""
    from tui import __version__

    d = {
        "type": "run",
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool": "servewatch",
        "tool_version": tool_version or __version__,
        "started_at": started_at,
        "target": target or {},
        "load": load or {},
        "environment": environment or {},
        "synthetic": bool(synthetic),
    }
    d.update(extra)
    return d
