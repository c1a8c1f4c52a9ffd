"""The engine's KV allocation predicted from a model config (tui.core.budget.allocation), exactly as vLLM v1 sizes it,
and the side-by-side comparison with the engine's own figures (agree / disagree + the known cause)."""

from __future__ import annotations

import pytest

from tui.core.budget import BudgetError
from tui.core.budget.allocation import AGREE, DISAGREE, UNKNOWN, compare_allocation, predict_allocation
from tui.core.budget.arithmetic import compute_budget
from tui.core.budget.hf_config import inputs_from_hf_config
from tui.core.budgetview import budget_view, capacity_sentence, server_capacity

GIB = 1 << 30

# SmolLM2-135M-Instruct as converted by the vLLM peer (30 layers, 9 heads, 3 KV heads, head_dim 576/9 = 64, bf16)
SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
           "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
           "max_position_embeddings": 8192, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
# Gemma 3 270M: 18 layers, every 6th full attention, the others a 512-token sliding window; 1 KV head of 256
_TYPES = (["sliding_attention"] * 5 + ["full_attention"]) * 3
GEMMA3 = {"model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 640, "num_hidden_layers": 18,
          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 2048,
          "sliding_window": 512, "layer_types": _TYPES, "max_position_embeddings": 32768}


def smol(**kw):
    return inputs_from_hf_config(SMOLLM2, block_size=128, max_seq=2048, **kw)


def gemma(**kw):
    return inputs_from_hf_config(GEMMA3, block_size=128, max_seq=2048, **kw)


def engine(blocks, tokens, conc, space=GIB, dtype="auto", block=128, mml=2048, **kw):
    return {"engine": "vllm", "kv_cache_memory_bytes": space, "block_size": block, "num_blocks": blocks,
            "kv_cache_size_tokens": tokens, "kv_cache_max_concurrency": conc, "cache_dtype": dtype,
            "max_model_len": mml, **kw}


def test_smollm2_one_gib_is_364_blocks_of_128_and_22_75x_at_2048_tokens():
    p = predict_allocation(smol(), GIB)
    assert p.bytes_per_token == 23_040  # 2 x 3 heads x 64 x 2 B x 30 layers
    assert p.page_bytes == 98_304 and p.layout == "uniform" and p.n_groups == 1 and p.layers_per_group == 30
    assert p.num_blocks == 364 and p.tokens == 46_592  # 364 x 128
    assert p.raw_tokens == 46_603  # memory only, before whole blocks
    assert p.blocks_per_request == (16, 16) and p.max_concurrency == (22.75, 22.75) and p.concurrency_text() == "22.75x"


def test_gemma3_hybrid_layout_groups_of_three_and_the_sliding_window_blocks():
    p = predict_allocation(gemma(), GIB, max_num_batched_tokens=2048)
    assert p.layout == "hybrid" and p.layers_per_group == 3 and p.n_groups == 6 and p.padding_layers == 0
    assert p.page_bytes == 128 * 2 * 1 * 256 * 2
    assert p.num_blocks == GIB // (131_072 * 3) == 2730
    # vLLM 0.32 reports int(concurrency x max_model_len) tokens (live: "CPU KV cache size: 55,356 tokens"); older
    # vLLM reported num_blocks // groups x block_size
    assert p.tokens == int(2730 / 101 * 2048) == 55_356 and p.group_tokens == 2730 // 6 * 128 == 58_240
    # 1 full group x cdiv(2048, 128) + 5 sliding groups x (cdiv(min(511 + 2048, 2048), 128) + 1)
    assert p.blocks_per_request == (16 + 5 * 17,) * 2
    assert p.max_concurrency[0] == pytest.approx(2730 / 101)
    small = predict_allocation(gemma(), GIB, max_num_batched_tokens=512)  # min(511 + 512, 2048) = 1023 -> 8 + 1
    assert small.blocks_per_request == (16 + 5 * 9,) * 2


