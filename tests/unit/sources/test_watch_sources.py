"""Watch mode against an in-test metrics server whose series move like vLLM / SGLang / TensorRT-LLM /
Dynamo's: deltas, a counter reset, a missing series, an SLO between bucket bounds, a failing
scrape, several models, the CLI (--once, --json, --record) and report on the record file."""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from tests.support.watch_server import MetricsServer
from tui.core import watch as W
from tui.core.slos import Slos
from tui.core.snapshot import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED
from tui.sources.watch import MetricsWatcher, WatchError, WatchSession, make_client


class FakeClock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run(coro):
    return asyncio.run(coro)


async def _session(ms, cfg, clock, selector=None, records=None):
    client = make_client({})
    watcher = MetricsWatcher(ms.url, selector=selector, client=client, clock=clock)
    s = WatchSession(watcher, cfg, emit=(records.append if records is not None else None), clock=clock,
                     header={"type": "run", "schema_version": 1, "source": {"kind": "watch"}})
    return s, client


def _cfg(**kw):
    limits = {k: kw.pop(f"slo_{k}_ms") for k in ("ttft", "tpot", "itl", "e2e") if f"slo_{k}_ms" in kw}
    base = dict(slos=Slos.of({"ttft": 1000.0, **limits}), target=0.95, alpha=0.05, min_window_s=600.0,
                fail_min_s=60.0)
    base.update(kw)
    return W.WatchConfig(**base)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "dynamo"])
