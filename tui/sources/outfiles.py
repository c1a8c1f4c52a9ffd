"""Writing output files safely: never onto an input, never half a file, never two runs mixed, never through a link
(the one helper every writer uses).

- :func:`own_input_problem` (outputs, inputs): the one line when an output path is one of the command's inputs,
  by path or as the same file through a symlink or a hard link (``os.stat`` ``st_dev``/``st_ino``); the
  command line turns it into exit 2 before anything is read or written.
- :func:`write_text_atomic` / :func:`atomic_text`: the content goes to a temporary file in the target's own
  folder (created with ``O_EXCL``: never through a link), is flushed and synced, then renamed over the target
  (``os.replace``, atomic on one file system), so a crash or a full disk leaves the old file or none, never half a
  report.
- :func:`write_set`: the files of one run's output set (accept's acceptance.md, .json, .html; compare's JSON and
  page) all written to temporary files first, then renamed into place together; a file of the previous set that
  this run does not write (``--no-html``) is removed, so the folder never holds two runs' files side by side. A
  failure while the temporary files are written (a full disk) leaves the previous set untouched; a failure while
  they are renamed removes every file of the set, the previous run's included, and says so (never a mix).
- Symbolic links: an output file that is a symlink (or anything but a regular file: a FIFO, a device, a folder) is
  refused, one line, exit 2: a link planted in an output folder cannot redirect a report onto another file. The
  output's folder itself is the user's choice and is followed when it is a link (``--out reports/`` where
  ``reports`` links to a shared disk); only the files servewatch creates inside it are never links.

Record files are the exception (``tui.sources.recorder``): appended and flushed per line, so a crash keeps
every line written before it; they are opened with ``O_NOFOLLOW`` (a symlinked record file is refused too).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

__all__ = ["OutputRefused", "SetIncomplete", "atomic_text", "output_file_problem", "output_target_problem",
           "own_input_problem", "same_file", "write_set", "write_text_atomic"]


class OutputRefused(OSError):
    """An output path servewatch will not write (a symlink, not a regular file): ``strerror`` is the one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EEXIST, reason)

    def __str__(self) -> str:
        return str(self.strerror)


class SetIncomplete(OSError):
    """An output set that could not be put in place whole: every file of it was removed (``strerror`` says so)."""

    def __str__(self) -> str:
        return str(self.strerror)


def output_target_problem(path: str | os.PathLike) -> str | None:
    """Why an output file cannot be (re)placed at ``path`` (a symlink, a folder, a FIFO or a device), else None.
    Looks at the path itself (``lstat``): a link is never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("is a symbolic link: refusing to write through it (servewatch never follows a link to an output "
                "file); remove the link, or give the file it points to")
    if stat.S_ISDIR(st.st_mode):
        return "is a folder: give a file name"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, a device or a socket): refusing to replace it"
    return None


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
    """Why an output file cannot be written there (a symlink, a folder, not a regular file; its folder missing,
    not a folder or not writable), else None: checked before a long read, so the command fails at once (exit 2)
    instead of at the end."""
    problem = output_target_problem(path)
    if problem:
        return problem
    target = os.path.abspath(path)
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


def _new_temp(target: str) -> tuple[int, str]:
    """A temporary file beside ``target`` (``mkstemp``: ``O_CREAT | O_EXCL``, never through a link), with the
    permissions the target has (a new file: 0666 less the umask)."""
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    try:
        try:
            st = os.lstat(target)
            mode = st.st_mode & 0o7777 if stat.S_ISREG(st.st_mode) else 0o666 & ~_umask()
        except OSError:
            mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd, tmp


@contextlib.contextmanager
def atomic_text(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """``with atomic_text(p) as fh: fh.write(...)``: the file appears whole when the block ends without an
    exception (renamed over ``p``); on any exception the temporary file is removed and ``p`` is untouched.
    Raises :class:`OutputRefused` when ``p`` is a symlink or not a regular file, OSError like ``open`` (folder
    missing, not writable, disk full)."""
    target = os.path.abspath(path)  # the folder is followed; the file itself is never a link (refused)
    problem = output_target_problem(target)
    if problem:
        raise OutputRefused(f"{os.fspath(path)} {problem}")
    fd, tmp = _new_temp(target)
    try:
        with os.fdopen(fd, "w", encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)  # replaces the name itself: a link planted meanwhile is replaced, never followed
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` whole or not at all (see :func:`atomic_text`)."""
    with atomic_text(path, encoding) as fh:
        fh.write(text)


def write_set(files: Sequence[tuple[str | os.PathLike, str | None]], encoding: str = "utf-8") -> list[str]:
    """Put one run's output set in place together: ``files`` is ``(path, text)`` per file, ``text`` None for a file
    of the set this run does not write (removed if a previous run left it). Every text is written and synced to a
    temporary file beside its target first; only then are they renamed into place, and the left-out files removed.
    Returns the paths removed that way.

    Raises :class:`OutputRefused` (a target is a symlink or not a regular file: nothing written), OSError from
    the first phase (a full disk: the temporary files removed, the previous set untouched), or
    :class:`SetIncomplete` when a rename fails (every file of the set removed, the previous run's included: the
    folder holds no set rather than a mix of two)."""
    targets = [(os.path.abspath(p), os.fspath(p), text) for p, text in files]
    for target, shown, _text in targets:
        problem = output_target_problem(target)
        if problem:
            raise OutputRefused(f"{shown} {problem}")
    temps: list[tuple[str, str]] = []
    try:
        for target, _shown, text in targets:
            if text is None:
                continue
            fd, tmp = _new_temp(target)
            temps.append((tmp, target))
            with os.fdopen(fd, "w", encoding=encoding) as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
    except BaseException:
        for tmp, _target in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    removed: list[str] = []
    try:
        for tmp, target in temps:
            os.replace(tmp, target)
        for target, shown, text in targets:
            if text is None and os.path.lexists(target):
                os.unlink(target)
                removed.append(shown)
    except OSError as exc:
        for tmp, _target in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for target, _shown, _text in targets:
            with contextlib.suppress(OSError):
                os.unlink(target)
        raise SetIncomplete(exc.errno or errno.EIO,
                            f"{exc.strerror or exc} while the files were put in place; every file of the set was "
                            "removed, the previous run's included (never a mix of two runs)") from exc
    return removed
