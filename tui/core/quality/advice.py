"""Fallback advice that follows from the evidence: for each failing category, the next configuration to try, read
from what was compared (each side's ``config`` facts ``{key: {"value", "source"}}``, its target and server, and the
per-case rows: error classes, long-context target lengths, prompt tokens). Nothing generic: when no difference
between the two configurations is known, the advice says exactly that and how to state one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tui.core.quality.lctable import is_long_context
from tui.core.quality.vocab import FAIL

#: KV-cache dtypes from the least to the most precise (llama.cpp --cache-type-k/v, vLLM --kv-cache-dtype).
KV_RANKS = {"q4_0": 1, "q4_1": 1, "iq4_nl": 1, "q5_0": 2, "q5_1": 2, "q8_0": 3, "fp8": 3, "fp8_e4m3": 3,
            "fp8_e5m2": 3, "f16": 4, "fp16": 4, "float16": 4, "bf16": 4, "bfloat16": 4, "auto": 4, "f32": 5,
            "fp32": 5, "float32": 5}
KV_NEXT = {1: "q8_0", 2: "q8_0", 3: "f16", 4: "f32"}

#: GGUF weight types from the least to the most precise, with the next one to try from each rung.
_WEIGHT_LADDER: tuple[tuple[str, int, str], ...] = (
    (r"I?Q1(_\w+)?", 0, "Q2_K"),
    (r"I?Q2(_\w+)?", 1, "Q3_K_M"),
    (r"I?Q3(_\w+)?", 2, "Q4_0"),
    (r"Q4_[01]|IQ4_\w+", 3, "Q4_K_M"),
    (r"Q4_K(_\w+)?", 4, "Q5_K_M"),
    (r"Q5(_\w+)?", 5, "Q6_K"),
    (r"Q6_K", 6, "Q8_0"),
    (r"Q8_0", 7, "F16"),
    (r"F16|BF16|FP16", 8, "F32"),
    (r"F32|FP32", 9, ""),
)

NOTHING_KNOWN = ("no difference between the candidate and the baseline configuration is known beyond the endpoint "
                 "(no weights, KV-cache, engine, model or context fact differs in the result); state each side's "
                 "facts with --setting KEY=VALUE and --baseline-setting KEY=VALUE (for example weights=Q4_K_M, "
                 "kv_cache=q8_0) so the advice can name the next configuration to try")


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def config_facts(side: Mapping | None) -> dict[str, tuple[Any, str]]:
    """``{key: (value, source)}`` of one side: its ``config``, then the target's model and the server's engine,
    weight type (llama.cpp ``model_ftype``) and context when the config does not state them."""
    side = _map(side)
    out: dict[str, tuple[Any, str]] = {}
    for k, v in _map(side.get("config")).items():
        if isinstance(v, Mapping):
            if v.get("value") is not None:
                out[str(k)] = (v["value"], str(v.get("source") or "unknown"))
        elif v is not None:
            out[str(k)] = (v, "unknown")
    tgt, srv = _map(side.get("target")), _map(side.get("server"))
    if "model" not in out and tgt.get("model"):
        out["model"] = (tgt["model"], "the target's model")
    if "engine" not in out and srv.get("engine"):
        out["engine"] = (srv["engine"], "server")
    if "weights" not in out and isinstance(srv.get("quantization"), str) and srv["quantization"].strip():
        out["weights"] = (gguf_type(srv["quantization"]), "server /props model_ftype")
    if "context_tokens" not in out and isinstance(srv.get("context_tokens"), int):
        out["context_tokens"] = (srv["context_tokens"], str(srv.get("context_source") or "server"))
    return out


def gguf_type(ftype: str) -> str:
    """llama.cpp's file type text as a GGUF type name: "Q4_K - Medium" -> "Q4_K_M", "Q8_0" unchanged."""
    s = ftype.strip()
    for word, tail in ((" - Medium", "_M"), (" - Small", "_S"), (" - Large", "_L"), (" - Extra Small", "_XS")):
        if s.endswith(word):
            return s[: -len(word)].strip() + tail
    return s


