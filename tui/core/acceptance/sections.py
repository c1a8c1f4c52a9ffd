"""Sections 1 to 4 of the acceptance report: the budget, the environment, the load configuration and the measured
results (every level row, the judged level, the measured capacity with what limits it), and the judged level's
own gap and evidence problems.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

import tui.core.provenance as _prov
from tui.core.acceptance.inputs import GIB, RunInput, _fmt_level, _header_names, _map, _num, _pct, _str, provenance
from tui.core.budgetview import budget_view
from tui.core.capacity import CapRow, cap_rows, measure_capacity
from tui.core.levels import judge_level, level_key, row_mode
from tui.core.redact import redact_url
from tui.core.report_doc import JudgedDoc
from tui.core.search import capacity_bracket
from tui.core.slos import SLO_JSON_KEYS
from tui.core.snapshot import FAIL, INSUFFICIENT_WINDOW, JsonValue, LevelRow, Snapshot, json_get
from tui.core.stats import LatencyDoc, latency_json
from tui.core.workload import describe_header

# ------------------------------------------------------------------ the sections' types
# What sections 1 and 4 of the acceptance document hold (``tui.core.acceptance.document.AcceptanceDoc`` carries
# them): a misspelled key is a mypy error; tests/unit/core/acceptance/test_typed_documents.py checks these keys
# against what the builders below produce.


class BudgetTableRow(TypedDict):
    item: str
    value: float | int
    unit: str
    basis: str


class BudgetVariantDoc(TypedDict):
    name: str
    weights_gib: float
    kv_per_seq_gib: float
    cache_budget_gib: float
    candidate: int


class AssumptionDoc(TypedDict):
    text: str
    status: str


class BudgetSection(TypedDict):
    """Section 1 (``budget_section``): the budget as given, or unknown with the flags that would give one."""

    given: bool
    source: str | None
    fits: bool | None
    teaching: bool
    hint: str | None
    server_capacity: dict[str, Any] | None  # tui.core.budgetview.server_capacity
    capacity_vs_server: str | None
    memory: str | None
    allocation_vs_engine: NotRequired[dict[str, Any]]  # only when known
    server_log: NotRequired[dict[str, Any]]
    server_log_vs_candidate: NotRequired[str]
    # a budget given:
    model: NotRequired[str | None]
    verdict: NotRequired[str]
    memory_only_candidate: NotRequired[int]
    cache_budget_gib: NotRequired[float]
    table: NotRequired[list[BudgetTableRow]]
    variants: NotRequired[list[BudgetVariantDoc]]
    assumptions: NotRequired[list[AssumptionDoc]]
    note: NotRequired[str]


class AcceptPercentileDoc(TypedDict):
    value_ms: float | str | None
    n: int
    n_needed: int
    supported: bool
    approximate: bool
    label: str | None  # "insufficient n" when the n does not support the value


class LevelWindowDoc(TypedDict):
    n: int
    minutes: float
    vif: float
    bursty: bool
    n_eff: float
    need_requests: int
    need_seconds: float


class AcceptLevelRow(TypedDict):
    """One level row of section 4 (``level_row_dict``): a level and round of one record file."""

    source: str
    level: float | None
    round: int
    mode: str | None
    n: int
    good: int
    good_fraction: float | None
    wilson_95: list[float | None]
    completed: int
    slow: int
    failed: int
    ttft_ms: dict[str, AcceptPercentileDoc]  # "P50", "P95", "P99"
    tpot_ms_p50: float | None
    req_per_s: float | None
    output_tok_per_s: float | None
    goodput_per_s: float | None
    latency: dict[str, LatencyDoc]  # "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"
    throughput_rps: float | None
    goodput_rps: float | None
    goodput_tok_s: float | None
    misses: dict[str, int]
    miss_combos: dict[str, int]
    unjudgeable: dict[str, int]
    verdict: str
    reason: str
    missing: str | None
    window: LevelWindowDoc
    saturated: bool
    lateness_p99_ms: float | None
    max_waiting: float | None
    mean_waiting: float | None
    queue_samples: int
    peak_kv_usage: float | None
    peak_gpu_gib: float | None
    output_tokens_received_max: JsonValue
    cancelled_open: NotRequired[int]  # only when some were
    evidence_problems: list[str]
    delivered: str | None
    search_probe: NotRequired[bool]  # a probe of `sweep --search`


class ModeLevelDoc(TypedDict):
    level: float | None
    state: str
    rounds: int
    n: int


class ModeTableDoc(TypedDict):
    mode: str | None
    unit: str
    levels: list[ModeLevelDoc]
    capacity: float | None
    has_capacity: bool


class InputProblemDoc(TypedDict):
    source: str
    malformed: int
    truncated: int
    unknown_types: int
    examples: list[str | None]
    notes: list[str | None]


class EvidenceProblemsDoc(TypedDict):
    source: str
    problems: list[str | None]


class MeasuredSection(TypedDict):
    """Section 4 (``measured_section``): every level row, the judged level, the measured capacity."""

    levels: list[AcceptLevelRow]
    summary: str | None
    by_mode: list[ModeTableDoc]
    primary_mode: str | None
    unit: str
    measured_capacity: float | None
    has_measured_capacity: bool
    memory_only_candidate: int | None
    required_level: float | None
    judged: JudgedDoc | None
    capacity_vs_memory: list[str]
    state: str
    reason: str
    notes: list[str]
    input_problems: list[InputProblemDoc]
    evidence_problems: list[EvidenceProblemsDoc]
    capacity_brackets: NotRequired[list[dict[str, Any]]]  # `sweep --search` files: tui.core.search.capacity_bracket
    memory_queue: NotRequired[dict[str, Any]]  # added by the document: tui.core.acceptance.measured_extra


# ------------------------------------------------------------------ 1. budget


def budget_section(budget: Any, source: str | None, header: Mapping | None = None, hint: str | None = None,
                   memory: str | None = None, server_log: Mapping | None = None) -> BudgetSection:
    """The budget as given (None: unknown, with the flags that would give one, or ``hint``: the missing memory
    input), and what the server allocated (from the first run header that says); ``memory``: where the memory the
    budget divides came from; with vLLM's allocation figures, the config's prediction beside them
    (``allocation_vs_engine``), and the engine's startup-log figures (``server_log``) when given."""
    view = budget_view(budget, source, header, memory=memory, hint=hint, server_log=server_log)
    extra = {"teaching": view.teaching, "hint": view.hint, "server_capacity": view.server,
             "capacity_vs_server": view.capacity_line, "memory": view.memory}
    for key, value in (("allocation_vs_engine", view.allocation), ("server_log", view.server_log),
                       ("server_log_vs_candidate", view.server_log_line)):
        if value is not None:  # only when known: older documents keep their shape
            extra[key] = value
    if budget is None:
        return cast(BudgetSection, {"given": False, "source": source, "fits": None, **extra})
    i = budget.inputs
    def gib(x: float) -> float:
        return round(float(x), 6)

    basis = memory.partition(": ")[2] if memory else None  # "KV space 1.00 GiB: vLLM's own ..." -> where from
    if i.kv_space_bytes:  # the KV space itself (--kv-cache-gib, or the engine's own): no GPU size enters the budget
        head = [{"item": "kv_cache_space", "value": gib(i.kv_space_bytes / 2**30), "unit": "GiB",
                 "basis": basis or "given"}]
    else:
        head = [{"item": "gpu_memory", "value": gib(i.gpu_gib), "unit": "GiB", "basis": basis or "given (one GPU)"}]
    table = [
        *head,
        {"item": "weights", "value": gib(budget.weights_gib), "unit": "GiB",
         "basis": f"{i.params:,.0f} params in {i.weights}" + (f", split over tp={i.tp}" if i.tp > 1 else "")},
        {"item": "runtime_margin", "value": gib(budget.margin_gib), "unit": "GiB", "basis": "assumption: not measured"},
        {"item": "cache_budget", "value": gib(budget.cache_budget_gib), "unit": "GiB",
         "basis": "the KV cache space" if i.kv_space_bytes else "gpu_memory - weights - runtime_margin"},
        {"item": "kv_per_seq", "value": gib(budget.kv_per_seq_gib), "unit": "GiB",
         "basis": f"{i.layers} layers x {i.kv_heads} KV heads x {i.head_dim} head_dim x {i.max_seq} tokens, {i.kv_dtype}"},
        {"item": "memory_only_candidate", "value": int(budget.candidate), "unit": "sequences",
         "basis": "floor(cache_budget / kv_per_seq): a number to load-test, not a limit"},
    ]
    return cast(BudgetSection, {  # ``extra``: the keys beside the budget (declared in BudgetSection)
        "given": True,
        "source": source,
        "model": i.model or None,
        "fits": bool(budget.fits),
        "verdict": budget.verdict,
        "memory_only_candidate": int(budget.candidate),
        "cache_budget_gib": gib(budget.cache_budget_gib),
        "table": table,
        "variants": [
            {"name": v.name, "weights_gib": gib(v.weights_gib), "kv_per_seq_gib": gib(v.kv_per_seq_gib),
             "cache_budget_gib": gib(v.cache_budget_gib), "candidate": int(v.candidate)}
            for v in budget.variants
        ],
        "assumptions": [{"text": a, "status": "not measured"} for a in budget.assumptions],
        "note": budget.note,
        **extra,
    })


