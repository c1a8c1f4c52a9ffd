"""Importers: other load tools' per-request output converted to record format v1.

Pure (standard library only). ``detect_format`` recognises a format by CONTENT, never by file name;
``convert_text`` turns a file's text into an ``ImportResult`` (header + step/request record dicts +
every unusable entry reported). File reading, hashing and YAML live in ``tui/sources/importing.py``.

Formats: ``servewatch`` (our own, not converted), ``aiperf`` (line based), ``guidellm``, ``vllm-bench``,
``llmperf``, ``inference-perf`` (whole-document JSON), ``guidellm-yaml`` (needs PyYAML, decoded by
the caller). Known but not importable: ``aiperf-summary``, ``guidellm-summary-only``,
``vllm-bench-summary`` (no per-request data): ``unusable_reason`` says why.

Modules: ``common`` (the result type and the helpers every converter shares), ``crosscheck`` (the records held
against the tool's own summary: ``source.tool_summary``, checked at import and by every reader), one module per tool
(``aiperf``, ``guidellm``, ``inference_perf``, ``llmperf``, ``vllm``), ``registry`` (detection and dispatch),
``limits`` (what an imported source cannot support, applied to the verdict). This ``__init__`` re-exports the registry and the result
types for callers outside the package; the modules inside import each other by module path, never through it.
"""

from __future__ import annotations

from tui.core.importers.common import AXIS_EPOCH, AXIS_NONE, AXIS_RELATIVE, EntryIssue, ImportResult
from tui.core.importers.registry import (
    DOCUMENT_FORMATS,
    IMPORTABLE,
    LINE_FORMATS,
    SERVEWATCH,
    TOOL_NAMES,
    UNUSABLE,
    convert_text,
    detect_format,
    detect_object,
    fmt_from_lines,
    sniff_keys,
    unusable_reason,
)

__all__ = [
    "AXIS_EPOCH",
    "AXIS_NONE",
    "AXIS_RELATIVE",
    "DOCUMENT_FORMATS",
    "EntryIssue",
    "IMPORTABLE",
    "ImportResult",
    "LINE_FORMATS",
    "SERVEWATCH",
    "TOOL_NAMES",
    "UNUSABLE",
    "convert_text",
    "detect_format",
    "detect_object",
    "fmt_from_lines",
    "sniff_keys",
    "unusable_reason",
]
