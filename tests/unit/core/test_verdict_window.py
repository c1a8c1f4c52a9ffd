"""``LevelJudge.add`` writes out the covered window's extension and the state's update (the hot path of every reader,
issue 38): it must leave the judge exactly as the calls it replaced did. The reference below is the method as it was
before (the window extension and ``_update_state`` called); seeded streams of every shape drive both."""

from __future__ import annotations

import math
import random

import pytest

from tui.core.verdict import COVER_GAP_FACTOR, COVER_GAP_MIN_S, LevelJudge, MixtureTest


class ReferenceJudge(LevelJudge):
    """``add`` as it was before it was written out (issue 38's hot-path change): the reference."""

    __slots__ = ()

    def add(self, t: float, good: bool, start: float | None = None) -> None:
        if start is not None:
            ts = self.t_start
            if ts is None or start < ts:
                self.t_start = start
        n = self.n = self.n + 1
        if self.t_first is None:
            self.t_first = self.t_last = t
            if self.t_start is None or t < self.t_start:
                self.t_start = t
            self._t0 = t
            self._next_close = t + self._w
            self.covered = t - self.t_start
            self._s_max = start
        elif t > self.t_last:
            self._cover(t, start)
            self.t_last = t
        elif start is not None and (self._s_max is None or start > self._s_max):
            self._s_max = start
        if start is not None:
            self._dur_sum += t - start
        if t >= self._next_close:
            self._roll(t)
        if good:
            self.good += 1
            self._cg += 1
            if self._run:
                self._outages = self._outage_after(t, self._outages)
                self._end_run()
        else:
            if self._run == 0:
                self._run_t0 = t
                self._out_t0 = t if start is None or start > t else start
            self._run += 1
            self._run_t1 = t
        self._cn += 1
        s = self.good
        f = n - s
        pb = self._pass_bound
        fb = self._fail_bound
        if (pb is None or fb is None or (f > pb if self._passing else s >= pb)
                or (s > fb if self._failing else f >= fb)):
            self._decide(good)
        self._update_state(n)

    def _cover(self, t: float, start: float | None) -> None:
        f = self.t_last
        n = self.n
        if start is None:
            start = f
        smax = self._s_max
        if smax is None or start > smax:
            self._s_max = start
        if start > f:
            gap = (smax - self.t_start) / (n - 2) if n > 2 and smax is not None else 0.0
            cap = COVER_GAP_FACTOR * gap
            idle = start - f
            self.covered += idle if idle < cap or idle < COVER_GAP_MIN_S else max(cap, COVER_GAP_MIN_S)
            busy = t - start
        else:
            busy = t - f
        cap = COVER_GAP_FACTOR * self._dur_sum / (n - 1) if n > 1 else 0.0
        self.covered += busy if busy < cap or busy < COVER_GAP_MIN_S else max(cap, COVER_GAP_MIN_S)


def _state(j: LevelJudge) -> dict:
    out = {}
    for name in LevelJudge.__slots__:
        v = getattr(j, name, "<unset>")
        if name == "test":
            continue
        if isinstance(v, float) and math.isnan(v):
            v = "nan"
        out[name] = repr(v)
    return out


def _stream(rng: random.Random, n: int) -> list[tuple[float, bool, float | None]]:
    """Outcomes of one level: in order or shuffled, with and without send times, gaps (idle stretches), bursts of
    failures, ends before sends (a judge given inconsistent times), long requests."""
    shape = rng.choice(("steady", "bursty", "idle", "shuffled", "no_start", "backwards", "mixed"))
    p_good = rng.choice((0.5, 0.9, 0.95, 0.99, 1.0))
    t = 1_767_225_600.0 + rng.random()
    out = []
    for _ in range(n):
        t += rng.expovariate(rng.choice((0.5, 5.0, 50.0)))
        if shape == "idle" and rng.random() < 0.02:
            t += rng.uniform(5, 600)
        dur = rng.lognormvariate(-1.0, 1.0)
        good = rng.random() < p_good
        if shape == "bursty" and rng.random() < 0.05:
            good = False
        start: float | None = t
        if shape == "no_start" or (shape == "mixed" and rng.random() < 0.3):
            start = None
        end = t + dur
        if shape == "backwards" and rng.random() < 0.1:
            end = t - dur  # an end before its send: the judge takes what it is given
        out.append((end, good, start))
    if shape == "shuffled" or (shape == "mixed" and rng.random() < 0.5):
        k = max(1, n // 10)
        for _ in range(k):
            i, j = rng.randrange(n), rng.randrange(n)
            out[i], out[j] = out[j], out[i]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_add_leaves_the_judge_as_the_calls_it_replaced(seed: int) -> None:
    rng = random.Random(seed)
    test = MixtureTest(target=rng.choice((0.9, 0.95, 0.99)), alpha=rng.choice((0.01, 0.05)))
    kw = dict(min_window_s=rng.choice((0.0, 10.0, 60.0)), min_requests=rng.choice((1, test.min_requests_to_pass())),
              fail_min_s=rng.choice((0.0, 5.0, 60.0)))
    new, ref = LevelJudge(test, **kw), ReferenceJudge(test, **kw)
    for t, good, start in _stream(rng, rng.choice((1, 2, 3, 50, 400, 2_000))):
        new.add(t, good, start)
        ref.add(t, good, start)
        assert new.state == ref.state and new.covered == ref.covered and new.n == ref.n
    assert _state(new) == _state(ref)


def test_ends_before_sends_leave_the_judge_as_before() -> None:
    # outcomes that end before their send, or before the window's start (the judge takes what it is given)
    test = MixtureTest()
    new = LevelJudge(test, min_window_s=0.0, min_requests=1, fail_min_s=0.0)
    ref = ReferenceJudge(test, min_window_s=0.0, min_requests=1, fail_min_s=0.0)
    for args in ((100.0, False, 105.0), (101.0, False, 106.0), (99.0, True, 98.0), (120.0, True, None),
                 (119.0, False, 130.0), (121.0, False, 90.0)):
        new.add(*args)
        ref.add(*args)
        assert _state(new) == _state(ref)
