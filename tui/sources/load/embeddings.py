"""``--api embeddings``: the request body of OpenAI's ``/v1/embeddings`` and the reading of its answer (pure).

An embeddings answer streams no tokens: the whole answer is one JSON document, ``{"data": [{"embedding": [...]}],
"usage": {"prompt_tokens": N}}``. So a request record of an embeddings run has no first-token time (TTFT, TPOT and
ITL are not measured: not judgeable, and said so), its ``t_end`` is when the whole answer had arrived (E2E, the SLO
of an embeddings run), and it carries ``embedding_dim``, the length of the vector returned: what makes a request
without a first token complete (``tui.core.slos``). Its ``input_tokens`` is the server's ``usage.prompt_tokens``.

How an answer fails (error classes of docs/record-format.md): not JSON, or JSON without ``data[0].embedding`` as a
list of numbers (or a base64 string), is ``malformed_stream``; an empty vector or an empty ``data`` list is
``empty_response``; an ``error`` object is ``stream_error``.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: the most of an embeddings answer read (a 4,096-dimension vector is about 90 KB of JSON)
EMBEDDING_BODY_LIMIT = 64 << 20
ENDPOINT = "/embeddings"


def request_body(model: str | None, text: str) -> dict[str, Any]:
    """The body of one embeddings request: one input text, floats back."""
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["input"] = text
    body["encoding_format"] = "float"
    return body


def _count(v: Any) -> int | None:
    return v if type(v) is int and v >= 0 else None


def read_answer(raw: bytes) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """(record fields, None) of a whole embeddings answer, or (None, (error class, detail)). The fields:
    ``embedding_dim`` and, when the server counted them, ``usage_input_tokens`` (its ``usage.prompt_tokens``)."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None, ("malformed_stream", f"the embeddings answer is not JSON: {raw[:60]!r}")
    if type(obj) is not dict:
        return None, ("malformed_stream", "the embeddings answer is not a JSON object")
    err = obj.get("error")
    if err is not None:
        if isinstance(err, dict):
            err = err.get("message") or err
        return None, ("stream_error", f"error in the answer: {str(err)[:200]}")
    data = obj.get("data")
    if not isinstance(data, list):
        return None, ("malformed_stream", "the embeddings answer has no data list")
    if not data:
        return None, ("empty_response", "the embeddings answer's data list is empty")
    first = data[0]
    vec = first.get("embedding") if isinstance(first, dict) else None
    if isinstance(vec, str):  # encoding_format base64: 4 bytes a float
        dim = (len(vec) * 3 // 4) // 4
    elif isinstance(vec, list):
        if not all(type(x) in (int, float) and math.isfinite(x) for x in vec):
            return None, ("malformed_stream", "the embedding holds something that is not a finite number")
        dim = len(vec)
    else:
        return None, ("malformed_stream", "the embeddings answer's data[0] has no embedding")
    if dim < 1:
        return None, ("empty_response", "the embedding returned is empty")
    fields: dict[str, Any] = {"embedding_dim": dim}
    usage = obj.get("usage")
    if isinstance(usage, dict):
        n = _count(usage.get("prompt_tokens"))
        if n is not None:
            fields["usage_input_tokens"] = n
    return fields, None
