"""The dependence advice in words a person can act on (standard library only): the outages a level's judge saw
(``tui.core.verdict.LevelJudge.outage_summary``: an episode of 3 or more not-good requests, or a run of not-good
outcomes that lasted a batch, such as a server freeze holding a single request) and the time PASS would need if
outages like the longest recurred every hour (a stated assumption; one outage says nothing of how often they come).
"""

from __future__ import annotations

import math

from tui.core.textfmt import fmt_minutes
from tui.core.verdict import LevelJudge

__all__ = ["NOTABLE_S", "minutes_with_recurring_outages", "outage_text", "recurring_text"]

#: outages are named when they hold at least half of the not-good requests, or when one lasted this long
NOTABLE_S = 60.0


def minutes_with_recurring_outages(judge: LevelJudge, every_s: float = 3600.0) -> float | None:
    """Minutes more a run needs to reach PASS if outages like the longest one seen recurred once every ``every_s``
    (a stated assumption: one outage seen says nothing about how often they come) and the rest held: per
    ``every_s`` the requests at the observed rate, the longest outage's not-good requests and the not-good rate
    seen outside outages; outcomes dependent in clusters of that outage's size (counts divided by it).
    ``math.inf`` when such outages alone keep the good fraction at or below the target; None with no outage or
    no rate."""
    k, _s, m, in_out = judge.outage_summary()
    n, el = judge.n, judge.elapsed
    if k == 0 or n == 0 or el <= 0:
        return None
    rate = n / el
    per = rate * every_s
    base_bad = max(0, (n - judge.good) - in_out) / n
    p = 1.0 - base_bad - m / per
    if p <= judge.test.target:
        return math.inf
    v = max(1.0, float(m))
    test, thr = judge.test, math.log(judge.test.threshold)

    def ok(x: int) -> bool:
        return test.log_e_pass(p * x / v, (1 - p) * x / v) >= thr

    need = LevelJudge._gallop(ok, 1, limit=1 << 34)
    if need >= 1 << 34:
        return math.inf
    return max(0.0, (need - n) / rate / 60.0)


def outage_text(judge: LevelJudge) -> str:
    """"One outage of 120 s: 1 request not good" / "Outcomes are bursty: 3 outages, the longest 120 s with 4 requests not good (9 in
    all)"; "" when none was seen (tui.core.verdict: an episode, or a run of not-good outcomes lasting a batch) or
    when they explain little (under half of the not-good requests and none of NOTABLE_S or longer)."""
    k, longest_s, longest_n, total = judge.outage_summary()
    if k == 0 or not (2 * total >= judge.n - judge.good or longest_s >= NOTABLE_S):
        return ""  # outcomes bursty for other reasons: short clusters among many scattered failures
    req = f"{longest_n} request{'s' if longest_n != 1 else ''} not good"
    if k == 1:
        return f"One outage of {longest_s:.0f} s: {req}"
    return f"Outcomes are bursty: {k} outages, the longest {longest_s:.0f} s with {req} ({total} not good in all)"


def recurring_text(minutes: float, judge: LevelJudge) -> str:
    """The advice a person can act on: the time PASS needs if outages like the longest recurred every hour."""
    if math.isinf(minutes):
        per_hour = judge.n / max(judge.elapsed, 1e-9) * 3600.0
        _k, _s, m, _t = judge.outage_summary()
        return (f"With an outage like it every hour ({m} of about {per_hour:.0f} requests an hour not good, with the "
                "rest as seen) the target is out of reach: find and remove its cause.")
    like = "an outage like it" if judge.outage_summary()[0] == 1 else "an outage like the longest"
    if minutes <= 0:
        return (f"With {like} every hour the requests already seen would suffice: the correction comes from few "
                "batches around the outage; keep the load running until it is measured on more.")
    return (f"With {like} every hour the target needs about {fmt_minutes(minutes * 60.0)} more "
            "(more if it recurs more often; a longer run shows how often it comes).")
