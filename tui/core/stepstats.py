"""The percentiles of a step end record, one algorithm for the load generator that writes them
(``tui.sources.load.steps``) and the readers that recompute them from the request records
(``tui.core.completeness``): exact nearest-rank for up to :data:`STEP_EXACT_VALUES` values, then a log-bucketed
histogram whose percentiles are within :data:`PCT_REL_ERR` (1%) relative error. Standard library only.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence

STEP_EXACT_VALUES = 50_000  # values per step kept exactly (8 bytes each) before the histogram takes over
PCT_REL_ERR = 0.01  # the histogram's bound on the relative error of a percentile
_TINY = 1e-9  # |x| below this (seconds: 1 ns) counts as 0


class StepQuantiles:
    """Nearest-rank percentiles of one step's values in bounded memory.

    Exact (a compact array of doubles) for the first ``cap`` values. At the ``cap``-th value the
    array is folded into a histogram with log-spaced buckets, ratio ``gamma = (1 + e) / (1 - e)``
    (``e`` = ``rel_err``), one set for positive and one for negative values, plus counts of zeros
    (``|x| < 1 ns``) and of infinities. Bucket counts are exact, so the bucket holding the value of
    the requested rank is known exactly; the bucket's relative midpoint ``2 gamma^i / (1 + gamma)``
    is within ``e`` relative error of every value in it. Memory: one counter per bucket in use,
    about ``ln(max/min) / ln(gamma)`` of them (~1,000 from 1 us to 1,000 s at 1%), whatever the count.
    """

    __slots__ = ("cap", "rel_err", "n", "_exact", "_pos", "_neg", "_zeros", "_pinf", "_ninf", "_inv_log", "_g")

    def __init__(self, cap: int | None = None, rel_err: float = PCT_REL_ERR) -> None:
        cap = STEP_EXACT_VALUES if cap is None else cap
        if cap < 0 or not 0.0 < rel_err < 1.0:
            raise ValueError("cap must be >= 0 and rel_err in (0, 1)")
        self.cap = cap
        self.rel_err = rel_err
        self.n = 0
        self._exact: array | None = array("d")
        self._pos: dict[int, int] = {}
        self._neg: dict[int, int] = {}
        self._zeros = self._pinf = self._ninf = 0
        self._g = math.log((1.0 + rel_err) / (1.0 - rel_err))
        self._inv_log = 1.0 / self._g

    @property
    def approximate(self) -> bool:
        """True once the values are held by the histogram (percentiles within ``rel_err``)."""
        return self._exact is None

    def __len__(self) -> int:
        return self.n

    def add(self, x: float) -> None:
        self.n += 1
        ex = self._exact
        if ex is not None:
            if len(ex) < self.cap:
                ex.append(x)
                return
            self._exact = None
            for v in ex:
                self._bucket(v)
        self._bucket(x)

    def extend(self, values: Iterable[float]) -> None:
        """``add`` each value in order (one call for many: the Monitor's values past its exact cap)."""
        if self._exact is not None and self.cap > 0:
            for v in values:
                self.add(v)
            return
        if self._exact is not None:  # cap 0: every value goes to the histogram (what add does)
            ex, self._exact = self._exact, None
            for v in ex:
                self._bucket(v)
        n = 0
        pos, neg = self._pos, self._neg
        inv = self._inv_log
        log, ceil, inf = math.log, math.ceil, math.inf
        for x in values:  # _bucket, inlined
            n += 1
            if x > _TINY:
                if x == inf:
                    self._pinf += 1
                else:
                    i = ceil(log(x) * inv)
                    pos[i] = pos.get(i, 0) + 1
            elif x < -_TINY:
                if x == -inf:
                    self._ninf += 1
                else:
                    i = ceil(log(-x) * inv)
                    neg[i] = neg.get(i, 0) + 1
            elif x != x:  # NaN: kept with the worst values, never dropped
                self._pinf += 1
            else:
                self._zeros += 1
        self.n += n

    def _bucket(self, x: float) -> None:
        if x != x or x == math.inf:  # NaN: not a number of seconds; kept with the worst values, never dropped
            self._pinf += 1
        elif x == -math.inf:
            self._ninf += 1
        elif x > _TINY:
            i = math.ceil(math.log(x) * self._inv_log)
            self._pos[i] = self._pos.get(i, 0) + 1
        elif x < -_TINY:
            i = math.ceil(math.log(-x) * self._inv_log)
            self._neg[i] = self._neg.get(i, 0) + 1
        else:
            self._zeros += 1

    def _mid(self, i: int) -> float:
        g = self._g
        return 2.0 * math.exp(i * g) / (1.0 + math.exp(g))

    def quantiles(self, qs: Sequence[float]) -> list[float | None]:
        """Nearest-rank percentiles (rank ``ceil(q n)``, as :func:`pct`) for each ``q``; None when empty."""
        n = self.n
        if n == 0:
            return [None for _ in qs]
        ex = self._exact
        if ex is not None:
            srt = sorted(ex)
            return [pct(srt, q) for q in qs]
        return [self._ranked(min(max(1, math.ceil(q * n)), n)) for q in qs]

    def _ranked(self, k: int) -> float:
        seen = self._ninf
        if k <= seen:
            return -math.inf
        neg = self._neg
        for i in sorted(neg, reverse=True):  # the most negative first
            seen += neg[i]
            if k <= seen:
                return -self._mid(i)
        seen += self._zeros
        if k <= seen:
            return 0.0
        pos = self._pos
        for i in sorted(pos):
            seen += pos[i]
            if k <= seen:
                return self._mid(i)
        return math.inf

    def merge(self, other: StepQuantiles) -> None:
        """Add every value of ``other`` (same ``rel_err``): its exact values one by one, its buckets as counts."""
        if other._exact is not None:
            for v in other._exact:
                self.add(v)
            return
        if self._exact is not None:  # fold this one into buckets first (what add does at the cap)
            ex, self._exact = self._exact, None
            for v in ex:
                self._bucket(v)
        self.n += other.n
        for mine, theirs in ((self._pos, other._pos), (self._neg, other._neg)):
            for i, k in theirs.items():
                mine[i] = mine.get(i, 0) + k
        self._zeros += other._zeros
        self._pinf += other._pinf
        self._ninf += other._ninf


def pct(sorted_vals: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(q * len(sorted_vals)))
    return sorted_vals[min(k, len(sorted_vals)) - 1]
