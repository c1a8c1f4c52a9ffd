"""What the server says it actually allocated for the KV cache, beside the budget's prediction.

``server_capacity(...)`` asks the server (with the load generator's own client) and returns the run header's
``server_capacity`` block, or None when the server says nothing usable:

    {"engine": "vllm" | "sglang" | "llamacpp", "sequences": N or None, "tokens_per_sequence": M or None,
     "total_tokens": K or None, "note": "...", "source": "<endpoint>"}

- vLLM: the ``vllm:cache_config_info`` metric (an info gauge whose labels are the cache config, all strings:
  ``num_gpu_blocks``, ``block_size``, ``kv_cache_memory_bytes``, ``kv_cache_size_tokens``,
  ``kv_cache_max_concurrency``, ``cache_dtype``): sequences = floor(kv_cache_max_concurrency), the engine's own
  figure (hybrid sliding-window layouts make num_gpu_blocks x block_size / max_model_len several times too high);
  total tokens = kv_cache_size_tokens; without those labels (older vLLM) total = num_gpu_blocks x block_size and
  sequences = total // max_model_len (``/v1/models``), with a note. The block also carries the allocation figures
  (``VLLM_KEYS``: None where the page lacks them). vLLM sizes the cache from free memory
  (``--gpu-memory-utilization``) or, on the CPU, ``VLLM_CPU_KVCACHE_SPACE``.
- SGLang: ``/get_server_info`` (server args + scheduler info): ``max_total_num_tokens`` (the KV pool in tokens,
  sized from ``--mem-fraction-static``), ``context_length`` (or ``max_model_len`` from ``/v1/models``),
  ``max_running_requests``.
- llama.cpp: ``/props``: ``total_slots`` and ``default_generation_settings.n_ctx`` (the context of one slot).
  Its context is what the operator set with ``-c`` (split across ``-np`` slots), not derived from free memory.

The parsers are pure functions of what the server answered; nothing is invented: a missing figure stays None.
No Textual; httpx only through the client handed in.
"""

from __future__ import annotations

import asyncio
from typing import Any

LLAMACPP_NOTE = ("llama.cpp: total_slots x n_ctx per slot; the context size is set by the operator (-c, shared by the "
                 "-np slots), not derived from free memory: it is what the server was told to allocate")
VLLM_NOTE = "vLLM: num_gpu_blocks x block_size, sized by vLLM from free GPU memory (--gpu-memory-utilization)"
SGLANG_NOTE = "SGLang: max_total_num_tokens, the KV pool sized by SGLang from free GPU memory (--mem-fraction-static)"


