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

Scrubbed of (:func:`secrets_in`, one :class:`~tui.core.redact.Scrubber`, every form it knows): header values and
the values of every variable a credential flag names (``--api-key-env``, ``--header-env``,
``--url-credentials-env``, ``--sign-key-env`` ...), the lines of ``--header-file``, every URL's user name, password
and query values (and its Basic token), environment values whose names look like credentials; and every URL's user
info and query values whatever they are (:func:`tui.core.redact.scrub_urls`).
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
from tui.core.redact import Scrubber, url_secrets

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # .../tui
_SECRET_FLAGS = ("--header", "--api-key", "-H")
_SECRET_ENV_FLAGS = ("--api-key-env", "--baseline-api-key-env", "--url-credentials-env",
                     "--baseline-url-credentials-env", "--sign-key-env", "--verify-key-env")
_HEADER_ENV_FLAGS = ("--header-env",)
_HEADER_FILE_FLAGS = ("--header-file",)
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH")


def _credential_parts(value: str) -> list[str]:
    """A credential and what it is sent as: ``user:password`` also gives the user, the password and the Basic
    token."""
    out = [value]
    if ":" in value:
        import base64

        user, _, password = value.partition(":")
        out += [user, password, base64.b64encode(value.encode("utf-8")).decode("ascii")]
    return out


def _url_parts(value: str) -> list[str]:
    """A URL's secrets (user name, password, query and its values) and the Basic token its user info becomes."""
    out = url_secrets(value)
    try:
        from urllib.parse import unquote, urlsplit

        p = urlsplit(value.strip())
        if p.username or p.password:
            out += _credential_parts(f"{unquote(p.username or '')}:{unquote(p.password or '')}")[3:]
    except ValueError:
        pass
    return out


def _header_file_values(path: str) -> list[str]:
    """The values of a ``--header-file`` (best effort: the file may be gone or unreadable by now; a FIFO or any other
    file that is not a regular one is never read: this runs on the way out of an error)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        text = os.read(fd, 1 << 16).decode("utf-8", "replace")
    except OSError:
        return []
    finally:
        os.close(fd)
    return [line.partition(":")[2].strip() for line in text.splitlines() if ":" in line]


def secrets_in(argv: Sequence[str], env_words: bool = True) -> list[str]:
    """Values that must not appear in a crash line or log: header values given on the command line, the values
    of the environment variables named by credential flags (``--api-key-env``, ``--url-credentials-env``,
    ``--header-env NAME=VAR``, ``--sign-key-env`` ...), the values in a ``--header-file``, every URL's user name,
    password and query values, and every environment value whose name looks like a credential (``*KEY*``,
    ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*AUTH*``; not with ``env_words=False``: a usage line may name
    ordinary words such a variable holds)."""
    out: list[str] = []
    args = list(argv)
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        flagged = name in _SECRET_FLAGS or name in _SECRET_ENV_FLAGS or name in _HEADER_ENV_FLAGS \
            or name in _HEADER_FILE_FLAGS
        v = (value if eq else (args[i + 1] if i + 1 < len(args) else "")) if flagged else ""
        if name in _SECRET_ENV_FLAGS:
            out += _credential_parts(os.environ.get(v, "")) if v else []
        elif name in _HEADER_ENV_FLAGS:  # NAME=VAR
            var = v.partition("=")[2].strip()
            out.append(os.environ.get(var, "") if var else "")
        elif name in _HEADER_FILE_FLAGS:
            out += _header_file_values(v) if v else []
        elif name in _SECRET_FLAGS:
            out.append(v.split(":", 1)[1].strip() if ":" in v else v)  # 'NAME: VALUE' -> VALUE
        if "://" in a:  # a URL, alone or as --url=URL: its user info and query values
            out += _url_parts(a.partition("=")[2] if a.startswith("--") and eq else a)
    if env_words:
        out.extend(v for k, v in os.environ.items() if v and any(w in k.upper() for w in _SECRET_WORDS))
    return [v for v in out if v]


def scrub_line(text: str, argv: Sequence[str] = ()) -> str:
    """An error line with every secret of :func:`secrets_in` and every URL's user info and query values removed."""
    return Scrubber(secrets_in(argv, env_words=False)).line(text)


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
    what = scrub(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)  # URLs' user info, queries too
    head = f"servewatch: internal error (a bug in servewatch, not a verdict, not your input) at {failing_place(exc)}: {what}"
    tb = scrub.line("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    if debug:
        sys.stderr.write(tb)
        print(f"{head}; traceback above", file=sys.stderr)
        return ExitCode.INTERNAL
    try:
        folder = log_folder()
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        argv_line = scrub.line(" ".join(["servewatch", *argv]))
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"{argv_line}\n\n{tb}")
        where = f"traceback in {path} (--debug prints it)"
    except OSError as err:
        where = f"traceback not saved ({err.strerror or err}); run again with --debug to see it"
    print(f"{head}; {where}", file=sys.stderr)
    return ExitCode.INTERNAL
