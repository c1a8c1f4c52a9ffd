"""The engine's KV allocation predicted from the model config, and compared with what the engine reports.

vLLM (v1) pages the KV cache: one *page* is ``block_size`` tokens of one layer (``2 x KV heads x head_dim x
bytes per element x block_size``; MLA: the latent instead of K and V). How many pages fit depends on how the
layers are grouped:

- **uniform layout** (every layer full attention, or every layer the same sliding window): one group holding all
  ``L`` layers; ``num_blocks = kv_space // (page x L)``; the tokens reported are ``num_blocks x block_size``; one
  request of ``max_model_len`` tokens needs ``cdiv(max_model_len, block_size)`` blocks.
- **hybrid layout** (full-attention AND sliding-window layers): the layers are grouped by type into groups of one
  size ``g`` (the smaller type count, or the larger one when the larger is under 1.5 x the smaller; the last group of
  a type is padded), every group shares one block pool; ``num_blocks = kv_space // (page x g)``; one request needs,
  per full-attention group, ``cdiv(max_model_len, block_size)`` blocks and, per sliding-window group,
  ``cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1`` blocks. ``max_num_batched_tokens`` is a scheduler setting the config does not
  give: when unknown the concurrency is a range (from a scheduler chunk of 1 token up to one of max_model_len).
- **hybrid manager disabled** (some engine builds and options): the sliding-window layers are cached as full
  attention: the uniform layout over all layers. Used only to explain a disagreement.

``max concurrency = num_blocks / blocks one request needs`` (the engine's ``kv_cache_max_concurrency``), and the KV
cache size vLLM 0.32 reports is ``int(max concurrency x max_model_len)`` tokens (its ``kv_cache_size_tokens``, and
"KV cache size: N tokens" in its log; for a uniform layout whose max_model_len is whole blocks that is
``num_blocks x block_size``). Older vLLM reported ``num_blocks // groups x block_size`` (kept as ``group_tokens``).

Learnt from reading vLLM's public source (``vllm/v1/core/kv_cache_utils.py``, ``kv_cache_interface.py``); no code
copied. Pure functions, standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tui.core.budget.arithmetic import kv_bytes_per_token_per_layer
from tui.core.budget.formats import KV_DTYPES
from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.vocab import GIB, BudgetError

AGREE = "agree"
DISAGREE = "disagree"
UNKNOWN = "unknown"

# vLLM's group-size heuristic: when the larger layer-type count is under this multiple of the smaller, the larger
# count is the group size (fewer padding layers)
_GROUP_SIZE_RATIO = 1.5
# the engine's concurrency label/log line is rounded to 2 decimals
_CONCURRENCY_ROUNDING = 0.005


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KvGroup:
    """One kind of KV cache group: ``count`` groups of ``kind`` ("full" | "sliding") layers."""

    kind: str
    layers: int  # layers of this kind in the model
    count: int  # groups of this kind
    window: int = 0  # sliding-window tokens (sliding only)


@dataclass(frozen=True)
class KvPrediction:
    """The engine's KV allocation predicted for one KV space (per GPU)."""

    model: str
    layout: str  # "uniform" | "hybrid" | "hybrid disabled"
    kv_dtype: str
    element_bytes: int
    kv_space_bytes: int
    block_size: int
    max_model_len: int
    bytes_per_token: int  # one token in every layer (the memory-only figure)
    page_bytes: int  # one block of one layer
    layers_per_group: int
    groups: tuple[KvGroup, ...]
    padding_layers: int
    num_blocks: int
    group_tokens: int  # num_blocks // groups x block_size (what older vLLM reported)
    raw_tokens: int  # kv_space // bytes_per_token: the memory-only count, before whole blocks
    blocks_per_request: tuple[int, int]  # (fewest, most): equal when max_num_batched_tokens is known
    max_num_batched_tokens: int | None
    notes: tuple[str, ...] = field(default=())

    @property
    def n_groups(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def max_concurrency(self) -> tuple[float, float]:
        """(lowest, highest) requests of max_model_len tokens the blocks hold; equal when known exactly."""
        most, fewest = self.blocks_per_request[1], self.blocks_per_request[0]
        return (self.num_blocks / most if most else 0.0, self.num_blocks / fewest if fewest else 0.0)

    @property
    def tokens_range(self) -> tuple[int, int]:
        """(lowest, highest) KV cache size in tokens as vLLM 0.32 reports it: int(concurrency x max_model_len)."""
        lo, hi = self.max_concurrency
        return int(lo * self.max_model_len), int(hi * self.max_model_len)

    @property
    def tokens(self) -> int:
        """The KV cache size in tokens (the lower end when max_num_batched_tokens is unknown)."""
        return self.tokens_range[0]

    @property
    def concurrency_exact(self) -> bool:
        return self.blocks_per_request[0] == self.blocks_per_request[1]

    def concurrency_text(self) -> str:
        lo, hi = self.max_concurrency
        if self.concurrency_exact:
            return f"{lo:.2f}x"
        return f"{lo:.2f}x to {hi:.2f}x (max_num_batched_tokens unknown)"

    def as_dict(self) -> dict[str, Any]:
        lo, hi = self.max_concurrency
        return {
            "model": self.model, "layout": self.layout, "kv_dtype": self.kv_dtype,
            "element_bytes": self.element_bytes, "kv_space_bytes": self.kv_space_bytes,
            "block_size": self.block_size, "max_model_len": self.max_model_len,
            "bytes_per_token": self.bytes_per_token, "page_bytes": self.page_bytes,
            "layers_per_group": self.layers_per_group, "n_groups": self.n_groups,
            "groups": [{"kind": g.kind, "layers": g.layers, "count": g.count, "window": g.window or None}
                       for g in self.groups],
            "padding_layers": self.padding_layers, "num_blocks": self.num_blocks, "tokens": self.tokens,
            "tokens_range": list(self.tokens_range), "group_tokens": self.group_tokens,
            "raw_tokens": self.raw_tokens, "blocks_per_request": list(self.blocks_per_request),
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_concurrency": [lo, hi], "notes": list(self.notes),
        }


def _group_plan(full: int, sliding: int) -> tuple[int, int, int, int]:
    """(layers per group, full groups, sliding groups, padding layers) for a hybrid model."""
    smallest, largest = min(full, sliding), max(full, sliding)
    size = largest if largest < smallest * _GROUP_SIZE_RATIO else smallest
    full_groups, sliding_groups = _cdiv(full, size), _cdiv(sliding, size)
    padding = full_groups * size - full + sliding_groups * size - sliding
    return size, full_groups, sliding_groups, padding


def predict_allocation(inputs: BudgetInputs, kv_space_bytes: int | None = None, *,
                       max_num_batched_tokens: int | None = None, hybrid: bool = True) -> KvPrediction:
    """The allocation for ``kv_space_bytes`` (default: ``inputs.kv_space_bytes``), ``inputs.block_size`` and
    ``inputs.max_seq`` as max_model_len. ``hybrid=False``: sliding-window layers cached as full attention.
    Raises BudgetError when no KV space is given."""
    space = inputs.kv_space_bytes if kv_space_bytes is None else kv_space_bytes
    if isinstance(space, bool) or not isinstance(space, int) or space <= 0:
        raise BudgetError("the KV allocation needs the KV cache space (--kv-cache-gib, or the engine's "
                          "kv_cache_memory_bytes)")
    mnbt = max_num_batched_tokens
    if mnbt is not None and (isinstance(mnbt, bool) or not isinstance(mnbt, int) or mnbt < 1):
        raise BudgetError(f"max_num_batched_tokens must be a whole number >= 1, got {mnbt!r}")
    block, mml, layers = inputs.block_size, inputs.max_seq, inputs.layers
    per_layer = kv_bytes_per_token_per_layer(inputs)
    page = per_layer * block
    sliding = inputs.sliding_layers if hybrid else 0
    full = layers - sliding
    window = inputs.sliding_window
    full_blocks = _cdiv(mml, block)
    notes: list[str] = []

    def sliding_blocks(chunk: int) -> int:
        return _cdiv(min(window - 1 + chunk, mml), block) + 1

    if sliding == 0 or full == 0:
        size, groups_n, padding = layers, 1, 0
        if sliding:  # every layer the same sliding window: one group
            groups: tuple[KvGroup, ...] = (KvGroup("sliding", layers, 1, window),)
            fewest = sliding_blocks(1) if mnbt is None else sliding_blocks(mnbt)
            most = sliding_blocks(mml) if mnbt is None else fewest
        else:
            groups = (KvGroup("full", layers, 1),)
            fewest = most = full_blocks
        layout = "uniform" if hybrid or not inputs.sliding_layers else "hybrid disabled"
        if not hybrid and inputs.sliding_layers:
            notes.append(f"{inputs.sliding_layers} sliding-window layers cached as full attention (hybrid KV cache "
                         "manager disabled)")
    else:
        size, full_groups, sliding_groups, padding = _group_plan(full, sliding)
        groups = (KvGroup("full", full, full_groups), KvGroup("sliding", sliding, sliding_groups, window))
        groups_n = full_groups + sliding_groups
        fewest = full_groups * full_blocks + sliding_groups * sliding_blocks(1 if mnbt is None else mnbt)
        most = full_groups * full_blocks + sliding_groups * sliding_blocks(mml) if mnbt is None else fewest
        layout = "hybrid"
        notes.append(f"hybrid layout: {full} full-attention + {sliding} sliding-window layers (window {window}) in "
                     f"{groups_n} groups of {size} layers" + (f" ({padding} padding layers)" if padding else ""))
    num_blocks = space // (page * size)
    bytes_per_token = per_layer * layers
    return KvPrediction(
        model=inputs.model, layout=layout, kv_dtype=inputs.kv_dtype, element_bytes=KV_DTYPES[inputs.kv_dtype],
        kv_space_bytes=space, block_size=block, max_model_len=mml, bytes_per_token=bytes_per_token,
        page_bytes=page, layers_per_group=size, groups=groups, padding_layers=padding, num_blocks=num_blocks,
        group_tokens=num_blocks // groups_n * block, raw_tokens=space // bytes_per_token, blocks_per_request=(fewest, most),
        max_num_batched_tokens=mnbt, notes=tuple(notes))


# --------------------------------------------------------------------------------------------
# Prediction vs the engine's own figures
# --------------------------------------------------------------------------------------------


def _pos(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if not math.isfinite(v) or v <= 0 or v != int(v):
        return None
    return int(v)


def _posf(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and v > 0 else None


_ENGINE_DTYPE_BYTES = {"fp8": 1, "int8": 1, "int8_per_token_head": 1, "bfloat16": 2, "bf16": 2, "float16": 2,
                       "fp16": 2, "half": 2, "float32": 4, "fp32": 4, "float": 4}


def engine_element_bytes(cache_dtype: Any, model_kv_dtype: str) -> int | None:
    """Bytes per cached element the engine's ``cache_dtype`` means ("auto": the model's dtype); None: unknown."""
    if not isinstance(cache_dtype, str) or not cache_dtype.strip():
        return None
    name = cache_dtype.strip().lower()
    if name == "auto":
        return KV_DTYPES.get(model_kv_dtype)
    if name.startswith("fp8"):
        name = "fp8"
    return _ENGINE_DTYPE_BYTES.get(name)


@dataclass(frozen=True)
class AllocationCheck:
    """The prediction beside the engine's allocation, one figure a row, and a one-word result."""

    result: str  # "agree" | "disagree" | "unknown"
    prediction: KvPrediction | None
    rows: tuple[tuple[str, str, str, str], ...]  # (figure, predicted, engine, agree/disagree/-)
    explanations: tuple[str, ...]
    problem: str | None = None  # why nothing could be compared

    def as_dict(self) -> dict[str, Any]:
        return {"result": self.result, "prediction": self.prediction.as_dict() if self.prediction else None,
                "rows": [{"figure": f, "predicted": p, "engine": e, "result": r} for f, p, e, r in self.rows],
                "explanations": list(self.explanations), "problem": self.problem, "text": self.lines()}

    def lines(self) -> list[str]:
        """Plain text: the table and the explanations."""
        if self.prediction is None:
            return [f"KV allocation vs the engine: {self.result} ({self.problem or 'nothing to compare'})"]
        p = self.prediction
        out = [f"KV allocation, predicted from the config vs the engine's own figures: {self.result.upper()} "
               f"({p.layout} layout, {p.kv_space_bytes:,} B = {p.kv_space_bytes / GIB:.3f} GiB of KV space, "
               f"blocks of {p.block_size} tokens, max_model_len {p.max_model_len:,})"]
        w0 = max(len("figure"), *(len(r[0]) for r in self.rows))
        w1 = max(len("predicted"), *(len(r[1]) for r in self.rows))
        w2 = max(len("engine"), *(len(r[2]) for r in self.rows))
        out.append(f"  {'figure':<{w0}}  {'predicted':>{w1}}  {'engine':>{w2}}  result")
        out += [f"  {f:<{w0}}  {pr:>{w1}}  {e:>{w2}}  {r}" for f, pr, e, r in self.rows]
        out += [f"  - {x}" for x in self.explanations]
        return out


def _concurrency_agrees(pred: KvPrediction, engine: float) -> bool:
    lo, hi = pred.max_concurrency
    slack = 1.0 / max(1, pred.blocks_per_request[0]) + _CONCURRENCY_ROUNDING  # one block, and the 2-decimal label
    return lo - slack <= engine <= hi + slack


def _tokens_agree(pred: KvPrediction, engine: int) -> bool:
    """Inside the predicted range, give or take one block's worth of tokens."""
    lo, hi = pred.tokens_range
    slack = max(pred.block_size, pred.max_model_len // max(1, pred.blocks_per_request[0]))
    return lo - slack <= engine <= hi + slack


def mnbt_for_concurrency(pred: KvPrediction, inputs: BudgetInputs, engine_concurrency: float) -> tuple[int, int] | None:
    """The max_num_batched_tokens values (fewest, most; most = max_model_len means "or more") for which the
    hybrid prediction gives the engine's concurrency; None when none does or there is no sliding-window group."""
    if not inputs.sliding_layers or pred.layout != "hybrid":
        return None
    hits = []
    for chunk in range(1, pred.max_model_len + 1):
        p = predict_allocation(inputs.replace(kv_space_bytes=pred.kv_space_bytes), max_num_batched_tokens=chunk)
        if abs(p.max_concurrency[0] - engine_concurrency) <= _CONCURRENCY_ROUNDING:
            hits.append(chunk)
    return (hits[0], hits[-1]) if hits else None


def _agrees(pred: KvPrediction, blocks: int | None, tokens: int | None, conc: float | None) -> bool | None:
    """True/False on the figures the engine gave; None when it gave none."""
    checks = []
    if blocks is not None:
        checks.append(abs(pred.num_blocks - blocks) <= 1)
    if tokens is not None:
        checks.append(_tokens_agree(pred, tokens))
    if conc is not None:
        checks.append(_concurrency_agrees(pred, conc))
    return all(checks) if checks else None


def compare_allocation(inputs: BudgetInputs, engine: Mapping[str, Any] | None,
                       max_num_batched_tokens: int | None = None) -> AllocationCheck:
    """Predict for the engine's own KV space, block size and max_model_len (``server_capacity``'s keys:
    ``kv_cache_memory_bytes``, ``block_size``, ``num_blocks``, ``kv_cache_size_tokens``,
    ``kv_cache_max_concurrency``, ``cache_dtype``, ``max_model_len``) and compare, figure by figure: blocks within
    one block, tokens within one block's tokens, concurrency inside the predicted range (+ one block)."""
    if not engine:
        return AllocationCheck(UNKNOWN, None, (), (), "the engine reported no KV allocation")
    space = _pos(engine.get("kv_cache_memory_bytes"))
    if space is None:
        return AllocationCheck(UNKNOWN, None, (), (), "the engine did not report its KV space "
                               "(kv_cache_memory_bytes), so there is nothing to predict for")
    block = _pos(engine.get("block_size")) or inputs.block_size
    mml = _pos(engine.get("max_model_len")) or _pos(engine.get("tokens_per_sequence")) or inputs.max_seq
    engines = _pos(engine.get("engines")) or 1
    blocks = _pos(engine.get("num_blocks"))
    tokens = _pos(engine.get("kv_cache_size_tokens"))
    conc = _posf(engine.get("kv_cache_max_concurrency"))
    if engines > 1:  # summed over data-parallel engines: compare one engine's share
        blocks = blocks // engines if blocks else None
        tokens = tokens // engines if tokens else None
        conc = conc / engines if conc else None
    base = inputs.replace(kv_space_bytes=space, block_size=block, max_seq=mml)
    pred = predict_allocation(base, max_num_batched_tokens=max_num_batched_tokens)
    notes: list[str] = []
    if mml != inputs.max_seq:
        notes.append(f"predicted for the engine's max_model_len {mml:,} (the budget's max_seq is {inputs.max_seq:,})")
    if block != inputs.block_size:
        notes.append(f"predicted for the engine's block size {block} (the budget's is {inputs.block_size})")
    lo, hi = pred.max_concurrency

    def mark(ok: bool | None) -> str:
        return "-" if ok is None else (AGREE if ok else DISAGREE)

    rows = [
        ("KV bytes per token", f"{pred.bytes_per_token:,}", "-", "-"),
        ("KV space (bytes)", f"{space:,}", f"{space:,}", "input"),
        ("block size (tokens)", str(block), str(_pos(engine.get("block_size")) or "-"), "input"),
        ("blocks", f"{pred.num_blocks:,}", f"{blocks:,}" if blocks else "-",
         mark(None if blocks is None else abs(pred.num_blocks - blocks) <= 1)),
        ("KV cache size (tokens)", f"{pred.tokens:,}" if pred.concurrency_exact
         else f"{pred.tokens_range[0]:,}-{pred.tokens_range[1]:,}", f"{tokens:,}" if tokens else "-",
         mark(None if tokens is None else _tokens_agree(pred, tokens))),
        (f"max concurrency ({mml:,} tokens)", f"{lo:.2f}" if pred.concurrency_exact else f"{lo:.2f}-{hi:.2f}",
         f"{conc:.2f}" if conc else "-", mark(None if conc is None else _concurrency_agrees(pred, conc))),
    ]
    ok = _agrees(pred, blocks, tokens, conc)
    result = UNKNOWN if ok is None else (AGREE if ok else DISAGREE)
    explanations = list(notes)
    if pred.raw_tokens != pred.tokens and pred.layout == "uniform":
        explanations.append(
            f"block rounding: {space:,} B / {pred.bytes_per_token:,} B per token = {pred.raw_tokens:,} tokens; the "
            f"engine counts whole blocks of {block}: {pred.num_blocks:,} x {block} = {pred.tokens:,}")
    explanations += list(pred.notes)
    if inputs.sliding_layers:
        naive = predict_allocation(base.replace(sliding_layers=0, sliding_window=0))
        old = (blocks or pred.num_blocks) * block // mml
        stated = f"{conc:.2f}" if conc else pred.concurrency_text()
        explanations.append(
            f"sliding window: {inputs.sliding_layers} of {inputs.layers} layers keep a {inputs.sliding_window}-token "
            f"window; blocks x block size / max_model_len reads {old} sequences, the concurrency "
            f"({'the engine states' if conc else 'predicted'}: {stated}) counts the blocks each group needs per "
            f"request (predicted {pred.blocks_per_request[0]}"
            + ("" if pred.concurrency_exact else f" to {pred.blocks_per_request[1]}")
            + f"); every layer full attention would give {naive.num_blocks:,} blocks, {naive.concurrency_text()}")
        if not pred.concurrency_exact:
            explanations.append(
                "the sliding-window blocks per request depend on max_num_batched_tokens (a scheduler setting the "
                "config does not give): give the server log (\"max_num_batched_tokens=N\") or "
                "--max-num-batched-tokens for one figure")
            implied = mnbt_for_concurrency(pred, base, conc) if conc else None
            if implied and conc:
                most = "or more" if implied[1] >= mml else f"to {implied[1]:,}"
                explanations.append(
                    f"the engine's {conc:.2f}x is what the prediction gives for max_num_batched_tokens "
                    f"{implied[0]:,} {most} ({round(pred.num_blocks / conc)} blocks per request)")
        if tokens is not None and pred.group_tokens != tokens and pred.layout == "hybrid":
            explanations.append(
                f"KV cache size: vLLM 0.32 reports int(concurrency x max_model_len) tokens ({tokens:,}); "
                f"num_blocks // {pred.n_groups} groups x {block} = {pred.group_tokens:,} is what older vLLM reported")
    if result == DISAGREE:
        explanations += _explain(inputs, base, pred, engine, blocks, tokens, conc, max_num_batched_tokens)
    return AllocationCheck(result, pred, tuple(rows), tuple(explanations))


def _explain(inputs: BudgetInputs, base: BudgetInputs, pred: KvPrediction, engine: Mapping[str, Any],
             blocks: int | None, tokens: int | None, conc: float | None, mnbt: int | None) -> list[str]:
    """The known causes that account for a disagreement (each tried alone), else 'cause unknown'."""
    out: list[str] = []
    eb = engine_element_bytes(engine.get("cache_dtype"), inputs.kv_dtype)
    if eb is not None and eb != pred.element_bytes:
        alt_dtype = {1: "fp8", 2: "bf16"}.get(eb)
        if alt_dtype is not None:
            alt = predict_allocation(base.replace(kv_dtype=alt_dtype), max_num_batched_tokens=mnbt)
            if _agrees(alt, blocks, tokens, conc):
                out.append(f"dtype: the engine caches {engine.get('cache_dtype')} ({eb} B per element) where the "
                           f"prediction assumed {inputs.kv_dtype} ({pred.element_bytes} B): with {eb} B it agrees "
                           f"({alt.num_blocks:,} blocks)")
    if inputs.sliding_layers:
        alt = predict_allocation(base, max_num_batched_tokens=mnbt, hybrid=False)
        if _agrees(alt, blocks, tokens, conc):
            out.append(f"hybrid layout: the engine caches the {inputs.sliding_layers} sliding-window layers as full "
                       f"attention (its hybrid KV cache manager is off): {alt.num_blocks:,} blocks, "
                       f"{alt.concurrency_text()} agree")
    if not out and blocks is not None and abs(pred.num_blocks - blocks) > 1 and tokens is not None \
            and _tokens_agree(pred, tokens):
        out.append("block rounding: the tokens agree but the block counts differ (the engine's blocks hold another "
                   "number of tokens)")
    if not out:
        out.append("cause unknown: not dtype, block rounding, sliding window or hybrid layout as modelled "
                   "(check the config matches the served model, and --tp)")
    return out


__all__ = ["AGREE", "DISAGREE", "UNKNOWN", "KvGroup", "KvPrediction", "AllocationCheck", "predict_allocation",
           "compare_allocation", "engine_element_bytes", "mnbt_for_concurrency"]
