"""Writing records: a request record as a dict, one JSONL line, the run header and its ``source`` block."""

from __future__ import annotations

import json
from typing import Any

from tui import __version__
from tui.core.provenance import SOURCE_KINDS
from tui.core.records.request import RequestRecord
from tui.core.records.schema import SCHEMA, SCHEMA_VERSION


def request_to_dict(r: RequestRecord) -> dict:
    d = {
        "type": "request",
        "id": r.id,
        "t_intended": r.t_intended,
        "t_sent": r.t_sent,
        "t_first_token": r.t_first_token,
        "t_end": r.t_end,
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "finish_reason": r.finish_reason,
        "http_status": r.http_status,
        "complete": r.complete,
        "error": r.error,
        "error_detail": r.error_detail,
        "phase": r.phase,
        "level": r.level,
        "round": r.round,
    }
    if r.token_offsets is not None:
        d["token_offsets"] = r.token_offsets
    if r.retried:
        d["retried"] = r.retried
    for key in TOKEN_FIELDS:  # issue 21's optional fields: written only when known (older files stay as they were)
        v = getattr(r, key)
        if v is not None:
            d[key] = v
    if r.session is not None:  # issue 23: a session workload's fields
        for key in SESSION_FIELDS:
            v = getattr(r, key)
            if v is not None:
                d[key] = v
    return d


#: a session workload's optional fields (issue 23), in the order written
SESSION_FIELDS = ("session", "turn", "context_tokens")


#: the optional per-token fields (docs/record-format.md), in the order written
TOKEN_FIELDS = ("t_first_answer", "t_first_reasoning", "t_last_token", "output_chunks", "reasoning_chunks",
                "usage_output_tokens", "usage_input_tokens", "usage_reasoning_tokens", "itl_max_ms", "itl_p50_ms",
                "itl_p95_ms", "input_tokens_asked", "output_tokens_asked", "cached_tokens", "cached_tokens_source",
                "embedding_dim")


def dumps(d: dict) -> str:
    """One JSONL line (with trailing newline)."""
    return json.dumps(d, separators=(",", ":"), allow_nan=False) + "\n"


def source_block(kind: str = "run", *, file: str | None = None, sha256: str | None = None,
                 derived: list[str] | tuple[str, ...] = (), tool: str = "servewatch",
                 version: str | None = None) -> dict:
    """The run header's ``source`` block (see docs/record-format.md): what produced the records."""
    if kind not in SOURCE_KINDS:
        raise ValueError(f"source kind must be one of {SOURCE_KINDS}, got {kind!r}")
    return {"kind": kind, "tool": tool, "version": version or __version__, "file": file, "sha256": sha256,
            "derived": list(derived)}


def run_header(
    *,
    target: dict | None = None,
    load: dict | None = None,
    environment: dict | None = None,
    synthetic: bool,
    started_at: float | None = None,
    tool_version: str | None = None,
    **extra: Any,
) -> dict:
    """Build a ``run`` header dict. ``synthetic`` is mandatory on purpose."""
    d = {
        "type": "run",
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool": "servewatch",
        "tool_version": tool_version or __version__,
        "started_at": started_at,
        "target": target or {},
        "load": load or {},
        "environment": environment or {},
        "synthetic": bool(synthetic),
    }
    d.update(extra)
    return d
