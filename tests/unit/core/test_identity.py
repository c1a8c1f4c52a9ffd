"""tui.core.identity: what a run header says it measured, read one way everywhere."""

from __future__ import annotations

import json
from pathlib import Path

from tui.core.identity import Identity, differences, identity_of, model_mismatch, same_model

ROOT = Path(__file__).resolve().parents[3]


def _header(path: Path) -> dict:
    with path.open() as fh:
        return json.loads(fh.readline())


def test_bundled_run_identity_is_read_from_its_header():
    ident = identity_of(_header(ROOT / "sample_logs" / "default.jsonl"))
    assert ident.engine == "llamacpp"
    assert ident.served_model == "/tmp/llm/gemma-3-270m-q4_k_m.gguf"
    assert ident.gpu == "none"
    assert model_mismatch(ident) is None
    assert "engine llamacpp" in ident.line() and "GPU none" in ident.line()


def test_a_claimed_model_the_server_does_not_serve_is_named():
    hdr = {"target": {"model": "gpt-4o-2024-08-06"},
           "environment": {"server": {"engine": "llamacpp", "model": "/m/gemma-3-270m-q4_k_m.gguf"}}}
    ident = identity_of(hdr)
    why = model_mismatch(ident)
    assert why is not None and "gpt-4o-2024-08-06" in why and "gemma-3-270m" in why
    assert "claimed" in ident.line()


def test_server_identity_block_wins_over_environment():
    hdr = {"target": {"model": "a"}, "server_identity": {"model": "b", "engine": "vllm"},
           "environment": {"server": {"engine": "llamacpp", "model": "a"}}}
    ident = identity_of(hdr)
    assert (ident.served_model, ident.engine) == ("b", "vllm")


def test_loose_model_names_and_differences():
    assert same_model("/tmp/x/Gemma-3-270M.gguf", "gemma-3-270m")
    assert not same_model("llama-3-8b", "gemma-3-270m")
    a = Identity(claimed_model="m", served_model="m", engine="llamacpp", gpu="none", host="h")
    b = Identity(claimed_model="m", served_model="other", engine="vllm", gpu=None, host="h")
    assert differences(a, b) == ["model", "engine"]  # gpu unknown on one side: not a difference here
    assert differences(a, a) == []


def test_no_header_is_unknown_not_guessed():
    ident = identity_of(None)
    assert ident == Identity()
    assert ident.line().startswith("model unknown")


# ------------------------------------------------------------------ issue 35: the budget against the served model


import random  # noqa: E402

import pytest  # noqa: E402

from tui.core.budget import compute_budget, inputs_from_hf_config  # noqa: E402
from tui.core.identity import (  # noqa: E402
    PARAMS_TOLERANCE,
    BudgetFacts,
    budget_facts,
    budget_vs_served,
    evidence_identity,
    fact_differences,
    identity_problems,
    server_facts,
    target_is_local,
)

GEMMA_SID = {"model": "/m/gemma-3-270m-q4_k_m.gguf", "engine": "llamacpp", "params": 268098176,
             "source": "/v1/models (meta)"}
NO_GPU = {"gpu": "none", "reason": "NVML library not found"}


def _hdr(url="http://127.0.0.1:8080", gpu=None, sid=GEMMA_SID, model="/m/gemma-3-270m-q4_k_m.gguf"):
    return {"target": {"url": url, "model": model}, "server_identity": sid,
            "environment": {"gpu": gpu if gpu is not None else NO_GPU}}


def test_a_llama_3_8b_budget_on_24_gib_for_a_gemma_270m_run_without_gpu_is_named():
    """Finding 7: the budget of another model, and a GPU budget for a run whose header says no GPU."""
    cfg = json.loads((ROOT / "tests" / "configs" / "llama-3-8b.json").read_text())
    budget = compute_budget(inputs_from_hf_config(cfg, gpu_gib=24.0))
    ident = evidence_identity([("run.jsonl", _hdr())], budget)
    text = " ".join(ident["problems"])
    assert "8.03B parameters" in text and "268M" in text and "another model" in text
    assert "GPU budget (24 GiB)" in text and "no GPU" in text
    # the served model's own numbers agree with a Gemma 270M budget: nothing to say
    gcfg = json.loads((ROOT / "tests" / "configs" / "gemma-3-270m.json").read_text())
    ok = evidence_identity([("run.jsonl", _hdr(gpu={"gpu": "nvidia", "devices": [
        {"name": "NVIDIA L4", "memory_total": 24 * 2**30}]}))], compute_budget(inputs_from_hf_config(gcfg, gpu_gib=24.0)))
    assert ok["problems"] == [] and any("agree" in c for c in ok["budget"]["checked"])


