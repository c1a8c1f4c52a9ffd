"""Worker processes: the load split over processes, one record file, one verdict.

The server is the in-test FaultServer (it can stall a request on demand, which the real llama-server
cannot); the worker processes reach it over 127.0.0.1 like any server. A real ramp against
llama-server through workers is in tests/integration/test_ray_workers.py and tests/integration/test_live_llama.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.calibrate import pass_slo_ms
from tests.support.fault_server import FaultServer
from tests.support.paths import REPO
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import parse_object
from tui.core.slos import Slos
from tui.sources.load import LoadConfig, LoadGenerator, run_load
from tui.sources.load.arrivals import open_schedule, process_arrivals
from tui.sources.load.sizing import auto_workers
from tui.sources.load.wire import split_count, split_orders

BOUND_S = 60.0  # every wait below gives up after this long (a bound, not a synchronisation)


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def cfg(url: str, **kw) -> LoadConfig:
    base = dict(url=url, model="m", mode="closed", levels=[4.0], requests=24, metrics=False, gpu=False,
                api_key_env=None, progress_interval=0, workers=2)
    base.update(kw)
    return LoadConfig(**base)


def requests_of(out: list[dict]) -> list[dict]:
    return [d for d in out if d.get("type") == "request"]


async def until(cond, what: str) -> None:
    """Wait for ``cond()`` (checked between event-loop turns), at most BOUND_S."""
    deadline = time.monotonic() + BOUND_S
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.01)


def start_stalled_run(fs, rec, **popen) -> tuple[subprocess.Popen, list[int]]:
    """`servewatch run --workers 2` at concurrency 4 against requests that never answer, once the server holds all
    4: (the process, its worker pids from the run header)."""
    n_before = len(fs.completions())
    proc = subprocess.Popen([sys.executable, "-m", "tui", "run", "--url", fs.url("stall"), "--model", "m",
                             "--concurrency", "4", "--duration", "600", "--workers", "2", "--no-gpu",
                             "--record", str(rec)], **popen)
    deadline = time.monotonic() + BOUND_S
    while len(fs.completions()) - n_before < 4:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    header = json.loads(rec.read_text().splitlines()[0])
    return proc, [w["pid"] for w in header["load"]["workers"]["workers"]]


# ------------------------------------------------------------------ the split (pure)


def test_split_count_gives_every_request_to_exactly_one_worker():
    assert split_count(10, 3) == [4, 3, 3]
    assert split_count(2, 4) == [1, 1, 0, 0]
    assert sum(split_count(1001, 7)) == 1001


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_closed_loop_split_divides_the_concurrency_and_the_count():
    orders = split_orders(level=5, rnd=1, phase="measure", mode="closed", t0_epoch=1.0, duration=None,
                          n_requests=11, workers=2)
    assert [o.concurrency for o in orders] == [3, 2]
    assert [o.n_requests for o in orders] == [6, 5]
    # more workers than streams: a worker with requests to send still gets a loop
    orders = split_orders(level=1, rnd=1, phase="measure", mode="closed", t0_epoch=1.0, duration=None,
                          n_requests=3, workers=3)
    assert [o.concurrency for o in orders] == [1, 1, 1] and sum(o.n_requests for o in orders) == 3


@settings(max_examples=60, deadline=None)
@given(workers=st.integers(1, 8), n=st.integers(0, 300), rate=st.floats(0.5, 2000), seed=st.integers(0, 10**6),
       arrival=st.sampled_from(["poisson", "constant", "gamma"]))
def test_open_loop_shares_partition_the_one_schedule(workers, n, rate, seed, arrival):
    whole = list(process_arrivals(open_schedule(arrival, rate, 2.0, seed, 1), n))
    shares = [list(process_arrivals(open_schedule(arrival, rate, 2.0, seed, 1), n, k, workers))
              for k in range(workers)]
    merged = sorted(itertools.chain.from_iterable(shares))
    assert merged == whole  # the union is exactly the requested process, every arrival once
    assert all(a[0] % workers == k for k, share in enumerate(shares) for a in share)


def test_auto_workers_follows_the_load_and_the_cores():
    assert auto_workers("closed", [1, 2, 4], cpus=16) == 1
    assert auto_workers("closed", [256], cpus=16) == 4
    assert auto_workers("closed", [1024], cpus=2) == 2
    assert auto_workers("open", [1000], cpus=16) == 4
    assert auto_workers("open", [0.5], cpus=16) == 1


# ------------------------------------------------------------------ processes against a server


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_every_request_once_with_unique_ids_in_t_end_order(fs):
    out: list[dict] = []
    summary = await run_load(cfg(fs.url("ok", tokens=3), levels=[3.0, 5.0], requests=30), out.append)
    reqs = requests_of(out)
    assert len(reqs) == 60 == summary.requests
    ids = [d["id"] for d in reqs]
    assert len(set(ids)) == 60
    run_id = out[0]["run_id"]
    assert sorted(int(i.rsplit("-", 1)[1]) for i in ids) == list(range(1, 61))  # unique by construction
    assert all(i.startswith(run_id + "-") for i in ids)
    served = Counter(e["id"] for e in fs.completions())
    assert all(served[i] == 1 for i in ids)  # the server saw each recorded request once
    for level in (3.0, 5.0):
        ends = [d["t_end"] for d in reqs if d["level"] == level]
        assert ends == sorted(ends)  # one ordered stream for the monitor and the file
    block = out[0]["load"]["workers"]
    assert block["count"] == 2 and block["kind"] == "processes"
    assert len({w["pid"] for w in block["workers"]}) == 2 and os.getpid() not in {w["pid"] for w in block["workers"]}
    steps = [d for d in out if d.get("type") == "step" and d.get("event") == "end"]
    assert [s["requests"] for s in steps] == [30, 30]
    assert all(len(s["worker_cpu_s"]) == 2 and not s.get("degraded") for s in steps)


@pytest.mark.slow
async def test_open_loop_union_is_the_single_process_schedule(fs):
    """The same seed in one process and in three workers: the same intended arrival times."""
    times = {}
    for workers in (1, 3):
        out: list[dict] = []
        await run_load(cfg(fs.url("ok", tokens=2), mode="open", levels=[40.0], requests=40, arrival="poisson",
                           seed=7, workers=workers), out.append)
        reqs = requests_of(out)
        assert len(reqs) == 40
        offs = sorted(d["t_intended"] for d in reqs)
        times[workers] = [t - offs[0] for t in offs]
    assert times[3] == pytest.approx(times[1], abs=1e-6)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_same_verdict_in_process_and_with_workers(fs):
    verdicts = {}
    # 20 ms to the first token: requests longer than the client's own send overhead, so the server holds the 4 in
    # flight the level is labelled with (tui.core.evidence: the [t_sent, t_end] intervals)
    url = fs.url("ok", tokens=2, first_delay=0.02)
    slo_ms = await asyncio.to_thread(pass_slo_ms, url, output_tokens=2)  # this machine, now
    for workers in (1, 2):
        out: list[dict] = []
        mcfg = MonitorConfig(slos=Slos(ttft_ms=slo_ms), target=0.5, min_window_s=0.0, min_requests=20)
        await run_load(cfg(url, levels=[4.0], requests=80, workers=workers, monitor=mcfg), out.append)
        mon = Monitor(mcfg)
        for d in out:
            mon.add(parse_object(d))
        verdicts[workers] = [r.verdict.state for r in mon.level_rows()]
    assert verdicts[1] == verdicts[2] == ["PASS"]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_cancel_records_every_in_flight_request_of_every_worker(fs):
    out: list[dict] = []
    gens: list[LoadGenerator] = []
    task = asyncio.create_task(run_load(cfg(fs.url("stall"), levels=[6.0], requests=None, duration=600.0),
                                        out.append, on_generator=gens.append))
    await until(lambda: gens and gens[0].pool is not None and gens[0].in_flight >= 6, "6 requests in flight")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    reqs = requests_of(out)
    assert len(reqs) == 6 == len({d["id"] for d in reqs})
    assert {d["error"] for d in reqs} == {"cancelled"}
    end = [d for d in out if d.get("type") == "step" and d.get("event") == "end"]
    assert len(end) == 1 and not end[0].get("degraded")


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_killed_worker_degrades_the_step_and_its_requests_are_recorded_lost(fs):
    out: list[dict] = []
    gens: list[LoadGenerator] = []
    mcfg = MonitorConfig(slos=Slos(ttft_ms=1000.0), target=0.95, min_window_s=0.0, min_requests=1)
    task = asyncio.create_task(run_load(cfg(fs.url("stall"), levels=[4.0, 8.0], requests=None, duration=600.0,
                                            monitor=mcfg), out.append, on_generator=gens.append))
    await until(lambda: gens and gens[0].pool is not None and gens[0].in_flight >= 4, "4 requests in flight")
    victim = gens[0].pool.links[0].proc
    victim.send_signal(signal.SIGKILL)
    await until(lambda: any(d.get("error") == "worker_lost" for d in out), "the lost requests")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    reqs = requests_of(out)
    errors = Counter(d["error"] for d in reqs)
    assert errors == {"worker_lost": 2, "cancelled": 2}  # the dead worker's 2 streams, the live worker's 2
    assert len({d["id"] for d in reqs}) == 4
    end = [d for d in out if d.get("type") == "step" and d.get("event") == "end"]
    assert len(end) == 1 and end[0]["degraded"] is True and end[0]["worker_lost"] == 2
    assert "SIGKILL" in end[0]["lost_workers"][0]
    assert end[0].get("verdict") != "PASS"
    mon = Monitor(mcfg)
    for d in out:
        mon.add(parse_object(d))
    assert all(r.verdict.state != "PASS" for r in mon.level_rows())


def test_a_degraded_level_cannot_pass_in_the_monitor():
    """All requests good, but the step says a worker was lost: the level was not held."""
    mcfg = MonitorConfig(slos=Slos(ttft_ms=1000.0), target=0.5, min_window_s=0.0, min_requests=5)
    t0 = 1_767_225_600.0  # record times are wall-clock epoch seconds; two requests in flight at a time
    recs = [{"type": "request", "id": f"r{i}", "t_sent": t0 + i, "t_first_token": t0 + 0.1 + i, "t_end": t0 + 1.99 + i,
             "complete": True, "level": 2.0, "round": 1, "phase": "measure"} for i in range(40)]
    end = {"type": "step", "event": "end", "t": t0 + 100, "level": 2.0, "round": 1, "mode": "closed",
           "phase": "measure", "degraded": True, "worker_lost": 1}
    for degraded in (False, True):
        mon = Monitor(mcfg)
        for d in recs + ([end] if degraded else []):
            mon.add(parse_object(d))
        state = mon.level_rows()[0].verdict
        assert (state.state == "PASS") is (not degraded)
        if degraded:
            assert "cannot PASS" in state.reason


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_run_stops_on_sigterm_and_records_every_in_flight_request(fs, tmp_path):
    """`servewatch run --workers 2`, SIGTERM mid-step: nothing lost, every worker process gone."""
    rec = tmp_path / "run.jsonl"
    proc, pids = start_stalled_run(fs, rec, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.send_signal(signal.SIGTERM)
    text, _ = proc.communicate(timeout=BOUND_S)
    assert "interrupted" in text and "Traceback" not in text
    # the end-of-run report over no completed request is a report, not an internal error (exit 70 before: the
    # latency rows of an empty window had no P50 key)
    assert "internal error" not in text and proc.returncode == 143, (proc.returncode, text[-600:])  # issue 37
    assert "verdict" in text.lower()  # the partial verdict was printed before exiting 143
    reqs = [json.loads(x) for x in rec.read_text().splitlines() if '"type":"request"' in x]
    assert len(reqs) == 4 and {d["error"] for d in reqs} == {"cancelled"}
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_workers_flag_bad_usage_is_one_line(capsys):
    from tui.cli import main

    for bad in ("0", "x", "-3", "99999"):
        assert main(["run", "--url", "http://127.0.0.1:9/v1", "--concurrency", "1", "--workers=" + bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) <= 2 and "--workers" in err[-1]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_request_once_never_reuses_an_id(fs):
    """The canary sends through request_once, each with a fresh client: the id sequence goes on."""
    out: list[dict] = []
    gen = LoadGenerator(cfg(fs.url("ok", tokens=2), workers=1), out.append)
    for _ in range(3):
        await gen.request_once()
    assert [d["id"].rsplit("-", 1)[1] for d in out] == ["000001", "000002", "000003"]
    assert gen.sent_total == 3


@pytest.mark.slow
async def test_live_console_with_workers_quits_losing_nothing(fs, tmp_path):
    """`live --workers 2`: the console fills from the coordinator; q cancels every worker's in-flight requests,
    each recorded once, and the console saw every recorded request."""
    from tui.app import build_app
    from tui.core.records import LineIssue, RequestRecord, read_file
    from tui.sources.base import MonitorSink
    from tui.sources.live import LiveSource

    record = tmp_path / "live.jsonl"
    source = LiveSource(cfg(fs.url("ok", tokens=3, delay=0.05), levels=[6.0], requests=None, duration=600.0,
                            record=str(record)))
    sink = MonitorSink(Monitor(MonitorConfig(), source=source.label))
    app = build_app(source, sink, None, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + BOUND_S
        while (app.console_screen.snapshot is None or app.console_screen.snapshot.requests_total < 30) and time.monotonic() < deadline:
            assert source.error is None, source.error
            await pilot.pause(0.05)
        assert app.console_screen.snapshot is not None and app.console_screen.snapshot.requests_total >= 30
        await pilot.press("q")
        deadline = time.monotonic() + BOUND_S
        while app.return_value is None and time.monotonic() < deadline:
            await pilot.pause(0.05)
    assert source.finished and source.error is None
    items = list(read_file(str(record)))
    assert not [i for i in items if isinstance(i, LineIssue)]
    reqs = [r for r in items if isinstance(r, RequestRecord)]
    ids = Counter(r.id for r in reqs)
    assert all(n == 1 for n in ids.values())
    assert sink.snapshot().requests_total == len(ids)
    header = next(i for i in items if not isinstance(i, (LineIssue, RequestRecord)) and hasattr(i, "data"))
    assert header.data["load"]["workers"]["count"] == 2
    run_id = header.data["run_id"]
    served = {e["id"] for e in fs.completions() if str(e.get("id", "")).startswith(run_id + "-")}
    assert served <= set(ids)  # every request the server received is in the file (the last ones as cancelled)


@pytest.mark.slow
def test_workers_exit_when_the_coordinator_is_killed(fs, tmp_path):
    """SIGKILL of the coordinator: its workers see their input close and exit (no orphans sending load)."""
    rec = tmp_path / "run.jsonl"
    proc, pids = start_stalled_run(fs, rec, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.kill()
    proc.wait(BOUND_S)
    deadline = time.monotonic() + BOUND_S
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive.discard(pid)
        time.sleep(0.02)
    assert not alive


@pytest.mark.slow
async def test_a_stuck_worker_is_stopped_and_its_requests_recorded_lost(fs, monkeypatch):
    """A worker that stops reporting (SIGSTOP here; a deadlock alike) cannot hold the step open forever."""
    import tui.sources.load.coordinator as coordinator

    monkeypatch.setattr(coordinator, "SILENCE_S", 1.0)
    out: list[dict] = []
    gens: list[LoadGenerator] = []
    task = asyncio.create_task(run_load(cfg(fs.url("stall"), levels=[4.0], requests=None, duration=600.0),
                                        out.append, on_generator=gens.append))
    await until(lambda: gens and gens[0].pool is not None and gens[0].in_flight >= 4, "4 requests in flight")
    victim = gens[0].pool.links[1].proc
    victim.send_signal(signal.SIGSTOP)
    await until(lambda: any(d.get("error") == "worker_lost" for d in out), "the stuck worker's requests")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert Counter(d["error"] for d in requests_of(out)) == {"worker_lost": 2, "cancelled": 2}
    end = [d for d in out if d.get("type") == "step" and d.get("event") == "end"][0]
    assert end["degraded"] and "sent nothing" in end["lost_workers"][0]
    assert victim.returncode is not None or victim.pid  # killed (SIGKILL reaches a stopped process)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_decided_step_stops_every_worker(fs):
    """Until decided: the coordinator's verdict ends the step on all workers (a failing server FAILs early)."""
    out: list[dict] = []
    mcfg = MonitorConfig(slos=Slos(ttft_ms=1000.0), target=0.95, min_window_s=0.0, min_requests=20)
    summary = await run_load(cfg(fs.url("status", code=500), levels=[4.0], requests=None, until_decided=True,
                                 max_step_seconds=300.0, monitor=mcfg), out.append)
    end = [d for d in out if d.get("type") == "step" and d.get("event") == "end"][0]
    assert end["verdict"] == "FAIL"
    assert end["duration_s"] < 300.0  # ended by the verdict, not by the cap
    reqs = requests_of(out)
    assert len(reqs) == summary.requests == len({d["id"] for d in reqs})
    assert {d["error"] for d in reqs} == {"http_5xx"}


