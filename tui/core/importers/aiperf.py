"""AIPerf ``profile_export.jsonl`` (also named ``*_records.jsonl`` by some versions): one JSON object
per request, ``{"metadata": {...}, "metrics": {name: {"value", "unit"}}, "error": {...} | null}``.

Line based, so a file AIPerf is still writing can be followed. Field mapping and the source files it
was checked against: docs/record-format.md, "Importing other tools' runs".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import tui.core.importers.common as C
import tui.core.importers.crosscheck as X
import tui.core.importers.descriptor as D
from tui.core.bounds import MAX_LINE_BYTES
from tui.core.records.parse import long_line_issue
from tui.core.records.schema import LineIssue

FORMAT = "aiperf"
TOOL = "aiperf"
TTFT_DEFINITION = (
    "AIPerf: time of the first response chunk carrying content (content_responses[0]) minus the request "
    "start, both perf_counter_ns in the worker (aiperf/metrics/types/ttft_metric.py)"
)
DERIVED = [
    "t_sent = metadata.request_start_ns / 1e9",
    "t_end = metadata.request_end_ns / 1e9 (cancellation_time_ns when cancelled and later)",
    "t_first_token = t_sent + metrics.time_to_first_token (converted from its unit)",
    "error class from error.code / error.type / was_cancelled",
    "t_last_token = t_sent + metrics.request_latency (the last content response; streaming only)",
    "itl_max_ms / itl_p50_ms / itl_p95_ms = max / nearest-rank P50 / P95 of metrics.inter_chunk_latency",
    "output_chunks = len(metrics.inter_chunk_latency) + 1 (content responses: reasoning and answer)",
    "usage_output_tokens / usage_input_tokens / usage_reasoning_tokens = metrics.usage_completion_tokens / "
    "usage_prompt_tokens / usage_reasoning_tokens (the server's usage, when AIPerf recorded it)",
    "reasoning (metrics.reasoning_token_count > 0, or time_to_first_output_token after time_to_first_token): "
    "t_first_reasoning = t_first_token, t_first_answer = t_sent + time_to_first_output_token",
]
DEFINITIONS = {
    "tpot": "servewatch's TPOT (t_last_token - t_first_token) / (tokens - 1) from request_latency and "
            "time_to_first_token; AIPerf's own inter_token_latency is the same quotient with its OSL "
            "(tokenizer count, or OSL minus the first chunk's tokens under --per-chunk-usage): a per-request MEAN, "
            "not imported as an inter-token gap",
    "itl": "AIPerf inter_chunk_latency: the gaps between consecutive content responses (reasoning or answer "
           "chunks; usage-only and [DONE] chunks excluded), perf_counter_ns in the worker "
           "(aiperf/metrics/types/inter_chunk_latency_metric.py); itl_max_ms is the largest",
    "e2e": "request_latency: the last content response minus the request start "
           "(aiperf/metrics/types/request_latency_metric.py); t_end (request_end_ns) beside it",
    "tokens": "usage_completion_tokens (the server's count) when recorded; output_sequence_length is AIPerf's "
              "tokenizer count of answer + reasoning",
}

_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "seconds": 1.0}


def looks_like(obj: Any) -> bool:
    """One decoded line of an AIPerf per-request export."""
    if not isinstance(obj, dict):
        return False
    md = obj.get("metadata")
    return isinstance(md, dict) and "request_start_ns" in md and ("metrics" in obj or "error" in obj)


def _metric_s(metrics: dict, name: str) -> float | None:
    m = metrics.get(name)
    if not isinstance(m, dict):
        return None
    v = m.get("value")
    if not C.is_num(v):
        return None
    scale = _UNIT_S.get(str(m.get("unit", "ms")).strip().lower())
    return None if scale is None else float(v) * scale


def _metric_num(metrics: dict, name: str) -> float | None:
    m = metrics.get(name)
    if isinstance(m, dict):
        return C.num(m.get("value"))
    return None


def convert_object(obj: dict, *, level: float | None = None, fallback_id: str = "") -> dict:
    """One AIPerf record -> one request dict (raises ValueError with the reason when unusable)."""
    md = obj.get("metadata")
    if not isinstance(md, dict):
        raise ValueError("no 'metadata' object")
    start_ns, end_ns = md.get("request_start_ns"), md.get("request_end_ns")
    if not C.is_num(start_ns):
        raise ValueError("metadata.request_start_ns missing or not a number")
    t_sent = start_ns / 1e9
    cancelled = md.get("was_cancelled") is True
    if not C.is_num(end_ns):
        cend = md.get("cancellation_time_ns")
        if cancelled and C.is_num(cend):
            end_ns = cend
        else:
            raise ValueError("metadata.request_end_ns missing or not a number")
    t_end = end_ns / 1e9
    metrics = C.sub_dict(obj, "metrics")
    ttft = _metric_s(metrics, "time_to_first_token")
    t_first = None if ttft is None else t_sent + ttft
    err = obj.get("error")
    error = detail = status = None
    if isinstance(err, dict) or cancelled:
        e = err if isinstance(err, dict) else {}
        status = e.get("code")
        error = C.classify_error(status=status, kind=e.get("type"), message=e.get("message"), cancelled=cancelled)
        detail = " ".join(str(x) for x in (e.get("type"), e.get("message")) if x) or ("cancelled" if cancelled else None)
    elif err is not None:
        error, detail = "other", str(err)
    complete = error is None  # a success without time_to_first_token (non-streaming) has no TTFT: never good
    phase_raw = str(md.get("benchmark_phase", "profiling")).lower()
    phase = "warmup" if phase_raw == "warmup" else "measure"
    rid = md.get("x_request_id") or (f"aiperf-{md.get('session_num')}" if md.get("session_num") is not None
                                      else fallback_id)
    osl = _metric_num(metrics, "output_sequence_length")
    if osl is None:
        osl = _metric_num(metrics, "output_token_count")
    isl = _metric_num(metrics, "input_sequence_length")
    if isl is None:
        isl = _metric_num(metrics, "error_isl")
    rec = C.request(rid=str(rid), t_sent=t_sent, t_end=t_end, t_first=t_first, complete=complete, error=error,
                    error_detail=detail, input_tokens=isl, output_tokens=osl, phase=phase, level=level,
                    http_status=status if C.is_num(status) else (200 if complete else None))
    return _add_timing(rec, metrics, t_sent, ttft)


def _metric_list_s(metrics: dict, name: str) -> list[float] | None:
    """A list-valued metric (``inter_chunk_latency``) in seconds; None when absent or not a list of numbers."""
    m = metrics.get(name)
    if not isinstance(m, dict) or not isinstance(m.get("value"), list):
        return None
    scale = _UNIT_S.get(str(m.get("unit", "ms")).strip().lower())
    vals = m["value"]
    if scale is None or not all(C.is_num(v) for v in vals):
        raise ValueError(f"metrics.{name} is not a list of numbers with a time unit")
    return [float(v) * scale for v in vals]


def _add_timing(rec: dict, metrics: dict, t_sent: float, ttft: float | None) -> dict:
    """The issue-21 fields AIPerf records (``C.add_timing``); those it does not record stay absent."""
    if ttft is None:  # not streamed (or no content): no token times at all
        return C.add_timing(rec, usage_output=_metric_num(metrics, "usage_completion_tokens"),
                            usage_input=_metric_num(metrics, "usage_prompt_tokens"),
                            usage_reasoning=_metric_num(metrics, "usage_reasoning_tokens"))
    icl = _metric_list_s(metrics, "inter_chunk_latency")
    latency = _metric_s(metrics, "request_latency")
    t_last = t_sent + latency if latency is not None else (t_sent + ttft + sum(icl) if icl is not None else None)
    ttfo = _metric_s(metrics, "time_to_first_output_token")
    reasoning_n = _metric_num(metrics, "reasoning_token_count")
    reasoning = bool(reasoning_n and reasoning_n > 0) or (ttfo is not None and ttfo > ttft + 1e-9)
    t_reason: float | None = None
    t_answer: float | None = None
    if reasoning:  # AIPerf's TTFT is the first response of any kind; TTFO the first non-reasoning one
        t_reason, t_answer = t_sent + ttft, (t_sent + ttfo if ttfo is not None else None)
    return C.add_timing(rec, t_last=t_last, gaps_s=icl, output_chunks=None if icl is None else len(icl) + 1,
                        usage_output=_metric_num(metrics, "usage_completion_tokens"),
                        usage_input=_metric_num(metrics, "usage_prompt_tokens"),
                        usage_reasoning=_metric_num(metrics, "usage_reasoning_tokens"),
                        t_first_reasoning=t_reason, t_first_answer=t_answer)


SUMMARY_FILE = "profile_export_aiperf.json"


def _summary_value(doc: dict, name: str) -> Any:
    """A metric's ``avg`` in AIPerf's summary (top level; older versions under ``records``)."""
    for holder in (doc, C.sub_dict(doc, "records")):
        m = holder.get(name)
        if isinstance(m, dict) and "avg" in m:
            return m.get("avg")
    return None


def tool_summary(doc: Any, level: float | None = None, mode: str | None = None, *, where: str | None = None,
                 missing: str | None = None) -> dict | None:
    """The cross-check block (``source.tool_summary``) from AIPerf's summary: ``request_count`` (valid requests of
    the profiling phase), ``error_request_count`` (errors, AIPerf's own cancellations included; else the counts of
    ``error_summary``), ``completed_request_count`` (both, where written). Warmup is not counted by AIPerf."""
    if missing:
        return X.missing("AIPerf", missing)
    if doc is None:
        return None
    d = doc if isinstance(doc, dict) else {}
    errors = _summary_value(d, "error_request_count")
    if errors is None and isinstance(d.get("error_summary"), list):
        errors = sum(int(e.get("count") or 0) for e in d["error_summary"] if isinstance(e, dict)
                     and C.is_num(e.get("count")))
    ent = X.entry(level=level, scope="level" if level is not None else "run", label=X.level_label(level, mode),
                  requests=_summary_value(d, "completed_request_count"), completed=_summary_value(d, "request_count"),
                  errors=errors, errors_include_cancelled=True)
    return X.summary("AIPerf", where or f"{SUMMARY_FILE} beside the file", [ent])


def source(file: str | None = None, sha256: str | None = None, version: str | None = None,
           tool_summary: dict | None = None) -> dict:
    src = C.source_block(tool=TOOL, version=version, file=file, sha256=sha256, derived=DERIVED,
                         ttft_definition=TTFT_DEFINITION, time_axis=C.AXIS_EPOCH, fmt=FORMAT,
                         definitions=DEFINITIONS)
    if tool_summary is not None:
        src["tool_summary"] = tool_summary
    return src


class LineConverter:
    """Stateful: numbered raw lines in, record dicts and LineIssues out (a header before the first
    request). Usable on a growing file: feed it each new batch of complete lines."""

    def __init__(self, label: str, *, level: float | None = None, source_info: dict | None = None) -> None:
        self.label = label
        self.level = level
        self.source_info = source_info or source(label)
        self.header_sent = False
        self.entries = 0
        self.converted = 0

    def header(self, started_at: float | None = None) -> dict:
        return C.header(self.source_info, started_at=started_at,
                        load={"mode": None, "levels": [] if self.level is None else [self.level]})

    def feed(self, numbered: Iterable[tuple[int, bytes | str | int, bool]]) -> Iterator[dict | LineIssue]:
        for lineno, line, terminated in numbered:
            if isinstance(line, int) or len(line) > MAX_LINE_BYTES:  # read past, never decoded
                self.entries += 1
                yield long_line_issue(self.label, lineno, line if isinstance(line, int) else len(line), terminated)
                continue
            text = line.decode("utf-8", "replace") if isinstance(line, (bytes, bytearray)) else line
            if not text.strip():
                continue
            self.entries += 1
            try:
                obj = json.loads(text)
            except (ValueError, RecursionError) as exc:
                reason = f"invalid JSON: {str(exc)[:80]}"
                if not terminated:
                    yield LineIssue(self.label, lineno, f"truncated final line ({reason})", "truncated")
                else:
                    yield LineIssue(self.label, lineno, reason)
                continue
            if not looks_like(obj):
                yield LineIssue(self.label, lineno, "not an AIPerf per-request record (no metadata.request_start_ns)")
                continue
            try:
                rec = convert_object(obj, level=self.level, fallback_id=f"aiperf-line{lineno}")
            except ValueError as exc:
                yield LineIssue(self.label, lineno, f"AIPerf record unusable: {exc}")
                continue
            if not self.header_sent:
                self.header_sent = True
                yield self.header(rec["t_sent"])
            self.converted += 1
            yield rec


def convert_lines(numbered: Iterable[tuple[int, bytes | str | int, bool]], label: str, *,
                  level: float | None = None, source_info: dict | None = None) -> C.ImportResult:
    conv = LineConverter(label, level=level, source_info=source_info)
    res = C.ImportResult(format=FORMAT, header=conv.header())
    reqs: list[dict] = []
    for item in conv.feed(numbered):
        if isinstance(item, LineIssue):
            res.issues.append(item)
        elif item.get("type") == "run":
            res.header = item
        else:
            reqs.append(item)
    res.entries, res.converted = conv.entries, conv.converted
    res.tool_summary = conv.source_info.get("tool_summary")
    measured = [r for r in reqs if r["phase"] == "measure"]
    warm = [r for r in reqs if r["phase"] == "warmup"]
    res.records = warm + (C.add_steps(measured, level, None) if measured else [])
    if level is None:
        res.notes.append("AIPerf's per-request export does not name the load level: one unnamed level "
                         "(profile_export_aiperf.json beside it gives the concurrency when present)")
    return res


# ------------------------------------------------------------------------------------------------ the descriptor

def looks_like_summary(obj: Any) -> bool:
    """AIPerf's run summary (``profile_export_aiperf.json``): no per-request data."""
    return isinstance(obj, dict) and "input_config" in obj and (
        "aiperf_version" in obj or "request_count" in obj or "request_latency" in obj)


