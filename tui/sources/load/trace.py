"""Arrivals from a trace: the arrival times and token lengths of a recorded workload, for an open-loop replay.

:func:`load_trace` reads one file, once and streaming, into a compact :class:`Trace` (``array`` columns:
8 bytes per arrival time, 4 per length), and :func:`trace_schedule` hands the load generator its
``(offset s, input tokens, output tokens)`` in order. Standard library only (plus ``tui.core``).

Formats, detected from the content (the first line that is neither blank nor a ``#`` comment), not the
file name:

- **servewatch record file** (JSON Lines whose objects carry a ``type``; ``docs/record-format.md``): the
  arrivals are the measured requests' ``t_intended`` (offsets from the first), the lengths their
  ``input_tokens_asked`` / ``output_tokens_asked`` (else ``input_tokens`` / ``output_tokens``). Only an
  open-loop run has an arrival process: a closed-loop recording (``load.mode`` ``closed``) is refused, and so
  is a file without a run header or with more than one (runs appended to one file: which to replay would be
  a guess). Every measured step and round of the run is taken, in ``t_intended`` order, as one arrival
  process, the pauses between steps included: the replay re-issues the whole measured load of that run.
  Warmup requests (closed loop) are not replayed (counted in a note). Requests are written as they end,
  so their arrivals are always sorted here; that is not reported as a problem. A recording of a shaped
  workload (sessions, shared prefixes, a dataset: issue 23) also gives :attr:`Trace.replay`, what each
  arrival replays (:mod:`tui.sources.load.trace_sessions`); its arrivals are then the session starts.
- **Azure LLM inference trace** (CSV, header ``TIMESTAMP,ContextTokens,GeneratedTokens``): ``TIMESTAMP`` is
  a date and time such as ``2023-11-16 18:15:46.6805900`` (any number of fractional digits; ``T`` between
  date and time and a final ``Z`` accepted; no other time zone), the lengths are ``ContextTokens`` and
  ``GeneratedTokens``.
- **BurstGPT** (CSV, header with ``Timestamp``, ``Request tokens``, ``Response tokens``; other columns such
  as ``Model``, ``Total tokens``, ``Log Type`` ignored): ``Timestamp`` in seconds (a number).
- **Mooncake** (JSON Lines, one object per line): ``timestamp`` in milliseconds, ``input_length``,
  ``output_length``; other keys (``hash_ids``) ignored.

Column names are matched without regard to case or surrounding spaces. Rules for every format:

- ``#`` lines before the header (CSV) or the first object (JSONL) are comments: the first is kept in
  ``source["comment"]`` (the bundled synthetic excerpts say there that they are synthetic). A ``#`` line
  later is a bad row. Blank lines are not rows.
- A bad row (missing field, not a number, negative length, unreadable JSON, bad date) is reported as
  ``FILE:LINE: reason`` (the first :data:`MAX_LISTED` in ``problems``), counted in ``source["skipped"]`` and
  not replayed. More than ``max(BAD_ROWS_FLOOR, BAD_ROWS_FRACTION x rows)`` bad rows refuse the file (it is
  probably not that format), and so do zero usable rows: one :class:`ConfigError` line naming the file.
- A length of 0 is sent as 1 token and counted (``source["clamped"]``): the arrival is kept, so the arrival
  process stays the trace's (BurstGPT records failed requests with 0 response tokens).
- Rows out of time order are sorted (stable) and counted (``source["out_of_order"]``, in a note).
- ``window=(START, END)``: seconds of ORIGINAL trace time after the first arrival of the whole trace,
  ``START <= t < END`` (``END`` None: to the end), applied before ``speed``; the offsets are then re-based to
  the first kept arrival. ``speed`` X divides the offsets (2 = twice as fast).
- The replay is one open-loop step whose level is the mean rate after window and speed:
  ``(arrivals - 1) / (last offset)`` req/s, rounded to 3 decimals (at least 0.001); a trace (or window)
  needs two arrivals at different times to have a rate.
"""

from __future__ import annotations

