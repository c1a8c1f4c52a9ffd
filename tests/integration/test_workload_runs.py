"""Shaped workloads run end to end against the real peers (issue 23): the prefix cache is measured, never assumed.

- llama-server (Gemma 3 270M, its prompt cache on: servewatch sends ``cache_prompt: true`` with shared prefixes):
  a shared-prefix run at concurrency 1 records, on every request after the first, ``cached_tokens`` from llama.cpp's
  own ``timings.cache_n`` at least the shared prefix's length as the server counts it (``/tokenize``) and at most the
  request's prompt; the report's prefix-cache section says so.
- vLLM (SmolLM2-135M on the CPU, prefix caching on by default in V1): a multi-turn session run with a shared prefix
  moves the server's prefix-cache counters (the step end's ``prefix_cache`` block: hits > 0), and each later turn's
  prompt, as the server counts it, holds the previous turn's prompt and answer.

Few requests, short answers; no timing assertion.
"""

from __future__ import annotations

import httpx

from tui.core.lengths import parse_lengths
from tui.core.records import parse_object
from tui.sources.load import LoadConfig, run_load
from tui.sources.load.prompts import PromptBuilder
from tui.sources.load.workload import Workload


def _cfg(url: str, **kw) -> LoadConfig:
    base = dict(url=url, mode="closed", levels=[1.0], warmup=0, gpu=False, api_key_env=None, progress_interval=0,
                read_timeout=120.0, input_tokens=(16, 16), output_tokens=(8, 8), seed=3)
    base.update(kw)
    return LoadConfig(**base)


def _requests(out: list[dict]) -> list[dict]:
    return [d for d in out if d.get("type") == "request" and d.get("phase") == "measure"]


async def _prefix_tokens(base_url: str, text: str) -> int:
    async with httpx.AsyncClient() as c:
        r = await c.post(base_url + "/tokenize", json={"content": text})
        r.raise_for_status()
        return len(r.json()["tokens"])


async def test_shared_prefix_run_records_llama_cache_n_of_the_prefix(llama_server):
    out: list[dict] = []
    cfg = _cfg(llama_server.openai_url, shared_prefix_tokens=192, prefix_groups=1, requests=5, metrics=False)
    summary = await run_load(cfg, out.append)
    reqs = _requests(out)
    assert summary.requests == len(reqs) == 5 and all(r["complete"] for r in reqs), reqs
    hdr = out[0]
    assert hdr["load"]["cache_policy"]["cache_prompt"] is True
    assert hdr["load"]["shared_prefix"] == {"tokens": 192, "groups": 1}
    # the prefix the requests carried, counted by the server itself (the builder's calibration as in the run)
    pb = PromptBuilder.from_state({"method": hdr["load"]["prompt_builder"]["method"],
                                   "tokens_per_word": hdr["load"]["prompt_builder"].get("tokens_per_word", 1.0),
                                   "prefix_tokens": hdr["load"]["prompt_builder"].get("prefix_tokens", 8.0)})
    text = Workload(seed=3, prefix_tokens=192, prefix_groups=1).system_prompt(0, pb)
    prefix = await _prefix_tokens(llama_server.base_url, text)  # about 192 (the builder's calibration)
    assert 150 <= prefix <= 240, prefix
    # the first request may find part of the prefix already cached (the session's server served other tests): it
    # is only asked to say; every later one finds the whole prefix the first left
    first, *later = sorted(reqs, key=lambda r: r["t_sent"])
    assert first["cached_tokens_source"] == "llama.cpp timings.cache_n", first
    for r in later:
        assert r["cached_tokens_source"] == "llama.cpp timings.cache_n", r
        # the whole shared prefix (the template's few tokens before it too), never more than the prompt
        assert 0.9 * prefix <= r["cached_tokens"] <= r["input_tokens"], (prefix, r["cached_tokens"], r["input_tokens"])
    recs = [parse_object(d) for d in reqs]
    assert [r.cached_tokens for r in recs] == [r["cached_tokens"] for r in reqs]  # the reader keeps what was written


async def test_sessions_with_a_shared_prefix_move_vllm_prefix_cache_counters(vllm_server):
    out: list[dict] = []
    cfg = _cfg(vllm_server.openai_url, model=vllm_server.model, turns=parse_lengths("3"), requests=2,
               shared_prefix_tokens=384, prefix_groups=1, metrics=True, metrics_url=vllm_server.metrics_url,
               output_tokens=(12, 12))
    summary = await run_load(cfg, out.append)
    reqs = _requests(out)
    assert summary.requests == len(reqs) == 6 and all(r["complete"] for r in reqs), reqs
    end = next(d for d in out if d.get("type") == "step" and d.get("event") == "end" and d.get("phase") == "measure")
    pc = end.get("prefix_cache")
    assert pc is not None and pc["source"].startswith("vllm:"), end
    assert pc["queries"] > 0 and pc["hits"] > 0, pc  # the shared prefix and the history were served from the cache
    assert end["sessions"]["started"] == 2 and end["sessions"]["completed"] == 2, end["sessions"]
    by: dict[str, list[dict]] = {}
    for r in reqs:
        by.setdefault(r["session"], []).append(r)
    for turns in by.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [1, 2, 3]
        for prev, cur in zip(turns, turns[1:]):
            # the server's count of this turn's prompt holds the previous prompt and the answer it gave
            assert cur["input_tokens"] >= prev["input_tokens"] + prev["output_tokens"], (prev, cur)
            assert cur["context_tokens"] > prev["context_tokens"]
