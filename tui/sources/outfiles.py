"""Writing output files safely: never onto an input, never half a file (the one helper every writer uses).

- :func:`own_input_problem` (outputs, inputs): the one line when an output path is one of the command's inputs,
  by path or as the same file through a symlink or a hard link (``os.stat`` ``st_dev``/``st_ino``); the
  command line turns it into exit 2 before anything is read or written.
- :func:`write_text_atomic` / :func:`atomic_text`: the content goes to a temporary file in the target's own
  folder, is flushed and synced, then renamed over the target (``os.replace``, atomic on one file system), so a
  crash or a full disk leaves the old file or none, never half a report.  A target that is a symlink is written
  through it (the file it points to is replaced), as a plain ``open(path, "w")`` did.

Record files are the exception (``tui.sources.recorder``): appended and flushed per line, so a crash keeps
every line written before it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO

__all__ = ["atomic_text", "output_file_problem", "own_input_problem", "same_file", "write_text_atomic"]


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True when ``a`` and ``b`` name one file: the same inode when both exist, else the same resolved path."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def own_input_problem(outputs: Iterable[tuple[str, str | os.PathLike | None]],
                      inputs: Iterable[tuple[str, str | os.PathLike | None]]) -> str | None:
    """The one line when an output is one of the inputs (or two outputs are one file), else None.

    ``outputs`` / ``inputs``: ``(what, path)`` pairs, e.g. ``("--out", "run.jsonl")``; None paths and ``-``
    (standard input/output) are skipped."""
    outs = [(w, os.fspath(p)) for w, p in outputs if p is not None and os.fspath(p) not in ("", "-")]
    ins = [(w, os.fspath(p)) for w, p in inputs if p is not None and os.fspath(p) not in ("", "-")]
    for ow, op in outs:
        for iw, ip in ins:
            if same_file(op, ip):
                how = "" if os.path.abspath(op) == os.path.abspath(ip) else " (the same file through a link)"
                return (f"{ow} {op} is the input {iw} {ip}{how}: refusing to write onto an input; "
                        "choose another output file")
    for i, (ow, op) in enumerate(outs):
        for ow2, op2 in outs[i + 1:]:
            if same_file(op, op2):
                return f"{ow} {op} and {ow2} {op2} are one file: give each output its own file"
    return None


def output_file_problem(path: str | os.PathLike) -> str | None:
    """Why an output file cannot be written there (a folder; its folder missing, not a folder or not writable),
    else None: checked before a long read, so the command fails at once (exit 2) instead of at the end."""
    target = os.path.realpath(path)
    if os.path.isdir(target):
        return "is a folder: give a file name"
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is not writable"
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_text(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """``with atomic_text(p) as fh: fh.write(...)``: the file appears whole when the block ends without an
    exception (renamed over ``p``); on any exception the temporary file is removed and ``p`` is untouched.
    Raises OSError like ``open`` (folder missing, not writable, disk full)."""
    target = os.path.realpath(path)  # through a symlink: replace the file it points to, keep the link
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    try:
        try:
            mode = os.stat(target).st_mode & 0o7777  # an existing file keeps its permissions
        except OSError:
            mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` whole or not at all (see :func:`atomic_text`)."""
    with atomic_text(path, encoding) as fh:
        fh.write(text)
