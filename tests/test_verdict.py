"""The sequential verdict must stay valid when re-checked after every request."""

import math
import random

import pytest

from tui.core.stats import wilson
from tui.core.verdict import MixtureTest, SequentialVerdict

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


def test_sequential_verdict_remembers_and_vif_shrinks_evidence():
    v = SequentialVerdict(MixtureTest())
    v.update(200, 200)
    assert v.pass_at == 200
    bursty = SequentialVerdict(MixtureTest())
    bursty.vif = 4.0
    bursty.update(200, 200)
    assert bursty.pass_at is None  # 200 correlated requests carry the evidence of ~50


@pytest.mark.parametrize("target,alpha", [(0.0, 0.05), (1.0, 0.05), (0.9, 0.0)])
def test_bad_parameters_rejected(target, alpha):
    with pytest.raises(ValueError):
        MixtureTest(target, alpha)
