"""Pass rates: per category and overall, with descriptive Wilson 95% intervals, and the failed requests by class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tui.core.stats import wilson


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
        c[0] += bool(r.get("passed"))
        c[1] += 1
        if r.get("error"):
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    passed = sum(1 for r in rows if r.get("passed"))
    return {
        "categories": {k: rate(v[0], v[1]) for k, v in sorted(cats.items())},
        "overall": rate(passed, len(rows)),
        "errors_by_class": dict(sorted(errors.items())),
        "failed_requests": sum(errors.values()),
    }