def test_once_window_per_engine(engine):
    """Two scrapes a (fake) 10 minutes apart; the window holds exactly what happened between."""
    with MetricsServer(engine) as ms:
        ms.state.observe(fast=50)  # before the watch: must not count
        clock = FakeClock()

        async def main():
            s, client = await _session(ms, _cfg(), clock)

            async def sleep(_s):
                ms.state.observe(fast=3000, slow=10, aborted=5)
                ms.state.waiting = 0
                clock.t += 600

            try:
                w = await s.once(600, sleep=sleep)
            finally:
                await client.aclose()
            return s, w

        s, w = run(main())
    assert s.watcher.engine == engine
    assert W.count_of(w.ttft) == 3010 and w.failed == 5
    v = s.verdict()
    if engine == "dynamo":  # no queue-time histogram, but a queued-requests gauge that did not grow
        assert not v.blocked
    assert v.state == PASS, v.reason
    assert v.exact and v.lo == pytest.approx(3000 / 3015)
    assert W.SERVER_TTFT_LABEL in v.notes and W.COMPLETION_NOTE in v.notes
    assert ms.hits[ms.path] == 2 and sum(ms.hits.values()) == 2


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_slo_between_bounds_gives_a_bracket_and_judges_each_end():
    with MetricsServer("vllm") as ms:
        clock = FakeClock()

        async def main():
            s, client = await _session(ms, _cfg(slo_ttft_ms=750.0), clock)

            async def sleep(_s):
                ms.state.observe(fast=2600, medium=400)  # 0.7 s: between the 0.5 and 1.0 bounds
                clock.t += 600

            try:
                await s.once(600, sleep=sleep)
            finally:
                await client.aclose()
            return s

        s = run(main())
    v = s.verdict()
    assert not v.exact
    assert v.lo == pytest.approx(2600 / 3000) and v.hi == pytest.approx(1.0)
    # the pessimistic end (86.7%) cannot PASS, the optimistic end (100%) cannot FAIL
    assert v.state == UNDECIDED
    text = W.describe_window(s.last_window, s.cfg)["good_fraction"]["text"]
    assert "86.7-100.0%" in text and "no interpolation" in text


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_counter_reset_missing_series_and_failing_scrape():
    with MetricsServer("sglang") as ms:
        clock = FakeClock()
        records: list[dict] = []

        async def main():
            s, client = await _session(ms, _cfg(min_window_s=60.0), clock, records=records)
            try:
                await s.step()  # first scrape: no window yet
                ms.state.observe(fast=400)
                clock.t += 30
                await s.step()
                assert s.judgement.n == 400
                ms.state.restart()  # the server restarted: counters back to zero
                ms.state.observe(fast=5)
                clock.t += 30
                await s.step()
                assert s.judgement.n == 0 and s.judgement.resets and "reset" in s.judgement.resets[0]
                assert s.last_window.reset
                ms.state.drop_ttft = True  # a missing series: a gap, nothing invented
                clock.t += 30
                await s.step()
                assert s.last_window.ttft is None and "missing" in (s.last_gap or "")
                assert s.judgement.n == 0
                ms.state.drop_ttft = False
                ms.fail = 500  # a failing scrape: a gap with its reason
                clock.t += 30
                await s.step()
                assert s.last_gap == "scrape failed: HTTP 500"
                ms.fail = None
                ms.state.observe(fast=100)
                clock.t += 30
                await s.step()
                assert s.last_gap is None and s.judgement.n == 100  # 100 since the last good scrape
            finally:
                await client.aclose()
            return s

        s = run(main())
    v = s.verdict()
    assert any("counter reset" in n for n in v.notes)
    kinds = [r["type"] for r in records]
    assert kinds[0] == "run" and kinds.count("watch") == 5
    assert any(r.get("reset") for r in records if r["type"] == "watch")
    assert any("HTTP 500" in " ".join(r.get("gaps") or []) for r in records if r["type"] == "watch")


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_failing_optimistic_end_fails():
    with MetricsServer("trtllm") as ms:
        clock = FakeClock()

        async def main():
            s, client = await _session(ms, _cfg(slo_ttft_ms=750.0), clock)

            async def sleep(_s):
                ms.state.observe(fast=500, slow=500)
                clock.t += 600

            try:
                await s.once(600, sleep=sleep)
            finally:
                await client.aclose()
            return s

        s = run(main())
    assert s.verdict().state == FAIL


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_queue_growth_blocks_pass():
    with MetricsServer("vllm") as ms:
        clock = FakeClock()

        async def main():
            s, client = await _session(ms, _cfg(), clock)

            async def sleep(_s):
                ms.state.observe(fast=3000)
                ms.state.waiting = 57
                clock.t += 600

            try:
                await s.once(600, sleep=sleep)
            finally:
                await client.aclose()
            return s

        s = run(main())
    v = s.verdict()
    assert v.state == UNDECIDED and "queue grew" in v.reason and "0 -> 57" in v.reason


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_several_models_refused_then_selected():
    with MetricsServer("vllm", models=("alpha", "beta")) as ms:
        clock = FakeClock()

        async def main(selector):
            s, client = await _session(ms, _cfg(), clock, selector=selector)
            try:
                return await s.watcher.scrape()
            finally:
                await client.aclose()

        with pytest.raises(WatchError) as ei:
            run(main(None))
        assert "alpha" in str(ei.value) and "beta" in str(ei.value) and "--selector" in str(ei.value)
        ms.state.observe(fast=7)
        cum, why = run(main('model_name="beta"'))
    assert why is None and W.count_of(cum.ttft) == 7  # one model's series, not the sum of two


def _main(argv):
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_cli_once_json_record_and_report(tmp_path):
    """End to end through the CLI with a real (short) window; the record file reports the same verdict."""
    rec = tmp_path / "watch.jsonl"
    with MetricsServer("vllm") as ms:
        ms.state.observe(fast=10)
        code, out, err = _main(["watch", "--metrics-url", ms.url, "--once", "--window-minutes", "0.005",
                                "--min-window-minutes", "0", "--json", "--record", str(rec)])
        assert ms.hits[ms.path] == 2 and sum(ms.hits.values()) == 2
    assert code == 3, err  # no requests in the window: nothing to judge
    doc = json.loads(out)
    assert doc["engine"] == "vllm" and doc["verdict"]["state"] in (INSUFFICIENT_WINDOW, UNDECIDED)
    assert "one replica" in doc["scope"]
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert lines[0]["type"] == "run" and lines[0]["source"]["kind"] == "watch"
    assert [x["type"] for x in lines[1:]] == ["watch", "seal"]  # the digest chain's seal ends the file
    code2, out2, err2 = _main(["report", str(rec), "--min-window-minutes", "0", "--json"])
    assert code2 == code, err2
    assert json.loads(out2)["verdict"]["state"] == doc["verdict"]["state"]
    assert json.loads(out2)["records_integrity"]["state"] == "intact"


