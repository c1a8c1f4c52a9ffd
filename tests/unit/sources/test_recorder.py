"""Nothing lost: kill -9, Ctrl-C and stop() leave every request in the record file exactly once;
secrets never reach the file or the output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.support.paths import REPO
from tui.core.records import LineIssue, RequestRecord, RunHeader, read_file
from tui.sources.live import LiveSource
from tui.sources.load import LoadConfig
from tui.sources.recorder import Recorder

ROOT = REPO


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def complete_request_lines(path: Path) -> int:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    n = 0
    for line in data.split(b"\n")[:-1]:  # only newline-terminated lines
        if line.startswith(b'{"type":"request"'):
            n += 1
    return n


def wait_for(pred, timeout: float, what: str) -> None:
    """Poll a condition with a bounded deadline (the condition is the synchronisation)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def start_cli(args: list[str], env_extra: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OPENAI_API_KEY", None)
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "tui.cli", "run", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def load_records(path: Path):
    items = list(read_file(str(path)))
    return ([i for i in items if not isinstance(i, LineIssue)], [i for i in items if isinstance(i, LineIssue)])


# ------------------------------------------------------------------ the recorder itself


def test_recorder_appends_one_line_per_record_and_refuses_duplicate_ids(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(b'{"type":"run","schema_version":1,"synthetic":false}\n')  # an existing file is appended to
    with Recorder(str(p)) as rec:
        d = {"type": "request", "id": "a", "t_sent": 1.0, "t_end": 2.0, "complete": True}
        assert rec.write(d) is True
        assert rec.write(dict(d)) is False
        assert rec.write({"type": "queue", "t": 1.5, "source": "x"}) is True
        assert (rec.requests_written, rec.duplicates_refused, rec.records_written) == (1, 1, 2)
    assert rec.write(d) is False  # closed
    lines = p.read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[-1] == b""
    assert [json.loads(x)["type"] for x in lines[:3]] == ["run", "request", "queue"]


# ------------------------------------------------------------------ kill -9


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_kill_9_leaves_a_file_that_replays_to_its_last_complete_line(fs, tmp_path):
    rec = tmp_path / "killed.jsonl"
    proc = start_cli(["--url", fs.url("ok", tokens=30, delay=0.01), "--concurrency", "4", "--requests", "500",
                      "--record", str(rec), "--no-gpu", "--output-tokens", "30"])
    try:
        wait_for(lambda: complete_request_lines(rec) >= 12 or proc.poll() is not None, 60, "12 request lines")
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    records, issues = load_records(rec)
    assert isinstance(records[0], RunHeader) and records[0].synthetic is False
    # at most the final line can be cut short; nothing before it is damaged
    assert all(i.kind == "truncated" for i in issues) and len(issues) <= 1
    reqs = [r for r in records if isinstance(r, RequestRecord)]
    assert len(reqs) >= 12
    ids = [r.id for r in reqs]
    assert len(ids) == len(set(ids))
    assert all(r.complete for r in reqs)  # killed: nothing got the chance to be recorded as cancelled


# ------------------------------------------------------------------ Ctrl-C


@pytest.mark.slow
def test_ctrl_c_records_in_flight_as_cancelled_and_every_request_once(fs, tmp_path):
    rec = tmp_path / "interrupted.jsonl"
    before = {e["id"] for e in fs.completions()}
    proc = start_cli(["--url", fs.url("ok", tokens=200, delay=0.01), "--concurrency", "3", "--requests", "500",
                      "--record", str(rec), "--no-gpu", "--min-window-minutes", "0"])
    try:
        wait_for(lambda: complete_request_lines(rec) >= 3 or proc.poll() is not None, 60, "3 request lines")
        # and the next ones are on the server, streaming
        wait_for(lambda: len({e["id"] for e in fs.completions()} - before) >= 6, 30, "requests in flight")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # issue 37: Ctrl-C ends a headless run with 130, after sealing the record and printing the partial verdict
    assert proc.returncode == 130, err.decode()[-2000:]
    assert b"interrupted" in out and b"Traceback" not in err
    assert rec.read_bytes().splitlines()[-1].startswith(b'{"type":"seal"')
    records, issues = load_records(rec)
    assert issues == []
    reqs = [r for r in records if isinstance(r, RequestRecord)]
    ids = [r.id for r in reqs]
    assert len(ids) == len(set(ids))
    cancelled = [r for r in reqs if r.error == "cancelled"]
    assert len(cancelled) >= 1 and all(not r.complete for r in cancelled)
    server_ids = {e["id"] for e in fs.completions()} - before
    assert server_ids <= set(ids)  # every request that reached the server is in the file
    assert set(ids) - server_ids <= {r.id for r in cancelled}  # the rest were stopped before sending


# ------------------------------------------------------------------ LiveSource.stop()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_live_source_stop_records_in_flight_as_cancelled(fs, tmp_path):
    rec = tmp_path / "live.jsonl"
    got: list = []
    lock = threading.Lock()
    three = threading.Event()

    def sink(items):
        with lock:
            got.extend(items)
            if sum(isinstance(i, RequestRecord) for i in got) >= 3:
                three.set()

    cfg = LoadConfig(url=fs.url("ok", tokens=200, delay=0.01), levels=[3], requests=500, record=str(rec),
                     gpu=False, progress_interval=0, api_key_env=None)
    src = LiveSource(cfg)
    assert (src.mode, src.label, src.finished, src.in_flight) == ("LIVE", fs.url("ok", tokens=200, delay=0.01), False, 0)
    src.start(sink)
    try:
        assert three.wait(60), "no requests completed"
        wait_for(lambda: src.in_flight == 3, 30, "3 requests in flight")
        assert isinstance(src.in_flight, int)
    finally:
        src.stop()
    assert src.finished and src.error is None
    records, issues = load_records(rec)
    assert issues == []
    reqs = [r for r in records if isinstance(r, RequestRecord)]
    ids = [r.id for r in reqs]
    assert len(ids) == len(set(ids))
    assert sum(r.error == "cancelled" for r in reqs) == 3
    with lock:
        sunk = [i.id for i in got if isinstance(i, RequestRecord)]
        assert isinstance(got[0], RunHeader)
    assert sunk == ids  # the sink saw exactly what the file holds, in order
    assert src.in_flight == 0


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_live_source_unreachable_server_reports_and_finishes(tmp_path):
    from tests.support.fault_server import closed_port

    got: list = []
    cfg = LoadConfig(url=f"http://127.0.0.1:{closed_port()}", levels=[1], record=str(tmp_path / "x.jsonl"),
                     gpu=False, progress_interval=0, api_key_env=None)
    src = LiveSource(cfg)
    src.start(got.extend)
    assert src.wait(30)
    assert src.finished and "cannot reach" in (src.error or "")
    assert any(isinstance(i, LineIssue) and "cannot reach" in i.reason for i in got)


# ------------------------------------------------------------------ secrets


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_secrets_never_reach_the_file_or_the_output(fs, tmp_path):
    rec = tmp_path / "secret.jsonl"
    key = "sk-live-SECRET-key-0123456789"
    hdr = "hdr-SECRET-value-42"
    pw = "pw-SECRET-userinfo"
    qtok = "q-SECRET-token-77"
    url = fs.url("echo_auth").replace("http://", f"http://alice:{pw}@") + f"?token={qtok}"
    proc = start_cli(["--url", url, "--model", "m", "--concurrency", "1", "--requests", "2", "--record", str(rec),
                      "--no-gpu", "--api-key-env", "SW_TEST_KEY", "--header", f"X-Api-Token: {hdr}"],
                     env_extra={"SW_TEST_KEY": key})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 1, 3), err.decode()[-2000:]
    sent = [e for e in fs.completions() if e["scenario"] == "echo_auth"][-2:]
    assert sent[0]["headers"]["authorization"] == f"Bearer {key}" and sent[0]["headers"]["x-api-token"] == hdr
    blob = rec.read_bytes() + out + err
    for secret in (key, hdr, pw, qtok, "alice:"):
        assert secret.encode() not in blob, secret
    records, _ = load_records(rec)
    header = records[0]
    assert header.data["headers"] == {"Authorization": "<redacted>", "X-Api-Token": "<redacted>"}
    assert header.data["target"]["url"] == fs.url("echo_auth")
    reqs = [r for r in records if isinstance(r, RequestRecord)]
    assert [r.error for r in reqs] == ["http_4xx", "http_4xx"]
    assert all("<redacted>" in r.error_detail for r in reqs)


# ------------------------------------------------------------------ the command wiring


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_run_cli_unreachable_server_exits_2_and_leaves_no_file(tmp_path, capsys):
    from tests.support.fault_server import closed_port
    from tui.cli import main

    rec = tmp_path / "never.jsonl"
    code = main(["run", "--url", f"http://127.0.0.1:{closed_port()}/v1", "--concurrency", "1", "--record", str(rec),
                 "--no-gpu"])
    assert code == 2
    assert "cannot reach" in capsys.readouterr().err
    assert not rec.exists()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_cmd_live_runs_the_console_on_a_live_source(fs, tmp_path, monkeypatch, capsys):
    """`servewatch live` builds a LiveSource, hands it to the console, stops it afterwards."""
    import tui.app
    from tui.cli import settings_of
    from tui.cli.live import run as cmd_live

    seen = {}

    class FakeApp:
        def __init__(self, source, sink):
            self.source, self.sink = source, sink

        def run(self):
            self.source.start(self.sink)
            assert self.source.wait(60)
            seen["snap"] = self.sink.snapshot()
            seen["source"] = self.source
            return 0

    monkeypatch.setattr(tui.app, "build_app", lambda source, sink, budget, **kw: FakeApp(source, sink))
    rec = tmp_path / "live-cmd.jsonl"
    args = settings_of(["live", "--url", fs.url("ok", tokens=2), "--concurrency", "2", "--requests", "4", "--record",
                         str(rec), "--no-gpu"])
    assert cmd_live(args) == 0
    assert f"record file: {rec}" in capsys.readouterr().out
    snap = seen["snap"]
    assert snap.requests_total == 4 and snap.synthetic is False
    assert seen["source"].finished and seen["source"].status == "LIVE finished"
    records, issues = load_records(rec)
    assert issues == [] and sum(isinstance(r, RequestRecord) for r in records) == 4
