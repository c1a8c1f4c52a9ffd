"""What a run measured, by the facts its header holds: the model claimed (``--model``) and the model the server said
it serves, the engine, its build, the GPU and the host (standard library only).

A header is a claim; this module only reads it the same way everywhere (compare, accept, plan, the report's header
block) so that two views never disagree about what a run was. Every value is a string or None ("unknown" is an honest
answer): nothing here is guessed.

Where the facts are in a servewatch run header (docs/record-format.md):

- claimed model: ``target.model``
- served model: ``server_identity.model`` (written by the load commands from ``/v1/models``, llama.cpp ``/props``,
  vLLM's model card), else ``environment.server.model``, else the only entry of ``environment.server.models``
- engine, build, quantization: ``environment.server.engine`` / ``build`` / ``quantization`` (else
  ``server_capacity.engine`` for the engine)
- GPU: ``environment.gpu.name`` / ``environment.gpu.devices[0].name``; ``"none"`` when the header says no GPU was
  seen (``environment.gpu.gpu == "none"``)
- host: ``environment.hostname`` when written, else ``environment.os`` / ``environment.machine``
- what the server states about the served model (``server_identity``): its parameter count (llama.cpp
  ``/v1/models`` ``meta.n_params``), layer count (where a server states one), training context, where it came from

Beside the reader, the checks that use it, each a pure function of what the files say:

- :func:`model_mismatch` / :func:`identity_problems`: the model claimed is not the model served;
- :func:`budget_vs_served`: a budget's model (parameters, layers) and GPU against the served model and the run
  header's GPU (docs/acceptance.md, "Identity"): a contradiction is named, and where the server states nothing
  comparable the answer is "not checked", never a guess;
- :func:`server_facts` / :func:`fact_differences`: a configuration described by the server's own facts (engine,
  build, model file or name, quantization, context, slots, parameters), for the quality comparison's "candidate
  and baseline are different configurations" rule (never URL strings).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FIELDS", "PARAMS_TOLERANCE", "BudgetCheck", "BudgetFacts", "Identity", "budget_facts", "budget_vs_served",
           "differences", "evidence_identity", "fact_differences", "identity_of", "identity_problems", "model_mismatch", "same_model",
           "server_facts", "target_is_local"]

#: a budget's parameter count and the served model's agree when their ratio is within this factor either way
#: (checkpoint conventions differ: tied or untied embeddings, vision towers, rounding of "8B"); outside it the
#: budget is of another model (Llama-3-8B against Gemma 3 270M is a factor of 30)
PARAMS_TOLERANCE = 1.25
#: a GPU budget larger than the run's own GPU (NVML, same machine) by more than this share contradicts it
GPU_MEMORY_TOLERANCE = 0.05

#: the fields compare/select may refuse on, in the order they are printed
FIELDS = ("model", "engine", "build", "gpu", "host")


def _s(v: Any, limit: int = 200) -> str | None:
    """A short string, or None when ``v`` is not a non-empty string."""
    if isinstance(v, str) and v.strip():
        return v.strip()[:limit]
    return None


def _m(d: Any, key: str) -> Any:
    return d.get(key) if isinstance(d, Mapping) else None


@dataclass(frozen=True, slots=True)
class Identity:
    """What one run says it measured. ``served_model`` is what the server said (None: the run did not ask or the
    file does not say), ``claimed_model`` what the client was told to send."""

    claimed_model: str | None = None
    served_model: str | None = None
    served_models: tuple[str, ...] = ()
    engine: str | None = None
    build: str | None = None
    quantization: str | None = None
    gpu: str | None = None  # "none": the header says no GPU was seen; None: not recorded
    host: str | None = None
    #: what the server states about the served model (``server_identity``; None: not stated)
    params: int | None = None
    layers: int | None = None
    context_train: int | None = None
    source: str | None = None  # the endpoint the served model came from
    target_host: str | None = None  # the host of ``target.url`` (a loopback host: the header's GPU is the server's)
    gpu_memory_gib: float | None = None  # the largest GPU's memory in the header (NVML), GiB
    host_memory_gib: float | None = None  # the client machine's memory (psutil), GiB: a unified-memory budget's check

    def value(self, field: str) -> str | None:
        """The value compared for ``field`` (one of FIELDS): the served model when known, else the claimed one."""
        if field == "model":
            return self.served_model or self.claimed_model
        return getattr(self, field)

    def line(self) -> str:
        """One line: "model gemma-3-270m (served; --model gpt-4o claimed), engine llamacpp b6000, GPU none, host x86_64"."""
        parts = []
        served, claimed = self.served_model, self.claimed_model
        if served and claimed and not same_model(served, claimed, self.served_models):
            parts.append(f"model {served} (served; {claimed} claimed)")
        elif served:
            parts.append(f"model {served} (served)")
        elif claimed:
            parts.append(f"model {claimed} (claimed; the server's own name not recorded)")
        else:
            parts.append("model unknown")
        eng = self.engine or "unknown"
        if self.build:
            eng += f" {self.build}"
        parts.append(f"engine {eng}")
        parts.append(f"GPU {self.gpu or 'unknown'}")
        parts.append(f"host {self.host or 'unknown'}")
        return ", ".join(parts)


def _norm(name: str) -> str:
    """A model name compared loosely: the last path part, lower case, without a .gguf/.bin/.safetensors suffix."""
    base = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    for ext in (".gguf", ".bin", ".safetensors"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def same_model(a: str, b: str, aliases: tuple[str, ...] = ()) -> bool:
    """``a`` and ``b`` name the same model: equal, or equal after ``_norm``, or ``b`` is one of ``aliases``."""
    if a == b or _norm(a) == _norm(b):
        return True
    nb = _norm(b)
    return any(x == b or _norm(x) == nb for x in aliases)


def identity_of(header: Mapping | None) -> Identity:
    """The identity a run header states (an empty Identity for no header)."""
    if not header:
        return Identity()
    target = _m(header, "target")
    env = _m(header, "environment")
    server = _m(env, "server")
    sid = _m(header, "server_identity")
    models_raw = _m(sid, "models") or _m(server, "models")
    models = tuple(x for x in (_s(m) for m in models_raw) if x) if isinstance(models_raw, list) else ()
    served = _s(_m(sid, "model")) or _s(_m(server, "model")) or (models[0] if len(models) == 1 else None)
    engine = _s(_m(sid, "engine")) or _s(_m(server, "engine")) or _s(_m(_m(header, "server_capacity"), "engine"))
    build = _s(_m(sid, "build")) or _s(_m(server, "build"))
    gpu_env = _m(env, "gpu")
    gpu: str | None = None
    if isinstance(gpu_env, Mapping):
        gpu = _s(gpu_env.get("name"))
        devs = gpu_env.get("devices")
        if gpu is None and isinstance(devs, list) and devs:
            gpu = _s(_m(devs[0], "name"))
            if gpu is not None and len(devs) > 1:
                gpu = f"{len(devs)} x {gpu}"
        if gpu is None and gpu_env.get("gpu") == "none":
            gpu = "none"
    host = _s(_m(env, "hostname"))
    if host is None:
        osn, mach = _s(_m(env, "os")), _s(_m(env, "machine"))
        host = " ".join(x for x in (osn, mach) if x) or None
    return Identity(
        claimed_model=_s(_m(target, "model")), served_model=served, served_models=models, engine=engine,
        build=build, quantization=_s(_m(sid, "quantization")) or _s(_m(server, "quantization")), gpu=gpu, host=host,
        params=_pos_int(_m(sid, "params")), layers=_pos_int(_m(sid, "layers")),
        context_train=_pos_int(_m(sid, "context_train")), source=_s(_m(sid, "source")),
        target_host=_host(_m(target, "url")), gpu_memory_gib=_gpu_memory_gib(gpu_env),
        host_memory_gib=(lambda m: None if m is None else m / 2**30)(_pos_int(_m(_m(gpu_env, "host"), "memory_total"))),
    )


def _pos_int(v: Any) -> int | None:
    """A positive whole number (an int, or a float that is one), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        if v != v or v <= 0 or v != int(v) or v > 10**18:
            return None
    except (OverflowError, ValueError):
        return None
    return int(v)


