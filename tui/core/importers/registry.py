"""The importers' registry: the list of tools (one :class:`~tui.core.importers.descriptor.Importer` each, exported
by the tool's own module) and everything done by iterating it.

``detect_format`` recognises a format by content, never by file name; ``convert_text`` dispatches to the tool's
converter and holds the records against the tool's own summary; ``unusable_reason`` says why a known file holds no
per-request data; ``formats_read`` is the list the help text prints. Adding a tool: its module exports ``IMPORTER``
and gets one line in ``IMPORTERS`` below (or, from outside the package, ``register(importer)``; a test-only tool
uses that and ``unregister``).

The tables of the formats (``LINE_FORMATS``, ``DOCUMENT_FORMATS``, ``IMPORTABLE``, ``UNUSABLE``, ``TOOL_NAMES``)
are read-only views of the list as it is now.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import tui.core.importers.aiperf as aiperf
import tui.core.importers.crosscheck as crosscheck
import tui.core.importers.guidellm as guidellm
import tui.core.importers.inference_perf as inference_perf
import tui.core.importers.llmperf as llmperf
import tui.core.importers.vllm as vllm
from tui.core.importers.common import ImportResult
from tui.core.importers.descriptor import Importer, Source, TextVariant
from tui.core.records.schema import KNOWN_TYPES

#: the tools, in the order detection tries them (per-request formats first, then their summaries)
IMPORTERS: list[Importer] = [
    aiperf.IMPORTER,
    guidellm.IMPORTER,
    vllm.IMPORTER,
    llmperf.IMPORTER,
    inference_perf.IMPORTER,
]

SERVEWATCH = "servewatch"
YAML_HEAD = 200_000  # how far a text variant's pattern is searched


def register(importer: Importer) -> None:
    """Add a tool after the built-in ones (a format name may be registered once)."""
    taken = {f for imp in IMPORTERS for f in imp.formats + tuple(u.format for u in imp.unusable)} | {SERVEWATCH}
    clash = sorted(taken & set(importer.formats + tuple(u.format for u in importer.unusable)))
    if clash:
        raise ValueError(f"format name already registered: {', '.join(clash)}")
    IMPORTERS.append(importer)


def unregister(name: str) -> None:
    """Remove the tool registered under ``name`` (a test-only tool, after its test)."""
    IMPORTERS[:] = [imp for imp in IMPORTERS if imp.name != name]


def importer_for(fmt: str | None) -> Importer | None:
    """The importer that converts format ``fmt`` (its own name or one of its text variants)."""
    for imp in IMPORTERS:
        if fmt in imp.formats:
            return imp
    return None


def variant_of(fmt: str | None) -> TextVariant | None:
    """The text variant ``fmt`` names (decoded by the caller: ``tui.sources.importing``), else None."""
    for imp in IMPORTERS:
        for v in imp.variants:
            if v.format == fmt:
                return v
    return None


def tool_name(fmt: str | None, default: str = "servewatch") -> str:
    """How outputs name the tool behind format ``fmt`` (an unusable summary's format names its tool too)."""
    if fmt == SERVEWATCH:
        return SERVEWATCH
    for imp in IMPORTERS:
        if fmt in imp.formats or any(u.format == fmt for u in imp.unusable):
            return imp.tool
    return default


def is_line_format(fmt: str | None) -> bool:
    """One JSON object per line (servewatch's own files and line-based imports): can be followed while written."""
    imp = importer_for(fmt)
    return fmt == SERVEWATCH or (imp is not None and imp.line_based)


def is_document_format(fmt: str | None) -> bool:
    """One JSON (or YAML) document, written once at the end of the run."""
    imp = importer_for(fmt)
    return imp is not None and not imp.line_based


def formats_read() -> str:
    """The per-request files servewatch imports, for the help and the "not a format" message."""
    return ", ".join(imp.reads for imp in IMPORTERS)


class _Formats(Sequence[str]):
    """A read-only tuple of format names, computed from ``IMPORTERS`` each time it is read."""

    def __init__(self, pick: Any) -> None:
        self._pick = pick

    def _now(self) -> tuple[str, ...]:
        return tuple(self._pick())

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self._now()[i]

    def __len__(self) -> int:
        return len(self._now())

    def __repr__(self) -> str:
        return repr(self._now())


class _Table(Mapping[str, str]):
    """A read-only mapping computed from ``IMPORTERS`` each time it is read."""

    def __init__(self, pick: Any) -> None:
        self._pick = pick

    def __getitem__(self, key: str) -> str:
        return dict(self._pick())[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._pick()))

    def __len__(self) -> int:
        return len(dict(self._pick()))

    def __repr__(self) -> str:
        return repr(dict(self._pick()))


