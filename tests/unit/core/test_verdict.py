"""The sequential verdict must stay valid when re-checked after every request."""

import math
import random

import pytest

from tui.core.snapshot import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED
from tui.core.stats import wilson
from tui.core.verdict import LevelJudge, MixtureTest, chi2_lower_quantile, vif_upper_bound

N_REQUESTS = 3000
RUNS = 400


def wilson_boundary(target: float, n_max: int) -> list[int]:
    out, s = [n_max + 1], 0
    for n in range(1, n_max + 1):
        while s <= n and wilson(s, n)[0] < target:
            s += 1
        out.append(s)
        s = max(0, s - 1)
    return out


def simulate(p: float, boundaries: list[list[int]], seed0: int = 0) -> list[float]:
    """Share of runs in which each boundary was ever reached, checking after every request."""
    hits = [0] * len(boundaries)
    for seed in range(seed0, seed0 + RUNS):
        rng = random.Random(seed)
        s = 0
        done = [False] * len(boundaries)
        for n in range(1, N_REQUESTS + 1):
            s += rng.random() < p
            for i, b in enumerate(boundaries):
                if not done[i] and s >= b[n]:
                    done[i] = True
            if all(done):
                break
        for i, d in enumerate(done):
            hits[i] += d
    return [h / RUNS for h in hits]


def test_false_pass_rate_at_target_is_bounded_but_rechecked_wilson_is_not():
    test = MixtureTest(target=0.95, alpha=0.05)
    ours, naive = simulate(0.95, [test.pass_boundary(N_REQUESTS), wilson_boundary(0.95, N_REQUESTS)])
    tolerance = 3 * math.sqrt(0.05 * 0.95 / RUNS)  # three standard errors of a 400-run estimate
    assert ours <= 0.05 + tolerance, ours
    # the same data, re-checking a plain Wilson lower bound after every request, passes far more often
    assert naive >= 3 * 0.05, naive
    assert naive >= 3 * max(ours, 0.01)


def test_power_clear_cases_get_decided():
    test = MixtureTest(target=0.95, alpha=0.05)
    good_b = test.pass_boundary(N_REQUESTS)
    passed, = simulate(0.99, [good_b], seed0=10_000)
    assert passed >= 0.95
    # a clearly bad service is detected as FAIL
    assert test.fails(850, 150)
    assert not test.passes(850, 150)


def test_minimum_requests_to_pass_is_consistent():
    test = MixtureTest()
    n = test.min_requests_to_pass()
    assert test.passes(n, 0) and not test.passes(n - 1, 0)
    assert 50 < n < 200


def test_teaching_log_is_not_a_fail_nor_a_pass():
    test = MixtureTest()
    assert not test.passes(2, 2)
    assert not test.fails(2, 2)


def test_dependence_correction_shrinks_evidence():
    test = MixtureTest()
    assert test.passes(200, 0)
    assert not test.passes(200 / 4.0, 0)  # 200 correlated requests carry the evidence of ~50


def test_scaled_evidence_never_passes_where_the_raw_counts_do_not():
    # power means: sum_k w_k x_k^(1/v) <= (sum_k w_k x_k)^(1/v) for v >= 1, so
    # log E(s/v, f/v) <= log E(s, f) / v: the correction can only remove PASSes (and FAILs)
    test = MixtureTest()
    rng = random.Random(7)
    for _ in range(3000):
        s, f = rng.randrange(0, 5000), rng.randrange(0, 400)
        v = 1.0 + rng.random() * 20
        lp, lps = test.log_e_pass(s, f), test.log_e_pass(s / v, f / v)
        lf, lfs = test.log_e_fail(s, f), test.log_e_fail(s / v, f / v)
        assert lps <= lp / v + 1e-9 and lfs <= lf / v + 1e-9
        if test.passes(s / v, f / v):
            assert test.passes(s, f)


def test_chi2_quantile_close_to_exact_and_on_the_conservative_side():
    # exact lower 5% chi-square quantiles (tables)
    for df, exact in ((2, 0.1026), (5, 1.1455), (9, 3.3251), (29, 17.708), (59, 42.339)):
        q = chi2_lower_quantile(df)
        assert q <= exact * 1.001 and (df < 5 or q >= exact * 0.98)


