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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FIELDS", "Identity", "differences", "identity_of", "model_mismatch", "same_model"]

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
    )


def model_mismatch(ident: Identity) -> str | None:
    """The sentence when the model claimed is not the model the server said it serves (None: they agree, or one of
    them is not known)."""
    served, claimed = ident.served_model, ident.claimed_model
    if not served or not claimed or same_model(served, claimed, ident.served_models):
        return None
    return (f"the run claims model {claimed!r} but the server said it serves {served!r}: the evidence is about the "
            "served model")


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