def _pos_int(v: Any) -> int | None:
    """A positive whole number from an int, a float or a numeric string (labels are strings); else None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            return None
    if isinstance(v, (int, float)) and v == v and v not in (float("inf"), float("-inf")) and v > 0 and v == int(v):
        return int(v)
    return None


def _result(engine: str, sequences: int | None, per_seq: int | None, total: int | None, note: str,
            source: str) -> dict | None:
    if sequences is None and per_seq is None and total is None:
        return None
    return {"engine": engine, "sequences": sequences, "tokens_per_sequence": per_seq, "total_tokens": total,
            "note": note, "source": source}


def parse_llamacpp_props(props: Any) -> dict | None:
    """llama-server ``/props``: slots and per-slot context."""
    if not isinstance(props, dict):
        return None
    slots = _pos_int(props.get("total_slots"))
    dgs = props.get("default_generation_settings")
    n_ctx = _pos_int(dgs.get("n_ctx")) if isinstance(dgs, dict) else None
    if n_ctx is None:
        n_ctx = _pos_int(props.get("n_ctx"))
    total = slots * n_ctx if slots is not None and n_ctx is not None else None
    return _result("llamacpp", slots, n_ctx, total, LLAMACPP_NOTE, "/props")


VLLM_CONCURRENCY_NOTE = ("vLLM: sequences = floor(kv_cache_max_concurrency), the engine's own figure (requests of "
                         "max_model_len tokens its KV blocks hold; hybrid sliding-window layouts need fewer blocks per "
                         "layer group than num_gpu_blocks x block_size / max_model_len suggests)")
VLLM_OLD_NOTE = ("vLLM: num_gpu_blocks x block_size / max_model_len (the engine states no kv_cache_max_concurrency: "
                 "too high for hybrid sliding-window layouts), sized by vLLM from free GPU memory "
                 "(--gpu-memory-utilization)")

#: the ``server_capacity`` keys vLLM adds (None where the page lacks them)
VLLM_KEYS = ("kv_cache_memory_bytes", "block_size", "num_blocks", "kv_cache_size_tokens", "kv_cache_max_concurrency",
             "cache_dtype", "max_model_len", "engines", "prefix_caching")


def _pos_float(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v.strip()) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) and f > 0 else None


def parse_vllm_metrics(text: str, max_model_len: int | None = None) -> dict | None:
    """The ``vllm:cache_config_info`` lines of a Prometheus text page (one per engine when data-parallel).

    Sequences: floor(kv_cache_max_concurrency) summed over engines, the engine's own figure; when no engine
    states it, num_gpu_blocks x block_size // max_model_len as before, with a note saying so. Also the
    allocation figures (``VLLM_KEYS``): ``kv_cache_memory_bytes`` per engine (None when engines differ),
    ``num_blocks`` and ``kv_cache_size_tokens`` summed over engines."""
    if not isinstance(text, str):
        return None
    blocks_total = 0
    block_size = None
    engines = 0
    memory: set[int | None] = set()
    dtypes: set[str | None] = set()
    caching: set[bool | None] = set()  # the label enable_prefix_caching ("True"/"False"), per engine
    tokens: list[int | None] = []
    concurrency: list[float | None] = []
    from tui.sources.metrics import parse_labeled  # the one Prometheus text parser

    for name, labels, _value in parse_labeled(text):
        if name != "vllm:cache_config_info":
            continue
        blocks = _pos_int(labels.get("num_gpu_blocks"))
        size = _pos_int(labels.get("block_size"))
        if blocks is None or size is None:
            continue
        if block_size is not None and size != block_size:
            return None  # engines disagree on the block size: do not guess
        block_size = size
        blocks_total += blocks
        engines += 1
        memory.add(_pos_int(labels.get("kv_cache_memory_bytes")))
        dtype = labels.get("cache_dtype")
        dtypes.add(dtype if dtype and dtype != "None" else None)
        pc = labels.get("enable_prefix_caching")
        caching.add(True if pc == "True" else False if pc == "False" else None)
        tokens.append(_pos_int(labels.get("kv_cache_size_tokens")))
        concurrency.append(_pos_float(labels.get("kv_cache_max_concurrency")))
    if not engines or block_size is None:
        return None
    total = blocks_total * block_size
    per_seq = _pos_int(max_model_len)
    stated = None if None in concurrency else sum(c for c in concurrency if c is not None)
    stated_tokens = None if None in tokens else sum(t for t in tokens if t is not None)
    if stated is not None:
        note = VLLM_CONCURRENCY_NOTE
        seqs: int | None = int(stated)  # floor of a positive figure
        if per_seq is None:
            note += "; max_model_len unknown (not in /v1/models)"
    else:
        note = VLLM_OLD_NOTE
        seqs = total // per_seq if per_seq else None
        if per_seq is None:
            note += "; max_model_len unknown, so no sequence count"
    if engines > 1:
        note += f"; summed over {engines} engines (data parallel)"
    out = _result("vllm", seqs, per_seq, stated_tokens or total, note, "/metrics vllm:cache_config_info")
    if out is None:
        return None
    out.update({
        "kv_cache_memory_bytes": memory.pop() if len(memory) == 1 else None,
        "block_size": block_size,
        "num_blocks": blocks_total,
        "kv_cache_size_tokens": stated_tokens,
        "kv_cache_max_concurrency": stated,
        "cache_dtype": dtypes.pop() if len(dtypes) == 1 else None,
        "max_model_len": per_seq,
        "engines": engines,
        # the server's prefix caching as its engine states it (`select` holds candidates to one cache policy)
        "prefix_caching": caching.pop() if len(caching) == 1 else None,
    })
    return out


def parse_sglang_server_info(info: Any, max_model_len: int | None = None) -> dict | None:
    """SGLang ``/get_server_info``: server args, scheduler info and ``internal_states``, merged in one object."""
    if not isinstance(info, dict):
        return None
    total = _pos_int(info.get("max_total_num_tokens"))
    states = info.get("internal_states")
    first = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    if total is None:
        total = _pos_int(first.get("max_total_num_tokens"))
    per_seq = _pos_int(info.get("context_length")) or _pos_int(max_model_len)
    running = _pos_int(info.get("max_running_requests")) or _pos_int(first.get("max_running_requests"))
    note = SGLANG_NOTE
    if running is not None:
        note += f"; max_running_requests {running}"
    if total is not None and per_seq is None:
        note += "; context length unknown, so no sequence count"
    seqs = total // per_seq if total is not None and per_seq else None
    return _result("sglang", seqs, per_seq, total, note, "/get_server_info")


async def server_capacity(root: str, server: dict | None, client: Any, headers: dict | None = None,
                          metrics_url: str | None = None, timeout: float = 5.0) -> dict | None:
    """Ask the server what it allocated. ``server`` is ``tui.sources.metrics.server_info``'s answer (engine,
    max_model_len). Never raises; None when nothing usable came back."""
    server = server or {}
    engine = server.get("engine")
    max_len = server.get("max_model_len")
    hdrs = dict(headers or {})

    async def get(path_or_url: str) -> Any:
        url = path_or_url if "://" in path_or_url else root + path_or_url
        try:
            r = await client.get(url, headers=hdrs, timeout=timeout)
        except Exception:
            return None
        if r.status_code != 200:
            return None
        return r

    async def llama() -> dict | None:
        r = await get("/props")
        try:
            return parse_llamacpp_props(r.json()) if r is not None else None
        except ValueError:
            return None

    async def vllm() -> dict | None:
        r = await get(metrics_url or "/metrics")
        return parse_vllm_metrics(r.text, max_len) if r is not None else None

    async def sglang() -> dict | None:
        for path in ("/get_server_info", "/server_info"):
            r = await get(path)
            if r is None:
                continue
            try:
                got = parse_sglang_server_info(r.json(), max_len)
            except ValueError:
                continue
            if got is not None:
                got["source"] = path
                return got
        return None

    probes = {"llamacpp": llama, "vllm": vllm, "sglang": sglang}
    try:
        if engine in probes:
            return await probes[engine]()
        if engine:  # another engine (TGI, Ollama): it reports no allocation we know how to read
            return None
        for got in await asyncio.gather(vllm(), sglang(), llama()):
            if got is not None:
                return got
    except Exception:
        return None
    return None


def describe_capacity(cap: dict | None) -> str:
    """One line: "the server allocated room for 4 sequences of 2048 tokens (8192 tokens; llama.cpp ...)"."""
    if not cap:
        return "the server reports no KV allocation (unknown)"
    seqs, per, total = cap.get("sequences"), cap.get("tokens_per_sequence"), cap.get("total_tokens")
    if seqs is not None and per is not None:
        what = f"room for {seqs} sequences of {per} tokens"
    elif total is not None:
        what = f"room for {total} tokens"
    else:
        what = f"{seqs} sequences" if seqs is not None else "an unknown amount"
    extra = f"{total} tokens in all; " if total is not None and seqs is not None and per is not None else ""
    return f"the server allocated {what} ({extra}{cap.get('note', '')}; from {cap.get('source', '?')})"


# ------------------------------------------------------------------ the served model (issue 35, "Identity")

MAX_LISTED_MODELS = 50


def _text(v: Any, limit: int = 200) -> str | None:
    """A bounded string from the server (data, never markup: the writers escape it), or None."""
    return v.strip()[:limit] if isinstance(v, str) and v.strip() else None


def parse_server_identity(*, props: Any = None, models: Any = None, model_info: Any = None, tgi_info: Any = None,
                          version: Any = None, claimed: str | None = None) -> dict:
    """The run header's ``server_identity`` block from what the server answered (each argument a parsed JSON body
    or None): ``{"model", "models", "engine", "build", "quantization", "source", "params", "layers",
    "context_train", "context", "slots", "model_size_bytes", "root", "model_file"}``. ``model`` is the model the requests reach:
    the listed id that names ``claimed`` (the ``--model`` sent), else the only model listed or loaded (llama.cpp
    serves its one model whatever name a request carries), else None with every listed id in ``models``.
    Nothing is invented: a figure the server does not state is None."""
    from tui.core.identity import same_model

    out: dict[str, Any] = {"model": None, "models": [], "engine": None, "build": None, "quantization": None,
                           "source": None, "params": None, "layers": None, "context_train": None, "context": None,
                           "slots": None, "model_size_bytes": None, "root": None, "model_file": None}
    entries = []
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        entries = [m for m in models["data"] if isinstance(m, dict) and _text(m.get("id"))]
    ids = [t for t in (_text(m.get("id")) for m in entries) if t][:MAX_LISTED_MODELS]
    out["models"] = ids
    owners = {m.get("owned_by") for m in entries}
    for owner in ("vllm", "sglang", "llamacpp"):
        if owner in owners:
            out["engine"] = owner
    chosen: dict | None = None
    if claimed:
        chosen = next((m for m in entries if same_model(str(m.get("id")), claimed)), None)
    if chosen is None and len(entries) == 1:
        chosen = entries[0]
    if chosen is not None:
        out["model"], out["source"] = _text(chosen.get("id")), "/v1/models"
        out["root"] = _text(chosen.get("root"))
        out["context"] = _pos_int(chosen.get("max_model_len"))
        meta = chosen.get("meta")
        if isinstance(meta, dict):  # llama.cpp: the GGUF's own figures
            out["params"] = _pos_int(meta.get("n_params"))
            out["layers"] = _pos_int(meta.get("n_layer"))
            out["context_train"] = _pos_int(meta.get("n_ctx_train"))
            out["model_size_bytes"] = _pos_int(meta.get("size"))
            out["quantization"] = _text(meta.get("ftype"))
            out["context"] = out["context"] or _pos_int(meta.get("n_ctx"))
            out["source"] = "/v1/models (meta)"
    if isinstance(props, dict) and ("build_info" in props or "default_generation_settings" in props):
        out["engine"] = "llamacpp"
        out["build"] = _text(props.get("build_info"))
        out["quantization"] = _text(props.get("model_ftype")) or out["quantization"]
        out["slots"] = _pos_int(props.get("total_slots"))
        dgs = props.get("default_generation_settings")
        if isinstance(dgs, dict):
            out["context"] = _pos_int(dgs.get("n_ctx")) or out["context"]
        loaded = _text(props.get("model_alias")) or _text(props.get("model_path"))
        if out["model"] is None and loaded and (not ids or len(ids) == 1):
            out["model"], out["source"] = loaded, "/props"
        if _text(props.get("model_path")):
            out["model_file"] = _text(props.get("model_path"))
    if isinstance(model_info, dict) and _text(model_info.get("model_path")):  # SGLang /get_model_info
        out["engine"] = out["engine"] or "sglang"
        if out["model"] is None and (not ids or len(ids) == 1):
            out["model"], out["source"] = _text(model_info.get("model_path")), "/get_model_info"
    if isinstance(tgi_info, dict) and _text(tgi_info.get("model_id")):  # TGI /info
        out["engine"] = out["engine"] or "tgi"
        out["build"] = out["build"] or _text(tgi_info.get("version"))
        out["quantization"] = out["quantization"] or _text(tgi_info.get("model_dtype"))
        if out["model"] is None:
            out["model"], out["source"] = _text(tgi_info.get("model_id")), "/info"
    if isinstance(version, dict) and out["build"] is None:
        out["build"] = _text(version.get("version"))
    return out


async def server_identity(root: str, client: Any, headers: dict | None = None, claimed: str | None = None,
                          api_base: str | None = None, timeout: float = 5.0) -> dict:
    """Ask the server which model it serves (``/v1/models``, llama.cpp ``/props``, SGLang ``/get_model_info``, TGI
    ``/info``, ``/version``) and return :func:`parse_server_identity`'s block. Never raises: what did not answer
    stays None (the block's ``source`` None: the server stated no model)."""
    hdrs = dict(headers or {})

    async def get_json(url: str) -> Any:
        try:
            r = await client.get(url, headers=hdrs, timeout=timeout)
            if r.status_code != 200:
                return None
            return r.json()
        except Exception:
            return None

    try:
        props, models, model_info, tgi_info, version = await asyncio.gather(
            get_json(root + "/props"), get_json((api_base or root + "/v1") + "/models"),
            get_json(root + "/get_model_info"), get_json(root + "/info"), get_json(root + "/version"))
    except Exception:
        props = models = model_info = tgi_info = version = None
    return parse_server_identity(props=props, models=models, model_info=model_info, tgi_info=tgi_info,
                                 version=version, claimed=claimed)


__all__ = ["server_capacity", "parse_llamacpp_props", "parse_vllm_metrics", "parse_sglang_server_info",
           "describe_capacity", "VLLM_KEYS", "parse_server_identity", "server_identity"]
