"""`servewatch drill` end to end against a real queueing system whose capacity is known (tests/support/slot_server.py),
as a child process (issue 39). Each drill runs for real: baseline, disturbance, recovery on short windows (not
acceptance-grade, marked; `drill` keeps `run`'s floors).

- the ground truth from queueing: a baseline at lambda = mu / 2, a spike of k x lambda for T seconds: the backlog
  (k lambda - mu) T drains in (k lambda - mu) T / (mu - lambda); mu is measured first (a burst well beyond the slots,
  the departures' rate), and the measured time to recover agrees within the step plus one service time;
- a server that stays degraded after the fault command (NOT RECOVERED, exit 1);
- a baseline that FAILs: INSUFFICIENT (exit 3), and the fault command never runs;
- `--fault-manual` marked by SIGUSR1 once the drill says "act now";
- `drill --json` prints only the drill document, which `report --json` on the file repeats; bad usage is one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.paths import REPO
from tests.support.slot_server import SlotServer

pytestmark = pytest.mark.slow  # every test starts a process (the CLI, a fault command): the quick loop's rule

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
FAST = ["--output-tokens", "4", "--no-gpu", "--api-key-env", "SW_TEST_NO_KEY", "--arrival", "constant",
        "--target", "0.9", "--min-window-minutes", "0.1", "--recovery-window-s", "2", "--step-s", "1"]


def drill(args: list[str], timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", "drill", *args], cwd=REPO, env=env or ENV,
                          capture_output=True, text=True, timeout=timeout)


def service_rate(url: str, n: int = 60) -> float:
    """The server's service rate mu on this machine now: ``n`` requests sent at once (well beyond its slots, a
    multiple of them) all served, over the time from the first send to the last end."""
    body = {"model": "m", "stream": True, "max_tokens": 4, "messages": [{"role": "user", "content": "x"}]}

    go = threading.Barrier(n)
    starts: list[float] = []

    def one(_: int) -> float:
        with httpx.Client(timeout=60) as c:
            go.wait()
            starts.append(time.monotonic())
            with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
                for _chunk in r.iter_raw():
                    pass
        return time.monotonic()

    with ThreadPoolExecutor(n) as pool:
        ends = list(pool.map(one, range(n)))
    return n / (max(ends) - min(starts))


def doc_of(out: str) -> dict:
    d = json.loads(out)
    assert list(d) == ["drill"], list(d)
    return d["drill"]


@pytest.mark.slow
def test_a_spike_drains_as_queueing_predicts(tmp_path):
    slots, service_s, k, spike_s = 4, 0.2, 3.0, 4.0
    with SlotServer(slots, service_s) as srv:
        mu = service_rate(srv.url)  # measured: slots / service_s less this machine's overhead
        lam = round(mu / 2, 2)
        backlog = (k * lam - mu) * spike_s
        predicted = backlog / (mu - lam)
        r = drill(["--url", srv.url, "--rate", f"{lam:g}", "--spike", f"{k:g}x:{spike_s:g}s", "--slo-ttft-ms", "250",
                   "--record", str(tmp_path / "spike.jsonl"), "--json", *FAST])
    d = doc_of(r.stdout)
    ttr = d["time_to_recover_s"]
    one_service = slots / mu
    print(f"mu {mu:.2f} req/s measured ({slots / service_s:g} nominal), lambda {lam:g}, backlog {backlog:.1f} "
          f"requests, predicted drain {predicted:.2f} s; measured time to recover {ttr}; impact {d['impact']}")
    assert r.returncode == 0 and d["verdict"] == "RECOVERED", (d["reason"], r.stderr[-2000:])
    # the recovery point (the interval's end) agrees with the drain time within the step plus one service time
    assert 1.0 <= ttr["high"] - ttr["low"] <= 1.0 + 1 / lam + 1e-6  # the step (the sends are 1 / lambda apart)
    assert abs(ttr["high"] - predicted) <= 1.0 + one_service, (ttr, predicted, one_service)
    # every request the spike queued was slow (it waited for the backlog), none failed; counted exactly once
    spike = next(p for p in d["phases"] if p["name"] == "disturbance")
    assert spike["failed"]["total"] == 0 and spike["slow"] > spike["good"]
    assert d["overall"]["sent"] == sum(p["sent"] for p in d["phases"])
    assert d["impact"]["slow"] > 0 and 0 < d["impact"]["error_budget_share"] < 1
    # report --json on the file is the same document
    rep = subprocess.run([sys.executable, "-m", "tui", "report", str(tmp_path / "spike.jsonl"), "--json"], cwd=REPO,
                         env=ENV, capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0 and json.loads(rep.stdout) == json.loads(r.stdout)


@pytest.mark.slow
def test_a_server_that_stays_degraded_is_not_recovered(tmp_path):
    flag = tmp_path / "degraded"
    secret = "sk-drill-cli-secret-5d81e0aa"
    with SlotServer(4, 0.05, degrade_flag=str(flag)) as srv:
        # the fault command prints the API key (as a careless script would): recorded scrubbed, never in clear
        r = drill(["--url", srv.url, "--rate", "10", "--fault-cmd", f"touch {flag}; echo \"using key $SW_DRILL_KEY\"",
                   "--slo-ttft-ms", "500", "--record", str(tmp_path / "degraded.jsonl"), "--recovery-minutes", "0.15",
                   *FAST, "--api-key-env", "SW_DRILL_KEY"], env={**ENV, "SW_DRILL_KEY": secret})
    assert flag.exists()
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert "verdict=NOT_RECOVERED" in r.stdout and "no recovery point" in r.stdout
    assert "http_5xx" in r.stdout  # the failures by class
    record = (tmp_path / "degraded.jsonl").read_text()
    assert secret not in record and secret not in r.stdout and secret not in r.stderr
    dist = [json.loads(x) for x in record.splitlines() if '"type":"phase"' in x and '"disturbance"' in x]
    assert [p["event"] for p in dist] == ["start", "end"]
    assert dist[0]["command"].startswith(f"touch {flag}") and dist[0]["t"] <= dist[1]["t"]
    assert dist[1]["exit_status"] == 0 and dist[1]["output"] == ["using key <redacted>"], dist[1]


@pytest.mark.slow
def test_a_baseline_that_fails_ends_the_drill_before_any_fault(tmp_path):
    flag = tmp_path / "fault-ran"
    with SlotServer(1, 0.2) as srv:  # 5 req/s at most; 10 req/s queue without bound
        r = drill(["--url", srv.url, "--rate", "10", "--fault-cmd", f"touch {flag}", "--slo-ttft-ms", "300",
                   "--record", str(tmp_path / "fails.jsonl"), "--json", *FAST])
    assert r.returncode == 3, r.stderr[-2000:]
    d = doc_of(r.stdout)  # stdout holds the JSON document only; progress went to stderr
    assert d["verdict"] == "INSUFFICIENT" and "no steady state to recover to" in d["reason"]
    assert d["baseline"]["state"] == "FAIL"
    assert not flag.exists(), "the fault command ran without a PASSing baseline"
    assert "drill ended after its baseline" in r.stderr


@pytest.mark.slow
def test_the_operators_act_is_marked_by_sigusr1(tmp_path):
    with SlotServer(4, 0.05) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "tui", "drill", "--url", srv.url, "--rate", "10",
                                 "--fault-manual", "--slo-ttft-ms", "500", "--record", str(tmp_path / "m.jsonl"),
                                 *FAST], cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        asked = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if "act now" in line:
                    asked.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert asked.wait(120), "".join(lines)[-2000:]
            proc.send_signal(signal.SIGUSR1)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        reader.join(10)
    out = "".join(lines)
    assert proc.returncode == 0, out[-3000:]
    assert "verdict=RECOVERED" in out and "disturbance marked (SIGUSR1)" in out
    phases = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines() if '"type":"phase"' in x]
    dist = [p for p in phases if p["name"] == "disturbance"]
    assert [p["event"] for p in dist] == ["start", "end"] and dist[0]["marked_by"] == "SIGUSR1"
    assert dist[0]["t"] == dist[1]["t"]  # an instant


@pytest.mark.parametrize("extra, words", [
    (["--rate", "1,2", "--spike", "3x:10s"], "one load"),
    (["--rate", "1", "--spike", "3x:10s", "--requests", "10"], "--requests"),
    (["--rate", "1", "--spike", "3x:10s", "--fault-at", "2m"], "--fault-at needs --fault-cmd"),
    (["--rate", "1", "--spike", "1x:10s"], "factor"),
    (["--rate", "1", "--fault-cmd", "true", "--fault-at", "5s", "--baseline-minutes", "1"], "--fault-at"),
    (["--rate", "1"], "one of the arguments"),
    (["--rate", "1", "--spike", "3x:10s", "--fault-manual"], "not allowed with"),
])
def test_bad_usage_is_one_line_exit_2(extra, words):
    r = drill(["--url", "http://127.0.0.1:9", *extra], timeout=60)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_help_names_every_phase_and_the_exit_codes():
    r = drill(["--help"], timeout=60)
    assert r.returncode == 0
    for word in ("--spike", "--fault-cmd", "--fault-manual", "--fault-at", "--baseline-minutes", "--recovery-minutes",
                 "--recovery-window-s", "--step-s", "--hold-minutes", "--rto", "--requests-per-month", "RECOVERED",
                 "NOT RECOVERED", "INSUFFICIENT"):
        assert word in r.stdout, word


def test_replay_and_report_read_a_drill_file(tmp_path):
    from tests.support.drill_files import plan, recovers_at, write_drill

    p = write_drill(tmp_path / "d.jsonl", plan(), recovers_at(4.0))
    r = subprocess.run([sys.executable, "-m", "tui", "report", str(p)], cwd=REPO, env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "verdict=RECOVERED" in r.stdout and "time to recover 3-4 s" in r.stdout
    html = tmp_path / "d.html"
    r = subprocess.run([sys.executable, "-m", "tui", "report", str(p), "--html", str(html)], cwd=REPO, env=ENV,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and html.exists()
    page = html.read_text()
    assert "Recovery: rolling good fraction and TTFT over the drill" in page and "recovery point" in page


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", *argv], cwd=REPO, env=ENV, capture_output=True, text=True,
                          timeout=120)


def test_accept_takes_drills_as_recovery_evidence(tmp_path):
    from tests.support.drill_files import fails_until, plan, recovers_at, write_drill

    good = write_drill(tmp_path / "good.jsonl", plan(), recovers_at(4.0))
    bad = write_drill(tmp_path / "bad.jsonl", plan("fault_cmd"), fails_until(1e9), t0=1_767_300_000.0)
    records = str(REPO / "sample_logs" / "default.jsonl")
    # no drill: said, in the section and the conclusion
    r = _cli("accept", "--records", records, "--out", str(tmp_path / "none"))
    md = (tmp_path / "none" / "acceptance.md").read_text()
    assert "### Recovery (drills)" in md and "No recovery evidence" in md
    assert "Recovery: no recovery evidence" in md.split("## 8. Conclusion")[1]
    assert "Recovery: no recovery evidence" in r.stdout
    # a RECOVERED drill on short windows: named as not acceptance-grade (and of another target), never "ready"
    r = _cli("accept", "--records", records, "--drill", str(good), "--out", str(tmp_path / "good"))
    doc = json.loads((tmp_path / "good" / "acceptance.json").read_text())
    (x,) = doc["recovery"]["drills"]
    assert x["verdict"] == "RECOVERED" and any("not acceptance-grade" in p for p in x["problems"])
    assert any(line.startswith("Recovery: the drill") for line in doc["conclusion"]["missing_or_failed"])
    page = (tmp_path / "good" / "acceptance.html").read_text()
    assert "Recovery charts" in page and "a-recovery-0" in page
    # a drill that did not recover fails the acceptance (exit 1), named
    r = _cli("accept", "--records", records, "--drill", str(bad), "--out", str(tmp_path / "bad"))
    assert r.returncode == 1 and "drill " in r.stdout and "NOT_RECOVERED" in r.stdout
    doc = json.loads((tmp_path / "bad" / "acceptance.json").read_text())
    assert doc["recovery"]["state"] == "NOT_RECOVERED"
    assert any(line.startswith("Recovery: NOT RECOVERED") for line in doc["conclusion"]["missing_or_failed"])
    # a record file that is not a drill, given as one: bad usage
    r = _cli("accept", "--records", records, "--drill", records, "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "not a drill file" in r.stderr


def test_compare_two_drills(tmp_path):
    from tests.support.drill_files import plan, recovers_at, write_drill

    fast = write_drill(tmp_path / "fast.jsonl", plan(), recovers_at(3.0))
    slow = write_drill(tmp_path / "slow.jsonl", plan(), recovers_at(9.0), t0=1_767_300_000.0)
    other = write_drill(tmp_path / "other.jsonl", plan(rto_s=10.0), recovers_at(3.0), t0=1_767_400_000.0)
    assert _cli("compare", str(fast), str(slow)).returncode == 1  # later beyond the step: WORSE
    r = _cli("compare", str(slow), str(fast), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["compare"]["verdict"] == "NOT WORSE"
    r = _cli("compare", str(fast), str(fast))
    assert r.returncode == 3 and "same run" in r.stdout
    r = _cli("compare", str(fast), str(other))
    assert r.returncode == 3 and "not the same drill" in r.stdout and "RTO" in r.stdout
    r = _cli("compare", str(fast), str(REPO / "sample_logs" / "default.jsonl"))
    assert r.returncode == 2 and "a drill compares with a drill" in r.stderr
