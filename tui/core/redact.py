"""Keeping credentials out of everything servewatch writes: the one secret scrubber.

Everything that can carry a secret (records, result files, reports, error details, log lines)
goes through :class:`Scrubber` (or :func:`scrub` for whole documents). It removes

- every known secret value (API keys, header values, URL passwords and query values) of at
  least :data:`MIN_SECRET_LEN` characters, in ONE pass over the text, longest first; a header
  value such as ``Bearer KEY`` also registers ``KEY`` alone;
- any ``Bearer TOKEN`` (token of 4+ characters, any letter case) and any ``Basic TOKEN`` whose
  token looks like base64 (8+ characters with an upper-case letter, digit, ``+``, ``/`` or
  ``=`` after its first character, so "basic arithmetic" stays);
- key-like strings (``sk-``, ``pk-``, ``rk-``, ``hf_``, ``ghp_``, ``gho_``, ``xoxb-`` ... with
  8+ further characters including a digit).

Each becomes :data:`REDACTED`. Text with none of these is returned unchanged. Property tests:
``tests/test_redact.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, overload
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
MIN_SECRET_LEN = 4  # shorter "secrets" would redact ordinary letters everywhere
DETAIL_LIMIT = 200  # characters of a one-line error detail

_TOKEN = r"[A-Za-z0-9._~+/=-]"
_AUTH = re.compile(
    r"(?<![A-Za-z])(?P<bearer>(?i:bearer))\s+" + _TOKEN + r"{4,}"
    r"|(?<![A-Za-z])(?P<basic>(?i:basic))\s+(?=[A-Za-z0-9+/]+?[A-Z0-9+/=])[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])"
)
_KEYLIKE = re.compile(r"\b(?:sk|pk|rk|hf|ghp|gho|xox[abp])[-_](?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{8,}")


def _auth_sub(m: re.Match) -> str:
    return (m.group("bearer") or m.group("basic")) + " " + REDACTED


class Scrubber:
    """Removes secrets from text. ``scrubber(text)`` gives a one-line, capped error detail;
    ``scrubber.text(s)`` keeps the text's shape (answers, multi-line text); ``scrubber.walk(obj)``
    scrubs every string (keys too) in a JSON-like document."""

    def __init__(self, secrets: Iterable[Any] = ()) -> None:
        secs: set[str] = set()
        for s in secrets:
            if not isinstance(s, str):
                continue
            s = s.strip()
            if len(s) >= MIN_SECRET_LEN:
                secs.add(s)
            scheme, _, rest = s.partition(" ")
            if scheme.lower() in ("bearer", "basic", "token") and len(rest.strip()) >= MIN_SECRET_LEN:
                secs.add(rest.strip())
        self.secrets: list[str] = sorted(secs, key=lambda x: (-len(x), x))
        self._known = re.compile("|".join(re.escape(s) for s in self.secrets)) if self.secrets else None

    def add(self, secrets: Iterable[Any]) -> None:
        """Register more secret values."""
        merged = Scrubber(list(self.secrets) + list(secrets))
        self.secrets, self._known = merged.secrets, merged._known

    def text(self, text: Any) -> str:
        """``text`` with every secret removed; everything else (whitespace included) kept."""
        s = str(text)
        if self._known is not None:
            s = self._known.sub(REDACTED, s)
        s = _AUTH.sub(_auth_sub, s)
        return _KEYLIKE.sub(REDACTED, s)

    # the name the quality runner used for answers
    redact = text

    def __call__(self, text: Any, limit: int = DETAIL_LIMIT) -> str:
        """An error detail: whitespace collapsed to single spaces, secrets removed, capped at ``limit``."""
        s = self.text(" ".join(str(text).split()))
        return s if len(s) <= limit else s[: limit - 3] + "..."

    def walk(self, obj: Any) -> Any:
        """Every string in a JSON-like value scrubbed (dict keys too; tuples become lists)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {(self.text(k) if isinstance(k, str) else k): self.walk(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.walk(v) for v in obj]
        return obj


def scrub(obj: Any, secrets: Iterable[Any] = ()) -> Any:
    """A JSON-like document with every secret removed from every string (see :class:`Scrubber`)."""
    return Scrubber(secrets).walk(obj)


def url_secrets(url: Any) -> list[str]:
    """The parts of a URL that may be secret: user name, password, the query and each query value."""
    try:
        p = urlsplit(str(url).strip())
        out = [x for x in (p.password, p.username) if x]
    except ValueError:
        return []
    if p.query:
        out.append(p.query)
        out += [part.partition("=")[2] for part in p.query.split("&")]
    return [x for x in out if x and len(x) >= MIN_SECRET_LEN]


def header_secrets(header: Mapping) -> list[str]:
    """Values in a run header's ``headers`` field that were not redacted by the writer (never printed)."""
    out = []
    hdrs = header.get("headers")
    if isinstance(hdrs, Mapping):
        for v in hdrs.values():
            if isinstance(v, str) and v.strip() and v.strip() != "<redacted>":
                out.append(v.strip())
                parts = v.split(None, 1)
                if len(parts) == 2:
                    out.append(parts[1])
    return out


@overload
def redact_url(url: None) -> None: ...
@overload
def redact_url(url: str) -> str: ...
@overload
def redact_url(url: Any) -> str | None: ...
def redact_url(url: Any) -> str | None:
    """A URL without user:password and without its query string (which may hold a key). None stays None."""
    if url is None:
        return None
    try:
        p = urlsplit(str(url).strip())
        host = p.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        netloc = host + (f":{p.port}" if p.port else "")
        return urlunsplit((p.scheme, netloc, p.path, "", ""))
    except Exception:
        return "<unprintable url>"
