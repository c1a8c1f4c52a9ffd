"""A saved quality result read back (`quality --baseline FILE`, `accept --quality FILE`), and what the writers of
the quality and acceptance documents share: the warning line, the generation time, the httpx version. Shared by
`quality` and `accept` (no command module imports another)."""

from __future__ import annotations

import datetime as _dt
import sys
from typing import Any

from tui.core.textsafe import term


def warn(msg: str) -> None:
    """A warning line on stderr (the command goes on); bad usage raises UsageError instead."""
    print(f"servewatch: {term(msg)}", file=sys.stderr)


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def httpx_version() -> str | None:
    try:
        import httpx

        return httpx.__version__
    except Exception:
        return None


def read_json(path: str, what: str) -> Any:
    """A quality result (``--quality``, ``--baseline``): a regular file of at most ``MAX_QUALITY_FILE_BYTES``,
    JSON nested no deeper than ``MAX_JSON_DEPTH``; ValueError (one line) otherwise."""
    from tui.core.bounds import MAX_QUALITY_FILE_BYTES
    from tui.sources.infiles import read_json_input

    return read_json_input(path, MAX_QUALITY_FILE_BYTES, what, str(path), excerpt=80)


def read_quality_file(path: str, key: bytes | None, what: str = "quality result") -> tuple[Any, Any]:
    """(document, its verification: ``tui.core.quality.digest.QualityIntegrity``) of a saved quality result.
    ValueError when it cannot be read or is not JSON (the caller makes it bad usage)."""
    from tui.core.quality.digest import verify

    doc = read_json(path, what)
    try:
        return doc, verify(doc, key, name=path)
    except (RecursionError, ValueError, TypeError) as exc:
        raise ValueError(f"{what} {path} cannot be verified: {type(exc).__name__}") from None