def _find_key(d: Any, names: tuple[str, ...], depth: int = 0) -> Any:
    """The first scalar value under one of ``names``, searched breadth-first per level down to depth 6."""
    if depth > 6:
        return None
    if isinstance(d, dict):
        for k in names:
            if k in d and not isinstance(d[k], (dict, list)):
                return d[k]
        for v in d.values():
            got = _find_key(v, names, depth + 1)
            if got is not None:
                return got
    return None


def side_options(side: D.SideInput) -> tuple[dict, list[str]]:
    """``profile_export_aiperf.json`` beside the file: the tool's counts (``summary``), the load level (one
    profiling phase: its concurrency, closed, or request rate, open; older summaries: one loadgen concurrency) and
    AIPerf's version."""
    if not side.files:
        return {"summary_missing": f"{SUMMARY_FILE} is not beside the file"}, []
    d = side.files[0][1]
    if not isinstance(d, dict):
        raise ValueError("not an object")
    opts: dict[str, Any] = {"summary": d, "summary_file": f"{SUMMARY_FILE} beside the file"}
    notes: list[str] = []
    ic = d["input_config"] if isinstance(d.get("input_config"), dict) else {}
    raw = ic.get("phases") or []
    phases = [ph for ph in (raw if isinstance(raw, list) else []) if isinstance(ph, dict)
              and ph.get("kind") == "profiling"]
    lv = None
    if len(phases) == 1:  # one profiling phase: its concurrency (closed) or request rate (open)
        ph = phases[0]
        for key, mode in (("concurrency", "closed"), ("request_rate", "open")):
            v = ph.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                lv = (float(v), mode, key)
                break
    elif not phases:  # older summaries: a single loadgen concurrency
        v = _find_key(ic, ("concurrency",))
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            lv = (float(v), "closed", "concurrency")
    if lv:
        opts["level"], opts["mode"] = lv[0], lv[1]
        notes.append(f"level ({lv[2]} {lv[0]:g}) read from {SUMMARY_FILE} beside the file")
    v = _find_key(d, ("aiperf_version", "version"))
    if isinstance(v, str):
        opts["version"] = v
    return opts, notes


