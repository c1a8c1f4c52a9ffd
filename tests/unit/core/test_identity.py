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
