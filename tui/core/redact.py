"""Keeping credentials out of everything servewatch writes: the one secret scrubber.

Everything that can carry a secret (records, result files, reports, error details, log lines)
goes through :class:`Scrubber` (or :func:`scrub` for whole documents). It removes

- every known secret value (API keys, header values, URL passwords and query values) of at
  least :data:`MIN_SECRET_LEN` characters, in ONE pass over the text, longest first; a header
  value such as ``Bearer KEY`` also registers ``KEY`` alone; and each secret's forms a server may
  echo it in (:func:`secret_forms`): URL-encoded, base64 (also as part of a longer base64 text, such
  as a whole header line encoded) and JSON-escaped;
- any ``Bearer TOKEN`` (token of 4+ characters, any letter case) and any ``Basic TOKEN`` whose
  token looks like base64 (8+ characters with an upper-case letter, digit, ``+``, ``/`` or
  ``=`` after its first character, so "basic arithmetic" stays);
- key-like strings (``sk-``, ``pk-``, ``rk-``, ``hf_``, ``ghp_``, ``gho_``, ``xoxb-`` ... with
  8+ further characters including a digit).

Each becomes :data:`REDACTED`. Text with none of these is returned unchanged. An error line (``scrubber(text)``)
also loses every URL's user info and query values (:func:`scrub_urls`), and a text cut short loses a secret's
beginning left at its end (``cut=True``). Property tests: ``tests/unit/sources/test_redact.py``,
``tests/unit/core/test_secret_forms.py``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, overload
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

REDACTED = "<redacted>"
MIN_SECRET_LEN = 4  # shorter "secrets" would redact ordinary letters everywhere
MIN_FRAGMENT_LEN = 8  # a secret's base64 inside a longer base64 text: only fragments at least this long are matched
MIN_CUT_LEN = 6  # a text cut short: a secret's first characters at least this long at its end are removed
DETAIL_LIMIT = 200  # characters of a one-line error detail

_TOKEN = r"[A-Za-z0-9._~+/=-]"
_AUTH = re.compile(
    r"(?<![A-Za-z])(?P<bearer>(?i:bearer))\s+" + _TOKEN + r"{4,}"
    r"|(?<![A-Za-z])(?P<basic>(?i:basic))\s+(?=[A-Za-z0-9+/]+?[A-Z0-9+/=])[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])"
)
_KEYLIKE = re.compile(r"\b(?:sk|pk|rk|hf|ghp|gho|xox[abp])[-_](?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{8,}")


def _auth_sub(m: re.Match) -> str:
    return (m.group("bearer") or m.group("basic")) + " " + REDACTED


_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _b64_forms(raw: bytes) -> list[str]:
    """Base64 of ``raw``: whole (padded and not), and the part that stays the same wherever ``raw`` sits inside a
    longer encoded text (the three byte alignments), in the standard and the URL-safe alphabets."""
    out: list[str] = []
    whole = base64.b64encode(raw).decode("ascii")
    out += [whole, whole.rstrip("=")]
    n = len(raw)
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode("ascii")
        start = -(-8 * k // 6)  # the first character made of the secret's bits only
        end = 8 * (k + n) // 6  # past the last such character
        frag = enc[start:end]
        if len(frag) >= MIN_FRAGMENT_LEN:
            out.append(frag)
    return out + [x.replace("+", "-").replace("/", "_") for x in out]


def secret_forms(secret: str) -> list[str]:
    """``secret`` and the forms a server may echo it in (a key repeated in an error body, a URL, a log line): URL-
    encoded (``quote`` and ``quote_plus``, with ``/`` kept or encoded, upper- and lower-case hex), base64 (whole, and
    as part of a longer base64 text such as an encoded ``Authorization: Bearer KEY`` line, standard and URL-safe
    alphabets) and JSON-escaped (ASCII-only or not, ``\\/`` for ``/``, escaped twice as JSON inside a JSON
    string). Forms shorter than :data:`MIN_SECRET_LEN` are left out."""
    forms = {secret}
    for enc in (quote(secret, safe=""), quote(secret), quote_plus(secret, safe=""), quote_plus(secret)):
        forms.add(enc)
        forms.add(_HEX_ESCAPE.sub(lambda m: m.group(0).lower(), enc))
    forms.update(_b64_forms(secret.encode("utf-8")))
    for j in (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
        forms.add(j)
        forms.add(j.replace("/", "\\/"))
        forms.add(json.dumps(j)[1:-1])
    return [f for f in forms if len(f) >= MIN_SECRET_LEN]


class Scrubber:
    """Removes secrets from text. ``scrubber(text)`` gives a one-line, capped error detail (URL user info and
    query values removed too); ``scrubber.text(s)`` keeps the text's shape (answers, multi-line text);
    ``scrubber.walk(obj)`` scrubs every string (keys too) in a JSON-like document. Every secret is matched in
    each of its :func:`secret_forms`."""

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
        forms = {f for s in self.secrets for f in secret_forms(s)}
        self.forms: list[str] = sorted(forms, key=lambda x: (-len(x), x))
        self._known = re.compile("|".join(re.escape(s) for s in self.forms)) if self.forms else None

    def add(self, secrets: Iterable[Any]) -> None:
        """Register more secret values."""
        merged = Scrubber(list(self.secrets) + list(secrets))
        self.secrets, self.forms, self._known = merged.secrets, merged.forms, merged._known

    def cut_tail(self, text: str) -> str:
        """``text`` (cut short by its writer) without a secret's first characters left at its end (at least
        :data:`MIN_CUT_LEN` of them, in any of its forms)."""
        best = 0
        for f in self.forms:
            for n in range(min(len(f) - 1, len(text)), MIN_CUT_LEN - 1, -1):
                if n <= best:
                    break
                if text.endswith(f[:n]):
                    best = n
                    break
        return text[: len(text) - best] + REDACTED if best else text

    def text(self, text: Any) -> str:
        """``text`` with every secret removed; everything else (whitespace included) kept."""
        s = str(text)
        if self._known is not None:
            s = self._known.sub(REDACTED, s)
        s = _AUTH.sub(_auth_sub, s)
        return _KEYLIKE.sub(REDACTED, s)

    # the name the quality runner used for answers
    redact = text

    def __call__(self, text: Any, limit: int = DETAIL_LIMIT, *, cut: bool = False) -> str:
        """An error detail: whitespace collapsed to single spaces, secrets removed, every URL's user info and query
        values removed (:func:`scrub_urls`), capped at ``limit``. ``cut``: the text was cut short before (a body
        read up to a limit): a secret's beginning left at its end goes too (:meth:`cut_tail`)."""
        s = " ".join(str(text).split())
        if cut:
            s = self.cut_tail(s)
        s = scrub_urls(self.text(s))
        return s if len(s) <= limit else s[: limit - 3] + "..."

    def line(self, text: Any) -> str:
        """A log or error line (several lines kept, nothing capped): secrets and URL user info / query values
        removed."""
        return scrub_urls(self.text(text))

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


