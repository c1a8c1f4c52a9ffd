"""tui.core.plan: the bracket rule, replicas, demand windows, the anchor rule, the exit decision."""

from __future__ import annotations

import pytest

from tui.core import plan as P


def lv(level: float, state: str, rps: float | None = None, delivered: bool = True, n: int = 100,
       good: int = 100) -> P.LevelEvidence:
    return P.LevelEvidence(level, state, n, good, level if rps is None else rps, 32.0, delivered)


def test_bracket_is_highest_pass_below_the_first_fail():
    b = P.capacity_bracket([lv(1, "PASS"), lv(2, "PASS"), lv(4, "FAIL"), lv(8, "FAIL")], "open", "req/s")
    assert (b.lo_rate, b.hi_rate) == (2, 4) and not b.notes


def test_undecided_upper_end_is_said_and_undelivered_is_never_an_end():
    b = P.capacity_bracket([lv(1, "PASS"), lv(2, "PASS", delivered=False), lv(3, "UNDECIDED"), lv(4, "FAIL")],
                           "open", "req/s")
    assert (b.lo_rate, b.hi_rate) == (1, 3)
    assert any("not delivered" in n for n in b.notes) and any("UNDECIDED" in n for n in b.notes)


def test_a_pass_above_a_fail_is_non_monotonic():
    b = P.capacity_bracket([lv(1, "PASS"), lv(2, "FAIL"), lv(4, "PASS")], "open", "req/s")
    assert (b.lo_rate, b.hi_rate) == (1, 2) and any(n.startswith("non-monotonic") for n in b.notes)


def test_closed_loop_ends_are_the_measured_throughput():
    b = P.capacity_bracket([lv(2, "PASS", rps=1.0), lv(4, "FAIL", rps=1.6)], "closed", "concurrency")
    assert (b.lo_rate, b.hi_rate) == (1.0, 1.6)
    assert any("Little's law at the lower end: concurrency 2 / 1 req/s measured = 2 s" in n for n in b.notes)


@pytest.mark.parametrize("rate, per, want", [(20, 10, 2), (20.0001, 10, 3), (0, 10, 0), (0.1, 10, 1), (5, None, None)])
def test_replicas_for(rate, per, want):
    assert P.replicas_for(rate, per) == want


def test_demand_windows_merge_a_short_tail_and_refuse_a_short_trace():
    offsets = [i * 0.5 for i in range(0, 261)]  # 0 .. 130 s, 2 req/s
    ws = P.demand_windows(offsets, 60.0)
    assert [(w.start_s, w.end_s) for w in ws] == [(0.0, 60.0), (60.0, 130.0)]  # the 10-s tail joins the last
    assert sum(w.arrivals for w in ws) == len(offsets)
    with pytest.raises(ValueError, match="less than one demand window"):
        P.demand_windows([0.0, 10.0], 60.0)


def _inputs(levels, peak=10.0, **kw) -> P.PlanInputs:
    return P.PlanInputs(levels=levels, bracket=P.capacity_bracket(levels, "open", "req/s"), peak_rate=peak,
                        peak_from="--peak-rate", workload="single requests", slos="TTFT <= 1000 ms", sources=["f"],
                        **kw)


def test_anchor_rule_uses_the_highest_throughput_whatever_its_verdict():
    levels = [lv(1, "PASS"), lv(2, "PASS"), lv(4, "FAIL", rps=3.0, good=10)]
    doc = P.build_plan(_inputs(levels, peak=10.0))
    a = doc["anchor_rule"]
    assert a["throughput_per_replica"] == 3.0 and a["replicas"] == 4 and a["good_fraction_there"] == 0.1
    assert doc["replicas_needed"] == {"low": 3, "high": 5}  # ceil(10 / 4), ceil(10 / 2)
    assert "falls short of the 5" in a["why_different"] and "1.50x" in a["why_different"]


@pytest.mark.parametrize("kw, code", [
    ({}, 0),
    ({"synthetic": True}, 3),
    ({"synthetic_demand": True}, 3),
    ({"not_acceptance_grade": ["window 0.1 min"]}, 3),
    ({"trace_lengths": (500.0, 32.0), "evidence_lengths": (100.0, 32.0)}, 3),
])
def test_exit_decision(kw, code):
    levels = [lv(1, "PASS"), lv(2, "PASS"), lv(4, "FAIL")]
    assert P.build_plan(_inputs(levels, **kw))["exit"]["code"] == code


def test_no_pass_at_all():
    fail = P.build_plan(_inputs([lv(1, "FAIL"), lv(2, "FAIL")]))
    assert fail["exit"]["code"] == 1 and fail["replicas_needed"] == {"low": 10, "high": None}
    undecided = P.build_plan(_inputs([lv(1, "UNDECIDED")]))
    assert undecided["exit"]["code"] == 3 and undecided["replicas_needed"] == {"low": None, "high": None}
