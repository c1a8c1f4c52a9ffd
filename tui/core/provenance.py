"""Where a record file's data came from: the run header's ``source`` block, in words.

The block (documented in ``docs/record-format.md``)::

    "source": {"kind": "run" | "trace" | "import" | "watch", "tool": "servewatch", "version": "0.1.0",
               "file": null | "path it was made from", "sha256": null | "hex of that file",
               "derived": ["fields computed rather than read", ...]}

Pure functions over the header dict; every view (report, accept, the console header) uses them, so a
file says the same thing about its origin wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SOURCE_KINDS = ("run", "trace", "import", "watch")

_KIND_WORDS = {
    "run": "measured by a servewatch load run",
    "trace": "replayed from a trace",
    "import": "imported from another tool's output",
    "watch": "watched from a live server's traffic",
}

UNKNOWN = "provenance unknown (no run header)"


def check_source_block(block: Any) -> str | None:
    """None when ``block`` is a valid source block, else what is wrong (the parser reports it)."""
    if not isinstance(block, Mapping):
        return "field 'source' of a run header must be an object"
    kind = block.get("kind")
    if kind not in SOURCE_KINDS:
        return f"field 'source.kind' must be one of {', '.join(SOURCE_KINDS)}, got {kind!r:.40}"
    for key in ("tool", "version", "file", "sha256"):
        v = block.get(key)
        if v is not None and not isinstance(v, str):
            return f"field 'source.{key}' must be a string or null"
    derived = block.get("derived")
    if derived is not None and not (isinstance(derived, list) and all(isinstance(x, str) for x in derived)):
        return "field 'source.derived' must be a list of field names"
    return None


def source_block(header: Mapping | None) -> dict | None:
    """The header's source block (None: no header, or a header written before the block existed)."""
    if not header:
        return None
    b = header.get("source")
    return dict(b) if isinstance(b, Mapping) and check_source_block(b) is None else None


def describe(header: Mapping | None) -> str:
    """One line: what produced the records, from what file, which fields were derived."""
    if not header:
        return UNKNOWN
    syn = "SYNTHETIC, " if header.get("synthetic") else ""
    why = header.get("synthetic_reason")
    if syn and isinstance(why, str) and why.strip():  # why, in the source's own words (a synthetic trace)
        syn = f"SYNTHETIC ({why.strip()[:300]}), "
    b = source_block(header)
    if b is None:
        tool = header.get("tool") or "unknown tool"
        ver = header.get("tool_version")
        who = f"{tool} {ver}" if ver else str(tool)
        return f"{syn}written by {who} (the header has no source block: kind not stated)"
    who = b.get("tool") or "unknown tool"
    if b.get("version"):
        who += f" {b['version']}"
    text = f"{syn}{_KIND_WORDS[b['kind']]} ({who})"
    if b.get("file"):
        text += f" from {b['file']}"
        if b.get("sha256"):
            text += f" (sha256 {str(b['sha256'])[:12]})"
    derived = b.get("derived") or []
    if derived:
        text += "; derived, not read: " + ", ".join(derived)
    return text


def short(header: Mapping | None) -> str:
    """A few words for the console header: "run · servewatch 0.1.0", "provenance unknown"."""
    if not header:
        return "provenance unknown"
    b = source_block(header)
    if b is None:
        tool = header.get("tool") or "unknown tool"
        ver = header.get("tool_version")
        return f"{tool} {ver}".strip() if ver else str(tool)
    who = b.get("tool") or "unknown tool"
    if b.get("version"):
        who += f" {b['version']}"
    return f"{b['kind']} · {who}"


def as_dict(header: Mapping | None) -> dict:
    """The JSON form shown in reports: kind (None when not stated), the block, and the sentence."""
    b = source_block(header)
    return {
        "known": bool(header),
        "kind": None if b is None else b["kind"],
        "source": b,
        "text": describe(header),
    }
