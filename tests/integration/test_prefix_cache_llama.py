"""Cached prompt tokens from the real peer (issue 23): llama-server + Gemma 3 270M with its prompt cache on.

Two streamed chat requests share a system prompt of about 200 tokens (``cache_prompt: true``, 8 output tokens).
Their streams go through the load generator's own reader (``RequestExecutor.stream``, the stream interpreter) and
``request_record``: the second request's record says how many prompt tokens llama.cpp served from its cache, from
its own ``timings.cache_n``, and that is at least half the shared prefix's tokens as the server's ``/tokenize``
counts them (the chat template adds a few around it; no timing assertion). The first request's record carries a
figure too (the server says it, 0 or more), and the second's never exceeds its prompt.
"""

from __future__ import annotations

import json
from time import perf_counter, time

import httpx

from tui.core.redact import Scrubber
from tui.sources.load.executor import Req, RequestExecutor, request_record
from tui.sources.load.stream import CACHED_LLAMA

PREFIX = " ".join(f"Rule {i}: when asked about subject {i}, reply with one short polite sentence." for i in range(14))


async def _one(executor: RequestExecutor, base_url: str, question: str) -> dict:
    body = {"messages": [{"role": "system", "content": "prefix-cache test. " + PREFIX},
                         {"role": "user", "content": question}],
            "max_tokens": 8, "stream": True, "stream_options": {"include_usage": True}, "cache_prompt": True}
    req = Req("prefix-" + question[:8], "measure", 1.0, 1, None, 0, 8, question, perf_counter())
    async with httpx.AsyncClient(timeout=120.0) as client:  # a fresh connection: llama-server closes each one
        req.t_sent = perf_counter()
        async with client.stream("POST", base_url + "/v1/chat/completions", content=json.dumps(body),
                                 headers={"Content-Type": "application/json"}) as resp:
            req.status = resp.status_code
            assert resp.status_code == 200
            await executor.stream(req, resp)
    offset = time() - perf_counter()
    rec, *_ = request_record(req, lambda t: t + offset)
    assert rec["complete"] is True, rec.get("error_detail")
    return rec


async def test_second_request_records_cache_n_close_to_the_shared_prefix(llama_server):
    async with httpx.AsyncClient(timeout=60.0) as c:
        prefix_tokens = len((await c.post(llama_server.base_url + "/tokenize",
                                          json={"content": "prefix-cache test. " + PREFIX})).json()["tokens"])
    assert 150 <= prefix_tokens <= 400, prefix_tokens  # "about 200 tokens"
    executor = RequestExecutor(None, llama_server.base_url + "/v1/chat/completions", "", chat=True,  # type: ignore[arg-type]
                               model=None, ignore_eos=True, read_timeout=120.0, token_offsets=False,
                               scrub=Scrubber(()), say=lambda s: None)
    first = await _one(executor, llama_server.base_url, "What is two plus two?")
    second = await _one(executor, llama_server.base_url, "Name one colour.")
    for r in (first, second):
        assert isinstance(r["cached_tokens"], int) and r["cached_tokens_source"] == CACHED_LLAMA, r
        assert r["cached_tokens"] <= r["usage_input_tokens"], r  # prompt_tokens counts the cached ones too
    assert second["cached_tokens"] >= prefix_tokens // 2, (second["cached_tokens"], prefix_tokens)
    assert second["cached_tokens"] > first["cached_tokens"]