def _norm(v: Any) -> str:
    return str(v).strip().casefold()


def weight_rank(value: Any) -> tuple[int, str] | None:
    """(rank, next weights to try) of a GGUF weight type such as Q4_K_M (None: not on the ladder)."""
    s = str(value).strip().upper()
    for pat, rank, nxt in _WEIGHT_LADDER:
        if re.fullmatch(pat, s):
            return rank, nxt
    return None


def _next_kv(cand: Any, base: Any) -> str:
    rc, rb = KV_RANKS.get(_norm(cand)), KV_RANKS.get(_norm(base))
    if rc is None or rb is None or rc >= rb:
        return str(base)
    nxt = KV_NEXT.get(rc, str(base))
    return str(base) if KV_RANKS.get(nxt, 99) >= rb else nxt


def _next_weights(cand: Any, base: Any) -> str:
    wc, wb = weight_rank(cand), weight_rank(base)
    if wc is None or wb is None or wc[0] >= wb[0] or not wc[1]:
        return str(base)
    nxt = wc[1]
    nr = weight_rank(nxt)
    return str(base) if nr is None or nr[0] >= wb[0] else nxt


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _rows(side: Mapping | None) -> list[Mapping]:
    return [r for r in (_map(side).get("cases") or []) if isinstance(r, Mapping)]


def _long_context_item(cat: str, cand_rows: Sequence[Mapping], base_rows: Sequence[Mapping],
                       cf: Mapping[str, tuple[Any, str]], bf: Mapping[str, tuple[Any, str]]) -> dict | None:
    lc = [r for r in cand_rows if is_long_context(r)]
    if not lc:
        return None
    ids = {r.get("id") for r in lc}
    need = 0
    for r in lc + [b for b in base_rows if b.get("id") in ids]:
        for v in (_map(r.get("generated")).get("target_tokens"), r.get("prompt_tokens")):
            n = _int(v)
            if n is not None:
                need = max(need, n)
    rejected = sum(1 for r in lc if r.get("error") == "http_4xx")
    ctx = _int(cf.get("context_tokens", (None, ""))[0])
    short = ctx is not None and need > 0 and ctx < need
    if not (rejected or short) or need <= 0:
        return None
    why = []
    if rejected:
        why.append(f"the candidate rejected {rejected} of {len(lc)} long-context case(s) with an HTTP 4xx")
    if ctx is not None:
        why.append(f"its context is {ctx} tokens ({cf['context_tokens'][1]}) and the longest prompt is {need} tokens")
    else:
        why.append(f"the longest prompt is {need} tokens")
    bctx = _int(bf.get("context_tokens", (None, ""))[0])
    if bctx is not None and (ctx is None or bctx > ctx):
        why.append(f"the baseline served a {bctx}-token context")
    return {"category": cat, "try": f"a context of at least {need} tokens (plus room for the answer)",
            "because": "; ".join(why)}


