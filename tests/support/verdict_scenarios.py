"""Seeded bursty-outcome scenarios for the verdict, shared by tests/unit/core/test_verdict_bursts.py
and bench/audit_verdict.py.

Scenario definition (docs/statistics.md): a two-state Markov chain over requests. In the good
state a request is good with probability ``p_good``, in the bad state with ``p_bad``. Bad-state
sojourns are geometric with mean ``L`` requests; the entry probability is set so that the
long-run good fraction is ``long_run``; the chain starts in its stationary distribution. One
request every 0.3 s; the verdict is checked after every request. ``L = 0`` means independent
outcomes at ``long_run``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tui.core.snapshot import FAIL, PASS
from tui.core.verdict import LevelJudge, MixtureTest

INTERVAL_S = 0.3
MIN_WINDOW_S = 600.0


@dataclass(frozen=True)
class Scenario:
    name: str
    long_run: float
    L: float = 0.0  # mean bad-state sojourn in requests; 0 = independent
    p_good: float = 0.99
    p_bad: float = 0.0

    def chain(self) -> tuple[float, float]:
        """(probability of entering the bad state per request, of leaving it)."""
        if self.L <= 0:
            return 0.0, 1.0
        pi_bad = (self.p_good - self.long_run) / (self.p_good - self.p_bad)
        leave = 1.0 / self.L
        return pi_bad * leave / (1.0 - pi_bad), leave


def outcomes(sc: Scenario, n: int, seed: int):
    rng = random.Random(seed)
    r = rng.random
    if sc.L <= 0:
        p = sc.long_run
        for _ in range(n):
            yield r() < p
        return
    enter, leave = sc.chain()
    pi_bad = enter / (enter + leave)
    bad = r() < pi_bad
    pg, pb = sc.p_good, sc.p_bad
    for _ in range(n):
        if bad:
            yield r() < pb
            if r() < leave:
                bad = False
        else:
            yield r() < pg
            if r() < enter:
                bad = True


@dataclass(frozen=True)
class RunResult:
    first_pass_n: int | None  # first request count at which PASS was shown
    first_fail_n: int | None
    window_state: str | None  # the state at the first check with a complete window
    final_state: str


def judge_for(target: float = 0.95, alpha: float = 0.05, min_window_s: float = MIN_WINDOW_S) -> LevelJudge:
    test = MixtureTest(target, alpha)
    return LevelJudge(test, min_window_s=min_window_s, min_requests=test.min_requests_to_pass())


def run_one(sc: Scenario, n: int, seed: int, stop_on: str | None = None, target: float = 0.95) -> RunResult:
    """Feed ``n`` outcomes (one every 0.3 s) to a fresh judge, checking the state after each."""
    j = judge_for(target)
    add = j.add
    first_pass = first_fail = None
    window_state = None
    i = 0
    for good in outcomes(sc, n, seed):
        i += 1
        add(i * INTERVAL_S, good)
        st = j.state
        if st == PASS:
            if first_pass is None:
                first_pass = i
                if stop_on == PASS:
                    break
        elif st == FAIL:
            if first_fail is None:
                first_fail = i
                if stop_on == FAIL:
                    break
        if window_state is None and j.window_complete:
            window_state = st
    return RunResult(first_pass, first_fail, window_state, j.state)


# name -> (scenario, kind, issue target, horizon cap in requests or None)
SCENARIOS = {
    "iid95": (Scenario("independent p=0.95", 0.95), "false_pass", "<= 5%", None),
    "L10": (Scenario("episodes L=10, p_bad=0", 0.95, 10), "false_pass", "<= 5%", None),
    "L30half": (Scenario("episodes L=30, p_bad=0.5", 0.95, 30, p_bad=0.5), "false_pass", "<= 5%", None),
    "L30": (Scenario("episodes L=30, p_bad=0", 0.95, 30), "false_pass", "<= 15%", None),
    "L100": (Scenario("episodes L=100, p_bad=0", 0.95, 100), "false_pass", "reported, not promised", None),
    "iid96": (Scenario("independent p=0.96", 0.96), "false_fail", "<= 5%", None),
    "short97": (Scenario("episodes L=10, p_bad=0, good state 0.995, long-run 0.97", 0.97, 10, p_good=0.995),
                "false_fail", "<= 10%", None),
    "iid99": (Scenario("independent p=0.99", 0.99), "power_window", ">= 90%", 2100),
    "iid97": (Scenario("independent p=0.97", 0.97), "power_pass", ">= 50% within 15 min", 3000),
    "half": (Scenario("independent p=0.5", 0.5), "power_fail", "FAIL within about a minute", 1000),
}
