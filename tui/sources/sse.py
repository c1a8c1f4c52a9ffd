"""Incremental Server-Sent Events framing: bytes in, events out. Standard library only.

Follows the WHATWG ``text/event-stream`` rules that matter for LLM servers:

- lines end with CRLF, LF or a lone CR (a CR at the end of one network read followed by
  an LF at the start of the next counts as one line break);
- an event ends at a blank line; several ``data:`` lines of one event are joined with ``\\n``;
- lines starting with ``:`` are comments (``: ping`` keep-alives) and are counted, not returned;
- one optional space after the colon is removed; a line without a colon is a field with an
  empty value; ``id`` and ``retry`` are ignored; a UTF-8 BOM at the very start is dropped;
- events may be split across reads at any byte, and one read may hold several events.

The parser does no JSON work: it hands back the event's ``data`` string so the caller decides
what ``[DONE]`` or an ``{"error": ...}`` object means. Per event it allocates the decoded
data string and one small tuple; lines are split once per network read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"
_NO_EVENTS: tuple = ()


class SSEEvent(NamedTuple):
    event: str  # the ``event:`` field, "message" when absent
    data: str  # the ``data:`` lines joined with "\n"


class SSEParser:
    """Feed raw bytes with :meth:`feed`; call :meth:`finish` at end of stream."""

    __slots__ = ("_buf", "_data", "_event", "_skip_lf", "_at_start", "comments")

    def __init__(self) -> None:
        self._buf = b""  # bytes after the last line break seen
        self._data: list[bytes] = []  # data lines of the event being built
        self._event: bytes | None = None
        self._skip_lf = False  # the previous read ended with CR: drop one leading LF
        self._at_start = True  # BOM check still pending
        self.comments = 0  # comment lines seen (": ping" and the like)

    def feed(self, chunk: bytes) -> list[SSEEvent] | tuple:
        """Consume one network read; return the events it completed (possibly none)."""
        if not chunk:
            return _NO_EVENTS
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 10:  # b"\n"
                chunk = chunk[1:]
                if not chunk:
                    return _NO_EVENTS
        buf = self._buf + chunk if self._buf else chunk
        if self._at_start:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf  # could still be the start of a BOM
                return _NO_EVENTS
            self._at_start = False
            if buf.startswith(_BOM):
                buf = buf[3:]
        if b"\r" in buf:
            if buf[-1] == 13:  # b"\r": maybe half of a CRLF split across reads
                self._skip_lf = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in buf:
            self._buf = buf
            return _NO_EVENTS
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        out: list[SSEEvent] | None = None
        for line in lines:
            ev = self._line(line)
            if ev is not None:
                if out is None:
                    out = [ev]
                else:
                    out.append(ev)
        return _NO_EVENTS if out is None else out

    def finish(self) -> list[SSEEvent] | tuple:
        """End of stream: complete a pending line and event.

        Lenient on purpose: a server that ends with ``data: [DONE]`` and no blank line still
        delivers that event (the strict spec would drop it).
        """
        out: list[SSEEvent] = []
        if self._buf:
            line, self._buf = self._buf, b""
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        if self._data:
            ev = self._line(b"")
            if ev is not None:
                out.append(ev)
        return out if out else _NO_EVENTS

    def _line(self, line: bytes) -> SSEEvent | None:
        if not line:  # blank line: dispatch
            data = self._data
            if not data:
                self._event = None
                return None
            payload = data[0] if len(data) == 1 else b"\n".join(data)
            name = self._event
            self._data = []
            self._event = None
            return SSEEvent(
                "message" if name is None else name.decode("utf-8", "replace"),
                payload.decode("utf-8", "replace"),
            )
        if line[0] == 58:  # b":" comment
            self.comments += 1
            return None
        i = line.find(b":")
        if i < 0:
            field, value = line, b""
        else:
            field = line[:i]
            value = line[i + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = value
        return None


def parse_all(chunks: Iterable[bytes]) -> list[SSEEvent]:
    """Convenience for tests and small inputs: parse an iterable of byte chunks completely."""
    p = SSEParser()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    out.extend(p.finish())
    return out
