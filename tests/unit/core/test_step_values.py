"""The Monitor's values past its exact cap reach the step percentiles in batches (``StepValues.fold``,
``StepQuantiles.extend``): the same histogram as one ``add`` per value, whatever the values (NaN, infinities,
zeros, negatives) and wherever the batches are cut."""

from __future__ import annotations

import math
import random

from tui.core.completeness import StepValues
from tui.core.stepstats import StepQuantiles


def _values(rng: random.Random, n: int) -> list[float]:
    special = [math.nan, math.inf, -math.inf, 0.0, 1e-12, -1e-12, -0.5, 1e-9, -1e-9]
    return [rng.choice(special) if rng.random() < 0.2 else rng.lognormvariate(-2, 2) * rng.choice((1, -1))
            for _ in range(n)]


def _state(q: StepQuantiles) -> tuple:
    return (q.n, dict(q._pos), dict(q._neg), q._zeros, q._pinf, q._ninf, q.approximate)


def test_extend_is_add_one_by_one():
    rng = random.Random(38)
    for cap in (0, 5, 50):
        vals = _values(rng, 300)
        one, many = StepQuantiles(cap=cap), StepQuantiles(cap=cap)
        for v in vals:
            one.add(v)
        many.extend(vals[:7])
        many.extend(vals[7:])
        assert _state(one) == _state(many)
        qs = (0.01, 0.5, 0.95, 0.99, 1.0)
        a, b = one.quantiles(qs), many.quantiles(qs)
        assert all((x == y) or (x != x and y != y) for x, y in zip(a, b))


def test_step_values_fold_pending_values_when_read_and_stay_bounded():
    rng = random.Random(7)
    vals = _values(rng, 3 * StepValues.FOLD_AT + 11)
    sv = StepValues()
    ref = StepQuantiles(cap=0)
    for v in vals:
        sv.add_ttft(v)
        sv.lateness_more.append(v)  # the hot path's form: an append, folded at FOLD_AT
        if len(sv.lateness_more) >= StepValues.FOLD_AT:
            sv.fold()
        ref.add(v)
        assert len(sv.ttft_more) < StepValues.FOLD_AT and len(sv.lateness_more) < StepValues.FOLD_AT
    assert sv.ttft_more  # some values still pending: reading folds them
    assert sv.ttft_over is not None and sv.lateness_over is not None
    assert _state(sv.ttft_over) == _state(ref) == _state(sv.lateness_over)
    assert not sv.ttft_more and not sv.lateness_more
    assert StepValues().ttft_over is None
