"""The fault command of a drill (issue 39, tui.sources.load.fault.run_fault_command), run for real through the shell:
its start, end, exit status (or signal) and first lines of output recorded; every line scrubbed of secrets and of
terminal escapes; the output bounded; a command still running at the limit killed with its process group, said."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from tui.core.redact import REDACTED, Scrubber
from tui.sources.load.fault import MAX_LINE_CHARS, MAX_OUTPUT_LINES, run_fault_command

pytestmark = pytest.mark.slow  # every test starts a process (the CLI, a fault command): the quick loop's rule

SECRET = "sk-drill-fault-secret-7f3a9c2b"


def run(command: str, timeout_s: float = 30.0) -> dict:
    return asyncio.run(run_fault_command(command, Scrubber([SECRET]), time.time, timeout_s))


def test_start_end_exit_status_and_the_first_lines_scrubbed():
    before = time.time()
    out = run(f"echo 'restarting with key {SECRET}'; echo \"Authorization: Bearer abcdefghij0123456789xyz\"; "
              "printf '\\033[2J\\033]0;title\\007cleared\\n'; "
              f"for i in $(seq 1 {MAX_OUTPUT_LINES + 15}); do echo line $i; done; exit 3")
    assert before <= out["start"] <= out["end"] <= time.time()
    assert out["exit_status"] == 3 and out["signal"] is None and out["note"] is None
    lines = out["output"]
    assert len(lines) == MAX_OUTPUT_LINES and out["output_lines_dropped"] == 3 + MAX_OUTPUT_LINES + 15 - len(lines)
    assert lines[0] == f"restarting with key {REDACTED}", lines[0]
    assert "abcdefghij0123456789xyz" not in lines[1] and REDACTED in lines[1]
    assert all("\x1b" not in x and "\x07" not in x for x in lines), lines[2]
    assert "cleared" in lines[2] and lines[3] == "line 1"
    blob = repr(out)
    assert SECRET not in blob and "abcdefghij0123456789xyz" not in blob


def test_the_command_itself_is_scrubbed_and_long_lines_cut():
    out = run(f"true {SECRET}; python3 -c \"print('x' * 100000)\"")
    assert out["exit_status"] == 0 and SECRET not in out["command"] and REDACTED in out["command"]
    assert len(out["output"]) == 1 and len(out["output"][0]) == MAX_LINE_CHARS


def test_a_command_ended_by_a_signal_says_which():
    out = run("kill -9 $$")
    assert out["signal"] == 9 and out["exit_status"] is None


def test_a_command_that_cannot_start_is_said_not_raised():
    out = asyncio.run(run_fault_command("true", Scrubber(), time.time, 5.0)) if os.path.exists("/bin/sh") else None
    assert out is not None and out["exit_status"] == 0  # the shell exists here: a real run
    out = run("/nonexistent/fault-tool --now")
    assert out["exit_status"] == 127 and any("not found" in x or "No such file" in x for x in out["output"])


def test_a_command_still_running_at_the_limit_is_killed_with_its_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    # the shell starts a child in the background and waits: killing the shell alone would leave the child
    out = run(f"sleep 300 & echo $! > {pid_file}; wait", timeout_s=1.0)
    assert out["note"] is not None and "killed with its process group" in out["note"]
    assert out["signal"] == 9
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)  # polling for the child's end (bounded), not synchronisation by sleep
    else:
        os.kill(child, 9)
        raise AssertionError("the fault command's child outlived the kill of its process group")


def test_a_secret_cut_by_the_line_limit_leaves_no_prefix():
    from tui.sources.load.fault import LINE_KEEP_BYTES

    # the secret straddles the bytes a line keeps: its first characters would end the kept text
    pad = "." * (LINE_KEEP_BYTES - 10)
    out = run(f"echo '{pad}{SECRET}'")
    (line,) = out["output"]
    assert SECRET[:10] not in line and "sk-drill" not in line