# ------------------------------------------------------------------ 2. environment


def _gpu_from_run(snap: Snapshot) -> dict:
    env = _map(snap.header.get("environment"))
    g = env.get("gpu")
    if isinstance(g, Mapping) and isinstance(g.get("devices"), list) and g["devices"]:
        devs = []
        for d in g["devices"]:
            if not isinstance(d, Mapping):
                continue
            mt = _num(d.get("memory_total"))
            devs.append({"name": _str(d.get("name")), "memory_gib": None if mt is None else round(mt / GIB, 2)})
        return {"available": True, "from": "run header (NVML)", "driver": _str(g.get("driver_version")),
                "cuda": _str(g.get("cuda_version")), "devices": devs}
    gs = snap.gpu
    if gs.available and gs.devices:
        return {"available": True, "from": "gpu records", "driver": None, "cuda": None,
                "devices": [{"name": d.name, "memory_gib": None if d.total_gib is None else round(d.total_gib, 2),
                             "peak_used_gib": None if d.peak_used_gib is None else round(d.peak_used_gib, 2)}
                            for d in gs.devices]}
    reason = None
    if isinstance(g, Mapping):
        reason = _str(g.get("reason") or g.get("gpu"))
    elif isinstance(g, str):
        reason = _str(g)
    return {"available": False, "from": None, "note": "no GPU telemetry" + (f" ({reason})" if reason else "")}


