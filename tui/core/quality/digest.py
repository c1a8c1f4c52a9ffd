"""The quality result file's ``integrity`` field: a digest of its canonical content and, with a key, an HMAC
(standard library only). docs/acceptance.md, "The result's integrity".

A quality result is one JSON document. Its canonical content is the document without its top-level ``integrity``
field, written as compact JSON with sorted keys (``json.dumps(doc, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``, UTF-8). The field::

    "integrity": {"format": "servewatch.quality-digest/1", "digest": "sha256", "value": HEX,
                  "mac": "hmac-sha256", "key_id": ID, "mac_value": HEX}   # the last three only with a key

``value`` is the SHA-256 of the canonical bytes; ``mac_value`` an HMAC-SHA256 with the key of
``"servewatch.quality-digest/1\\n{value}"``, and ``key_id`` the key's public name, both as the record files' digest
chain makes them (:func:`tui.core.chain.key_id`: one key has one id for records and quality files; the message
differs, so a record file's MAC is never a quality file's).

What it proves, in the threat model's words (as for record files): the digest shows that the file is the one a
servewatch wrote, unless someone edited it and recomputed the digest (anyone can: it takes no secret); the MAC
shows that a holder of the key wrote it. Every reader verifies: a digest that does not match is a broken file
(never PASS, never acceptance-grade); a file without the field (an older servewatch, or stripped) is unverified.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.core.chain import key_id

FORMAT = "servewatch.quality-digest/1"
DIGEST = "sha256"
MAC = "hmac-sha256"
FIELD = "integrity"

__all__ = ["FIELD", "FORMAT", "QualityIntegrity", "canonical_bytes", "seal", "verify"]


def canonical_bytes(doc: Mapping[str, Any]) -> bytes:
    """The bytes the digest covers: ``doc`` without its ``integrity`` field, compact, keys sorted, UTF-8."""
    body = {k: v for k, v in doc.items() if k != FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _mac(key: bytes, digest_hex: str) -> str:
    return hmac.new(key, f"{FORMAT}\n{digest_hex}".encode("ascii"), hashlib.sha256).hexdigest()


def seal(doc: Mapping[str, Any], key: bytes | None = None) -> dict:
    """``doc`` (a JSON-ready quality result) with its ``integrity`` field (last); with ``key`` also the MAC. The
    document is taken through a JSON round trip first, so the digest is of what a reader will parse."""
    body = json.loads(json.dumps({k: v for k, v in doc.items() if k != FIELD}, ensure_ascii=False))
    value = hashlib.sha256(canonical_bytes(body)).hexdigest()
    field: dict[str, Any] = {"format": FORMAT, "digest": DIGEST, "value": value}
    if key is not None:
        field.update({"mac": MAC, "key_id": key_id(key), "mac_value": _mac(key, value)})
    body[FIELD] = field
    return body


@dataclass(frozen=True, slots=True)
class QualityIntegrity:
    """The verification of one quality file. ``state``: ``intact`` (the digest matches), ``unverified`` (no
    ``integrity`` field), ``broken`` (a digest that does not match, or a malformed field). ``signature``:
    ``verified`` (the MAC matches the key given), ``failed`` (a key was given and the file is not signed with it),
    ``not checked`` (signed, no key given), None (not signed, no key given). ``problems``: each forbids PASS and
    acceptance-grade."""

    state: str
    summary: str
    problems: tuple[str, ...] = ()
    signature: str | None = None
    key_id: str | None = None

    def to_dict(self) -> dict:
        return {"state": self.state, "summary": self.summary, "problems": list(self.problems),
                "signature": self.signature, "key_id": self.key_id}


def _hex(v: Any, n: int = 64) -> bool:
    return isinstance(v, str) and len(v) == n and all(c in "0123456789abcdef" for c in v)


def verify(doc: Any, key: bytes | None = None, name: str = "the quality file") -> QualityIntegrity:
    """Verify ``doc`` (a parsed quality result) against its ``integrity`` field, and its MAC with ``key``."""
    if not isinstance(doc, Mapping):  # a bare case list (a hand-made baseline) has nowhere to carry a digest
        bare = (f"{name} is not signed (a bare case list) and a key was given",) if key is not None else ()
        return QualityIntegrity("unverified", f"{name}: a bare case list carries no digest: its content is unverified",
                                bare, "failed" if key is not None else None, None)
    field = doc.get(FIELD)
    want = None if key is None else key_id(key)
    if field is None:
        problems: tuple[str, ...] = ()
        sig = None
        if key is not None:
            sig, problems = "failed", (f"{name} is not signed (no integrity field) and a key was given",)
        return QualityIntegrity("unverified", f"{name}: no digest (written by an older servewatch, or the field was "
                                "removed): its content is unverified", problems, sig, None)
    if (not isinstance(field, Mapping) or field.get("format") != FORMAT or field.get("digest") != DIGEST
            or not _hex(field.get("value"))):
        return QualityIntegrity("broken", f"{name}: its integrity field is malformed",
                                (f"{name}: the integrity field is malformed (format {FORMAT}, sha256 expected)",),
                                "failed" if key is not None else None)
    value = hashlib.sha256(canonical_bytes(doc)).hexdigest()
    if not hmac.compare_digest(value, str(field["value"])):
        return QualityIntegrity("broken", f"{name}: BROKEN: its content does not match its digest (edited after it "
                                "was written)",
                                (f"{name} was edited after it was written: its content does not match its digest",),
                                "failed" if key is not None else None, _s(field.get("key_id")))
    kid = _s(field.get("key_id"))
    signed = field.get("mac") == MAC and _hex(field.get("mac_value")) and kid is not None
    if key is None:
        if signed:
            return QualityIntegrity("intact", f"{name}: digest verified; signed (key id {kid}), signature not checked "
                                    "(no key given)", (), "not checked", kid)
        return QualityIntegrity("intact", f"{name}: digest verified (not signed: anyone can recompute a digest)",
                                (), None, None)
    if not signed:
        return QualityIntegrity("intact", f"{name}: digest verified, NOT signed (a key was given)",
                                (f"{name} is not signed and a key was given",), "failed", None)
    if kid != want:
        return QualityIntegrity("intact", f"{name}: digest verified, signed with another key (key id {kid}, the "
                                f"key given is {want})",
                                (f"{name} is signed with another key (key id {kid}, the key given is {want})",),
                                "failed", kid)
    if not hmac.compare_digest(_mac(key, value), str(field["mac_value"])):
        return QualityIntegrity("intact", f"{name}: digest verified, SIGNATURE FAILED (key id {kid})",
                                (f"{name}'s signature does not verify with the key given (edited and re-digested "
                                 "without the key)",), "failed", kid)
    return QualityIntegrity("intact", f"{name}: digest and signature verified (key id {kid})", (), "verified", kid)


def _s(v: Any) -> str | None:
    return v[:64] if isinstance(v, str) and v else None