def test_params_are_compared_within_the_tolerance_for_the_whole_family():
    """Seeded family: any budget/served parameter ratio outside 1/T..T is a contradiction, inside it none."""
    rng = random.Random(35)
    for _ in range(500):
        served = int(10 ** rng.uniform(7, 12))
        ratio = 10 ** rng.uniform(-2, 2)
        check = budget_vs_served(identity_of(_hdr(sid={"model": "m", "params": served})),
                                 BudgetFacts(params=served * ratio))
        outside = not 1 / PARAMS_TOLERANCE <= (served * ratio) / served <= PARAMS_TOLERANCE
        assert bool(check.problems) == outside, (served, ratio, check)


def test_nothing_comparable_is_not_checked_never_guessed():
    vllm = {"model": "Qwen/Qwen2.5-0.5B-Instruct", "engine": "vllm", "source": "/v1/models"}
    check = budget_vs_served(identity_of(_hdr(sid=vllm, gpu={})), BudgetFacts(params=8e9, layers=32, gpu_gib=80))
    assert check.problems == () and any("states no parameter or layer count" in n for n in check.not_checked)
    assert any("records no GPU facts" in n for n in check.not_checked)  # header gpu block present but empty


def test_the_gpu_is_only_the_servers_when_the_target_is_on_this_machine():
    remote = identity_of(_hdr(url="https://llm.example.com/v1"))
    assert target_is_local(remote) is False
    check = budget_vs_served(remote, BudgetFacts(gpu_gib=80))
    assert check.problems == () and "sampled on the client's machine" in check.not_checked[0]
    for url in ("http://localhost:8000", "http://[::1]:8000", "http://127.0.0.2:1"):
        assert target_is_local(identity_of(_hdr(url=url))) is True
    small = identity_of(_hdr(gpu={"gpu": "nvidia", "devices": [{"name": "NVIDIA L4", "memory_total": 24 * 2**30}]}))
    assert "has 24.0 GiB" in budget_vs_served(small, BudgetFacts(gpu_gib=80)).problems[0]
    assert budget_vs_served(small, BudgetFacts(gpu_gib=24)).problems == ()
    assert budget_vs_served(identity_of(_hdr()), BudgetFacts(gpu_gib=None)).problems == ()  # a KV-space budget


def test_a_kv_space_budget_divides_no_gpu():
    from tui.core.budget import BudgetInputs

    b = compute_budget(BudgetInputs(params=268e6, kv_space_bytes=2**30))
    facts = budget_facts(b)
    assert facts is not None and facts.gpu_gib is None and facts.params == 268e6


def test_the_claimed_model_not_served_is_a_problem_and_facts_compare_servers_not_urls():
    assert identity_problems(identity_of(_hdr(model="gpt-4o-2024-08-06")))
    a = server_facts({"engine": "llamacpp", "build": "b1", "model": "/x/Gemma.gguf", "slots": 4, "context_tokens": 2048})
    b = server_facts({"engine": "llamacpp", "build": "b1", "model": "/y/gemma.gguf", "slots": 4, "n_ctx_per_slot": 2048})
    assert fact_differences(a, b) == ([], ["engine", "build", "model", "context", "slots"])
    c = server_facts({"engine": "llamacpp", "build": "b2", "model": "gemma.gguf"})
    assert fact_differences(a, c)[0] == ["build"]


@pytest.mark.parametrize("gpu, local, problem", [
    (NO_GPU, True, True), (NO_GPU, False, False), ({"gpu": "not sampled (--no-gpu)"}, True, False)])
def test_gpu_budget_against_the_header(gpu, local, problem):
    url = "http://127.0.0.1:1" if local else "http://10.1.2.3:8000"
    check = budget_vs_served(identity_of(_hdr(url=url, gpu=gpu)), BudgetFacts(gpu_gib=24))
    assert bool(check.problems) is problem
