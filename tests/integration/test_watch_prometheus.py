"""Watch mode against a real Prometheus (Debian's `prometheus` package) scraping in-test metrics
servers on 127.0.0.1: the whole fleet summed over replicas, several models refused without a
selector, the verdict for the last window at once. Prometheus gets its own config, a temporary
storage folder and a loopback listen address; the fixture stops it."""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout

import httpx
import pytest

from tests.support.llama_fixture import stop_process
from tests.support.polling import wait_until
from tests.support.watch_server import MetricsServer

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the `prometheus` binary is not on PATH (Debian: apt-get install -y prometheus; .ci/run installs it)",
)

DEADLINE_S = 40.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(base: str, q: str) -> list:
    r = httpx.get(base + "/api/v1/query", params={"query": q}, timeout=5)
    r.raise_for_status()
    return r.json()["data"]["result"]


def _wait(cond, what: str, deadline_s: float = DEADLINE_S):
    """Poll a condition against Prometheus (bounded); the condition is the synchronisation."""
    return wait_until(cond, what, deadline_s)


@pytest.fixture
def fleet(tmp_path):
    """Two replicas of model "m" and one of model "other", scraped every second."""
    servers = [MetricsServer("vllm", models=("m",)), MetricsServer("vllm", models=("m",)),
               MetricsServer("vllm", models=("other",))]
    for s in servers:
        s.__enter__()
    port = _free_port()
    cfg = tmp_path / "prometheus.yml"
    targets = ", ".join(f"'127.0.0.1:{s.port}'" for s in servers)
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: fleet\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: [{targets}]\n"
    )
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: len([r for r in _query(base, "up") if r["value"][1] == "1"]) == 3, "three targets up")
        yield base, servers
    finally:
        stop_process(proc)
        log.close()
        for s in servers:
            s.__exit__(None, None, None)


def _main(argv):
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_prometheus_fleet_once(fleet):
    base, (a, b, other) = fleet
    a.state.observe(fast=1500, slow=10)
    b.state.observe(fast=1500, slow=10)
    other.state.observe(slow=900)  # another model, failing: must not leak into model "m"

    def seen():
        res = _query(base, 'sum(vllm:time_to_first_token_seconds_count{model_name="m"})')
        return res and float(res[0]["value"][1]) == 3020.0

    _wait(seen, "the new counts")
    # a few more scrapes at the new values so increase() over the window has samples on both sides
    t_seen = time.time()
    _wait(lambda: _query(base, "max(timestamp(up))") and float(_query(base, "max(timestamp(up))")[0]["value"][1])
          > t_seen + 2, "two more scrapes")

    # several models and no selector: refused, listing them
    code, out, err = _main(["watch", "--prometheus-url", base, "--once", "--window-minutes", "0.5"])
    assert code == 2 and "m, other" in err and "--selector" in err

    code, out, err = _main(["watch", "--prometheus-url", base, "--selector", 'model_name="m"', "--once",
                            "--window-minutes", "0.5", "--min-window-minutes", "0.1", "--json"])
    doc = json.loads(out)
    assert doc["engine"] == "vllm" and doc["source"] == "prometheus" and "whole fleet" in doc["scope"]
    n = doc["window"]["ttft_observations"]
    # increase() summed over both replicas of "m": at least the 3020 that happened inside the window; more
    # by Prometheus' extrapolation to the window's edges, up to about 2x on series this young
    assert 3020 - 1e-6 <= n <= 2 * 3020, n
    v = doc["verdict"]
    assert v["exact"] is True and v["good_fraction_lo"] > 0.98
    assert v["state"] == "PASS", v
    assert code == 0
    assert "server-side TTFT" in doc["window"]["server_ttft_label"]


def test_prometheus_missing_series_is_a_gap(fleet):
    base, (a, _b, _other) = fleet
    code, out, err = _main(["watch", "--prometheus-url", base, "--selector", 'model_name="nosuch"', "--once",
                            "--window-minutes", "0.2"])
    assert code == 2 and "no serving metrics" in err
    # a failing query (a selector Prometheus cannot parse): one line with Prometheus' reason, exit 2
    code, out, err = _main(["watch", "--prometheus-url", base, "--selector", 'model_name=="m"', "--once",
                            "--window-minutes", "0.2"])
    assert code == 2 and "query failed: HTTP 400" in err and err.count("\n") == 1 and "Traceback" not in err


def test_prometheus_unreachable():
    port = _free_port()
    code, out, err = _main(["watch", "--prometheus-url", f"http://127.0.0.1:{port}", "--once"])
    assert code == 2 and "connection refused" in err and "Traceback" not in err


def test_prometheus_sequential_windows(fleet):
    """The console path: the last window at once, then consecutive windows from the watch start."""
    import asyncio

    from tui.core import watch as W
    from tui.sources.watch import PrometheusWatcher, WatchSession, make_client

    base, (a, b, _other) = fleet
    a.state.observe(fast=200)
    _wait(lambda: _query(base, 'sum(vllm:time_to_first_token_seconds_count{model_name="m"})')
          and float(_query(base, 'sum(vllm:time_to_first_token_seconds_count{model_name="m"})')[0]["value"][1]) == 200,
          "the first counts")

    async def main():
        client = make_client({})
        try:
            s = WatchSession(PrometheusWatcher(base, selector='model_name="m"', client=client),
                             W.WatchConfig(min_window_s=0.0), interval=1.0)
            await s.step(first_window_s=60.0)
            first = s.judgement.n
            b.state.observe(fast=300)
            t_obs = time.time()

            def scraped_after():
                r = _query(base, 'max(timestamp(vllm:time_to_first_token_seconds_count{model_name="m"}))')
                return r and float(r[0]["value"][1]) > t_obs + 3.0

            await asyncio.to_thread(_wait, scraped_after, "scrapes after the new requests")
            await s.step()
            return s, first
        finally:
            await client.aclose()

    s, first = asyncio.run(main())
    assert s.windows_recorded == 2 and s.watcher.engine == "vllm"
    # the last minute: the first 200. increase() extrapolates, and a series only seconds old over a
    # window of a minute is stretched by up to about 2x (Prometheus' rule, not ours)
    assert 200 - 1e-6 <= first <= 2 * 200, first
    second = s.judgement.n - first
    assert second > 0, s.last_window  # the 300 that arrived after the first window were counted
    # across windows nothing is lost (non-overlapping increase() windows lost the increments falling
    # between two windows' samples): at least the 500 that happened, at most Prometheus' extrapolation
    assert 500 - 1e-6 <= s.judgement.n <= 2 * 500, s.judgement.n
