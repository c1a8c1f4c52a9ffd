"""Defaults that can reach a verdict; the budget record; the sweep ladder; the progress line.

The load runs through the real CLI and load generator at compressed time against a server that replays the real
llama-server requests of sample_logs/default.jsonl (tests/support/virtual_server.py).
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.virtual_server import RecordedServer, patched_for_virtual_time
from tui.core.budget import budget_from_dict
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.progress import evidence_line
from tui.core.records import RequestRecord
from tui.core.sweep import DEFAULT_MAX_LEVEL, default_ladder
from tui.sources.load import ConfigError, LoadConfig, default_step_cap


def _cli(argv, server, monkeypatch, tmp_path, capsys):
    from tui.cli import build_parser

    monkeypatch.chdir(tmp_path)
    patched_for_virtual_time(monkeypatch, server)
    args = build_parser().parse_args(argv)
    code = args.func(args)
    out = capsys.readouterr()
    recs = [json.loads(line) for line in (tmp_path / "rec.jsonl").read_text().splitlines()]
    return code, out.out, out.err, recs


def _steps(recs):
    return {(d["level"], d["round"]): d for d in recs if d["type"] == "step" and d["event"] == "end"}


# ------------------------------------------------------------------ configuration


def test_the_default_step_runs_until_decided_capped_at_window_plus_count_allowance():
    from tui.cli import settings_of
    from tui.cli.loadtest import config_from_args

    def parse(argv: list[str]):
        return settings_of(["run", *argv])

    cfg = config_from_args(parse(["--url", "http://127.0.0.1:9", "--concurrency", "1,2"]))
    assert cfg.until_decided and cfg.step_requests is None
    assert cfg.step_duration == default_step_cap(10.0) == 900.0
    cfg = config_from_args(parse(["--url", "http://127.0.0.1:9", "--concurrency", "1", "--min-window-minutes",
                                         "20", "--max-step-seconds", "2000"]))
    assert cfg.step_duration == 2000.0
    assert config_from_args(parse(["--url", "http://127.0.0.1:9", "--concurrency", "1",
                                          "--min-window-minutes", "20"])).step_duration == 1500.0
    fixed = config_from_args(parse(["--url", "http://127.0.0.1:9", "--concurrency", "1", "--requests", "7"]))
    assert not fixed.until_decided and fixed.step_requests == 7 and fixed.step_duration is None
    timed = config_from_args(parse(["--url", "http://127.0.0.1:9", "--concurrency", "1", "--duration", "30"]))
    assert not timed.until_decided and timed.step_requests is None and timed.step_duration == 30
    # programmatic use keeps its old bound (the CLI never leaves a step unbounded)
    assert LoadConfig(url="http://127.0.0.1:9").step_requests == 40
    with pytest.raises(ConfigError):
        LoadConfig(url="http://127.0.0.1:9", until_decided=True, max_step_seconds=0.0).validate()


def test_the_same_cap_flag_in_run_live_and_sweep():
    from tui.cli import build_parser

    p = build_parser()
    for cmd in ("run", "live", "sweep"):
        args = p.parse_args([cmd, "--url", "http://127.0.0.1:9", "--concurrency", "1", "--max-step-seconds", "77"])
        assert args.max_step_seconds == 77.0


def test_a_bad_cap_is_bad_usage(capsys):
    from tui.cli import main

    try:
        code = main(["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--max-step-seconds", "0"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "--max-step-seconds" in err and "Traceback" not in err


# ------------------------------------------------------------------ the progress line


def test_progress_line_uses_the_monitors_verdict_numbers():
    mon = Monitor(MonitorConfig())
    for i in range(312):  # 97.4% good over 400 s: evidence for PASS building up, window not yet covered
        t = i * 400.0 / 312
        mon.add_request(RequestRecord(id=str(i), t_sent=t, t_end=t + 1, complete=True, t_intended=t,
                                      t_first_token=t + (0.2 if i % 40 else 2.0), level=2.0))
    v = mon.verdict_for(mon.levels[(2.0, 1)])
    line = evidence_line(v, 600.0)
    m, sec = divmod(int(v.elapsed_s), 60)
    assert line == f"312 requests, {m}:{sec:02d} of the 10-min window, evidence {v.e_pass:.1f} of 20 for PASS"
    assert 1.0 < v.e_pass < 20.0
    short = evidence_line(mon.verdict_for(None), 600.0)
    assert short.startswith(f"0 of the {mon.min_requests} requests needed, 0:00 of the 10-min window")


# ------------------------------------------------------------------ end to end at compressed time


def test_default_run_against_a_server_that_keeps_up_passes_every_level(monkeypatch, tmp_path, capsys):
    code, out, err, recs = _cli(["run", "--url", "http://127.0.0.1:8080", "--concurrency", "1,2", "--record",
                                 "rec.jsonl"], RecordedServer("keeps-up"), monkeypatch, tmp_path, capsys)
    ends = _steps(recs)
    assert code == 0, out[-1500:]
    assert {k: d["verdict"] for k, d in ends.items()} == {(1.0, 1): "PASS", (2.0, 1): "PASS"}
    for d in ends.values():  # a PASS needs the 10-min window: the step ran past it, and stopped soon after
        assert 600.0 <= d["duration_s"] < 900.0
    assert "each step until PASS or FAIL, at most 900 s" in out
    assert "of the 10-min window, evidence " in out
    hdr = recs[0]
    assert hdr["type"] == "run" and hdr["load"]["until_decided"] is True and hdr["load"]["duration"] == 900.0
    assert hdr["load"]["requests"] is None
    assert hdr["server_capacity"] is None  # the replay server reports no allocation
    assert not [d for d in recs if d["type"] == "budget"]  # no budget inputs: none is made up


def test_explicit_requests_are_honoured(monkeypatch, tmp_path, capsys):
    code, out, err, recs = _cli(["run", "--url", "http://127.0.0.1:8080", "--concurrency", "2", "--requests", "9",
                                 "--record", "rec.jsonl"], RecordedServer("keeps-up"), monkeypatch, tmp_path, capsys)
    assert len([d for d in recs if d["type"] == "request"]) == 9
    assert _steps(recs)[(2.0, 1)]["verdict"] == "INSUFFICIENT_WINDOW"
    assert code == 3


def test_a_step_that_cannot_decide_ends_at_the_cap(monkeypatch, tmp_path, capsys):
    code, out, err, recs = _cli(["run", "--url", "http://127.0.0.1:8080", "--concurrency", "1", "--max-step-seconds",
                                 "120", "--record", "rec.jsonl"], RecordedServer("keeps-up"), monkeypatch, tmp_path,
                                capsys)
    end = _steps(recs)[(1.0, 1)]
    assert 120.0 <= end["duration_s"] < 130.0 and end["verdict"] == "INSUFFICIENT_WINDOW"
    assert "shorter than the 10-min window: no step can PASS" in out
    assert "concurrency 1 round 1 ended INSUFFICIENT_WINDOW, undecided at its limit" in out
    assert code == 3


def test_budget_inputs_are_recorded_after_the_header(monkeypatch, tmp_path, capsys):
    code, out, err, recs = _cli(["run", "--url", "http://127.0.0.1:8080", "--concurrency", "1", "--requests", "3",
                                 "--params", "270M", "--layers", "18", "--kv-heads", "1", "--head-dim", "256",
                                 "--gpu-gib", "8", "--max-seq", "2048", "--record", "rec.jsonl"],
                                RecordedServer("keeps-up"), monkeypatch, tmp_path, capsys)
    assert [d["type"] for d in recs[:2]] == ["run", "budget"]
    budget = recs[1]
    assert budget["schema"] == "servewatch.budget/1" and budget["parameters"]["layers"] == 18
    result = budget_from_dict(budget)  # recomputed and verified
    assert result.inputs.gpu_gib == 8 and result.candidate == budget["results"]["candidate"]
    # the nested shape reads the same
    nested = {"type": "budget", "budget": {k: v for k, v in budget.items() if k != "type"}}
    assert budget_from_dict(nested).candidate == result.candidate


def test_bad_budget_inputs_are_bad_usage(monkeypatch, tmp_path, capsys):
    from tui.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--params", "lots"])
    err = capsys.readouterr().err
    assert code == 2 and "bad budget" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_server_capacity_goes_into_the_header(monkeypatch, tmp_path, capsys):
    props = {"total_slots": 4, "default_generation_settings": {"n_ctx": 2048}, "build_info": "b1"}
    server = RecordedServer("keeps-up", pages={"/props": httpx.Response(200, json=props)})
    code, out, err, recs = _cli(["run", "--url", "http://127.0.0.1:8080/v1", "--concurrency", "1", "--requests", "2",
                                 "--record", "rec.jsonl"], server, monkeypatch, tmp_path, capsys)
    cap = recs[0]["server_capacity"]
    assert cap["engine"] == "llamacpp" and cap["sequences"] == 4 and cap["tokens_per_sequence"] == 2048
    assert cap["total_tokens"] == 8192 and cap["source"] == "/props" and "operator" in cap["note"]
    assert "server: the server allocated room for 4 sequences of 2048 tokens" in out


# ------------------------------------------------------------------ sweep


def test_default_ladder_does_not_depend_on_an_example_model():
    assert default_ladder(None) == [1, 2, 4, 8, 16, 32, 64] and DEFAULT_MAX_LEVEL == 64
    assert default_ladder(15) == [1, 2, 4, 8, 16, 30]  # with a budget: up to twice its candidate
    assert default_ladder(None, limit=8) == [1, 2, 4, 8]


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_sweep_without_budget_climbs_the_documented_ladder_and_stops_at_the_first_fail(monkeypatch, tmp_path,
                                                                                      capsys):
    code, out, err, recs = _cli(["sweep", "--url", "http://127.0.0.1:8080", "--record", "rec.jsonl"],
                                RecordedServer("recorded"), monkeypatch, tmp_path, capsys)
    assert "concurrency ladder 1,2,4,8,16,32,64" in out and "budget: unknown" in out
    assert "teaching" not in out
    states = {lvl: d["verdict"] for (lvl, _), d in _steps(recs).items()}
    assert states[1.0] == "PASS" and states[4.0] == "FAIL" and 8.0 not in states  # stopped at the first FAIL
    assert "measured capacity: 1" in out or "measured capacity: 2" in out
    assert code == 0
    assert recs[0]["load"]["duration"] == 900.0 and not [d for d in recs if d["type"] == "budget"]


def test_sweep_with_a_budget_records_it_and_ladders_to_twice_its_candidate(monkeypatch, tmp_path, capsys):
    code, out, err, recs = _cli(["sweep", "--url", "http://127.0.0.1:8080", "--record", "rec.jsonl", "--params", "7e9",
                                 "--gpu-gib", "24", "--max-step-seconds", "60"],
                                RecordedServer("recorded"), monkeypatch, tmp_path, capsys)
    budget = [d for d in recs if d["type"] == "budget"]
    assert len(budget) == 1 and budget[0]["results"]["candidate"] == 15
    assert "concurrency ladder 1,2,4,8,16,30" in out and "memory-only candidate 15" in out
