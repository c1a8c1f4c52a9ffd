"""The acceptance verdict: an anytime-valid sequential test of "good fraction >= target".

The console re-checks the verdict after every request while a soak test runs, so a
fixed-n interval re-checked over and over would declare PASS far more often than its
nominal alpha. We use two mixture likelihood-ratio e-processes (Ville's inequality,
see Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences"):

- E_pass tests H0: p <= target. For each alternative p_k > target the likelihood ratio
  (p_k/target)^S ((1-p_k)/(1-target))^F is a nonnegative supermartingale under every
  p <= target; a fixed-weight mixture of them is too. By Ville's inequality
  P(sup_t E_pass >= 1/alpha) <= alpha, so "PASS when E_pass reaches 1/alpha, checked at
  any time, as often as you like" has false-PASS probability <= alpha at p = target.
- E_fail mirrors it for H0: p >= target (alternatives below the target).

S and F are the counts of good and not-good measured requests. When outcomes are
bursty (variance inflation factor from batch means > 2) the counts are divided by the
VIF before the test: the decision then rests on the effective sample size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GRID_POINTS = 20


def _logsumexp(xs: list[float]) -> float:
    m = max(xs)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(x - m) for x in xs))


@dataclass(frozen=True)
class MixtureTest:
    """Mixture e-processes for a Bernoulli mean against ``target``."""

    target: float = 0.95
    alpha: float = 0.05
    points: int = GRID_POINTS

    def __post_init__(self) -> None:
        if not 0.0 < self.target < 1.0:
            raise ValueError("target must be in (0, 1)")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")
        t, k = self.target, self.points
        # Alternatives crowd near the target (quadratic spacing) so that moderate
        # margins are detectable; both grids include the extreme (1.0 / 0.0).
        up = [t + (1 - t) * (i / k) ** 2 for i in range(1, k + 1)]
        down = [t * (1 - (i / k) ** 2) for i in range(1, k + 1)]
        object.__setattr__(self, "_up", tuple(self._coeffs(up)))
        object.__setattr__(self, "_down", tuple(self._coeffs(down)))
        object.__setattr__(self, "_logw", -math.log(k))

    def _coeffs(self, alts: list[float]) -> list[tuple[float, float]]:
        t = self.target
        out = []
        for p in alts:
            a = math.log(p / t) if p > 0 else -math.inf
            b = math.log((1 - p) / (1 - t)) if p < 1 else -math.inf
            out.append((a, b))
        return out

    @property
    def threshold(self) -> float:
        return 1.0 / self.alpha

    def _log_e(self, coeffs, s: float, f: float) -> float:
        terms = []
        for a, b in coeffs:
            ls = 0.0 if s == 0 else s * a
            lf = 0.0 if f == 0 else f * b
            terms.append(ls + lf)
        return self._logw + _logsumexp(terms)  # type: ignore[attr-defined]

    def log_e_pass(self, s: float, f: float) -> float:
        return self._log_e(self._up, s, f)  # type: ignore[attr-defined]

    def log_e_fail(self, s: float, f: float) -> float:
        return self._log_e(self._down, s, f)  # type: ignore[attr-defined]

    def passes(self, s: float, f: float) -> bool:
        return self.log_e_pass(s, f) >= math.log(self.threshold)

    def fails(self, s: float, f: float) -> bool:
        return self.log_e_fail(s, f) >= math.log(self.threshold)

    def min_requests_to_pass(self, limit: int = 10_000_000) -> int:
        """Fewest measured requests (all good) with which PASS is possible at all."""
        lo, hi = 1, 1
        while not self.passes(hi, 0):
            hi *= 2
            if hi > limit:
                return limit
        while lo < hi:
            mid = (lo + hi) // 2
            if self.passes(mid, 0):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def pass_boundary(self, n_max: int) -> list[int]:
        """b[n] = fewest good outcomes among n with which E_pass >= 1/alpha (n+1 if none).

        E_pass grows with S at fixed n and the boundary moves by 0 or 1 per step, so the
        table is built in O(n_max) evaluations. Used by simulations and fast checks.
        """
        out = [1]
        b = 0
        for n in range(1, n_max + 1):
            b = max(b, 0)
            while b <= n and not self.passes(b, n - b):
                b += 1
            out.append(b)
        return out


def safe_exp(x: float) -> float:
    if x > 700:
        return math.inf
    return math.exp(x)


class SequentialVerdict:
    """Tracks the sequential decision for one level as requests arrive.

    ``update(good, n)`` is called with cumulative counts after each request; the
    e-processes are evaluated after every request for the first 4096 requests and then
    on a geometric schedule (every n/4096-th request), which only ever checks *less*
    often and so keeps the anytime guarantee. Once a boundary is crossed the decision is
    remembered (``pass_at`` / ``fail_at``); FAIL evidence overrides PASS evidence.
    """

    __slots__ = ("test", "vif", "pass_at", "fail_at", "_log_thr", "last_log_pass", "last_log_fail")

    def __init__(self, test: MixtureTest) -> None:
        self.test = test
        self.vif = 1.0
        self.pass_at: int | None = None
        self.fail_at: int | None = None
        self._log_thr = math.log(test.threshold)
        self.last_log_pass = 0.0
        self.last_log_fail = 0.0

    def due(self, n: int) -> bool:
        return n <= 4096 or n % (n >> 12) == 0

    def update(self, good: int, n: int, force: bool = False) -> None:
        if not (force or self.due(n)):
            return
        scale = self.vif if self.vif > 2.0 else 1.0
        s, f = good / scale, (n - good) / scale
        lp = self.test.log_e_pass(s, f)
        lf = self.test.log_e_fail(s, f)
        self.last_log_pass, self.last_log_fail = lp, lf
        if self.pass_at is None and lp >= self._log_thr:
            self.pass_at = n
        if self.fail_at is None and lf >= self._log_thr:
            self.fail_at = n
