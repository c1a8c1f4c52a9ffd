"""Where the memory the budget divides comes from: never a default nobody gave (issue 22).

A budget described by a model config or flags but without its memory input (no ``--gpu-gib``, no
``--kv-cache-gib``) is a :class:`MemoryMissing`: the KV figures per token and per sequence are known, the
candidate is not. :func:`resolve` completes it from what the run header says, in this order:

1. NVML: the total memory of the GPU the run uses (``environment.gpu.devices`` of the run header, written by
   ``tui.sources.gpu``), when the server is on this machine and the GPUs NVML sees are of one size;
2. the engine's own KV space (``server_capacity.kv_cache_memory_bytes``, vLLM's ``cache_config_info``): the cache
   budget is that space (``BudgetInputs.kv_space_bytes``);
3. otherwise the budget stays unknown, with a hint naming the missing input and no candidate.

Pure functions; no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tui.core.budget.arithmetic import compute_budget, kv_bytes_per_token_per_layer, kv_per_seq_bytes
from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.results import BudgetResult
from tui.core.budget.vocab import GIB, BudgetError

#: the flags that give the memory input
MEMORY_FLAGS = "--gpu-gib GIB (one GPU's memory) or --kv-cache-gib GIB (the KV cache space itself)"

#: how the engine's own KV memory in use is labelled wherever it shows
ENGINE_KV_LABEL = "engine's own figure ({engine} kv_cache_usage_perc x kv_cache_memory_bytes)"

_ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp", "llama.cpp": "llama.cpp",
                 "tgi": "TGI", "trtllm": "TensorRT-LLM"}


def engine_name(engine: Any) -> str:
    """'vllm' -> 'vLLM'; unknown -> 'the engine'."""
    text = str(engine or "").strip()
    return _ENGINE_NAMES.get(text.lower(), text) or "the engine"


@dataclass(frozen=True)
class MemoryMissing:
    """A budget whose memory input nobody gave: everything else is known (``inputs``, from ``origin``).

    ``inputs`` keeps the dataclass defaults for gpu_gib / margin_gib: they are NOT used for any figure shown.
    ``margin_given``: --margin-gib was given (else the margin, when a GPU size is found, is the default allowance,
    labelled as such)."""

    inputs: BudgetInputs
    origin: str
    margin_given: bool = False
    #: the flags gave these (else the engine's own max_model_len / block_size replace the defaults when known)
    max_seq_given: bool = False
    block_size_given: bool = False

    @property
    def kv_bytes_per_token(self) -> int:
        return kv_bytes_per_token_per_layer(self.inputs) * self.inputs.layers

    @property
    def kv_per_seq_bytes(self) -> int:
        return kv_per_seq_bytes(self.inputs)

    def figures(self) -> str:
        """'23,040 B of KV per token, 0.044 GiB per 2048-token sequence (per GPU)'."""
        return (f"{self.kv_bytes_per_token:,} B of KV per token, {self.kv_per_seq_bytes / GIB:.3f} GiB "
                f"({self.kv_per_seq_bytes:,} B) per {self.inputs.max_seq}-token sequence (per GPU)")

    def hint(self, why: str) -> str:
        """The unknown budget's hint: which input is missing, why it was not found, what the config gives."""
        return (f"budget unknown: the memory input is missing ({why}); give {MEMORY_FLAGS}. "
                f"Known: {self.figures()}; no memory-only candidate without the memory")

    def as_dict(self, why: str) -> dict:
        return {"memory_input": "missing", "why": why, "origin": self.origin, "model": self.inputs.model,
                "max_seq": self.inputs.max_seq, "kv_bytes_per_token": self.kv_bytes_per_token,
                "kv_per_seq_bytes": self.kv_per_seq_bytes, "memory_only_candidate": None,
                "hint": self.hint(why)}


WHY_NO_HEADER = "no run header (yet) to read the GPU's size or the engine's KV space from"


@dataclass(frozen=True)
class Resolution:
    """What :func:`resolve` found: a budget with its memory labelled, or the reason there is none."""

    budget: BudgetResult | None
    origin: str | None  # where the other inputs came from (pending.origin)
    memory: str | None  # "KV space 1.00 GiB: vLLM's own kv_cache_memory_bytes (run header)"
    hint: str | None  # when budget is None
    why: str | None = None  # when budget is None


