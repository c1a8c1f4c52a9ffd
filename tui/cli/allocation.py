"""The KV-allocation flags read from the command line: ``--kv-cache-gib``, ``--max-num-batched-tokens`` and
``--server-log FILE`` (bad values: ``UsageError``, one line, exit 2). Standard library and tui.core at import;
the log is read through ``tui.sources.server_log`` when asked for.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from tui.cli.options import UsageError
from tui.core.budget.inputs import MAX_GIB
from tui.core.budget.vocab import GIB


def _number(flag: str, raw: Any) -> float:
    text = str(raw).strip().replace(",", "").replace("_", "")
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {raw!r}")
    return value


def kv_space_from_args(args: argparse.Namespace) -> int | None:
    """``--kv-cache-gib G`` in bytes (floor of G x 2**30), or None when not given. Raises UsageError."""
    raw = getattr(args, "kv_cache_gib", None)
    if raw is None:
        return None
    gib = _number("--kv-cache-gib", raw)
    if not 0 < gib <= MAX_GIB:
        raise UsageError(f"--kv-cache-gib must be > 0 and <= {MAX_GIB:g} GiB, got {raw!r}")
    space = math.floor(gib * GIB)
    if space < 1:
        raise UsageError(f"--kv-cache-gib {raw!r} is less than one byte")
    return space


def max_num_batched_tokens_from_args(args: argparse.Namespace) -> int | None:
    """``--max-num-batched-tokens N`` (a whole number >= 1), or None. Raises UsageError."""
    raw = getattr(args, "max_num_batched_tokens", None)
    if raw is None:
        return None
    value = _number("--max-num-batched-tokens", raw)
    if not value.is_integer() or value < 1:
        raise UsageError(f"--max-num-batched-tokens must be a whole number >= 1, got {raw!r}")
    return int(value)


def server_log_from_args(args: argparse.Namespace) -> dict | None:
    """``--server-log FILE`` parsed (``tui.sources.server_log``), with ``--max-num-batched-tokens`` winning over
    the log's; None when neither is given. An unreadable file: UsageError."""
    path = getattr(args, "server_log", None)
    mnbt = max_num_batched_tokens_from_args(args)
    if path is None:
        if mnbt is None:
            return None
        return {"max_concurrency": None, "concurrency_tokens": None, "kv_cache_size_tokens": None,
                "max_num_batched_tokens": mnbt, "lines": 0, "source": "--max-num-batched-tokens"}
    from tui.sources.server_log import read_server_log

    try:
        log = read_server_log(path)
    except OSError as exc:
        raise UsageError(f"--server-log: cannot read {path}: {exc.strerror or exc}") from None
    if mnbt is not None:
        log["max_num_batched_tokens"] = mnbt
    return log


__all__ = ["kv_space_from_args", "max_num_batched_tokens_from_args", "server_log_from_args"]
