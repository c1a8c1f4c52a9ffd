"""The SLOs (issue 21): each judged at its boundary (exactly at: good; 1 us over: missed), off, not judgeable on
older records, the reasoning-aware TTFT, miss counts and the percentiles' n-support, through the rule and the
Monitor."""

from __future__ import annotations

import pytest

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord, outcome_rule, parse_request, request_to_dict
from tui.core.slos import (
    MISS_E2E,
    MISS_ITL,
    MISS_TPOT,
    MISS_TTFT,
    NOJUDGE_TPOT,
    Slos,
    metric_values,
    slo_rule,
)

T0 = 1_767_225_600.0


def rec(i: int = 0, *, ttft: float = 0.2, last: float | None = 1.2, end: float = 1.3, chunks: int | None = 11,
        itl: float | None = 150.0, reasoning: float | None = None, answer: float | None = None,
        t0: float = T0, **kw) -> RequestRecord:
    t = t0 + i * 0.5
    return RequestRecord(
        id=f"r{i}", t_sent=t, t_end=t + end, complete=True, t_intended=t, t_first_token=t + ttft,
        output_tokens=chunks, t_last_token=None if last is None else t + last, output_chunks=chunks,
        itl_max_ms=itl, t_first_reasoning=None if reasoning is None else t + reasoning,
        t_first_answer=None if answer is None else t + answer, level=1.0, **kw)


# tpot of rec(): (1.2 - 0.2) * 1000 / 10 = 100 ms; e2e 1200 ms; itl 150 ms; ttft 200 ms
@pytest.mark.parametrize("field, value, bit", [
    ("ttft_ms", 200.0, MISS_TTFT), ("tpot_ms", 100.0, MISS_TPOT), ("itl_ms", 150.0, MISS_ITL),
    ("e2e_ms", 1200.0, MISS_E2E)])
def test_each_slo_exactly_at_is_good_one_microsecond_under_is_missed(field, value, bit):
    at = Slos(**{"ttft_ms": None, field: value})
    assert slo_rule(at)(rec()) == ("good", pytest.approx(200.0), 0)
    under = Slos(**{"ttft_ms": None, field: value - 0.001})  # the value is 1 us over this SLO
    outcome, _, misses = slo_rule(under)(rec())
    assert outcome == "slow" and misses == bit


def test_ttft_only_rule_matches_the_general_rule_and_outcome_rule():
    r = rec(ttft=0.7)
    assert slo_rule(Slos(ttft_ms=700.0))(r)[0] == "good"
    assert slo_rule(Slos(ttft_ms=699.999))(r)[:2] == ("slow", pytest.approx(700.0))
    assert outcome_rule(700.0)(r)[0] == "good" and outcome_rule(699.999)(r)[0] == "slow"
    # with another SLO in force the general path judges TTFT the same way
    assert slo_rule(Slos(ttft_ms=699.999, e2e_ms=5000.0))(r)[2] == MISS_TTFT


def test_off_does_not_judge_and_all_off_is_completion_only():
    r = rec(ttft=5.0, last=6.0, end=6.5)
    assert slo_rule(Slos(ttft_ms=None))(r)[0] == "good"
    assert Slos(ttft_ms=None).in_force() == () and "completion only" in Slos(ttft_ms=None).describe()
    failed = rec(http_status=500)
    assert slo_rule(Slos(ttft_ms=None))(failed)[0] == "failed"


def test_old_record_is_not_judgeable_for_tpot_and_itl_but_is_for_e2e():
    old = rec(last=None, chunks=None, itl=None)
    old.output_tokens = 11
    # nothing missed but TPOT not judgeable: unknown, "excluded" (never good; the Monitor blocks PASS and counts it
    # good only for the FAIL side of the judge), not "slow" (a miss nobody saw)
    assert slo_rule(Slos(tpot_ms=1e6))(old) == ("excluded", pytest.approx(200.0), NOJUDGE_TPOT)
    assert slo_rule(Slos(ttft_ms=100.0, tpot_ms=1e6))(old) == ("slow", pytest.approx(200.0), MISS_TTFT | NOJUDGE_TPOT)
    assert slo_rule(Slos(itl_ms=1e6))(old)[2] != 0
    assert slo_rule(Slos(e2e_ms=1300.0))(old)[0] == "good"  # t_end stands in for the last token
    old.token_offsets = [0.2, 0.3, 0.9]  # the ITL falls back to the offsets: largest gap 600 ms
    assert slo_rule(Slos(itl_ms=600.0))(old)[0] == "good"
    assert slo_rule(Slos(itl_ms=599.999))(old)[2] == MISS_ITL


