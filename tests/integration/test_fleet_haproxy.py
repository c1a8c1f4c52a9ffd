"""`servewatch plan` validated against a real balanced fleet: HAProxy (Debian's package) on 127.0.0.1 in front of
k = 1, 2, 3 replicas that are a real queueing system whose capacity is known in advance
(``tests.support.slot_server.SlotServer``: SLOTS slots, SERVICE_S seconds per request, so SLOTS / SERVICE_S req/s).

The test sweeps ONE replica (open loop, constant arrivals), plans for a rate that needs k replicas, runs the
plan's own check command (``doc["check"]["command"]``) through the balancer against k replicas (PASS) and against
k - 1 (FAIL; with k - 1 = 0, HAProxy has no server and answers 503 to everything, so the run is refused
at its first request, exit 2), and sweeps the k-replica fleet through the
balancer with ``sweep --search`` (10% precision): the planned capacity of k replicas (k x the middle of the one
replica's bracket) is within 15% of the middle of the bracket measured through the balancer.

Calibration: the SLO on TTFT is 1.5 x the service time, so a request served at once meets it whatever the box's
speed, and a queue beyond the slots (which grows without bound above capacity) misses it within a second or two.
A first probe measures the idle TTFT through the balancer; the service time is doubled on a box where that is
slower than a tenth of it. Short windows (3 s) and a lowered target keep CI fast: such settings are not
acceptance-grade, so every plan here must exit 3 and still print the whole plan (asserted).
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.haproxy import Balancer, haproxy_binary
from tests.support.paths import REPO
from tests.support.slot_server import SlotServer

SLOTS = 1
BASE_SERVICE_S = 0.1
PLAN_FILL = 0.9  # the planned rate is this fraction of what k replicas carry at the bracket's lower end
STEP_CAP_S = 40


def _accept(service_s: float) -> list[str]:
    return ["--slo-ttft-ms", f"{1500 * service_s:g}", "--target", "0.9", "--alpha", "0.2",
            "--min-window-minutes", "0.05"]


LOAD = ["--arrival", "constant", "--output-tokens", "4", "--no-gpu", "--max-step-seconds", str(STEP_CAP_S),
        "--api-key-env", "SW_TEST_NO_KEY"]


def _servewatch(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tui", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _idle_ttft_s(url: str, n: int = 5) -> float:
    """The median time to first byte of n sequential streamed requests through the balancer, after one warm-up
    request (the box's speed now)."""
    seen = []
    with httpx.Client(timeout=30) as c:
        for _ in range(n + 1):
            t0 = time.perf_counter()
            with c.stream("POST", url + "/v1/chat/completions", json={"model": "m", "stream": True,
                                                                       "messages": [{"role": "user", "content": "x"}]}) as r:
                for i, _ in enumerate(r.iter_raw()):
                    if i == 0:
                        seen.append(time.perf_counter() - t0)
    return statistics.median(seen[1:])


def _bracket(sweep_json: Path) -> tuple[float, float | None, dict]:
    """(low, high, search figures) of a sweep table: ``capacity_bracket`` of ``sweep --search``, else the ladder's
    [highest PASS below the first FAIL, lowest not-PASS above it]."""
    s = json.loads(sweep_json.read_text())
    b = s.get("capacity_bracket")
    if b and b.get("low") is not None:
        return float(b["low"]), (None if b.get("high") is None else float(b["high"])), {
            "probes": len(b.get("probes") or []), "search_s": b.get("search_seconds")}
    states = [(r["level"], r["verdict"]) for r in s["levels"]]
    fails = [lv for lv, st in states if st.startswith("FAIL")]
    lo = max(lv for lv, st in states if st.startswith("PASS") and (not fails or lv < fails[0]))
    above = [lv for lv, st in states if not st.startswith("PASS") and lv > lo]
    return lo, (min(above) if above else None), {"probes": 0}


def _sweep(url: str, rates: list[float], service_s: float, tmp: Path, name: str) -> tuple[Path, Path, str]:
    record, table = tmp / f"{name}.jsonl", tmp / f"{name}.json"
    r = _servewatch(["sweep", "--url", url, "--rate", ",".join(f"{x:.3g}" for x in rates), *LOAD,
                     *_accept(service_s), "--search", "--precision", "10%", "--record", str(record),
                     "--sweep-json", str(table)])
    assert r.returncode in (0, 1, 3), r.stderr[-2000:]
    assert table.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    return record, table, r.stdout


def _check(command: str, url: str, record: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    assert argv[:2] == ["servewatch", "run"] and url in argv, command
    return _servewatch([*argv[1:], "--no-gpu", "--max-step-seconds", str(STEP_CAP_S), "--api-key-env",
                        "SW_TEST_NO_KEY", "--record", str(record)])


@pytest.fixture(scope="module")
def replicas():
    haproxy_binary()  # skip (or fail where peers are required) before starting anything
    servers: list[SlotServer] = []
    try:
        yield servers
    finally:
        for s in servers:
            s.close()


def test_plan_predicts_the_balanced_fleet(replicas, tmp_path):
    # calibrate: the box's speed through the balancer at idle decides the service time
    with SlotServer(SLOTS, BASE_SERVICE_S) as probe, Balancer([probe.url], tmp_path) as lb:
        idle = _idle_ttft_s(lb.url)
    service_s = BASE_SERVICE_S if idle < BASE_SERVICE_S / 10 else 2 * BASE_SERVICE_S
    for _ in range(3):
        replicas.append(SlotServer(SLOTS, service_s))
    mu = SLOTS / service_s
    figures = [f"calibration: idle TTFT through HAProxy {1000 * idle:.1f} ms -> service {1000 * service_s:.0f} ms, "
               f"{mu:g} req/s per replica (known)"]

    # 1. sweep ONE replica directly
    ladder = [mu * f for f in (0.5, 0.9, 1.2)]  # then `--search` bisects between the last PASS and the first FAIL
    record, table, _ = _sweep(replicas[0].url, ladder, service_s, tmp_path, "one")
    lo1, hi1, info1 = _bracket(table)
    assert hi1 is not None and lo1 < hi1
    assert 0.75 * mu <= lo1 <= mu * 1.02, (lo1, mu)  # the known capacity, found by the sweep
    figures.append(f"one replica: bracket [{lo1:g}, {hi1:g}] req/s ({info1})")

    for k in (1, 2, 3):
        peak = round(PLAN_FILL * k * lo1, 3)
        balanced = Balancer([s.url for s in replicas[:k]], tmp_path / f"k{k}")
        fewer = Balancer([s.url for s in replicas[: k - 1]], tmp_path / f"k{k}-less")
        try:
            # 2. the plan: replicas_needed high = k; not acceptance-grade -> exit 3, the whole plan still printed
            p = _servewatch(["plan", "--records", str(record), "--peak-rate", f"{peak:g}", "--spare", "0",
                             *_accept(service_s), "--fleet-url", balanced.url, "--json"])
            assert p.returncode == 3, p.stderr
            doc = json.loads(p.stdout)
            assert doc["replicas_needed"]["high"] == k, doc["replicas_needed"]
            assert doc["replicas_total"]["high"] == k and doc["spare"] == 0
            assert "not acceptance-grade" in " ".join(doc["warnings"]) and doc["exit"]["code"] == 3
            # 3. the plan's own check command against k replicas PASSes; against k - 1 it FAILs
            ok = _check(doc["check"]["command"], balanced.url, tmp_path / f"check-k{k}.jsonl")
            assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
            bad = _check(doc["check"]["command"].replace(balanced.url, fewer.url), fewer.url,
                         tmp_path / f"check-k{k}-less.jsonl")
            if k > 1:
                assert bad.returncode == 1, bad.stdout[-3000:] + bad.stderr[-2000:]
            else:  # no replica behind the balancer: HAProxy answers 503 to everything, the run cannot even start
                assert bad.returncode == 2 and "503" in bad.stderr, bad.stderr[-2000:]
            # 4. the fleet's capacity measured through the balancer vs the plan's k x per-replica bracket
            fleet_ladder = [k * mu * f for f in (0.5, 0.9, 1.2)]
            _, ftable, _ = _sweep(balanced.url, fleet_ladder, service_s, tmp_path, f"fleet-k{k}")
            flo, fhi, finfo = _bracket(ftable)
            predicted = k * (lo1 + hi1) / 2
            measured = flo if fhi is None else (flo + fhi) / 2
            figures.append(f"k={k}: plan rate {peak:g} req/s; predicted fleet capacity {k * lo1:g}-{k * hi1:g} "
                           f"(mid {predicted:.3g}); measured through HAProxy [{flo:g}, {fhi}] (mid {measured:.3g}; {finfo})")
            assert abs(predicted - measured) <= 0.15 * measured, figures
        finally:
            balanced.stop()
            fewer.stop()
    served = [s.served for s in replicas]
    figures.append(f"requests served per replica: {served}")
    print("\n".join(figures))
    assert statistics.mean(served) > 0
