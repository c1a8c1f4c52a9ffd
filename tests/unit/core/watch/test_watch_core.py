"""Watch mode, pure logic: deltas, resets, brackets, the queue rule, sequential judging."""

from __future__ import annotations

import math
import random

import pytest

from tui.core import watch as W
from tui.core.slos import Slos
from tui.core.snapshot import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED

INF = math.inf
BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, INF)


def hist(counts_by_bound: dict) -> tuple:
    """Cumulative buckets from per-bound (non-cumulative) counts."""
    out, run = [], 0.0
    for le in BOUNDS:
        run += counts_by_bound.get(le, 0)
        out.append((le, run))
    return tuple(out)


def cum(t, ttft, failed=0.0, waiting=0.0, engine="vllm", qt=None):
    return W.Cumulative(t=t, engine=engine, ttft=ttft, e2e=None, queue_time=qt, success=ttft[-1][1] if ttft else None,
                        failed=failed, preemptions=0.0, waiting=waiting, running=1.0, kv_cache=0.5)


def test_bracket_exact_when_slo_is_a_bound():
    b = hist({0.1: 50, 0.5: 40, 1.0: 5, 2.5: 5})
    br = W.good_bracket(b, 1.0)
    assert br.exact and br.lo == pytest.approx(0.95) and br.hi == pytest.approx(0.95)


def test_bracket_between_bounds_is_never_interpolated():
    b = hist({0.1: 50, 0.5: 40, 1.0: 5, 2.5: 5})
    br = W.good_bracket(b, 0.75)  # between 0.5 and 1.0
    assert not br.exact
    assert br.lo == pytest.approx(0.90) and br.hi == pytest.approx(0.95)
    assert (br.bound_lo, br.bound_hi) == (0.5, 1.0)
    assert "90.0-95.0%" in br.text()


def test_bracket_counts_aborted_in_denominator():
    b = hist({0.1: 95, 2.5: 5})
    br = W.good_bracket(b, 1.0, failed=5)
    assert br.total == 105 and br.lo == pytest.approx(95 / 105)


def test_bracket_slo_below_first_bound_and_above_last():
    b = hist({0.1: 10, 0.25: 10})
    lo = W.good_bracket(b, 0.05)
    assert lo.lo == 0.0 and lo.hi == pytest.approx(0.5)
    hi = W.good_bracket(b, 100.0)
    assert hi.lo == pytest.approx(1.0) and hi.hi == pytest.approx(1.0) and math.isinf(hi.bound_hi)


def test_delta_and_counter_reset():
    a = cum(0, hist({0.1: 10}))
    b = cum(10, hist({0.1: 30, 2.5: 1}), failed=2)
    w = W.window_between(a, b)
    assert w.reset is None and W.count_of(w.ttft) == 21 and w.failed == 2
    restarted = cum(20, hist({0.1: 3}))
    r = W.window_between(b, restarted)
    assert r.reset is not None and "reset" in r.reset and r.ttft is None


def test_reset_restarts_the_judgement_and_says_so():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000), min_window_s=60, fail_min_s=0)
    j = W.WatchJudgement(cfg)
    j.add(W.Window(0, 30, "vllm", "metrics", ttft=hist({0.1: 500})))
    assert j.n == 500
    j.add(W.Window(30, 30, "vllm", "metrics", reset="counter reset"))
    assert j.n == 0
    v = j.verdict()
    assert v.state == INSUFFICIENT_WINDOW and any("counter reset" in n for n in v.notes)


def test_missing_series_is_a_gap_not_a_zero():
    samples = [("vllm:num_requests_waiting", {"model_name": "m"}, 2.0)]
    c = W.cumulative_from_samples(samples, "vllm", 1.0)
    assert c.ttft is None and any("time_to_first_token" in m and "missing" in m for m in c.missing)
    assert c.waiting == 2.0


def test_nan_bucket_is_a_gap():
    samples = [("vllm:time_to_first_token_seconds_bucket", {"le": "0.1"}, float("nan")),
               ("vllm:time_to_first_token_seconds_bucket", {"le": "+Inf"}, 3.0)]
    c = W.cumulative_from_samples(samples, "vllm", 1.0)
    assert c.ttft is None and any("NaN" in m for m in c.missing)


