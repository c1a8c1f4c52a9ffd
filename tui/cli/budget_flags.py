"""The budget flags as BudgetInputs fields (one value each): shared by `budget`, its screening table
(``tui.cli.budget_grid``) and every command that shows a budget beside a run (through ``tui.cli.budget``).
Standard library and ``tui.core`` only."""

from __future__ import annotations

import argparse
import math
from typing import Any

from tui.core.budget.inputs import MAX_GIB
from tui.core.budget.vocab import GIB

#: the start of the note a budget carries when --params came without the KV geometry (budget_from_args)
GEOMETRY_NOTE_PREFIX = "KV geometry not given"

# flag attribute -> BudgetInputs field, and how to read it
_NUMERIC_FLAGS = {
    "params": ("params", "count"),
    "gpu_gib": ("gpu_gib", "float"),
    "margin_gib": ("margin_gib", "float"),
    "layers": ("layers", "int"),
    "kv_heads": ("kv_heads", "int"),
    "head_dim": ("head_dim", "int"),
    "max_seq": ("max_seq", "int"),
    "tp": ("tp", "int"),
    "block_size": ("block_size", "int"),
}
_TEXT_FLAGS = {"weights": "weights", "kv_dtype": "kv_dtype"}

_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def _parse_value(flag: str, raw: Any, kind: str) -> float | int:
    name = "--" + flag.replace("_", "-")
    if isinstance(raw, bool):
        raise ValueError(f"{name} must be a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        value: float = raw
    else:
        text = str(raw).strip().replace(",", "").replace("_", "")
        scale = 1.0
        if kind == "count" and text and text[-1].lower() in _SUFFIXES:
            scale = _SUFFIXES[text[-1].lower()]
            text = text[:-1]
        try:
            value = float(text) * scale
        except ValueError:
            raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {raw!r}")
    if kind == "int":
        if not float(value).is_integer():
            raise ValueError(f"{name} must be a whole number, got {raw!r}")
        return int(value)
    if kind == "count" and float(value).is_integer():
        return int(value)
    return value


#: the flags `servewatch budget` takes as comma lists (the screening table); elsewhere they take one value
LIST_ATTRS = ("weights", "kv_dtype", "max_seq", "tp", "gpu_gib")


def _one_value(flag: str, raw: Any) -> None:
    if isinstance(raw, str) and "," in raw:
        name = "--" + flag.replace("_", "-")
        raise ValueError(f"{name} takes one value here, got {raw!r}: comma lists are `servewatch budget`'s (the "
                         "screening table)")


def given_fields(args: argparse.Namespace) -> dict[str, Any]:
    """BudgetInputs fields the user gave on the command line."""
    out: dict[str, Any] = {}
    for flag, (field, kind) in _NUMERIC_FLAGS.items():
        raw = getattr(args, flag, None)
        if raw is not None:
            if flag in LIST_ATTRS:
                _one_value(flag, raw)
            out[field] = _parse_value(flag, raw, kind)
    for flag, field in _TEXT_FLAGS.items():
        raw = getattr(args, flag, None)
        if raw is not None:
            _one_value(flag, raw)
            out[field] = str(raw)
    raw = getattr(args, "kv_cache_gib", None)  # --kv-cache-gib: the KV cache space itself (BudgetInputs.kv_space_bytes)
    if raw is not None:
        gib = _parse_value("kv_cache_gib", raw, "float")
        if not 0 < gib <= MAX_GIB:
            raise ValueError(f"--kv-cache-gib must be > 0 and <= {MAX_GIB:g}, got {raw!r}")
        out["kv_space_bytes"] = max(1, round(gib * GIB))
    return out