import bisect
import csv
import hashlib
import io
import json
import math
import os
import re
import stat
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any, BinaryIO

from tui.core.bounds import MAX_LINE_BYTES, size_text
from tui.sources.infiles import open_input
from tui.sources.load.errors import ConfigError
from tui.sources.load.trace_sessions import Collector, ReplayWorkload, window_replay

FORMATS = ("servewatch", "azure", "burstgpt", "mooncake")
FORMAT_NAMES = {
    "servewatch": "servewatch record file",
    "azure": "Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens)",
    "burstgpt": "BurstGPT CSV (Timestamp, Request tokens, Response tokens)",
    "mooncake": "Mooncake JSONL (timestamp ms, input_length, output_length)",
}
MAX_LISTED = 20  # bad rows listed one by one (all of them are counted)
BAD_ROWS_FLOOR = 10  # a file is refused when more than max(FLOOR, FRACTION x rows) rows are bad
BAD_ROWS_FRACTION = 0.05
MAX_LENGTH = 2**31 - 1  # the length columns are 32-bit
FIRST_LINE_LIMIT = 1 << 16  # a first line longer than this is not a trace header

_AZURE = ("timestamp", "contexttokens", "generatedtokens")
_BURSTGPT = ("timestamp", "request tokens", "response tokens")
_MOONCAKE = ("timestamp", "input_length", "output_length")


# ------------------------------------------------------------------ the result


@dataclass(eq=False)
class Trace:
    """Arrivals in time order: ``offsets`` (s from the first kept arrival, already divided by the speed) and
    the token lengths of each; ``source`` (what the run header records); ``problems`` (bad rows, FILE:LINE:
    reason, the first MAX_LISTED); ``notes`` (what was changed or left out, in words)."""

    offsets: array
    input_tokens: array
    output_tokens: array
    source: dict
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    path: str = ""  # as given (the problems name it); the header names the file only
    # a servewatch recording of a shaped workload (sessions, shared prefixes, a dataset): what each arrival (a
    # session start, or a request) replays (tui.sources.load.trace_sessions); None: lengths only
    replay: ReplayWorkload | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def synthetic_reason(self) -> str | None:
        """Why the trace is synthetic, in its own words: a first comment line with the word "synthetic" (the bundled
        excerpts say so there), or a servewatch recording whose header is labelled synthetic; None otherwise."""
        comment = str(self.source.get("comment") or "")
        if re.search(r"\bsynthetic\b", comment, re.IGNORECASE):
            return f"the trace replayed says so: {comment!r}"
        if self.source.get("recording_synthetic"):
            return "the recording replayed is labelled synthetic"
        return None

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last arrival (after window and speed)."""
        return self.offsets[-1] if len(self.offsets) else 0.0

    @property
    def mean_rate(self) -> float:
        """Arrivals per second between the first and the last: (n - 1) / span."""
        return (len(self) - 1) / self.span_s if self.span_s > 0 else 0.0

    @property
    def level(self) -> float:
        """The replay step's level (req/s): the mean rate rounded to 3 decimals, at least 0.001."""
        return max(0.001, round(self.mean_rate, 3))

    @property
    def input_range(self) -> tuple[int, int]:
        if self.replay is not None:
            return self.replay.length_range("input_tokens")
        return min(self.input_tokens), max(self.input_tokens)

    @property
    def output_range(self) -> tuple[int, int]:
        if self.replay is not None:
            return self.replay.length_range("output_tokens")
        return min(self.output_tokens), max(self.output_tokens)

    def describe(self) -> str:
        """One line: what is replayed, from what."""
        s = self.source
        win = f", window {window_text(*s['window'])}" if s.get("window") else ""
        rp = self.replay
        what, unit = f"{len(self):,} arrivals", "req/s"
        if rp is not None:
            what = rp.describe() + " starting"
            unit = "sessions/s" if rp.sessions_mode else unit
        return (f"trace {s['file']} ({s['format']}, sha256 {s['sha256'][:12]}): {what} over "
                f"{self.span_s:.1f} s (speed {s['speed']:g}{win}), mean {self.mean_rate:.3f} {unit}; "
                f"{s['rows']:,} rows read, {s['skipped']:,} bad")

    def header_block(self) -> dict:
        """The run header's ``load.trace`` object."""
        given, name = self.path + ":", self.source["file"] + ":"
        problems = [name + p[len(given):] if self.path and p.startswith(given) else p for p in self.problems]
        block = {**self.source, "arrivals": len(self), "span_s": round(self.span_s, 6),
                 "mean_rate": round(self.mean_rate, 6), "problems": problems, "notes": list(self.notes)}
        if self.replay is not None:
            rb = self.replay.header_block()
            rb["anomaly_list"] = [name + p[len(given):] if self.path and p.startswith(given) else p
                                  for p in rb["anomaly_list"]]
            block["replay"] = rb
        return block

    def header_source(self) -> dict:
        """The run header's ``source`` block: kind ``trace``, the trace file's name, SHA-256 and format."""
        from tui.core.records import source_block

        return {**source_block("trace", file=self.source["file"], sha256=self.source["sha256"]),
                "format": self.source["format"]}