@pytest.mark.slow
async def test_trace_replay_dealt_to_workers_keeps_the_trace_times(fs):
    """--trace with two workers: every arrival of the trace once, at its offset, with its lengths."""

    from tui.sources.load.trace import load_trace, trace_schedule

    path = REPO / "sample_logs" / "traces" / "mooncake-synthetic.jsonl"
    trace = load_trace(str(path), speed=20.0)
    plan = list(trace_schedule(trace))
    out: list[dict] = []
    await run_load(cfg(fs.url("ok", tokens=2), mode="open", levels=[trace.level], requests=None, trace=trace,
                       workers=2, ignore_eos=True), out.append)
    reqs = sorted(requests_of(out), key=lambda d: d["t_intended"])
    assert len(reqs) == len(plan) == len({d["id"] for d in reqs})
    t0 = reqs[0]["t_intended"]
    assert [d["t_intended"] - t0 for d in reqs] == pytest.approx([p[0] - plan[0][0] for p in plan], abs=1e-6)
    assert [d["output_tokens_asked"] for d in reqs] == [p[2] for p in plan]
    assert out[0]["source"]["kind"] == "trace" and len(out[0]["source"]["sha256"]) == 64


async def test_a_lost_workers_last_words_never_carry_a_secret():
    """A dying worker's last stderr line goes into the step record and the progress: scrubbed of credentials."""
    from tui.core.redact import Scrubber
    from tui.sources.load.coordinator import WorkerPool
    from tui.sources.load.wire import Batch, StepOrder

    secret = "sk-live-abcdef0123456789"

    class DyingLink:
        index = 0

        def __init__(self) -> None:
            self.sent: list = []
            self.replies = [("ready", {"worker": 0}), Batch(0, 0.0, started=[("r-1", 1.0, "measure", 1.0, 1, 8, 8)]),
                            None]

        async def start(self) -> None: ...
        async def send(self, msg) -> None: self.sent.append(msg)
        async def recv(self): return self.replies.pop(0)
        def describe_exit(self) -> str: return f"worker 0 exited with status 1 (KeyError: 'Bearer {secret}')"
        async def reap(self) -> None: ...
        def kill(self) -> None: ...
        async def close(self) -> None: ...

    said: list[str] = []
    pool = WorkerPool([DyingLink()], said.append, scrub=Scrubber([secret]))
    await pool.start([None])
    got: list[dict] = []
    result = await pool.run_step([StepOrder(1.0, 1, "measure", "closed", 0.0, None, concurrency=1)], got.append,
                                 lambda: False)
    assert result.degraded and result.worker_lost_requests == 1
    assert [d["error"] for d in got] == ["worker_lost"]
    text = json.dumps(got) + json.dumps(result.lost) + "\n".join(said)
    assert "KeyError" in text and secret not in text
