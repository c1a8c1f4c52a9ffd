"""The host telemetry pane (issue 41): when no GPU is read, the memory pane shows the host (the local server's RSS
when its PID is known, else the system's memory used / total, and CPU %), the budget's KV ceiling when the budget
is of the KV space itself (CPU memory), labelled host and never GPU; host samples carry the local server's RSS,
read back from the record file."""

from __future__ import annotations

import os
import socket

import pytest

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records.parse import parse_line
from tui.sources.gpu import GpuSampler, local_server_pid
from tui.widgets.panes import host_lines

GIB = 1 << 30


def _text(lines: list[str]) -> str:
    return "\n".join(lines)


def test_system_memory_and_cpu_labelled_host_never_gpu():
    text = _text(host_lines({"memory_used": 6 * GIB, "memory_total": 16 * GIB, "cpu_percent": 42.0}, None))
    assert "host" in text and "6.0 GiB" in text and "16.0 GiB" in text and "CPU 42%" in text
    assert "GPU " not in text.replace("no GPU read", "")


def test_the_servers_rss_first_and_the_budgets_kv_ceiling_beside_it():
    text = _text(host_lines({"memory_used": 6 * GIB, "memory_total": 16 * GIB, "cpu_percent": 5.0,
                             "server_rss": GIB // 2, "server_pid": 4242}, 1.5))
    assert "server RSS [b]0.50 GiB[/]" in text and "pid 4242" in text and "system memory" in text
    assert "budget KV ceiling[/] 1.50 GiB" in text and "(host memory)" in text


def test_no_host_sample_no_block():
    assert host_lines({}, None) == [] and host_lines({"memory_used": None, "cpu_percent": None}, 2.0) == []


@pytest.mark.slow  # starts a server or the CLI's load path against one
def test_a_local_listener_is_found_and_its_rss_sampled():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        pid = local_server_pid(f"http://127.0.0.1:{port}/v1")
        assert pid in (os.getpid(), None)  # None only where psutil may not list sockets (no permission)
    assert local_server_pid("http://example.invalid:8080") is None and local_server_pid("not a url") is None
    g = GpuSampler()
    g.server_pid = os.getpid()
    h = g.host(1.0)
    if h["memory_total"] is not None:  # psutil present
        assert h["server_pid"] == os.getpid() and h["server_rss"] > 0


def test_host_samples_with_the_servers_rss_reach_the_snapshot():
    lines = ['{"type":"host","t":1.0,"cpu_percent":12.5,"memory_used":100,"memory_total":200,'
             '"client_cpu_percent":3.0,"server_rss":55,"server_pid":77}']
    m = Monitor(MonitorConfig())
    m.add_many([parse_line(x) for x in lines])
    host = m.snapshot().host
    assert host["server_rss"] == 55 and host["server_pid"] == 77 and host["memory_total"] == 200
