"""Shared pieces of the importers: the result of a conversion, error classes, request building.

Pure: callers hand in decoded JSON (or lines) and get record-format-v1 dicts back. Standard
library only (tui/core rule).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from tui import __version__
from tui.core.clientlimit import phrase_kind
from tui.core.records.schema import SCHEMA, SCHEMA_VERSION, T_MIN_EPOCH, LineIssue

#: Where relative times (and the stand-in times of sources without start times) are placed: 2000-01-01, the
#: earliest wall-clock time a record may carry (a record time must be a plausible epoch second)
AXIS_ORIGIN = T_MIN_EPOCH

#: Time axis kinds a source can give (``source.time_axis`` in the run header).
AXIS_EPOCH = "epoch"  # absolute wall-clock start times (AIPerf, GuideLLM)
AXIS_RELATIVE = "relative"  # start times on one clock of unknown origin (vLLM perf_counter, inference-perf)
AXIS_NONE = "none"  # no start times at all (LLMPerf, old vLLM files): no observation window


@dataclass
class ImportResult:
    """What one import produced: record dicts (header first), the problems, and the counts."""

    format: str
    header: dict
    records: list[dict] = field(default_factory=list)  # step and request dicts, in file order
    issues: list[LineIssue] = field(default_factory=list)
    entries: int = 0  # per-request entries seen in the source (lines or list elements)
    converted: int = 0  # of which became request records
    notes: list[str] = field(default_factory=list)
    tool_summary: dict | None = None  # the tool's own counts (``source.tool_summary``, tui.core.importers.crosscheck)
    #: the records held against ``tool_summary``: the problems (each forbids PASS, both numbers named) and the notes
    summary_problems: list[str] = field(default_factory=list)
    summary_notes: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.entries - self.converted

    def counts(self) -> dict[str, int]:
        """requests / completed / errors / cancelled / warmup over the converted request records."""
        out = {"requests": 0, "measured": 0, "warmup": 0, "completed": 0, "errors": 0, "cancelled": 0}
        for r in self.records:
            if r.get("type") != "request":
                continue
            out["requests"] += 1
            out["warmup" if r.get("phase") == "warmup" else "measured"] += 1
            if r.get("complete") and r.get("error") is None:
                out["completed"] += 1
            elif r.get("error") == "cancelled":
                out["cancelled"] += 1
            else:
                out["errors"] += 1
        return out

    def unusable(self) -> int:
        """Entries the reader could not use that may have been requests (as the Monitor counts unreadable lines)."""
        return sum(1 for i in self.issues if i.kind in ("malformed", "truncated") and i.request is not False)

    def all_records(self) -> list[dict]:
        return [self.header] + self.records


def source_block(*, tool: str, version: str | None, file: str | None, sha256: str | None,
                 derived: list[str], ttft_definition: str, time_axis: str, fmt: str,
                 sample: dict | None = None, lacks: list[str] | None = None,
                 definitions: dict[str, str] | None = None, unjudgeable: dict[str, str] | None = None) -> dict:
    """The run header's ``source`` block (docs/record-format.md, "source").

    ``definitions``: how the tool defines each latency servewatch judges (``tpot``, ``itl``, ``e2e``, and
    ``tokens``: which count the output length is), so a reader can tell what the imported fields mean.
    ``unjudgeable``: SLO name (``TPOT``, ``ITL``, ...) -> why the file cannot judge it (the tool does not record
    what it needs); the per-request fields it would need are then absent from every request, never guessed."""
    d: dict[str, Any] = {
        "kind": "import",
        "tool": tool,
        "version": version,
        "format": fmt,
        "file": file,
        "sha256": sha256,
        "derived": list(derived),
        "ttft_definition": ttft_definition,
        "time_axis": time_axis,
    }
    if lacks:
        d["lacks"] = list(lacks)
    if definitions:
        d["definitions"] = dict(definitions)
    if unjudgeable:
        d["unjudgeable"] = dict(unjudgeable)
    if sample:
        d["sample"] = sample
    return d


#: the tool version a document written from a tool's source (not produced by a run) names: imported as SYNTHETIC
FROM_SOURCE = "from-source"


def header(source: dict, *, started_at: float | None, target: dict | None = None, load: dict | None = None,
           environment: dict | None = None) -> dict:
    """A ``run`` header for imported data. ``synthetic`` is False (the data was measured by the other tool against
    a real server) unless the file names its tool version ``from-source``: the marker servewatch's own test
    fixtures written from a tool's source (not from a run) carry, so every view of them says SYNTHETIC."""
    return {
        "type": "run",
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool": "servewatch",
        "tool_version": __version__,
        "started_at": started_at,
        "target": target or {},
        "load": load or {},
        "environment": environment or {},
        "synthetic": source.get("version") == FROM_SOURCE,
        "source": source,
    }


