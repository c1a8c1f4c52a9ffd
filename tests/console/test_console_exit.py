"""The console ends when its driver goes away: SIGTERM, SIGHUP, or standard input closed.

Each test runs the real console (``python3 -m tui``) in a child process, waits until it has drawn
its first screen (the child's own output is the synchronisation), makes the driver go away and then
waits on the child's exit with a generous bound. The exit codes tell the console's own path from a
death by signal: 143 / 129 (128 + the signal) come from ``ServewatchApp.driver_went_away``, while a
process killed by the signal's default action would report -15 / -1.

The live test points ``servewatch live`` at an in-test server (127.0.0.1) whose answers stall after
the first chunk, so both requests are in flight when SIGTERM arrives; the record file must then hold
each of them exactly once, as cancelled.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections import Counter

import pytest

from tests.support.fault_server import FaultServer
from tests.support.paths import REPO
from tui.core.records import LineIssue, RequestRecord, read_file

REPO = REPO
START_DEADLINE_S = 60.0  # first screen drawn (a busy 2-core machine; a healthy start takes ~1-2 s)
EXIT_DEADLINE_S = 30.0  # a generous bound for the failing case; the console ends within a second
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"  # what `textual serve` runs the app with

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and terminals")


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("TEXTUAL_DRIVER", None)
    env.update(extra)
    return env


class Output:
    """Drains a child's output in a thread (so the child never blocks on a full pipe) and lets a test
    wait until some bytes have appeared."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = bytearray()
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the terminal's other side is gone
                chunk = b""
            with self._cv:
                if not chunk:
                    self.closed = True
                    self._cv.notify_all()
                    return
                self.data += chunk
                self._cv.notify_all()

    closed = False

    def wait_for(self, needle: bytes, timeout: float = START_DEADLINE_S) -> None:
        with self._cv:
            ok = self._cv.wait_for(lambda: needle in self.data or self.closed, timeout)
            if not ok or needle not in self.data:
                tail = bytes(self.data[-600:]).decode("utf-8", "replace")
                raise AssertionError(f"the console did not show {needle!r}; output ends with {tail!r}")


