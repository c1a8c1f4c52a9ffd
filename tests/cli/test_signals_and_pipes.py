"""Issue 37: signals and a closed output pipe give the documented exit codes (one table in the README, one definition
in tui/core/exitcodes.py): 141 whenever the reader of standard output went away with output unread, whatever the
command and however small its output (it fits in the pipe's buffer, so no write fails: the command waits at its end
until the reader has taken it or closed it); 143 after SIGTERM and 130 after Ctrl-C for the headless load commands
(tests/unit/sources/test_recorder.py, tests/unit/core/test_chain.py, tests/unit/sources/load/test_workers.py: run;
here: sweep)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.fault_server import FaultServer
from tests.support.paths import REPO
from tui.core.exitcodes import ExitCode

# every test here starts a process or a listening server (tests/conftest.py checks it)
pytestmark = pytest.mark.slow

BOUND_S = 120.0
SAMPLE = "sample_logs/default.jsonl"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO))


@pytest.mark.parametrize("argv", [
    ["report", SAMPLE, "--json"],
    ["report", SAMPLE],
    ["budget"],
    ["budget", "--json"],
    ["compare", SAMPLE, "tests/fixtures/gemma_sweep_short.jsonl", "--json", "--allow-different-workload"],
    ["--help"],
])
def test_a_reader_that_goes_away_gives_141(argv):
    cmd = [sys.executable, "-m", "tui", *argv]
    p1 = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=_env())
    p2 = subprocess.Popen(["head", "-c", "1"], stdin=p1.stdout, stdout=subprocess.DEVNULL)
    p1.stdout.close()  # only head holds the read end now
    p2.wait(timeout=BOUND_S)
    err = p1.stderr.read().decode()
    assert p1.wait(timeout=BOUND_S) == ExitCode.BROKEN_PIPE, err[-800:]
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_reader_that_takes_everything_gets_the_verdict_code():
    p1 = subprocess.Popen([sys.executable, "-m", "tui", "report", SAMPLE, "--json"], stdout=subprocess.PIPE,
                          cwd=REPO, env=_env())
    data = p1.stdout.read()
    assert p1.wait(timeout=BOUND_S) == ExitCode.FAIL  # the bundled run FAILs at its judged level
    assert data.startswith(b"{")


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, ExitCode.TERMINATED), (signal.SIGINT, ExitCode.INTERRUPTED)])
def test_sweep_stopped_by_a_signal_seals_prints_and_exits_with_the_signal_code(tmp_path, sig, code):
    rec = tmp_path / "sweep.jsonl"
    with FaultServer() as fs:
        proc = subprocess.Popen([sys.executable, "-m", "tui", "sweep", "--url", fs.url("stall"), "--model", "m",
                                 "--concurrency", "2,4", "--max-step-seconds", "600", "--no-gpu", "--record", str(rec)],
                                cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + BOUND_S
            while len(fs.completions()) < 2:  # both requests of the first step are at the server
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)  # pacing the poll of the server's count
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=BOUND_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert proc.returncode == code, (out[-800:], err[-800:])
    assert "interrupted" in out and "Traceback" not in err and "internal error" not in err
    assert "records:" in out  # the sweep's summary (the partial verdict) was printed before exiting
    assert rec.read_bytes().splitlines()[-1].startswith(b'{"type":"seal"')
