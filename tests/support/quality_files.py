"""Quality result files for the tests, honest unless a test edits them: each side names the model its server serves
(``server`` and ``server_identity`` blocks as `servewatch quality` records them), the candidate's server states its
context, the long-context cases sit at the suite's shares of it (25%, 50%, 90%) with the server's own prompt counts,
candidate and baseline are different configurations by their servers' facts, and the file carries its digest
(``tui.core.quality.digest.seal``, with a key when given).

Also the run-header pieces that say the same about a load run (``server_env``: ``environment.server``;
``server_identity``: the header's ``server_identity`` block), so a record file and a quality file can be tied by the
served model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from tui.core import quality as Q
from tui.core.quality.digest import seal

CTX = 2048
FRACTIONS = (0.25, 0.5, 0.9)
DEPTHS = (0.1, 0.5, 0.9)


def server_env(model: str = "/models/test-model.gguf", *, build: str = "b1234-abcdef", ctx: int = CTX,
               slots: int = 4, quantization: str = "Q4_K - Medium") -> dict:
    """A llama.cpp server block (``environment.server`` of a run header, ``server`` of a quality side)."""
    return {"engine": "llamacpp", "build": build, "model": model, "quantization": quantization, "slots": slots,
            "n_ctx_per_slot": ctx, "models": [model]}


def server_identity(model: str = "/models/test-model.gguf", *, build: str = "b1234-abcdef", ctx: int = CTX,
                    slots: int = 4, quantization: str = "Q4_K - Medium", params: int | None = 268_098_176) -> dict:
    """The ``server_identity`` block a load command or `quality` records from llama.cpp's /v1/models and /props."""
    return {"model": model, "models": [model], "engine": "llamacpp", "build": build, "quantization": quantization,
            "source": "/v1/models (meta)", "params": params, "layers": None, "context_train": 32768, "context": ctx,
            "slots": slots, "model_size_bytes": 246_587_904, "root": None, "model_file": model}


def row(cid: str, passed: bool, category: str = "key", **extra) -> dict:
    """One honest case row: a failed case names its failed check."""
    return {"id": cid, "category": category, "fingerprint": f"fp-{cid}", "passed": passed,
            "failed_check": None if passed else {"index": 0, "type": "contains", "detail": "expected text missing"},
            "answer_excerpt": "x", "latency_s": 0.1, "error": None, "error_detail": None, "prompt_tokens": 20,
            "completion_tokens": 3, "finish_reason": "stop", **extra}


def lc_rows(passed: Iterable[bool] | bool = True, n: int = 60, ctx: int = CTX, prefix: str = "lc",
            prompt_scale: float = 1.0) -> list[dict]:
    """Long-context rows at the suite's shares of a ``ctx``-token context (the server's own prompt counts,
    ``prompt_scale`` of the target: below 0.8 they fall short of their declared share)."""
    flags = [passed] * n if isinstance(passed, bool) else list(passed)
    out = []
    for i, p in enumerate(flags):
        f, d = FRACTIONS[i % 3], DEPTHS[(i // 3) % 3]
        target = round(f * ctx)
        out.append(row(f"{prefix}{i}", p, "long_context", prompt_tokens=round(target * prompt_scale),
                       generated={"kind": "long_context", "depth": d, "target_tokens": target, "length_fraction": f,
                                  "needles": 1}))
    return out


def key_rows(passed: Iterable[bool] | bool = True, n: int = 60, prefix: str = "q") -> list[dict]:
    flags = [passed] * n if isinstance(passed, bool) else list(passed)
    return [row(f"{prefix}{i}", p) for i, p in enumerate(flags)]


def quality_doc(cand_rows: Sequence[dict], base_rows: Sequence[dict] | None, *, model: str = "test-model",
                served: str = "/models/test-model.gguf", base_model: str = "big", base_served: str = "/models/big.gguf",
                ctx: int = CTX, base_server: dict | None = None, base_identity: dict | None = None,
                url: str = "http://127.0.0.1:8000", base_url: str = "http://127.0.0.1:9000", key: bytes | None = None,
                required: Sequence[str] = (), sealed: bool = True, cand_server: dict | None = None,
                cand_identity: dict | None = None, settings: dict | None = None) -> dict:
    """A quality result as `servewatch quality` writes it (candidate and baseline endpoints), sealed unless
    ``sealed`` is False."""
    cs = cand_server if cand_server is not None else dict(server_env(served, ctx=ctx), context_tokens=ctx,
                                                          context_source="server /props default_generation_settings.n_ctx")
    ci = cand_identity if cand_identity is not None else server_identity(served, ctx=ctx)
    cand = Q.run_section([dict(r) for r in cand_rows], target={"url": url, "model": model}, server=cs,
                         server_identity=ci)
    base = None
    if base_rows is not None:
        bs = base_server if base_server is not None else dict(server_env(base_served, ctx=ctx, quantization="Q8_0"),
                                                              context_tokens=ctx)
        bi = base_identity if base_identity is not None else server_identity(base_served, ctx=ctx,
                                                                             quantization="Q8_0", params=None)
        base = Q.run_section([dict(r) for r in base_rows], target={"url": base_url, "model": base_model}, server=bs,
                             server_identity=bi)
    doc = Q.build_result(qset=Q.QualitySet([], [], required=tuple(required)), set_source="ours.jsonl",
                         set_sha256=None, candidate=cand, baseline=base, **(settings or {}))
    doc["set"]["cases"] = len(cand_rows)
    doc["set"]["fingerprint"] = Q.QualitySet([_Fp(r["fingerprint"]) for r in cand_rows], []).fingerprint  # type: ignore[list-item]
    doc = json.loads(json.dumps(doc))
    return seal(doc, key) if sealed else doc


class _Fp:
    """Stands in for a case where only its fingerprint is read (``QualitySet.fingerprint``)."""

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint


def write_doc(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path
