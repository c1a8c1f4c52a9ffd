"""A record file is a claim: the cross-checks that hold it against itself.

Each test builds the file a reviewer might receive (tests/support/evidence_files.py), edits it the way the finding did, and
runs `servewatch report --json` on it: the honest file PASSes, every edited one does not, and says why."""

from __future__ import annotations

import json

import pytest

import tests.support.evidence_files as ef
from tui.cli import main


def report(capsys, path, *extra: str) -> tuple[int, dict]:
    rc = main(["report", str(path), "--json", *extra])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def problems(rep: dict) -> str:
    return " | ".join(rep["evidence"]["problems"])


def test_honest_closed_loop_file_passes(tmp_path, capsys):
    rc, rep = report(capsys, ef.write(tmp_path / "ok.jsonl", ef.honest_closed()))
    assert rc == 0, rep["measured"]["verdict"]
    assert rep["measured"]["verdict"]["state"] == "PASS"
    assert rep["evidence"]["problems"] == []
    assert rep["judged"]["measured_capacity"] == 4
    assert "requests in flight (concurrency 4)" in rep["evidence"]["judged_level_delivered"]


def test_honest_open_loop_file_passes(tmp_path, capsys):
    rc, rep = report(capsys, ef.write(tmp_path / "ok.jsonl", ef.honest_open()))
    assert rc == 0, (rep["measured"]["verdict"], rep["evidence"])
    assert rep["evidence"]["problems"] == []


# ---------------------------------------------------------------- 1. records missing or rewritten

def _with_failures() -> list[dict]:
    return ef.honest_closed(fail=lambda i: i % 40 == 0)


def test_honest_file_with_few_failures_still_passes(tmp_path, capsys):
    rc, rep = report(capsys, ef.write(tmp_path / "ok.jsonl", _with_failures()))
    assert rep["measured"]["window"]["failed"] > 0
    assert rc == 0 and rep["evidence"]["problems"] == []


def test_failed_records_removed_cannot_pass(tmp_path, capsys):
    recs = [r for r in _with_failures() if not (r["type"] == "request" and not r["complete"])]
    rc, rep = report(capsys, ef.write(tmp_path / "cut.jsonl", recs))
    assert rep["measured"]["window"]["failed"] == 0  # what the file holds looks perfect ...
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"  # ... and cannot PASS
    assert "step record counts" in problems(rep) and "records missing or altered" in problems(rep)
    assert rep["judged"]["has_measured_capacity"] is False


def test_failed_records_rewritten_as_successes_cannot_pass(tmp_path, capsys):
    recs = _with_failures()
    for r in recs:
        if r["type"] == "request" and not r["complete"]:
            r.update(complete=True, error=None, http_status=200, t_first_token=r["t_sent"] + 0.1, output_tokens=8,
                     finish_reason="stop")
    rc, rep = report(capsys, ef.write(tmp_path / "rewritten.jsonl", recs))
    assert rep["measured"]["window"]["failed"] == 0
    assert rc == 3 and "0 failed: records missing or altered" in problems(rep)


def test_records_without_their_step_cannot_pass(tmp_path, capsys):
    recs = ef.honest_closed()
    extra = ef.closed_step(8, ef.T0 + 700, 660)  # a level the run never stepped, appended
    rc, rep = report(capsys, ef.write(tmp_path / "added.jsonl", recs + extra))
    assert rep["judged"]["level"] == 8
    assert rc == 3 and "no step end record for them" in problems(rep)


# ---------------------------------------------------------------- 2. load that was never delivered

def test_open_loop_every_request_late_is_not_reached(tmp_path, capsys):
    recs = ef.honest_open(late=5.0)
    rc, rep = report(capsys, ef.write(tmp_path / "late.jsonl", recs))
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    assert "not reached" in problems(rep) and "lateness p99 5000 ms" in problems(rep)
    assert rep["levels"][0]["not_reached"]
    assert rep["judged"]["has_measured_capacity"] is False


def test_open_loop_rate_not_achieved_is_not_reached(tmp_path, capsys):
    recs = ef.honest_open(rate=2.0)
    # the requests were really sent at 1 req/s (intended times rewritten to look on time)
    reqs = [r for r in recs if r["type"] == "request"]
    for i, r in enumerate(reqs):
        shift = i * 0.5  # every request i/2 s later than the 2 req/s schedule
        for k in ("t_intended", "t_sent", "t_first_token", "t_end"):
            r[k] += shift
    rc, rep = report(capsys, ef.write(tmp_path / "slow.jsonl", recs))
    assert rc == 3 and "achieved send rate" in problems(rep)