_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@'\"<>]*@)?([^\s?#'\"<>]*)(\?[^\s#'\"<>]*)?")
_QUERY_VALUE = re.compile(r"=[^&;]*")


def _url_sub(m: re.Match) -> str:
    scheme, userinfo, rest, query = m.group(1), m.group(2), m.group(3), m.group(4)
    out = scheme + (REDACTED + "@" if userinfo else "") + rest
    if query:
        q = query[1:]
        out += "?" + (_QUERY_VALUE.sub("=" + REDACTED, q) if "=" in q else (REDACTED if q else ""))
    return out


def scrub_urls(text: Any) -> str:
    """``text`` with every URL's user info (``user:password@``) and query values (``?key=VALUE``; a query without
    ``=`` whole) replaced by :data:`REDACTED`: what an error or log line keeps of a URL it names."""
    s = str(text)
    return _URL.sub(_url_sub, s) if "://" in s else s


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


def run_secrets(header: Mapping) -> list[str]:
    """What a record file's run header may carry that its writer did not redact (another tool's file, or an edited
    one): the ``headers`` values and the user, password and query of the target's URL and endpoint. Every output
    made from a file (report, export, the runs catalogue) scrubs these (``scrub``)."""
    target = header.get("target")
    if not isinstance(target, Mapping):
        return header_secrets(header)
    return header_secrets(header) + url_secrets(target.get("url")) + url_secrets(target.get("endpoint"))
