"""A lost replica (issue 39): two slot-server replicas, each in its own process (tests/support/slot_server.py, known
capacity), behind the real HAProxy the fleet test uses, with HTTP health checks; one replica killed with SIGKILL by
`--fault-cmd`.

- One replica can carry the load: requests fail only until HAProxy's health check takes the dead one out (the time
  to recover within the check interval x fall count, plus the window step), then RECOVERED.
- One replica cannot carry it (the rate above its capacity): its queue grows without bound, NOT RECOVERED.

The rates stay low enough that the load generator keeps its schedule on a busy 2-core machine (the delivered-load
check allows one mean arrival gap of dispatch-lateness spread; at 30 req/s that is 33 ms, which a loaded machine
exceeds, and a baseline whose load was not delivered cannot PASS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.haproxy import Balancer, haproxy_binary
from tests.support.llama_fixture import stop_process
from tests.support.paths import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
SLOTS, SERVICE_S = 2, 0.1  # each replica: 20 req/s (the replica that carries the load at 10 req/s)
SLOW_SERVICE_S = 0.25  # each replica: 8 req/s (two carry 12 req/s, one cannot)
CHECK = (500, 2, 2)  # HAProxy: a check every 500 ms, out after 2 failed, back after 2 passed
STEP_S = 1.0


class Replica:
    def __init__(self, service_s: float = SERVICE_S) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.slot_server", "--slots", str(SLOTS),
                                         "--service-s", str(service_s)], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.url

    def stop(self) -> None:
        stop_process(self.process, grace_s=5.0)


def _drill(url: str, rate: float, victim: Replica, record: Path) -> tuple[subprocess.CompletedProcess, dict]:
    r = subprocess.run(
        [sys.executable, "-m", "tui", "drill", "--url", url, "--rate", f"{rate:g}", "--arrival", "constant",
         "--output-tokens", "4", "--no-gpu", "--api-key-env", "SW_TEST_NO_KEY", "--slo-ttft-ms", "500",
         "--target", "0.9", "--min-window-minutes", "0.1", "--recovery-window-s", "2", "--step-s", f"{STEP_S:g}",
         "--fault-cmd", f"kill -9 {victim.process.pid}", "--record", str(record), "--json"],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    return r, json.loads(r.stdout)["drill"]


@pytest.fixture
def fleet(tmp_path, request):
    haproxy_binary()  # skip (or fail where peers are required) before starting anything
    service_s = getattr(request, "param", SERVICE_S)
    replicas: list[Replica] = []
    try:
        replicas += [Replica(service_s), Replica(service_s)]
        lb = Balancer([r.url for r in replicas], tmp_path / "lb", check=CHECK)
        try:
            yield lb, replicas
        finally:
            lb.stop()
    finally:
        for r in replicas:
            r.stop()


def test_one_replica_lost_the_other_carries_the_load(fleet, tmp_path):
    lb, replicas = fleet
    r, d = _drill(lb.url, 10, replicas[0], tmp_path / "carries.jsonl")  # 10 req/s: one replica serves 20
    bound = CHECK[0] / 1000 * CHECK[1] + STEP_S
    print(f"health check {CHECK}: bound {bound:g} s; time to recover {d['time_to_recover_s']}; impact {d['impact']}")
    assert r.returncode == 0 and d["verdict"] == "RECOVERED", (d["reason"], r.stderr[-2000:])
    assert replicas[0].process.poll() is not None  # the fault command did kill it
    ttr = d["time_to_recover_s"]
    assert ttr["high"] <= bound + 0.5, (ttr, bound)  # HAProxy's check timing: within half a second of its bound
    # failures only until the check took it out: none sent after the bound
    reqs = [json.loads(x) for x in (tmp_path / "carries.jsonl").read_text().splitlines() if '"type":"request"' in x]
    late = [x for x in reqs if x["error"] and x["error"] != "cancelled" and x["t_sent"] > d["reference"] + bound + 0.5]
    assert not late, late[:3]
    assert d["impact"]["failed"] > 0 and not d["evidence_problems"]


@pytest.mark.parametrize("fleet", [SLOW_SERVICE_S], indirect=True)
def test_one_replica_lost_the_other_cannot_carry_the_load(fleet, tmp_path):
    lb, replicas = fleet
    r, d = _drill(lb.url, 12, replicas[1], tmp_path / "cannot.jsonl")  # 12 req/s: two serve 16, one 8
    print(f"time to recover {d['time_to_recover_s']}; reason {d['reason']}")
    assert r.returncode == 1 and d["verdict"] == "NOT_RECOVERED", (d["reason"], r.stderr[-2000:])
    assert d["time_to_recover_s"] is None
    rec = next(p for p in d["phases"] if p["name"] == "recovery")
    assert rec["slow"] > rec["good"]  # the one replica's queue grows: TTFT past the SLO