def test_report_judges_a_recorded_watch_like_the_watch(tmp_path):
    """A record file of watch windows: report gives the verdict the live judgement gave."""
    cfg = _cfg(min_window_s=60.0)
    j = W.WatchJudgement(cfg)
    lines = [json.dumps({"type": "run", "schema_version": 1, "source": {"kind": "watch"}})]
    for k in range(20):
        w = W.Window(k * 30.0, (k + 1) * 30.0, "vllm", "metrics", ttft=((0.1, 300.0), (0.5, 300.0), (1.0, 300.0),
                                                                          (float("inf"), 301.0)),
                     waiting_start=0, waiting_end=0)
        j.add(w)
        lines.append(json.dumps(W.window_to_record(w)))
    lines.append("{not json")
    p = tmp_path / "w.jsonl"
    p.write_text("\n".join(lines) + "\n")
    code, out, err = _main(["report", str(p), "--min-window-minutes", "1"])
    assert j.verdict().state == PASS
    assert code == 0 and "verdict: PASS" in out
    assert f"{p}:22: invalid JSON" in err


def test_cli_usage_errors():
    code, _o, err = _main(["watch", "--metrics-url", "ftp://x", "--once"])
    assert code == 2 and "http(s)" in err and "Traceback" not in err
    code, _o, err = _main(["watch", "--metrics-url", "http://127.0.0.1:9/metrics", "--probe-rate", "1", "--once"])
    assert code == 2 and "--url" in err
    code, _o, err = _main(["watch", "--metrics-url", "http://127.0.0.1:9/metrics", "--selector", "model=x", "--once",
                           "--window-minutes", "0.001"])
    assert code == 2 and "selector" in err
    code, _o, err = _main(["watch", "--once"])
    assert code == 2


def test_cli_unreachable_is_one_line_exit_2():
    code, _o, err = _main(["watch", "--metrics-url", "http://127.0.0.1:9/metrics", "--once", "--window-minutes",
                           "0.001"])
    assert code == 2 and "connection refused" in err and err.count("\n") == 1


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_secrets_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("SW_TEST_KEY", "sk-very-secret-1234")
    rec = tmp_path / "w.jsonl"
    with MetricsServer("vllm") as ms:
        code, out, err = _main(["watch", "--metrics-url", ms.url, "--once", "--window-minutes", "0.002",
                                "--min-window-minutes", "0", "--api-key-env", "SW_TEST_KEY",
                                "--header", "X-Token: hdr-secret-5678", "--record", str(rec), "--json"])
    blob = rec.read_text() + out + err
    assert "sk-very-secret-1234" not in blob and "hdr-secret-5678" not in blob
    assert json.loads(rec.read_text().splitlines()[0])["headers"] == {"Authorization": "<redacted>",
                                                                      "X-Token": "<redacted>"}


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_canary_records_each_probe_once_and_asks_nothing_else(tmp_path):
    """--probe-rate: small streamed requests through the load generator's request path, each recorded
    exactly once; the model server sees completions only (no model listing, no /tokenize)."""
    from tests.support.fault_server import FaultServer

    rec = tmp_path / "w.jsonl"
    with MetricsServer("vllm") as ms, FaultServer() as fs:
        code, out, err = _main(["watch", "--metrics-url", ms.url, "--url", fs.url("ok", tokens=3), "--model", "m",
                                "--probe-rate", "5", "--headless", "--duration", "1.2", "--interval", "0.2",
                                "--min-window-minutes", "10", "--json", "--record", str(rec)])
        served = fs.completions()
        connections = fs.connections
    assert code == 3, err  # 10-min window not reached
    doc = json.loads(out)
    reqs = [json.loads(x) for x in rec.read_text().splitlines() if '"type":"request"' in x]
    ids = [r["id"] for r in reqs]
    assert len(ids) == len(set(ids)) == len(served) >= 1
    assert connections == len(served)  # one connection per probe, nothing else asked
    c = doc["canary"]
    assert c["sent"] == len(ids) and c["client_ttft_p50_ms"] is not None and c["good"] >= 1
    assert all(e["body"]["stream"] is True and e["body"]["model"] == "m" for e in served)