def test_histogram_summed_over_series():
    samples = []
    for eng in ("0", "1"):
        for le, v in (("0.5", 4.0), ("1.0", 5.0), ("+Inf", 6.0)):
            samples.append(("vllm:time_to_first_token_seconds_bucket", {"le": le, "engine": eng}, v))
    c = W.cumulative_from_samples(samples, "vllm", 0)
    assert c.ttft == ((0.5, 8.0), (1.0, 10.0), (INF, 12.0))


def test_selector_parse_and_match():
    m = W.parse_selector('model_name="a",engine!="1"')
    assert m == [("model_name", "=", "a"), ("engine", "!=", "1")]
    assert W.matches({"model_name": "a", "engine": "0"}, m)
    assert not W.matches({"model_name": "a", "engine": "1"}, m)
    with pytest.raises(ValueError):
        W.parse_selector("model_name=a")


def test_models_seen():
    s = [("vllm:num_requests_waiting", {"model_name": "a"}, 0.0), ("vllm:num_requests_waiting", {"model_name": "b"}, 0.0)]
    assert W.models_seen(s, "vllm") == ["a", "b"]


def test_queue_growth_blocks_pass():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000), min_window_s=60)
    good = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.1: 2000}), waiting_start=0, waiting_end=0)
    assert W.judge_once(good, cfg).state == PASS
    grew = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.1: 2000}), waiting_start=1, waiting_end=40)
    v = W.judge_once(grew, cfg)
    assert v.state == UNDECIDED and v.blocked and "queue grew" in v.reason


def test_queue_time_over_slo_blocks_pass():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000), min_window_s=60)
    # 3% of finished requests queued > 1 s (so their first token came later than 1 s too: queue time is part of
    # TTFT), 97% good: the pessimistic end would PASS, the queue forbids it
    qt = hist({0.1: 1940, 2.5: 60})
    w = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.1: 1940, 2.5: 60}), queue_time=qt, waiting_start=0,
                 waiting_end=0)
    v = W.judge_once(w, cfg)
    assert v.state == UNDECIDED and any("queue time" in b and "3.0%" in b for b in v.blocked), v


def test_queue_buckets_coarser_than_the_slo_are_bounded_by_ttft():
    """vLLM 0.32's queue-time buckets start at 0.3 s (seen live): under a 100 ms SLO the queue histogram alone
    says "up to 100% queued longer than the SLO" for any traffic, so PASS was impossible. Queue time is part of
    TTFT: the TTFT histogram bounds it."""
    cfg = W.WatchConfig(slos=Slos(ttft_ms=100), min_window_s=60)
    qt = ((0.3, 2000.0), (0.5, 2000.0), (INF, 2000.0))
    ok = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.1: 2000}), queue_time=qt, waiting_start=0, waiting_end=0)
    v = W.judge_once(ok, cfg)
    assert v.state == PASS and not v.blocked, v
    # where the TTFT histogram itself leaves room for slow queueing, the bound still blocks
    slow = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.1: 1940, 0.25: 60}), queue_time=qt, waiting_start=0,
                    waiting_end=0)
    v = W.judge_once(slow, cfg)
    assert v.state == UNDECIDED and any("up to 3.0%" in b and "bounded by the TTFT histogram" in b
                                        for b in v.blocked), v


def test_unobservable_queue_blocks_pass():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000), min_window_s=60)
    w = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.1: 2000}))
    assert W.judge_once(w, cfg).state == UNDECIDED


def test_pass_on_pessimistic_fail_on_optimistic():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=750), target=0.95, min_window_s=60, fail_min_s=0)
    # 100% in (0.5, 1.0]: pessimistic 0 %, optimistic 100 %: neither PASS nor FAIL
    w = W.Window(0, 600, "vllm", "prometheus", ttft=hist({1.0: 3000}), waiting_start=0, waiting_end=0)
    assert W.judge_once(w, cfg).state == UNDECIDED
    # all below 0.5: PASS from the pessimistic end
    w2 = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.5: 3000}), waiting_start=0, waiting_end=0)
    assert W.judge_once(w2, cfg).state == PASS
    # half above 1.0: FAIL even on the optimistic end
    w3 = W.Window(0, 600, "vllm", "prometheus", ttft=hist({0.5: 1500, 2.5: 1500}), waiting_start=0, waiting_end=0)
    assert W.judge_once(w3, cfg).state == FAIL


