"""The acceptance report's analysis: budget, environment, load, measured results, quality, cost, rollback, conclusion.

Pure domain, standard library only. The inputs are already-analysed snapshots (one per record
file, from the core ``Monitor``), the budget, a quality result dict and a few numbers; nothing is
read here and no statistic is recomputed: every per-level number comes from the snapshot, and the
measured capacity with what limits it from ``tui.core.capacity.measure_capacity`` (the function the
console's sweep pane and `servewatch sweep` use). Each section is one ``*_section`` function returning
plain data; ``build_acceptance(...) -> dict`` assembles the JSON document.

Rendering lives in ``tui.core.acceptance_render`` (one markdown function per section, and the HTML
page); ``render_markdown`` and ``render_html`` are re-exported here. See ``docs/acceptance.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.core import provenance as _prov
from tui.core import quality as Q
from tui.core.budgetview import budget_view, server_capacity
from tui.core.capacity import CapRow, cap_rows, goodput_drop, measure_capacity  # noqa: F401 (goodput_drop re-exported)
from tui.core.levels import (  # noqa: F401 (re-exported)
    LevelNotInFile,
    combine_states,
    judge_level,
    level_key,
    row_mode,
)
from tui.core.quality_policy import QualityPolicy, file_settings_note, policy_problems
from tui.core.quality_policy import recompute as recompute_quality
from tui.core.redact import redact_url, scrub
from tui.core.report import conclusion as three_part_conclusion
from tui.core.snapshot import (
    FAIL,
    INSUFFICIENT_WINDOW,
    UNDECIDED,
    LevelRow,
    Snapshot,
)

SCHEMA = "servewatch.acceptance/1"
GIB = 2**30

READY = "ready for real traffic"
NOT_READY = "NOT ready for real traffic"

#: Default multi-window burn-rate rules: (name, long window, short window, burn rate, action).
DEFAULT_BURN_RULES = (
    ("page", "1h", "5m", 14.4, "page the on-call engineer and roll back to the previous deployment"),
    ("ticket", "6h", "30m", 6.0, "open a ticket; roll back if the burn continues"),
)
_WINDOW_HOURS = {"1h": 1.0, "5m": 5 / 60, "6h": 6.0, "30m": 0.5}
SLO_PERIOD_HOURS = 30 * 24  # the error budget period the burn rates are calibrated for

_MISSING = "not recorded"


@dataclass(frozen=True)
class RunInput:
    """One record file, analysed by the core Monitor."""

    source: str
    snapshot: Snapshot


@dataclass(frozen=True)
class CostInputs:
    gpu_hour_usd: float | None = None
    gpus: int | None = None


# ------------------------------------------------------------------ small helpers


def _num(v: Any) -> float | None:
    """A finite number as a float, else None (unknown): wrong types, NaN, +-inf and integers too large for a
    float (``10**400`` in a record file)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _str(v: Any, limit: int = 200) -> str | None:
    if v is None:
        return None
    s = " ".join(str(v).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _fmt_level(level: float | None) -> str:
    return "-" if level is None else f"{level:g}"


def _pct(v: float | None, digits: int = 1) -> str:
    return "N/A" if v is None else f"{100 * v:.{digits}f}%"


def _f(v: float | None, digits: int = 2) -> str:
    return "N/A" if v is None else f"{v:.{digits}f}"


def _map(v: Any) -> Mapping[str, Any]:
    """``v`` when it is a mapping, else an empty one (a field a record file may lack or get wrong)."""
    return v if isinstance(v, Mapping) else {}


def _jsonable(x: Any) -> Any:
    """Replace non-finite floats (JSON cannot hold them) by strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _header_secrets(header: Mapping) -> list[str]:
    """Values in a run header's ``headers`` field that were not redacted by the writer (never printed)."""
    out = []
    hdrs = header.get("headers")
    if isinstance(hdrs, Mapping):
        for v in hdrs.values():
            if isinstance(v, str) and v.strip() and v.strip() != "<redacted>":
                out.append(v.strip())
                parts = v.split(None, 1)
                if len(parts) == 2:
                    out.append(parts[1])
    return out


def _header_names(header: Mapping) -> list[str]:
    hdrs = header.get("headers")
    if isinstance(hdrs, Mapping):
        return sorted(str(k)[:60] for k in hdrs)
    if isinstance(hdrs, list):
        return sorted(str(k)[:60] for k in hdrs if isinstance(k, str))
    return []


def provenance(snap: Snapshot) -> str:
    """"synthetic", "measured" (a header that says synthetic: false) or "unknown" (no header)."""
    if not snap.header:
        return "unknown"
    return "synthetic" if snap.synthetic else "measured"


# ------------------------------------------------------------------ 1. budget


def budget_section(budget: Any, source: str | None, header: Mapping | None = None) -> dict:
    """The budget as given (None: unknown, with the flags that would give one), and what the server allocated
    (from the first run header that says)."""
    view = budget_view(budget, source, header)
    extra = {"teaching": view.teaching, "hint": view.hint, "server_capacity": view.server,
             "capacity_vs_server": view.capacity_line}
    if budget is None:
        return {"given": False, "source": source, "fits": None, **extra}
    i = budget.inputs
    def gib(x: float) -> float:
        return round(float(x), 6)

    table = [
        {"item": "gpu_memory", "value": gib(i.gpu_gib), "unit": "GiB", "basis": "given (one GPU)"},
        {"item": "weights", "value": gib(budget.weights_gib), "unit": "GiB",
         "basis": f"{i.params:,.0f} params in {i.weights}" + (f", split over tp={i.tp}" if i.tp > 1 else "")},
        {"item": "runtime_margin", "value": gib(budget.margin_gib), "unit": "GiB", "basis": "assumption: not measured"},
        {"item": "cache_budget", "value": gib(budget.cache_budget_gib), "unit": "GiB",
         "basis": "gpu_memory - weights - runtime_margin"},
        {"item": "kv_per_seq", "value": gib(budget.kv_per_seq_gib), "unit": "GiB",
         "basis": f"{i.layers} layers x {i.kv_heads} KV heads x {i.head_dim} head_dim x {i.max_seq} tokens, {i.kv_dtype}"},
        {"item": "memory_only_candidate", "value": int(budget.candidate), "unit": "sequences",
         "basis": "floor(cache_budget / kv_per_seq): a number to load-test, not a limit"},
    ]
    return {
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
    }


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
        })
    return out


