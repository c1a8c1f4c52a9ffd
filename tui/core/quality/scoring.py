"""Pass rates: per category and overall, with descriptive Wilson 95% intervals, and the failed requests by class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tui.core.stats import wilson


def row_passed(row: Mapping) -> bool:
    """A row that passed: ``passed`` true, no failed check and no request error (a row that says ``passed`` beside a
    ``failed_check`` or an ``error`` contradicts itself: it is not a pass, and ``tui.core.quality.filecheck``
    names it)."""
    return row.get("passed") is True and row.get("failed_check") is None and not row.get("error")


def rate(passed: int, n: int) -> dict:
    lo, hi = wilson(passed, n)
    return {"n": n, "passed": passed, "pass_rate": (passed / n) if n else None, "wilson_95": [lo, hi]}


def summarize(rows: Iterable[Mapping]) -> dict:
    """Per-category and overall pass rates (Wilson 95% intervals, descriptive) and error counts."""
    rows = list(rows)
    cats: dict[str, list[int]] = {}
    errors: dict[str, int] = {}
    for r in rows:
        c = cats.setdefault(str(r.get("category", "general")), [0, 0])
        c[0] += row_passed(r)
        c[1] += 1
        if r.get("error"):
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    passed = sum(1 for r in rows if row_passed(r))
    return {
        "categories": {k: rate(v[0], v[1]) for k, v in sorted(cats.items())},
        "overall": rate(passed, len(rows)),
        "errors_by_class": dict(sorted(errors.items())),
        "failed_requests": sum(errors.values()),
    }
