"""Reading record files: byte chunks -> numbered lines, a stream or a file -> records and ``LineIssue`` objects
(memory bounded by the chunk), and the one-line refusal for a file that holds no record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from tui.core.bounds import MAX_LINE_BYTES
from tui.core.records.model import Record
from tui.core.records.parse import long_line_issue, parse_block, parse_lines
from tui.core.records.schema import LineIssue


class LineCut:
    """Cuts a byte stream, fed in chunks of any size, into numbered whole lines without ever holding more than
    ``max_line`` bytes of one line (``tui.core.bounds.MAX_LINE_BYTES``): a longer line is read past and reported
    by its number and length only.

    ``feed(data)`` returns segments in file order: ``(first_line, body)`` for complete lines (``body``: the lines
    joined by newlines, none at the end, the first of them line ``first_line``), ``(line, n)`` with an int ``n`` for
    a line of ``n`` bytes longer than the cap. ``end()`` gives the unterminated last line the same way (or None).
    The same stream cut into other chunks gives the same lines (a property test checks it)."""

    __slots__ = ("lineno", "max_line", "partial", "skipped")

    def __init__(self, max_line: int = MAX_LINE_BYTES, first_line: int = 1) -> None:
        self.max_line = max_line
        self.lineno = first_line  # the number of the next line to complete
        self.partial = b""  # the start of that line (at most max_line bytes)
        self.skipped = -1  # >= 0: bytes of that line read past (longer than the cap)

    def feed(self, data: bytes) -> list[tuple[int, bytes | int]]:
        out: list[tuple[int, bytes | int]] = []
        if self.skipped >= 0:  # inside a line too long to keep: find its end
            nl = data.find(b"\n")
            if nl < 0:
                self.skipped += len(data)
                return out
            out.append((self.lineno, self.skipped + nl))
            self.lineno += 1
            self.skipped = -1
            data = data[nl + 1:]
        buf = self.partial + data if self.partial else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._hold(buf)
            return out
        body = buf[:cut]
        if len(body) > self.max_line:
            self._cut_long(body, out)
        else:
            out.append((self.lineno, body))
            self.lineno += body.count(b"\n") + 1
        self._hold(buf[cut + 1:])
        return out

    def _hold(self, rest: bytes) -> None:
        if len(rest) > self.max_line:
            self.partial = b""
            self.skipped = len(rest)
        else:
            self.partial = rest

    def _cut_long(self, body: bytes, out: list) -> None:
        """``body`` (complete lines) may hold a line longer than the cap: a few ``rfind`` calls per cap's worth of
        bytes tell (the last newline within ``max_line + 1`` bytes of a line's start ends every line before it)."""
        mx = self.max_line
        n = len(body)
        start = p = 0
        while n - p > mx:
            q = body.rfind(b"\n", p, p + mx + 1)
            if q >= 0:
                p = q + 1
                continue
            e = body.find(b"\n", p + mx + 1)  # the line starting at p is longer than the cap
            if e < 0:
                e = n
            if p > start:
                seg = body[start:p - 1]
                out.append((self.lineno, seg))
                self.lineno += seg.count(b"\n") + 1
            out.append((self.lineno, e - p))
            self.lineno += 1
            start = p = e + 1
        if start <= n:
            seg = body[start:]
            out.append((self.lineno, seg))
            self.lineno += seg.count(b"\n") + 1

    def end(self) -> tuple[int, bytes | int] | None:
        """The last line when the stream ended without its newline (its bytes, or its length when too long)."""
        if self.skipped >= 0:
            return self.lineno, self.skipped
        if self.partial:
            return self.lineno, self.partial
        return None


def iter_lines(chunks: Iterable[bytes], source: str,
               max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | int, bool]]:
    """Split byte chunks into (line_number, line, terminated) triples; ``line`` is the length (an int) of a line
    longer than ``max_line`` (read past, not held: ``parse_lines`` reports it).

    The last line of the stream is yielded with ``terminated=False`` when it has
    no newline (a file still being written, or cut short).
    """
    cut = LineCut(max_line)
    for chunk in chunks:
        for first, body in cut.feed(chunk):
            if type(body) is int:
                yield first, body, True
                continue
            for i, line in enumerate(body.split(b"\n"), first):  # type: ignore[union-attr]
                yield i, line, True
    last = cut.end()
    if last is not None:
        yield last[0], last[1], False


def parse_segments(segments: list[tuple[int, bytes | int]], source: str) -> list[Record | LineIssue]:
    """The records and issues of ``LineCut.feed``'s segments (``parse_block`` for whole lines)."""
    if len(segments) == 1 and type(segments[0][1]) is bytes:
        return parse_block(segments[0][1], segments[0][0], source)
    items: list[Record | LineIssue] = []
    for first, body in segments:
        if type(body) is int:
            items.append(long_line_issue(source, first, body, True))
        else:
            items.extend(parse_block(body, first, source))  # type: ignore[arg-type]
    return items


def iter_blocks(fh: BinaryIO, source: str, chunk_size: int = 1 << 20,
                tap: Callable[[bytes], None] | None = None) -> Iterator[list[Record | LineIssue]]:
    """Read an open binary stream to its end, ``chunk_size`` bytes at a time (memory bounded by
    the chunk and the line cap), yielding the records and issues of each chunk's complete lines
    (``parse_block``); a line longer than ``MAX_LINE_BYTES`` is a malformed line, read past; an
    unterminated last line is parsed last, as a truncated line when it is not a record.
    ``tap``: called with every chunk of raw bytes as read, in order (the digest chain's verifier)."""
    cut = LineCut()
    feed = cut.feed
    read = fh.read
    while True:
        data = read(chunk_size)
        if not data:
            break
        if tap is not None:
            tap(data)
        segments = feed(data)
        if segments:
            yield parse_segments(segments, source)
    last = cut.end()
    if last is not None:
        yield last_line_items(last, source)


def last_line_items(last: tuple[int, bytes | int], source: str) -> list[Record | LineIssue]:
    """The items of ``LineCut.end()``: the unterminated last line parsed (truncated when not a record)."""
    lineno, line = last
    if isinstance(line, int):
        return [long_line_issue(source, lineno, line, False)]
    return list(parse_lines(((lineno, line, False),), source))


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

