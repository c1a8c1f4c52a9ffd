"""Issue 37: the dependence advice names what it saw. One 120-s server freeze (a single request held) made the
outcomes look dependent; the advice said "Outcomes are bursty ... about 206 more minutes", misnaming a single outage
and giving a figure nobody could act on. Now it names the outages (count, longest duration, requests in them) and
gives the time PASS needs if outages like it recurred every hour (a stated assumption). Seeded simulations."""

from __future__ import annotations

import random

from tui.core import advice
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records.parse import parse_object

T0 = 1_767_225_600.0


def _run(n: int, slow_p: float, freezes: dict[int, tuple[float, int]], seed: int = 1):
    """Closed loop, one request in flight: ~0.56 s per request, ``slow_p`` of them over the 1 s TTFT SLO; at each
    index of ``freezes`` the server freezes for (seconds, requests held not good)."""
    rnd = random.Random(seed)
    mon = Monitor(MonitorConfig())
    mon.add(parse_object({"type": "run", "schema_version": 1, "load": {"mode": "closed", "levels": [1]},
                          "synthetic": False}))
    t, i, k = T0, 0, 0
    while k < n:
        held = freezes.get(i)
        for _j in range(held[1] if held else 1):
            dur, ttft = (0.55, 0.3) if rnd.random() >= slow_p else (1.4, 1.2)
            if held:  # each held request over the SLO (its first token after 1 s)
                dur = held[0] / held[1]
                ttft = max(1.05, dur - 0.1)
                assert dur >= ttft
            mon.add(parse_object({"type": "request", "id": f"r{k}", "t_sent": t, "t_first_token": t + ttft,
                                  "t_end": t + dur, "complete": True, "level": 1, "round": 1, "phase": "measure",
                                  "output_tokens": 10}))
            t += dur + 0.01
            k += 1
        i += 1
    mon.finish()
    st = next(iter(mon.levels.values()))
    return mon.level_rows()[0].verdict, st.judge


def test_one_freeze_is_named_as_one_outage_with_an_actionable_figure():
    v, judge = _run(1300, 0.04, {500: (120.0, 1)})
    assert v.state == "UNDECIDED"
    assert "One outage of 120 s: 1 request not good" in v.reason
    assert "Outcomes are bursty" not in v.reason and "Failures arrive in bursts" not in v.reason
    assert "With an outage like it every hour the target needs about" in v.reason
    minutes = advice.minutes_with_recurring_outages(judge)
    assert minutes is not None and 0 < minutes < 24 * 60  # a figure a person can act on


def test_several_outages_are_counted_with_the_longest_and_the_total():
    _v, judge = _run(1300, 0.0, {300: (40.0, 1), 700: (90.0, 4), 1000: (20.0, 2)})
    assert judge.outage_summary()[0] == 3
    text = advice.outage_text(judge)
    assert text.startswith("Outcomes are bursty: 3 outages, the longest 90 s with 4 requests not good (7 not good in all)"), text


def test_an_outage_that_alone_breaks_the_target_every_hour_is_out_of_reach():
    """An outage holding 400 requests not good: once an hour it alone costs more than 5% of an hour's requests."""
    v, judge = _run(1300, 0.0, {600: (800.0, 400)})
    assert advice.minutes_with_recurring_outages(judge) == float("inf")
    assert "out of reach" in advice.recurring_text(float("inf"), judge)
    assert v.state in ("FAIL", "UNDECIDED")


def test_slow_requests_without_a_freeze_are_not_outages():
    _v, judge = _run(1300, 0.04, {})
    assert judge.outage_summary()[0] == 0 and advice.outage_text(judge) == ""


def test_a_short_cluster_among_many_scattered_failures_is_not_named():
    """A 4-s cluster of 3 not-good requests in a level whose 80 failures are scattered: "bursty", not "one outage"."""
    _v, judge = _run(1300, 0.06, {600: (4.0, 3)})
    assert judge.outage_summary()[0] >= 1 and advice.outage_text(judge) == ""


def test_the_evidence_collected_is_never_rounded_up():
    """issue 37: the live console said "100.0% on 74 requests over 2 min" at elapsed 1:06: a duration of evidence is
    never rounded up (a time still needed is)."""
    from tui.core.monitor import verdict_from_judge
    from tui.core.textfmt import fmt_minutes, fmt_span
    from tui.core.verdict import LevelJudge, MixtureTest

    assert fmt_span(66.0) == "1 min 6 s" and fmt_minutes(66.0) == "2 min"
    assert fmt_span(59.9) == "59 s" and fmt_span(700.0) == "11 min" and fmt_span(float("nan")) == "an unknown time"
    judge = LevelJudge(MixtureTest(0.95, 0.05), min_window_s=600.0, min_requests=10)
    for i in range(74):
        judge.add(T0 + i * 66.0 / 73, True, T0 + i * 66.0 / 73 - 0.2)
    v = verdict_from_judge(judge, MonitorConfig())
    assert "on 74 requests over 1 min 6 s" in v.reason, v.reason