def test_insufficient_window_until_time_and_count():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000), min_window_s=600)
    w = W.Window(0, 300, "vllm", "prometheus", ttft=hist({0.1: 5000}), waiting_start=0, waiting_end=0)
    v = W.judge_once(w, cfg)
    assert v.state == INSUFFICIENT_WINDOW and "min more" in (v.missing or "")


def test_no_ttft_histogram_says_use_probe():
    cfg = W.WatchConfig()
    w = W.Window(0, 600, "llamacpp", "metrics", waiting_start=0, waiting_end=2, running=1)
    v = W.judge_once(w, cfg)
    assert v.state == INSUFFICIENT_WINDOW and W.NO_TTFT_NOTE in v.reason
    d = W.describe_window(w, cfg)
    assert d["ttft"] == W.NOT_EXPOSED and d["waiting"] == 2 and d["running"] == 1


def test_labels_always_present():
    cfg = W.WatchConfig(min_window_s=60)
    v = W.judge_once(W.Window(0, 600, "sglang", "metrics", ttft=hist({0.1: 10})), cfg)
    assert W.SERVER_TTFT_LABEL in v.notes and W.COMPLETION_NOTE in v.notes


def test_record_roundtrip():
    w = W.Window(0, 10, "trtllm", "metrics", ttft=hist({0.1: 3}), failed=1.0, waiting_start=0, waiting_end=1,
                 gaps=("x: series missing",))
    d = W.window_to_record(w)
    import json

    back = W.window_from_record(json.loads(json.dumps(d)))
    assert back == w
    with pytest.raises(ValueError):
        W.window_from_record({"type": "watch", "t_start": 1, "t_end": 0, "engine": "vllm"})


def test_quantile_bracket():
    b = hist({0.1: 50, 0.5: 45, 2.5: 5})
    assert W.quantile_bracket(b, 0.5) == (0.0, 0.1)
    assert W.quantile_bracket(b, 0.95) == (0.25, 0.5)
    assert W.quantile_bracket(b, 0.99) == (1.0, 2.5)


def test_seeded_bracket_never_pass_above_truth():
    """Seeded: with the SLO between bounds, the pessimistic end never exceeds the true fraction
    and the optimistic end never falls below it (the bracket always holds the truth)."""
    rng = random.Random(7)
    for _ in range(200):
        xs = [rng.expovariate(1 / 0.4) for _ in range(rng.randint(1, 400))]
        slo = rng.uniform(0.05, 3.0)
        counts = {}
        for x in xs:
            le = next(b for b in BOUNDS if x <= b)
            counts[le] = counts.get(le, 0) + 1
        br = W.good_bracket(hist(counts), slo)
        truth = sum(1 for x in xs if x <= slo) / len(xs)
        assert br.lo <= truth + 1e-12 <= br.hi + 2e-12


def test_detect_engine():
    assert W.detect_engine(["vllm:num_requests_waiting"]) == "vllm"
    assert W.detect_engine(["sglang:num_queue_reqs"]) == "sglang"
    assert W.detect_engine(["trtllm_time_to_first_token_seconds_count"]) == "trtllm"
    assert W.detect_engine(["dynamo_frontend_queued_requests"]) == "dynamo"
    assert W.detect_engine(["llamacpp:requests_processing"]) == "llamacpp"
    assert W.detect_engine(["tgi_queue_size"]) == "tgi"
    assert W.detect_engine(["foo"]) is None


