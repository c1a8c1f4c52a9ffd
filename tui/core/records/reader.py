"""Reading record files: byte chunks -> numbered lines, a stream or a file -> records and ``LineIssue`` objects
(memory bounded by the chunk), and the one-line refusal for a file that holds no record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from tui.core.records.model import Record
from tui.core.records.parse import parse_block, parse_lines
from tui.core.records.schema import LineIssue


def iter_lines(chunks: Iterable[bytes], source: str) -> Iterator[tuple[int, bytes, bool]]:
    """Split byte chunks into (line_number, line, terminated) triples.

    The last line of the stream is yielded with ``terminated=False`` when it has
    no newline (a file still being written, or cut short).
    """
    buf = b""
    lineno = 0
    for chunk in chunks:
        buf += chunk
        if b"\n" not in chunk:
            continue
        *whole, buf = buf.split(b"\n")
        for line in whole:
            lineno += 1
            yield lineno, line, True
    if buf:
        lineno += 1
        yield lineno, buf, False


def iter_blocks(fh: BinaryIO, source: str, chunk_size: int = 1 << 20,
                tap: Callable[[bytes], None] | None = None) -> Iterator[list[Record | LineIssue]]:
    """Read an open binary stream to its end, ``chunk_size`` bytes at a time (memory bounded by
    the chunk), yielding the records and issues of each chunk's complete lines (``parse_block``);
    an unterminated last line is parsed last, as a truncated line when it is not a record.
    ``tap``: called with every chunk of raw bytes as read, in order (the digest chain's verifier)."""
    lineno = 1
    partial = b""
    read = fh.read
    while True:
        data = read(chunk_size)
        if not data:
            break
        if tap is not None:
            tap(data)
        buf = partial + data if partial else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            partial = buf
            continue
        body, partial = buf[:cut], buf[cut + 1:]
        items = parse_block(body, lineno, source)
        lineno += body.count(b"\n") + 1
        yield items
    if partial:
        yield list(parse_lines(((lineno, partial, False),), source))


def iter_file(fh: BinaryIO, source: str, chunk_size: int = 1 << 20) -> Iterator[Record | LineIssue]:
    """``iter_blocks`` one item at a time."""
    for items in iter_blocks(fh, source, chunk_size):
        yield from items


def read_file(path: str) -> Iterator[Record | LineIssue]:
    """Read a whole record file once (no following). Never raises on content.

    Lines are UTF-8 (the record format): a line with bytes that are not UTF-8 is reported as a
    bad line with its number, like any other line that is not JSON.
    """
    with open(path, "rb") as fh:
        yield from iter_file(fh, path)


def not_a_record_file(usable: int, total: int, first_problem: str | LineIssue | None) -> str | None:
    """The one-line refusal for input that matches no known schema (None when some line is usable).

    ``total`` counts the non-blank lines read, ``usable`` those that parsed as records."""
    if usable > 0:
        return None
    if total == 0:
        return "not a servewatch record file (0 of 0 lines usable: it is empty)"
    first = f"; first problem: {first_problem}" if first_problem is not None else ""
    return f"not a servewatch record file (0 of {total} lines usable{first})"


def scan_usable(items: Iterable[Record | LineIssue]) -> tuple[int, int, LineIssue | None]:
    """(usable, total, first problem) over parsed items, stopping at the first usable record
    (enough to tell a record file from anything else without reading it all)."""
    total = 0
    first: LineIssue | None = None
    for it in items:
        total += 1
        if not isinstance(it, LineIssue):
            return 1, total, first
        if first is None:
            first = it
    return 0, total, first

