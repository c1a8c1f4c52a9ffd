"""The acceptance verdict: an anytime-valid sequential test of "good fraction >= target",
with a conservative correction for outcomes that come in bursts.

The console re-checks the verdict after every request while a soak test runs, so a
fixed-n interval re-checked over and over would declare PASS far more often than its
nominal alpha. We use two mixture likelihood-ratio e-processes (Ville's inequality,
see Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences"):

- E_pass tests H0: p <= target. For each alternative p_k > target the likelihood ratio
  (p_k/target)^S ((1-p_k)/(1-target))^F is a nonnegative supermartingale under every
  p <= target; a fixed-weight mixture of them is too. By Ville's inequality
  P(sup_t E_pass >= 1/alpha) <= alpha for independent outcomes.
- E_fail mirrors it for H0: p >= target (alternatives below the target).

``LevelJudge`` turns them into the verdict state of one load level (see
docs/statistics.md): nothing is latched; the state after each request follows the
evidence then at hand. Bursty outcomes: S and F are divided by a variance inflation
factor v >= 1 (an upper 95% confidence bound of the batch-means variance ratio, the
maximum over batch lengths of 15, 30, 60 and 120 s, recomputed when a batch closes).
Because sum_k w_k x_k^(1/v) <= (sum_k w_k x_k)^(1/v) for v >= 1 (power means), the
scaled E_pass never exceeds E_pass^(1/v): every PASS with the correction is also a
PASS without it, so the correction can never add a false PASS.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import tui.core.defaults as defaults
from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED, VerdictState

GRID_POINTS = 20


def _logsumexp(xs: list[float]) -> float:
    m = max(xs)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(x - m) for x in xs))


@dataclass(frozen=True)
class MixtureTest:
    """Mixture e-processes for a Bernoulli mean against ``target``."""

    target: float = defaults.TARGET
    alpha: float = defaults.ALPHA
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

    def _log_e(self, coeffs: Iterable[tuple[float, float]], s: float, f: float) -> float:
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


# --------------------------------------------------------------------------- dependence
BATCH_S = defaults.BATCH_S  # the shortest batch length; the others are multiples of it
BATCH_MULTS = (1, 2, 4, 8)  # 15, 30, 60 and 120 s batches
MIN_BATCHES = 10  # closed, non-empty batches of a longer length before that length is used
MIN_BATCHES_SHORTEST = 3  # the shortest length is used from 3 batches on (its wide bound covers the rest)
VIF_CONF = 0.95
EPISODE_MIN = 3  # an episode is a maximal run of at least this many not-good requests
FAIL_MIN_S = 60.0
#: Window coverage: an idle stretch (no measured request in flight) or one request's own time in flight counts
#: toward the window for at most COVER_GAP_FACTOR times the level's mean gap between sends so far, and never less
#: than COVER_GAP_MIN_S: 96 requests in 58 s and one more 10 minutes later cover about 64 s, not 10 minutes.
COVER_GAP_FACTOR = 10.0
COVER_GAP_MIN_S = 1.0
RATCHET = True  # keep the largest bound from lengths with >= MIN_BATCHES batches (see docs)
_Z_LOW = NormalDist().inv_cdf(1.0 - VIF_CONF)  # -1.645


def chi2_lower_quantile(df: int, z: float = _Z_LOW) -> float:
    """Wilson-Hilferty approximation of the lower chi-square quantile (df >= 1).

    For the 5% quantile and df >= 5 it is within 2% of the exact value (0.5% from df 9) and
    below it, so a variance upper bound built on it is slightly wider (conservative)."""
    c = 2.0 / (9.0 * df)
    x = 1.0 - c + z * math.sqrt(c)
    return df * max(x, 1e-3) ** 3


def vif_upper_bound(k: int, sum_g2_over_n: float, g: int, n: int, conf_quantile: float | None = None) -> tuple[float, float] | None:
    """(point estimate, upper confidence bound) of the batch-means variance ratio.

    ``k`` closed batches with sum over batches of g_i^2/n_i, total good ``g`` among ``n``.
    Pearson's statistic X = sum (g_i - n_i p)^2 / (n_i p (1 - p)) = (sum g_i^2/n_i - g^2/n) / (p (1 - p));
    X/(k-1) estimates the ratio of the batch-count variance to the independent (binomial) one,
    and X / chi2_{k-1}(5%) is its upper 95% bound when batch means are close to normal.
    None when it cannot be estimated (k < 2, or no failure / no success at all)."""
    if k < 2 or n <= 0:
        return None
    p = g / n
    if p <= 0.0 or p >= 1.0:
        return None
    x = max(0.0, (sum_g2_over_n - g * g / n) / (p * (1.0 - p)))
    q = conf_quantile if conf_quantile is not None else chi2_lower_quantile(k - 1)
    return x / (k - 1), x / q


class LevelJudge:
    """The verdict of one load level, re-checked after every measured outcome.

    States (``state``): INSUFFICIENT_WINDOW until both ``min_window_s`` of data (span of the
    ``t`` values fed) and ``min_requests`` outcomes; then UNDECIDED until the evidence
    decides; PASS while the corrected E_pass is at or above 1/alpha; FAIL while the
    corrected E_fail is at or above 1/alpha and at least ``fail_min_s`` of data have been
    seen (FAIL is shown even inside an incomplete window). Nothing is remembered: after a
    burst PASS falls back to UNDECIDED when the evidence no longer carries it.

    Cost per outcome: a few integer operations. E_pass and E_fail are monotone in the
    counts (E_pass grows with S and falls with F; E_fail the opposite), so the judge keeps,
    for the current correction v, a bound on the counts up to which the decision cannot
    change (found by a galloping search when it is reached) and evaluates the e-processes
    only when a count reaches that bound or v changes. The decisions are exactly those of
    evaluating both e-processes after every outcome.
    """

    __slots__ = (
        "test", "min_window_s", "min_requests", "fail_min_s", "n", "good", "t_first", "t_last", "t_start",
        "_log_thr", "vif", "vif_point", "vif_lengths", "_t0", "_w", "_next_close", "_atom", "_cg", "_cn",
        "_acc", "_disp", "_q", "_passing", "_failing", "_pass_bound", "_fail_bound", "state", "state_since_n",
        "_run", "_run_t0", "_run_t1", "episodes", "longest_episode_s", "longest_episode_n", "episodes_exact",
        "log_e_pass", "log_e_fail", "_v_floor", "_eval_s", "_eval_f", "_eval_v", "evaluations",
        "covered", "_s_max", "_dur_sum",
        "_out_t0", "_outages",
    )

    def __init__(self, test: MixtureTest, *, min_window_s: float, min_requests: int, fail_min_s: float = FAIL_MIN_S,
                 batch_s: float = BATCH_S) -> None:
        self.test = test
        self.min_window_s = float(min_window_s)
        self.min_requests = int(min_requests)
        self.fail_min_s = float(fail_min_s)
        self.n = 0
        self.good = 0
        self.t_first: float | None = None  # first outcome's t (batches are aligned to it)
        self.t_last: float | None = None
        self.t_start: float | None = None  # start of the observation window (see note_start)
        self._log_thr = math.log(test.threshold)
        self.vif = 1.0  # the correction in force (>= 1)
        self._v_floor = 1.0
        self.vif_point: float | None = None  # max over lengths of the point estimates (descriptive)
        self.vif_lengths: tuple = ()  # ((batch seconds, batches, point, upper bound), ...) of the lengths used
        self._w = float(batch_s)
        self._t0: float | None = None
        self._next_close = math.inf
        self._atom = 0  # index of the open shortest batch
        self._cg = 0
        self._cn = 0
        # longer batch lengths accumulate closed shortest batches: [index, good, total]
        self._acc = [[0, 0, 0] for _ in BATCH_MULTS]
        # per length: [closed batches, sum g^2/n, sum g, sum n]
        self._disp: list[list[Any]] = [[0, 0.0, 0, 0] for _ in BATCH_MULTS]
        self._q: dict[int, float] = {}
        self._passing = False
        self._failing = False
        # bounds (see class doc); None means "evaluate at the next outcome"
        self._pass_bound: int | None = None
        self._fail_bound: int | None = None
        self.state: VerdictState = INSUFFICIENT_WINDOW
        self.state_since_n = 0
        self._run = 0
        self._run_t0 = 0.0
        self._run_t1 = 0.0
        self.episodes = 0
        self.longest_episode_s = 0.0
        self.longest_episode_n = 0
        self.episodes_exact = True
        self.log_e_pass = 0.0
        self.log_e_fail = 0.0
        self._eval_s = -1
        self._eval_f = -1
        self._eval_v = 0.0
        self.evaluations = 0
        #: seconds of the window in which measured requests were flowing (see ``_cover``); the window's length
        self.covered = 0.0
        self._s_max: float | None = None  # latest send time seen
        self._dur_sum = 0.0  # sum of t - start over outcomes given a start (mean request duration)
        # outages (issue 37; tui.core.advice names them): [count, not-good in them, longest s, its not-good]
        self._out_t0 = 0.0  # send time of the first not-good request of the current run
        self._outages: list[Any] = [0, 0, 0.0, 0]

    # ------------------------------------------------------------------ input
    def note_start(self, t: float) -> None:
        """The observation began at ``t`` (the Monitor passes each measured request's t_sent, so the
        window is measured from the first request sent, as the cumulative panel shows it). Optional:
        without it the window starts at the first outcome's ``t``."""
        if self.t_start is None or t < self.t_start:
            self.t_start = t

    def add(self, t: float, good: bool, start: float | None = None) -> None:
        """One measured outcome at time ``t`` (the request's t_end); ``start``, when given, is ``note_start(start)``
        in the same call (the Monitor passes the request's t_sent). The hot path of every reader: the window's
        extension and ``_update_state`` written out (tests/unit/core/test_verdict_window.py: the same judge)."""
        if start is not None:
            ts = self.t_start
            if ts is None or start < ts:
                self.t_start = start
        n = self.n = self.n + 1
        if self.t_first is None:
            self.t_first = self.t_last = t
            if self.t_start is None or t < self.t_start:
                self.t_start = t
            self._t0, self._next_close = t, t + self._w
            self.covered, self._s_max = t - self.t_start, start
        elif t > self.t_last:  # type: ignore[operator]
            # The covered window grows by the idle stretch before ``start`` (at most COVER_GAP_FACTOR mean gaps between
            # sends) and the new time in flight (at most COVER_GAP_FACTOR mean durations); an outcome out of order adds
            # nothing (conservative)
            f: float = self.t_last  # type: ignore[assignment]
            s0 = f if start is None else start
            smax = self._s_max  # the latest send before this one: the mean gap so far does not include this one's
            if smax is None or s0 > smax:
                self._s_max = s0
            covered = self.covered
            if s0 > f:
                gap = (smax - self.t_start) / (n - 2) if n > 2 and smax is not None else 0.0  # type: ignore[operator]
                cap = COVER_GAP_FACTOR * gap
                idle = s0 - f
                covered += idle if idle < cap or idle < COVER_GAP_MIN_S else max(cap, COVER_GAP_MIN_S)
                busy = t - s0
            else:
                busy = t - f
            cap = COVER_GAP_FACTOR * self._dur_sum / (n - 1) if n > 1 else 0.0
            self.covered = covered + (busy if busy < cap or busy < COVER_GAP_MIN_S else max(cap, COVER_GAP_MIN_S))
            self.t_last = t
        elif start is not None and (self._s_max is None or start > self._s_max):
            self._s_max = start
        if start is not None:
            self._dur_sum += t - start
        if t >= self._next_close:
            self._roll(t)
        if good:
            s = self.good = self.good + 1
            self._cg += 1
            if self._run:
                self._outages = self._outage_after(t, self._outages)
                self._end_run()
        else:
            s = self.good
            if self._run == 0:
                self._run_t0 = t
                self._out_t0 = t if start is None or start > t else start
            self._run += 1
            self._run_t1 = t
        self._cn += 1  # _decide only when a count reached a bound (the bounds are what make an outcome cheap)
        f_n, pb, fb, passing, failing = n - s, self._pass_bound, self._fail_bound, self._passing, self._failing
        if (pb is None or fb is None or (f_n > pb if passing else s >= pb)
                or (s > fb if failing else f_n >= fb)):
            self._decide(good)
            passing, failing = self._passing, self._failing
        el = self.covered  # the state (``_update_state``): the window, time in which measured requests were flowing
        if el < 0.0:
            el = 0.0
        st: VerdictState
        if failing and el >= self.fail_min_s:
            st = FAIL
        elif n < self.min_requests or el < self.min_window_s:
            st = INSUFFICIENT_WINDOW
        elif passing:
            st = PASS
        else:
            st = UNDECIDED
        if st != self.state:
            self.state = st
            self.state_since_n = n

    def add_many(self, t: float, good: int, total: int) -> None:
        """``total`` outcomes, ``good`` of them good, observed together at time ``t`` (aggregated
        counters: their order is unknown, so episodes are counted only when a whole aggregate is
        not good and are marked inexact)."""
        good, total = int(good), int(total)
        if total == 0 and good == 0:  # nothing observed yet: the observation window starts here
            self.note_start(t)
            return
        if total < 0 or good < 0 or good > total:
            return
        if self.t_first is None:
            self.t_first = self.t_last = t
            if self.t_start is None or t < self.t_start:
                self.t_start = t
            self._t0 = t
            self._next_close = t + self._w
            self.covered = t - self.t_start
        elif t > self.t_last:  # type: ignore[operator]
            self.covered += t - self.t_last  # type: ignore[operator]  # aggregated windows: time flows continuously
            self.t_last = t
        if t >= self._next_close:
            self._roll(t)
        self.n += total
        self.good += good
        self._cg += good
        self._cn += total
        if good == 0:
            if self._run == 0:
                self._run_t0 = t
            self._run += total
            self._run_t1 = t
        else:
            if total - good:
                self.episodes_exact = False
            if self._run:
                self._end_run()
        self._pass_bound = self._fail_bound = None  # several counts moved at once: evaluate
        self._decide(good == total)
        self._update_state(self.n)

    def with_unknown(self, good: int, total: int, *, burst: bool) -> LevelJudge:
        """A copy of this judge judged as if ``total`` more outcomes, ``good`` of them good, had been seen
        (outcomes whose time and order are unknown, such as request lines the reader refused); this judge is
        unchanged. ``burst``: they came together right after the last outcome, as one batch of their own, and the
        batches are closed so that the dependence correction sees them (never below the correction in force): a
        burst of good outcomes in failing traffic raises the correction, as it would have had they been read.
        Otherwise they are added at the last outcome's time under the correction in force."""
        alt = copy.deepcopy(self)
        if total <= 0 or good < 0 or good > total or self.t_last is None:
            return alt
        if not burst:
            alt.add_many(self.t_last, good, total)
            return alt
        t = self.t_last + self._w  # past the open shortest batch: the burst is a batch of its own
        alt.add_many(t, good, total)
        return alt._closed_at(t, self.vif, good == total)

    def closed(self) -> LevelJudge:
        """A copy judged with its open batches closed as ``with_unknown(..., burst=True)`` closes them, and nothing
        added: the control that shows whether a changed state comes from the added outcomes or from the closing."""
        alt = copy.deepcopy(self)
        if self.t_last is None:
            return alt
        return alt._closed_at(self.t_last + self._w, self.vif, None)

    def _closed_at(self, t: float, vif_floor: float, all_good: bool | None) -> LevelJudge:
        alt = self
        alt._roll(t + self._w * BATCH_MULTS[-1])  # close it, and the longer batches, as the data's end would
        if alt.vif < vif_floor:  # never a smaller correction than the one in force (closing short batches can)
            alt.vif = vif_floor
        alt._pass_bound = alt._fail_bound = None
        alt._decide(bool(all_good))
        alt._update_state(alt.n)
        return alt

    # ------------------------------------------------------------------ episodes
    def _end_run(self) -> None:
        r = self._run
        if r >= EPISODE_MIN:
            self.episodes += 1
            d = self._run_t1 - self._run_t0
            if d > self.longest_episode_s or (d == self.longest_episode_s and r > self.longest_episode_n):
                self.longest_episode_s = d
                self.longest_episode_n = r
        self._run = 0

    def _outage_after(self, t: float, acc: list[Any]) -> list[Any]:
        """``acc`` with the current run of not-good outcomes added when it is an outage: an episode, or a run that
        lasted a batch from its first request's send to its last one's end (a freeze holding one request is one too)."""
        r, d = self._run, self._run_t1 - self._out_t0
        if r >= EPISODE_MIN or d >= self._w:
            acc = [acc[0] + 1, acc[1] + r, *((d, r) if d > acc[2] else acc[2:])]
        return acc

    def outage_summary(self) -> tuple[int, float, int, int]:
        """(outages, longest s, its not-good requests, not-good in all), a run still open counted to the last one."""
        o = self._outage_after(self.t_last, self._outages) if self._run and self.t_last is not None else self._outages
        return o[0], o[2], o[3], o[1]

    def episode_summary(self) -> tuple[int, float, int]:
        """(episodes, longest seconds, longest requests), counting a run still open at the end."""
        k, s, m = self.episodes, self.longest_episode_s, self.longest_episode_n
        if self._run >= EPISODE_MIN:
            k += 1
            d = self._run_t1 - self._run_t0
            if d > s or (d == s and self._run > m):
                s, m = d, self._run
        return k, s, m

    # ------------------------------------------------------------------ batches
    def _roll(self, t: float) -> None:
        """``t`` lies past the open shortest batch: close it (and longer batches it completes)."""
        j = int((t - self._t0) // self._w)  # type: ignore[operator]
        if self._cn:
            self._close_atom(self._atom, self._cg, self._cn)
        self._cg = self._cn = 0
        self._atom = j
        self._next_close = self._t0 + (j + 1) * self._w  # type: ignore[operator]
        # longer batches that end before the new shortest batch are complete now
        for i in range(1, len(BATCH_MULTS)):
            a = self._acc[i]
            if a[0] != j // BATCH_MULTS[i]:
                if a[2]:
                    self._close_batch(i, a[1], a[2])
                a[0], a[1], a[2] = j // BATCH_MULTS[i], 0, 0
        self._recompute_vif()

    def _close_atom(self, idx: int, g: int, n: int) -> None:
        self._close_batch(0, g, n)
        for i in range(1, len(BATCH_MULTS)):
            a = self._acc[i]
            li = idx // BATCH_MULTS[i]
            if a[0] != li:
                if a[2]:
                    self._close_batch(i, a[1], a[2])
                a[0], a[1], a[2] = li, 0, 0
            a[1] += g
            a[2] += n

    def _close_batch(self, i: int, g: int, n: int) -> None:
        d = self._disp[i]
        d[0] += 1
        d[1] += g * g / n
        d[2] += g
        d[3] += n

    def _quantile(self, df: int) -> float:
        q = self._q.get(df)
        if q is None:
            if len(self._q) >= 64:  # df grows by one per closed batch: keep the cache bounded (exact either way)
                self._q.clear()
            q = self._q[df] = chi2_lower_quantile(df)
        return q

    def _recompute_vif(self) -> None:
        v = 1.0
        point = None
        used = []
        for i, d in enumerate(self._disp):
            k = d[0]
            if k < (MIN_BATCHES_SHORTEST if i == 0 else MIN_BATCHES):
                continue
            est = vif_upper_bound(k, d[1], d[2], d[3], self._quantile(k - 1))
            if est is None:
                continue
            used.append((self._w * BATCH_MULTS[i], k, est[0], est[1]))
            point = est[0] if point is None else max(point, est[0])
            if est[1] > v:
                v = est[1]
        self.vif_point = point
        self.vif_lengths = tuple(used)
        if RATCHET:
            mature = max((u[3] for u in used if u[1] >= MIN_BATCHES), default=1.0)
            if mature > self._v_floor:
                self._v_floor = mature
            v = max(v, self._v_floor)
        if v != self.vif:
            self.vif = v
            self._pass_bound = self._fail_bound = None

    # ------------------------------------------------------------------ decisions
    def _eval(self, s: int, f: int) -> None:
        v = self.vif
        if s != self._eval_s or f != self._eval_f or v != self._eval_v:
            self.evaluations += 1
            self.log_e_pass = self.test.log_e_pass(s / v, f / v)
            self.log_e_fail = self.test.log_e_fail(s / v, f / v)
            self._eval_s, self._eval_f, self._eval_v = s, f, v

    def _pass_at(self, s: int, f: int) -> bool:
        v = self.vif
        return self.test.log_e_pass(s / v, f / v) >= self._log_thr

    def _fail_at(self, s: int, f: int) -> bool:
        v = self.vif
        return self.test.log_e_fail(s / v, f / v) >= self._log_thr

    @staticmethod
    def _gallop(pred: Callable[[int], bool], lo: int, limit: int = 1 << 40) -> int:
        """Smallest x >= lo with pred(x) true, for pred monotone false...true (limit if none)."""
        step = 1
        hi = lo
        while not pred(hi):
            lo = hi + 1
            hi = lo + step
            step *= 2
            if hi > limit:
                return limit
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _decide(self, good_last: bool) -> None:
        s = self.good
        f = self.n - s
        # PASS region: pass(s, f) iff s >= Smin(f) iff f <= Fmax(s); Smin grows with f, Fmax with s.
        pb = self._pass_bound
        if self._passing:
            # bound = Fmax(s') for an earlier s' <= s, so f <= bound still passes
            if pb is None or f > pb:
                if self._pass_at(s, f):
                    self._passing = True
                    self._pass_bound = self._gallop(lambda x: not self._pass_at(s, x), f + 1) - 1
                else:
                    self._passing = False
                    self._pass_bound = self._gallop(lambda x: self._pass_at(x, f), s + 1)
        else:
            # bound = Smin(f') for an earlier f' <= f, so s < bound cannot pass
            if pb is None or s >= pb:
                if self._pass_at(s, f):
                    self._passing = True
                    self._pass_bound = self._gallop(lambda x: not self._pass_at(s, x), f + 1) - 1
                else:
                    self._pass_bound = self._gallop(lambda x: self._pass_at(x, f), s + 1)
        # FAIL region: fail(s, f) iff f >= Fmin(s) iff s <= Smax(f); both grow with the other count.
        fb = self._fail_bound
        if self._failing:
            if fb is None or s > fb:
                if self._fail_at(s, f):
                    self._fail_bound = self._gallop(lambda x: not self._fail_at(x, f), s + 1) - 1
                else:
                    self._failing = False
                    self._fail_bound = self._gallop(lambda x: self._fail_at(s, x), f + 1)
        else:
            if fb is None or f >= fb:
                if self._fail_at(s, f):
                    self._failing = True
                    self._fail_bound = self._gallop(lambda x: not self._fail_at(x, f), s + 1) - 1
                else:
                    self._fail_bound = self._gallop(lambda x: self._fail_at(s, x), f + 1)

    def _update_state(self, n: int) -> None:
        el = self.covered  # the window: time in which measured requests were flowing
        if el < 0.0:
            el = 0.0
        st: VerdictState
        if self._failing and el >= self.fail_min_s:
            st = FAIL
        elif n < self.min_requests or el < self.min_window_s:
            st = INSUFFICIENT_WINDOW
        elif self._passing:
            st = PASS
        else:
            st = UNDECIDED
        if st != self.state:
            self.state = st
            self.state_since_n = n

    # ------------------------------------------------------------------ read-only views
    @property
    def elapsed(self) -> float:
        if self.t_first is None:
            return 0.0
        return max(0.0, self.t_last - self.t_start)  # type: ignore[operator]

    @property
    def passing(self) -> bool:
        """The corrected E_pass is at or above 1/alpha (whatever the window says)."""
        return self._passing

    @property
    def failing(self) -> bool:
        return self._failing

    @property
    def n_eff(self) -> float:
        return self.n / self.vif

    @property
    def window_complete(self) -> bool:
        return self.n >= self.min_requests and self.covered >= self.min_window_s

    def e_values(self) -> tuple[float, float]:
        """(E_pass, E_fail) on the corrected counts now (evaluated on demand)."""
        self._eval(self.good, self.n - self.good)
        return safe_exp(self.log_e_pass), safe_exp(self.log_e_fail)

    @property
    def e_pass(self) -> float:
        return self.e_values()[0]

    @property
    def e_fail(self) -> float:
        return self.e_values()[1]

    @property
    def episodes_summary(self) -> tuple[int, float]:
        k, s, _ = self.episode_summary()
        return k, s

    def unseen_episode_period_s(self) -> float | None:
        """Episodes recurring less often than once per this many seconds may simply not have
        happened yet: a kind of episode at rate r goes unseen in T seconds with probability
        exp(-r T), which is >= 5% for r <= 3/T. None before any data."""
        el = self.elapsed
        if el <= 0:
            return None
        return el / -math.log(1.0 - VIF_CONF)

    def minutes_more_needed(self) -> float | None:
        """Minutes until the corrected evidence would reach PASS if the observed good fraction,
        request rate and correction all held; None when that cannot be said (fraction at or
        below the target, no rate yet) and 0.0 when it already passes."""
        n, g, el = self.n, self.good, self.elapsed
        if n == 0 or el <= 0:
            return None
        p = g / n
        if p <= self.test.target:
            return None
        if self._passing:
            return 0.0
        v = self.vif
        test = self.test
        thr = self._log_thr

        def ok(m: int) -> bool:
            return test.log_e_pass(p * m / v, (1 - p) * m / v) >= thr

        m = self._gallop(ok, n, limit=1 << 34)
        if m >= 1 << 34:
            return None
        rate = n / el
        return max(0.0, (m - n) / rate / 60.0)
