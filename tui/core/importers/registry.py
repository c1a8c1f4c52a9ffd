"""The importers' registry: which tool's output a file holds and which converter turns it into record format v1.

``detect_format`` recognises a format by content, never by file name; ``convert_text`` dispatches to the tool's
converter; ``unusable_reason`` says why a known format holds no per-request data (the formats are listed in the
package's docstring, ``tui/core/importers/__init__.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import tui.core.importers.aiperf as aiperf
import tui.core.importers.crosscheck as crosscheck
import tui.core.importers.guidellm as guidellm
import tui.core.importers.inference_perf as inference_perf
import tui.core.importers.llmperf as llmperf
import tui.core.importers.vllm as vllm
from tui.core.bounds import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_too_deep
from tui.core.importers.common import ImportResult
from tui.core.records.parse import long_line_issue
from tui.core.records.schema import KNOWN_TYPES, LineIssue

SERVEWATCH = "servewatch"
LINE_FORMATS = ("servewatch", "aiperf")
DOCUMENT_FORMATS = ("guidellm", "guidellm-yaml", "vllm-bench", "llmperf", "inference-perf")
IMPORTABLE = ("aiperf",) + DOCUMENT_FORMATS
UNUSABLE = {
    "aiperf-summary": "an AIPerf summary (profile_export_aiperf.json): the per-request data is in "
                      "profile_export.jsonl beside it",
    "vllm-bench-summary": "a vLLM bench result saved without --save-detailed: it holds no per-request data",
    "llmperf-summary": "an LLMPerf *_summary.json: the per-request data is in *_individual_responses.json",
    "inference-perf-summary": "an inference-perf summary report: per-request data needs "
                              "report.request_lifecycle.per_request: true (per_request_lifecycle_metrics.json)",
}
TOOL_NAMES = {"aiperf": "AIPerf", "guidellm": "GuideLLM", "guidellm-yaml": "GuideLLM", "vllm-bench": "vllm bench serve",
              "llmperf": "LLMPerf", "inference-perf": "inference-perf", "servewatch": "servewatch"}


def detect_object(obj: Any) -> str | None:
    """The format of one decoded JSON value (a whole document, or one line of a line-based file)."""
    if isinstance(obj, dict):
        if obj.get("type") in KNOWN_TYPES:
            return SERVEWATCH
        if aiperf.looks_like(obj):
            return "aiperf"
        if guidellm.looks_like(obj):
            return "guidellm"
        if vllm.looks_like(obj):
            return "vllm-bench"
        if vllm.looks_like_summary_only(obj):
            return "vllm-bench-summary"
        if "input_config" in obj and ("aiperf_version" in obj or "request_count" in obj or "request_latency" in obj):
            return "aiperf-summary"
        if "results_num_completed_requests" in obj or "results_number_errors" in obj or (
                isinstance(obj.get("results"), dict) and "num_concurrent_requests" in obj):
            return "llmperf-summary"
        if "load_summary" in obj or "successes" in obj and "failures" in obj:
            return "inference-perf-summary"
        return None
    if isinstance(obj, list):
        if llmperf.looks_like(obj):
            return "llmperf"
        if inference_perf.looks_like(obj):
            return "inference-perf"
    return None


_YAML_BENCH = re.compile(r"^benchmarks\s*:", re.M)


def detect_format(text: str) -> str | None:
    """Recognise a file by its content (the whole text, or at least its first few KB for line formats).

    Line formats are recognised from their first non-blank line; whole-document JSON by decoding it
    (so pass the whole text for those); YAML by a top-level ``benchmarks:`` key (GuideLLM)."""
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        return None
    if body[0] in "{[":
        first = body.split("\n", 1)[0].strip()
        try:
            obj = json.loads(first)
        except (ValueError, RecursionError):  # nested past the decoder's limit: not a format it knows
            obj = None
        if obj is not None:
            fmt = detect_object(obj)
            if fmt in LINE_FORMATS:
                return fmt
            # one object per line (vLLM --append-result) or a one-line document
            if fmt is not None and "\n" in body.strip():
                return fmt
        try:
            return detect_object(json.loads(body))
        except (ValueError, RecursionError):
            return (fmt_from_lines(body) if obj is not None else None) or sniff_keys(body[:65536])
    if _YAML_BENCH.search(body[:200_000]):
        return "guidellm-yaml"
    return None


_SNIFF = (
    ("vllm-bench", ('"ttfts"', '"itls"')),
    ("llmperf", ('"ttft_s"', '"end_to_end_latency_s"')),
    ("inference-perf", ('"start_time"', '"end_time"', '"response_metrics"')),
    ("guidellm", ('"benchmarks"', '"requests"')),
    ("guidellm", ('"benchmarks"', '"scheduler_metrics"')),
)


def sniff_keys(head: str) -> str | None:
    """A JSON document that does not decode (cut short, damaged): which tool's keys does it start with?
    The converter then reports the decoding problem with its position."""
    for fmt, keys in _SNIFF:
        if all(k in head for k in keys):
            return fmt
    return None


def fmt_from_lines(body: str) -> str | None:
    """A file of JSON objects one per line whose first line is recognised (e.g. appended vLLM results)."""
    first = body.split("\n", 1)[0].strip()
    try:
        return detect_object(json.loads(first))
    except (ValueError, RecursionError):
        return None


def unusable_reason(fmt: str | None) -> str | None:
    if fmt is None:
        return None
    return UNUSABLE.get(fmt)


def _numbered(text: str) -> Iterator[tuple[int, str | int, bool]]:
    """The numbered lines of a whole text, one at a time (no list of them all); a line longer than
    ``MAX_LINE_BYTES`` is given as its length, never copied (the converters report it)."""
    find = text.find
    start = 0
    i = 0
    size = len(text)
    while True:
        i += 1
        end = find("\n", start)
        last = end < 0
        if last:
            end = size
        if end - start > MAX_LINE_BYTES:
            yield i, end - start, not last
        else:
            line = text[start:end]
            if last:
                if line.strip():
                    yield i, line, False
                return
            yield i, line.rstrip("\r"), True
        if last:
            return
        start = end + 1


def _document(text: str) -> Any:
    """A whole JSON document decoded, no deeper than ``MAX_JSON_DEPTH`` (a ValueError otherwise: the import
    reports a document that does not decode, as for damaged JSON)."""
    doc = json.loads(text)
    if json_too_deep(doc):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels of objects and lists")
    return doc


def convert_text(text: str, fmt: str, label: str, *, file: str | None = None, sha256: str | None = None,
                 doc: Any = None, **opts: Any) -> ImportResult:
    """Convert a whole file's text (``doc``: the already decoded document, e.g. from YAML), then hold the records
    against the tool's own summary (``summary_problems``, ``summary_notes``: tui.core.importers.crosscheck)."""
    res = _convert(text, fmt, label, file=file, sha256=sha256, doc=doc, **opts)
    check_summary(res)
    return res


