"""How many paired cases a quality decision needs: the smallest number of usable pairs with which the regression
verdict (:func:`tui.core.quality.regression.compare`'s own decision, run on constructed pairs, not a formula
beside it) says PASS when the candidate is as good as the baseline, at a given margin and share of discordant pairs
(pairs the two sides answer differently, split evenly between regressed and improved).

The table in ``quality/README.md`` and ``docs/acceptance.md`` is written from :func:`cases_needed_table` by
``tools/update_quality_docs.py`` and checked by ``tests/docs/test_quality_docs.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tui.core.quality.regression import _judge
from tui.core.quality.vocab import DEFAULT_ALPHA, DEFAULT_MIN_CASES, PASS

MARGINS = (0.02, 0.05, 0.10)
DISCORDANCE = (0.0, 0.05, 0.10, 0.20)
LIMIT = 20_000


def _passes(n: int, discordance: float, margin: float, alpha: float, min_cases: int) -> bool:
    k = round(discordance * n / 2)
    if 2 * k > n:
        return False
    both: Mapping = {"passed": True}
    pairs: list[tuple[Mapping, Mapping]] = ([(both, both)] * (n - 2 * k) + [({"passed": False}, both)] * k
             + [(both, {"passed": False})] * k)
    return bool(_judge(pairs, margin=margin, alpha=alpha, min_cases=min_cases)["state"] == PASS)


def cases_needed(margin: float, alpha: float = DEFAULT_ALPHA, discordance: float = 0.0,
                 min_cases: int = DEFAULT_MIN_CASES) -> int | None:
    """The fewest usable pairs with which PASS is reached (and stays reached for the next 20 sizes: rounding of the
    discordant count makes single sizes flicker); None when not reached below :data:`LIMIT`."""
    lo = 1
    while lo <= LIMIT and not _passes(lo, discordance, margin, alpha, min_cases):
        lo = lo + 1 if lo < 200 else int(lo * 1.02) + 1
    if lo > LIMIT:
        return None
    n = max(1, lo - (1 if lo <= 200 else int(lo * 0.02) + 1))
    while n <= lo:
        if all(_passes(m, discordance, margin, alpha, min_cases) for m in range(n, n + 20)):
            return n
        n += 1
    return lo


def cases_needed_table(margins: Sequence[float] = MARGINS, discordance: Sequence[float] = DISCORDANCE,
                       alpha: float = DEFAULT_ALPHA, min_cases: int = DEFAULT_MIN_CASES) -> str:
    """The markdown table: one row per margin, one column per discordant share."""
    head = "| margin | " + " | ".join(f"{d:.0%} discordant" for d in discordance) + " |"
    rule = "|---|" + "---|" * len(discordance)
    rows = []
    for m in margins:
        cells = []
        for d in discordance:
            n = cases_needed(m, alpha, d, min_cases)
            cells.append(f"more than {LIMIT}" if n is None else str(n))
        rows.append(f"| {m * 100:g} points | " + " | ".join(cells) + " |")
    note = (f"Usable paired cases for a PASS when the candidate is as good as the baseline (alpha {alpha:g}, "
            f"at least {min_cases}); computed by `tui.core.quality.sizing` from the verdict's own rule.")
    return "\n".join([note, "", head, rule, *rows])
