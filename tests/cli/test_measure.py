"""`servewatch measure` (issue 41): the flags of `run`, a short measurement with no verdict. It prints throughput,
goodput, the percentiles and the errors, says "measure only: no verdict", never PASS or FAIL, exits 0 when the
measurement completed and 2 when it could not run; its record file is a normal record file that `report` judges
(INSUFFICIENT_WINDOW on a short window). Against the in-test FaultServer on 127.0.0.1."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.fault_server import FaultServer, closed_port
from tui.cli import main
from tui.cli.measure import NO_VERDICT

VERDICT_WORDS = re.compile(r"\b(PASS|FAIL|INSUFFICIENT_WINDOW|UNDECIDED|verdict [A-Z])")


@pytest.mark.slow  # starts a server or the CLI's load path against one
def test_measure_prints_the_measurement_and_no_verdict_and_report_judges_its_record(tmp_path, capsys):
    rec = tmp_path / "m.jsonl"
    with FaultServer() as fs:
        rc = main(["measure", "--url", fs.url("ok", tokens=4), "--concurrency", "2", "--requests", "20",
                   "--warmup", "0", "--no-gpu", "--record", str(rec), "--percentiles", "50,90,99"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.rstrip().endswith(NO_VERDICT) and out.count(NO_VERDICT) == 2
    assert not VERDICT_WORDS.search(out.replace(NO_VERDICT, "")), out  # nothing that reads as a verdict
    assert "throughput " in out and "goodput " in out and "TTFT P50" not in out
    assert "latency, ms: P50 / P90 / P99 (n requests)" in out
    assert re.search(r"TTFT\s+\S+ / \S+ / \S+ \(n 20\)", out) and "errors: none" in out
    header = json.loads(rec.read_text().splitlines()[0])
    assert header["type"] == "run" and header["load"]["purpose"] == "measure"
    assert main(["report", str(rec)]) == 3  # a normal record file: the report judges it (too short a window)
    assert "INSUFFICIENT_WINDOW" in capsys.readouterr().out


@pytest.mark.slow  # starts a server or the CLI's load path against one
def test_measure_counts_errors_by_class_and_still_exits_0(tmp_path, capsys):
    with FaultServer() as fs:
        rc = main(["measure", "--url", fs.url("status", code=500), "--concurrency", "1", "--requests", "5", "--warmup", "0",
                   "--no-gpu", "--record", str(tmp_path / "m.jsonl")])
    out = capsys.readouterr().out
    assert rc == 0 and "errors: http_5xx=5" in out and NO_VERDICT in out
    assert not VERDICT_WORDS.search(out.replace(NO_VERDICT, ""))


def test_measure_that_cannot_run_is_exit_2(tmp_path, capsys):
    rc = main(["measure", "--url", f"http://127.0.0.1:{closed_port()}", "--concurrency", "1", "--requests", "2",
               "--no-gpu", "--record", str(tmp_path / "m.jsonl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "Traceback" not in err[0]
    assert main(["measure", "--url", "http://127.0.0.1:9", "--requests", "2"]) == 2  # no level: bad usage
