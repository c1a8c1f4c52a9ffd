import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core import stats


def test_order_statistic_thresholds_match_the_documented_values():
    assert stats.n_needed(0.99) == 299
    assert stats.n_needed(0.95) == 59
    assert stats.n_needed(0.50) == 5


def test_nearest_rank_definition():
    vals = sorted([400.0, 800.0, 1200.0])
    assert stats.nearest_rank(vals, 0.5) == 800.0
    assert stats.nearest_rank(vals, 0.95) == 1200.0
    assert stats.nearest_rank(list(range(1, 101)), 0.95) == 95
    assert stats.nearest_rank([], 0.5) is None


def test_failures_as_infinity_reading():
    p50, p95, p99 = stats.percentiles([400.0, 800.0, 1200.0], extra_inf=1)
    assert p50.value_ms == 800.0 and math.isinf(p95.value_ms) and p95.n == 4
    assert not p95.supported and p95.n_needed == 59


def test_wilson_known_value():
    lo, hi = stats.wilson(2, 4)
    assert lo == pytest.approx(0.150, abs=1e-3) and hi == pytest.approx(0.850, abs=1e-3)
    assert stats.wilson(0, 0) == (None, None)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=0.001, max_value=1e6), min_size=1, max_size=2000), st.sampled_from([0.5, 0.95, 0.99]))
def test_sketch_within_relative_error_of_exact(values, q):
    h = stats.LogHistogram(0.01)
    for v in values:
        h.add(v)
    exact = stats.nearest_rank(sorted(values), q)
    assert h.quantile(q) == pytest.approx(exact, rel=0.0101)


def test_vif_independent_vs_bursty():
    rng = random.Random(1)
    indep = []
    for _ in range(60):
        g = sum(rng.random() < 0.9 for _ in range(50))
        indep.append((g, 50))
    v = stats.dispersion_vif(indep)
    assert v is not None and v < 2
    bursty = [(50, 50) if rng.random() < 0.9 else (0, 50) for _ in range(60)]
    assert stats.dispersion_vif(bursty) > 10
    assert stats.dispersion_vif(indep[:5]) is None  # too few batches to say
