"""The console's export (ctrl+s): an SVG screenshot beside a JSON document of every metric shown.

Pure helpers: the file names and the JSON document; the console screen takes the screenshot and the
application hands it the atomic text writer (``tui.sources.outfiles``, which the UI may not import).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from tui.core.budget import BudgetResult, budget_to_dict
from tui.core.snapshot import Snapshot

EXPORT_SCHEMA = "servewatch.export/1"


def json_safe(obj: Any) -> Any:
    """Snapshot dicts may hold inf (the failures-as-inf reading): write them as strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else "-inf" if obj < 0 else "nan"
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def free_base(directory: Path) -> str:
    """``servewatch-<stamp>`` (``-2``, ``-3``... when taken): neither its .svg nor its .json exists yet."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = f"servewatch-{stamp}"
    n = 1
    while (directory / f"{base}.svg").exists() or (directory / f"{base}.json").exists():
        n += 1
        base = f"servewatch-{stamp}-{n}"
    return base


def export_json(snap: Snapshot, *, source: str, mode: str, theme: str, budget: BudgetResult | None,
                quality: str | None) -> str:
    """The JSON document beside the screenshot (no NaN or inf: they are written as strings)."""
    doc = {
        "schema": EXPORT_SCHEMA,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": source,
        "mode": mode,
        "synthetic": bool(snap.synthetic),
        "theme": theme,
        "budget": None if budget is None else budget_to_dict(budget),
        "quality": quality or "not run",
        "snapshot": snap.to_dict(),
    }
    return json.dumps(json_safe(doc), indent=2, allow_nan=False, default=str) + "\n"