def trace_schedule(trace: Trace) -> Iterator[tuple[float, int, int]]:
    """The replay's schedule: (offset s from the step start, input tokens, output tokens) per arrival, in order."""
    return zip(trace.offsets, trace.input_tokens, trace.output_tokens, strict=True)


# ------------------------------------------------------------------ arguments


def parse_window(text: str) -> tuple[float, float | None]:
    """``START-END`` or ``START-`` (seconds, START >= 0, END > START) -> (start, end or None)."""
    a, sep, b = str(text).strip().partition("-")
    usage = f"--trace-window wants START-END or START- in seconds of the trace (e.g. 60-180), got {text!r}"
    if not sep or not a.strip():
        raise ConfigError(usage)
    try:
        start = float(a)
        end = float(b) if b.strip() else None
    except ValueError:
        raise ConfigError(usage) from None
    if not math.isfinite(start) or start < 0 or (end is not None and not math.isfinite(end)):
        raise ConfigError(usage)
    if end is not None and not end > start:
        raise ConfigError(f"--trace-window {text}: END must be after START")
    return start, end


def window_text(start: float, end: float | None) -> str:
    """``60-180 s`` or ``from 60 s to the end``."""
    return f"from {start:g} s to the end" if end is None else f"{start:g}-{end:g} s"


def _check_speed(speed: Any) -> float:
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not (math.isfinite(speed) and speed > 0):
        raise ConfigError(f"--trace-speed must be a number > 0, got {speed!r}")
    return float(speed)


# ------------------------------------------------------------------ reading


class _Hashing(io.RawIOBase):
    """A raw reader that feeds every byte it reads to a hash (one pass: the SHA-256 of the whole file)."""

    def __init__(self, raw: BinaryIO, digest: Any) -> None:
        super().__init__()
        self._raw = raw
        self._digest = digest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._raw.read(len(b))
        n = len(data)
        b[:n] = data
        if n:
            self._digest.update(data)
        return n


class _Rows:
    """Rows in file order, with the bookkeeping of bad ones."""

    def __init__(self, shown: str, fmt: str) -> None:
        self.shown = shown
        self.fmt = fmt
        self.t = array("d")
        self.i = array("i")
        self.o = array("i")
        self.rows = 0
        self.bad = 0
        self.clamped = 0
        self.out_of_order = 0
        self.tmax = -math.inf
        self.problems: list[str] = []

    def bad_row(self, lineno: int, reason: str) -> None:
        self.rows += 1
        self.bad += 1
        if len(self.problems) < MAX_LISTED:
            self.problems.append(f"{self.shown}:{lineno}: {reason}")
        if self.bad >= 1000 and 2 * self.bad > self.rows:  # stop reading a wrong file early
            raise ConfigError(f"trace {self.shown}: {self.bad:,} of the first {self.rows:,} rows are bad "
                              f"(first: {self.problems[0]}): not a {FORMAT_NAMES[self.fmt]}?")

    def add(self, t: float, n_in: int, n_out: int) -> None:
        self.rows += 1
        if n_in == 0 or n_out == 0:
            self.clamped += 1
            n_in, n_out = max(1, n_in), max(1, n_out)
        if t < self.tmax:
            self.out_of_order += 1
        else:
            self.tmax = t
        self.t.append(t)
        self.i.append(n_in)
        self.o.append(n_out)


