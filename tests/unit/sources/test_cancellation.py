"""Requests the user (or servewatch) cancelled.

Dropping cancelled requests favours PASS: the requests still in flight at a stop are the slow
ones. The rule (``tui.core.records.outcome_rule``): a cancelled request whose first token came
after the SLO, or which had none when it had already waited longer than the SLO, is not good
(failed); one whose outcome was still open is excluded from the good fraction and the verdict.
Both stay in the record file and are shown.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.fault_server import FaultServer
from tui.cli import main
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import EXCLUDED, FAILED, GOOD, SLOW, RequestRecord, outcome_rule, parse_line, parse_object
from tui.core.report import build_report, format_report
from tui.core.snapshot import FAIL, PASS
from tui.sources.load import LoadConfig, LoadGenerator

T0 = 1_767_225_600.25
SLO = outcome_rule(1000.0)


def cancelled(t_sent, *, waited, ttft=None, rid="c"):
    """A cancelled request record: cancelled ``waited`` s after it was sent, first token after ``ttft``."""
    return RequestRecord(rid, t_sent, t_sent + waited, False, t_sent,
                         None if ttft is None else t_sent + ttft, error="cancelled")


# ------------------------------------------------------------------ the rule


def test_cancelled_with_no_token_is_open_until_the_slo_has_passed():
    assert SLO(cancelled(T0, waited=0.2))[0] == EXCLUDED
    assert SLO(cancelled(T0, waited=1.0))[0] == EXCLUDED  # a token could still have come at exactly the SLO
    assert SLO(cancelled(T0, waited=1.000001))[0] == FAILED  # past the SLO without a first token: not good
    assert SLO(cancelled(T0, waited=30.0))[0] == FAILED
    assert SLO(cancelled(T0, waited=0.0))[0] == EXCLUDED  # stopped before it was sent


def test_cancelled_after_the_first_token_is_judged_by_that_token():
    assert SLO(cancelled(T0, waited=5.0, ttft=0.3)) == (EXCLUDED, pytest.approx(300.0))  # could still complete good
    assert SLO(cancelled(T0, waited=5.0, ttft=1.0))[0] == EXCLUDED
    assert SLO(cancelled(T0, waited=5.0, ttft=1.5)) == (FAILED, pytest.approx(1500.0))  # can no longer be good


def test_only_cancellation_is_ever_excluded():
    for err in ("read_timeout", "stream_reset", "http_5xx", "connect", "other"):
        r = RequestRecord("x", T0, T0 + 0.2, False, T0, None, error=err)
        assert SLO(r)[0] == FAILED
        r = RequestRecord("y", T0, T0 + 0.2, False, T0, T0 + 0.1, error=err)
        assert SLO(r)[0] == FAILED
    assert SLO(RequestRecord("z", T0, T0 + 0.2, True, T0, T0 + 0.1))[0] == GOOD
    assert SLO(RequestRecord("s", T0, T0 + 2.0, True, T0, T0 + 1.5))[0] == SLOW


# ------------------------------------------------------------------ the Monitor and the report


def healthy_run_stopped(n_done=96, n_open=4, n_late=0, phase_warmup_open=0):
    """n_done good requests 0.06 s apart, then a stop: n_open cancelled while open, n_late past the SLO."""
    recs = [RequestRecord(f"g{i}", T0 + 0.06 * i, T0 + 0.06 * i + 0.5, True, T0 + 0.06 * i,
                          T0 + 0.06 * i + 0.2, level=4.0, output_tokens=32) for i in range(n_done)]
    stop = T0 + 0.06 * n_done + 0.6
    # each request sent at its own moment (identical send, first-token and end times would be copies of one)
    recs += [RequestRecord(f"o{i}", stop - 0.3 - 0.001 * i, stop, False, stop - 0.3 - 0.001 * i, None,
                           error="cancelled", level=4.0) for i in range(n_open)]
    recs += [RequestRecord(f"l{i}", stop - 2.5 - 0.001 * i, stop, False, stop - 2.5 - 0.001 * i, None,
                           error="cancelled", level=4.0) for i in range(n_late)]
    recs += [RequestRecord(f"w{i}", T0 - 1 - 0.001 * i, T0 - 0.9, False, T0 - 1 - 0.001 * i, None, error="cancelled",
                           phase="warmup", level=4.0) for i in range(phase_warmup_open)]
    return recs


def monitor(recs, **kw) -> Monitor:
    m = Monitor(MonitorConfig(min_window_s=0, **kw))
    for r in recs:
        m.add(r)
    return m


def test_open_cancellations_do_not_lower_the_good_fraction_but_are_counted_and_shown():
    # measured (issue 8): Ctrl-C after 6 s against a healthy server took 100% to 94% ("cancelled=4")
    s = monitor(healthy_run_stopped(phase_warmup_open=2)).snapshot()
    assert (s.cumulative.good.good, s.cumulative.good.n) == (96, 96)
    assert s.cumulative.good.fraction == 1.0
    assert s.verdict.n == 96 and s.verdict.good == 96
    assert (s.cancelled_open, s.cancelled_late) == (4, 0)  # warmup cancellations are not counted here
    assert s.cancelled_note == "4 cancelled while still open, not judged"
    (row,) = s.levels
    assert row.cancelled_open == 4 and row.window.good.n == 96
    assert s.errors_by_class == {"cancelled": 6} and s.requests_total == 102
    assert [r.outcome for r in s.recent].count(EXCLUDED) == 6
    assert s.rolling.good.n == 96


def test_cancellations_past_the_slo_count_against_the_good_fraction():
    # the requests still in flight at a stop are the slow ones: dropping them would favour PASS
    s = monitor(healthy_run_stopped(n_done=120, n_open=3, n_late=20)).snapshot()
    assert (s.cumulative.good.good, s.cumulative.good.n, s.cumulative.failed) == (120, 140, 20)
    assert (s.cancelled_open, s.cancelled_late) == (3, 20)
    assert s.cancelled_note == ("3 cancelled while still open, not judged; "
                                "20 cancelled after the SLO had passed, counted as failed")
    assert s.verdict.state == FAIL  # 86% good: without the rule (all dropped) it would read 100% and PASS
    dropped = monitor([r for r in healthy_run_stopped(n_done=120) if r.error is None]).snapshot()
    assert dropped.verdict.state == PASS


def test_report_text_json_and_accept_show_the_cancellations(tmp_path, capsys):
    recs = healthy_run_stopped(n_late=1)
    path = tmp_path / "stopped.jsonl"
    lines = [json.dumps({"type": "run", "schema_version": 1, "synthetic": True})]
    from tui.core.records import request_to_dict

    lines += [json.dumps(request_to_dict(r)) for r in recs]
    path.write_text("\n".join(lines) + "\n")
    # every cancelled request is still in the file
    assert sum('"cancelled"' in x for x in lines) == 5
    main(["report", "--details", str(path), "--min-window-minutes", "0"])
    out = capsys.readouterr().out
    assert ("cancelled: 4 cancelled while still open, not judged; 1 cancelled after the SLO had passed, counted as "
            "failed") in out
    assert "good_fraction=99% (96/97;" in out
    main(["report", "--details", str(path), "--min-window-minutes", "0", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["cancelled"]["open_not_judged"] == 4 and rep["cancelled"]["past_slo_counted_failed"] == 1
    assert rep["measured"]["cancelled_open"] == 4 and rep["levels"][0]["cancelled_open"] == 4
    assert rep["measured"]["window"]["n"] == 97 and rep["requests_total"] == 101
    out_dir = tmp_path / "acc"
    main(["accept", "--records", str(path), "--out", str(out_dir)])
    capsys.readouterr()
    md = (out_dir / "acceptance.md").read_text()
    assert "4 cancelled while still open, not judged" in md
    doc = json.loads((out_dir / "acceptance.json").read_text())
    assert doc["measured"]["levels"][0]["cancelled_open"] == 4


def test_report_without_cancellations_says_nothing_about_them():
    s = monitor(healthy_run_stopped(n_open=0)).snapshot()
    assert s.cancelled_note is None
    rep = build_report(s)
    assert rep["cancelled"] == {"open_not_judged": 0, "past_slo_counted_failed": 0, "note": None}
    assert "cancelled" not in format_report(rep)


# ------------------------------------------------------------------ what the load generator writes


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def _cfg(url: str) -> LoadConfig:
    return LoadConfig(url=url, levels=[2], requests=2, metrics=False, gpu=False, progress_interval=0,
                      api_key_env=None, read_timeout=30.0, connect_timeout=2.0, input_tokens=(16, 16),
                      output_tokens=(8, 8))


async def _cancel_in_flight(url: str) -> tuple[list[dict], float, float]:
    out: list[dict] = []
    gen = LoadGenerator(_cfg(url), out.append)
    task = asyncio.create_task(gen.run())
    # synchronise on the generator's own state (bounded): both requests of the step in flight
    for _ in range(3000):
        if gen._step is not None and gen._step.sent == 2 and gen.in_flight == 2:
            break
        await asyncio.sleep(0.01)
    else:
        task.cancel()
        raise AssertionError("requests never got in flight")
    before = gen.clock.now()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = gen.clock.now()
    for d in out:
        parse_object(json.loads(json.dumps(d)))
    return [d for d in out if d["type"] == "request"], before, after


async def test_a_cancelled_request_record_carries_the_cancel_time_and_what_the_rule_needs(fs):
    # "stall": response headers and a role chunk, then nothing: in flight, no first token, until cancelled
    reqs, before, after = await _cancel_in_flight(fs.url("stall"))
    assert len(reqs) == 2
    for d in reqs:
        assert d["error"] == "cancelled" and d["complete"] is False and d["t_first_token"] is None
        assert d["t_sent"] <= d["t_end"]
        assert before <= d["t_end"] <= after  # t_end is the cancellation, not some later clean-up
        r = parse_line(json.dumps(d))
        waited_ms = (r.t_end - r.t_sent) * 1000.0
        assert waited_ms > 0.002
        # the record alone decides: open while the SLO had not passed, failed once it had
        assert outcome_rule(waited_ms + 1.0)(r)[0] == EXCLUDED
        assert outcome_rule(waited_ms - 0.002)(r)[0] == FAILED


async def test_ctrl_c_in_a_session_run_records_every_request_once_and_counts_the_sessions_stopped(fs):
    """Issue 23: sessions stopped mid-way (a turn in flight, or thinking) lose nothing: every request sent appears
    exactly once (the ones in flight as cancelled), and the step's sessions block counts them as cancelled."""
    from tui.core.lengths import parse_lengths
    from tui.core.thinktime import parse_think_time

    out: list[dict] = []
    cfg = _cfg(fs.url("stall"))
    cfg.turns, cfg.think_time, cfg.requests = parse_lengths("3"), parse_think_time("0"), 4
    gen = LoadGenerator(cfg, out.append)
    task = asyncio.create_task(gen.run())
    for _ in range(3000):  # bounded: both sessions' first turns in flight (the server stalls them)
        if gen._step is not None and gen._step.phase == "measure" and gen.in_flight == 2:
            break
        await asyncio.sleep(0.01)
    else:
        task.cancel()
        raise AssertionError("sessions never got in flight")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    reqs = [d for d in out if d["type"] == "request" and d["phase"] == "measure"]
    assert len(reqs) == len({d["id"] for d in reqs}) == 2 == gen.sent_total  # every request sent, exactly once
    assert all(d["error"] == "cancelled" and d["turn"] == 1 for d in reqs)
    end = [d for d in out if d["type"] == "step" and d["event"] == "end"][-1]
    assert end["requests"] == 2 and end["sessions"] == {"started": 2, "completed": 0, "ended_by_failure": 0,
                                                         "cut_at_step_end": 0, "cancelled": 2}
