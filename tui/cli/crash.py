"""An unexpected internal error, said as one: exit 70 (``ExitCode.INTERNAL``), never 1 (FAIL) or 2 (bad input).

``report_internal_error(exc, debug)`` prints ONE line on stderr::

    servewatch: internal error (a bug in servewatch, not a verdict, not your input) at
    tui/core/monitor.py:_fmt_minutes:121: OverflowError: cannot convert float infinity to integer;
    traceback in /home/u/.cache/servewatch/crash-20261201-204512-4242.log

(one line in reality) naming the failing place (the innermost frame inside servewatch's own package, else the
innermost frame), the exception class and message scrubbed of secrets, and where the traceback is: a log file in
a ``servewatch`` folder under the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``), else under the
temporary folder; never in the current folder. With ``--debug`` the (scrubbed) traceback is printed on stderr
instead and no file is written.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from tui.core.exitcodes import ExitCode
from tui.core.redact import Scrubber

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # .../tui
_SECRET_FLAGS = ("--header", "--api-key", "-H")
_SECRET_ENV_FLAGS = ("--api-key-env", "--baseline-api-key-env")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH")


def secrets_in(argv: Sequence[str]) -> list[str]:
    """Values that must not appear in a crash line or log: header values given on the command line, the values
    of the environment variables named by ``--api-key-env`` flags, and every environment value whose name
    looks like a credential (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*AUTH*``)."""
    out: list[str] = []
    args = list(argv)
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in _SECRET_FLAGS or name in _SECRET_ENV_FLAGS:
            v = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            if name in _SECRET_ENV_FLAGS:
                v = os.environ.get(v, "")
            elif ":" in v:  # 'NAME: VALUE' -> VALUE (the scrubber also registers a Bearer token alone)
                v = v.split(":", 1)[1].strip()
            if v:
                out.append(v)
    out.extend(v for k, v in os.environ.items() if v and any(w in k.upper() for w in _SECRET_WORDS))
    return out


def failing_place(exc: BaseException) -> str:
    """``path:function:line`` of the innermost frame inside servewatch's package (else the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown place"
    chosen = frames[-1]
    for fr in reversed(frames):
        try:
            Path(fr.filename).resolve().relative_to(_PACKAGE_ROOT)
        except (ValueError, OSError):
            continue
        chosen = fr
        break
    try:
        shown = Path(chosen.filename).resolve().relative_to(_PACKAGE_ROOT.parent).as_posix()
    except (ValueError, OSError):
        shown = chosen.filename
    return f"{shown}:{chosen.name}:{chosen.lineno}"


def log_folder() -> Path:
    """``servewatch`` under the user's cache folder, else under the temporary folder (created)."""
    candidates = []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        candidates.append(Path(xdg) / "servewatch")
    home = os.path.expanduser("~")
    if home and home != "~" and os.path.isabs(home):
        candidates.append(Path(home) / ".cache" / "servewatch")
    candidates.append(Path(tempfile.gettempdir()) / "servewatch")
    cwd = Path.cwd().resolve() if os.path.isdir(".") else None
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if cwd is not None and folder.resolve() == cwd:
                continue
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise OSError("no writable folder for the crash log")


def report_internal_error(exc: BaseException, debug: bool = False, argv: Sequence[str] = ()) -> int:
    """Print the one line (and the traceback with ``debug``, else write it to a log file); return 70."""
    scrub = Scrubber(secrets_in(argv))
    what = scrub(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    head = f"servewatch: internal error (a bug in servewatch, not a verdict, not your input) at {failing_place(exc)}: {what}"
    tb = scrub.text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    if debug:
        sys.stderr.write(tb)
        print(f"{head}; traceback above", file=sys.stderr)
        return ExitCode.INTERNAL
    try:
        folder = log_folder()
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        argv_line = scrub.text(" ".join(["servewatch", *argv]))
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"{argv_line}\n\n{tb}")
        where = f"traceback in {path} (--debug prints it)"
    except OSError as err:
        where = f"traceback not saved ({err.strerror or err}); run again with --debug to see it"
    print(f"{head}; {where}", file=sys.stderr)
    return ExitCode.INTERNAL