def test_prometheus_query_failing_mid_watch_is_a_gap():
    """Prometheus answers the engine detection, then fails: each failed window is a gap with the
    reason (recorded), never a crash, and nothing is judged from it."""
    import httpx

    from tui.sources.watch import PrometheusWatcher

    state = {"down": False}

    def handler(request: httpx.Request) -> httpx.Response:
        q = request.url.params.get("query", "")
        if state["down"]:
            return httpx.Response(503, text="unavailable")
        if q.startswith("group by (__name__)"):
            res = [{"metric": {"__name__": "vllm:num_requests_waiting"}, "value": [0, "1"]}]
        elif q.startswith("group by"):
            res = [{"metric": {"model_name": "m"}, "value": [0, "1"]}]
        elif "_bucket" in q:
            res = [{"metric": {"le": le}, "value": [0, v]} for le, v in (("0.5", "90"), ("1.0", "95"), ("+Inf", "100"))]
        else:
            res = [{"metric": {}, "value": [0, "0"]}]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": res}})

    clock = FakeClock()
    records: list[dict] = []

    async def main():
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        try:
            s = WatchSession(PrometheusWatcher("http://prom.invalid", client=client, clock=clock), _cfg(), emit=records.append,
                             clock=clock, header={"type": "run", "schema_version": 1})
            await s.step(first_window_s=600)
            assert s.judgement.n == 100 and s.last_gap is None
            state["down"] = True
            clock.t += 30
            await s.step()
            assert s.judgement.n == 100 and s.last_window.ttft is None
            assert "query failed: HTTP 503" in (s.last_gap or "")
            state["down"] = False
            clock.t += 30
            await s.step()
            assert s.last_gap is None
            return s
        finally:
            await client.aclose()

    run(main())
    gaps = [r for r in records if r["type"] == "watch" and r["ttft_buckets"] is None]
    assert gaps and "HTTP 503" in " ".join(gaps[0]["gaps"])


def test_prometheus_once_window_end_and_millisecond_ranges():
    """`watch --prometheus-url --once --window-end T`: every query is evaluated at T, over a range in milliseconds
    (whole seconds rounded up moved the start by up to a second, onto the scrape before the window)."""
    import httpx

    from tui.sources.watch import PrometheusWatcher

    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        q = request.url.params.get("query", "")
        seen.append((q, request.url.params.get("time")))
        if q.startswith("group by (__name__)"):
            res = [{"metric": {"__name__": "vllm:num_requests_waiting"}, "value": [0, "1"]}]
        elif q.startswith("group by"):
            res = [{"metric": {"model_name": "m"}, "value": [0, "1"]}]
        elif "_bucket" in q:
            res = [{"metric": {"le": le}, "value": [0, v]} for le, v in (("0.1", "9"), ("+Inf", "10"))]
        else:
            res = [{"metric": {}, "value": [0, "0"]}]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": res}})

    async def main():
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        try:
            s = WatchSession(PrometheusWatcher("http://prom.invalid", client=client, clock=FakeClock()), _cfg())
            return await s.once(12.3456, t_end=1000.5)
        finally:
            await client.aclose()

    w = run(main())
    assert w is not None and w.t_end == 1000.5 and abs(w.t_start - (1000.5 - 12.3456)) < 1e-9
    windowed = [(q, t) for q, t in seen if "increase(" in q]
    assert windowed and all("[12346ms]" in q and t == "1000.500" for q, t in windowed), windowed