def environment_section(runs: Sequence[RunInput], generator: Mapping) -> dict:
    out_runs = []
    for r in runs:
        h = r.snapshot.header
        env = _map(h.get("environment"))
        srv = _map(env.get("server"))
        tgt = _map(h.get("target"))
        out_runs.append({
            "source": r.source,
            "provenance": provenance(r.snapshot),
            "data_from": _prov.describe(r.snapshot.header),
            "load_generator": {
                "servewatch": _str(env.get("servewatch") or h.get("tool_version")),
                "python": _str(env.get("python")),
                "httpx": _str(env.get("httpx")),
                "os": _str(env.get("os")),
            },
            "server": {
                "engine": _str(srv.get("engine")),
                "build": _str(srv.get("build")),
                "model": _str(srv.get("model")),
                "quantization": _str(srv.get("quantization")),
                "slots": srv.get("slots") if isinstance(srv.get("slots"), int) else None,
                "context_per_slot": srv.get("n_ctx_per_slot") if isinstance(srv.get("n_ctx_per_slot"), int) else None,
            },
            "target": {"url": redact_url(tgt.get("url")), "model": _str(tgt.get("model")), "api": _str(tgt.get("api"))},
            "request_headers": _header_names(h),
            "gpu": _gpu_from_run(r.snapshot),
            "note": _str(env.get("note")),
        })
    return {"report_generator": dict(generator), "runs": out_runs}


# ------------------------------------------------------------------ 3. load configuration


def _range(v: Any) -> str | None:
    if isinstance(v, Mapping):
        lo, hi = _num(v.get("min")), _num(v.get("max"))
        if lo is None and hi is None:
            return None
        if lo == hi:
            return f"{lo:g}"
        return f"{'?' if lo is None else f'{lo:g}'}-{'?' if hi is None else f'{hi:g}'}"
    n = _num(v)
    return None if n is None else f"{n:g}"


