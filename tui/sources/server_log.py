"""The KV allocation a vLLM server states in its own startup log (``--server-log FILE``).

vLLM logs, once its KV cache is allocated::

    CPU KV cache size: 46,592 tokens, Maximum concurrency for 2,048 tokens per request: 22.75x
    GPU KV cache size: 46,592 tokens            (a GPU build; the concurrency on its own line)
    ... max_num_batched_tokens=2048 ...        (the scheduler's chunk, when it says it)

``parse_server_log(text)`` returns ``{"max_concurrency": 22.75, "concurrency_tokens": 2048,
"kv_cache_size_tokens": 46592, "max_num_batched_tokens": 2048 or None, "lines": N, "source": ...}``; a figure
the log does not state stays None (never guessed). A log of several starts: the last start's figures.
``read_server_log(path)`` reads a file (OSError when it cannot be read: the CLI reports it as bad usage).
No Textual.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tui.sources.infiles import open_input

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUM = r"(\d[\d,]*)"
_CONCURRENCY = re.compile(r"Maximum concurrency for " + _NUM + r" tokens per request:\s*([0-9]+(?:\.[0-9]+)?)x")
_KV_SIZE = re.compile(r"KV cache size:\s*" + _NUM + r" tokens")
_MNBT = re.compile(r"max_num_batched_tokens\s*[=:]\s*" + _NUM)

#: the most of a log read (its start-up lines come first; a long-running server's log can be large)
MAX_LOG_BYTES = 64 << 20


def _int(text: str) -> int | None:
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return None


def parse_server_log(text: str, source: str = "server log") -> dict[str, Any]:
    """The allocation figures of a vLLM log (the last occurrence of each)."""
    out: dict[str, Any] = {"max_concurrency": None, "concurrency_tokens": None, "kv_cache_size_tokens": None,
                           "max_num_batched_tokens": None, "lines": 0, "source": source}
    if not isinstance(text, str):
        return out
    found = 0
    for raw in text.splitlines():
        if "tokens" not in raw and "max_num_batched_tokens" not in raw:
            continue
        line = _ANSI.sub("", raw)
        hit = False
        m = _CONCURRENCY.search(line)
        if m:
            out["concurrency_tokens"] = _int(m.group(1))
            out["max_concurrency"] = float(m.group(2))
            hit = True
        m = _KV_SIZE.search(line)
        if m:
            out["kv_cache_size_tokens"] = _int(m.group(1))
            hit = True
        m = _MNBT.search(line)
        if m:
            out["max_num_batched_tokens"] = _int(m.group(1))
            hit = True
        found += hit
    out["lines"] = found
    return out


def read_server_log(path: str | Path) -> dict[str, Any]:
    """``parse_server_log`` of a file (at most MAX_LOG_BYTES). Raises OSError when it cannot be read."""
    with open_input(path, "server log") as fh:  # a regular file: a FIFO, a device or a directory is refused
        data = fh.read(MAX_LOG_BYTES)
    return parse_server_log(data.decode("utf-8", errors="replace"), source=str(path))


__all__ = ["parse_server_log", "read_server_log", "MAX_LOG_BYTES"]