def test_vif_bound_about_one_for_independent_batches_and_large_for_bursts():
    rng = random.Random(3)
    def bound(batches):
        return vif_upper_bound(len(batches), sum(g * g / n for g, n in batches), sum(g for g, _ in batches),
                               sum(n for _, n in batches))
    indep = [(sum(rng.random() < 0.95 for _ in range(50)), 50) for _ in range(60)]
    point, upper = bound(indep)
    assert 0.6 < point < 1.5 and point < upper < 2.2
    bursty = [(50, 50) if rng.random() < 0.9 else (0, 50) for _ in range(60)]
    assert bound(bursty)[0] > 10
    assert bound([(50, 50)] * 20) is None  # no failure: nothing to estimate


def _judge(min_window_s=60.0, fail_min_s=60.0, test=None):
    test = test or MixtureTest()
    return LevelJudge(test, min_window_s=min_window_s, min_requests=test.min_requests_to_pass(), fail_min_s=fail_min_s)


def test_judge_decisions_equal_evaluating_both_e_processes_after_every_request():
    # the judge skips evaluations by monotonicity; its decisions must be exactly the brute-force ones
    test = MixtureTest()
    for seed in range(6):
        rng = random.Random(seed)
        j = _judge(min_window_s=0.0, fail_min_s=0.0, test=test)
        p = 0.93 + 0.01 * seed
        bad = False
        for i in range(4000):
            bad = (rng.random() < 0.01) if not bad else (rng.random() > 0.1)
            j.add(i * 0.3, rng.random() < (0.3 if bad else p))
            s, f, v = j.good, j.n - j.good, j.vif
            assert j.passing == (test.log_e_pass(s / v, f / v) >= math.log(test.threshold)), (seed, i)
            assert j.failing == (test.log_e_fail(s / v, f / v) >= math.log(test.threshold)), (seed, i)


def test_states_window_then_evidence_and_pass_is_not_latched():
    j = _judge(min_window_s=600.0)
    t = 0.0
    for _ in range(1500):  # 450 s of perfect requests: evidence favours PASS, the window is not complete
        t += 0.3
        j.add(t, True)
    assert j.passing and j.state == INSUFFICIENT_WINDOW
    while j.elapsed < 600.0:
        t += 0.3
        j.add(t, True)
    assert j.state == PASS
    for _ in range(200):  # a burst of 60 s of failures
        t += 0.3
        j.add(t, False)
    assert j.state != PASS  # PASS follows the evidence then at hand
    k, longest_s, longest_n = j.episode_summary()
    assert k == 1 and longest_n == 200 and abs(longest_s - 59.7) < 1e-6


def test_fail_needs_fail_min_s_of_data_and_follows_the_evidence():
    j = _judge(min_window_s=600.0, fail_min_s=60.0)
    t = 0.0
    states = []
    for i in range(400):
        t += 0.3
        j.add(t, i % 2 == 0)  # half fail
        states.append(j.state)
    first_fail = states.index(FAIL)
    assert 0.3 * (first_fail + 1) >= 60.0 and 0.3 * (first_fail + 1) < 62.0  # FAILs at about one minute
    assert INSUFFICIENT_WINDOW in states[:first_fail]


def test_undecided_says_how_long_at_this_rate_and_what_is_not_ruled_out():
    j = _judge(min_window_s=60.0)
    rng = random.Random(11)
    t = 0.0
    for i in range(1000):  # 300 s at 0.97 with short episodes
        t += 0.3
        j.add(t, rng.random() < 0.99 if (i // 50) % 10 else (i % 50) >= 5)
    assert j.state in (UNDECIDED, PASS)
    k, _, _ = j.episode_summary()
    assert k >= 2
    period = j.unseen_episode_period_s()
    assert abs(period - j.elapsed / 3.0) < 1.0  # unseen with >= 5% probability when rarer than 3 per window
    if j.state == UNDECIDED:
        more = j.minutes_more_needed()
        assert more is not None and more > 0


def test_add_many_matches_add_for_counts_and_state():
    a, b = _judge(min_window_s=120.0), _judge(min_window_s=120.0)
    rng = random.Random(2)
    t = 0.0
    for sec in range(300):
        t = float(sec)
        g = sum(rng.random() < 0.99 for _ in range(3))
        for k in range(3):
            a.add(t, k < g)
        b.add_many(t, g, 3)
    assert (a.n, a.good) == (b.n, b.good) and a.vif == b.vif and a.state == b.state


@pytest.mark.parametrize("target,alpha", [(0.0, 0.05), (1.0, 0.05), (0.9, 0.0)])
def test_bad_parameters_rejected(target, alpha):
    with pytest.raises(ValueError):
        MixtureTest(target, alpha)
