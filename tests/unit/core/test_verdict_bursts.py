"""The verdict stays honest when failures come in bursts.

Drives the verdict engine (tui.core.verdict.LevelJudge, the code the Monitor uses) directly over the
seeded scenarios of tests/support/verdict_scenarios.py: a two-state Markov chain over requests, one request
every 0.3 s, the state checked after every request, 15-minute horizon, RUNS runs per scenario.
Each rate is asserted against the issue's target plus two standard errors of a RUNS-run estimate.
The 2,000-run figures (and the 60-minute horizon) come from bench/audit_verdict.py (docs/statistics.md).
"""

import math

import pytest

from tests.support.verdict_scenarios import INTERVAL_S, SCENARIOS, judge_for, outcomes, run_one
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord
from tui.core.snapshot import FAIL, PASS

RUNS = 300
HORIZON = 3000  # 15 min at one request every 0.3 s


def _se(p: float) -> float:
    return math.sqrt(p * (1 - p) / RUNS)


def _rate(key: str, pred, stop) -> float:
    sc, _, _, cap = SCENARIOS[key]
    n = HORIZON if cap is None else min(HORIZON, cap)
    return sum(pred(run_one(sc, n, seed, stop_on=stop)) for seed in range(RUNS)) / RUNS


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@pytest.mark.parametrize("key,limit", [("iid95", 0.05), ("L10", 0.05), ("L30half", 0.05), ("L30", 0.15)])
def test_false_pass_shown_at_any_check_is_bounded(key, limit):
    rate = _rate(key, lambda r: r.first_pass_n is not None, PASS)
    assert rate <= limit + 2 * _se(limit), rate


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@pytest.mark.parametrize("key,limit", [("iid96", 0.05), ("short97", 0.10)])
def test_false_fail_shown_at_any_check_is_bounded(key, limit):
    rate = _rate(key, lambda r: r.first_fail_n is not None, FAIL)
    assert rate <= limit + 2 * _se(limit), rate


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_power_p99_passes_at_window_completion():
    rate = _rate("iid99", lambda r: r.window_state == PASS, None)
    assert rate >= 0.90 - 2 * _se(0.90), rate


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_power_p97_passes_within_15_minutes():
    rate = _rate("iid97", lambda r: r.first_pass_n is not None, PASS)
    assert rate >= 0.50 - 2 * _se(0.50), rate


def test_half_failing_server_fails_within_about_a_minute():
    sc, _, _, cap = SCENARIOS["half"]
    times = [(run_one(sc, cap, seed, stop_on=FAIL).first_fail_n or 10**9) * INTERVAL_S for seed in range(100)]
    assert max(times) <= 75.0, max(times)


def test_monitor_path_and_engine_agree_run_by_run():
    """The Monitor (records, outcomes, its judge, its timeline) and the engine fed the same outcomes
    see the same state after every request, run by run."""
    sc = SCENARIOS["L10"][0]
    for seed in range(12):
        j = judge_for()
        mon = Monitor(MonitorConfig(min_window_s=600.0))
        engine_changes = []
        prev = None
        for i, good in enumerate(outcomes(sc, 2400, seed), start=1):
            t = i * INTERVAL_S
            j.note_start(t - 1.5)  # the request's t_sent below
            j.add(t, good)
            if j.state != prev:
                engine_changes.append((j.state, i, t))
                prev = j.state
            ttft = 0.2 if good else 1.4  # slow: not good
            mon.add(RequestRecord(id=f"r{i}", t_sent=t - 1.5, t_end=t, complete=True, t_intended=t - 1.5,
                                  t_first_token=t - 1.5 + ttft, level=4, output_tokens=8))
        snap = mon.snapshot()
        assert [(s, n, t) for _, _, s, n, t in snap.timeline] == engine_changes, seed
        assert snap.verdict.state == j.state and snap.verdict.vif == j.vif and snap.verdict.n == j.n


def test_engine_is_cheap_per_request():
    """Not a timing assertion: the number of e-process evaluations stays far below the request count."""
    sc = SCENARIOS["L30"][0]
    j = judge_for()
    calls = [0]
    orig_p, orig_f = j.test.log_e_pass, j.test.log_e_fail

    class Counting:
        target, threshold = j.test.target, j.test.threshold

        def log_e_pass(self, s, f):
            calls[0] += 1
            return orig_p(s, f)

        def log_e_fail(self, s, f):
            calls[0] += 1
            return orig_f(s, f)

    j.test = Counting()
    for i, good in enumerate(outcomes(sc, 6000, 1), start=1):
        j.add(i * INTERVAL_S, good)
    assert calls[0] < 6000, calls[0]


def _rec(i, t, good, level=4):
    return RequestRecord(id=f"r{i}", t_sent=t - 1.0, t_end=t, complete=True, t_intended=t - 1.0,
                         t_first_token=t - (0.8 if good else -0.5), level=level, output_tokens=8)


def test_report_timeline_and_exit_code_follow_the_state_at_the_end():
    from tui.core.exitcodes import ExitCode
    from tui.core.report import build_report, format_report

    mon = Monitor(MonitorConfig(min_window_s=600.0))
    i = 0
    for _ in range(2400):  # 12 min of good requests at 0.3 s (a few scattered slow ones): PASS
        i += 1
        mon.add(_rec(i, i * INTERVAL_S, i % 97 != 0))
    assert mon.snapshot().verdict.state == PASS
    for _ in range(400):  # then a burst: two minutes, all slow
        i += 1
        mon.add(_rec(i, i * INTERVAL_S, False))
    rep = build_report(mon.snapshot())
    tl = rep["timeline"]
    assert all(set(e) == {"level", "round", "state", "n", "t"} for e in tl)
    assert tl[0]["state"] == "INSUFFICIENT_WINDOW" and tl[0]["n"] == 1
    states = [e["state"] for e in tl]
    assert "PASS" in states and states[-1] != "PASS"  # not latched
    assert [e["n"] for e in tl] == sorted(e["n"] for e in tl)
    assert rep["measured"]["verdict"]["state"] == states[-1] and rep["timeline_omitted"] == 0
    if states[-1] != "FAIL":
        assert rep["exit_code"] == ExitCode.INSUFFICIENT
    assert "also saw PASS" in format_report(rep)


def test_timeline_is_bounded_keeping_the_first_and_the_last_changes(monkeypatch):
    from collections import deque

    import tui.core.monitor.state as mm

    monkeypatch.setattr(mm, "TIMELINE_HEAD", 3)
    mon = Monitor(MonitorConfig(min_window_s=0.0))
    mon._timeline_tail = deque(maxlen=2)
    for level in range(1, 9):  # each level's first check is a state change
        mon.add(_rec(level, float(level), True, level=level))
    tl = mon.snapshot().timeline
    assert [e[0] for e in tl] == [1, 2, 3, 7, 8] and mon.timeline_omitted == 3
