"""What each serving engine says about itself, for the in-test servers (``fault_server``, ``fake_openai``): the
``/v1/models`` list and the engine's own pages (llama.cpp ``/props``, vLLM ``/version``, SGLang ``/get_model_info``,
TGI ``/info``), shaped like the real ones (llama.cpp: as llama-server b6xxx answers; vLLM 0.9: ``owned_by`` "vllm",
``root``, ``max_model_len``; SGLang: ``owned_by`` "sglang"; TGI: ``/info`` ``model_id``, ``model_dtype``).

``pages(engine, served, params=None, ctx=2048, extra=())`` -> ``{path: JSON body}``; ``extra``: more model ids listed
(a vLLM serving LoRA adapters beside its base model).
"""

from __future__ import annotations

from collections.abc import Sequence

ENGINES = ("llamacpp", "vllm", "sglang", "tgi")


def pages(engine: str, served: str, *, params: int | None = None, ctx: int = 2048,
          extra: Sequence[str] = ()) -> dict[str, dict]:
    ids = [served, *extra]
    if engine == "llamacpp":
        meta = {"vocab_type": 1, "n_vocab": 262144, "n_ctx": ctx, "n_ctx_train": 32768, "n_embd": 640,
                "n_params": params, "size": 246587904, "ftype": "Q4_K - Medium"}
        return {
            "/v1/models": {"object": "list", "data": [
                {"id": served, "object": "model", "owned_by": "llamacpp", "aliases": [served], "meta": meta}]},
            "/props": {"total_slots": 1, "model_alias": served, "model_path": served, "model_ftype": "Q4_K - Medium",
                       "build_info": "b6000-test", "default_generation_settings": {"n_ctx": ctx, "params": {}}},
        }
    if engine == "vllm":
        return {
            "/v1/models": {"object": "list", "data": [
                {"id": i, "object": "model", "owned_by": "vllm", "root": served if i == served else f"/lora/{i}",
                 "parent": None if i == served else served, "max_model_len": ctx} for i in ids]},
            "/version": {"version": "0.9.1"},
        }
    if engine == "sglang":
        return {
            "/v1/models": {"object": "list", "data": [{"id": i, "object": "model", "owned_by": "sglang",
                                                       "max_model_len": ctx} for i in ids]},
            "/get_model_info": {"model_path": served, "tokenizer_path": served, "is_generation": True},
        }
    if engine == "tgi":
        return {
            "/v1/models": {"object": "list", "data": [{"id": served, "object": "model", "owned_by": served}]},
            "/info": {"model_id": served, "model_sha": "0123abc", "model_dtype": "torch.float16", "version": "2.4.0",
                      "max_input_tokens": ctx - 1, "max_total_tokens": ctx},
        }
    raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