def start_in_terminal(args: list[str], size: tuple[int, int] = (120, 40)):
    """The console in a pseudo-terminal of ``size`` (columns, rows): (process, master fd, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    # a terminal's console starts with SIGHUP at its default: a test run under nohup ignores SIGHUP, the child would
    # inherit that, and the console rightly keeps running on a SIGHUP it was told to ignore (seen under `nohup .ci/run`)
    inherited = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tui", *args], stdin=slave, stdout=slave, stderr=slave,
                                cwd=REPO, env=_env(), start_new_session=True)
    finally:
        signal.signal(signal.SIGHUP, inherited)
    os.close(slave)
    return proc, master, Output(master)


def finish(proc: subprocess.Popen) -> int:
    """Wait for the child to exit; a child still running after the bound fails the test (and is killed)."""
    try:
        return proc.wait(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"the console was still running {EXIT_DEADLINE_S:g} s after its driver went away") from exc


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signal_stops_the_console(sig, code):
    proc, master, out = start_in_terminal(["--max-speed"])
    try:
        out.wait_for(b"REPLAY")  # drawn: the console is up and its handlers are installed
        os.kill(proc.pid, sig)
        assert finish(proc) == code  # the console's own exit, not a death by the signal (-sig)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_closed_terminal_stops_the_console():
    """The terminal window closes: its master side goes away and standard input hangs up."""
    proc, master, out = start_in_terminal(["--max-speed"])
    try:
        out.wait_for(b"REPLAY")
        os.close(master)
        master = -1
        assert finish(proc) == 129
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if master >= 0:
            os.close(master)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_closed_standard_input_under_the_web_driver_stops_the_console():
    """As under `textual serve`: the web driver talks over pipes; its parent going away closes stdin."""
    proc = subprocess.Popen([sys.executable, "-m", "tui", "--max-speed"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO,
                            env=_env(TEXTUAL_DRIVER=WEB_DRIVER), start_new_session=True)
    out = Output(proc.stdout.fileno())
    try:
        out.wait_for(b"REPLAY")
        proc.stdin.close()
        assert finish(proc) == 129
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_sigterm_on_a_live_run_records_in_flight_requests_as_cancelled(tmp_path):
    record = tmp_path / "live.jsonl"
    with FaultServer() as fs:
        args = ["live", "--url", fs.url("stall"), "--model", "fault-model", "--concurrency", "2",
                "--requests", "2", "--input-tokens", "8", "--output-tokens", "8", "--record", str(record),
                "--no-gpu", "--metrics-interval", "0.5", "--read-timeout", "300", "--theme", "light",
                "--rolling-requests", "50", "--export-dir", str(tmp_path / "exports")]
        proc, master, out = start_in_terminal(args)
        try:
            out.wait_for(b"LIVE")
            deadline = time.monotonic() + START_DEADLINE_S
            while len(fs.completions()) < 2:  # both requests reached the server and stall there
                assert proc.poll() is None, bytes(out.data[-600:]).decode("utf-8", "replace")
                assert time.monotonic() < deadline, "the live run did not send its two requests"
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGTERM)
            assert finish(proc) == 143
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            os.close(master)
    items = list(read_file(str(record)))
    assert not [i for i in items if isinstance(i, LineIssue)]
    requests = [i for i in items if isinstance(i, RequestRecord)]
    assert Counter(r.id for r in requests) == Counter({r.id: 1 for r in requests})  # each exactly once
    assert len(requests) == 2, requests
    assert all(r.error == "cancelled" and not r.complete for r in requests), requests


# ------------------------------------------------------------------ issue 37: quitting and Ctrl-C, as documented

@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_quitting_the_bundled_console_exits_0_and_replay_keeps_the_verdict():
    """`servewatch` / `python3 -m tui` on the bundled sample is a demonstration: q exits 0 (the quick start no longer
    "fails" in a script); `replay FILE` keeps the verdict's code (the bundled run FAILs at its judged level: 1)."""
    for args, code in ((["--max-speed"], 0), (["replay", "sample_logs/default.jsonl", "--max-speed"], 1)):
        proc, master, out = start_in_terminal(args)
        try:
            out.wait_for(b"REPLAY")
            out.wait_for(b"FAIL")  # the replay reached its end state
            os.write(master, b"q")
            assert finish(proc) == code, args
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            os.close(master)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_ctrl_c_in_live_stops_the_load_seals_the_record_and_keeps_the_console(tmp_path):
    """Ctrl-C in `live`: the load stops (both stalled requests recorded as cancelled), the record is sealed while
    the console stays up showing the final state; a second Ctrl-C quits with 130 (never Textual's "press q" toast
    while the load keeps running)."""
    record = tmp_path / "live.jsonl"
    with FaultServer() as fs:
        args = ["live", "--url", fs.url("stall"), "--model", "fault-model", "--concurrency", "2",
                "--requests", "50", "--input-tokens", "8", "--output-tokens", "8", "--record", str(record),
                "--no-gpu", "--metrics-interval", "0.5", "--read-timeout", "300", "--theme", "light",
                "--rolling-requests", "50", "--export-dir", str(tmp_path / "exports")]
        proc, master, out = start_in_terminal(args)
        try:
            out.wait_for(b"LIVE")
            deadline = time.monotonic() + START_DEADLINE_S
            while len(fs.completions()) < 2:  # both requests reached the server and stall there
                assert proc.poll() is None, bytes(out.data[-600:]).decode("utf-8", "replace")
                assert time.monotonic() < deadline, "the live run did not send its two requests"
                time.sleep(0.05)  # pacing the poll of another process
            os.write(master, b"\x03")  # Ctrl-C as the terminal sends it
            deadline = time.monotonic() + START_DEADLINE_S
            while not record.read_bytes().rstrip().endswith(b"}") or b'{"type":"seal"' not in record.read_bytes():
                assert proc.poll() is None, "the console quit on the first Ctrl-C of a live run"
                assert time.monotonic() < deadline, "the record was not sealed after Ctrl-C"
                time.sleep(0.05)  # pacing the poll of the record file
            assert proc.poll() is None  # still showing the final state
            out.wait_for(b"Stopped")
            assert len(fs.completions()) == 2  # nothing more was sent after Ctrl-C
            os.write(master, b"\x03")
            assert finish(proc) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            os.close(master)
    items = list(read_file(str(record)))
    requests = [i for i in items if isinstance(i, RequestRecord)]
    assert len(requests) == 2 and all(r.error == "cancelled" for r in requests), requests