def _host(url: Any) -> str | None:
    if not isinstance(url, str) or not url.strip():
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    return host[:200] if host else None


def _gpu_memory_gib(gpu_env: Any) -> float | None:
    devs = _m(gpu_env, "devices")
    if not isinstance(devs, list):
        return None
    mem = [_pos_int(_m(d, "memory_total")) for d in devs]
    known = [m for m in mem if m is not None]
    return max(known) / 2**30 if known else None


def model_mismatch(ident: Identity) -> str | None:
    """The sentence when the model claimed is not the model the server said it serves (None: they agree, or one of
    them is not known). A server that lists several models and no single served one: the claimed model must be
    one of them."""
    served, claimed = ident.served_model, ident.claimed_model
    if not claimed:
        return None
    if not served:
        listed = ident.served_models
        if not listed or any(same_model(x, claimed) for x in listed):
            return None
        shown = ", ".join(repr(x) for x in listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        return f"the run claims model {claimed!r} but the server lists only {shown}: the claimed model is not served"
    if same_model(served, claimed, ident.served_models):
        return None
    return (f"the run claims model {claimed!r} but the server said it serves {served!r}: the evidence is about the "
            "served model")


def identity_problems(ident: Identity) -> list[str]:
    """Why one run's identity forbids acceptance-grade (empty: nothing found): today the claimed model that is not
    the served one (the run still ran; `report` marks its PASS, `accept` and `plan` exit 3)."""
    why = model_mismatch(ident)
    return [why] if why else []


def target_is_local(ident: Identity) -> bool | None:
    """The target is on this machine (a loopback host: ``localhost``, 127.0.0.0/8, ::1), so the header's GPU
    facts (NVML, sampled where the client ran) are the server's; None when the target host is not recorded."""
    host = ident.target_host
    if not host:
        return None
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """What a memory budget says about the model and the machine: its parameter count, its KV layers (from the
    config or the flags), the GPU memory it divides (None: not a GPU budget, e.g. a KV space given directly) and
    the model name it carries (display only)."""

    params: float | None = None
    layers: int | None = None
    gpu_gib: float | None = None
    model: str | None = None
    #: the budget divides a unified-memory device's share of the system's memory (the device table's `unified`
    #: kind, or `--gpu this-machine`'s `host`, said in the budget's notes): held against the machine's memory, not
    #: against an NVIDIA GPU
    unified: bool = False


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """The budget against the served model and the run header: ``problems`` (each forbids acceptance-grade),
    ``checked`` (what agreed, in words) and ``not_checked`` (what could not be compared, and why)."""

    problems: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    not_checked: tuple[str, ...] = field(default=())

    def lines(self) -> list[str]:
        return ([f"not acceptance-grade: {p}" for p in self.problems] + [f"checked: {c}" for c in self.checked]
                + [f"not checked: {n}" for n in self.not_checked])


def _count(n: float) -> str:
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


def budget_vs_served(ident: Identity, budget: BudgetFacts) -> BudgetCheck:
    """The budget's model against the model the server states it serves, and a GPU budget against the header's GPU.

    - parameters: the budget's count and the server's (llama.cpp ``n_params``) agree within a factor of
      :data:`PARAMS_TOLERANCE`; outside it the budget is of another model;
    - layers: where the server states a layer count, the budget's KV layers must not exceed it;
    - neither stated by the server: "not checked" (vLLM, SGLang and TGI state no parameter or layer count);
    - a GPU budget (memory divided into weights, margin and KV cache) for a run whose header says no GPU was seen,
      or whose GPU (NVML) is smaller than the budget's: a contradiction when the target is on this machine (the
      header's GPU facts are sampled where the client runs); for a remote target "not checked".
    - a budget on a unified-memory device (the device table's ``unified`` kind, said in its notes: Apple Silicon's
      GPU shares the system's memory and has no NVML) is held against the machine's memory instead
      (``environment.gpu.host.memory_total``), never called a GPU budget for a run without a GPU."""
    problems: list[str] = []
    checked: list[str] = []
    unchecked: list[str] = []
    served = ident.served_model or ident.claimed_model or "the served model"
    where = f" ({ident.source})" if ident.source else ""
    compared = False
    if budget.params is not None and ident.params is not None and budget.params > 0:
        compared = True
        ratio = budget.params / ident.params
        if not 1 / PARAMS_TOLERANCE <= ratio <= PARAMS_TOLERANCE:
            problems.append(f"the budget's model has {_count(budget.params)} parameters, the server states "
                            f"{_count(ident.params)} for {served}{where}: the budget is of another model")
        else:
            checked.append(f"the budget's {_count(budget.params)} parameters agree with the server's "
                           f"{_count(ident.params)} for {served} (within a factor of {PARAMS_TOLERANCE:g})")
    if budget.layers is not None and ident.layers is not None:
        compared = True
        if budget.layers > ident.layers:
            problems.append(f"the budget counts {budget.layers} KV layers, the server states {ident.layers} for "
                            f"{served}{where}: the budget is of another model")
        else:
            checked.append(f"the budget's {budget.layers} KV layers fit the server's {ident.layers}")
    if not compared and (budget.params is not None or budget.layers is not None):
        unchecked.append(f"the budget's model against {served}: the server states no parameter or layer count")
    if budget.gpu_gib is not None and budget.unified:
        local = target_is_local(ident)
        if ident.host_memory_gib is None or not local:
            unchecked.append("the budget's unified memory: the run header records no memory of the target's machine")
        elif budget.gpu_gib > ident.host_memory_gib * (1 + GPU_MEMORY_TOLERANCE):
            problems.append(f"the budget divides {budget.gpu_gib:g} GiB of unified memory, the run's machine has "
                            f"{ident.host_memory_gib:.1f} GiB")
        else:
            checked.append(f"the budget's unified memory ({budget.gpu_gib:g} GiB) against the machine's "
                           f"{ident.host_memory_gib:.1f} GiB (no NVIDIA GPU is expected: the GPU shares that memory)")
    elif budget.gpu_gib is not None:
        local = target_is_local(ident)
        if ident.gpu is None:
            unchecked.append("the budget's GPU: the run header records no GPU facts (not sampled)")
        elif not local:
            host = ident.target_host or "unknown"
            unchecked.append(f"the budget's GPU: the header's GPU facts were sampled on the client's machine, not at "
                             f"the target host {host}")
        elif ident.gpu == "none":
            problems.append(f"a GPU budget ({budget.gpu_gib:g} GiB) for a run whose header says no GPU was seen on "
                            f"the server's machine (target {ident.target_host})")
        elif ident.gpu_memory_gib is not None and budget.gpu_gib > ident.gpu_memory_gib * (1 + GPU_MEMORY_TOLERANCE):
            problems.append(f"the budget divides a {budget.gpu_gib:g} GiB GPU, the run's GPU ({ident.gpu}) has "
                            f"{ident.gpu_memory_gib:.1f} GiB")
        else:
            checked.append(f"the budget's GPU ({budget.gpu_gib:g} GiB) against the run's GPU ({ident.gpu})")
    return BudgetCheck(tuple(problems), tuple(checked), tuple(unchecked))


#: the facts that describe a serving configuration, in the order printed (tui.core.quality.policy compares them)
FACT_KEYS = ("engine", "build", "model", "quantization", "context", "slots", "params", "model_size")


def _fact(v: Any) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return f"{v:g}" if isinstance(v, float) else str(v)
    return _s(v)


def server_facts(server: Mapping | None, sid: Mapping | None = None) -> dict[str, str]:
    """A configuration as its server describes it (``server``: the ``environment.server`` / quality side's
    ``server`` block; ``sid``: its ``server_identity`` block): only the facts stated, as strings; the model as a
    loose name (the file's last path part, without .gguf)."""
    out: dict[str, str] = {}

    def put(key: str, *vals: Any) -> None:
        for v in vals:
            f = _fact(v)
            if f is not None:
                out[key] = f
                return

    put("engine", _m(sid, "engine"), _m(server, "engine"))
    put("build", _m(sid, "build"), _m(server, "build"))
    model = _s(_m(sid, "model")) or _s(_m(server, "model"))
    if model:
        out["model"] = _norm(model)
    put("quantization", _m(sid, "quantization"), _m(server, "quantization"))
    put("context", _m(server, "context_tokens"), _m(server, "n_ctx_per_slot"), _m(server, "max_model_len"),
        _m(sid, "context"))
    put("slots", _m(server, "slots"), _m(sid, "slots"))
    put("params", _m(sid, "params"))
    put("model_size", _m(sid, "model_size_bytes"))
    return out


def fact_differences(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(the facts known on both sides that differ, those known on both that agree), in :data:`FACT_KEYS` order."""
    differ: list[str] = []
    same: list[str] = []
    for k in FACT_KEYS:
        if k in a and k in b:
            (same if a[k] == b[k] else differ).append(k)
    return differ, same


def differences(a: Identity, b: Identity) -> list[str]:
    """The FIELDS whose known values differ between two identities (a value unknown on either side is no
    difference here; the caller says it is unknown)."""
    out = []
    for f in FIELDS:
        va, vb = a.value(f), b.value(f)
        if va is None or vb is None:
            continue
        if f == "model":
            if not same_model(va, vb, a.served_models) and not same_model(vb, va, b.served_models):
                out.append(f)
        elif va != vb:
            out.append(f)
    return out


def budget_facts(budget: Any) -> BudgetFacts | None:
    """The :class:`BudgetFacts` of a budget result (``tui.core.budget.BudgetResult``, read by its fields: this layer
    does not import the budget package); None without one. A budget whose cache is a KV space given directly (or the
    engine's own) divides no GPU: ``gpu_gib`` None."""
    inputs = getattr(budget, "inputs", None)
    if inputs is None:
        return None
    params = getattr(inputs, "params", None)
    layers = getattr(inputs, "layers", None)
    gpu = getattr(inputs, "gpu_gib", None)
    if getattr(inputs, "kv_space_bytes", 0) or not hasattr(budget, "candidate"):
        gpu = None  # a KV space, or a budget still without its memory: no GPU divided
    model = getattr(inputs, "model", None)
    notes = getattr(inputs, "notes", ()) or ()
    unified = any(isinstance(n, str) and n.startswith("device ") and (" (unified): " in n or " (host): " in n)
                  for n in notes)
    return BudgetFacts(params=float(params) if isinstance(params, (int, float)) and not isinstance(params, bool)
                       else None, layers=_pos_int(layers),
                       gpu_gib=float(gpu) if isinstance(gpu, (int, float)) and not isinstance(gpu, bool) else None,
                       model=_s(model), unified=unified)


def evidence_identity(runs: Any, budget: Any = None) -> dict:
    """What `accept` and `plan` say about identity: each run's (``runs``: ``(source, header)`` pairs) claimed and
    served model, the claimed-vs-served mismatch, and the budget against each run's served model and GPU
    (:func:`budget_vs_served`). ``{"runs": [{"source", "line", "problems"}], "budget": {"problems", "checked",
    "not_checked"} | None, "problems": [...]}``; every problem forbids acceptance-grade (exit 3)."""
    facts = budget_facts(budget)
    several = len(runs) > 1
    rows, problems = [], []
    checks: dict[str, list[str]] = {"problems": [], "checked": [], "not_checked": []}
    for source, header in runs:
        ident = identity_of(header if isinstance(header, Mapping) else None)
        own = identity_problems(ident)
        rows.append({"source": source, "line": ident.line(), "problems": own})
        problems += [f"{source}: {p}" if several else p for p in own]
        if facts is not None:
            bc = budget_vs_served(ident, facts)
            for key, vals in (("problems", bc.problems), ("checked", bc.checked), ("not_checked", bc.not_checked)):
                checks[key] += [f"{source}: {v}" if several else v for v in vals]
    problems += checks["problems"]
    return {"runs": rows, "budget": None if facts is None else {k: list(dict.fromkeys(v)) for k, v in checks.items()},
            "problems": list(dict.fromkeys(problems))}
