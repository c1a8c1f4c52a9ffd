"""Importers: other load tools' per-request output converted to record format v1.

Pure (standard library only). ``detect_format`` recognises a format by CONTENT, never by file name;
``convert_text`` turns a file's text into an ``ImportResult`` (header + step/request record dicts +
every unusable entry reported). File reading, hashing, side files and YAML live in ``tui/sources/importing.py``.

The tools are the list ``registry.IMPORTERS``: each tool's module exports one ``IMPORTER``
(``descriptor.Importer``: its formats, detection, the summaries it refuses with the reason, its side files, its
own summary the records are held against, its TTFT definition, its converter). Every table of formats
(``IMPORTABLE``, ``UNUSABLE``, ``TOOL_NAMES``, ...) and the help's list (``formats_read``) is read from it;
``servewatch`` is our own format (not converted).

Modules: ``common`` (the result type and the helpers every converter shares), ``crosscheck`` (the records held
against the tool's own summary: ``source.tool_summary``, checked at import and by every reader), ``descriptor``
(the ``Importer`` value and its parts), one module per tool (``aiperf``, ``guidellm``, ``inference_perf``,
``llmperf``, ``vllm``), ``registry`` (the list, detection and dispatch), ``limits`` (what an imported source cannot
support, applied to the verdict). This ``__init__`` re-exports the registry, the descriptor types and the result
types for callers outside the package; the modules inside import each other by module path, never through it.
"""

from __future__ import annotations

from tui.core.importers.common import AXIS_EPOCH, AXIS_NONE, AXIS_RELATIVE, EntryIssue, ImportResult
from tui.core.importers.descriptor import (
    Importer,
    SideFiles,
    SideInput,
    Source,
    SummaryRule,
    TextVariant,
    Unusable,
)
from tui.core.importers.registry import (
    DOCUMENT_FORMATS,
    IMPORTABLE,
    IMPORTERS,
    LINE_FORMATS,
    SERVEWATCH,
    TOOL_NAMES,
    UNUSABLE,
    convert_text,
    detect_format,
    detect_object,
    fmt_from_lines,
    formats_read,
    importer_for,
    is_document_format,
    is_line_format,
    register,
    sniff_keys,
    tool_name,
    unregister,
    unusable_reason,
    variant_of,
)

__all__ = [
    "AXIS_EPOCH",
    "AXIS_NONE",
    "AXIS_RELATIVE",
    "DOCUMENT_FORMATS",
    "EntryIssue",
    "IMPORTABLE",
    "IMPORTERS",
    "ImportResult",
    "Importer",
    "LINE_FORMATS",
    "SERVEWATCH",
    "SideFiles",
    "SideInput",
    "Source",
    "SummaryRule",
    "TOOL_NAMES",
    "TextVariant",
    "UNUSABLE",
    "Unusable",
    "convert_text",
    "detect_format",
    "detect_object",
    "fmt_from_lines",
    "formats_read",
    "importer_for",
    "is_document_format",
    "is_line_format",
    "register",
    "sniff_keys",
    "tool_name",
    "unregister",
    "unusable_reason",
    "variant_of",
]
