"""Open any run file servewatch can read: its own record files, or another tool's output converted on
the fly (AIPerf, GuideLLM, vllm bench serve, LLMPerf, inference-perf). Recognised by content.

The one entry point for readers: ``open_run(path) -> (records iterator, RunSource)``. The iterator
yields parsed records (``tui.core.records``) and ``LineIssue`` objects exactly like
``records.read_file``; for a servewatch file it IS ``read_file``. File reading, SHA-256, sibling
files that name the load level, and YAML (PyYAML, only when importable) live here; the conversion
itself is pure (``tui.core.importers``).
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
        return I.TOOL_NAMES.get(self.format or "", "servewatch")


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


def _load_yaml(text: str, path: str) -> Any:
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise ImportProblem(f"{path}: a GuideLLM YAML file, but PyYAML is not installed here; convert it to JSON "
                            "(guidellm writes benchmarks.json too) or install PyYAML") from None
    if len(text) > B.MAX_YAML_BYTES:  # PyYAML needs far more memory per byte than the JSON decoder
        raise ImportProblem(f"{path}: a GuideLLM YAML file larger than {B.size_text(B.MAX_YAML_BYTES)}, the most "
                            "servewatch imports as YAML; import its benchmarks.json instead")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ImportProblem(f"{path}: GuideLLM YAML does not parse: {str(exc).splitlines()[0][:120]}") from None
    except RecursionError:
        doc = None
    if (doc is None and text.strip()) or B.json_too_deep(doc):
        raise ImportProblem(f"{path}: GuideLLM YAML nested deeper than {B.MAX_JSON_DEPTH} levels: not imported")
    return doc


def _sidecar_opts(path: str, fmt: str) -> tuple[dict, list[str]]:
    """Facts the per-request file lacks but a file the same tool wrote beside it holds: the load level, and the
    tool's own counts the records are held against (``summary``, ``summary_file``; ``summary_missing`` says why
    there are none: tui.core.importers.crosscheck). Read only when present and parseable; what was used is said in
    the notes."""
    opts: dict = {}
    notes: list[str] = []
    folder = Path(path).parent
    side_name = "the summary file beside it"
    try:
        if fmt == "aiperf":
            side = folder / "profile_export_aiperf.json"
            side_name = side.name
            if not side.is_file():
                opts["summary_missing"] = f"{side.name} is not beside the file"
                return opts, notes
            d = _side_json(side)
            if not isinstance(d, dict):
                raise ValueError("not an object")
            opts["summary"], opts["summary_file"] = d, f"{side.name} beside the file"
            ic = d["input_config"] if isinstance(d.get("input_config"), dict) else {}
            phases = [ph for ph in (ic.get("phases") or []) if isinstance(ph, dict)
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
                notes.append(f"level ({lv[2]} {lv[0]:g}) read from {side.name} beside the file")
            v = _find_key(d, ("aiperf_version", "version"))
            if isinstance(v, str):
                opts["version"] = v
        elif fmt == "llmperf":
            side_name = "its *_summary.json"
            found = _llmperf_summary(Path(path))
            if found is None:
                opts["summary_missing"] = "no *_summary.json named for it beside the file"
                return opts, notes
            side_name = found.name
            d = _side_json(found)
            if not isinstance(d, dict):
                raise ValueError("not an object")
            opts["summary"], opts["summary_file"] = d, f"{found.name} beside the file"
            conc = d.get("num_concurrent_requests")
            if isinstance(conc, (int, float)) and not isinstance(conc, bool) and conc > 0:
                opts["level"] = float(conc)
                notes.append(f"level (concurrency {conc:g}) read from {found.name} beside the file")
        elif fmt == "inference-perf":
            side_name = "its lifecycle metrics reports"
            levels, counts, stages = {}, {}, {}
            for side in sorted(folder.glob("stage_*_lifecycle_metrics.json")):
                stage = side.name.split("_")[1]
                if not stage.isdigit():
                    continue  # stage_N_session_lifecycle_metrics.json and the like
                side_name = side.name
                d = _side_json(side)
                ls = d.get("load_summary") if isinstance(d, dict) else None
                if not isinstance(ls, dict):
                    continue
                stages[int(stage)] = d
                rate, count = ls.get("requested_rate"), ls.get("count")
                if isinstance(rate, (int, float)) and not isinstance(rate, bool):
                    levels[int(stage)] = float(rate)
                if isinstance(count, int) and not isinstance(count, bool):
                    counts[int(stage)] = count
            if levels:
                opts["stage_levels"] = levels
                opts["mode"] = "open"
                notes.append("stage rates (load_summary.requested_rate) read from stage_N_lifecycle_metrics.json "
                             "beside the file")
            if counts:
                opts["stage_counts"] = counts
            if stages:
                opts["stage_summaries"] = stages
            whole = folder / "summary_lifecycle_metrics.json"
            if whole.is_file():
                side_name = whole.name
                d = _side_json(whole)
                if isinstance(d, dict):
                    opts["summary"] = d
            if not stages and "summary" not in opts:
                opts["summary_missing"] = ("neither summary_lifecycle_metrics.json nor stage_N_lifecycle_metrics.json "
                                           "is beside the file")
    except (OSError, ValueError, AttributeError, RecursionError):
        notes.append(f"{side_name} could not be read: level unknown")
        opts = {"summary_missing": f"{side_name} could not be read"}
    return opts, notes


def _llmperf_summary(path: Path) -> Path | None:
    """LLMPerf's summary of ``X_individual_responses.json``: ``X_summary.json``, else the only ``*_summary.json``
    beside it (None: none, or several and none named for it)."""
    name = path.name
    if name.endswith("_individual_responses.json"):
        mine = path.with_name(name[: -len("_individual_responses.json")] + "_summary.json")
        if mine.is_file():
            return mine
    found = sorted(p for p in path.parent.glob("*_summary.json") if p.is_file())
    return found[0] if len(found) == 1 else None


def _side_json(side: Path) -> Any:
    """A tool's summary file beside the import: a regular file of at most ``MAX_SMALL_FILE_BYTES``, JSON no deeper
    than ``MAX_JSON_DEPTH`` (else OSError / ValueError: the level stays unknown, said)."""
    d = json.loads(read_input(side, B.MAX_SMALL_FILE_BYTES, "summary file").decode("utf-8"))
    if B.json_too_deep(d):
        raise ValueError("nested too deep")
    return d


def _find_key(d: Any, names: tuple[str, ...], depth: int = 0) -> Any:
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


def import_file(path: str, fmt: str | None = None, *, label: str | None = None, sidecars: bool = True,
                data: bytes | None = None) -> I.ImportResult:
    """Convert another tool's file; returns an ``ImportResult``. Raises ImportProblem (one line) when it
    cannot be imported at all, OSError when unreadable. ``data``: the file's bytes, already read by the caller
    (``tui.sources.evidence_reader``: the file is then not opened again)."""
    fmt = fmt or detect_file(path)
    label = label or path
    if fmt is None:
        raise ImportProblem(f"{path}: not a format servewatch can import (AIPerf profile_export.jsonl, GuideLLM "
                            "benchmarks.json/.yaml, vllm bench serve --save-detailed JSON, LLMPerf "
                            "*_individual_responses.json, inference-perf per_request_lifecycle_metrics.json)")
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
    doc = _load_yaml(text, path) if fmt == "guidellm-yaml" else None
    try:
        res = I.convert_text(text, fmt, label, file=os.path.basename(path), sha256=sha256, doc=doc, **opts)
    except (ValueError, RecursionError) as exc:
        # a whole document that does not decode: say where, count it, import nothing
        res = I.ImportResult(format=fmt, header={})
        from tui.core.importers import common as C

        res.header = C.header(C.source_block(tool=I.TOOL_NAMES.get(fmt, fmt), version=None, file=os.path.basename(path),
                                             sha256=sha256, derived=[], ttft_definition="",
                                             time_axis=C.AXIS_NONE, fmt=fmt), started_at=None)
        res.entries = 1
        pos = f"line {exc.lineno}" if hasattr(exc, "lineno") else "document"
        res.issues.append(LineIssue(label, getattr(exc, "lineno", 0),
                                    f"{I.TOOL_NAMES.get(fmt, fmt)} document does not decode (truncated or damaged "
                                    f"JSON at {pos}): {str(exc)[:100]}", "truncated"))
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
    src = RunSource(p, fmt, imported=True, line_based=fmt in I.LINE_FORMATS, result=res, notes=list(res.notes))
    return records_of(res), src


def follow_refusal(path: str | os.PathLike) -> str | None:
    """Why ``replay --follow`` cannot follow this file (a whole JSON document), else None."""
    p = os.fspath(path)
    try:
        fmt = detect_file(p)
    except (OSError, ImportProblem):
        return None
    if fmt in I.DOCUMENT_FORMATS:
        return (f"{p}: a {I.TOOL_NAMES.get(fmt, fmt)} file is one JSON document, written once at the end of the run: "
                "it cannot be followed while being written; replay it without --follow")
    return None


def line_parser_for(path: str | os.PathLike) -> Any:
    """For a line-based foreign format (AIPerf), a ``parse_lines``-compatible function that converts
    each new line as it is read (for replay and --follow), else None (servewatch files)."""
    p = os.fspath(path)
    try:
        fmt = detect_file(p)
    except OSError:
        return None
    if fmt != "aiperf":
        return None
    from tui.core.importers import aiperf

    opts, _ = _sidecar_opts(p, fmt)
    ts = aiperf.tool_summary(opts.get("summary"), opts.get("level"), opts.get("mode"),
                             where=opts.get("summary_file"), missing=opts.get("summary_missing"))
    conv = aiperf.LineConverter(p, level=opts.get("level"),
                                source_info=aiperf.source(os.path.basename(p), tool_summary=ts))

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
    if fmt in I.LINE_FORMATS:
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
