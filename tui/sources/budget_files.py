"""The memory budget's files: a saved budget JSON (``servewatch budget --out FILE``, ``--budget FILE``) and a
Hugging Face ``config.json`` (``--config FILE``), read and parsed here and handed to ``tui.core.budget`` as data.

Every problem is a :class:`~tui.core.budget.vocab.BudgetError` naming the file: unreadable, not JSON, not an
object, or (a saved budget) results that do not recompute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.core.bounds import MAX_JSON_DEPTH, MAX_SMALL_FILE_BYTES, json_too_deep
from tui.core.budget.results import BudgetResult
from tui.core.budget.serialize import budget_from_dict
from tui.core.budget.vocab import BudgetError
from tui.sources.infiles import read_input


def _read_json(path: str | Path, what: str) -> Any:
    """A small JSON file (a regular file of at most ``MAX_SMALL_FILE_BYTES``, nested no deeper than
    ``MAX_JSON_DEPTH``), or BudgetError naming it."""
    try:
        text = read_input(path, MAX_SMALL_FILE_BYTES, what).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetError(f"cannot read {what} {str(path)!r}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BudgetError(f"{what} {str(path)!r} is not valid JSON: {str(exc)[:120]}") from None
    if json_too_deep(data):
        raise BudgetError(f"{what} {str(path)!r} is nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def load_budget(path: str | Path) -> BudgetResult:
    """Read a saved budget JSON file, recompute it and verify it (BudgetError when it disagrees)."""
    data = _read_json(path, "budget file")
    try:
        return budget_from_dict(data)
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from None


def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face config.json (BudgetError when unreadable)."""
    data = _read_json(path, "model config")
    if not isinstance(data, dict):
        raise BudgetError(f"model config {str(path)!r} must be a JSON object")
    return data