def test_unknown_scheduler_chunk_gives_a_range_never_one_invented_figure():
    p = predict_allocation(gemma(), GIB)
    assert not p.concurrency_exact
    assert p.blocks_per_request == (16 + 5 * (4 + 1), 16 + 5 * 17)  # chunk 1 token .. chunk of max_model_len
    assert "max_num_batched_tokens unknown" in p.concurrency_text()


def test_hybrid_manager_disabled_is_the_uniform_layout_over_all_layers():
    p = predict_allocation(gemma(), GIB, hybrid=False)
    assert p.layout == "hybrid disabled" and p.num_blocks == GIB // (131_072 * 18) == 455
    assert p.tokens == p.group_tokens == 455 * 128
    assert p.max_concurrency[0] == pytest.approx(455 / 16)


def test_group_size_heuristic_pads_near_equal_counts_to_the_larger():
    cfg = {**GEMMA3, "num_hidden_layers": 25,
           "layer_types": ["sliding_attention"] * 12 + ["full_attention"] * 13}
    p = predict_allocation(inputs_from_hf_config(cfg, block_size=16, max_seq=4096), GIB)
    assert p.layers_per_group == 13 and p.n_groups == 2 and p.padding_layers == 1
    cfg = {**GEMMA3, "num_hidden_layers": 8, "layer_types": ["sliding_attention"] * 5 + ["full_attention"] * 3}
    p = predict_allocation(inputs_from_hf_config(cfg, block_size=16, max_seq=4096), GIB)
    assert p.layers_per_group == 3 and p.n_groups == 3 and p.padding_layers == 1  # 5 sw -> 2 groups of 3


def test_no_kv_space_or_a_bad_chunk_is_an_error_not_a_guess():
    with pytest.raises(BudgetError):
        predict_allocation(smol())
    with pytest.raises(BudgetError):
        predict_allocation(smol(), GIB, max_num_batched_tokens=0)


def test_smollm2_agrees_with_the_engine_and_explains_the_block_rounding():
    c = compare_allocation(smol(), engine(364, 46_592, 22.75))
    assert c.result == AGREE
    assert any("46,603" in x and "364 x 128 = 46,592" in x for x in c.explanations)
    assert dict((r[0], r[3]) for r in c.rows)["blocks"] == AGREE
    # one block off still agrees; two blocks off does not
    assert compare_allocation(smol(), engine(363, 46_464, 22.69)).result == AGREE
    bad = compare_allocation(smol(), engine(362, 46_336, 22.62))
    assert bad.result == DISAGREE and any("cause unknown" in x for x in bad.explanations)


def test_prediction_is_made_for_the_engines_space_block_and_max_model_len():
    c = compare_allocation(smol().replace(max_seq=4096, block_size=16), engine(364, 46_592, 22.75))
    assert c.result == AGREE and c.prediction is not None and c.prediction.max_model_len == 2048
    assert any("max_model_len 2,048" in x for x in c.explanations)


def test_fp8_cache_disagreement_is_explained_by_the_dtype():
    c = compare_allocation(smol(), engine(728, 93_184, 45.5, dtype="fp8_e4m3"))
    assert c.result == DISAGREE
    assert any(x.startswith("dtype:") and "fp8_e4m3" in x for x in c.explanations)


def test_gemma3_engine_with_hybrid_manager_off_is_explained_by_the_hybrid_layout():
    c = compare_allocation(gemma(), engine(455, 58_240, 28.4375), max_num_batched_tokens=2048)
    assert c.result == DISAGREE
    assert any(x.startswith("hybrid layout: the engine caches the 15 sliding-window layers as full attention")
               for x in c.explanations)


# what the live vLLM 0.32 (CPU) states for Gemma 3 270M with 1 GiB, blocks of 128, max_model_len 2048
GEMMA3_LIVE = dict(blocks=2730, tokens=55_356, conc=27.029702970297027)


