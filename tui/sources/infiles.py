"""Opening input files so that no path can make a command hang or read without end (the one helper every reader
uses; the limits themselves are ``tui.core.bounds``).

- Regular files only: a named pipe (FIFO), a device, a socket or a directory is refused with one line before a byte
  is read (``input_refusal`` from ``os.stat``, then :func:`open_input` opens with ``O_NONBLOCK`` and checks the open
  file again, so a path swapped for a FIFO in between cannot block the ``open`` either). Standard input is ``-``,
  read by the commands that take it, never through here.
- :func:`read_input` reads a whole small file (a config, a budget, a quality result, a whole-document import) up to
  a size limit: a larger file is refused (one line) before it is read, and a file that grows while read is cut at
  the limit and refused too.

Both raise :class:`InputRefused`, an ``OSError`` whose ``strerror`` is the one line (callers that print
``exc.strerror`` after "cannot read PATH: " say it as is).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from typing import Any, BinaryIO

from tui.core.bounds import size_text

__all__ = ["InputRefused", "input_refusal", "kind_of", "open_input", "read_input"]


class InputRefused(OSError):
    """A path that is not read (not a regular file, too large): ``strerror`` is the reason, one line."""

    def __init__(self, reason: str, path: str | os.PathLike | None = None) -> None:
        super().__init__(errno.EINVAL, reason)
        self.path = None if path is None else os.fspath(path)

    def __str__(self) -> str:
        return str(self.strerror)


def kind_of(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal_text(kind: str, what: str) -> str:
    return f"{kind}, not a {what}: servewatch reads regular files only"


def input_refusal(path: str | os.PathLike, what: str = "file") -> str | None:
    """Why ``path`` is not read, from ``os.stat`` (None: a regular file, or a path that does not exist: the
    ``open`` then says so). Never opens it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    kind = kind_of(st.st_mode)
    return None if kind is None else _refusal_text(kind, what)


def open_input(path: str | os.PathLike, what: str = "file") -> BinaryIO:
    """Open a regular file for reading (binary). Raises :class:`InputRefused` for anything else (without blocking
    on a FIFO or a device), OSError as ``open`` does (missing, unreadable)."""
    why = input_refusal(path, what)
    if why is not None:
        raise InputRefused(why, path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:  # swapped between the stat and the open
            raise InputRefused(_refusal_text(kind, what), path)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def too_large(path: str | os.PathLike, size: int, limit: int, what: str) -> InputRefused:
    return InputRefused(f"larger than {size_text(limit)} ({size:,} bytes), the most a {what} may be "
                        "(README.md, \"Limits on input\")", path)


def read_input(path: str | os.PathLike, limit: int, what: str = "file") -> bytes:
    """The whole of a regular file of at most ``limit`` bytes. Raises :class:`InputRefused` (not a regular file,
    larger than ``limit``), OSError (missing, unreadable)."""
    with open_input(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise too_large(path, size, limit, what)
        data = fh.read(limit + 1)
    if len(data) > limit:  # it grew while read
        raise too_large(path, len(data), limit, what)
    return data


def read_json_input(path: str | os.PathLike, limit: int, what: str, shown: str, excerpt: int = 120) -> Any:
    """A small JSON file: a regular file of at most ``limit`` bytes (``read_input``), UTF-8, nested no deeper than
    ``MAX_JSON_DEPTH``. Raises ValueError with one line naming it (``what`` and the path as ``shown``) and, for JSON
    that does not decode, the first ``excerpt`` characters of the decoder's message."""
    from tui.core.bounds import MAX_JSON_DEPTH, json_too_deep

    try:
        text = read_input(path, limit, what).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {what} {shown}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} {shown} is not valid JSON: {str(exc)[:excerpt]}") from None
    if json_too_deep(doc):
        raise ValueError(f"{what} {shown} is nested deeper than {MAX_JSON_DEPTH} levels")
    return doc