def _length(v: Any, name: str) -> int:
    """A token count: a whole number >= 0 (an int, an integral float, or text of one)."""
    if v is None or v == "":
        raise ValueError(f"{name} is missing")
    if isinstance(v, bool):
        raise ValueError(f"{name} must be a whole number, got {v!r}")
    if isinstance(v, str):
        s = v.strip()
        try:
            n = int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                raise ValueError(f"{name} is not a number: {v[:40]!r}") from None
            if not (math.isfinite(f) and f == int(f)):
                raise ValueError(f"{name} must be a whole number, got {v[:40]!r}") from None
            n = int(f)
    elif isinstance(v, int):
        n = v
    elif isinstance(v, float) and math.isfinite(v) and v == int(v):
        n = int(v)
    else:
        raise ValueError(f"{name} must be a whole number, got {str(v)[:40]!r}")
    if n < 0:
        raise ValueError(f"{name} is negative ({n})")
    if n > MAX_LENGTH:
        raise ValueError(f"{name} is too large ({n})")
    return n


def _seconds(v: Any, name: str, scale: float = 1.0) -> float:
    if isinstance(v, bool) or v is None:
        raise ValueError(f"{name} must be a number, got {v!r}")
    try:
        t = float(v.strip() if isinstance(v, str) else v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} is not a number: {str(v)[:40]!r}") from None
    if not math.isfinite(t):
        raise ValueError(f"{name} must be a finite number, got {str(v)[:40]!r}")
    return t * scale