@pytest.mark.slow
def test_seeded_false_pass_at_the_target_under_continuous_watching():
    """Seeded simulation: a fleet whose true good fraction is exactly the target (0.95), watched in
    30-s windows for 30 min, every window checked, SLO between bucket bounds (bracket). PASS shown
    at any check must stay within alpha (+2 standard errors): the pessimistic end only lowers it."""
    runs, alpha = 300, 0.05
    rng = random.Random(20261130)
    cfg = W.WatchConfig(slos=Slos(ttft_ms=750.0), target=0.95, alpha=alpha, min_window_s=600.0)
    false_pass = 0
    for _ in range(runs):
        j = W.WatchJudgement(cfg)
        seen_pass = False
        for k in range(60):
            n = 40 + rng.randint(0, 20)
            good_sure = good_maybe = bad = 0
            for _i in range(n):
                u = rng.random()
                if u < 0.90:
                    good_sure += 1  # <= 0.5 s
                elif u < 0.95:
                    good_maybe += 1  # in (0.5, 0.75]: good, but only the optimistic end knows
                else:
                    bad += 1  # > 1.0 s
            ttft = hist({0.5: good_sure, 1.0: good_maybe, 2.5: bad})
            j.add(W.Window(30.0 * k, 30.0 * (k + 1), "vllm", "metrics", ttft=ttft, waiting_start=0, waiting_end=0))
            if j.verdict().state == PASS:
                seen_pass = True
                break
        false_pass += seen_pass
    rate = false_pass / runs
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert rate <= alpha + 2 * se, rate


def test_seeded_power_a_good_fleet_passes_and_a_bad_one_fails():
    rng = random.Random(5)
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000.0), target=0.95, min_window_s=600.0)
    for p_good, want in ((0.995, PASS), (0.80, FAIL)):
        j = W.WatchJudgement(cfg)
        for k in range(40):
            n = 60
            good = sum(rng.random() < p_good for _ in range(n))
            j.add(W.Window(30.0 * k, 30.0 * (k + 1), "vllm", "metrics", ttft=hist({0.5: good, 2.5: n - good}),
                           waiting_start=0, waiting_end=0))
        assert j.verdict().state == want


def test_advance_feeds_only_the_new_part_and_holds_shrinking_counts():
    c1 = W.Window(0, 60, "vllm", "prometheus", ttft=hist({0.1: 100}), failed=1.0, waiting_end=0)
    d1, fed = W.advance(None, c1)
    assert d1 is c1
    c2 = W.Window(0, 90, "vllm", "prometheus", ttft=hist({0.1: 130, 2.5: 5}), failed=1.0, waiting_end=3)
    d2, fed = W.advance(fed, c2)
    assert W.count_of(d2.ttft) == 35 and d2.failed == 0 and (d2.t_start, d2.t_end) == (60, 90)
    assert d2.waiting_start == 0 and d2.waiting_end == 3
    c3 = W.Window(0, 120, "vllm", "prometheus", ttft=hist({0.1: 128, 2.5: 5}), failed=1.0)  # extrapolation settled
    d3, fed = W.advance(fed, c3)
    assert W.count_of(d3.ttft) == 0 and W.count_of(fed.ttft) == 135
    gap = W.Window(0, 150, "vllm", "prometheus", gaps=("q: query failed",))
    d4, fed2 = W.advance(fed, gap)
    assert d4.ttft is None and d4.gaps and fed2 is fed


def test_canary_text_puts_client_beside_server():
    s = {"sent": 4, "good": 4, "client_ttft_p50_ms": 230.0, "server_ttft_p50_bucket_ms": [100.0, 250.0],
         "client_minus_server_p50_ms": [-20.0, 130.0]}
    t = W.canary_text(s)
    assert "client TTFT P50 230 ms" in t and "server-side P50 bucket 100..250 ms" in t and "-20..130" in t
    assert W.canary_text(None) is None


def test_canary_verdict_for_a_server_without_ttft_histogram():
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000.0), min_window_s=60.0, fail_min_s=0.0)
    t0 = 1_767_225_600.0  # canary records carry epoch times and ids, as the load generator writes them
    good = [{"type": "request", "id": f"c{i}", "t_sent": t0 + 10.0 * i, "t_first_token": t0 + 10.0 * i + 0.2,
             "t_end": t0 + 10.0 * i + 1, "complete": True, "error": None, "phase": "measure"} for i in range(200)]
    v = W.canary_verdict(good, cfg)
    assert v.state == PASS and "canary" in v.reason and v.n == 200
    bad = [dict(r, t_first_token=r["t_sent"] + 3.0, t_end=r["t_sent"] + 4.0) for r in good[:100]]
    assert W.canary_verdict(bad, cfg).state == FAIL
    few = W.canary_verdict(good[:3], cfg)
    assert few.state == INSUFFICIENT_WINDOW and "more canary requests" in (few.missing or "")


