"""The Fréchet bound on the share of requests meeting several SLOs (tui.core.watch.combine), at its edges."""

from __future__ import annotations

import pytest

from tui.core.records.watch import INF, Window
from tui.core.watch.combine import combined_counts, frechet, window_shares


def test_frechet_edges():
    assert frechet([], []) == (1.0, 1.0)
    assert frechet([0.97], [0.97]) == (0.97, 0.97)  # one SLO: the bound is the share itself
    lo, hi = frechet([0.97, 0.97], [0.97, 0.97])
    assert lo == pytest.approx(0.94) and hi == pytest.approx(0.97)
    assert frechet([0.5, 0.4], [0.5, 0.4]) == (0.0, 0.4)  # sum - (k - 1) below 0: clipped at 0
    lo, hi = frechet([0.99, 0.99, 0.99], [1.0, 0.995, 1.0])
    assert lo == pytest.approx(0.97) and hi == 0.995
    assert frechet([1.0, 1.0], [1.0, 1.0]) == (1.0, 1.0)
    lo, hi = frechet([0.9, 0.9], [0.6, 1.0])  # never lo > hi
    assert lo <= hi


def _w(**kw):
    return Window(t_start=0.0, t_end=600.0, engine="vllm", source="metrics", **kw)


def test_missing_histogram_is_unjudgeable_zero_to_one():
    w = _w(ttft=((1.0, 100.0), (INF, 100.0)), failed=0.0)
    shares, total = window_shares(w, [("TTFT", 1000.0), ("E2E", 1000.0)])
    assert total == 100 and not shares[1].judgeable and (shares[1].lo, shares[1].hi) == (0.0, 1.0)
    g_lo, g_hi, n, exact, _ = combined_counts(w, [("TTFT", 1000.0), ("E2E", 1000.0)])
    assert (g_lo, g_hi, n, exact) == (0, 100, 100, False)


def test_itl_gap_arithmetic():
    # 100 requests, 900 gaps of which 30 certainly over 1 s and 10 more between the 0.5 and 1.0 bounds
    w = _w(ttft=((1.0, 100.0), (INF, 100.0)), failed=0.0,
           itl=((0.5, 860.0), (1.0, 870.0), (INF, 900.0)))
    (itl,), total = window_shares(w, [("ITL", 750.0)])
    assert itl.lo == pytest.approx((100 - 40) / 100)  # 40 gaps possibly over: at most 40 requests miss
    assert itl.hi == pytest.approx(99 / 100)  # a gap certainly over: at least one request misses
    (itl2,), _ = window_shares(w, [("ITL", 5000.0)])
    assert itl2.lo == pytest.approx(0.7) and itl2.hi == pytest.approx(1.0)  # 30 gaps possibly over +Inf bucket


def test_failed_requests_are_misses_of_every_slo():
    w = _w(ttft=((1.0, 90.0), (INF, 90.0)), failed=10.0, e2e=((1.0, 90.0), (INF, 90.0)))
    g_lo, g_hi, n, _exact, shares = combined_counts(w, [("TTFT", 1000.0), ("E2E", 1000.0)])
    assert n == 100 and [s.lo for s in shares] == [pytest.approx(0.9), pytest.approx(0.9)]
    assert (g_lo, g_hi) == (80, 90)
