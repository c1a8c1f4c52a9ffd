"""The budget checked against the real vLLM's KV allocation (vLLM 0.32, CPU): SmolLM2 (uniform layout: 23,040 B per
token, 364 blocks of 128 = 46,592 tokens from 1 GiB, 22.75x at 2,048 tokens) through `servewatch run` + `report
--config`, and Gemma 3 270M (sliding-window layers: vLLM's hybrid KV layout) read from the live /metrics page and
startup log. Few requests, small outputs; the Gemma server is stopped when its test ends."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx

from tui.cli import main
from tui.core.budget.allocation import AGREE, compare_allocation, predict_allocation
from tui.core.budget.hf_config import inputs_from_hf_config
from tui.sources.metrics import server_info
from tui.sources.server_info import server_capacity
from tui.sources.server_log import read_server_log

GIB = 1 << 30


def _capacity(base_url: str) -> dict | None:
    async def go() -> dict | None:
        async with httpx.AsyncClient() as client:
            info = await server_info(base_url, client=client)
            return await server_capacity(base_url, info, client)

    return asyncio.run(go())


def test_smollm2_prediction_agrees_with_the_engine_through_run_and_report(vllm_server, tmp_path, capsys):
    config = vllm_server.model_dir / "config.json"
    rec = str(tmp_path / "smol.jsonl")
    rc = main(["run", "--url", vllm_server.base_url, "--model", vllm_server.model, "--concurrency", "1",
               "--requests", "3", "--input-tokens", "16", "--output-tokens", "8", "--no-gpu",
               "--api-key-env", "SW_TEST_NO_KEY", "--record", rec])
    capsys.readouterr()
    assert rc in (0, 1, 3)
    with open(rec, encoding="utf-8") as fh:
        cap = json.loads(fh.readline())["server_capacity"]
    # the engine's own figures, recorded in the run header
    assert cap["engine"] == "vllm" and cap["kv_cache_memory_bytes"] == GIB and cap["block_size"] == 128
    assert cap["num_blocks"] == 364 and cap["kv_cache_size_tokens"] == 46_592
    assert cap["kv_cache_max_concurrency"] == 22.75 and cap["sequences"] == 22 and cap["max_model_len"] == 2048

    main(["report", rec, "--config", str(config), "--server-log", str(vllm_server.log_path), "--json"])
    bv = json.loads(capsys.readouterr().out)["budget_view"]
    alloc = bv["allocation_vs_engine"]
    assert alloc["result"] == AGREE, alloc["text"]
    pred = alloc["prediction"]
    assert (pred["bytes_per_token"], pred["num_blocks"], pred["tokens"]) == (23_040, 364, 46_592)
    assert pred["max_concurrency"] == [22.75, 22.75]
    # the startup line, parsed from the server's own log, beside the memory-only candidate
    assert bv["server_log"]["max_concurrency"] == 22.75 and bv["server_log"]["kv_cache_size_tokens"] == 46_592
    assert bv["server_log"]["concurrency_tokens"] == 2048
    assert "memory-only candidate" in bv["server_log_vs_candidate"]

    main(["budget", "--config", str(config), "--kv-cache-gib", "1", "--block-size", "128", "--max-seq", "2048"])
    out = capsys.readouterr().out
    assert "blocks=364" in out and "kv_cache_tokens=46,592" in out and "max_concurrency=22.75x" in out


def test_gemma3_hybrid_layout_read_from_the_engine_and_predicted(vllm_gemma_server, tmp_path, capsys):
    server = vllm_gemma_server
    try:
        cap = _capacity(server.base_url)
        log = read_server_log(server.log_path)
    finally:
        server.stop()  # nothing else needs it: its 3.5 GB go back now
    assert cap is not None and cap["kv_cache_memory_bytes"] == GIB and cap["block_size"] == 128, cap
    inputs = inputs_from_hf_config(json.loads((server.model_dir / "config.json").read_text()), block_size=128,
                                   max_seq=server.max_model_len)
    assert (inputs.layers, inputs.sliding_layers, inputs.sliding_window) == (18, 15, 512)
    mnbt = log["max_num_batched_tokens"]
    check = compare_allocation(inputs, cap, mnbt)
    text = "\n".join(check.lines())
    print(text, file=sys.stderr)  # the figures the report shows (the note records them)
    # the engine's own concurrency, not num_gpu_blocks x block_size / max_model_len
    stated = cap["kv_cache_max_concurrency"]
    assert stated is not None and cap["sequences"] == int(stated), cap
    assert cap["num_blocks"] * 128 // server.max_model_len > 2 * stated, cap  # the old reading: several times higher
    assert log["max_concurrency"] == round(stated, 2) and log["kv_cache_size_tokens"] == cap["kv_cache_size_tokens"]
    # vLLM's hybrid grouping: 3 full + 15 sliding layers -> 6 groups of 3 layers, pages of 128 x 2 x 1 x 256 x 2 B
    hybrid = predict_allocation(inputs, GIB, max_num_batched_tokens=mnbt)
    assert (hybrid.layers_per_group, hybrid.n_groups, hybrid.num_blocks) == (3, 6, 2730)
    assert check.result == AGREE, text
    assert cap["num_blocks"] == 2730, cap
    # vLLM 0.32's KV cache size: int(concurrency x max_model_len), not num_blocks // groups x block_size (58,240)
    assert cap["kv_cache_size_tokens"] == int(stated * server.max_model_len) != hybrid.group_tokens, cap
    if mnbt is None:  # the log does not say the scheduler chunk: a range, and the chunk the engine's figure implies
        assert "max_num_batched_tokens unknown" in hybrid.concurrency_text()
        assert any("is what the prediction gives for max_num_batched_tokens" in x for x in check.explanations), text

    run = tmp_path / "gemma.jsonl"  # the report of a run whose header carries this live allocation
    from tui.samples import sample_path

    lines = open(sample_path("default.jsonl"), encoding="utf-8").read().splitlines(keepends=True)
    hdr = json.loads(lines[0])
    hdr["server_capacity"] = cap
    run.write_text(json.dumps(hdr) + "\n" + "".join(lines[1:]), encoding="utf-8")
    main(["report", str(run), "--config", str(server.model_dir / "config.json"), "--server-log",
          str(server.log_path), "--json"])
    bv = json.loads(capsys.readouterr().out)["budget_view"]
    assert bv["allocation_vs_engine"]["result"] == AGREE
    assert bv["server_capacity"]["sequences"] == int(stated)