LINE_FORMATS = _Formats(lambda: [SERVEWATCH] + [f for imp in IMPORTERS if imp.line_based for f in imp.formats])
DOCUMENT_FORMATS = _Formats(lambda: [f for imp in IMPORTERS if not imp.line_based for f in imp.formats])
IMPORTABLE = _Formats(lambda: [f for imp in IMPORTERS for f in imp.formats])
UNUSABLE = _Table(lambda: [(u.format, u.reason) for imp in IMPORTERS for u in imp.unusable])
TOOL_NAMES = _Table(lambda: [(f, imp.tool) for imp in IMPORTERS for f in imp.formats] + [(SERVEWATCH, SERVEWATCH)])


def detect_object(obj: Any) -> str | None:
    """The format of one decoded JSON value (a whole document, or one line of a line-based file): servewatch's own
    records, then each tool's per-request format, then each tool's summaries (``unusable``), in the list's order."""
    if isinstance(obj, dict) and obj.get("type") in KNOWN_TYPES:
        return SERVEWATCH
    for imp in IMPORTERS:
        if imp.looks_like(obj):
            return imp.name
    for imp in IMPORTERS:
        for u in imp.unusable:
            if u.test(obj):
                return u.format
    return None


def detect_format(text: str) -> str | None:
    """Recognise a file by its content (the whole text, or at least its first few KB for line formats).

    Line formats are recognised from their first non-blank line; whole-document JSON by decoding it
    (so pass the whole text for those); a text variant (GuideLLM's YAML) by its pattern."""
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
            if is_line_format(fmt):
                return fmt
            # one object per line (vLLM --append-result) or a one-line document
            if fmt is not None and "\n" in body.strip():
                return fmt
        try:
            return detect_object(json.loads(body))
        except (ValueError, RecursionError):
            return (fmt_from_lines(body) if obj is not None else None) or sniff_keys(body[:65536])
    for imp in IMPORTERS:
        for v in imp.variants:
            if v.pattern.search(body[:YAML_HEAD]):
                return v.format
    return None


def sniff_keys(head: str) -> str | None:
    """A JSON document that does not decode (cut short, damaged): which tool's keys does it start with?
    The converter then reports the decoding problem with its position."""
    for imp in IMPORTERS:
        for keys in imp.sniff:
            if all(k in head for k in keys):
                return imp.name
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


def convert_text(text: str, fmt: str, label: str, *, file: str | None = None, sha256: str | None = None,
                 doc: Any = None, **opts: Any) -> ImportResult:
    """Convert a whole file's text (``doc``: the already decoded document, e.g. from YAML; ``opts``: what the side
    files gave), then hold the records against the tool's own summary (``summary_problems``, ``summary_notes``:
    tui.core.importers.crosscheck). Raises ValueError for a format no importer converts."""
    imp = importer_for(fmt)
    if imp is None:
        raise ValueError(f"no importer for format {fmt!r}")
    res = imp.convert(Source(text=text, format=fmt, label=label, file=file, sha256=sha256, doc=doc, options=opts))
    check_summary(res)
    return res


def check_summary(res: ImportResult) -> ImportResult:
    """``res.summary_problems`` / ``summary_notes``: its records against ``source.tool_summary``."""
    src = (res.header or {}).get("source")
    ts = src.get("tool_summary") if isinstance(src, dict) else None
    res.summary_problems, res.summary_notes = crosscheck.problems(
        ts, crosscheck.tally_records(res.records, res.unusable()))
    return res