def _azure_clock() -> Callable[[str], float]:
    """TIMESTAMP text -> seconds since midnight of the first date seen (small numbers: full precision)."""
    days: dict[str, int] = {}
    first: list[int] = []
    example = "such as 2023-11-16 18:15:46.6805900"

    def parse(text: str) -> float:
        s = text.strip()
        if s.endswith("Z"):
            s = s[:-1]
        d, sep, tod = s.partition(" ")
        if not sep:
            d, sep, tod = s.partition("T")
        if not sep:
            raise ValueError(f"TIMESTAMP {text[:40]!r} is not a date and time {example}")
        day = days.get(d)
        if day is None:
            try:
                day = date.fromisoformat(d.strip()).toordinal()
            except ValueError:
                raise ValueError(f"TIMESTAMP {text[:40]!r} has no valid date ({example})") from None
            if len(days) < 10_000:
                days[d] = day
            if not first:
                first.append(day)
        parts = tod.strip().split(":")
        try:
            if len(parts) != 3:
                raise ValueError
            h, m, sec = int(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            raise ValueError(f"TIMESTAMP {text[:40]!r} has no valid time of day ({example}; no time zone)") from None
        if not (0 <= h < 24 and 0 <= m < 60 and 0 <= sec < 61):
            raise ValueError(f"TIMESTAMP {text[:40]!r} has no valid time of day ({example})")
        return (day - first[0]) * 86400.0 + h * 3600.0 + m * 60.0 + sec

    return parse


def _csv(rows: _Rows, text: Iterable[str], header: list[str], header_line: int, fmt: str) -> None:
    names = [h.strip().lower() for h in header]
    cols = _AZURE if fmt == "azure" else _BURSTGPT
    it, ii, io_ = (names.index(c) for c in cols)
    need = max(it, ii, io_) + 1
    label = [header[it].strip(), header[ii].strip(), header[io_].strip()]
    clock = _azure_clock() if fmt == "azure" else None
    reader = csv.reader(text)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            rows.bad_row(header_line + reader.line_num, f"not CSV: {exc}")
            continue
        lineno = header_line + reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < need:
            rows.bad_row(lineno, f"{len(row)} fields, {label[1]} and {label[2]} need {need}")
            continue
        try:
            t = clock(row[it]) if clock is not None else _seconds(row[it], label[0])
            n_in = _length(row[ii], label[1])
            n_out = _length(row[io_], label[2])
        except ValueError as exc:
            rows.bad_row(lineno, str(exc))
            continue
        rows.add(t, n_in, n_out)


def _mooncake(rows: _Rows, lines: Iterable[tuple[int, str]]) -> None:
    for lineno, line in lines:
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            rows.bad_row(lineno, "not JSON")
            continue
        if not isinstance(obj, dict):
            rows.bad_row(lineno, "not a JSON object")
            continue
        try:
            t = _seconds(obj.get("timestamp"), "timestamp", 1e-3)
            n_in = _length(obj.get("input_length"), "input_length")
            n_out = _length(obj.get("output_length"), "output_length")
        except ValueError as exc:
            rows.bad_row(lineno, str(exc))
            continue
        rows.add(t, n_in, n_out)


class _Recording:
    """What a servewatch record file says about itself beyond its arrivals."""

    def __init__(self, shown: str = "") -> None:
        self.coll = Collector(shown)  # the shaped-workload fields (sessions, prefixes, dataset rows)
        self.headers = 0
        self.warmup = 0
        self.synthetic = False
        self.levels: set = set()


def _servewatch(rows: _Rows, lines: Iterable[tuple[int, str]], rec: _Recording) -> None:
    from tui.core.records import RecordError, RunHeader, parse_object

    shown = rows.shown
    for lineno, line in lines:
        s = line.strip()
        if not s:
            continue
        try:
            d = json.loads(s)
            r = parse_object(d)
        except RecordError as exc:
            rows.bad_row(lineno, str(exc))
            continue
        except (ValueError, RecursionError):
            rows.bad_row(lineno, "not JSON")
            continue
        if isinstance(r, RunHeader):
            rec.headers += 1
            if rec.headers > 1:
                raise ConfigError(f"trace {shown} holds more than one run (a second run header at line {lineno}): "
                                  "which run to replay would be a guess; give a file with one run")
            load = d.get("load") if isinstance(d.get("load"), dict) else {}
            mode = load.get("mode")
            if mode == "closed":
                raise ConfigError(f"trace {shown} is a closed-loop recording (load.mode closed): it has no arrival "
                                  "process to replay (each request was sent when a worker's previous one ended); "
                                  "replay an open-loop (--rate) recording")
            if mode != "open":
                raise ConfigError(f"trace {shown}: its run header does not say it was an open-loop run "
                                  f"(load.mode {mode!r:.20}): no arrival process to replay")
            rec.synthetic = bool(d.get("synthetic"))
            rec.coll.header(load)
            continue
        if d.get("type") != "request":
            continue
        if d.get("phase") == "warmup":
            rec.warmup += 1
            continue
        try:
            t = _seconds(d.get("t_intended"), "t_intended")
            n_in = _length(d.get("input_tokens_asked", d.get("input_tokens")), "input_tokens_asked")
            n_out = _length(d.get("output_tokens_asked", d.get("output_tokens")), "output_tokens_asked")
            info = rec.coll.parse(lineno, d)
        except ValueError as exc:
            rows.bad_row(lineno, str(exc))
            continue
        rec.levels.add((d.get("level"), d.get("round")))
        rows.add(t, n_in, n_out)
        rec.coll.keep(len(rows.t) - 1, info)
    if rec.headers == 0:
        raise ConfigError(f"trace {shown} has no run header: cannot tell whether it was an open-loop run "
                          "(only open-loop recordings have an arrival process to replay)")


def _numbered(first: tuple[int, str], text: io.TextIOWrapper, rows: _Rows) -> Iterator[tuple[int, str]]:
    yield first
    yield from _capped(text, first[0], rows)


def _capped(text: io.TextIOWrapper, n: int, rows: _Rows) -> Iterator[tuple[int, str]]:
    """The lines after line ``n``, numbered; a line longer than ``MAX_LINE_BYTES`` is a bad row, read past in
    pieces (never held) and given as an empty line, so that the numbers of the lines after it stay right."""
    readline = text.readline
    while True:
        line = readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
            total = len(line)
            while True:
                more = readline(1 << 20)
                total += len(more)
                if not more or more.endswith("\n"):
                    break
            rows.bad_row(n, f"longer than the {size_text(MAX_LINE_BYTES)} line limit ({total:,} characters): skipped")
            line = "\n"
        yield n, line


def _detect(shown: str, first_line: str) -> tuple[str, list[str] | None]:
    s = first_line.strip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            if "type" in obj:
                return "servewatch", None
            if all(k in obj for k in _MOONCAKE):
                return "mooncake", None
    else:
        try:
            header = next(csv.reader([s]))
        except (csv.Error, StopIteration):
            header = []
        names = {h.strip().lower() for h in header}
        if set(_AZURE) <= names:
            return "azure", header
        if set(_BURSTGPT) <= names:
            return "burstgpt", header
    raise ConfigError(f"trace {shown}: not a trace servewatch reads (first line {s[:60]!r}); expected a servewatch "
                      "open-loop record file, an Azure LLM inference CSV (TIMESTAMP,ContextTokens,GeneratedTokens), "
                      "a BurstGPT CSV (Timestamp,Request tokens,Response tokens) or Mooncake JSONL "
                      "(timestamp, input_length, output_length)")


def _open(path: str) -> BinaryIO:
    shown = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"trace {shown}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read trace {shown}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"trace {shown} is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"trace {shown} is not a plain file (a device, socket or pipe)")
    try:
        return open_input(path, "trace")  # checked again on the open file: never blocks on a FIFO
    except OSError as exc:
        raise ConfigError(f"cannot read trace {shown}: {exc.strerror or exc}") from None


