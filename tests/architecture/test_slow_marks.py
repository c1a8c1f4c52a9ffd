"""The ``slow`` rule of tests/conftest.py (issue 38): a test that starts a listening server or a process and is not
marked ``slow`` fails, with the fix in its message; the same test marked ``slow`` passes, and a test that starts
nothing needs no mark. Run as a nested pytest session in this process with the project's own hooks."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = "from tests.conftest import pytest_configure, pytest_runtest_makereport, pytest_runtest_protocol\n"

TESTS = '''
import socket
import subprocess
import sys

import pytest


def _listen():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    s.close()


def test_listens_unmarked():
    _listen()


@pytest.mark.slow
def test_listens_marked():
    _listen()


def test_runs_a_process_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_starts_nothing():
    assert sum(range(4)) == 6
'''


@pytest.mark.slow  # its nested tests start a listening server and a process
def test_an_unmarked_test_that_starts_a_server_or_a_process_fails(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_starts=TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:textual-snapshot", "-p", "no:syrupy")
    result.assert_outcomes(passed=4, errors=2)  # the two unmarked starters fail at teardown
    out = result.stdout.str()
    assert "test_listens_unmarked started a listening server (socket.listen) and is not marked slow" in out
    assert "test_runs_a_process_unmarked started a process (subprocess.Popen) and is not marked slow" in out
    assert "test_listens_marked started" not in out and "test_starts_nothing started" not in out