def test_the_canary_is_judged_by_the_one_outcome_rule():
    """issue 38: the canary's "good" is ``tui.core.slos.slo_rule``'s: a first token in time is not enough; the
    answer's TTFT, the finish reason, the HTTP status and every SLO in force count, as for any load request."""
    t0 = 1_767_225_600.0
    base = {"type": "request", "id": "c", "t_sent": t0, "t_first_token": t0 + 0.2, "t_end": t0 + 1.0,
            "complete": True, "error": None, "phase": "measure"}
    ttft = Slos(ttft_ms=1000.0)
    assert W.canary_outcome(base, ttft) == ("good", pytest.approx(200.0))
    for bad in ({"finish_reason": "error"}, {"http_status": 500}, {"output_tokens": 0}):
        assert W.canary_outcome(dict(base, **bad), ttft)[0] == "failed", bad
    reasoned = dict(base, t_first_reasoning=t0 + 0.2, t_first_answer=t0 + 0.9, t_end=t0 + 2.0, output_tokens=9)
    assert W.canary_outcome(reasoned, Slos(ttft_ms=500.0))[0] == "slow"  # the answer came after 900 ms
    assert W.canary_outcome(base, Slos(ttft_ms=1000.0, e2e_ms=500.0))[0] == "slow"  # every SLO in force
    assert W.canary_outcome({"t_sent": "x"}, ttft)[0] == "failed"  # a record that does not validate is never good
    cfg = W.WatchConfig(slos=Slos(ttft_ms=1000.0, e2e_ms=500.0), min_window_s=60.0, fail_min_s=0.0)
    recs = [dict(base, id=f"c{i}", t_sent=t0 + 10 * i, t_first_token=t0 + 10 * i + 0.2, t_end=t0 + 10 * i + 1)
            for i in range(200)]
    assert W.canary_verdict(recs, cfg).state == FAIL  # first tokens in time, every request over the E2E SLO


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_extrapolated_counts_keep_the_true_fraction_inside_the_ends():
    """Prometheus' increase() scales a window's counts by its extrapolation factor (the same for every bucket of
    a target scraped together). The judged ends must still hold the true fraction: before, the upper end divided
    by the total rounded UP, and 2 good of 3 scaled by 1.5 (3.0 of 4.5) judged 3/5 = 60% < 66.7% at both ends."""
    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randint(1, 60)
        g = rng.randint(0, n)
        f = 1.0 + rng.random() * 1.2  # increase() stretches young series by up to ~2x
        w = W.Window(0, 600, "vllm", "prometheus", ttft=((0.1, g * f), (W.INF, n * f)), waiting_start=0,
                     waiting_end=0)
        v = W.judge_once(w, W.WatchConfig(slos=Slos(ttft_ms=100.0), min_window_s=0.0))
        assert v.lo is not None and v.hi is not None
        assert v.lo <= g / n + 1e-12 <= v.hi + 2e-12, (g, n, f, v.lo, v.hi)
    v = W.judge_once(W.Window(0, 600, "vllm", "prometheus", ttft=((0.1, 3.0), (W.INF, 4.5)), waiting_start=0,
                              waiting_end=0), W.WatchConfig(slos=Slos(ttft_ms=100.0), min_window_s=0.0))
    assert v.lo == pytest.approx(3 / 5) and v.hi == pytest.approx(3 / 4)
    assert "60.0-75.0%" in v.reason  # the SLO is a bound, but the rounding makes two ends: both shown


def test_extrapolated_counts_several_slos_upper_end_holds():
    """The same rounding under several SLOs (Fréchet bound): 2 of 3 meeting both, scaled by 1.5."""
    w = W.Window(0, 600, "vllm", "prometheus", ttft=((0.1, 3.0), (W.INF, 4.5)), e2e=((1.0, 3.0), (W.INF, 4.5)),
                 waiting_start=0, waiting_end=0)
    v = W.judge_once(w, W.WatchConfig(slos=Slos(ttft_ms=100.0, e2e_ms=1000.0), min_window_s=0.0))
    assert v.lo is not None and v.hi is not None and v.lo <= 2 / 3 <= v.hi, (v.lo, v.hi)
