"""Each load step records the server's latency histograms at its start and end (issue 21), and the report shows
the server's brackets beside the client's percentiles, flagging a client figure below them.

The load goes to the fault server; its metrics page is the in-test exposition server, whose histograms move by
exactly one TTFT (0.3 s), one end-to-end (0.7 s) and four inter-token gaps per completion request the client
sends (a wrapping transport moves them as each request leaves): the step's delta is then known exactly."""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stderr, redirect_stdout

import httpx

from tests.support.fault_server import FaultServer
from tests.support.watch_server import MetricsServer
from tui.core.records import parse_object
from tui.sources.load import LoadConfig, run_load
from tui.sources.metrics import StepHistograms, parse_histograms


class Moving(httpx.AsyncHTTPTransport):
    def __init__(self, ms: MetricsServer) -> None:
        super().__init__()
        self.ms = ms

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/completions"):
            st = self.ms.state
            st.observe_hist("ttft", 0.3)
            st.observe_hist("e2e", 0.7)
            st.observe_hist("itl", 0.04, 4)
        return await super().handle_async_request(request)


def _main(argv):
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_step_record_carries_the_counts_and_the_report_flags_a_client_p50_below(tmp_path):
    with FaultServer() as fs, MetricsServer("vllm", latency=True) as ms:
        ms.state.observe_hist("ttft", 0.04, 50)  # before the run: must not be in the step's delta
        cfg = LoadConfig(url=fs.url("ok", tokens=5), levels=[2], requests=12, warmup=0, metrics=True,
                         metrics_url=ms.url, metrics_interval=3600.0, gpu=False, progress_interval=0,
                         api_key_env=None, read_timeout=5.0, connect_timeout=2.0, input_tokens=(16, 16),
                         output_tokens=(5, 5))
        out: list[dict] = []
        asyncio.run(run_load(cfg, out.append, transport=Moving(ms)))
    ends = [d for d in out if d["type"] == "step" and d["event"] == "end"]
    assert len(ends) == 1
    sh = ends[0]["server_histograms"]
    assert sh["engine"] == "vllm" and sh["problems"] == []
    assert sh["start"]["ttft"]["count"] == 50 and sh["end"]["ttft"]["count"] == 62  # 12 requests in the step
    assert sh["end"]["itl"]["count"] - sh["start"]["itl"]["count"] == 48
    step = parse_object(json.loads(json.dumps(ends[0])))
    assert step.server_histograms == sh  # the record type carries it (and old files without it still read)
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in out))
    code, text, err = _main(["report", "--details", str(path), "--min-window-minutes", "0", "--json"])
    rep = json.loads(text)
    st = rep["levels"][0]["server_timing"]
    assert st["metrics"]["ttft"]["n"] == 12 and st["metrics"]["ttft"]["P50"]["server_ms"] == [250.0, 500.0]
    assert st["metrics"]["e2e"]["P50"]["server_ms"] == [500.0, 1000.0]
    # the fault server answers in milliseconds: the client's TTFT P50 is below the server's 250..500 ms bucket
    assert st["metrics"]["ttft"]["P50"]["below_server_bracket"] is True
    assert any("cannot happen" in f for f in st["flags"])
    assert rep["measured"]["server_timing"]["metrics"]["ttft"]["n"] == 12
    code, text, err = _main(["report", "--details", str(path), "--min-window-minutes", "0"])
    assert "server-side timing (vllm" in text and "FLAG: client TTFT P50" in text, text


def test_a_page_without_latency_histograms_is_asked_once_then_left_alone():
    page = ("# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n"
            "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n")
    hits = []

    def handler(request: httpx.Request) -> httpx.Response:
        hits.append(request.url.path)
        return httpx.Response(200, text=page)

    async def main():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            h = StepHistograms("http://127.0.0.1:1/v1")
            first = await h.snapshot(c)
            second = await h.snapshot(c)
            return first, second, h.combine(first, second)

    first, second, combined = asyncio.run(main())
    assert first is None and second is None and combined is None
    assert hits == ["/metrics", "/prometheus/metrics"]  # both usual paths tried once, then never again
    assert parse_histograms(page) == {"engine": "llamacpp", "hists": {}, "problems": []}


def test_a_scrape_failing_at_the_end_is_said_in_the_record():
    with MetricsServer("sglang", latency=True) as ms:
        async def main():
            async with httpx.AsyncClient() as c:
                h = StepHistograms("http://unused/v1", metrics_url=ms.url)
                a = await h.snapshot(c, "m")
                ms.fail = 500
                b = await h.snapshot(c, "m")
                return h.combine(a, b)

        sh = asyncio.run(main())
    assert sh["start"]["ttft"]["name"] == "sglang:time_to_first_token_seconds" and sh["end"] is None
    assert any("HTTP 500" in p for p in sh["problems"])
