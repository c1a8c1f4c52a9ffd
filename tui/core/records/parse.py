"""Record validation: one decoded JSON value -> one record (``parse_object``, ``parse_request``), and the line and
block parsers every reader goes through (``parse_lines``, ``parse_block``). Readers ignore unknown fields, reject
records missing required fields, count (never raise on) unknown record types; a malformed line is reported with its
file and line number (``LineIssue``) and counted."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any

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
from tui.core.records.schema import (
    PHASES,
    SCHEMA_VERSION,
    LineIssue,
    RecordError,
    is_num,
)
from tui.core.records.validate import (
    _COUNT_MAX,
    _NUM_TYPES,
    _fraction,
    _int,
    _isfinite,
    _num,
    _str,
)
from tui.core.records.validate import (
    parse_request as parse_request,
)
from tui.core.records.watch import window_from_record

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
_OPEN_ARRAY = b"["  # a piece with one (anywhere, even in a string) is read line by line
BLOCK_BYTES = 1 << 14  # one json.loads call per ~50 lines: its objects are still in the CPU cache when validated


def parse_block(body: bytes, first_line: int, source: str) -> list[Record | LineIssue]:
    """The records and issues of complete lines: ``body`` is the lines joined by newlines (none at the end), the
    first of them line ``first_line``. Reports exactly what ``parse_lines`` reports for the same lines (every line
    terminated); the fast block reader of reports and replays.

    A run of lines that are each one JSON object (every newline between a ``}`` and a ``{``) is decoded with one
    ``json.loads`` as a JSON array, about twice as fast as one call per line (object keys are shared). The array is
    ``[`` + the lines joined by ``,`` + newline + ``]``, each element then validated as its line would be (a bad
    record is reported with its own line number). Why each element is exactly one line: every line starts with
    ``{`` and ends with ``}``; the newline kept after each comma cannot sit inside a JSON string (strict JSON refuses
    it); an object left open at a line's end meets ``,`` then ``{``, which no object accepts; and with no ``[`` in
    the run no array can be left open (inside one, ``,{`` would continue it: a line ``{"x":[{}`` and the next
    ``{}]}`` would make one element, and a line holding two objects would make the count come out even). So every
    line holds at least one element, and an array of exactly as many elements as lines has each line as one
    element, the value ``json.loads`` gives for that line alone. Anything else about a run (a ``[``, a blank,
    not-JSON or non-object line, CRLF endings, whitespace around an object, a line that is not UTF-8) sends that run
    through ``parse_lines`` line by line."""
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
        joined = piece.replace(b"\n", _ARRAY_BREAK)  # a comma before each newline (the fastest replace)
        n = len(joined) - len(piece) + 1  # the lines of the piece: one byte more per newline
        objs = None
        if (piece[:1] == b"{" and piece[-1:] == b"}" and _OPEN_ARRAY not in piece
                and piece.count(_LINE_BREAK) == n - 1):
            try:  # every newline is "}\n{", and no "[" (the docstring: no object can span two lines)
                objs = loads(b"".join((b"[", joined, b"]")))
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