def is_num(v: Any) -> TypeGuard[float]:
    """A finite int or float (never a bool); narrows ``v`` for the type checker (an int is a float to it)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def sub_dict(obj: dict, key: str) -> dict:
    """``obj[key]`` when it is an object, else an empty dict (a missing or malformed block reads as empty)."""
    v = obj.get(key)
    return v if isinstance(v, dict) else {}


def num(v: Any) -> float | None:
    return float(v) if is_num(v) else None


def int_or_none(v: Any) -> int | None:
    return int(v) if is_num(v) else None


_TIMEOUT_WORDS = ("timeout", "timed out")
_STATUS_RE = re.compile(r"(?<![\d.])([45]\d\d)(?![\d.])")
_STATUS_PHRASES = (("too many requests", "http_429"), ("internal server error", "http_5xx"),
                   ("service unavailable", "http_5xx"), ("bad gateway", "http_5xx"), ("gateway timeout", "http_5xx"),
                   ("bad request", "http_4xx"), ("not found", "http_4xx"), ("unauthorized", "http_4xx"),
                   ("forbidden", "http_4xx"), ("unprocessable", "http_4xx"))
_CONNECT_WORDS = ("connect", "connection refused", "cannot connect", "name or service", "unreachable")


def classify_error(*, status: Any = None, kind: str | None = None, message: str | None = None,
                   cancelled: bool = False) -> str:
    """Map another tool's error (HTTP status, exception type, message) to a record error class.

    Faithful where the source says enough; ``other`` (with the message kept in ``error_detail``)
    when it does not."""
    if cancelled:
        return "cancelled"
    code = int(status) if is_num(status) else None
    if code is not None:
        if code == 429:
            return "http_429"
        if code == 499:  # client closed request: what AIPerf writes for its own cancellations
            return "cancelled"
        if 400 <= code < 500:
            return "http_4xx"
        if 500 <= code < 600:
            return "http_5xx"
    text = f"{kind or ''} {message or ''}".lower()
    if "cancel" in text:
        return "cancelled"
    if code is None:  # an HTTP status named in the message ("ClientResponseError: 500, ...", "HTTP 429")
        for phrase, cls in _STATUS_PHRASES:
            if phrase in text:
                return cls
        m = _STATUS_RE.search(text)
        if m and any(w in text for w in ("http", "status", "response")):
            return classify_error(status=int(m.group(1)))
    if phrase_kind(text) is not None:  # the tool's own client ran out of file descriptors / ports (issue 36)
        return "client"
    if any(w in text for w in _TIMEOUT_WORDS):
        if "connect" in text:
            return "connect_timeout"
        return "read_timeout"
    if any(w in text for w in _CONNECT_WORDS):
        return "connect"
    if "incomplete" in text or "payload" in text or "reset" in text or "disconnect" in text:
        return "stream_reset"
    return "other"


def short(text: Any, limit: int = 200) -> str | None:
    if text is None:
        return None
    s = str(text).replace("\n", " ").strip()
    return s[:limit] if s else None


def request(*, rid: str, t_sent: float, t_end: float, t_first: float | None, complete: bool,
            error: str | None, error_detail: str | None = None, input_tokens: Any = None,
            output_tokens: Any = None, phase: str = "measure", level: float | None = None, rnd: int = 1,
            http_status: Any = None, finish_reason: str | None = None) -> dict:
    """A request record dict; raises ValueError when the timestamps cannot be put in order.

    A first token a hair past the end (float rounding of ms values, < 1 ms) is clamped to the end;
    anything worse is a problem the caller reports."""
    if t_end < t_sent:
        if t_sent - t_end < 1e-6:
            t_end = t_sent
        else:
            raise ValueError(f"end before start ({t_end - t_sent:.6f} s)")
    if t_first is not None:
        if t_first < t_sent - 1e-6:
            raise ValueError("first token before the request was sent")
        if t_first > t_end:
            if t_first - t_end <= 1e-3:
                t_first = t_end
            else:
                raise ValueError(f"first token {1000 * (t_first - t_end):.1f} ms after the end")
        t_first = max(t_first, t_sent)
    return {
        "type": "request",
        "id": rid,
        "t_intended": t_sent,
        "t_sent": t_sent,
        "t_first_token": t_first,
        "t_end": t_end,
        "input_tokens": int_or_none(input_tokens),
        "output_tokens": int_or_none(output_tokens),
        "finish_reason": finish_reason,
        "http_status": int_or_none(http_status),
        "complete": bool(complete),
        "error": error,
        "error_detail": short(error_detail),
        "phase": phase,
        "level": level,
        "round": rnd,
    }


def step(t: float, event: str, level: float | None, mode: str | None, rnd: int = 1, **info: Any) -> dict:
    d = {"type": "step", "t": t, "event": event, "level": level, "round": rnd, "mode": mode}
    d.update(info)
    return d


def _end_time(r: dict) -> float:
    t = r.get("t_end")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else 0.0


def completion_order(records: list[dict]) -> tuple[list[dict], int]:
    """The records with each stretch of request dicts between two other records (a level's steps) in completion
    order (``t_end``, stable), as servewatch writes and its judge reads them, and how many moved. A tool that lists
    requests in submission order (vllm bench) or a file whose lines were reordered is then judged as if written
    in the order the requests ended: the verdict of an import never depends on the order of its lines."""
    out: list[dict] = []
    moved = 0
    run: list[dict] = []

    def flush() -> None:
        nonlocal moved
        if run:
            done = sorted(run, key=_end_time)
            moved += sum(1 for a, b in zip(run, done) if a is not b)
            out.extend(done)
            run.clear()

    for r in records:
        if r.get("type") == "request":
            run.append(r)
        else:
            flush()
            out.append(r)
    flush()
    return out, moved


def add_steps(records: list[dict], level: float | None, mode: str | None, rnd: int = 1, **info: Any) -> list[dict]:
    """Wrap one level's request dicts in step start/end records (times from the requests)."""
    reqs = [r for r in records if r.get("type") == "request"]
    if not reqs:
        return records
    t0 = min(r["t_sent"] for r in reqs)
    t1 = max(r["t_end"] for r in reqs)
    return [step(t0, "start", level, mode, rnd)] + records + [step(t1, "end", level, mode, rnd, **info)]


class EntryIssue(LineIssue):
    """A problem with one entry of a whole-document file (no line numbers there): ``FILE: entry I: reason``."""

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


def entry_issue(label: str, where: str, reason: str) -> EntryIssue:
    return EntryIssue(label, 0, f"{where}: {reason}")


# ---------------------------------------------------------------- per-request timing beyond TTFT (issue 21)

#: the quantiles of a request's own inter-token gaps the record carries (``itl_p50_ms``, ``itl_p95_ms``)
GAP_QUANTILES = ((0.50, "itl_p50_ms"), (0.95, "itl_p95_ms"))


def gap_fields(gaps_s: Any) -> dict[str, float]:
    """``itl_max_ms`` / ``itl_p50_ms`` / ``itl_p95_ms`` of one request from its gaps between consecutive tokens
    (seconds); empty (the fields stay absent) with no gap, i.e. fewer than 2 tokens. Quantiles are the nearest
    rank over the request's own gaps (``x_(ceil(q n))``), as docs/statistics.md defines them. Raises ValueError
    when a gap is not a non-negative number."""
    if not isinstance(gaps_s, (list, tuple)):
        raise ValueError("the inter-token gaps are not a list")
    if not gaps_s:
        return {}
    gaps: list[float] = []
    for g in gaps_s:
        if not is_num(g) or g < 0:
            raise ValueError(f"an inter-token gap is not a non-negative number ({str(g)[:20]!r})")
        gaps.append(float(g))
    gaps.sort()
    n = len(gaps)
    out = {"itl_max_ms": round(gaps[-1] * 1000.0, 6)}
    for q, key in GAP_QUANTILES:
        k = max(1, math.ceil(q * n - 1e-12))
        out[key] = round(gaps[k - 1] * 1000.0, 6)
    return out


def gaps_of(times_s: list[float]) -> list[float]:
    """Gaps between consecutive times (seconds), which must be in order."""
    out = []
    for a, b in zip(times_s, times_s[1:]):
        if b < a:
            raise ValueError("token times are not in order")
        out.append(b - a)
    return out


def _count_or_none(v: Any, what: str) -> int | None:
    if v is None:
        return None
    if not is_num(v) or v < 0 or v != int(v):
        raise ValueError(f"{what} is not a whole number >= 0 ({str(v)[:20]!r})")
    return int(v)


def _time_within(rec: dict, t: float | None, what: str) -> float | None:
    """A token time of the request, kept within [t_sent, t_end] (a hair outside, < 1 ms of float rounding, is
    clamped; anything worse is a problem the caller reports)."""
    if t is None:
        return None
    if not math.isfinite(t):
        raise ValueError(f"{what} is not a finite time")
    lo, hi = rec["t_sent"], rec["t_end"]
    if t < lo - 1e-3 or t > hi + 1e-3:
        where = "before the request was sent" if t < lo else f"{1000 * (t - hi):.1f} ms after the end"
        raise ValueError(f"{what} {where}")
    return min(max(t, lo), hi)


def add_timing(rec: dict, *, t_last: float | None = None, gaps_s: Any = None, output_chunks: Any = None,
               reasoning_chunks: Any = None, usage_output: Any = None, usage_input: Any = None,
               usage_reasoning: Any = None, t_first_answer: float | None = None,
               t_first_reasoning: float | None = None) -> dict:
    """Add the issue-21 request fields (docs/record-format.md) that the source records; a field it does not record
    stays ABSENT (never a stand-in value), so the SLO needing it is "not judgeable on this file". Raises ValueError
    (the entry is then reported) when the values contradict the record's times.

    - ``t_last_token``: the last token of any kind; needs a first token and lies in [t_first_token, t_end].
    - ``itl_max_ms``, ``itl_p50_ms``, ``itl_p95_ms``: from the gaps between consecutive tokens (``gap_fields``).
    - ``output_chunks`` / ``reasoning_chunks``: token-carrying chunks the tool saw; ``usage_*``: the server's counts.
    - ``t_first_answer`` / ``t_first_reasoning``: only when the source separates reasoning from the answer."""
    tf = rec.get("t_first_token")
    if t_last is not None:
        if tf is None:
            raise ValueError("a last-token time without a first token")
        t_last = _time_within(rec, t_last, "last token")
        assert t_last is not None
        if t_last < tf - 1e-6:
            raise ValueError("last token before the first token")
        rec["t_last_token"] = max(t_last, tf)
    if gaps_s is not None and tf is not None:
        rec.update(gap_fields(gaps_s))
    for key, v in (("output_chunks", output_chunks), ("reasoning_chunks", reasoning_chunks),
                   ("usage_output_tokens", usage_output), ("usage_input_tokens", usage_input),
                   ("usage_reasoning_tokens", usage_reasoning)):
        c = _count_or_none(v, key)
        if c is not None:
            rec[key] = c
    if t_first_reasoning is not None:
        rec["t_first_reasoning"] = _time_within(rec, t_first_reasoning, "first reasoning token")
        if t_first_answer is not None:
            rec["t_first_answer"] = _time_within(rec, t_first_answer, "first answer token")
    return rec
