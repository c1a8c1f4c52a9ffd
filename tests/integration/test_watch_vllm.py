"""Watch mode and the server-side timing against the real vLLM peer (0.32, CPU, SmolLM2, --max-num-seqs 4).

One load run serves every test of this module (CI cost): ``servewatch run --concurrency 1,6`` (12 + 12 requests,
16 output tokens), while

- ``watch`` scrapes the server's own /metrics: one ``--once`` window whose two scrapes bracket the run exactly (the
  window's wait IS the run), with scrapes during it that see the queue;
- a real Prometheus (Debian's ``prometheus``) scrapes the same page every second; afterwards ``watch
  --prometheus-url --once --window-end`` judges a window from the last scrape before the run to the first after.

What can be equal and what cannot: vLLM's TTFT runs from the request's arrival at the server to its first token;
the client's from before the request was sent to the first content chunk it parsed. So for every request the
client's TTFT is >= the server's (measured here: the mean difference, from the histograms' sums, 4-13 ms on a
loaded 2-core box), and the client's good fraction at an SLO is <= the server's. The server's bracket contains the
server's fraction; it contains the client's exactly unless a request's two TTFTs straddle the SLO. How far apart
can they be? No difference is negative, so none exceeds their sum over the run: the client's TTFTs summed minus
the server's histogram sums (per step), measured in the test (about 0.1-0.2 s for 24 requests). With that bound
the tests assert what holds: the client's fraction is never above the upper end; it is at or above the lower end
counted with the bound on the client's TTFT; and exactly inside [lo, hi] for each SLO no client TTFT lies above
within the bound. SLOs: 0.1 s (a bucket bound), 0.3 s (between 0.25 and 0.5), and the bound nearest the client's
median with the middle of its bucket (so that the fraction is not trivially 0 or 1 on a slow or a fast machine).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout

import httpx
import pytest

from tests.support.llama_fixture import stop_process
from tests.support.paths import REPO
from tests.support.polling import wait_until
from tui.core.slos import Slos

PROMETHEUS = shutil.which("prometheus")
LEVELS = ((1, 12), (6, 12))  # (concurrency, requests per step): 6 streams against 4 sequences queue 2
OUTPUT_TOKENS = 16
DEADLINE_S = 60.0


def _gauges(base: str) -> dict[str, float]:
    from tui.sources.watch import parse_labeled

    text = httpx.get(base + "/metrics", timeout=10).text
    return {n: v for n, _l, v in parse_labeled(text)
            if n in ("vllm:num_requests_waiting", "vllm:num_requests_running")}


def _wait(cond, what: str, deadline_s: float = DEADLINE_S):
    """Poll a condition (bounded); the condition is the synchronisation."""
    return wait_until(cond, what, deadline_s)


def _prom_ts(prom: str, metric: str) -> float | None:
    r = httpx.get(prom + "/api/v1/query", params={"query": f"max(timestamp({metric}))"}, timeout=5)
    res = r.json()["data"]["result"]
    return float(res[0]["value"][1]) if res else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prometheus(vllm_server, tmp_path_factory):
    """A real Prometheus scraping the vLLM server's /metrics every second (None where the binary is missing:
    the tests that need it skip, saying why)."""
    if PROMETHEUS is None:
        yield None
        return
    d = tmp_path_factory.mktemp("prom")
    port = _free_port()
    cfg = d / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n"
                   f"    static_configs:\n      - targets: ['127.0.0.1:{vllm_server.port}']\n")
    log = open(d / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={d / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _prom_ts(base, "vllm:num_requests_running"), "Prometheus scraping vLLM")
        yield base
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture(scope="module")
def loaded(vllm_server, prometheus, tmp_path_factory):
    """The run, the direct watch window around it, its scrapes during it, and the Prometheus scrape times that
    bracket it."""
    from tui.core.watch import WatchConfig
    from tui.sources.watch import MetricsWatcher, WatchSession, make_client

    base = vllm_server.base_url
    # nothing of another test still in flight: the server's counts must be this run's alone
    _wait(lambda: _gauges(base) == {"vllm:num_requests_waiting": 0.0, "vllm:num_requests_running": 0.0},
          "an idle server")
    t_idle = time.time()
    ts_before = None
    if prometheus is not None:  # a scrape of the idle server: the Prometheus window starts just before it
        ts_before = _wait(lambda: (t := _prom_ts(prometheus, "vllm:num_requests_running")) and t > t_idle and t,
                          "a scrape after the server went idle")
    rec = tmp_path_factory.mktemp("watch-vllm") / "run.jsonl"
    cmd = [sys.executable, "-m", "tui.cli", "run", "--url", base, "--concurrency", ",".join(str(c) for c, _ in LEVELS),
           "--requests", str(LEVELS[0][1]), "--output-tokens", str(OUTPUT_TOKENS), "--input-tokens", "32",
           "--record", str(rec), "--metrics-interval", "0.25", "--no-gpu"]
    during: list[tuple[float | None, float | None]] = []
    result: dict = {}

    async def main():
        client = make_client({})
        try:
            watcher = MetricsWatcher(vllm_server.metrics_url, client=client)
            session = WatchSession(watcher, WatchConfig(slos=Slos(ttft_ms=100.0), min_window_s=0.0))

            async def the_run(_seconds: float) -> None:  # the --once window's wait: the run, start to end
                env = dict(os.environ, PYTHONPATH=str(REPO))
                job = asyncio.ensure_future(asyncio.to_thread(
                    subprocess.run, cmd, capture_output=True, text=True, timeout=300, env=env, cwd=str(REPO)))
                while not job.done():
                    cur, _why = await watcher.scrape()  # the watch's own scrapes while the server is loaded
                    if cur is not None:
                        during.append((cur.waiting, cur.running))
                    await asyncio.wait([job], timeout=0.25)  # a sampling interval, not a synchronisation
                result["proc"] = job.result()

            result["window"] = await session.once(0.0, sleep=the_run)
        finally:
            await client.aclose()

    asyncio.run(main())
    proc = result["proc"]
    assert proc.returncode in (0, 1, 3), proc.stdout[-2000:] + proc.stderr[-2000:]
    after = _gauges(base)
    ts_after = None
    if prometheus is not None:
        t_done = time.time()
        ts_after = _wait(lambda: (t := _prom_ts(prometheus, "vllm:num_requests_running")) and t > t_done and t,
                         "a scrape after the run")
    records = [json.loads(x) for x in rec.read_text().splitlines() if x.strip()]
    return {"window": result["window"], "records": records, "rec": rec, "during": during, "after": after,
            "ts_before": ts_before, "ts_after": ts_after, "run_out": proc.stdout}


def _requests(records) -> list[dict]:
    return [r for r in records if r.get("type") == "request" and r.get("phase", "measure") == "measure"]


def _slos(ttfts: list[float]) -> list[tuple[float, bool]]:
    """(SLO seconds, on a bucket bound) to judge at: 0.1, 0.3, and the bound nearest the client's median with the
    middle of its bucket."""
    bounds = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0)
    med = sorted(ttfts)[len(ttfts) // 2]
    i = min(range(len(bounds)), key=lambda k: abs(bounds[k] - med))
    out = [(0.1, True), (0.3, False), (bounds[i], True)]
    if i > 0:
        out.append(((bounds[i - 1] + bounds[i]) / 2.0, False))
    return out


def _gap_bound(records) -> float:
    """An upper bound on any one request's client TTFT - server TTFT: their sum over the run (none is negative),
    the client's TTFTs minus the server's histogram sums, step by step."""
    reqs = _requests(records)
    total = 0.0
    for st in (r for r in records if r.get("type") == "step" and r.get("server_histograms")):
        sh = st["server_histograms"]
        a, b = sh["start"]["ttft"], sh["end"]["ttft"]
        mine = [r for r in reqs if r["level"] == st["level"] and r["round"] == st["round"]]
        assert b["count"] - a["count"] == len(mine)  # the server counted this step's requests, no others
        total += sum(r["t_first_token"] - r["t_sent"] for r in mine) - (b["sum"] - a["sum"])
    assert total >= -1e-6, total  # the client cannot see a first token before the server made it
    return max(0.0, total) + 1e-3


def _check_bracket(lo: float, hi: float, ttfts: list[float], slo: float, where: str, delta: float) -> str:
    n = len(ttfts)
    client = sum(1 for t in ttfts if t <= slo) / n
    client_tol = sum(1 for t in ttfts if t - delta <= slo) / n
    near = sum(1 for t in ttfts if slo < t <= slo + delta)
    # client TTFT >= server TTFT for every request: the client's fraction is never above the upper end
    assert client <= hi + 1e-9, f"{where} SLO {slo:g} s: client {client:.3f} above the upper end {hi:.3f}"
    assert lo <= client_tol + 1e-9, f"{where} SLO {slo:g} s: lower end {lo:.3f} above the client's {client_tol:.3f}"
    if near == 0:  # no client TTFT just above the SLO: the server's bracket must contain the client's fraction
        assert lo - 1e-9 <= client <= hi + 1e-9, (where, slo, lo, client, hi)
    return (f"{where} SLO {slo * 1000:g} ms: [{lo:.3f}, {hi:.3f}] client {client:.3f} ({near} client TTFTs within "
            f"{delta * 1000:.0f} ms above)")


def test_watch_metrics_once_brackets_the_runs_fraction(loaded, vllm_server):
    from tui.core.watch import WatchConfig, judge_once

    w = loaded["window"]
    reqs = _requests(loaded["records"])
    n = sum(k for _c, k in LEVELS)
    assert len(reqs) == n and all(r.get("complete") for r in reqs), loaded["run_out"][-2000:]
    ttfts = [r["t_first_token"] - r["t_sent"] for r in reqs]
    assert w is not None and w.engine == "vllm" and w.source == "metrics"
    # the window's two scrapes bracket the run: the server counted exactly this run's requests
    assert w.ttft is not None and w.ttft[-1][1] == n and w.e2e[-1][1] == n and w.queue_time[-1][1] == n
    assert w.success == n and w.failed == 0
    for slo, on_bound in _slos(ttfts):
        v = judge_once(w, WatchConfig(slos=Slos(ttft_ms=slo * 1000.0), min_window_s=0.0))
        assert v.exact is on_bound and v.n == n
        if on_bound:
            assert v.lo == v.hi  # integer counts from one server: exact at a bound
        print(_check_bracket(v.lo, v.hi, ttfts, slo, "direct", _gap_bound(loaded["records"])))


def test_watch_queue_state_matches_the_server(loaded, vllm_server):
    """The watch's scrapes during the run saw the queue the server reported to the run's own queue samples: 6
    closed-loop streams against --max-num-seqs 4 leave at most 2 waiting and 4 running; afterwards both 0."""
    during = loaded["during"]
    seqs = vllm_server.max_num_seqs
    extra = LEVELS[-1][0] - seqs
    assert during and max(wt or 0 for wt, _r in during) > 0, during
    assert all(0 <= (wt or 0) <= extra and 0 <= (r or 0) <= seqs for wt, r in during), during
    q = [r for r in loaded["records"] if r.get("type") == "queue" and r.get("source") == "vllm"]
    assert q and 0 < max(r["waiting"] for r in q) <= extra and max(r["running"] for r in q) <= seqs
    w = loaded["window"]
    assert w.waiting_start == 0 and w.waiting_end == 0 and w.running == 0
    assert loaded["after"] == {"vllm:num_requests_waiting": 0.0, "vllm:num_requests_running": 0.0}


def _main(argv):
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.skipif(PROMETHEUS is None, reason="the `prometheus` binary is not on PATH (Debian: apt-get install -y "
                    "prometheus; .ci/run installs it)")
def test_watch_prometheus_once_brackets_the_runs_fraction(loaded, prometheus):
    reqs = _requests(loaded["records"])
    n = len(reqs)
    ttfts = [r["t_first_token"] - r["t_sent"] for r in reqs]
    # the window: from just before the last scrape of the idle server to just after the first scrape after the
    # run (increase() extrapolates by those few milliseconds only)
    t_end = loaded["ts_after"] + 0.001
    minutes = (t_end - (loaded["ts_before"] - 0.001)) / 60.0
    for slo, on_bound in _slos(ttfts):
        code, out, err = _main(["watch", "--prometheus-url", prometheus, "--once", "--window-minutes", f"{minutes:.6f}",
                                "--window-end", f"{t_end:.3f}", "--slo-ttft-ms", f"{slo * 1000:g}",
                                "--min-window-minutes", "0", "--json"])
        assert code in (0, 1, 3), err
        doc = json.loads(out)
        assert doc["engine"] == "vllm" and doc["source"] == "prometheus"
        win, v = doc["window"], doc["verdict"]
        # increase() counts this run's requests, stretched by at most a few milliseconds' extrapolation
        assert n - 1e-6 <= win["ttft_observations"] <= n * 1.01, win["ttft_observations"]
        assert v["exact"] is on_bound
        print(_check_bracket(v["good_fraction_lo"], v["good_fraction_hi"], ttfts, slo, "prometheus",
                             _gap_bound(loaded["records"])))
        assert win["waiting"] == 0 and win["waiting_at_start"] == 0 and win["running"] == 0


def _mean_from_sums(step: dict, key: str) -> float | None:
    sh = step["server_histograms"]
    a, b = sh["start"].get(key), sh["end"].get(key)
    if not a or not b or b["count"] <= a["count"]:
        return None
    return (b["sum"] - a["sum"]) / (b["count"] - a["count"])


def test_server_timing_two_levels_beside_the_client(loaded):
    """Per step, the server's own TTFT, inter-token, TPOT, end-to-end and queue-time brackets beside the client's:
    every histogram counted this step's requests; the client's TTFT and end-to-end percentiles are never below the
    server's bracket (impossible for the same requests) and the client's mean exceeds the server's (sums); the
    queue builds at 6 streams against 4 sequences and not at 1."""
    code, out, err = _main(["report", str(loaded["rec"]), "--json"])
    assert code in (0, 1, 3), err
    rep = json.loads(out)
    levels = {lv["level"]: lv for lv in rep["levels"]}
    steps = {r["level"]: r for r in loaded["records"] if r.get("type") == "step" and r.get("server_histograms")}
    reqs = _requests(loaded["records"])
    means = {}
    for conc, k in LEVELS:
        st = levels[conc]["server_timing"]
        assert st["engine"] == "vllm" and not st["problems"], st["problems"]
        m = st["metrics"]
        assert {"ttft", "itl", "tpot", "e2e", "queue"} <= set(m)
        for key in ("ttft", "e2e", "queue", "tpot"):
            assert m[key]["n"] == k, (conc, key, m[key]["n"])
        mine = [r for r in reqs if r["level"] == conc]
        gaps = sum(max(0, (r.get("output_tokens") or 0) - 1) for r in mine)
        assert m["itl"]["n"] == gaps  # one observation per token gap, as the client counted the tokens
        assert st["flags"] == []
        for key in ("ttft", "e2e"):
            assert m[key]["P50"]["client_ms"] is not None
            for lab in ("P50", "P95"):  # (the report leaves a P95 of too few requests out: N/A, not compared)
                if m[key][lab]["client_ms"] is not None:
                    assert m[key][lab]["below_server_bracket"] is False, (conc, key, lab, m[key][lab])
        print(f"level {conc}: " + "; ".join(
            f"{key} " + ", ".join(f"{lab} server {m[key][lab]['server_ms']} client {m[key][lab]['client_ms']}"
                                  for lab in ("P50", "P95")) for key in ("ttft", "itl", "tpot", "e2e", "queue")))
        assert m["itl"]["P50"]["client_ms"] is None and "largest gap" in st["itl_note"]
        step = steps[conc]
        client_ttft = sum(r["t_first_token"] - r["t_sent"] for r in mine) / k
        client_e2e = sum(r["t_end"] - r["t_sent"] for r in mine) / k
        s_ttft, s_e2e, s_q = (_mean_from_sums(step, x) for x in ("ttft", "e2e", "queue"))
        assert s_ttft is not None and s_e2e is not None and s_q is not None
        assert client_ttft >= s_ttft and client_e2e >= s_e2e  # the same requests: client >= server, each one
        print(f"level {conc}: mean client - server: TTFT {1000 * (client_ttft - s_ttft):.1f} ms, E2E "
              f"{1000 * (client_e2e - s_e2e):.1f} ms; server mean queue time {1000 * s_q:.1f} ms")
        means[conc] = s_q
    assert means[LEVELS[-1][0]] > means[LEVELS[0][0]]
    lines = "\n".join(levels[LEVELS[-1][0]]["server_timing"]["lines"])
    assert "queue time (server n=12)" in lines and "TPOT (per request)" in lines


def test_watch_cli_metrics_once_on_the_idle_server(loaded, vllm_server):
    """`servewatch watch --metrics-url <vLLM>/metrics --once` itself (after the run: the server is idle): the engine
    detected, the queue read as numbers, nothing finished in the window, and nothing sent to the server (its TTFT
    count does not move)."""
    from tui.sources.watch import parse_labeled

    def count() -> float:
        text = httpx.get(vllm_server.metrics_url, timeout=10).text
        return sum(v for n, _l, v in parse_labeled(text) if n == "vllm:time_to_first_token_seconds_count")

    before = count()
    code, out, err = _main(["watch", "--metrics-url", vllm_server.metrics_url, "--once", "--window-minutes", "0.01",
                            "--json"])
    assert code == 3, err
    doc = json.loads(out)
    assert doc["engine"] == "vllm" and doc["source"] == "metrics"
    w = doc["window"]
    assert w["waiting"] == 0 and w["running"] == 0 and w["ttft_observations"] == 0
    assert doc["verdict"]["state"] == "INSUFFICIENT_WINDOW" and "no finished requests" in doc["verdict"]["reason"]
    assert count() == before
