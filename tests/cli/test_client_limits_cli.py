"""Issue 36, finding 2: with few file descriptors the client's own failures were blamed on the server (the record held
49,292 ``connect`` failures "[Errno 24] Too many open files", the run said FAIL, exit 1).

A real ``servewatch run`` in a subprocess whose open-file limit is set low (soft and hard, ``resource.setrlimit`` in
``preexec_fn``: the test process itself keeps its limit) against an in-test server on 127.0.0.1: the requests the
client could not open a connection for are recorded as the ``client`` class (EMFILE), the step is client_limited,
the run exits 3 with what to do, and the header says the limit the load ran under. The server's failures still
FAIL the run on their own. Both HTTP paths (the lean one and httpx's standard transport) classify alike, and so
do the worker processes.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tests.support.fault_server import FaultServer
from tests.support.paths import REPO

LIMIT = 64
ADVICE = "the client ran out of file descriptors at 64: raise the limit (ulimit -n) or lower the concurrency"


def _low_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tui", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_low_fds)


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("workers", [1, 2])
def test_run_out_of_file_descriptors_is_client_limited_exit_3_never_the_servers_failure(tmp_path, workers):
    rec = tmp_path / "run.jsonl"
    with FaultServer() as fs:
        # each stream holds its connection ~0.6 s: 100 streams at once need more descriptors than 64
        r = _run(["run", "--url", fs.url("ok", tokens=3, delay=0.2), "--concurrency", "100", "--requests", "300",
                  "--warmup", "0", "--no-gpu", "--record", str(rec), "--min-window-minutes", "0",
                  "--workers", str(workers)])
        seen = len(fs.completions())
    assert r.returncode == 3, r.stdout + r.stderr
    assert ADVICE in r.stdout
    recs = _records(rec)
    header = recs[0]
    assert header["load"]["fd_limit"]["soft"] == LIMIT and header["load"]["fd_limit"]["hard"] == LIMIT
    reqs = [d for d in recs if d["type"] == "request" and d["phase"] == "measure"]
    errors = {d["error"] for d in reqs}
    assert errors == {None, "client"}  # no "connect": the server refused nothing
    client = [d for d in reqs if d["error"] == "client"]
    assert client and all(d["error_detail"].startswith("EMFILE: ") and d["http_status"] is None for d in client)
    assert len(reqs) - len(client) == seen  # every request the server saw, and only those, has the server's outcome
    (end,) = [d for d in recs if d["type"] == "step" and d["event"] == "end"]
    assert end["client_limited"] is True and end["errors"] == {"client": len(client)}
    assert end["verdict"] == "UNDECIDED" and ADVICE in end["verdict_reason"]
    if workers > 1:
        assert [w["fd_limit"]["soft"] for w in header["load"]["workers"]["workers"]] == [LIMIT] * workers
        return
    rep = subprocess.run([sys.executable, "-m", "tui", "report", str(rec), "--json", "--min-window-minutes", "0"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert rep.returncode == 3
    doc = json.loads(rep.stdout)
    assert doc["measured"]["client_limited"] == len(client) and doc["errors_by_class"] == {"client": len(client)}
    assert doc["measured"]["window"]["failed"] == 0  # never counted as the server's failures


def test_the_servers_failures_alone_still_fail_a_client_limited_run(tmp_path):
    rec = tmp_path / "run.jsonl"
    with FaultServer() as fs:  # every answer's first token after 0.3 s, the SLO 100 ms: the server fails alone
        r = _run(["run", "--url", fs.url("ok", tokens=3, delay=0.2, first_delay=0.3), "--concurrency", "100",
                  "--requests", "300", "--warmup", "0", "--no-gpu", "--record", str(rec), "--min-window-minutes", "0",
                  "--slo-ttft-ms", "100"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL on the server's failures alone" in r.stdout
    assert any(d.get("error") == "client" for d in _records(rec))


def test_both_http_paths_classify_the_clients_own_failures_alike():
    with FaultServer() as fs:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        r = subprocess.run([sys.executable, "-m", "tests.support.fd_paths", fs.url("ok", tokens=3, delay=0.2), "100"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=120, preexec_fn=_low_fds)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    for path in ("lean", "httpx"):
        assert set(got[path]["errors"]) == {"None", "client"}, (path, got)
        assert set(got[path]["kinds"]) == {"EMFILE"}, (path, got)