def check_summary(res: ImportResult) -> ImportResult:
    """``res.summary_problems`` / ``summary_notes``: its records against ``source.tool_summary``."""
    src = (res.header or {}).get("source")
    ts = src.get("tool_summary") if isinstance(src, dict) else None
    res.summary_problems, res.summary_notes = crosscheck.problems(
        ts, crosscheck.tally_records(res.records, res.unusable()))
    return res


def _convert(text: str, fmt: str, label: str, *, file: str | None = None, sha256: str | None = None,
             doc: Any = None, **opts: Any) -> ImportResult:
    if fmt == "aiperf":
        ts = aiperf.tool_summary(opts.get("summary"), opts.get("level"), opts.get("mode"),
                                 where=opts.get("summary_file"), missing=opts.get("summary_missing"))
        src = aiperf.source(file=file, sha256=sha256, version=opts.get("version"), tool_summary=ts)
        res = aiperf.convert_lines(_numbered(text), label, level=opts.get("level"), source_info=src)
        if opts.get("mode"):
            res.header["load"]["mode"] = opts["mode"]
        return res
    if fmt == "vllm-bench":
        try:
            return vllm.convert_runs([(1, _document(text) if doc is None else doc)], label, file=file, sha256=sha256)
        except (ValueError, RecursionError):
            objs: list[tuple[int, Any]] = []
            bad: list[tuple[int, str, bool, Exception]] = []
            res_long: list[LineIssue] = []
            for n, line, term in _numbered(text):
                if isinstance(line, int):  # longer than the line cap: one reported problem, never decoded
                    res_long.append(long_line_issue(label, n, line, term))
                    continue
                if not line.strip():
                    continue
                try:
                    objs.append((n, _document(line)))
                except (ValueError, RecursionError) as decode_error:
                    bad.append((n, line, term, decode_error))
            res = vllm.convert_runs(objs, label, file=file, sha256=sha256, whole_document=False)
            res.entries += len(res_long)
            res.issues.extend(res_long)
            for n, _line, term, exc in bad:
                res.entries += 1
                kind = "malformed" if term else "truncated"
                reason = f"invalid JSON: {str(exc)[:80]}"
                res.issues.append(LineIssue(label, n, reason if term else f"truncated final line ({reason})", kind))
            return res
    if doc is None:
        doc = _document(text)
    if fmt in ("guidellm", "guidellm-yaml"):
        res = guidellm.convert(doc, label, file=file, sha256=sha256, version=opts.get("version"))
        res.format = fmt
        return res
    if fmt == "llmperf":
        return llmperf.convert(doc, label, file=file, sha256=sha256, level=opts.get("level"),
                               summary=opts.get("summary"), summary_file=opts.get("summary_file"),
                               summary_missing=opts.get("summary_missing"))
    if fmt == "inference-perf":
        return inference_perf.convert(doc, label, file=file, sha256=sha256, stage_levels=opts.get("stage_levels"),
                                      stage_counts=opts.get("stage_counts"), mode=opts.get("mode"),
                                      stage_summaries=opts.get("stage_summaries"), run_summary=opts.get("summary"),
                                      summary_missing=opts.get("summary_missing"))
    raise ValueError(f"no importer for format {fmt!r}")