def test_ttft_of_answer_judges_the_first_answer_token_any_the_first_token():
    r = rec(ttft=0.1, reasoning=0.1, answer=0.9)
    assert metric_values(r, "answer")[0] == pytest.approx(900.0)
    assert metric_values(r, "any")[0] == pytest.approx(100.0)
    assert slo_rule(Slos(ttft_ms=500.0))(r)[0] == "slow"
    assert slo_rule(Slos(ttft_ms=500.0, ttft_of="any"))(r)[0] == "good"
    no_answer = rec(ttft=0.1, reasoning=0.1, answer=None)
    assert slo_rule(Slos(ttft_ms=500.0))(no_answer) == ("slow", None, MISS_TTFT)
    assert slo_rule(Slos(ttft_ms=500.0, tpot_ms=1e6))(no_answer)[2] & MISS_TTFT


def test_record_fields_round_trip_and_old_files_stay_byte_identical():
    old = RequestRecord(id="a", t_sent=T0, t_end=T0 + 1, complete=True, t_intended=T0, t_first_token=T0 + 0.2)
    assert "t_last_token" not in request_to_dict(old)
    r = rec(reasoning=0.2, answer=0.5, usage_output_tokens=12, reasoning_chunks=3)
    d = request_to_dict(r)
    back = parse_request(d)
    assert (back.t_last_token, back.itl_max_ms, back.usage_output_tokens, back.t_first_answer) == (
        r.t_last_token, 150.0, 12, r.t_first_answer)
    for key, bad in (("t_last_token", T0 - 5), ("itl_max_ms", -1.0), ("output_chunks", 1.5),
                     ("usage_output_tokens", -2)):
        with pytest.raises(ValueError):
            parse_request({**d, key: bad})


def test_tpot_uses_the_server_count_first():
    r = rec(usage_output_tokens=21)  # (1.2 - 0.2) s / 20 = 50 ms, not the 100 ms of the 11 chunks
    assert metric_values(r)[1] == pytest.approx(50.0)


def _monitor(slos: Slos, recs) -> Monitor:
    m = Monitor(MonitorConfig(slos=slos, min_window_s=0.0))
    m.add_many(recs)
    return m


def test_monitor_counts_misses_combinations_and_percentiles():
    recs = [rec(i) for i in range(40)]  # good on TTFT 500 / TPOT 100
    recs += [rec(40 + i, ttft=0.6) for i in range(5)]  # TTFT miss only
    recs += [rec(50 + i, last=1.9, end=2.0) for i in range(7)]  # TPOT 170 ms: miss only
    recs += [rec(60 + i, ttft=0.6, last=2.6, end=2.7) for i in range(3)]  # both
    snap = _monitor(Slos(ttft_ms=500.0, tpot_ms=100.0), recs).snapshot()
    w = snap.levels[0].window
    assert w.good.good == 40 and w.slow == 15
    assert w.misses == {"TTFT": 8, "TPOT": 10}
    assert w.miss_combos == {"TTFT": 5, "TPOT": 7, "TTFT+TPOT": 3}
    e2e = w.latency["e2e"]
    assert e2e[0].n == 55 and e2e[0].supported and not e2e[2].supported  # P99 needs 299
    assert w.latency["itl"][0].value_ms == pytest.approx(150.0)
    assert w.good_output_tok_per_s is not None and w.good_output_tok_per_s > 0
    assert "TPOT <= 100 ms" in snap.verdict.reason and "TTFT <= 500 ms (answer)" in snap.verdict.slos


def test_monitor_unjudgeable_blocks_pass_with_a_sentence():
    old = []
    for i in range(400):
        r = rec(i, last=None, chunks=None, itl=None)
        r.output_tokens = 11
        old.append(r)
    m = _monitor(Slos(tpot_ms=1e6), old)
    m.finish()
    snap = m.snapshot()
    assert snap.levels[0].window.unjudgeable == {"TPOT": 400}
    assert snap.levels[0].window.good.good == 0
    assert any("TPOT not judgeable on 400 of 400 requests: the file has no last-token times" in p
               for p in snap.evidence_problems)
    # the same requests judged on TTFT alone pass the rule
    assert _monitor(Slos(), old).snapshot().levels[0].window.good.good == 400


def test_monitor_config_holds_the_slos_alone():
    """issue 38: no legacy TTFT field beside the SLOs (one source of truth, the table's limits)."""
    import dataclasses

    assert "slo_ttft_ms" not in {f.name for f in dataclasses.fields(MonitorConfig)}
    assert MonitorConfig().slos == Slos()
    with pytest.raises(TypeError):
        MonitorConfig(slo_ttft_ms=300.0)  # type: ignore[call-arg]
