"""What the server says it actually allocated for the KV cache, beside the budget's prediction.

``server_capacity(...)`` asks the server (with the load generator's own client) and returns the run header's
``server_capacity`` block, or None when the server says nothing usable:

    {"engine": "vllm" | "sglang" | "llamacpp", "sequences": N or None, "tokens_per_sequence": M or None,
     "total_tokens": K or None, "note": "...", "source": "<endpoint>"}

- vLLM: the ``vllm:cache_config_info`` metric (an info gauge whose labels are the cache config, all strings:
  ``num_gpu_blocks``, ``block_size``, ...): total tokens = num_gpu_blocks x block_size, sequences = total //
  max_model_len (``/v1/models``). vLLM sizes the cache from free memory (``--gpu-memory-utilization``).
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
import re
from typing import Any

_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

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


def parse_vllm_metrics(text: str, max_model_len: int | None = None) -> dict | None:
    """The ``vllm:cache_config_info`` lines of a Prometheus text page (one per engine when data-parallel)."""
    if not isinstance(text, str):
        return None
    blocks_total = 0
    block_size = None
    engines = 0
    for line in text.splitlines():
        if not line.startswith("vllm:cache_config_info{"):
            continue
        labels = dict(_LABEL.findall(line[len("vllm:cache_config_info"):line.rfind("}") + 1]))
        blocks = _pos_int(labels.get("num_gpu_blocks"))
        size = _pos_int(labels.get("block_size"))
        if blocks is None or size is None:
            continue
        if block_size is not None and size != block_size:
            return None  # engines disagree on the block size: do not guess
        block_size = size
        blocks_total += blocks
        engines += 1
    if not engines or block_size is None:
        return None
    total = blocks_total * block_size
    per_seq = _pos_int(max_model_len)
    note = VLLM_NOTE
    if engines > 1:
        note += f"; summed over {engines} engines (data parallel)"
    if per_seq is None:
        note += "; max_model_len unknown, so no sequence count"
    return _result("vllm", total // per_seq if per_seq else None, per_seq, total, note,
                   "/metrics vllm:cache_config_info")


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


__all__ = ["server_capacity", "parse_llamacpp_props", "parse_vllm_metrics", "parse_sglang_server_info",
           "describe_capacity"]
