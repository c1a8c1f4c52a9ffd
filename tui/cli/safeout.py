"""The command line's one output guard: every character a command writes to standard output or standard error goes
through ``tui.core.textsafe.term`` (newlines kept), so no control character or escape sequence from a server, a record
file or any other outside string reaches the terminal, whichever ``print`` forgot to make it safe.

``main()`` (tui/cli/__init__.py) runs every command inside :func:`guarded_output`. Writers still make each outside
value safe where they put it in a line (``term(value)``: a CR/LF inside a value shown as ``\\x0d\\x0a`` instead of
starting a forged line, which this guard cannot tell from the writer's own newlines); the guard is what makes a
forgotten value harmless. JSON output (``--json``) is ``json.dumps`` with ``ensure_ascii``: printable ASCII, which
passes unchanged. tests/architecture/test_safe_output.py fails when a module writes around the guard (``os.write`` to
1 or 2, ``sys.__stdout__``, ``sys.stdout.buffer``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tui.core.textsafe import term

__all__ = ["SafeStream", "guarded_output"]


class SafeStream:
    """A text stream that writes ``term(s, keep_newlines=True)`` of everything to the stream it wraps (every other
    attribute, ``fileno``, ``isatty``, ``flush`` ..., is the wrapped stream's)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        self._stream.write(term(s, keep_newlines=True))
        return len(s)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    @property
    def wrapped(self) -> TextIO:
        return self._stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def guarded_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` wrapped in :class:`SafeStream` for the block (restored after it, unless the
    block replaced them itself)."""
    out, err = sys.stdout, sys.stderr
    safe_out = out if isinstance(out, SafeStream) or out is None else SafeStream(out)
    safe_err = err if isinstance(err, SafeStream) or err is None else SafeStream(err)
    sys.stdout, sys.stderr = safe_out, safe_err
    try:
        yield
    finally:
        if sys.stdout is safe_out:
            sys.stdout = out
        if sys.stderr is safe_err:
            sys.stderr = err
