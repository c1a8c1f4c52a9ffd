"""`servewatch budget --kv-cache-gib`, and `report` / `accept` with --config on a run whose header carries vLLM's
allocation: prediction and allocation side by side (text + JSON), --server-log beside the memory-only candidate;
bad values of every new flag: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.cli import main
from tui.samples import sample_path

SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
           "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
           "max_position_embeddings": 8192, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
CAP = {"engine": "vllm", "sequences": 22, "tokens_per_sequence": 2048, "total_tokens": 46592, "note": "vLLM",
       "source": "/metrics vllm:cache_config_info", "kv_cache_memory_bytes": 1 << 30, "block_size": 128,
       "num_blocks": 364, "kv_cache_size_tokens": 46592, "kv_cache_max_concurrency": 22.75, "cache_dtype": "auto",
       "max_model_len": 2048, "engines": 1}
LOG = ("INFO CPU KV cache size: 46,592 tokens, Maximum concurrency for 2,048 tokens per request: 22.75x\n")


@pytest.fixture
def config(tmp_path) -> Path:
    d = tmp_path / "smollm2"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(SMOLLM2))
    return d / "config.json"


def vllm_run(tmp_path, cap=CAP) -> Path:
    lines = Path(sample_path("default.jsonl")).read_text(encoding="utf-8").splitlines(keepends=True)
    hdr = json.loads(lines[0])
    hdr["server_capacity"] = cap
    p = tmp_path / "vllm.jsonl"
    p.write_text(json.dumps(hdr) + "\n" + "".join(lines[1:]), encoding="utf-8")
    return p


def test_budget_kv_cache_gib_predicts_the_smollm2_allocation(config, capsys):
    rc = main(["budget", "--config", str(config), "--kv-cache-gib", "1", "--block-size", "128", "--max-seq", "2048"])
    out = capsys.readouterr().out
    assert rc == 0
    for want in ("kv_bytes_per_token=23,040 B", "blocks=364", "kv_cache_tokens=46,592", "max_concurrency=22.75x",
                 "memory_only_tokens=46,603", "cache_budget=1.00 GiB", "the KV space given (1,073,741,824 B)",
                 "memory_only_candidate=22 sequences"):
        assert want in out, want


def test_budget_json_carries_the_allocation_and_still_loads_back(config, capsys, tmp_path):
    saved = tmp_path / "b.json"
    rc = main(["budget", "--config", str(config), "--kv-cache-gib", "1", "--block-size", "128", "--max-seq", "2048",
               "--json", "--out", str(saved)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["kv_allocation"]["num_blocks"] == 364 and doc["kv_allocation"]["tokens"] == 46592
    assert doc["kv_allocation"]["max_concurrency"] == [22.75, 22.75]
    assert main(["budget", "--budget", str(saved)]) == 0
    assert "memory_only_candidate=22 sequences" in capsys.readouterr().out


def test_budget_without_kv_space_prints_no_allocation(config, capsys):
    assert main(["budget", "--config", str(config), "--gpu-gib", "24", "--block-size", "128"]) == 0
    assert "KV allocation predicted" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, says", [
    (["--kv-cache-gib", "lots"], "--kv-cache-gib must be a number"),
    (["--kv-cache-gib", "0"], "--kv-cache-gib must be > 0"),
    (["--kv-cache-gib", "inf"], "--kv-cache-gib must be a finite number"),
    (["--max-num-batched-tokens", "-3"], "--max-num-batched-tokens must be a whole number >= 1"),
    (["--max-num-batched-tokens", "2k"], "--max-num-batched-tokens must be a number"),
])
def test_bad_allocation_flags_are_one_line_and_exit_2(config, capsys, argv, says):
    assert main(["budget", "--config", str(config), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_saved_budget_cannot_take_a_kv_space(config, capsys, tmp_path):
    saved = tmp_path / "b.json"
    assert main(["budget", "--config", str(config), "--gpu-gib", "24", "--out", str(saved)]) == 0
    capsys.readouterr()
    assert main(["budget", "--budget", str(saved), "--kv-cache-gib", "1"]) == 2
    assert "cannot be combined with --kv-cache-gib" in capsys.readouterr().err


def test_report_config_shows_prediction_and_allocation_side_by_side(config, tmp_path, capsys):
    run = vllm_run(tmp_path)
    main(["report", "--details", str(run), "--config", str(config), "--json"])
    rep = json.loads(capsys.readouterr().out)
    alloc = rep["budget_view"]["allocation_vs_engine"]
    assert alloc["result"] == "agree"
    rows = {r["figure"]: r for r in alloc["rows"]}
    assert rows["blocks"]["predicted"] == rows["blocks"]["engine"] == "364"
    assert rows["KV cache size (tokens)"]["predicted"] == "46,592"
    main(["report", "--details", str(run), "--config", str(config)])
    text = capsys.readouterr().out
    assert "KV allocation, predicted from the config vs the engine's own figures: AGREE" in text
    assert "maximum concurrency 22.75x for 2,048 tokens" in text


def test_report_and_accept_show_the_server_log_beside_the_candidate(config, tmp_path, capsys):
    run = vllm_run(tmp_path)
    log = tmp_path / "vllm.log"
    log.write_text(LOG)
    main(["report", "--details", str(run), "--config", str(config), "--server-log", str(log), "--json"])
    bv = json.loads(capsys.readouterr().out)["budget_view"]
    assert bv["server_log"]["max_concurrency"] == 22.75
    assert bv["server_log_vs_candidate"].startswith("vLLM's startup log: maximum concurrency 22.75x for 2,048 tokens")
    out = tmp_path / "acc"
    main(["accept", "--records", str(run), "--config", str(config), "--server-log", str(log), "--out", str(out)])
    capsys.readouterr()
    md = (out / "acceptance.md").read_text()
    doc = json.loads((out / "acceptance.json").read_text())
    assert "Server log: vLLM's startup log: maximum concurrency 22.75x" in md
    assert "KV allocation, predicted from the config vs the engine's own figures: **AGREE**" in md
    assert "| blocks | 364 | 364 | agree |" in md
    assert doc["budget"]["allocation_vs_engine"]["result"] == "agree"


def test_a_server_log_that_cannot_be_read_is_bad_usage(config, tmp_path, capsys):
    run = vllm_run(tmp_path)
    for cmd in (["report", "--details", str(run)], ["accept", "--records", str(run), "--out", str(tmp_path / "a")]):
        assert main([*cmd, "--server-log", str(tmp_path / "missing.log")]) == 2
        err = capsys.readouterr().err
        assert "--server-log: cannot read" in err and len(err.strip().splitlines()) == 1


def test_live_refuses_an_unreadable_server_log_before_any_load(tmp_path, capsys):
    rc = main(["live", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--requests", "1",
               "--record", str(tmp_path / "r.jsonl"), "--server-log", str(tmp_path / "missing.log")])
    err = capsys.readouterr().err
    assert rc == 2 and "--server-log: cannot read" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()


def test_a_block_size_nobody_gave_is_said(config, capsys):
    """`budget --kv-cache-gib` without --block-size: the prediction uses 16-token blocks and says so."""
    assert main(["budget", "--config", str(config), "--kv-cache-gib", "1", "--max-seq", "2048"]) == 0
    out = capsys.readouterr().out
    assert "blocks=2,912" in out and "--block-size not given: blocks of 16 tokens assumed" in out
    assert main(["budget", "--config", str(config), "--kv-cache-gib", "1", "--max-seq", "2048",
                 "--block-size", "128"]) == 0
    out = capsys.readouterr().out
    assert "blocks=364" in out and "--block-size not given" not in out