# ------------------------------------------------------------------ 4. measured results


def _percentiles(row: LevelRow) -> dict:
    out = {}
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


def _row_mode(row: LevelRow, header: Mapping) -> str | None:
    return row_mode(row.mode, header)


def level_row_dict(source: str, row: LevelRow, header: Mapping) -> dict:
    w, v = row.window, row.verdict
    return {
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
        "verdict": v.state,
        "reason": v.reason,
        "missing": v.missing,
        "window": {"n": v.n, "minutes": v.elapsed_s / 60.0, "vif": v.vif, "bursty": v.bursty, "n_eff": v.n_eff,
                   "need_requests": v.need_requests, "need_seconds": v.need_seconds},
        "saturated": row.saturated,
        "lateness_p99_ms": row.lateness_p99_ms,
        "max_waiting": row.max_waiting,
        "peak_gpu_gib": row.peak_gpu_gib,
        **({"cancelled_open": row.cancelled_open} if row.cancelled_open else {}),
        # the file held against itself (tui.core.evidence): what forbids PASS at this level, the load delivered
        "evidence_problems": list(row.problems) + ([row.not_reached] if row.not_reached and
                                                    row.not_reached not in " ".join(row.problems) else []),
        "delivered": row.delivered or None,
    }


def measured_section(
    runs: Sequence[RunInput], budget_candidate: int | None, required_level: float | None
) -> dict:
    """Section 4: every level row, the judged level and the measured capacity with what limits it
    (``tui.core.capacity.measure_capacity``, the function the console and `sweep` use too)."""
    rows: list[dict] = []
    crows: list[CapRow] = []
    for r in runs:
        crows += cap_rows(r.source, r.snapshot.levels, r.snapshot.header)
        for lr in r.snapshot.levels:
            rows.append(level_row_dict(r.source, lr, r.snapshot.header))
    rows.sort(key=lambda x: (str(x["mode"]), level_key(x["level"]), x["round"], x["source"]))
    cap = measure_capacity(crows, budget_candidate)
    n_by = {(m, lv): n for m, lv, n in cap.n_by_level}
    by_mode = [{"mode": t.mode, "unit": t.unit,
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
    problems = []
    for r in runs:
        sn = r.snapshot
        if sn.cancelled_note:
            notes.append(f"`{r.source}`: {sn.cancelled_note} (open ones are excluded from the good fraction and the "
                         "verdict; all stay in the record file)")
        if sn.malformed or sn.truncated or sn.unknown_types or sn.notes:
            problems.append({"source": r.source, "malformed": sn.malformed, "truncated": sn.truncated,
                             "unknown_types": sn.unknown_types, "examples": [_str(e) for e in sn.malformed_examples],
                             "notes": [_str(n) for n in sn.notes]})
    return {
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
    }


# ------------------------------------------------------------------ 5. quality


QUALITY_PHRASES = {
    Q.FAIL: ("FAIL: the candidate answers worse than the baseline by more than the margin; "
             "fall back to a larger model or a different quantization"),
    Q.NO_EVIDENCE: ("NO_EVIDENCE: too few usable paired cases, a side with no successful case, or too little "
                    "evidence to show the drop is below the margin"),
    Q.NO_BASELINE: "no baseline: absolute pass rates only, so a regression cannot be ruled out",
}


def quality_section(doc: Mapping | None, source: str | None, measured_models: Sequence[str],
                    policy: QualityPolicy | None = None) -> dict:
    """Section 5: the quality verdict recomputed from the file's per-case rows with accept's own policy (its
    margin / alpha / minimum cases, never the file's), and why it is not acceptance-grade (tui.core.quality_policy)."""
    if doc is None:
        return {"run": False, "state": "not run", "source": None}
    policy = policy or QualityPolicy()
    comparison, verdict = recompute_quality(doc, policy)
    notes: list[str] = []
    saved = _map(doc.get("verdict"))
    if saved.get("state") and saved.get("state") != verdict["state"]:
        notes.append(f"the file says {saved.get('state')}, its cases say {verdict['state']} under accept's policy: "
                     "the recomputed verdict is used")
    own = file_settings_note(doc, policy)
    if own:
        notes.append(own)
    cand = _map(doc.get("candidate"))
    base = doc.get("baseline") if isinstance(doc.get("baseline"), Mapping) else None
    s_c = Q.summarize(cand.get("cases") or [])
    s_b = Q.summarize(base.get("cases") or []) if base else None
    tgt = _map(cand.get("target"))
    qmodel = _str(tgt.get("model"))
    not_grade = policy_problems(doc, policy, measured_models)
    st = _map(doc.get("set"))
    if st.get("starter"):
        notes.append("quality used the STARTER set: replace it with the team's own key tasks")
    return {
        "run": True,
        "source": source,
        "synthetic": bool(doc.get("synthetic", False)),
        "state": verdict["state"],
        "reason": verdict["reason"],
        "fallback": verdict.get("fallback"),
        "target": {"url": redact_url(tgt.get("url")), "model": qmodel},
        "baseline": None if base is None else {
            "source": _str(base.get("source")),
            "url": redact_url((base.get("target") or {}).get("url")) if isinstance(base.get("target"), Mapping) else None,
            "model": _str((base.get("target") or {}).get("model")) if isinstance(base.get("target"), Mapping) else None,
            "overall": s_b["overall"] if s_b else None,
        },
        "set": {"source": _str(st.get("source")), "label": _str(st.get("label")), "starter": bool(st.get("starter")),
                "cases": len(cand.get("cases") or []),
                "long_context": _map(st.get("long_context"))},
        "candidate_overall": s_c["overall"],
        "categories": s_c["categories"],
        "baseline_categories": s_b["categories"] if s_b else None,
        "comparison": None if comparison is None else {k: comparison.get(k) for k in (
            "paired", "dropped", "both_pass", "regressed", "improved", "both_fail", "delta", "margin", "alpha",
            "min_cases", "mcnemar_p_worse", "p_worse_by_more_than_margin", "p_noninferior",
            "p_noninferior_exact_guard")},
        "failed_requests": s_c["failed_requests"],
        "policy": {"margin": policy.margin, "alpha": policy.alpha, "min_cases": policy.min_cases},
        "not_acceptance_grade": not_grade,
        "notes": notes + [n for n in (comparison or {}).get("notes", []) if isinstance(n, str)],
    }


def tied_text(runs: Sequence[RunInput], qsec: Mapping) -> str:
    """Which load files and which quality file were tied, by model and endpoint."""
    loads = []
    for r in runs:
        tgt = _map(r.snapshot.header.get("target"))
        loads.append(f"{r.source} (model {_str(tgt.get('model')) or 'unknown'}, endpoint "
                     f"{redact_url(tgt.get('url')) or 'unknown'})")
    t = _map(qsec.get("target"))
    return (f"load {', '.join(loads) or 'none'} tied to quality {qsec.get('source')} (model "
            f"{t.get('model') or 'unknown'}, endpoint {t.get('url') or 'unknown'})")


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


# ------------------------------------------------------------------ 6. cost


def cost_section(cost: CostInputs, measured: Mapping) -> dict:
    price = cost.gpu_hour_usd
    gpus = cost.gpus if cost.gpus is not None else 1
    out: dict[str, Any] = {
        "gpu_hour_usd": price,
        "gpus": gpus,
        "gpus_assumed": cost.gpus is None,
        "usd_per_hour": None if price is None else price * gpus,
        "capacity_level": measured.get("measured_capacity"),
        "output_tok_per_s": None,
        "goodput_per_s": None,
        "usd_per_1m_output_tokens": None,
        "usd_per_1000_good_requests": None,
        "status": "",
        "basis": ("throughput at the measured capacity, the slowest round there (conservative); assumes the "
                  "deployment is kept busy at that load: idle time raises the real cost"),
    }
    if price is None:
        out["status"] = "N/A: no price given (--gpu-hour-usd)"
        return out
    if not measured.get("has_measured_capacity"):
        out["status"] = "N/A: no measured capacity (no level PASSes)"
        return out
    cap = measured.get("measured_capacity")
    rows = [r for r in measured["levels"] if r["mode"] == measured["primary_mode"] and r["level"] == cap]
    toks = [r["output_tok_per_s"] for r in rows if r["output_tok_per_s"]]
    good = [r["goodput_per_s"] for r in rows if r["goodput_per_s"]]
    out["output_tok_per_s"] = min(toks) if toks else None
    out["goodput_per_s"] = min(good) if good else None
    per_hour = price * gpus
    if toks:
        out["usd_per_1m_output_tokens"] = per_hour / (min(toks) * 3600.0) * 1e6
    if good:
        out["usd_per_1000_good_requests"] = per_hour / (min(good) * 3600.0) * 1000.0
    out["status"] = "computed" if toks and good else "partly N/A: throughput not recorded at the measured capacity"
    return out


# ------------------------------------------------------------------ 7. rollback


def default_rollback_rules(target: float, slo_ttft_ms: float) -> tuple[list[dict], list[str]]:
    """Multi-window burn-rate rules on the acceptance SLO (error budget = 1 - target)."""
    budget = 1.0 - target
    rules, notes = [], []
    for name, long_w, short_w, burn, action in DEFAULT_BURN_RULES:
        thr = burn * budget
        spent = burn * _WINDOW_HOURS[long_w] / SLO_PERIOD_HOURS
        rule = {
            "name": name,
            "long_window": long_w,
            "short_window": short_w,
            "burn_rate": burn,
            "error_budget": budget,
            "bad_fraction_threshold": min(1.0, thr),
            "budget_spent_in_long_window": spent,
            "condition": (f"the share of bad requests (failed, or TTFT over {slo_ttft_ms:g} ms) over the last "
                          f"{long_w} AND over the last {short_w} both exceed {_pct(min(1.0, thr))} "
                          f"({burn:g}x the {_pct(budget)} error budget)"),
            "action": action,
            "can_fire": thr < 1.0,
        }
        if thr >= 1.0:
            notes.append(f"the {name} rule needs more than 100% bad requests at target {target:g}: it can never fire; "
                         "use a lower burn rate for such a loose target")
        rules.append(rule)
    return rules, notes


def parse_rollback_rules(text: str, source: str = "<rollback>") -> list[str]:
    """User rollback rules: a JSON list (strings, or objects rendered as 'key: value; ...') or one rule per line
    (blank lines and # comments ignored). Raises ValueError on a malformed JSON list."""
    s = text.strip()
    if not s:
        return []
    if s.startswith("["):
        try:
            items = json.loads(s)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{source}: not a valid JSON list: {str(exc)[:80]}") from None
        if not isinstance(items, list):
            raise ValueError(f"{source}: expected a JSON list")
        out = []
        for i, it in enumerate(items, 1):
            if isinstance(it, str) and it.strip():
                out.append(" ".join(it.split()))
            elif isinstance(it, Mapping) and it:
                if isinstance(it.get("rule"), str):
                    out.append(" ".join(it["rule"].split()))
                else:
                    out.append("; ".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in it.items()))
            else:
                raise ValueError(f"{source}: item {i} is neither a rule string nor an object")
        return out
    return [" ".join(line.split()) for line in s.splitlines() if line.strip() and not line.strip().startswith("#")]


# ------------------------------------------------------------------ the document


def build_acceptance(
    *,
    runs: Sequence[RunInput],
    budget: Any = None,
    budget_source: str | None = None,
    quality: Mapping | None = None,
    quality_source: str | None = None,
    cost: CostInputs | None = None,
    rollback_rules: Sequence[str] = (),
    rollback_source: str | None = None,
    slo_ttft_ms: float = 1000.0,
    target: float = 0.95,
    alpha: float = 0.05,
    min_window_s: float = 600.0,
    required_level: float | None = None,
    generator: Mapping | None = None,
    generated_at: str | None = None,
    quality_policy: QualityPolicy | None = None,
    settings_changed: Sequence[str] = (),
    not_acceptance_grade: Sequence[str] = (),
    input_notes: Sequence[str] = (),
) -> dict:
    """The acceptance document (JSON-ready dict). ``quality`` must pass ``quality.recheck`` (SetError otherwise).

    ``settings_changed``: the acceptance settings that differ from their defaults (named in the verdict);
    ``not_acceptance_grade``: those weaker than a floor (``tui.core.grade``): never "ready"; ``input_notes``:
    what was done with the inputs (a file given twice, files of other models left out)."""
    cost = cost or CostInputs()
    prov: list[dict[str, Any]] = [{"source": r.source, "provenance": provenance(r.snapshot), "data_from": _prov.describe(r.snapshot.header),
             "source_block": _prov.source_block(r.snapshot.header)} for r in runs]
    synthetic = any(p["provenance"] == "synthetic" for p in prov) or bool(quality and quality.get("synthetic"))
    unknown: list[str] = [p["source"] for p in prov if p["provenance"] == "unknown"]
    banner_parts = []
    if synthetic:
        syn = [p["source"] for p in prov if p["provenance"] == "synthetic"]
        if quality and quality.get("synthetic"):
            syn.append(str(quality_source or "quality result"))
        banner_parts.append(f"SYNTHETIC: input labelled synthetic ({', '.join(syn)}); nothing in this report is a "
                            "measurement of a real deployment.")
    if unknown:
        banner_parts.append(f"PROVENANCE UNKNOWN: {', '.join(unknown)} has no run header; it may not be a real "
                            "measurement.")
    cap_header = next((r.snapshot.header for r in runs if server_capacity(r.snapshot.header)), None)
    bsec = budget_section(budget, budget_source, cap_header)
    cand = bsec.get("memory_only_candidate")
    measured = measured_section(runs, cand, required_level)
    models = sorted({m for r in runs for m in [
        _str((r.snapshot.header.get("target") or {}).get("model")) if isinstance(r.snapshot.header.get("target"), Mapping) else None
    ] if m})
    qsec = quality_section(quality, quality_source, models, quality_policy)
    if qsec["run"]:
        qsec["tied"] = tied_text(runs, qsec)
    csec = cost_section(cost, measured)
    drules, rnotes = default_rollback_rules(target, slo_ttft_ms)

    # 8. conclusion
    qstate = qsec["state"]
    q_arg = None if not qsec["run"] else ("PASS" if qstate == Q.PASS else QUALITY_PHRASES.get(qstate, qstate))
    if q_arg == "PASS" and qsec.get("not_acceptance_grade"):
        q_arg = f"not acceptance-grade ({'; '.join(qsec['not_acceptance_grade'])})"
    ready, lines = three_part_conclusion(bsec.get("fits"), measured["state"], q_arg, teaching=bool(bsec.get("teaching")))
    if measured["state"] in (INSUFFICIENT_WINDOW, UNDECIDED):
        miss = judged_missing(measured)  # the judged level's own gap, the same rule as `report`
        if miss:
            lines = [ln if not ln.startswith("Measured:") else f"{ln[:-1]} ({miss})." for ln in lines]
    problems = judged_problems(measured) if measured["state"] != FAIL else []
    if problems:
        lines.append(f"Measured: the record files do not support a PASS at the judged level: {problems[0]}"
                     + (f" (and {len(problems) - 1} more evidence problems)" if len(problems) > 1 else "") + ".")
    if not_acceptance_grade:
        lines.append(f"Settings: not acceptance-grade ({', '.join(not_acceptance_grade)}): fine for a quick check, "
                     "never 'ready'; use the defaults or stricter.")
    if synthetic:
        lines.append("Provenance: synthetic inputs can check the arithmetic but can never show readiness; "
                     "measure the real deployment.")
    if unknown:
        lines.append("Provenance: record files without a run header cannot show readiness; record with "
                     "`servewatch run`.")
    if not runs:
        lines.append("Measured: no record files.")
    ready = ready and not synthetic and not unknown and bool(runs) and not not_acceptance_grade
    failed = (bsec.get("fits") is False) or measured["state"] == FAIL or qstate == Q.FAIL
    exit_code = 0 if ready else (1 if failed else 3)
    cap = measured["measured_capacity"]
    conclusion = {
        "budget": "unknown" if not bsec.get("given") else ("feasible" if bsec["fits"] else "does not fit"),
        "budget_feasible": bsec.get("fits"),
        "memory_only_candidate": cand,
        "measured": measured["state"],
        "measured_capacity": cap,
        "quality": "not run" if not qsec["run"] else qstate,
        "ready_for_traffic": ready,
        "verdict": READY if ready else NOT_READY,
        "at_load": (None if not (ready and measured["has_measured_capacity"]) else
                    ("at the recorded load" if cap is None else f"up to {measured['unit']} {_fmt_level(cap)}")),
        "missing_or_failed": lines,
        "settings_changed": list(settings_changed),
        "not_acceptance_grade": list(not_acceptance_grade),
    }
    doc = {
        "schema": SCHEMA,
        "generated_at": generated_at,
        "generator": dict(generator or {}),
        "synthetic": synthetic,
        "provenance": prov,
        "banner": " ".join(banner_parts) or None,
        "inputs": {"records": [r.source for r in runs], "quality": quality_source, "budget": budget_source,
                   "rollback": rollback_source, "notes": list(input_notes)},
        "slo": {"ttft_ms": slo_ttft_ms, "target": target, "alpha": alpha, "min_window_minutes": min_window_s / 60.0,
                "good": f"completed AND client TTFT <= {slo_ttft_ms:g} ms, over all measured requests"},
        "budget": bsec,
        "environment": environment_section(runs, generator or {}),
        "load_configuration": load_section(runs),
        "measured": measured,
        "quality": qsec,
        "cost": csec,
        "rollback": {"defaults": drules, "user": list(rollback_rules), "user_source": rollback_source, "notes": rnotes},
        "conclusion": conclusion,
        "exit_code": exit_code,
    }
    secrets: list[str] = []
    for r in runs:
        secrets += _header_secrets(r.snapshot.header)
    return _jsonable(scrub(doc, secrets))


from tui.core.acceptance_render import render_html, render_markdown  # noqa: E402, F401 (the public names; imported last: acceptance_render imports this module)