def test_closed_loop_requests_that_never_overlap_are_not_reached(tmp_path, capsys):
    # labelled concurrency 4, but each slot idles 18 s between 2-s requests: mean in flight 0.4
    reqs = ef.closed_step(4, ef.T0 + 1, 1300, idle=18.0)
    start, end = ef.step_records(reqs, 4, "closed")
    recs = ef.assemble(ef.header("closed", (4,)), [(start, reqs, end)])
    rc, rep = report(capsys, ef.write(tmp_path / "sparse.jsonl", recs))
    assert rep["measured"]["good_fraction"] == 1.0
    assert rc == 3 and "not reached: mean 0.40 requests in flight (concurrency 4)" in problems(rep)
    assert rep["judged"]["has_measured_capacity"] is False


def test_not_reached_level_still_fails(tmp_path, capsys):
    recs = ef.honest_open(late=5.0, fail=lambda i: i % 2 == 0)
    rc, rep = report(capsys, ef.write(tmp_path / "late-failing.jsonl", recs))
    assert rc == 1 and rep["measured"]["verdict"]["state"] == "FAIL"  # an overloaded server is still overloaded


# ---------------------------------------------------------------- 3. a window made of nothing

def test_one_late_request_does_not_cover_the_window(tmp_path, capsys):
    reqs = ef.open_step(96 / 58, ef.T0 + 1, 58)  # 96 requests in 58 s
    reqs.append(ef.request(999, ef.T0 + 601, 0.2, 1.0, level=96 / 58))  # and one 10 minutes later
    start, end = ef.step_records(reqs, 96 / 58, "open")
    recs = ef.assemble(ef.header("open", (96 / 58,), arrival="constant"), [(start, reqs, end)])
    rc, rep = report(capsys, ef.write(tmp_path / "gap.jsonl", recs))
    v = rep["measured"]["verdict"]
    assert rc == 3 and v["state"] == "INSUFFICIENT_WINDOW"
    assert v["minutes"] < 2  # the window counts ~1 min of requests flowing, not 10 minutes
    assert "min more" in v["missing"]


@pytest.mark.parametrize("stamp", [1.0, -1e308, 1e308, 4_200_000_000.0])
def test_implausible_timestamps_are_bad_lines(tmp_path, capsys, stamp):
    recs = ef.honest_closed()
    bad = ef.request(424242, ef.T0 + 5, 0.2, 1.0, level=4)
    bad["t_sent"] = stamp
    recs.insert(3, bad)
    rc = main(["report", str(ef.write(tmp_path / "t.jsonl", recs)), "--json"])
    captured = capsys.readouterr()
    rep = json.loads(captured.out)
    assert rep["input_problems"]["malformed"] == 1
    assert "t.jsonl:4: field 't_sent'" in captured.err
    assert rep["measured"]["verdict"]["minutes"] < 12
    assert rc in (0, 3)


# ---------------------------------------------------------------- 4. outcomes that contradict themselves

@pytest.mark.parametrize("edit", [{"http_status": 500}, {"output_tokens": 0}, {"finish_reason": "abort"},
                                  {"finish_reason": "error"}])
def test_complete_but_contradicting_is_not_good(tmp_path, capsys, edit):
    recs = ef.honest_closed(seconds=120)
    for r in recs:
        if r["type"] == "request":
            r.update(edit)
    rc, rep = report(capsys, ef.write(tmp_path / "c.jsonl", recs), "--min-window-minutes", "1")
    assert rep["measured"]["good_fraction"] == 0.0
    assert rc == 1
    assert any("contradict" in n for n in rep["notes"])


def test_fewer_tokens_than_asked_is_normal(tmp_path, capsys):
    recs = ef.honest_closed()
    for r in recs:
        if r["type"] == "request":
            r["output_tokens"] = 3  # asked 32 in the workload: a model may stop early
    rc, rep = report(capsys, ef.write(tmp_path / "short.jsonl", recs))
    assert rc == 0 and not any("contradict" in n for n in rep["notes"])


# ---------------------------------------------------------------- 5. failures relabelled as warmup