def test_gemma3_hybrid_engine_agrees_and_the_old_formula_is_named_too_high():
    c = compare_allocation(gemma(), engine(**GEMMA3_LIVE), max_num_batched_tokens=2048)
    assert c.result == AGREE
    text = " ".join(c.explanations)
    assert "reads 170 sequences" in text and "27.03" in text  # 2730 x 128 // 2048 = 170 vs the engine's 27.03


def test_gemma3_without_the_scheduler_chunk_is_a_range_and_the_engine_figure_names_the_chunk_it_implies():
    c = compare_allocation(gemma(), engine(**GEMMA3_LIVE))
    assert c.result == AGREE and c.prediction is not None and not c.prediction.concurrency_exact
    rows = {r[0]: r for r in c.rows}
    assert rows["max concurrency (2,048 tokens)"][1] == "27.03-66.59"
    # 101 blocks per request: 5 sliding groups of cdiv(min(511 + chunk, 2048), 128) + 1 = 17 -> chunk >= 1410
    assert any("max_num_batched_tokens 1,410 or more (101 blocks per request)" in x for x in c.explanations)
    assert any("older vLLM reported" in x and "58,240" in x for x in c.explanations)
    # a concurrency the range does not hold disagrees
    assert compare_allocation(gemma(), engine(2730, 55_356, 20.0)).result == DISAGREE


def test_nothing_to_compare_is_unknown():
    assert compare_allocation(smol(), None).result == UNKNOWN
    assert compare_allocation(smol(), {"engine": "vllm", "num_blocks": 364}).result == UNKNOWN
    c = compare_allocation(smol(), {"kv_cache_memory_bytes": GIB})  # space but no figures to compare
    assert c.result == UNKNOWN and c.prediction is not None


def test_data_parallel_figures_are_compared_per_engine():
    c = compare_allocation(smol(), engine(728, 93_184, 45.5, engines=2))
    assert c.result == AGREE


def test_server_capacity_passes_the_engine_figures_through_and_the_sentence_names_its_own_concurrency():
    hdr = {"server_capacity": {**engine(364, 46_592, 22.75), "sequences": 22, "tokens_per_sequence": 2048,
                               "total_tokens": 46_592, "note": "n", "source": "/metrics"}}
    cap = server_capacity(hdr)
    assert cap is not None and cap["kv_cache_memory_bytes"] == GIB and cap["num_blocks"] == 364
    assert cap["kv_cache_max_concurrency"] == 22.75 and cap["cache_dtype"] == "auto"
    assert "maximum concurrency 22.75x for 2,048 tokens" in (capacity_sentence(None, cap) or "")
    view = budget_view(compute_budget(smol()), "model config", hdr)
    assert view.allocation is not None and view.allocation["result"] == AGREE
    assert view.as_dict()["allocation_vs_engine"]["prediction"]["num_blocks"] == 364
    # an older header (no vLLM figures): the same keys as before, no comparison
    old = {"server_capacity": {"engine": "vllm", "sequences": 13, "tokens_per_sequence": 32768, "total_tokens": 432400,
                               "note": "n", "source": "/metrics"}}
    assert set(server_capacity(old) or {}) == {"engine", "sequences", "tokens_per_sequence", "total_tokens", "note",
                                               "source"}
    assert budget_view(compute_budget(smol()), "x", old).allocation is None


def test_server_log_figures_show_beside_the_memory_only_candidate():
    log = {"max_concurrency": 22.75, "concurrency_tokens": 2048, "kv_cache_size_tokens": 46_592,
           "max_num_batched_tokens": None, "source": "vllm.log"}
    view = budget_view(compute_budget(smol(kv_space_bytes=GIB)), "flags", None, None, server_log=log)
    assert view.server_log_line == ("vLLM's startup log: maximum concurrency 22.75x for 2,048 tokens per request, KV "
                                    "cache size 46,592 tokens (vllm.log); memory-only candidate 22.")
    assert budget_view(None, None, None, None, server_log=log).server_log_line.endswith("memory-only candidate unknown (no budget).")
