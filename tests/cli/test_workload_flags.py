"""The session and shared-prefix flags (issue 23) in run, live and sweep: each reaches the settings, a bad value or
a combination that means nothing is one line and exit 2, and a recorded session run carries its blocks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.fault_server import FaultServer
from tui.cli import main, settings_of
from tui.cli.loadtest import config_from_args

URL = "http://127.0.0.1:9"
LEVELS = {"run": ["--rate", "2"], "live": ["--rate", "2"], "sweep": ["--concurrency", "1,2"]}


def parse(argv: list[str]) -> Any:
    """The command's settings object (``tui.cli.declare``), as ``main`` hands it to the command."""
    return settings_of(argv)


@pytest.mark.parametrize("command", ["run", "live", "sweep"])
def test_the_workload_flags_reach_the_settings(command):
    cfg = config_from_args(parse([command, "--url", URL, *LEVELS[command], "--turns", "2-6", "--think-time",
                                  "lognormal:5,0.5", "--shared-prefix-tokens", "512", "--prefix-groups", "4",
                                  "--dataset", "d.jsonl", "--max-context", "4096", "--dataset-max-bad-share", "0.1"]))
    assert cfg.turns is not None and cfg.turns.bounds == (2, 6)
    assert cfg.think_time is not None and cfg.think_time.kind == "lognormal"
    assert (cfg.shared_prefix_tokens, cfg.prefix_groups, cfg.dataset, cfg.max_context, cfg.dataset_max_bad_share) == (
        512, 4, "d.jsonl", 4096, 0.1)
    assert cfg.cache_prompt is True and cfg.level_unit in ("sessions", "sessions/s")
    plain = config_from_args(parse([command, "--url", URL, *LEVELS[command]]))
    assert (plain.turns, plain.think_time, plain.shared_prefix_tokens, plain.prefix_groups, plain.dataset) == (
        None, None, None, 1, None)
    assert plain.cache_prompt is False and plain.level_unit in ("concurrency", "req/s")


@pytest.mark.parametrize("command", ["run", "live", "sweep"])
@pytest.mark.parametrize(("args", "needle"), [
    (["--think-time", "3"], "--think-time needs --turns"),
    (["--prefix-groups", "3"], "--prefix-groups needs --shared-prefix-tokens"),
    (["--max-context", "100"], "--max-context needs --dataset"),
    (["--turns", "0"], "--turns"),
    (["--turns", "2", "--think-time", "uniform:5-1"], "--think-time"),
    (["--shared-prefix-tokens", "0"], "--shared-prefix-tokens"),
    (["--dataset", "d.jsonl", "--dataset-max-bad-share", "2"], "--dataset-max-bad-share"),
])
def test_a_bad_workload_flag_is_one_line_and_exit_2(command, args, needle, capsys):
    rc = main([command, "--url", URL, *LEVELS[command], *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("args", [["--turns", "2"], ["--shared-prefix-tokens", "64"], ["--dataset", "d.jsonl"]])
def test_a_trace_refuses_the_workload_flags(args, tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,10,5\n2023-11-16 18:15:47.6805900,10,5\n")
    rc = main(["run", "--url", URL, "--trace", str(trace), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and args[0] in err[0], err


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_a_recorded_session_run_carries_its_blocks(tmp_path, capsys):
    rec = tmp_path / "r.jsonl"
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=2), "--concurrency", "2", "--requests", "3", "--warmup", "0",
                   "--no-gpu", "--turns", "2", "--think-time", "0.01", "--shared-prefix-tokens", "32",
                   "--prefix-groups", "2", "--input-tokens", "16", "--output-tokens", "4", "--record", str(rec)])
    capsys.readouterr()
    assert rc in (0, 1, 3)
    lines = [json.loads(ln) for ln in rec.read_text().splitlines() if ln.strip()]
    load = lines[0]["load"]
    assert load["level_unit"] == "sessions" and load["sessions"]["think_time"]["given"] == "0.01"
    assert load["shared_prefix"] == {"tokens": 32, "groups": 2} and load["cache_policy"]["cache_prompt"] is True
    reqs = [d for d in lines if d.get("type") == "request"]
    assert len(reqs) == 6 and len({r["session"] for r in reqs}) == 3
    assert {r["prefix_group"] for r in reqs} <= {0, 1}
    end = [d for d in lines if d.get("type") == "step" and d.get("event") == "end"][0]
    assert end["sessions"]["started"] == 3 and end["sessions"]["completed"] == 3