def test_failures_relabelled_as_warmup_cannot_pass(tmp_path, capsys):
    recs = ef.honest_closed(fail=lambda i: i % 3 == 0)
    for r in recs:
        if r["type"] == "request" and not r["complete"]:
            r["phase"] = "warmup"
    # the step record was edited to match what is left
    end = next(r for r in recs if r.get("event") == "end")
    kept = [r for r in recs if r["type"] == "request" and r["phase"] == "measure"]
    end.update(requests=len(kept), failed=0, completed=len(kept), errors={})
    rc, rep = report(capsys, ef.write(tmp_path / "warm.jsonl", recs))
    assert rep["measured"]["window"]["failed"] == 0
    assert rc == 3 and "warmup records were sent after the first measured request" in problems(rep)


# ---------------------------------------------------------------- 6. planned rounds

def test_missing_planned_rounds_cannot_pass(tmp_path, capsys):
    recs = ef.honest_closed()
    recs[0]["load"]["rounds"] = 3
    rc, rep = report(capsys, ef.write(tmp_path / "rounds.jsonl", recs))
    # a servewatch load run's plan (levels x rounds) is held against its steps (tui.core.completeness, issue 35)
    assert rc == 3 and ("incomplete: 2 of 3 steps (concurrency 4 round 2, concurrency 4 round 3) planned, not "
                        "present") in problems(rep)


def test_all_planned_rounds_present_pass(tmp_path, capsys):
    steps = []
    for rnd in (1, 2):
        reqs = ef.closed_step(4, ef.T0 + 1 + (rnd - 1) * 700, 660, rnd=rnd)
        start, end = ef.step_records(reqs, 4, "closed", rnd)
        steps.append((start, reqs, end))
    recs = ef.assemble(ef.header("closed", (4,), rounds=2), steps)
    rc, rep = report(capsys, ef.write(tmp_path / "rounds2.jsonl", recs))
    assert rc == 0 and rep["evidence"]["problems"] == []


# ---------------------------------------------------------------- 9. advice that decides soonest

def test_failing_level_says_fail_is_near(tmp_path, capsys):
    reqs = ef.closed_step(1, ef.T0 + 1, 20, fail=lambda i: True)  # 0 of ~66 good in 20 s
    start, end = ef.step_records(reqs, 1, "closed")
    recs = ef.assemble(ef.header("closed", (1,)), [(start, reqs, end)])
    rc, rep = report(capsys, ef.write(tmp_path / "fail.jsonl", recs))
    v = rep["measured"]["verdict"]
    assert rc == 3 and v["state"] == "INSUFFICIENT_WINDOW"
    assert v["missing"].startswith("FAIL in about ") and "if this holds" in v["missing"]
    assert "more requests" not in v["missing"]


# ---------------------------------------------------------------- compare: a level not reached is not evidence

def test_compare_does_not_call_a_level_not_reached_not_worse(tmp_path, capsys):
    base = ef.write(tmp_path / "base.jsonl", ef.honest_open())
    cand = ef.write(tmp_path / "cand.jsonl", ef.another_run(ef.honest_open(late=5.0), seed=2))
    rc = main(["compare", str(base), str(cand), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 3 and doc["verdict"] != "NOT WORSE"
    assert "not reached" in json.dumps(doc)
    other = ef.write(tmp_path / "other.jsonl", ef.another_run(ef.honest_open(), seed=1))
    rc = main(["compare", str(base), str(other), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["verdict"] == "NOT WORSE"
    rc = main(["compare", str(base), str(base), "--json"])  # one run on both sides: nothing to compare
    assert rc == 3 and json.loads(capsys.readouterr().out)["same_run"].startswith("the same file on both sides")


def test_accept_names_the_evidence_problem_of_the_judged_level(tmp_path, capsys):
    reqs = ef.closed_step(4, ef.T0 + 1, 1300, idle=18.0)
    start, end = ef.step_records(reqs, 4, "closed")
    rec = ef.write(tmp_path / "sparse.jsonl", ef.assemble(ef.header("closed", (4,)), [(start, reqs, end)]))
    rc = main(["accept", "--records", str(rec), "--out", str(tmp_path / "acc")])
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "acc" / "acceptance.json").read_text())
    assert rc == 3 and doc["conclusion"]["ready_for_traffic"] is False
    assert "do not support a PASS at the judged level" in out and "not reached" in out
    assert doc["measured"]["levels"][0]["evidence_problems"]
