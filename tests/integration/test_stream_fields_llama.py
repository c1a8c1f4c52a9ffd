"""The stream fields the load generator writes (issue 21), against the real peer: llama-server + Gemma 3 270M.

llama.cpp answers ``stream_options: {"include_usage": true}`` with a final usage chunk, so every request records
the server's counts beside the chunks the client saw. A short run (4 requests at concurrency 1, 16 output tokens
with ignore_eos, per-token offsets on) checks, per request:

- ``usage_output_tokens`` is exactly the 16 tokens asked (ignore_eos) and ``output_tokens`` keeps its meaning;
- the chunks seen agree with the server's count within the stated tolerance: llama.cpp sends one chunk per
  token, except that a token ending inside a multi-byte UTF-8 character can be held back and sent with the next
  one, so ``usage_output_tokens - CHUNK_TOLERANCE <= output_chunks <= usage_output_tokens``;
- ``t_last_token`` and the gap statistics are exactly what the record's own per-token offsets give.
No wall-clock bound: the server is compared with itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from tui.sources.load import LoadConfig, run_load
from tui.sources.recorder import Recorder

CHUNK_TOLERANCE = 2  # tokens of 16 that may be merged into a neighbour's chunk (split UTF-8 characters)


async def test_llama_server_usage_last_token_and_gaps_agree_with_the_chunks(llama_server, tmp_path: Path):
    out = tmp_path / "fields.jsonl"
    cfg = LoadConfig(url=llama_server.base_url, levels=[1], requests=4, input_tokens=(16, 16),
                     output_tokens=(16, 16), ignore_eos=True, record=str(out), metrics=False, gpu=False,
                     progress_interval=0, api_key_env=None, read_timeout=120.0, token_offsets=True)
    rec = Recorder(cfg.record)
    try:
        await run_load(cfg, rec.write)
    finally:
        rec.close()
    reqs = [d for d in map(json.loads, out.read_text().splitlines()) if d.get("type") == "request"]
    assert len(reqs) == 4
    for r in reqs:
        assert r["complete"] is True, r.get("error_detail")
        assert r["usage_output_tokens"] == 16 == r["output_tokens"], r  # the server's count, asked with include_usage
        assert r["usage_input_tokens"] == r["input_tokens"] >= 16  # the chat template adds its own tokens
        assert 16 - CHUNK_TOLERANCE <= r["output_chunks"] <= 16, r["output_chunks"]
        assert r["reasoning_chunks"] == 0 and "t_first_reasoning" not in r  # Gemma 3 does not reason
        off = r["token_offsets"]
        assert len(off) == r["output_chunks"]
        assert r["t_first_token"] <= r["t_last_token"] <= r["t_end"]
        assert math.isclose(r["t_last_token"] - r["t_first_token"], off[-1], abs_tol=2e-6)
        gaps = sorted((b - a) * 1000 for a, b in zip(off, off[1:]))
        assert math.isclose(r["itl_max_ms"], gaps[-1], abs_tol=0.01)
        assert math.isclose(r["itl_p50_ms"], gaps[max(1, math.ceil(0.5 * len(gaps) - 1e-12)) - 1], abs_tol=0.01)
        assert math.isclose(r["itl_p95_ms"], gaps[max(1, math.ceil(0.95 * len(gaps) - 1e-12)) - 1], abs_tol=0.01)
        assert 0 <= r["itl_p50_ms"] <= r["itl_p95_ms"] <= r["itl_max_ms"]
        assert r["itl_max_ms"] > 0  # a real decode: consecutive tokens do not all arrive in one read
