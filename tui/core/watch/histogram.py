"""Histogram arithmetic: the good fraction from cumulative buckets is exact only when the SLO is a bucket bound;
otherwise a bracket [pessimistic, optimistic] from the neighbouring bounds, never an interpolated point.
Quantiles are the bucket that holds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tui.core.records.watch import INF, Buckets


def count_of(b: Buckets | None) -> float | None:
    return None if not b else b[-1][1]


@dataclass(frozen=True)
class Bracket:
    """Good fraction from histogram buckets. ``exact`` when the SLO is a bucket bound."""

    good_lo: float  # observations certainly <= SLO (pessimistic)
    good_hi: float  # observations possibly <= SLO (optimistic)
    total: float  # TTFT observations + aborted/errored
    ttft_n: float
    failed: float
    exact: bool
    bound_lo: float | None  # the neighbouring bounds used (seconds)
    bound_hi: float | None

    @property
    def lo(self) -> float | None:
        return None if self.total <= 0 else min(1.0, self.good_lo / self.total)

    @property
    def hi(self) -> float | None:
        return None if self.total <= 0 else min(1.0, self.good_hi / self.total)

    def text(self) -> str:
        lo, hi = self.lo, self.hi
        if lo is None or hi is None:  # total <= 0
            return "no requests finished in the window"
        if self.exact:
            return f"{100 * lo:.1f}% (exact: the SLO is a bucket bound)"
        return (f"{100 * lo:.1f}-{100 * hi:.1f}% (bracket from bucket bounds "
                f"{_fmt_s(self.bound_lo)}..{_fmt_s(self.bound_hi)}; no interpolation)")


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "0"
    if math.isinf(v):
        return "+Inf"
    return f"{v * 1000:g} ms" if v < 1 else f"{v:g} s"


def good_bracket(ttft: Buckets, slo_s: float, failed: float | None = None) -> Bracket:
    """Good fraction bounds at ``slo_s`` (seconds) from cumulative bucket counts."""
    n = ttft[-1][1]
    fail = max(0.0, failed or 0.0)
    lo_b, lo_c = None, 0.0
    hi_b, hi_c = INF, n
    exact = False
    for le, c in ttft:
        if math.isclose(le, slo_s, rel_tol=1e-9, abs_tol=1e-12):
            lo_b, lo_c, hi_b, hi_c, exact = le, c, le, c, True
            break
        if le < slo_s:
            lo_b, lo_c = le, c
        elif le > slo_s:
            hi_b, hi_c = le, c
            break
    return Bracket(good_lo=min(lo_c, n), good_hi=min(hi_c, n), total=n + fail, ttft_n=n, failed=fail,
                   exact=exact, bound_lo=lo_b, bound_hi=hi_b)


def share_above(b: Buckets | None, limit_s: float) -> float | None:
    """Share of observations certainly or possibly above ``limit_s``: everything above the largest
    bound <= limit (the conservative reading for a rule that blocks PASS)."""
    if not b or b[-1][1] <= 0:
        return None
    n = b[-1][1]
    below = 0.0
    for le, c in b:
        if le <= limit_s * (1 + 1e-9):
            below = c
        else:
            break
    return max(0.0, min(1.0, 1.0 - below / n))


def quantile_bracket(b: Buckets | None, q: float) -> tuple[float, float] | None:
    """The bucket (lower, upper bound, seconds) that holds the q-quantile; no interpolation."""
    if not b or b[-1][1] <= 0:
        return None
    n = b[-1][1]
    rank = q * n
    prev = 0.0
    for le, c in b:
        if c >= rank - 1e-9 and c > 0:
            return prev, le
        prev = le
    return prev, INF


def fmt_quantile(b: Buckets | None, q: float) -> str:
    br = quantile_bracket(b, q)
    if br is None:
        return "N/A"
    lo, hi = br
    if math.isinf(hi):
        return f"> {_fmt_s(lo)}"
    return f"{_fmt_s(lo)}..{_fmt_s(hi)}"
