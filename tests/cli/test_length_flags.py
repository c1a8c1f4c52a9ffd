"""--input-tokens / --output-tokens in run, live and sweep: the distribution forms, bad forms (one line, exit 2),
and the run header's record of what was given (against the in-test FaultServer)."""

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
@pytest.mark.parametrize("flag", ["--input-tokens", "--output-tokens"])
@pytest.mark.parametrize("bad", ["normal:400", "lognormal:400,0.5[9-3]", "poisson:4", "0", "9-3", "uniform:x-4"])
def test_a_bad_length_form_is_one_line_and_exit_2(command, flag, bad, capsys):
    rc = main([command, "--url", URL, *LEVELS[command], flag, bad])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and flag in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("command", ["run", "live", "sweep"])
def test_each_form_reaches_the_settings_with_its_bounds(command):
    cases = {"128": ("fixed", (128, 128), False), "100-200": ("uniform", (100, 200), True),
             "uniform:100-200": ("uniform", (100, 200), False), "normal:400,100": ("normal", (1, 32768), False),
             "lognormal:400,0.6[50-800]": ("lognormal", (50, 800), False)}
    for text, (kind, bounds, sequential) in cases.items():
        cfg = config_from_args(parse([command, "--url", URL, *LEVELS[command], "--input-tokens", text,
                                      "--output-tokens", text]))
        for dist, pair in ((cfg.input_lengths, cfg.input_tokens), (cfg.output_lengths, cfg.output_tokens)):
            assert dist is not None and (dist.kind, dist.bounds, dist.sequential, dist.given) == (
                kind, bounds, sequential, text)
            assert pair == bounds
    plain = config_from_args(parse([command, "--url", URL, *LEVELS[command]]))
    assert plain.input_lengths is None and plain.output_lengths is None  # the defaults, as before


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_the_run_header_records_the_distributions_as_given_and_parsed(tmp_path, capsys):
    rec = tmp_path / "r.jsonl"
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=1), "--rate", "50", "--requests", "12", "--warmup", "0",
                   "--no-gpu", "--input-tokens", "lognormal:40,0.5[8-200]", "--output-tokens", "normal:8,2",
                   "--seed", "3", "--record", str(rec)])
    capsys.readouterr()
    assert rc in (0, 1, 3)
    lines = [json.loads(ln) for ln in rec.read_text().splitlines() if ln.strip()]
    load = lines[0]["load"]
    assert load["input_tokens"]["given"] == "lognormal:40,0.5[8-200]"
    assert load["input_tokens"]["distribution"]["kind"] == "lognormal"
    assert (load["input_tokens"]["min"], load["input_tokens"]["max"]) == (8, 200)
    assert load["output_tokens"]["distribution"]["mean"] == 8 and load["output_tokens"]["max"] == 32768
    reqs = [d for d in lines if d.get("type") == "request"]
    assert len(reqs) == 12 and all(8 <= d["input_tokens_asked"] <= 200 for d in reqs)
    assert len({d["input_tokens_asked"] for d in reqs}) > 3  # drawn per request
