"""One rule, one place, tested where production uses it.

The good / slow / failed / excluded rule and the TTFT derivation live in
``tui.core.records.outcome_rule``; the Monitor, ``RequestRecord.outcome`` and every report go
through it. These tests drive the production paths (Monitor, ``servewatch report``, the sweep /
accept level table) with records built so that a changed threshold changes an asserted outcome:
no golden file stands alone between a changed threshold and a green run.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.cli import main
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import (
    EXCLUDED,
    FAILED,
    GOOD,
    SLOW,
    RequestRecord,
    outcome_rule,
    parse_line,
)
from tui.core.slos import Slos
from tui.core.snapshot import FAIL, PASS
from tui.core.sweep import level_states, measured_capacity, sweep_summary

T0 = 1_767_225_600.1  # epoch-scale stamps: their floats resolve ~0.24 us, like a real record file


def req(i, t_sent, ttft, *, complete=True, error=None, level=1.0, rnd=1, phase="measure", t_end=None) -> dict:
    tf = None if ttft is None else t_sent + ttft
    end = t_end if t_end is not None else (tf if tf is not None else t_sent) + 0.5
    return {"type": "request", "id": f"r{i}", "t_sent": t_sent, "t_first_token": tf, "t_end": end,
            "complete": complete, "error": error, "level": level, "round": rnd, "phase": phase,
            "output_tokens": 16}


def write(path, records, header=True, tail: str = "") -> str:
    lines = [json.dumps({"type": "run", "schema_version": 1, "synthetic": True})] if header else []
    lines += [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n" + tail)
    return str(path)


def monitor_of(records, **cfg) -> Monitor:
    m = Monitor(MonitorConfig(**cfg))
    for d in records:
        m.add(parse_line(json.dumps(d)))
    return m


# ------------------------------------------------------------------ the SLO boundary


def at_slo_records(n=200, spacing=1.0, ttft=1.0):
    return [req(i, T0 + i * spacing, ttft) for i in range(n)]


def test_exactly_at_the_slo_is_good_although_the_float_difference_is_not_exactly_the_slo():
    classify = outcome_rule(1000.0)
    assert {classify(parse_line(json.dumps(d)))[0] for d in at_slo_records()} == {GOOD}
    # t_first_token = t_sent + 0.7 at epoch scale: every difference comes out ~0.05 us ABOVE 700 ms, so a
    # plain float `ttft_ms <= 700.0` would call all of them slow. The rule judges at 1 us: all good.
    recs = at_slo_records(ttft=0.7)
    raw = [(d["t_first_token"] - d["t_sent"]) * 1000.0 for d in recs]
    assert all(x > 700.0 for x in raw) and max(raw) - 700.0 < 0.001
    assert {outcome_rule(700.0)(parse_line(json.dumps(d)))[0] for d in recs} == {GOOD}
    # one microsecond over the SLO is slow; one microsecond under is good
    assert classify(RequestRecord("a", T0, T0 + 2, True, T0, T0 + 1.000001))[0] == SLOW
    assert classify(RequestRecord("b", T0, T0 + 2, True, T0, T0 + 0.999999))[0] == GOOD
    # the SLO itself is judged at 1 us: 999.999 ms makes the same request slow
    assert outcome_rule(999.999)(parse_line(json.dumps(at_slo_records(1)[0])))[0] == SLOW


@pytest.mark.parametrize("slo_ms, ttft", [(1000.0, 1.0), (700.0, 0.7)])
def test_two_hundred_requests_at_exactly_the_slo_pass_through_the_monitor(slo_ms, ttft):
    m = monitor_of(at_slo_records(ttft=ttft), slos=Slos(ttft_ms=slo_ms), min_window_s=0)
    s = m.snapshot()
    assert (s.cumulative.good.good, s.cumulative.good.n, s.cumulative.slow) == (200, 200, 0)
    assert s.verdict.state == PASS
    assert {r.outcome for r in s.recent} == {GOOD}


def test_two_hundred_requests_at_exactly_the_slo_pass_through_servewatch_report(tmp_path, capsys):
    path = write(tmp_path / "at-slo.jsonl", at_slo_records())
    rc = main(["report", "--details", path, "--slo-ttft-ms", "1000", "--min-window-minutes", "0", "--json"])
    rep = json.loads(capsys.readouterr().out)
    # the file is labelled SYNTHETIC: the verdict is PASS, the exit code never 0 (issue 17)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == PASS and rep["exit"]["synthetic"]
    assert rep["measured"]["window"]["good"] == 200 and rep["measured"]["window"]["slow"] == 0
    # 1 us tighter: every request is slow and the same file FAILs
    rc = main(["report", "--details", path, "--slo-ttft-ms", "999.999", "--min-window-minutes", "0", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1 and rep["measured"]["window"]["slow"] == 200 and rep["measured"]["window"]["good"] == 0


def test_fast_failures_and_tokenless_completions_are_never_good():
    c = outcome_rule(1000.0)
    assert c(RequestRecord("f", T0, T0 + 0.1, False, T0, T0 + 0.05, error="stream_reset")) == (FAILED, pytest.approx(50.0))
    assert c(RequestRecord("e", T0, T0 + 0.1, True, T0, None)) == (FAILED, None)
    assert c(RequestRecord("x", T0, T0 + 0.1, True, T0, T0 + 0.05, error="http_5xx"))[0] == FAILED
    assert c(RequestRecord("n", T0, T0 + 0.1, False, T0, T0 + 0.05))[0] == FAILED


records_strategy = st.builds(
    lambda i, ttft, dt, complete, error, phase: req(
        i, T0 + i, ttft, complete=complete and error is None, error=error, phase=phase,
        t_end=T0 + i + (ttft or 0.0) + dt),
    st.integers(0, 10_000),
    st.one_of(st.none(), st.floats(0.0, 3.0), st.sampled_from([0.999999, 1.0, 1.000001])),
    st.floats(0.0, 3.0),
    st.booleans(),
    st.sampled_from([None, None, "cancelled", "http_5xx", "read_timeout"]),
    st.sampled_from(["measure", "measure", "warmup"]),
)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=150, deadline=None)
@given(st.lists(records_strategy, min_size=1, max_size=40, unique_by=lambda d: d["id"]))  # ids are unique in a run
def test_monitor_record_and_report_agree_on_every_outcome(records):
    recs = [parse_line(json.dumps(d)) for d in records]
    m = Monitor(MonitorConfig(slos=Slos(ttft_ms=1000.0), min_window_s=0))
    for r in recs:
        m.add(r)
    s = m.snapshot()
    assert [row.outcome for row in s.recent] == [r.outcome(1.0) for r in recs]
    assert [row.ttft_ms for row in s.recent] == [r.ttft_ms for r in recs]
    measured = [r for r in recs if r.phase == "measure"]
    judged = [r for r in measured if r.outcome(1.0) != EXCLUDED]
    n = sum(row.window.good.n for row in s.levels)
    assert n == len(judged)
    assert sum(row.window.good.good for row in s.levels) == sum(r.is_good(1.0) for r in judged)
    assert s.cancelled_open == sum(r.outcome(1.0) == EXCLUDED for r in measured)


# ------------------------------------------------------------------ P99 support between 100 and 298 samples


def _p99_text(out: str) -> str:
    line = next(x for x in out.splitlines() if "TTFT over completed requests" in x)
    return re.search(r"P99=[^ ]+ ms\*?", line).group(0)


@pytest.mark.parametrize("n, supported", [(100, False), (200, False), (298, False), (299, True)])
def test_p99_support_between_100_and_298_samples_is_shown_as_insufficient_n(tmp_path, capsys, n, supported):
    recs = [req(i, T0 + i, 0.1 + 0.001 * (i % 50)) for i in range(n)]
    snap = monitor_of(recs, min_window_s=0).snapshot()
    p50, p95, p99 = snap.cumulative.ttft
    assert (p99.n, p99.supported, p95.supported, p50.supported) == (n, supported, True, True)
    path = write(tmp_path / f"p99-{n}.jsonl", recs)
    main(["report", "--details", path, "--min-window-minutes", "0"])
    text = _p99_text(capsys.readouterr().out)
    assert text.endswith("*") is (not supported), text  # the one mark (issue 37), explained once below
    main(["report", "--details", path, "--min-window-minutes", "0", "--json"])
    p = json.loads(capsys.readouterr().out)["measured"]["window"]["ttft_ms"]["P99"]
    assert (p["n"], p["supported"], p["n_needed"]) == (n, supported, 299)


# ------------------------------------------------------------------ a cut-off last line


def test_a_cut_off_last_line_is_counted_as_truncated_in_the_report(tmp_path, capsys):
    recs = [req(i, T0 + i, 0.2) for i in range(10)]
    cut = json.dumps(req(10, T0 + 10, 0.2))[:37]  # the writer was killed mid-line: no newline
    path = write(tmp_path / "cut.jsonl", recs, tail=cut)
    rc = main(["report", "--details", path, "--min-window-minutes", "0"])
    cap = capsys.readouterr()
    assert rc == 3
    assert "input problems: 0 malformed, 1 truncated, 0 unknown-type lines" in cap.out
    assert f"{path}:12: truncated final line" in cap.err
    assert "measured requests=10" in cap.out
    main(["report", "--details", path, "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["input_problems"]["truncated"] == 1 and rep["input_problems"]["malformed"] == 0
    assert rep["requests_total"] == 10


# ------------------------------------------------------------------ how rounds combine into one level verdict


def _round(level, rnd, start, p_good_every, n=200):
    """n requests 1 s apart; every ``p_good_every``-th one slow (None: all good)."""
    out = []
    for i in range(n):
        slow = p_good_every is not None and i % p_good_every == 0
        out.append(req(f"{level}-{rnd}-{i}", start + i, 1.5 if slow else 0.2, level=level, rnd=rnd))
    return out


def test_rounds_combine_into_one_level_verdict_fail_wins_pass_needs_every_round():
    recs = (_round(2.0, 1, T0, None) + _round(4.0, 1, T0 + 300, 2)  # level 4, round 1: half slow
            + _round(2.0, 2, T0 + 600, None) + _round(4.0, 2, T0 + 900, None))
    snap = monitor_of(recs, min_window_s=0).snapshot()
    per_round = {(r.level, r.round): r.verdict.state for r in snap.levels}
    assert per_round == {(2.0, 1): PASS, (4.0, 1): FAIL, (2.0, 2): PASS, (4.0, 2): PASS}
    assert level_states(snap.levels) == {2.0: PASS, 4.0: FAIL}  # a later passing round does not undo a FAIL
    assert measured_capacity(snap.levels) == 2.0
    s = sweep_summary(snap)
    assert s["measured_capacity"] == 2.0 and s["exit_code"] == 0
    # the same level passing in every round is the capacity
    snap2 = monitor_of(_round(2.0, 1, T0, None) + _round(4.0, 1, T0 + 300, None), min_window_s=0).snapshot()
    assert level_states(snap2.levels) == {2.0: PASS, 4.0: PASS} and measured_capacity(snap2.levels) == 4.0
    # one round still undecided: the level is not a PASS, so it is not the capacity
    snap3 = monitor_of(_round(2.0, 1, T0, None) + _round(4.0, 1, T0 + 300, None)
                       + _round(4.0, 2, T0 + 600, 20, n=150), min_window_s=0).snapshot()
    assert {(r.level, r.round): r.verdict.state for r in snap3.levels}[(4.0, 2)] not in (PASS, FAIL)
    assert level_states(snap3.levels)[4.0] not in (PASS, FAIL) and measured_capacity(snap3.levels) == 2.0


# ------------------------------------------------------------------ warmup exclusion end to end


def test_a_fast_warmup_never_turns_a_fail_into_a_pass(tmp_path, capsys):
    warm = [req(f"w{i}", T0 + i * 0.01, 0.05, phase="warmup") for i in range(5000)]
    start = T0 + 60
    measured = [req(i, start + i, 1.5 if i % 10 < 3 else 0.2) for i in range(200)]  # 70% good
    path = write(tmp_path / "warm.jsonl", warm + measured)
    rc = main(["report", "--details", path, "--min-window-minutes", "0"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "warmup excluded=5000" in out and "good_fraction=70% (140/200;" in out
    # counted, the warmup would have hidden the FAIL (a PASS with the engine of this writing): the exclusion
    # is what decides this file
    counted = [dict(d, phase="measure") for d in warm] + measured
    rc2 = main(["report", "--details", write(tmp_path / "counted.jsonl", counted), "--min-window-minutes", "0", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc2 != 1 and rep["measured"]["good_fraction"] > 0.95
