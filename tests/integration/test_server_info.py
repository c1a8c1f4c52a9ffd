"""What the server says it allocated: parsers for vLLM, SGLang and llama.cpp, and the probe.

The vLLM and SGLang shapes follow their public sources: vLLM's ``vllm:cache_config_info`` is an info gauge
(value 1) whose labels are the CacheConfig fields as strings (``num_gpu_blocks="None"`` before profiling, an
``engine`` label per data-parallel engine); SGLang's ``/get_server_info`` merges the server args
(``context_length``, ``max_running_requests``, both possibly null), the scheduler info (``max_total_num_tokens``,
``max_req_input_len``), ``internal_states`` and ``version``. llama.cpp is checked against the real llama-server.
"""

from __future__ import annotations

import asyncio

import httpx

from tui.sources.server_info import (
    describe_capacity,
    parse_llamacpp_props,
    parse_sglang_server_info,
    parse_vllm_metrics,
    server_capacity,
)

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",cpu_offload_gb="0",\
enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",\
num_cpu_blocks="None",num_gpu_blocks="27025",num_gpu_blocks_override="None",prefix_caching_hash_algo="builtin",\
sliding_window="None",swap_space="4",swap_space_bytes="4294967296"} 1.0
"""

SGLANG_INFO = {
    "model_path": "Qwen/Qwen2.5-0.5B-Instruct",
    "tokenizer_path": "Qwen/Qwen2.5-0.5B-Instruct",
    "context_length": None,
    "mem_fraction_static": 0.88,
    "max_running_requests": None,
    "max_total_tokens": None,
    "chunked_prefill_size": 8192,
    "max_total_num_tokens": 1038162,
    "max_req_input_len": 32761,
    "internal_states": [{"attention_backend": "flashinfer", "max_running_requests": 4096,
                         "last_gen_throughput": 0.0, "memory_usage": {"weight": 0.96, "kvcache": 11.88}}],
    "version": "0.4.9",
}

LLAMA_PROPS = {
    "default_generation_settings": {"id": 0, "n_ctx": 2048, "speculative": False, "is_processing": False},
    "total_slots": 4,
    "model_path": "/tmp/gemma.gguf",
    "chat_template": "...",
    "build_info": "b0-unknown",
}


def test_vllm_cache_config_info():
    # an older vLLM page (no kv_cache_max_concurrency label): the old formula, with a note saying so
    cap = parse_vllm_metrics(VLLM_METRICS, max_model_len=32768)
    assert cap == {"engine": "vllm", "sequences": 27025 * 16 // 32768, "tokens_per_sequence": 32768,
                   "total_tokens": 27025 * 16, "note": cap["note"], "source": "/metrics vllm:cache_config_info",
                   "kv_cache_memory_bytes": None, "block_size": 16, "num_blocks": 27025, "kv_cache_size_tokens": None,
                   "kv_cache_max_concurrency": None, "cache_dtype": "auto", "max_model_len": 32768, "engines": 1,
                   "prefix_caching": True}
    assert "gpu-memory-utilization" in cap["note"] and "states no kv_cache_max_concurrency" in cap["note"]


def test_vllm_without_max_model_len_gives_tokens_but_no_sequence_count():
    cap = parse_vllm_metrics(VLLM_METRICS)
    assert cap["sequences"] is None and cap["total_tokens"] == 432400 and "no sequence count" in cap["note"]


def test_vllm_data_parallel_engines_are_summed_and_unprofiled_blocks_are_unknown():
    line = [x for x in VLLM_METRICS.splitlines() if x.startswith("vllm:cache_config_info")][0]
    two = VLLM_METRICS + line.replace('engine="0"', 'engine="1"') + "\n"
    cap = parse_vllm_metrics(two, max_model_len=4096)
    assert cap["total_tokens"] == 2 * 27025 * 16 and "2 engines" in cap["note"]
    assert parse_vllm_metrics(VLLM_METRICS.replace('num_gpu_blocks="27025"', 'num_gpu_blocks="None"')) is None
    assert parse_vllm_metrics("vllm:num_requests_running 0\n") is None
    assert parse_vllm_metrics("") is None


def test_sglang_server_info():
    cap = parse_sglang_server_info(SGLANG_INFO, max_model_len=32768)
    assert cap["engine"] == "sglang" and cap["total_tokens"] == 1038162
    assert cap["tokens_per_sequence"] == 32768 and cap["sequences"] == 1038162 // 32768
    assert "max_running_requests 4096" in cap["note"]
    explicit = dict(SGLANG_INFO, context_length=8192)
    assert parse_sglang_server_info(explicit)["sequences"] == 1038162 // 8192
    assert parse_sglang_server_info({"version": "0.4.9"}) is None
    assert parse_sglang_server_info(["not", "a", "dict"]) is None


def test_llamacpp_props_and_the_operator_note():
    cap = parse_llamacpp_props(LLAMA_PROPS)
    assert (cap["sequences"], cap["tokens_per_sequence"], cap["total_tokens"]) == (4, 2048, 8192)
    assert "set by the operator" in cap["note"] and "not derived from free memory" in cap["note"]
    assert parse_llamacpp_props({"build_info": "x"}) is None
    assert parse_llamacpp_props({"total_slots": True}) is None  # a bool is not a count


def test_describe_capacity():
    assert describe_capacity(None).endswith("(unknown)")
    text = describe_capacity(parse_llamacpp_props(LLAMA_PROPS))
    assert text.startswith("the server allocated room for 4 sequences of 2048 tokens (8192 tokens in all;")


def _probe(handler, server):
    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            return await server_capacity("http://127.0.0.1:1", server, client)

    return asyncio.run(go())


def test_probe_reads_the_engine_it_was_told_and_survives_errors():
    seen = []

    def handler(request):
        seen.append(request.url.path)
        if request.url.path == "/metrics":
            return httpx.Response(200, text=VLLM_METRICS)
        if request.url.path == "/get_server_info":
            return httpx.Response(200, json=SGLANG_INFO)
        return httpx.Response(404)

    assert _probe(handler, {"engine": "vllm", "max_model_len": 4096})["sequences"] == 27025 * 16 // 4096
    assert seen == ["/metrics"]
    assert _probe(handler, {"engine": "sglang"})["total_tokens"] == 1038162
    assert _probe(handler, {"engine": "tgi"}) is None  # reports nothing we read
    assert _probe(handler, {})["engine"] == "vllm"  # unknown engine: every probe is tried

    def broken(request):
        if request.url.path == "/props":
            return httpx.Response(200, text="{not json")
        raise httpx.ConnectError("refused")

    assert _probe(broken, {}) is None
    assert _probe(broken, {"engine": "llamacpp"}) is None


def test_real_llama_server_props(llama_server):
    """The real llama-server: /props gives slots and per-slot context, and the run header carries them."""

    async def go():
        async with httpx.AsyncClient() as client:
            return await server_capacity(llama_server.base_url, {"engine": "llamacpp"}, client)

    cap = asyncio.run(go())
    assert cap is not None and cap["engine"] == "llamacpp" and cap["source"] == "/props"
    assert cap["sequences"] >= 1 and cap["tokens_per_sequence"] >= 256
    assert cap["total_tokens"] == cap["sequences"] * cap["tokens_per_sequence"]