def _positive_int(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    if not math.isfinite(f) or f <= 0 or not f.is_integer():
        return None
    return int(v)


def _is_local(url: Any) -> bool | None:
    """True: the target is on this machine (loopback); False: elsewhere; None: not known."""
    if not isinstance(url, str) or not url:
        return None
    try:
        host = (urlsplit(url if "//" in url else "//" + url).hostname or "").lower()
    except ValueError:
        return None
    if not host:
        return None
    return host == "localhost" or host.startswith("127.") or host == "::1"


def gpu_for_budget(header: Mapping | None) -> tuple[int | None, str]:
    """(bytes of the GPU the run uses, its label) from the run header's NVML reading, or (None, why not).

    The server must be on this machine (a loopback target) for this machine's GPUs to be its own; several GPUs
    count when they are of one size (tensor parallel: the budget is per GPU), never a guess between sizes."""
    if not header:
        return None, WHY_NO_HEADER
    env = header.get("environment")
    gpu = env.get("gpu") if isinstance(env, Mapping) else None
    devices = gpu.get("devices") if isinstance(gpu, Mapping) else None
    if not isinstance(devices, list) or not devices:
        reason = gpu.get("reason") if isinstance(gpu, Mapping) else None
        return None, "no GPU in the run header" + (f" ({reason})" if reason else "")
    target = header.get("target")
    local = _is_local(target.get("url") if isinstance(target, Mapping) else None)
    if local is False:
        return None, "the GPUs NVML sees are this machine's; the server is on another host"
    sized = [(d.get("index"), d.get("name"), _positive_int(d.get("memory_total")))
             for d in devices if isinstance(d, Mapping)]
    totals = {t for _, _, t in sized if t}
    if len(totals) != 1 or any(t is None for _, _, t in sized):
        listed = ", ".join(f"{i}: {n or 'GPU'} {(t or 0) / GIB:.1f} GiB" for i, n, t in sized)
        return None, f"NVML sees GPUs of different or unknown sizes ({listed}); which one serves is not known"
    total = totals.pop()
    names = {n for _, n, _ in sized if n}
    name = f" ({names.pop()})" if len(names) == 1 else ""
    which = f"device {sized[0][0]}" if len(sized) == 1 else f"each of the {len(sized)} GPUs"
    return total, f"GPU {total / GIB:.2f} GiB: NVML total of {which}{name}"


def engine_kv_space(header: Mapping | None) -> tuple[int | None, str]:
    """(bytes of KV cache the engine allocated, its label) from the run header's server_capacity, or (None, why)."""
    if not header:
        return None, WHY_NO_HEADER
    cap = header.get("server_capacity")
    if not isinstance(cap, Mapping):
        return None, "the server reported no KV cache space"
    nbytes = _positive_int(cap.get("kv_cache_memory_bytes"))
    if nbytes is None:
        return None, "the server reported no KV cache space"
    who = engine_name(cap.get("engine"))
    return nbytes, f"KV space {nbytes / GIB:.2f} GiB: {who}'s own kv_cache_memory_bytes (run header server_capacity)"


def engine_geometry(pending: MemoryMissing, header: Mapping | None) -> tuple[MemoryMissing, str]:
    """``pending`` with the sequence length and block size the engine states (``server_capacity.max_model_len``,
    ``block_size``: vLLM's cache_config_info) where the flags gave none: the engine's own figures, not the
    defaults (4096 tokens, blocks of 16); and the words saying so ("" when nothing was taken)."""
    cap = header.get("server_capacity") if header else None
    if not isinstance(cap, Mapping):
        return pending, ""
    changes: dict[str, int] = {}
    said = []
    mml, block = _positive_int(cap.get("max_model_len")), _positive_int(cap.get("block_size"))
    if mml is not None and not pending.max_seq_given:
        changes["max_seq"] = mml
        said.append(f"max_seq {mml:,} = the engine's max_model_len")
    if block is not None and not pending.block_size_given:
        changes["block_size"] = block
        said.append(f"blocks of {block} = the engine's block_size")
    if not changes:
        return pending, ""
    try:
        inputs = pending.inputs.replace(**changes)
    except BudgetError:  # an engine figure the budget refuses (e.g. over its bounds): keep the flags' inputs
        return pending, ""
    return dataclasses.replace(pending, inputs=inputs), "; " + ", ".join(said) + " (--max-seq / --block-size not given)"


def resolve(pending: MemoryMissing, header: Mapping | None) -> Resolution:
    """The budget ``pending`` describes, with the memory from NVML, else the engine's KV space; else unknown.
    The engine's max_model_len and block size stand in for the flags not given (said in the memory label)."""
    pending, geometry = engine_geometry(pending, header)
    gpu_bytes, gpu_label = gpu_for_budget(header)
    if gpu_bytes:
        inputs = pending.inputs.replace(gpu_gib=gpu_bytes / GIB)
        margin = (f"runtime margin {inputs.margin_gib:.2f} GiB: --margin-gib" if pending.margin_given else
                  f"runtime margin {inputs.margin_gib:.2f} GiB: the default allowance, not measured (--margin-gib)")
        memory = f"{gpu_label}; {margin}{geometry}"
        return Resolution(compute_budget(inputs), pending.origin, memory, None)
    kv_bytes, kv_label = engine_kv_space(header)
    if kv_bytes:
        result = compute_budget(pending.inputs.replace(kv_space_bytes=kv_bytes))
        return Resolution(result, pending.origin, kv_label + geometry, None)
    why = gpu_label if gpu_label == WHY_NO_HEADER else f"{gpu_label}; {kv_label}"
    return Resolution(None, None, None, pending.hint(why), why)


def memory_label(budget: Any, origin: str | None) -> str | None:
    """Where a given budget's memory came from, e.g. 'GPU 80.00 GiB: flags: --gpu-gib' (the runtime margin, an
    allowance, is among the budget's stated assumptions)."""
    inputs = getattr(budget, "inputs", None)
    if not isinstance(inputs, BudgetInputs) or not origin:
        return None
    where = origin
    if inputs.kv_space_bytes:
        return f"KV space {inputs.kv_space_bytes / GIB:.2f} GiB: {where}"
    return f"GPU {inputs.gpu_gib:.2f} GiB: {where}"
