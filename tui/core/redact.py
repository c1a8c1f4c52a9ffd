"""Keeping credentials out of everything servewatch writes."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit


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