def test_window_end_is_for_prometheus_once():
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from tui.cli import main

    for argv in (["watch", "--metrics-url", "http://127.0.0.1:9/metrics", "--once", "--window-minutes", "1",
                  "--window-end", "1000"],
                 ["watch", "--prometheus-url", "http://127.0.0.1:9", "--headless", "--window-end", "1000"]):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
        assert code == 2 and "--window-end is for --prometheus-url --once" in err.getvalue()
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_once_says_each_scrape_and_stops_when_nothing_matches():
    """issue 37: `watch --once` printed nothing for ten minutes, then said every series was missing. Now each scrape
    is one progress line, and a selector that matches nothing ends the wait after 3 scrapes: "nothing to judge"."""
    with MetricsServer("vllm", models=("gemma",)) as ms:
        clock = FakeClock()
        lines: list[str] = []
        sleeps: list[float] = []

        async def main():
            s, client = await _session(ms, _cfg(), clock, selector='model_name="llama"')

            async def sleep(secs):
                sleeps.append(secs)
                ms.state.observe(fast=10)
                clock.t += secs

            try:
                w = await s.once(600, sleep=sleep, progress=lines.append)
            finally:
                await client.aclose()
            return s, w

        s, w = run(main())
    assert w is None and s.error.startswith("nothing to judge: no series match the selector")
    assert "gemma" in s.error  # the models the page does serve are named
    assert len(lines) == 3 and all(ln.startswith("watch --once: scrape ") for ln in lines)
    assert sum(sleeps) <= 30.0  # stopped within 3 scrapes / 30 s of (fake) time, not after the 10-minute window


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_once_with_matching_series_scrapes_through_the_window_and_says_so():
    with MetricsServer("vllm") as ms:
        clock = FakeClock()
        lines: list[str] = []

        async def main():
            s, client = await _session(ms, _cfg(), clock)

            async def sleep(secs):
                ms.state.observe(fast=100)
                clock.t += secs

            try:
                return s, await s.once(60, sleep=sleep, progress=lines.append)
            finally:
                await client.aclose()

        s, w = run(main())
    assert w is not None and W.count_of(w.ttft) == 1200  # 12 scrapes 5 s apart over the minute, 100 each
    assert len(lines) == 13 and "TTFT histogram" in lines[-1] and "1:00 of 1:00" in lines[-1]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_once_cli_nothing_to_judge_exits_3_with_progress_on_stderr():
    from tui.cli import main as cli_main

    with MetricsServer("vllm", models=("gemma",)) as ms:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli_main(["watch", "--metrics-url", ms.url, "--selector", 'model_name="llama"', "--once",
                             "--window-minutes", "10", "--interval", "0.05"])
    assert code == 3
    text = err.getvalue()
    assert text.count("watch --once: scrape ") == 3 and "nothing to judge: no series match" in text


def test_report_of_a_watch_recording_with_a_canary_judges_the_canary(tmp_path):
    """issue 37: `report` of a `watch --record` file of a server without a TTFT histogram (llama.cpp) said "no TTFT
    histogram: use --probe-rate" although the file holds the canary requests the watch judged."""
    from tui.cli import main as cli_main

    t0 = 1_767_225_600.0
    lines = [{"type": "run", "schema_version": 1, "source": {"kind": "watch", "tool": "servewatch", "version": "0",
                                                             "file": None, "sha256": None, "derived": []},
              "watch": {"source": "metrics", "engine": "llamacpp"}}]
    reqs = []
    for i in range(40):
        ts = t0 + 20.0 * i
        r = {"type": "request", "id": f"c{i}", "t_sent": ts, "t_first_token": ts + 0.2, "t_end": ts + 0.5,
             "complete": True, "error": None, "phase": "measure", "level": 0.05, "round": 1, "output_tokens": 8}
        reqs.append(r)
        lines.append(r)
        lines.append({"type": "watch", "t_start": ts, "t_end": ts + 20.0, "engine": "llamacpp", "source": "metrics",
                      "ttft_buckets": None, "e2e_buckets": None, "success": 1, "failed": 0})
    rec = tmp_path / "w.jsonl"
    rec.write_text("".join(json.dumps(x) + "\n" for x in lines))
    expected = W.canary_verdict(reqs, W.WatchConfig())
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = cli_main(["report", str(rec), "--json"])
    doc = json.loads(out.getvalue())
    assert doc["verdict"]["state"] == expected.state and doc["verdict"]["reason"] == expected.reason
    assert "use --probe-rate" not in doc["verdict"]["reason"]
    assert code == {"PASS": 0, "FAIL": 1}.get(expected.state, 3)