def load_trace(path: str, *, speed: float = 1.0, window: tuple[float, float | None] | str | None = None) -> Trace:
    """Read a trace file (format detected from its content, see the module doc) into a :class:`Trace`.

    Raises :class:`ConfigError` (one line naming the file) when the file cannot be read, is not a trace, is a
    closed-loop recording, has no usable or too many bad rows, or when the window keeps too few arrivals."""
    speed = _check_speed(speed)
    if isinstance(window, str):
        window = parse_window(window)
    if window is not None:
        window = parse_window(f"{window[0]}-{'' if window[1] is None else window[1]}")
    shown = str(path)
    digest = hashlib.sha256()
    raw = _open(path)
    with raw:
        hashing = _Hashing(raw, digest)
        text = io.TextIOWrapper(io.BufferedReader(hashing, 1 << 20), encoding="utf-8-sig", errors="replace",
                                newline="")
        comment = None
        lineno = 0
        first: tuple[int, str] | None = None
        while True:
            line = text.readline(FIRST_LINE_LIMIT)
            if not line:
                break
            lineno += 1
            if len(line) >= FIRST_LINE_LIMIT and not line.endswith("\n"):
                raise ConfigError(f"trace {shown}: its first line is longer than {FIRST_LINE_LIMIT // 1024} KiB: "
                                  "not a trace servewatch reads")
            s = line.strip()
            if not s:
                continue
            if s.startswith("#"):
                if comment is None:
                    comment = s.lstrip("#").strip()[:200]
                continue
            first = (lineno, line)
            break
        if first is None:
            raise ConfigError(f"trace {shown} is empty: no arrivals to replay")
        fmt, header = _detect(shown, first[1])
        rows = _Rows(shown, fmt)
        rec = _Recording(shown)
        if fmt in ("azure", "burstgpt"):
            assert header is not None
            _csv(rows, (line for _n, line in _capped(text, first[0], rows)), header, first[0], fmt)
        elif fmt == "mooncake":
            _mooncake(rows, _numbered(first, text, rows))
        else:
            _servewatch(rows, _numbered(first, text, rows), rec)
        while hashing.read(1 << 20):  # whatever the text layer did not ask for (the hash is of the whole file)
            pass
    return _finish(rows, rec, fmt, shown, digest.hexdigest(), speed, window, comment)