def load_section(runs: Sequence[RunInput]) -> list[dict]:
    out = []
    for r in runs:
        h = r.snapshot.header
        ld = _map(h.get("load"))
        levels = ld.get("levels")
        out.append({
            "source": r.source,
            "recorded": bool(ld),
            "mode": _str(ld.get("mode")),
            "level_unit": _str(ld.get("level_unit")) or {"closed": "concurrency", "open": "req/s"}.get(str(ld.get("mode"))),
            "arrival": _str(ld.get("arrival")),
            "burstiness": _num(ld.get("burstiness")),
            "input_tokens": _range(ld.get("input_tokens")),
            "output_tokens": _range(ld.get("output_tokens")),
            "ignore_eos": ld.get("ignore_eos") if isinstance(ld.get("ignore_eos"), bool) else None,
            "levels": [x for x in levels if _num(x) is not None] if isinstance(levels, list) else None,
            "requests_per_step": ld.get("requests") if isinstance(ld.get("requests"), int) else None,
            "duration_s": _num(ld.get("duration")),
            "warmup": ld.get("warmup") if isinstance(ld.get("warmup"), int) else None,
            "rounds": ld.get("rounds") if isinstance(ld.get("rounds"), int) else None,
            "seed": ld.get("seed") if isinstance(ld.get("seed"), (int, str)) and not isinstance(ld.get("seed"), bool) else None,
            "note": _str(ld.get("note")),
            "workload": describe_header(h),  # issue 23: what each request looked like, one line
            **_received(r.received),
        })
    return out


def _length(v: Any) -> dict | None:
    """{"min", "p50", "max"} of one received length from a summary's entry (None: not there)."""
    if not isinstance(v, Mapping):
        return None
    got = {"min": _num(v.get("min")), "p50": _num(v.get("p50", v.get("P50", v.get("median")))),
           "max": _num(v.get("max"))}
    n = v.get("n")
    if isinstance(n, int) and not isinstance(n, bool):
        got["n"] = n
    return got if any(got[k] is not None for k in ("min", "p50", "max")) else None


def _received(summary: Mapping[str, Any] | None) -> dict:
    """The lengths the records show (``RunInput.received``: ``tui.core.token_counts.TokenTally.summary()``, i.e.
    ``{"input": {"asked", "received"}, "output": {...}, "disagree": {...}}``; an older flat shape
    ``{"input_tokens": {min, p50, max}}`` is read too): per side the lengths received and the lengths the records say
    were asked, each {"min", "p50", "max", "n"} or None (not computed / not in the records), and the
    disagreements between the server's count and the client's (None: not computed)."""
    s = summary if isinstance(summary, Mapping) else {}
    out: dict[str, Any] = {}
    for side in ("input", "output"):
        entry = s.get(f"{side}_tokens", s.get(side))
        if isinstance(entry, Mapping) and ("received" in entry or "asked" in entry):
            out[f"{side}_tokens_received"] = _length(entry.get("received"))
            out[f"{side}_tokens_asked_seen"] = _length(entry.get("asked"))
        else:
            out[f"{side}_tokens_received"] = _length(entry)
            out[f"{side}_tokens_asked_seen"] = None
    dis = s.get("disagree")
    out["token_disagreements"] = None if not isinstance(dis, Mapping) else {
        k: dis.get(k) if isinstance(dis.get(k), int) and not isinstance(dis.get(k), bool) else None
        for k in ("output", "output_compared", "input", "input_compared")}
    out["received_computed"] = isinstance(summary, Mapping)
    return out


# ------------------------------------------------------------------ 4. measured results


def _percentiles(row: LevelRow) -> dict[str, AcceptPercentileDoc]:
    out: dict[str, AcceptPercentileDoc] = {}
    for p in row.window.ttft:
        v = p.value_ms
        out[p.label] = {
            "value_ms": None if v is None else (v if math.isfinite(v) else "inf"),
            "n": p.n,
            "n_needed": p.n_needed,
            "supported": p.supported,
            "approximate": p.approximate,
            "label": None if v is None or p.supported else "insufficient n",
        }
    return out


