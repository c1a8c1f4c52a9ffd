"""Open any run file servewatch can read: its own record files, or another tool's output converted on
the fly (every tool in ``tui.core.importers.registry.IMPORTERS``). Recognised by content.

The one entry point for readers: ``open_run(path) -> (records iterator, RunSource)``. The iterator
yields parsed records (``tui.core.records``) and ``LineIssue`` objects exactly like
``records.read_file``; for a servewatch file it IS ``read_file``. File reading, SHA-256, the side files
each importer names (``Importer.side_files``: its summary, the load level), and YAML (PyYAML, only when
importable) live here; the conversion itself is pure (``tui.core.importers``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tui.core.bounds as B
import tui.core.importers as I
from tui.core.records import LineIssue, RecordError, parse_object, read_file
from tui.sources.infiles import InputRefused, input_refusal, open_input, read_input

HEAD_BYTES = 65536
MAX_DOCUMENT_BYTES = B.MAX_DOCUMENT_BYTES  # an import is read whole: at most this (tui.core.bounds)


class ImportProblem(ValueError):
    """The file cannot be imported at all (one line for the user, exit 2)."""


@dataclass
class RunSource:
    path: str
    format: str | None  # detected format (None: not recognised; read as a servewatch file)
    imported: bool = False
    line_based: bool = True
    result: Any = None  # ImportResult for imported files
    notes: list[str] = field(default_factory=list)

    @property
    def tool(self) -> str:
        return I.tool_name(self.format)


def _read_head(path: str) -> str:
    with open_input(path, "file to import") as fh:
        head = fh.read(HEAD_BYTES)
    return head.decode("utf-8", errors="replace")


def detect_file(path: str) -> str | None:
    """The format of ``path`` by content (reads the head, and the whole file for JSON documents up to
    ``MAX_DOCUMENT_BYTES``). Raises OSError (``InputRefused`` for a FIFO, a device, a directory)."""
    head = _read_head(path)
    fmt = I.detect_format(head)
    if fmt is not None:
        return fmt
    body = head.lstrip("\ufeff \t\r\n")
    if body[:1] in ("{", "[") and HEAD_BYTES < os.path.getsize(path) <= MAX_DOCUMENT_BYTES:
        return I.detect_format(_read_text(path))
    return None


def _read_bytes(path: str) -> bytes:
    """The whole file to import, at most ``MAX_DOCUMENT_BYTES`` (a larger one: ImportProblem, one line)."""
    try:
        return read_input(path, MAX_DOCUMENT_BYTES, "file to import (an import is read whole)")
    except InputRefused as exc:
        if "larger than" in str(exc):
            raise ImportProblem(f"{path}: {exc}") from None
        raise


def _read_text(path: str) -> str:
    return _read_bytes(path).decode("utf-8", errors="replace")


def _decode_variant(fmt: str, text: str, path: str) -> Any:
    """A text variant's document (GuideLLM's YAML), decoded here: its library is outside the standard library."""
    v = I.variant_of(fmt)
    if v is None:
        return None
    if v.decoder != "yaml":
        raise ImportProblem(f"{path}: no decoder for {v.decoder} here")
    tool = I.tool_name(fmt, fmt)
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise ImportProblem(f"{path}: a {tool} YAML file, but PyYAML is not installed here; convert it to JSON "
                            f"({v.hint}) or install PyYAML") from None
    if len(text) > B.MAX_YAML_BYTES:  # PyYAML needs far more memory per byte than the JSON decoder
        raise ImportProblem(f"{path}: a {tool} YAML file larger than {B.size_text(B.MAX_YAML_BYTES)}, the most "
                            f"servewatch imports as YAML; import its JSON instead ({v.hint})")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ImportProblem(f"{path}: {tool} YAML does not parse: {str(exc).splitlines()[0][:120]}") from None
    except RecursionError:
        doc = None
    if (doc is None and text.strip()) or B.json_too_deep(doc):
        raise ImportProblem(f"{path}: {tool} YAML nested deeper than {B.MAX_JSON_DEPTH} levels: not imported")
    return doc


def _side_names(folder: Path, globs: tuple[str, ...]) -> tuple[str, ...]:
    """The regular files in ``folder`` matching ``globs``: sorted per glob, in glob order, each once."""
    names: list[str] = []
    for g in globs:
        for p in sorted(folder.glob(g)):
            if p.is_file() and p.name not in names:
                names.append(p.name)
    return tuple(names)


def _sidecar_opts(path: str, fmt: str) -> tuple[dict, list[str]]:
    """Facts the per-request file lacks but files the same tool wrote beside it hold (the load level, and the
    tool's own counts the records are held against): the importer's ``side_files`` say which globs and how their
    content becomes options; this reads them (JSON, in the order it picks). A file that cannot be read or decoded
    is said in the notes and leaves the summary missing ("<file> could not be read")."""
    imp = I.importer_for(fmt)
    spec = imp.side_files if imp is not None else None
    if spec is None:
        return {}, []
    here = Path(path)
    blamed = spec.label
    try:
        found = []
        for name in spec.pick(here.name, _side_names(here.parent, spec.globs)):
            blamed = name
            found.append((name, _side_json(here.parent / name)))
        return spec.options(I.SideInput(file=here.name, files=tuple(found)))
    except (OSError, ValueError, AttributeError, TypeError, RecursionError):
        return {"summary_missing": f"{blamed} could not be read"}, [f"{blamed} could not be read: level unknown"]


def _side_json(side: Path) -> Any:
    """A tool's summary file beside the import: a regular file of at most ``MAX_SMALL_FILE_BYTES``, JSON no deeper
    than ``MAX_JSON_DEPTH`` (else OSError / ValueError: the level stays unknown, said)."""
    d = json.loads(read_input(side, B.MAX_SMALL_FILE_BYTES, "summary file").decode("utf-8"))
    if B.json_too_deep(d):
        raise ValueError("nested too deep")
    return d


def import_file(path: str, fmt: str | None = None, *, label: str | None = None, sidecars: bool = True,
                data: bytes | None = None) -> I.ImportResult:
    """Convert another tool's file; returns an ``ImportResult``. Raises ImportProblem (one line) when it
    cannot be imported at all, OSError when unreadable. ``data``: the file's bytes, already read by the caller
    (``tui.sources.evidence_reader``: the file is then not opened again)."""
    fmt = fmt or detect_file(path)
    label = label or path
    if fmt is None:
        raise ImportProblem(f"{path}: not a format servewatch can import ({I.formats_read()})")
    why = I.unusable_reason(fmt)
    if why:
        raise ImportProblem(f"{path}: {why}")
    if fmt == I.SERVEWATCH:
        raise ImportProblem(f"{path}: already a servewatch record file; nothing to import")
    if data is None:
        data = _read_bytes(path)  # one read: the text and its SHA-256 are of the same bytes
    text, sha256 = data.decode("utf-8", errors="replace"), hashlib.sha256(data).hexdigest()
    data = None  # the bytes are not needed again: the text alone is held while it is converted
    opts, notes = _sidecar_opts(path, fmt) if sidecars else ({}, [])
    doc = _decode_variant(fmt, text, path)
    try:
        res = I.convert_text(text, fmt, label, file=os.path.basename(path), sha256=sha256, doc=doc, **opts)
    except (ValueError, RecursionError) as exc:
        # a whole document that does not decode: say where, count it, import nothing
        res = I.ImportResult(format=fmt, header={})
        from tui.core.importers import common as C

        res.header = C.header(C.source_block(tool=I.tool_name(fmt, fmt), version=None, file=os.path.basename(path),
                                             sha256=sha256, derived=[], ttft_definition="",
                                             time_axis=C.AXIS_NONE, fmt=fmt), started_at=None)
        res.entries = 1
        pos = f"line {exc.lineno}" if hasattr(exc, "lineno") else "document"
        res.issues.append(LineIssue(label, getattr(exc, "lineno", 0),
                                    f"{I.tool_name(fmt, fmt)} document does not decode (truncated or damaged "
                                    f"JSON at {pos}): {str(exc)[:100]}", "truncated"))
    from tui.core.importers import common as C

    res.records, _moved = C.completion_order(res.records)  # judged in the order requests ended, whatever the file's
    res.notes = notes + res.notes
    if notes:
        res.header.setdefault("source", {}).setdefault("derived", []).extend(notes)
    return res


def records_of(result: I.ImportResult) -> Iterator:
    """The parsed records of an ImportResult (header first), then its issues: like ``read_file``."""
    source = str(((result.header or {}).get("source") or {}).get("file") or "<import>")
    for i, d in enumerate(result.all_records()):
        if not d:
            continue
        try:
            yield parse_object(d)
        except RecordError as exc:  # the source's values converted to a record the schema refuses (0 as a time...)
            yield LineIssue(source, i, f"converted record {i} refused: {exc}", "malformed",
                            request=d.get("type") == "request")
    yield from result.issues


def open_run(path: str | os.PathLike) -> tuple[Iterator, RunSource]:
    """Records of any readable run file, and where they came from. A servewatch file (or one that is not
    recognised at all) is read by ``read_file`` unchanged, so its bad lines are reported as before.
    Raises ImportProblem (a ValueError, one line for the user) for a file that cannot be imported."""
    p = os.fspath(path)
    why = input_refusal(p, "run file")
    if why is not None:  # read_file below would block on a FIFO
        raise InputRefused(why, p)
    try:
        fmt = detect_file(p)
    except OSError:
        fmt = None
    if I.unusable_reason(fmt):  # another tool's summary: say where its per-request data is
        raise ImportProblem(f"{p}: {I.unusable_reason(fmt)}")
    if fmt is None or fmt == I.SERVEWATCH:
        return read_file(p), RunSource(p, fmt, imported=False, line_based=True)
    res = import_file(p, fmt)
    src = RunSource(p, fmt, imported=True, line_based=I.is_line_format(fmt), result=res, notes=list(res.notes))
    return records_of(res), src


def follow_refusal(path: str | os.PathLike) -> str | None:
    """Why ``replay --follow`` cannot follow this file (a whole JSON document), else None."""
    p = os.fspath(path)
    try:
        fmt = detect_file(p)
    except (OSError, ImportProblem):
        return None
    if fmt is not None and I.is_document_format(fmt):
        return (f"{p}: a {I.tool_name(fmt, fmt)} file is one JSON document, written once at the end of the run: "
                "it cannot be followed while being written; replay it without --follow")
    return None


def line_parser_for(path: str | os.PathLike) -> Any:
    """For a line-based foreign format (an importer with ``follow``: AIPerf), a ``parse_lines``-compatible function that converts
    each new line as it is read (for replay and --follow), else None (servewatch files)."""
    p = os.fspath(path)
    try:
        fmt = detect_file(p)
    except OSError:
        return None
    imp = I.importer_for(fmt)
    if fmt is None or imp is None or imp.follow is None:
        return None
    opts, _ = _sidecar_opts(p, fmt)
    conv = imp.follow(p, os.path.basename(p), opts)

    def parse(numbered, source):
        for item in conv.feed(numbered):
            yield item if isinstance(item, LineIssue) else parse_object(item)

    return parse


def write_records(result: I.ImportResult, out_path: str) -> int:
    """Write an ImportResult as a servewatch record file; returns the number of lines written."""
    from tui.core.records import dumps
    from tui.sources.outfiles import atomic_text

    n = 0
    with atomic_text(out_path) as fh:  # whole or not at all
        for d in result.all_records():
            fh.write(dumps(d))
            n += 1
    return n


_TEMP_FILES: list[str] = []


def _cleanup_temp() -> None:
    for p in _TEMP_FILES:
        try:
            os.unlink(p)
        except OSError:
            pass


def prepare_replay(path: str | os.PathLike, follow: bool = False) -> tuple[str, Any, str | None]:
    """What the replay should read: ``(path_to_read, line_parser or None, refusal or None)``.

    servewatch files (and anything not recognised, which the reader then reports): the file itself.
    AIPerf (line based): the file itself, converted line by line (so ``--follow`` works on a file AIPerf
    is still writing). Whole-document formats: refused with ``--follow``; otherwise converted once into a
    temporary record file (removed at exit). Raises ImportProblem / OSError when it cannot be imported."""
    p = os.fspath(path)
    try:
        fmt = detect_file(p)
    except OSError:
        return p, None, None  # not there yet (--follow waits for it) or unreadable: the replay says so
    if I.unusable_reason(fmt):
        raise ImportProblem(f"{p}: {I.unusable_reason(fmt)}")
    return prepare_replay_as(p, fmt, follow)


def prepare_replay_as(p: str, fmt: str | None, follow: bool = False,
                      data: bytes | None = None) -> tuple[str, Any, str | None]:
    """``prepare_replay`` of a file whose format is known (``tui.sources.evidence_reader`` decided it; ``data``:
    its bytes when already read whole)."""
    if fmt is None or fmt == I.SERVEWATCH:
        return p, None, None
    if I.is_line_format(fmt):
        return p, line_parser_for(p), None
    if follow:
        return p, None, follow_refusal(p)
    import atexit
    import tempfile

    res = import_file(p, fmt, data=data)
    fd, tmp = tempfile.mkstemp(prefix="servewatch-import-", suffix=".jsonl")
    os.close(fd)
    if not _TEMP_FILES:
        atexit.register(_cleanup_temp)
    _TEMP_FILES.append(tmp)
    from tui.core.records import dumps

    with open(tmp, "w", encoding="utf-8") as fh:
        for d in res.all_records():
            fh.write(dumps(d))
        for issue in res.issues:  # every problem entry stays visible (and counted) in the replay
            fh.write(dumps({"type": "import_problem", "source": issue.source, "line": issue.line,
                            "reason": issue.reason, "kind": issue.kind}))
    return tmp, _converted_parser, None


def _converted_parser(numbered, label):
    """``parse_lines`` for a converted temporary file: its problem lines become the original LineIssues
    (with the original file and line), everything else parses as usual."""
    from tui.core.importers.common import EntryIssue
    from tui.core.records import parse_lines

    for lineno, line, terminated in numbered:
        if b'"import_problem"' in (line if isinstance(line, bytes) else line.encode()):
            d = json.loads(line)
            cls = EntryIssue if d.get("line") == 0 else LineIssue
            yield cls(d.get("source", label), d.get("line", 0), d.get("reason", ""), d.get("kind", "malformed"))
            continue
        yield from parse_lines([(lineno, line, terminated)], label)