def _config_items(cat: str, cf: Mapping[str, tuple[Any, str]], bf: Mapping[str, tuple[Any, str]]) -> list[dict]:
    out: list[dict] = []

    def differs(key: str) -> bool:
        return key in cf and key in bf and _norm(cf[key][0]) != _norm(bf[key][0])

    def said(key: str, side: Mapping[str, tuple[Any, str]]) -> str:
        return f"{side[key][0]} ({side[key][1]})"

    if differs("kv_cache"):
        out.append({"category": cat, "try": f"the KV cache in {_next_kv(cf['kv_cache'][0], bf['kv_cache'][0])}",
                    "because": f"the candidate's KV cache is {said('kv_cache', cf)}, the baseline's "
                               f"{said('kv_cache', bf)}"})
    if differs("weights"):
        out.append({"category": cat, "try": f"{_next_weights(cf['weights'][0], bf['weights'][0])} weights",
                    "because": f"the candidate's weights are {said('weights', cf)}, the baseline's "
                               f"{said('weights', bf)}"})
    if differs("engine"):
        out.append({"category": cat, "try": f"the same weights on {bf['engine'][0]} (the baseline's engine) instead "
                                            f"of {cf['engine'][0]}, or {cf['engine'][0]}'s chat template and "
                                            "sampling settings for this model",
                    "because": f"these cases passed on the baseline's engine {said('engine', bf)} and failed on the "
                               f"candidate's {said('engine', cf)}"})
    if differs("model"):
        out.append({"category": cat, "try": f"the baseline's model {bf['model'][0]} or a model larger than "
                                            f"{cf['model'][0]}",
                    "because": f"the candidate serves {said('model', cf)}, the baseline {said('model', bf)}"})
    known = {"kv_cache", "weights", "engine", "model", "context_tokens"}
    for key in sorted(set(cf) & set(bf) - known):
        if differs(key):
            out.append({"category": cat, "try": f"the baseline's {key}={bf[key][0]}",
                        "because": f"{key} differs: candidate {said(key, cf)}, baseline {said(key, bf)}"})
    return out


def failing_categories(comparison: Mapping | None) -> list[str]:
    """The categories whose own state is FAIL; ["overall"] when only the overall comparison FAILs."""
    comp = _map(comparison)
    cats = [str(c) for c, d in sorted(_map(comp.get("per_category")).items()) if _map(d).get("state") == FAIL]
    if not cats and comp.get("state") == FAIL:
        cats = ["overall"]
    return cats


def fallback_advice(comparison: Mapping | None, candidate: Mapping, baseline: Mapping | None) -> list[dict]:
    """``[{"category", "try", "because"}]`` for every failing category (empty when nothing FAILs).

    Rules, from the evidence only: long-context cases the candidate rejected (HTTP 4xx) or whose prompts exceed its
    stated context -> a context of at least the longest prompt; the KV-cache dtype differs -> the next more precise
    one (q4_0 -> q8_0 -> f16) or the baseline's; the weights differ -> the next more precise GGUF type or the
    baseline's; the engine differs -> the same weights on the baseline's engine; the model differs -> the baseline's
    or a larger one; another stated setting differs -> the baseline's value. Nothing known differs -> say so
    (:data:`NOTHING_KNOWN`)."""
    cats = failing_categories(comparison)
    if not cats:
        return []
    cf, bf = config_facts(candidate), config_facts(baseline)
    crows, brows = _rows(candidate), _rows(baseline)
    out: list[dict] = []
    for cat in cats:
        mine = crows if cat == "overall" else [r for r in crows if str(r.get("category", "general")) == cat]
        items = []
        lc = _long_context_item(cat, mine, brows, cf, bf)
        if lc:
            items.append(lc)
        items += _config_items(cat, cf, bf)
        if not items:
            items.append({"category": cat, "try": "stating what differs between the two configurations",
                          "because": NOTHING_KNOWN})
        out += items
    return out


def advice_text(advice: Sequence[Mapping]) -> str | None:
    """The advice as one text (items with the same suggestion are joined over their categories), or None."""
    if not advice:
        return None
    merged: dict[tuple[str, str], list[str]] = {}
    for a in advice:
        merged.setdefault((str(a.get("try")), str(a.get("because"))), []).append(str(a.get("category")))
    parts = []
    for (t, b), cats in merged.items():
        where = ", ".join(dict.fromkeys(cats))
        parts.append(f"{where}: {b}" if b == NOTHING_KNOWN else f"{where}: try {t} ({b})")
    return "; ".join(parts)


def with_advice(verdict: dict, comparison: Mapping | None, candidate: Mapping, baseline: Mapping | None) -> dict:
    """``verdict`` with ``advice`` (the list) and ``fallback`` (its text, None when nothing FAILs) set."""
    adv = fallback_advice(comparison, candidate, baseline)
    verdict["advice"] = adv
    verdict["fallback"] = advice_text(adv)
    return verdict
