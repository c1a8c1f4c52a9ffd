"""vLLM's prefix-cache counters, read through the load generator's step snapshots (issue 23), on the real peer:
vLLM (CPU) + SmolLM2-135M (tests/support/vllm_fixture.py ``vllm_server``).

vLLM V1 turns prefix caching on by default; the test first confirms it from the server's own
``vllm:cache_config_info`` (``enable_prefix_caching="True"``) rather than assuming it. Two streamed chat requests
share a long system prompt (several KV blocks) and differ only in the last user words (4 output tokens each). The
step snapshot code (``StepHistograms.snapshot`` / ``StepHistograms.prefix_cache``, what ``_run_step`` writes as
the step's ``prefix_cache`` block) taken after the first request and after the second gives a delta with hits > 0
(the second request found the prefix in the cache) and no more hits than queries. The engine publishes its counters
a step after the last token: each snapshot is polled (bounded deadline) until the queries counter has moved.

The requests go through the load generator's stream reader and ``request_record``: the fixture starts vLLM without
``--enable-prompt-tokens-details``, so the server does not say per request, and the record says null (unknown),
never a guess.
"""

from __future__ import annotations

import asyncio
import json
import time
from time import perf_counter

import httpx

from tui.core.redact import Scrubber
from tui.sources.load.executor import Req, RequestExecutor, request_record
from tui.sources.metrics import StepHistograms, parse_labeled

PREFIX = "You are the prefix cache test assistant. " + " ".join(
    f"Guideline {i}: keep answers about item {i} short, exact and kind." for i in range(40))
DEADLINE_S = 60.0


async def _moved(h: StepHistograms, c: httpx.AsyncClient, model: str, past: float) -> dict:
    """A snapshot whose prefix-cache queries counter is above ``past`` (polled, bounded deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        snap = await h.snapshot(c, model)
        assert snap is not None and "problem" not in snap, snap
        pc = snap.get("prefix_cache")
        assert pc is not None and "problem" not in pc, f"no prefix-cache counters on the page: {pc}"
        if pc["queries"] > past:
            return snap
        if time.monotonic() > deadline:
            raise AssertionError(f"prefix-cache queries did not move past {past} within {DEADLINE_S:.0f} s: {pc}")
        await asyncio.sleep(0.2)  # polling the server's own counter; the bound is the deadline above


async def _ask(executor: RequestExecutor, server, question: str) -> dict:
    body = {"model": server.model, "messages": [{"role": "system", "content": PREFIX},
                                                {"role": "user", "content": question}],
            "max_tokens": 4, "stream": True, "stream_options": {"include_usage": True}}
    req = Req("pc-" + question[:6], "measure", 1.0, 1, None, 0, 4, question, perf_counter())
    async with httpx.AsyncClient(timeout=120.0) as client:
        req.t_sent = perf_counter()
        async with client.stream("POST", server.base_url + "/v1/chat/completions", content=json.dumps(body),
                                 headers={"Content-Type": "application/json"}) as resp:
            assert resp.status_code == 200
            req.status = resp.status_code
            await executor.stream(req, resp)
    offset = time.time() - perf_counter()
    rec, *_ = request_record(req, lambda t: t + offset)
    assert rec["complete"] is True, rec.get("error_detail")
    return rec


async def test_prefix_cache_counters_move_between_two_requests_sharing_a_prefix(vllm_server):
    page = httpx.get(vllm_server.metrics_url, timeout=10.0).text
    info = [lab for name, lab, _v in parse_labeled(page) if name == "vllm:cache_config_info"]
    assert info and info[0].get("enable_prefix_caching") == "True", info  # on by default in V1: confirmed
    executor = RequestExecutor(None, vllm_server.base_url, "", chat=True, model=vllm_server.model,  # type: ignore[arg-type]
                               ignore_eos=True, read_timeout=120.0, token_offsets=False, scrub=Scrubber(()),
                               say=lambda s: None)
    h = StepHistograms(vllm_server.base_url, metrics_url=vllm_server.metrics_url)
    async with httpx.AsyncClient(timeout=10.0) as c:
        s0 = await _moved(h, c, vllm_server.model, -1.0)
        first = await _ask(executor, vllm_server, "Say hi.")
        s1 = await _moved(h, c, vllm_server.model, s0["prefix_cache"]["queries"])
        second = await _ask(executor, vllm_server, "Say yo.")
        s2 = await _moved(h, c, vllm_server.model, s1["prefix_cache"]["queries"])
    block = h.prefix_cache(s1, s2)  # over the second request: what a step around it writes
    assert block is not None and "problem" not in block, block
    assert block["source"] == "vllm:prefix_cache_hits_total/queries_total"
    assert block["hits"] > 0 and block["queries"] >= block["hits"], block
    assert block["queries"] >= second["usage_input_tokens"] * 0.9, (block, second["usage_input_tokens"])
    assert 0 < block["hit_rate"] <= 1
    whole = h.prefix_cache(s0, s2)  # both requests: the first one's misses are in it
    assert whole is not None and whole["hits"] >= block["hits"] and whole["queries"] > block["queries"]
    for r in (first, second):  # vLLM without --enable-prompt-tokens-details does not say per request
        assert "cached_tokens" in r and r["cached_tokens"] is None and "cached_tokens_source" not in r, r