def _finish(rows: _Rows, rec: _Recording, fmt: str, shown: str, sha: str, speed: float,
            window: tuple[float, float | None] | None, comment: str | None) -> Trace:
    n = len(rows.t)
    first_problem = f" (first: {rows.problems[0]})" if rows.problems else ""
    if n == 0:
        raise ConfigError(f"trace {shown}: no usable rows ({rows.rows:,} rows, {rows.bad:,} bad){first_problem}")
    if rows.bad > max(BAD_ROWS_FLOOR, BAD_ROWS_FRACTION * rows.rows):
        raise ConfigError(f"trace {shown}: {rows.bad:,} of {rows.rows:,} rows are bad{first_problem}: too many "
                          f"for a {FORMAT_NAMES[fmt]}")
    t, ins, outs = rows.t, rows.i, rows.o
    notes = []
    replay = None
    if fmt == "servewatch" and rec.coll.active:  # sessions (their starts are the arrivals), prefixes, dataset rows
        replay, t, ins, outs = rec.coll.build(t, ins, outs)
        n = len(t)
    elif rows.out_of_order:
        order = sorted(range(n), key=t.__getitem__)
        t = array("d", (t[k] for k in order))
        ins = array("i", (ins[k] for k in order))
        outs = array("i", (outs[k] for k in order))
        del order
        if fmt != "servewatch":
            notes.append(f"{rows.out_of_order:,} rows were out of time order: arrivals sorted by time")
    t0 = t[0]
    lo, hi = 0, n
    if window is not None:
        start, end = window
        lo = bisect.bisect_left(t, t0 + start)
        hi = n if end is None else bisect.bisect_left(t, t0 + end)
        wtext = window_text(start, end)
        if lo >= hi:
            raise ConfigError(f"--trace-window {start:g}-{'' if end is None else f'{end:g}'} keeps no arrival of {shown} (its arrivals span "
                              f"0-{t[-1] - t0:.1f} s after the first)")
        notes.append(f"window {wtext} of the trace: {hi - lo:,} of {n:,} arrivals kept")
    base = t[lo]
    offsets = array("d", ((x - base) / speed for x in t[lo:hi]))
    if replay is not None:
        replay = window_replay(replay, lo, hi, base, speed)
    kept = hi - lo
    if kept < 2 or offsets[-1] <= 0:
        raise ConfigError(f"trace {shown}: {kept:,} arrival(s) kept{' by the window' if window else ''}, all at one "
                          "instant: a replay needs two arrivals at different times (an arrival rate)")
    if rows.bad:
        notes.append(f"{rows.bad:,} bad rows skipped (the first {min(rows.bad, MAX_LISTED)} listed in problems)")
    if rows.clamped:
        notes.append(f"{rows.clamped:,} rows with a length of 0: sent with 1 token")
    if rec.warmup:
        notes.append(f"{rec.warmup:,} warmup requests of the recording not replayed (closed loop)")
    if len(rec.levels) > 1:
        notes.append(f"{len(rec.levels)} recorded steps (level, round) replayed in order as one arrival process")
    if rec.synthetic:
        notes.append("the recording is marked synthetic: its arrivals are not a real workload's")
        source_extra = {"recording_synthetic": True}
    else:
        source_extra = {}
    if replay is not None:
        notes.extend(replay.notes)
    source: dict[str, Any] = {
        "kind": "trace", "format": fmt, "file": os.path.basename(shown), "sha256": sha,
        "rows": rows.rows, "kept": kept, "skipped": rows.bad, "clamped": rows.clamped,
        "out_of_order": rows.out_of_order, "speed": speed,
        "window": None if window is None else [window[0], window[1]],
    }
    if comment:
        source["comment"] = comment
    source.update(source_extra)
    if replay is not None:
        source["anomalies"] = replay.anomaly_count
    return Trace(offsets, ins[lo:hi], outs[lo:hi], source, list(rows.problems), notes, shown, replay)
