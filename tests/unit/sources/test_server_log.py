"""vLLM's own figures read by servewatch: its startup log (tui.sources.server_log) and the allocation labels of
``vllm:cache_config_info`` (tui.sources.server_info.parse_vllm_metrics), in the shapes vLLM 0.32 (CPU) writes."""

from __future__ import annotations

import pytest

from tui.sources.server_info import parse_vllm_metrics
from tui.sources.server_log import parse_server_log, read_server_log

CPU_LOG = """\
INFO 12-02 01:20:03 [scheduler.py:220] Chunked prefill is enabled with max_num_batched_tokens=2048.
INFO 12-02 01:20:30 [cpu_worker.py:98] Explicitly set (1.0/20.71) GiB for KV cache on node 0.
\x1b[1;36m(EngineCore pid=77)\x1b[0;0m INFO 12-02 01:20:31 [kv_cache_utils.py:1300] CPU KV cache size: 46,592 tokens, \
Maximum concurrency for 2,048 tokens per request: 22.75x
INFO 12-02 01:20:40 [api_server.py:1] Starting vLLM API server on http://127.0.0.1:8000
"""

GPU_LOG = """\
INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,038,160 tokens
INFO [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 31.68x
"""

# the live page's line (vLLM 0.32 CPU, SmolLM2, 1 GiB): labels as the note records them
SMOL_PAGE = (
    'vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",'
    'gpu_memory_utilization="0.92",kv_cache_max_concurrency="22.75",kv_cache_memory_bytes="1073741824",'
    'kv_cache_size_tokens="46592",model_name="smollm2-135m",num_cpu_blocks="None",num_gpu_blocks="364"} 1.0\n'
)


def test_cpu_log_line_gives_tokens_concurrency_and_the_scheduler_chunk():
    got = parse_server_log(CPU_LOG, "vllm.log")
    assert got == {"max_concurrency": 22.75, "concurrency_tokens": 2048, "kv_cache_size_tokens": 46_592,
                   "max_num_batched_tokens": 2048, "lines": 2, "source": "vllm.log"}


def test_gpu_log_lines_and_a_second_start_wins():
    got = parse_server_log(CPU_LOG + GPU_LOG)
    assert got["kv_cache_size_tokens"] == 1_038_160 and got["max_concurrency"] == 31.68
    assert got["concurrency_tokens"] == 32_768


def test_a_log_without_the_lines_states_nothing():
    got = parse_server_log("INFO starting\nWARNING something\n")
    assert got["lines"] == 0 and got["max_concurrency"] is None and got["kv_cache_size_tokens"] is None


def test_reading_a_file_and_the_errors_it_raises(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_bytes(CPU_LOG.encode() + b"\xff\xfe broken bytes\n")
    assert read_server_log(p)["max_concurrency"] == 22.75
    with pytest.raises(OSError):
        read_server_log(tmp_path / "missing.log")
    with pytest.raises(OSError):
        read_server_log(tmp_path)


def test_cache_config_info_sequences_come_from_the_engines_own_concurrency():
    cap = parse_vllm_metrics(SMOL_PAGE, max_model_len=2048)
    assert cap is not None
    assert cap["sequences"] == 22 and cap["total_tokens"] == 46_592 and cap["tokens_per_sequence"] == 2048
    assert {k: cap[k] for k in ("kv_cache_memory_bytes", "block_size", "num_blocks", "kv_cache_size_tokens",
                                "kv_cache_max_concurrency", "cache_dtype", "max_model_len", "engines")} == {
        "kv_cache_memory_bytes": 1 << 30, "block_size": 128, "num_blocks": 364, "kv_cache_size_tokens": 46_592,
        "kv_cache_max_concurrency": 22.75, "cache_dtype": "auto", "max_model_len": 2048, "engines": 1}
    assert "kv_cache_max_concurrency" in cap["note"]


def test_hybrid_layout_page_is_not_read_as_blocks_times_block_size_over_max_model_len():
    page = SMOL_PAGE.replace('num_gpu_blocks="364"', 'num_gpu_blocks="2730"').replace(
        'kv_cache_max_concurrency="22.75"', 'kv_cache_max_concurrency="27.03"').replace(
        'kv_cache_size_tokens="46592"', 'kv_cache_size_tokens="58240"')
    cap = parse_vllm_metrics(page, max_model_len=2048)
    assert cap is not None and cap["sequences"] == 27  # not 2730 x 128 // 2048 = 170
    assert cap["total_tokens"] == 58_240 and cap["num_blocks"] == 2730


def test_two_engines_sum_and_a_different_space_is_not_one_figure():
    two = SMOL_PAGE + SMOL_PAGE.replace('engine="0"', 'engine="1"').replace(
        'kv_cache_memory_bytes="1073741824"', 'kv_cache_memory_bytes="2147483648"')
    cap = parse_vllm_metrics(two, max_model_len=2048)
    assert cap is not None and cap["sequences"] == 45 and cap["num_blocks"] == 728 and cap["engines"] == 2
    assert cap["kv_cache_memory_bytes"] is None  # engines differ: no single per-engine space


def test_a_log_of_another_engine_start_is_flagged_beside_the_candidate():
    """--server-log of another start (here Gemma's figures beside SmolLM2's engine): shown, and said not to match;
    the same figures as the run's engine: no flag."""
    from tui.core.budgetview import server_log_sentence

    cap = {"kv_cache_max_concurrency": 22.75, "kv_cache_size_tokens": 46592}
    own = {"max_concurrency": 22.75, "concurrency_tokens": 2048, "kv_cache_size_tokens": 46592, "source": "a.log"}
    other = {"max_concurrency": 27.03, "concurrency_tokens": 2048, "kv_cache_size_tokens": 55356, "source": "b.log"}
    assert "NOT THIS RUN'S ENGINE" not in server_log_sentence(22, own, cap)
    line = server_log_sentence(22, other, cap)
    assert "NOT THIS RUN'S ENGINE?" in line and "27.03 in the log, 22.75 from the run's engine" in line
    assert "55,356 in the log, 46,592 from the run's engine" in line
    assert "NOT THIS RUN'S ENGINE" not in server_log_sentence(22, other, None)  # no engine figures to hold it to
