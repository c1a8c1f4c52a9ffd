"""An importer is one value: everything servewatch knows about another tool's output, declared in the tool's module.

Each tool module (``aiperf``, ``guidellm``, ``vllm``, ``llmperf``, ``inference_perf``) exports ``IMPORTER``, an
:class:`Importer`; ``tui.core.importers.registry`` lists them (``IMPORTERS``) and everything else iterates that
list: detection by content, the summaries that hold no per-request data, the side files read beside the file
(``tui.sources.importing`` does the file I/O, the descriptor says which globs and how their content becomes
options), conversion, the tool's own summary the records are held against, the TTFT definition and its short
label, the help text and the documentation checks (tests/unit/core/test_import_descriptors.py). Adding a tool is
its own module plus one entry in that list (docs/record-format.md, "Adding an importer").

Pure, standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import tui.core.importers.crosscheck as X
from tui.core.bounds import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_too_deep
from tui.core.importers.common import ImportResult
from tui.core.records.schema import LineIssue

__all__ = ["Importer", "LineFeeder", "SideFiles", "SideInput", "Source", "SummaryRule", "TextVariant", "Unusable",
           "document", "numbered"]


def numbered(text: str) -> Iterator[tuple[int, str | int, bool]]:
    """A whole file's text as ``(line number, line, terminated)`` triples, as the record reader numbers lines (a
    last line without its newline is not terminated; an empty last line is not a line), one at a time (no list of
    them all); a line longer than ``MAX_LINE_BYTES`` is given as its length, never copied (the converters report
    it: ``tui.core.records.parse.long_line_issue``)."""
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


def document(text: str) -> Any:
    """A whole JSON document decoded, no deeper than ``MAX_JSON_DEPTH`` (a ValueError otherwise: the import reports
    a document that does not decode, as for damaged JSON)."""
    doc = json.loads(text)
    if json_too_deep(doc):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels of objects and lists")
    return doc


@dataclass(frozen=True)
class Source:
    """What a converter is given: the file's text (``doc``: already decoded, e.g. from YAML), the format detected,
    the label its problems are reported under, the file's name and SHA-256, and the options its side files gave."""

    text: str
    format: str
    label: str
    file: str | None = None
    sha256: str | None = None
    doc: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def document(self) -> Any:
        """The decoded document (raises ValueError / RecursionError when the text does not decode: the caller
        reports it with its position and imports nothing)."""
        return document(self.text) if self.doc is None else self.doc

    def lines(self) -> Iterator[tuple[int, str | int, bool]]:
        return numbered(self.text)


@dataclass(frozen=True)
class Unusable:
    """A file of the tool that holds no per-request data (its summary): recognised, and refused with ``reason``,
    which says where the per-request data is. ``test`` sees one decoded JSON value of any type."""

    format: str
    test: Callable[[Any], bool]
    reason: str


@dataclass(frozen=True)
class TextVariant:
    """The same document written in another text format (GuideLLM's YAML): recognised by ``pattern`` in the first
    200,000 characters, decoded by ``tui.sources.importing`` with ``decoder`` (``"yaml"``: PyYAML, outside the
    standard library), then converted like the JSON. ``hint`` says how to get the JSON instead."""

    format: str
    pattern: re.Pattern[str]
    decoder: str
    hint: str


@dataclass(frozen=True)
class SideInput:
    """The side files read for one per-request file: its own name, and ``(name, decoded JSON)`` in reading order."""

    file: str
    files: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class SideFiles:
    """Files the same tool writes beside the per-request file (its summary, the load level).

    ``tui.sources.importing`` lists the regular files matching ``globs`` in the file's folder (sorted per glob, in
    glob order), keeps those ``pick(file name, names)`` returns, decodes each as JSON in that order and hands them to
    ``options``, which returns ``(options for convert, notes)`` and says itself when the summary is missing
    (``summary_missing``). A file that cannot be read or decoded, or ``options`` raising ValueError (e.g. "not an
    object"), gives ``summary_missing: "<file> could not be read"`` and the note "<file> could not be read: level
    unknown"; ``label`` names the files before one is picked."""

    globs: tuple[str, ...]
    options: Callable[[SideInput], tuple[dict, list[str]]]
    label: str
    pick: Callable[[str, tuple[str, ...]], tuple[str, ...]] = lambda _file, names: names


@dataclass(frozen=True)
class SummaryRule:
    """Where the tool writes its own counts (``source.tool_summary``, built by the converter with
    ``tui.core.importers.crosscheck.entry`` / ``summary``) and which legitimate differences its entries carry
    (``crosscheck.DIFFERENCES``): the records are held against it at import and by every reader."""

    where: str
    differences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [d for d in self.differences if d not in X.DIFFERENCES]
        if unknown:
            raise ValueError(f"unknown summary differences {unknown}: crosscheck.DIFFERENCES names "
                             f"{', '.join(X.DIFFERENCES)}")


class LineFeeder(Protocol):
    """A line-based converter fed as the file grows (``replay --follow``): numbered raw lines in, record dicts (a
    run header before the first request) and LineIssues out."""

    def feed(self, numbered: Iterable[tuple[int, bytes | str, bool]]) -> Iterator[dict | LineIssue]: ...


@dataclass(frozen=True)
class Importer:
    """One tool's output format.

    - ``name``: the format (``source.format``); ``tool``: how every output names the tool; ``reads``: the
      per-request file as the help and the "not a format" message name it.
    - ``looks_like(value)``: a decoded JSON value (a whole document, or one line of a line-based file) is this
      format. Per-request formats are tried before any ``unusable`` rule, each in the registry's order.
    - ``sniff``: key sets (each a tuple of quoted JSON keys) that name the tool in the first 64 KB of a document
      that does not decode (cut short), so the converter reports the decoding problem with its position.
    - ``line_based``: one JSON object per line; then ``follow(label, file name, options)`` returns the converter
      fed line by line while the tool still writes (``replay --follow``); whole documents are refused there.
    - ``convert(Source) -> ImportResult``; ``ttft_definition`` (``source.ttft_definition``) and ``ttft_label``
      (a few words for the verdict line: "first content chunk, as AIPerf measures").
    - ``side_files``, ``summary``, ``unusable``, ``variants``: see those classes.
    """

    name: str
    tool: str
    reads: str
    looks_like: Callable[[Any], bool]
    convert: Callable[[Source], ImportResult]
    ttft_definition: str
    ttft_label: str
    line_based: bool = False
    follow: Callable[[str, str, Mapping[str, Any]], LineFeeder] | None = None
    sniff: tuple[tuple[str, ...], ...] = ()
    unusable: tuple[Unusable, ...] = ()
    side_files: SideFiles | None = None
    summary: SummaryRule | None = None
    variants: tuple[TextVariant, ...] = ()

    def __post_init__(self) -> None:
        if self.line_based != (self.follow is not None):
            raise ValueError(f"importer {self.name!r}: a line-based format needs follow(), a document has none")
        if any(not keys for keys in self.sniff):
            raise ValueError(f"importer {self.name!r}: an empty sniff key set would match any text")

    @property
    def formats(self) -> tuple[str, ...]:
        """Every format it converts: its own name and its text variants'."""
        return (self.name,) + tuple(v.format for v in self.variants)
