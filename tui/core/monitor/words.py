"""A level's verdict in words, from its judge (``verdict_from_judge``): the reason every view shows."""

from __future__ import annotations

import math

import tui.core.advice as advice
from tui.core.monitor.config import MonitorConfig
from tui.core.slos import Slos
from tui.core.snapshot import (
    Verdict,
)
from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED
from tui.core.textfmt import fmt_minutes, fmt_span
from tui.core.verdict import LevelJudge


def _episode_note(judge: LevelJudge) -> str:
    """What the window cannot rule out (issue 8): failure episodes that have not happened yet."""
    k, longest_s, longest_n = judge.episode_summary()
    period = judge.unseen_episode_period_s()
    if k == 0 and judge.outage_summary()[0]:
        seen = "No run of 3 or more not-good requests seen (the outage held fewer)"
    elif k == 0:
        seen = "No failure episodes seen (runs of 3 or more not-good requests)"
    else:
        seen = (f"{k} failure episode{'s' if k != 1 else ''} seen, longest {longest_s:.0f} s "
                f"({longest_n} requests)")
    if not judge.episodes_exact:
        seen += " (aggregated counts: episodes inside them not counted)"
    if period is None:
        return seen + "."
    return f"{seen}; episodes rarer than one per ~{fmt_minutes(period)} are not ruled out: run longer."


def verdict_from_judge(judge: LevelJudge, cfg: MonitorConfig, unjudged: int = 0) -> Verdict:
    """The verdict of one level's judge in words. ``unjudged``: requests not judgeable on an SLO in force (the
    judge counts them good, so that a FAIL holds even if they were; they are never shown as good: the good fraction
    in the reason is the one every view shows, and they are named beside it)."""
    n = judge.n
    good = judge.good - unjudged  # what every view shows as good
    elapsed = judge.covered  # the window as judged: time in which measured requests were flowing
    span = judge.elapsed
    state = judge.state
    need_n = max(0, judge.min_requests - n)
    need_s = max(0.0, judge.min_window_s - elapsed)
    parts = []
    if judge.failing and state != FAIL:
        # advice that decides soonest: the evidence already shows FAIL, only the 60-s minimum is missing
        parts.append(f"FAIL in about {fmt_minutes(max(1.0, judge.fail_min_s - elapsed))} if this holds")
    else:
        if need_n:
            parts.append(f"need {need_n} more requests")
        if need_s > 0:
            parts.append(f"{fmt_minutes(need_s)} more" if parts else f"need {fmt_minutes(need_s)} more")
    missing = ", ".join(parts) or None
    gaps = ""
    if span - elapsed > max(1.0, 0.05 * span):
        gaps = (f" Requests were flowing for {fmt_span(elapsed)} of the {fmt_span(span)} span: stretches "
                "with nothing in flight count only up to 10 send gaps each.")
    v = judge.vif
    n_eff = judge.n_eff
    bursty = judge.vif_point is not None and judge.vif_point >= 2.0  # the point estimate, not the bound
    pct = 100.0 * good / n
    if unjudged:  # "0.0% (0/4; 2 more not judgeable ...)": never a fraction that contradicts the table's
        counted = f"{good}/{n} good; {unjudged} not judgeable on an SLO, counted good only for FAIL"
    else:
        counted = f"{good}/{n}"
    outages = advice.outage_text(judge)  # what made the outcomes dependent, named (issue 37)
    if state == INSUFFICIENT_WINDOW and v <= 1.0:
        corr = ""
    elif v > 1.0:
        corr = ((f" {outages}." if outages else " Outcomes are bursty." if bursty else "")
                + f" Dependence correction: counts divided by {v:.1f} (upper 95% bound of the batch-means variance "
                f"ratio), effective n = {n_eff:.0f}.")
    else:
        corr = " No dependence correction yet (needs 45 s of batches with both outcomes)."
    test = f"(anytime-valid test, alpha {cfg.alpha:g})"
    more = judge.minutes_more_needed() if state == UNDECIDED else None
    if state == FAIL:
        reason = (f"good fraction {pct:.1f}% ({counted}): the evidence shows it is below the "
                  f"{cfg.target:.0%} target {test}.{corr}")
    elif state == INSUFFICIENT_WINDOW:
        lean = (" The evidence already shows FAIL; FAIL needs at least "
                f"{fmt_minutes(judge.fail_min_s)} of data." if judge.failing
                else " Evidence so far favours PASS." if judge.passing else "")
        reason = (f"good fraction {pct:.1f}% on {n} requests{f' ({counted})' if unjudged else ''} over "
                  f"{fmt_span(elapsed)}: too few to judge "
                  f"the {cfg.target:.0%} target honestly.{lean}{corr}{gaps}")
    elif state == PASS:
        reason = (f"good fraction {pct:.1f}% ({counted}): the evidence shows it is at or above the "
                  f"{cfg.target:.0%} target {test}.{corr} {_episode_note(judge)}")
    else:
        reason = (f"good fraction {pct:.1f}% ({counted}): not yet enough evidence either way; "
                  f"keep the load running.{corr} {_episode_note(judge)}")
        hourly = advice.minutes_with_recurring_outages(judge) if outages and v > 1.0 else None
        if hourly is not None:
            reason += " " + advice.recurring_text(hourly, judge)
        elif more is not None and more > 0 and v > 1.0:
            when = (f"about {math.ceil(more - 1e-9)} more minutes" if more <= 24 * 60
                    else "more than a day more")
            reason += (f" Failures arrive in bursts: {when} at this rate "
                       f"(until the effective n reaches what PASS needs, if the fraction holds).")
    slos = cfg.slos
    if slos.ttft_ms is None or slos != Slos(ttft_ms=slos.ttft_ms):  # more than the TTFT SLO alone (the default)
        reason += f" Good = completed AND {slos.describe()}."
    e_pass, e_fail = judge.e_values()
    k, longest_s, _ = judge.episode_summary()
    return Verdict(
        state=state, reason=reason, missing=missing if state == INSUFFICIENT_WINDOW else None, n=n, good=good,
        elapsed_s=elapsed, need_requests=need_n, need_seconds=need_s,
        e_pass=e_pass, e_fail=e_fail, threshold=judge.test.threshold,
        vif=v, n_eff=n_eff, bursty=bursty,
        decided_at_n=judge.state_since_n if state in (PASS, FAIL) else None,
        target=cfg.target, alpha=cfg.alpha,
        episodes=k, longest_episode_s=longest_s, unseen_episode_period_s=judge.unseen_episode_period_s(),
        minutes_more=more, vif_point=judge.vif_point, slos=slos.describe(),
    )