def _latency(row: LevelRow) -> dict[str, LatencyDoc]:
    """Each latency metric of the level as ``{"p50", "p95", "p99", "n"}`` in ms (``compare.latency_json``), from
    the snapshot (``WindowStat.latency``; TTFT falls back to ``WindowStat.ttft``); a metric the snapshot does not
    carry: all null, n 0."""
    w = row.window
    out = {}
    for key in SLO_JSON_KEYS:
        short = key.removesuffix("_ms")
        ps = w.latency.get(short) or (w.ttft if short == "ttft" else ())
        out[key] = latency_json(ps)
    return out


def _row_mode(row: LevelRow, header: Mapping) -> str | None:
    return row_mode(row.mode, header)


def level_row_dict(source: str, row: LevelRow, header: Mapping) -> AcceptLevelRow:
    w, v = row.window, row.verdict
    return cast(AcceptLevelRow, {  # the optional keys (cancelled_open, search_probe) only when they say something
        "source": source,
        "level": row.level,
        "round": row.round,
        "mode": _row_mode(row, header),
        "n": w.good.n,
        "good": w.good.good,
        "good_fraction": w.good.fraction,
        "wilson_95": [w.good.lo, w.good.hi],
        "completed": w.completed,
        "slow": w.slow,
        "failed": w.failed,
        "ttft_ms": _percentiles(row),
        "tpot_ms_p50": w.tpot_ms_p50,
        "req_per_s": w.req_per_s,
        "output_tok_per_s": w.output_tok_per_s,
        "goodput_per_s": w.goodput_per_s,
        # issue 21: every latency metric, goodput in requests and tokens beside throughput, misses per SLO
        "latency": _latency(row),
        "throughput_rps": w.req_per_s,
        "goodput_rps": w.goodput_per_s,
        "goodput_tok_s": w.good_output_tok_per_s,
        "misses": dict(w.misses),
        "miss_combos": dict(w.miss_combos),
        "unjudgeable": dict(w.unjudgeable),
        "verdict": v.state,
        "reason": v.reason,
        "missing": v.missing,
        "window": {"n": v.n, "minutes": v.elapsed_s / 60.0, "vif": v.vif, "bursty": v.bursty, "n_eff": v.n_eff,
                   "need_requests": v.need_requests, "need_seconds": v.need_seconds},
        "saturated": row.saturated,
        "lateness_p99_ms": row.lateness_p99_ms,
        "max_waiting": row.max_waiting,
        "mean_waiting": row.mean_waiting,
        "queue_samples": row.queue_samples,
        "peak_kv_usage": row.peak_kv_usage,
        "peak_gpu_gib": row.peak_gpu_gib,
        "output_tokens_received_max": json_get(row.tokens, "output", "received", "max"),
        **({"cancelled_open": row.cancelled_open} if row.cancelled_open else {}),
        # the file held against itself (tui.core.evidence): what forbids PASS at this level, the load delivered
        "evidence_problems": list(row.problems) + ([row.not_reached] if row.not_reached and
                                                    row.not_reached not in " ".join(row.problems) else []),
        "delivered": row.delivered or None,
        **({"search_probe": True} if row.search_probe else {}),  # issue 26: a probe of `sweep --search`
    })


