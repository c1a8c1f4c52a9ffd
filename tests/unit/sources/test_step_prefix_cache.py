"""The step end record's ``prefix_cache`` block (issue 23): vLLM's prefix-cache counters scraped at the step's start
and end with the latency histograms (tui.sources.metrics.StepHistograms), their deltas written by the load
generator's step (generator._run_step), read back by the report.

The load goes to the fault server; the metrics page is the in-test exposition server, whose prefix-cache counters
move by exactly 100 queried and 60 hit tokens per request the client sends (a wrapping transport moves them as each
request leaves): the step's delta is then known exactly. A restart between the scrapes (counters back to 0) and a
page without the counters give a block that says so, or none: never a made-up number."""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stderr, redirect_stdout

import httpx

from tests.support.fault_server import FaultServer
from tests.support.watch_server import MetricsServer
from tui.sources.load import LoadConfig, run_load
from tui.sources.metrics import StepHistograms, parse_histograms

SRC = "vllm:prefix_cache_hits_total/queries_total"


class Moving(httpx.AsyncHTTPTransport):
    def __init__(self, ms: MetricsServer) -> None:
        super().__init__()
        self.ms = ms

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/completions"):
            st = self.ms.state
            st.observe_hist("ttft", 0.3)
            assert st.prefix_cache is not None
            st.prefix_cache[0] += 100
            st.prefix_cache[1] += 60
        return await super().handle_async_request(request)


def _cfg(fs: FaultServer, ms: MetricsServer, n: int) -> LoadConfig:
    return LoadConfig(url=fs.url("ok", tokens=5), levels=[2], requests=n, warmup=0, metrics=True,
                      metrics_url=ms.url, metrics_interval=3600.0, gpu=False, progress_interval=0,
                      api_key_env=None, read_timeout=5.0, connect_timeout=2.0, input_tokens=(16, 16),
                      output_tokens=(5, 5))


def test_the_step_end_record_carries_the_counters_deltas_and_the_report_shows_them(tmp_path):
    with FaultServer() as fs, MetricsServer("vllm", latency=True) as ms:
        ms.state.prefix_cache = [5000.0, 4000.0]  # before the run: not in the step's delta
        out: list[dict] = []
        asyncio.run(run_load(_cfg(fs, ms, 10), out.append, transport=Moving(ms)))
    ends = [d for d in out if d["type"] == "step" and d["event"] == "end"]
    assert len(ends) == 1
    assert ends[0]["prefix_cache"] == {"source": SRC, "queries": 1000, "hits": 600, "hit_rate": 0.6}
    reqs = [d for d in out if d["type"] == "request"]
    assert len(reqs) == 10 and all(r["cached_tokens"] is None for r in reqs)  # the fault server says nothing
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in out))
    from tui.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf), redirect_stderr(io.StringIO()):
        main(["report", "--details", str(path), "--min-window-minutes", "0"])
    assert f"server counters: 60.0% (600 of 1,000 tokens, {SRC})" in buf.getvalue()


def _two_snapshots(ms: MetricsServer, between) -> tuple:
    async def main():
        async with httpx.AsyncClient() as c:
            h = StepHistograms("http://unused/v1", metrics_url=ms.url)
            a = await h.snapshot(c, "m")
            between()
            b = await h.snapshot(c, "m")
            return a, b, h.prefix_cache(a, b)
    return asyncio.run(main())


def test_a_restart_between_the_scrapes_gives_a_block_without_numbers():
    with MetricsServer("vllm", latency=True) as ms:
        ms.state.prefix_cache = [900.0, 300.0]
        a, b, pc = _two_snapshots(ms, ms.state.restart)  # counters back to 0
    assert a["prefix_cache"]["queries"] == 900.0 and b["prefix_cache"]["queries"] == 0.0
    assert pc is not None and pc["queries"] is None and pc["hit_rate"] is None and "went down" in pc["problem"]


def test_a_failed_end_scrape_is_said_and_a_page_without_the_counters_gives_no_block():
    with MetricsServer("vllm", latency=True) as ms:
        ms.state.prefix_cache = [10.0, 1.0]

        def fail() -> None:
            ms.fail = 500

        _a, b, pc = _two_snapshots(ms, fail)
    assert "problem" in b and pc is not None and pc["hits"] is None and "step's end" in pc["problem"]
    with MetricsServer("vllm", latency=True) as ms:  # an engine that does not export them
        a, b, pc = _two_snapshots(ms, lambda: None)
    assert "prefix_cache" not in a and pc is None
    assert "prefix_cache" not in (parse_histograms("# TYPE llamacpp:requests_processing gauge\n"
                                                   "llamacpp:requests_processing 0\n") or {})