def _summary_of(opts: Mapping[str, Any]) -> dict | None:
    return tool_summary(opts.get("summary"), opts.get("level"), opts.get("mode"), where=opts.get("summary_file"),
                        missing=opts.get("summary_missing"))


def _convert(src: D.Source) -> C.ImportResult:
    o = src.options
    info = source(file=src.file, sha256=src.sha256, version=o.get("version"), tool_summary=_summary_of(o))
    res = convert_lines(src.lines(), src.label, level=o.get("level"), source_info=info)
    if o.get("mode"):
        res.header["load"]["mode"] = o["mode"]
    return res


def _follow(label: str, file: str, opts: Mapping[str, Any]) -> LineConverter:
    return LineConverter(label, level=opts.get("level"), source_info=source(file, tool_summary=_summary_of(opts)))


IMPORTER = D.Importer(
    name=FORMAT, tool="AIPerf", reads="AIPerf profile_export.jsonl", looks_like=looks_like, convert=_convert,
    ttft_definition=TTFT_DEFINITION, ttft_label="first content chunk, as AIPerf measures",
    line_based=True, follow=_follow,
    unusable=(D.Unusable("aiperf-summary", looks_like_summary,
                         "an AIPerf summary (profile_export_aiperf.json): the per-request data is in "
                         "profile_export.jsonl beside it"),),
    side_files=D.SideFiles(globs=(SUMMARY_FILE,), options=side_options, label=SUMMARY_FILE),
    summary=D.SummaryRule(where=f"{SUMMARY_FILE} beside the file", differences=("errors_include_cancelled",)),
)
