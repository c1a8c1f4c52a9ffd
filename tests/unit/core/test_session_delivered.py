"""The delivered-load rule in sessions (issue 23, tui.core.evidence.delivered_sessions through the Monitor): a
session workload's level counts as tested when its sessions were in flight (closed loop) or started at the rate
(open loop), not its requests. Seeded simulations (tests/support/session_files.py), judged by `servewatch report`."""

from __future__ import annotations

import json

import tests.support.evidence_files as ef
import tests.support.session_files as sf
import tui.core.evidence as evidence
from tui.cli import main


def report(capsys, path) -> tuple[int, dict]:
    rc = main(["report", str(path), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _requests(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r["type"] == "request"]


def _request_rule(recs: list[dict], level: float, mode: str) -> evidence.Delivered:
    """What today's request rule says of the same records (the rule records without ``session`` keep)."""
    reqs = _requests(recs)
    return evidence.delivered(level, mode, [r["t_sent"] for r in reqs], [r["t_end"] for r in reqs],
                              [r["t_sent"] - r["t_intended"] for r in reqs], 1000.0)


def test_closed_loop_sessions_that_held_their_level_are_reached_and_pass(tmp_path, capsys):
    recs = sf.closed_sessions(4)  # 4 loops; think time about as long as a turn
    # counted in requests the level looks half held (the think time is no request in flight) ...
    assert _request_rule(recs, 4, "closed").ok is False
    rc, rep = report(capsys, ef.write(tmp_path / "s.jsonl", recs))
    # ... in sessions it was held: reached, and the all-good level PASSes
    assert rep["evidence"]["judged_level_not_reached"] is None, rep["evidence"]
    assert "sessions in flight (4 concurrent sessions" in rep["evidence"]["judged_level_delivered"]
    assert rep["evidence"]["problems"] == []
    assert rc == 0 and rep["measured"]["verdict"]["state"] == "PASS"


def test_closed_loop_sessions_holding_half_the_level_are_not_reached_and_cannot_pass(tmp_path, capsys):
    recs = sf.closed_sessions(4, loops=2)  # labelled 4 concurrent sessions, 2 ran
    rc, rep = report(capsys, ef.write(tmp_path / "half.jsonl", recs))
    assert rep["measured"]["window"]["good_fraction"] == 1.0  # every request good ...
    nr = rep["evidence"]["judged_level_not_reached"]
    assert nr is not None and nr.startswith(("not reached: mean 1.9", "not reached: mean 2.0")), nr
    assert "sessions in flight (4 concurrent sessions" in nr
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"  # ... and no PASS


def test_the_mean_sessions_in_flight_is_the_level_held(tmp_path):
    """The figure itself: 4 loops give about 4 (only the gaps between sessions are idle), 2 loops about 2."""
    for loops, lo, hi in ((4, 3.9, 4.0), (2, 1.9, 2.0)):
        spans = evidence.SessionSpans()
        for r in _requests(sf.closed_sessions(4, loops=loops)):
            spans.add(r["session"], r["turn"], r["t_intended"], r["t_sent"], r["t_end"])
        d = evidence.delivered_sessions(4, "closed", spans, 1000.0)
        mean = float(d.figure.split()[1])
        assert lo <= mean <= hi, d.figure


def test_open_loop_sessions_at_the_rate_pass(tmp_path, capsys):
    recs = sf.open_sessions(0.5)  # 0.5 sessions/s, 2-4 turns each: about 1.5 requests/s
    assert _request_rule(recs, 0.5, "open").ok is False  # requests against the session rate: "off the label"
    rc, rep = report(capsys, ef.write(tmp_path / "o.jsonl", recs))
    assert rep["evidence"]["judged_level_not_reached"] is None, rep["evidence"]
    assert "sessions/s (label 0.5)" in rep["evidence"]["judged_level_delivered"]
    assert rc == 0 and rep["measured"]["verdict"]["state"] == "PASS"


def test_open_loop_sessions_started_late_are_not_reached(tmp_path, capsys):
    # the client falls behind: session i's first turn leaves i x 8 ms late (2.6 s behind by the end)
    recs = sf.open_sessions(0.5, late=lambda i: 0.008 * i)
    rc, rep = report(capsys, ef.write(tmp_path / "late.jsonl", recs))
    nr = rep["evidence"]["judged_level_not_reached"]
    assert nr is not None and "dispatch lateness p99" in nr, rep["evidence"]
    assert rc == 3 and rep["measured"]["verdict"]["state"] != "PASS"


def test_records_without_session_keep_the_request_rule(tmp_path, capsys):
    rc, rep = report(capsys, ef.write(tmp_path / "plain.jsonl", ef.honest_closed()))
    assert rc == 0
    assert "requests in flight (concurrency 4)" in rep["evidence"]["judged_level_delivered"]


def test_session_spans_are_bounded():
    spans = evidence.SessionSpans(cap=10)
    for i in range(100):
        spans.add(f"s{i}", 1, ef.T0 + i, ef.T0 + i, ef.T0 + i + 1)
        spans.add(f"s{i}", 2, ef.T0 + i + 1, ef.T0 + i + 1, ef.T0 + i + 2)
    assert len(spans) == 10 and len(spans.first_sends) == 10 and len(spans.index) == 10
    assert spans.ends[0] == ef.T0 + 2  # a kept session's later turn still extends it