def measured_section(
    runs: Sequence[RunInput], budget_candidate: int | None, required_level: float | None
) -> MeasuredSection:
    """Section 4: every level row, the judged level and the measured capacity with what limits it
    (``tui.core.capacity.measure_capacity``, the function the console and `sweep` use too)."""
    rows: list[AcceptLevelRow] = []
    crows: list[CapRow] = []
    for r in runs:
        crows += cap_rows(r.source, r.snapshot.levels, r.snapshot.header)
        for lr in r.snapshot.levels:
            rows.append(level_row_dict(r.source, lr, r.snapshot.header))
    rows.sort(key=lambda x: (str(x["mode"]), level_key(x["level"]), x["round"], x["source"]))
    cap = measure_capacity(crows, budget_candidate)
    n_by = {(m, lv): n for m, lv, n in cap.n_by_level}
    by_mode: list[ModeTableDoc] = [{"mode": t.mode, "unit": t.unit,
                "levels": [{"level": s.level, "state": s.state, "rounds": s.rounds, "n": n_by[(t.mode, s.level)]}
                           for s in t.levels],
                "capacity": t.capacity, "has_capacity": t.has_capacity} for t in cap.tables]
    judged = judge_level(((r["level"], r["mode"], r["verdict"]) for r in rows), required_level)
    state, reason, summary = INSUFFICIENT_WINDOW, "no measured requests in the record files", None
    unit, has_cap, capacity = cap.unit, cap.has_capacity, cap.capacity
    if judged is not None:
        state = judged.state
        reason = f"{judged.unit} {_fmt_level(judged.level)} ({judged.why}): {state}"
        if judged.rounds > 1:
            reason += f" ({judged.rounds} rounds combined: FAIL if any FAILs, PASS only if all PASS)"
        if has_cap and judged.level != capacity:
            reason += f"; measured capacity {cap.capacity_text}"
        elif not has_cap:
            reason += "; no level PASSes"
        frows = [r for r in rows if r["mode"] == cap.mode and r["level"] == judged.level]
        if frows:
            summary = "; ".join(
                f"{_pct(r['good_fraction'], 0)} good on {r['n']} requests at {unit} {_fmt_level(r['level'])}"
                + (f" round {r['round']}" if len(frows) > 1 else "") for r in frows)
    notes = list(cap.notes)
    problems: list[InputProblemDoc] = []
    for r in runs:
        sn = r.snapshot
        if sn.cancelled_note:
            notes.append(f"`{r.source}`: {sn.cancelled_note} (open ones are excluded from the good fraction and the "
                         "verdict; all stay in the record file)")
        if sn.malformed or sn.truncated or sn.unknown_types or sn.notes:
            problems.append({"source": r.source, "malformed": sn.malformed, "truncated": sn.truncated,
                             "unknown_types": sn.unknown_types, "examples": [_str(e) for e in sn.malformed_examples],
                             "notes": [_str(n) for n in sn.notes]})
    # every evidence problem of each file (the run-wide ones too: a file with no measured level still says what is
    # wrong with it, e.g. an import that disagrees with its tool's own summary)
    evidence: list[EvidenceProblemsDoc] = [{"source": r.source, "problems": [_str(p) for p in r.snapshot.evidence_problems]}
                for r in runs if r.snapshot.evidence_problems]
    brackets = []  # issue 26: each `sweep --search` file's capacity bracket
    for r in runs:
        br = capacity_bracket(r.snapshot.levels, r.snapshot.header, unit, cap.mode)
        if br is not None:
            brackets.append({"source": r.source, **br})
    out: MeasuredSection = {
        "levels": rows,
        "summary": summary,
        "by_mode": by_mode,
        "primary_mode": cap.mode if cap.tables else None,
        "unit": unit,
        "measured_capacity": capacity if has_cap else None,
        "has_measured_capacity": has_cap,
        "memory_only_candidate": budget_candidate,
        "required_level": required_level,
        "judged": None if judged is None else {
            "level": judged.level, "mode": judged.mode, "unit": judged.unit, "state": judged.state, "why": judged.why,
            "rounds": judged.rounds, "measured_capacity": judged.capacity,
            "has_measured_capacity": judged.has_capacity, "levels_present": list(judged.present),
            "text": judged.describe()},
        "capacity_vs_memory": list(cap.limits),
        "state": state,
        "reason": reason,
        "notes": notes,
        "input_problems": problems,
        "evidence_problems": evidence,
    }
    if brackets:
        out["capacity_brackets"] = brackets
    return out




def judged_problems(measured: Mapping) -> list[str]:
    """The evidence problems of the judged level's rows (the file held against itself), in order, once each."""
    j = measured.get("judged")
    out: list[str] = []
    if not j:
        return out
    for r in measured["levels"]:
        if r["mode"] == j["mode"] and r["level"] == j["level"]:
            out.extend(p for p in r.get("evidence_problems") or () if p not in out)
    return out


def judged_missing(measured: Mapping) -> str | None:
    """The judged level's own gap ("need 87 more requests, ..."): the row(s) of the level the verdict judges
    (``levels.judge_level``, the rule `report` uses), never another level's."""
    j = measured.get("judged")
    if not j:
        return None
    for r in measured["levels"]:
        if r["mode"] == j["mode"] and r["level"] == j["level"] and r["missing"] and r["verdict"] != FAIL:
            return str(r["missing"])
    return None
