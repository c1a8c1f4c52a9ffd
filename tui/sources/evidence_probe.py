"""What a file of evidence holds, decided once from one open handle: servewatch records, a watch recording
(`servewatch watch --record`), another tool's export (``tui.core.importers`` knows the formats), or not
evidence at all (with the one-line reason).

``open_probed(path)`` opens the path once and returns the handle positioned at the start again (a pipe that
cannot seek gets the bytes it already gave back in front), with the :class:`Probe`; the readers in
``tui.sources.evidence_reader`` read on from that same handle. Standard input (``-``) is read as records,
once, never probed by a second read.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from typing import BinaryIO, Literal

import tui.core.bounds as B
import tui.core.importers as I
from tui.sources.infiles import InputRefused, open_input

Kind = Literal["records", "watch", "import"]
RECORDS: Kind = "records"
WATCH: Kind = "watch"
IMPORT: Kind = "import"

HEAD_BYTES = 65536  # enough to recognise a line format; whole JSON documents are read whole
MAX_DOCUMENT_BYTES = B.MAX_DOCUMENT_BYTES  # a whole-document import (tui.core.bounds)
WATCH_PROBE_LINES = 50  # a watch recording says so in its header or its first records
STDIN = "-"
STDIN_NAME = "<stdin>"


def not_a_plain_file(path: str | os.PathLike, mode: int) -> str | None:
    """The one-line refusal for anything but a regular file given as a record file: a directory, a named pipe
    (FIFO: it would block the command until something writes to it), a device or a socket (None for a regular
    file). Standard input is ``-``. One wording for report, replay, accept, compare and plan."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"{path} is a directory, not a record file (give a .jsonl file inside it)"
    if stat.S_ISFIFO(mode):
        return (f"{path} is a named pipe (FIFO), not a record file: servewatch reads regular files only (to read a "
                "pipe, give - and pipe it to standard input)")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return f"{path} is a device, not a record file"
    if stat.S_ISSOCK(mode):
        return f"{path} is a socket, not a record file"
    return f"{path} is not a regular file, not a record file"


def input_problem(path: str) -> str | None:
    """Why ``path`` is not evidence that can be read, before reading it (None: go ahead). '-' is standard input."""
    if path == STDIN:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"cannot read {path}: no such file"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return not_a_plain_file(path, st.st_mode)  # regular files only: a FIFO would block, a device never ends


@dataclass(frozen=True)
class Probe:
    """What the file holds. ``format``: the importer's name for another tool's export (``I.SERVEWATCH`` or None
    for records); ``document``: the whole file when it had to be read whole to be recognised (a JSON document),
    so that the import does not read it again."""

    kind: Kind
    format: str | None = None
    document: bytes | None = None


class _Replayed:
    """A stream that cannot seek (a pipe), with the bytes already read given back first."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n < 0:
                data, self._head = self._head + self._rest.read(), b""
                return data
            data, self._head = self._head[:n], self._head[n:]
            return data
        return self._rest.read(n)

    def close(self) -> None:
        self._rest.close()


def is_watch_head(lines: list[bytes]) -> bool:
    """True when one of the first lines is a watch record, or a run header of kind watch: a JSON object that says
    so (the byte match only picks the lines worth parsing; a line that merely contains the words is not one)."""
    for line in lines:
        flat = line.replace(b" ", b"")
        if b'"type":"watch"' not in flat and not (b'"kind":"watch"' in flat and b'"type":"run"' in flat):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and (obj.get("type") == "watch"
                                      or (obj.get("type") == "run" and obj.get("kind") == "watch")):
            return True
    return False


def probe_stream(fh: BinaryIO, size: int | None, *, watch: bool = True) -> tuple[Probe, BinaryIO]:
    """Decide what the stream holds and give it back positioned at its start (``size``: the file's size when it
    is a regular file, None for a pipe). ``watch``: also tell a watch recording from plain records (report and
    replay do; accept and compare read a watch file as records, as they always have)."""
    seekable = size is not None
    head = fh.read(HEAD_BYTES)
    if watch:
        lines = head.split(b"\n", WATCH_PROBE_LINES)[:WATCH_PROBE_LINES]
        if len(lines) < WATCH_PROBE_LINES and len(head) == HEAD_BYTES:  # long lines: the probe reads on
            more = fh.read(HEAD_BYTES * 16)
            head += more
            lines = head.split(b"\n", WATCH_PROBE_LINES)[:WATCH_PROBE_LINES]
        if is_watch_head(lines):
            return Probe(WATCH), _rewound(fh, head, seekable)
    too_deep = first_line_too_deep(head)
    if too_deep:
        raise InputRefused(too_deep)
    fmt = I.detect_format(head[:HEAD_BYTES].decode("utf-8", errors="replace"))
    document: bytes | None = None
    if fmt is None:
        body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if body[:1] in (b"{", b"[") and seekable and HEAD_BYTES < (size or 0) <= MAX_DOCUMENT_BYTES:
            document = head + fh.read(MAX_DOCUMENT_BYTES + 1 - len(head))  # a JSON document is recognised by decoding it
            fmt = I.detect_format(document.decode("utf-8", errors="replace")) if len(document) <= MAX_DOCUMENT_BYTES \
                else None
            if fmt is None or fmt == I.SERVEWATCH:
                document = None
    if fmt is None or fmt == I.SERVEWATCH:
        return Probe(RECORDS, fmt), _rewound(fh, head, seekable)
    return Probe(IMPORT, fmt, document), _rewound(fh, head, seekable)


def first_line_too_deep(head: bytes) -> str | None:
    """The refusal when the first non-blank line (as far as ``head`` holds it) is JSON nested deeper than
    ``MAX_JSON_DEPTH``: what the file holds cannot be told from it (one line, exit 2), else None."""
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if body[:1] not in (b"{", b"["):
        return None
    skipped = head.count(b"\n", 0, len(head) - len(body))
    line = body.split(b"\n", 1)[0]
    try:
        deep = B.json_too_deep(json.loads(line))
    except RecursionError:
        deep = True
    except ValueError:  # not JSON, or cut at the head's end: the readers report it
        return None
    if not deep:
        return None
    return (f"line {skipped + 1} is JSON nested deeper than {B.MAX_JSON_DEPTH} levels: cannot tell what the file "
            "holds (not a servewatch record file or an export servewatch imports)")


def _rewound(fh: BinaryIO, head: bytes, seekable: bool) -> BinaryIO:
    if seekable:
        fh.seek(0)
        return fh
    return _Replayed(head, fh)  # type: ignore[return-value]


def open_probed(path: str, *, watch: bool = True) -> tuple[Probe, BinaryIO]:
    """Open ``path`` once (``-``: standard input, records, never probed) and decide what it holds. Raises
    OSError when it cannot be opened or read."""
    if path == STDIN:
        return Probe(RECORDS), sys.stdin.buffer
    fh = open_input(path, "record file")  # a regular file only: a FIFO or a device would never end
    try:
        st = os.fstat(fh.fileno())
        return probe_stream(fh, st.st_size if stat.S_ISREG(st.st_mode) else None, watch=watch)
    except BaseException:
        fh.close()
        raise
