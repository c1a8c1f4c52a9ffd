"""What a view shows about the memory budget next to a run, and what the server itself allocated.

A budget is shown with a run only when someone gave it for that run: budget flags, ``--budget FILE``,
``--config``, a ``budget`` record inside the record file, or an explicit ``--teaching`` (the bundled
teaching log carries the teaching case by design). Otherwise the budget is **unknown**, and the views
say which flags would give one. Where the run header carries ``server_capacity`` (what the serving
engine actually allocated, read from the server), it is shown beside the prediction, also when the
budget is unknown.

Pure functions; no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.core.budget.allocation import compare_allocation
from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.serialize import budget_from_dict
from tui.core.budget.vocab import BudgetError

#: The flags that would give a budget (shown wherever the budget is unknown).
BUDGET_HINT = "budget unknown: give --config config.json, --params/--gpu-gib or --budget FILE (--teaching: the example)"

ORIGIN_RECORD = "budget record in the record file"
ORIGIN_TEACHING = "the teaching case (an example, not this run's model)"


def budget_from_record(data: Mapping[str, Any]) -> Any:
    """A ``budget`` record -> BudgetResult, recomputed and verified like ``--budget FILE``.

    Shape: ``{"type": "budget", "budget": <what `servewatch budget --json` prints>}``; the flat shape
    (the budget JSON's keys beside ``"type"``) is read too. Raises BudgetError."""
    inner = data.get("budget")
    if isinstance(inner, Mapping):
        return budget_from_dict(inner)
    if "parameters" in data:
        return budget_from_dict(data)
    raise BudgetError("a budget record must carry the budget JSON under 'budget'")


def server_capacity(header: Mapping | None) -> dict | None:
    """What the server allocated for sequences, from the run header.

    ``header["server_capacity"]`` ({engine, sequences, tokens_per_sequence, total_tokens, note, source}) when
    the writer put it there; else, for older headers, llama.cpp's slots from ``environment.server``."""
    if not header:
        return None
    cap = header.get("server_capacity")
    if isinstance(cap, Mapping) and (_int(cap.get("sequences")) or _int(cap.get("total_tokens"))):
        out = {k: cap.get(k) for k in ("engine", "sequences", "tokens_per_sequence", "total_tokens", "note", "source")}
        out.update({k: cap[k] for k in ENGINE_KEYS if cap.get(k) is not None})  # vLLM's allocation figures
        if str(out.get("engine") or "").lower() in ("llamacpp", "llama.cpp") and not out.get("note"):
            out["note"] = LLAMACPP_NOTE
        return out
    env = header.get("environment")
    srv = env.get("server") if isinstance(env, Mapping) else None
    if isinstance(srv, Mapping) and str(srv.get("engine") or "").lower() in ("llamacpp", "llama.cpp"):
        slots, per = _int(srv.get("slots")), _int(srv.get("n_ctx_per_slot"))
        if slots:
            return {"engine": "llamacpp", "sequences": slots, "tokens_per_sequence": per,
                    "total_tokens": slots * per if per else None, "note": LLAMACPP_NOTE,
                    "source": "run header environment.server (llama.cpp /props)"}
    return None


#: what vLLM states about its KV allocation (the run header's ``server_capacity``, written by
#: ``tui.sources.server_info``); passed through when present
ENGINE_KEYS = ("kv_cache_memory_bytes", "block_size", "num_blocks", "kv_cache_size_tokens", "kv_cache_max_concurrency",
               "cache_dtype", "max_model_len", "engines")

LLAMACPP_NOTE = ("llama.cpp's context (n_ctx, split over its slots) is set by the operator (-c, -np), "
                 "not derived from free memory")


def _int(v: Any) -> int | None:
    """A positive finite count, else None (wrong types, NaN, inf, and integers beyond a float's range)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return int(v) if math.isfinite(f) and f > 0 else None


def capacity_sentence(budget: Any, cap: Mapping | None) -> str | None:
    """"Predicted room for 15 sequences of 4096 tokens; the server allocated room for 4 (2048 tokens each)."."""
    if cap is None:
        return None
    if budget is None:
        first = "Predicted room: unknown (no budget)"
    else:
        first = f"Predicted room for {budget.candidate} sequences of {budget.inputs.max_seq} tokens"
    seqs, per, total = _int(cap.get("sequences")), _int(cap.get("tokens_per_sequence")), _int(cap.get("total_tokens"))
    if seqs:
        room = f"{seqs} sequences" + (f" of {per} tokens" if per else "")
    else:
        room = f"{total} tokens in all"
    engine = cap.get("engine")
    text = f"{first}; the server{f' ({engine})' if engine else ''} allocated room for {room}."
    conc = cap.get("kv_cache_max_concurrency")
    if isinstance(conc, (int, float)) and not isinstance(conc, bool) and math.isfinite(conc) and conc > 0:
        text += f" Its own figure: maximum concurrency {conc:.2f}x"
        text += f" for {per:,} tokens per request." if per else "."
    if cap.get("note"):
        text += f" {cap['note']}."
    return text


@dataclass(frozen=True, slots=True)
class BudgetView:
    """What every view shows about the budget (the console's budget pane renders exactly this)."""

    known: bool
    state: str  # "feasible" | "does not fit" | "unknown"
    origin: str | None  # where the budget came from; None when unknown
    teaching: bool  # the teaching case: an example, labelled wherever shown
    candidate: int | None
    hint: str | None  # the flags that would give a budget (unknown only)
    server: dict | None  # server_capacity(header)
    capacity_line: str | None  # capacity_sentence(...)
    problem: str | None = None  # a budget record that failed verification
    allocation: dict | None = None  # the config's KV allocation predicted beside the engine's (AllocationCheck)
    server_log: dict | None = None  # the engine's startup log figures (``--server-log``)
    server_log_line: str | None = None  # server_log_sentence(...)
    #: where the memory the budget divides came from ("KV space 1.00 GiB: vLLM's own kv_cache_memory_bytes ...",
    #: "GPU 80.00 GiB ...: flags"); None when unknown (issue 22: never a default nobody gave)
    memory: str | None = None

    @property
    def phrase(self) -> str:
        """'feasible (candidate 15)' / 'feasible (teaching case)' / 'does not fit' / 'unknown'."""
        if not self.known:
            return "unknown"
        if self.state == "feasible":
            return "feasible (teaching case)" if self.teaching else f"feasible (candidate {self.candidate})"
        return self.state + (" (teaching case)" if self.teaching else "")

    def as_dict(self) -> dict:
        return {"known": self.known, "state": self.state, "origin": self.origin, "teaching": self.teaching,
                "memory_only_candidate": self.candidate, "hint": self.hint, "server_capacity": self.server,
                "capacity_vs_server": self.capacity_line, "problem": self.problem, "memory": self.memory,
                "allocation_vs_engine": self.allocation, "server_log": self.server_log,
                "server_log_vs_candidate": self.server_log_line}


def is_teaching(budget: Any) -> bool:
    return budget is not None and getattr(budget, "inputs", None) == BudgetInputs()


def server_log_sentence(candidate: int | None, log: Mapping | None, cap: Mapping | None = None) -> str | None:
    """"vLLM's startup log: maximum concurrency 22.75x for 2,048 tokens per request, KV cache size 46,592 tokens
    (server.log); memory-only candidate 22."."""
    if not log:
        return None
    parts = []
    conc, tokens_per = log.get("max_concurrency"), log.get("concurrency_tokens")
    if conc is not None:
        parts.append(f"maximum concurrency {conc:.2f}x" + (f" for {tokens_per:,} tokens per request" if tokens_per else ""))
    if log.get("kv_cache_size_tokens") is not None:
        parts.append(f"KV cache size {log['kv_cache_size_tokens']:,} tokens")
    if log.get("max_num_batched_tokens") is not None:
        parts.append(f"max_num_batched_tokens {log['max_num_batched_tokens']:,}")
    if not parts:
        return f"the server log ({log.get('source') or '?'}) states no KV allocation line"
    cand = "unknown (no budget)" if candidate is None else str(candidate)
    text = f"vLLM's startup log: {', '.join(parts)} ({log.get('source') or '?'}); memory-only candidate {cand}."
    return text + log_mismatch(log, cap)


def log_mismatch(log: Mapping, cap: Mapping | None) -> str:
    """" NOT THIS RUN'S ENGINE? ..." when the log's figures differ from what the run's engine stated (its
    ``cache_config_info`` in the run header): a log of another start, another model or another setting."""
    if not cap:
        return ""
    diffs = []
    # the log prints the concurrency with 2 decimals ("22.75x") and the token count whole ("46,592")
    for key, cap_key, what, slack in (("max_concurrency", "kv_cache_max_concurrency", "maximum concurrency", 0.0051),
                                      ("kv_cache_size_tokens", "kv_cache_size_tokens", "KV cache size", 0.0)):
        a, b = log.get(key), cap.get(cap_key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) > slack:
            diffs.append(f"{what} {a:,} in the log, {b:,} from the run's engine")
    if not diffs:
        return ""
    return (" NOT THIS RUN'S ENGINE? " + "; ".join(diffs)
            + ": the log may be from another start, model or setting (the run header's figures are the ones judged).")


def _allocation(budget: Any, cap: Mapping | None, log: Mapping | None) -> dict | None:
    """The prediction beside the engine's allocation, when the engine stated its KV space."""
    if budget is None or not cap or cap.get("kv_cache_memory_bytes") is None:
        return None
    mnbt = log.get("max_num_batched_tokens") if log else None
    return compare_allocation(budget.inputs, cap, mnbt if isinstance(mnbt, int) else None).as_dict()


def with_server_log(view: BudgetView, budget: Any, server_log: Mapping | None) -> BudgetView:
    """``view`` with the engine's startup-log figures beside the memory-only candidate (and the allocation check
    redone with the log's max_num_batched_tokens); every other field kept as it is."""
    if not server_log:
        return view
    log = dict(server_log)
    return dataclasses.replace(view, server_log=log, server_log_line=server_log_sentence(view.candidate, log, view.server),
                               allocation=_allocation(budget, view.server, log))


def budget_view(budget: Any, origin: str | None, header: Mapping | None, problem: str | None = None,
                memory: str | None = None, hint: str | None = None, server_log: Mapping | None = None) -> BudgetView:
    """``memory``: where the budget's memory came from (shown with it); ``hint``: an unknown budget's own hint (the
    missing memory input, ``tui.core.budget.memory``) instead of the generic one; ``server_log``: the engine's
    startup-log figures (``tui.sources.server_log``), shown beside the memory-only candidate."""
    cap = server_capacity(header)
    log = dict(server_log) if server_log else None
    if budget is None:
        return BudgetView(False, "unknown", None, False, None, hint or BUDGET_HINT, cap, capacity_sentence(None, cap),
                          problem, server_log=log, server_log_line=server_log_sentence(None, log, cap))
    cand = int(budget.candidate)
    return BudgetView(True, "feasible" if budget.fits else "does not fit", origin, is_teaching(budget),
                      cand, None, cap, capacity_sentence(budget, cap), problem,
                      allocation=_allocation(budget, cap, log), server_log=log,
                      server_log_line=server_log_sentence(cand, log, cap), memory=memory)
