"""The memory budget's files: a saved budget JSON (``servewatch budget --out FILE``, ``--budget FILE``) and a
Hugging Face ``config.json`` (``--config FILE``), read and parsed here and handed to ``tui.core.budget`` as data.

Every problem is a :class:`~tui.core.budget.vocab.BudgetError` naming the file: unreadable, not JSON, not an
object, or (a saved budget) results that do not recompute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.core.bounds import MAX_SMALL_FILE_BYTES
from tui.core.budget.results import BudgetResult
from tui.core.budget.serialize import budget_from_dict
from tui.core.budget.vocab import BudgetError
from tui.sources.infiles import read_json_input


def _read_json(path: str | Path, what: str) -> Any:
    """A small JSON file (a regular file of at most ``MAX_SMALL_FILE_BYTES``, nested no deeper than
    ``MAX_JSON_DEPTH``), or BudgetError naming it."""
    try:
        return read_json_input(path, MAX_SMALL_FILE_BYTES, what, repr(str(path)))
    except ValueError as exc:
        raise BudgetError(str(exc)) from None


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
