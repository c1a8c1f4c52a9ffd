"""The memory budget's files: a saved budget JSON (``servewatch budget --out FILE``, ``--budget FILE``) and a
Hugging Face ``config.json`` (``--config FILE``), read and parsed here and handed to ``tui.core.budget`` as data.

Every problem is a :class:`~tui.core.budget.vocab.BudgetError` naming the file: unreadable, not JSON, not an
object, or (a saved budget) results that do not recompute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.core.budget.results import BudgetResult
from tui.core.budget.serialize import budget_from_dict
from tui.core.budget.vocab import BudgetError


def load_budget(path: str | Path) -> BudgetResult:
    """Read a saved budget JSON file, recompute it and verify it (BudgetError when it disagrees)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetError(f"cannot read budget file {str(path)!r}: {exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BudgetError(f"budget file {str(path)!r} is not valid JSON: {exc}") from None
    try:
        return budget_from_dict(data)
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from None


def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face config.json (BudgetError when unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetError(f"cannot read model config {str(path)!r}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise BudgetError(f"model config {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BudgetError(f"model config {str(path)!r} must be a JSON object")
    return data
