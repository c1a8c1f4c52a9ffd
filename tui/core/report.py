"""Headless report: what a record file shows, next to the budget, with the three-part conclusion.

Pure formatting of a ``Snapshot`` (and optional budget); no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, cast

import tui.core.prefix_cache as _prefix_cache
import tui.core.provenance as _prov
import tui.core.search as _search
import tui.core.server_timing as _server_timing
import tui.core.token_counts as _token_counts
import tui.core.turns as _turns
import tui.core.workload as _workload
from tui.core.bounds import MAX_LEVELS
from tui.core.budgetview import budget_view as _budget_view
from tui.core.budgetview import with_server_log as _with_server_log
from tui.core.exitcodes import ExitCode, UsageError
from tui.core.identity import identity_of, identity_problems
from tui.core.levels import JudgedLevel, LevelNotInFile, judge_level, row_mode  # noqa: F401 (LevelNotInFile re-exported)
from tui.core.redact import run_secrets, scrub
from tui.core.report_doc import (
    BothTtftsDoc,
    EngineKvDoc,
    IdentityDoc,
    LevelDoc,
    MemoryDoc,
    NvmlDeviceDoc,
    ReportDoc,
    SlosDoc,
    TtftDoc,
    TtftInfDoc,
    WindowDoc,
)
from tui.core.slos import SLO_JSON_KEYS, SLO_TABLE, SloKind, ttft_or_default
from tui.core.snapshot import LevelRow, Percentile, Snapshot, WindowStat, json_get
from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED
from tui.core.stats import INSUFFICIENT_MARK, LatencyDoc, insufficient_legend, keys, labels, latency_json, latency_value
from tui.core.textfmt import fmt_level, fmt_pct
from tui.core.textsafe import term


def exit_code(state: str) -> ExitCode:
    """PASS 0, FAIL 1, anything else (INSUFFICIENT_WINDOW, UNDECIDED) 3: see ``tui.core.exitcodes``."""
    return {PASS: ExitCode.PASS, FAIL: ExitCode.FAIL}.get(state, ExitCode.INSUFFICIENT)


def select_row(snap: Snapshot, level: float | None = None) -> LevelRow | None:
    """The row shown for the judged level (``judge(snap, level)``): its last round. Raises LevelNotInFile."""
    j = judge(snap, level)
    if j is None:
        return None
    rows = [r for r in snap.levels if r.level == j.level and row_mode(r.mode, snap.header) == j.mode]
    return max(rows, key=lambda r: r.round) if rows else None


def judge(snap: Snapshot, required_level: float | None = None) -> JudgedLevel | None:
    """The judged level of one snapshot (tui.core.levels.judge_level; the same rule `accept` uses)."""
    return judge_level(((r.level, row_mode(r.mode, snap.header), r.verdict.state) for r in snap.levels), required_level)


def report_at_settings(snap: Snapshot, flag_level: float | None, **kw: Any) -> tuple[ReportDoc, str | None]:
    """``build_report`` at the required level the file is judged at (the run's own, or ``--required-level``):
    a level the flag names that is not in the file is bad usage; one the RUN names (its verdict_settings) that is
    not in the file is judged at the highest level tested, and returns why it cannot exit 0."""
    res = snap.settings
    level = res.effective.required_level if res is not None else flag_level
    try:
        return build_report(snap, level=level, **kw), None
    except LevelNotInFile as exc:
        if res is None or not res.from_run("required_level") or level is None:
            raise UsageError(str(exc)) from None
    return build_report(snap, level=None, **kw), (f"the run's required level {level:g} is not in the file: judged at "
                                                   "the highest level tested; it cannot exit 0")


def run_state(snap: Snapshot) -> str | None:
    """The verdict the run had at its OWN settings, when a reader re-judged it (issue 35): at the run's required
    level, from the level rows the Monitor judged at the run's settings beside the re-judged ones; None when not
    re-judged."""
    res = snap.settings
    if res is None or not res.rejudged or snap.run_levels is None or res.run is None:
        return None
    try:
        j = judge_level(((r.level, row_mode(r.mode, snap.header), r.verdict.state) for r in snap.run_levels),
                        res.run.required_level)
    except LevelNotInFile:
        j = None
    if j is not None:
        return j.state
    return None if snap.run_verdict is None else snap.run_verdict.state


def latency_dict(ps: tuple[Percentile, ...]) -> LatencyDoc:
    """``{"p50", "p95", "p99", "n"}`` in ms: a percentile the n does not support (or none) is null, and
    ``insufficient_n`` keeps its raw value and the n it needs (the one rule: ``tui.core.stats.latency_json``)."""
    return latency_json(ps)


def misses_text(w: Mapping[str, Any], slos: str = "") -> str:
    """"312 good; missed TTFT 20, TPOT 41, both 7" (and the not-judgeable counts) of one window's JSON."""
    parts = [f"{w['good']} good"]
    misses = w.get("misses") or {}
    combos = {k: v for k, v in (w.get("miss_combos") or {}).items() if "+" in k}
    if misses:
        miss = "missed " + ", ".join(f"{k} {v}" for k, v in misses.items())
        if len(misses) == 2 and len(combos) == 1:
            miss += f", both {next(iter(combos.values()))}"
        elif combos:
            miss += " (" + ", ".join(f"{k} {v}" for k, v in combos.items()) + ")"
        parts.append(miss)
    nj = w.get("unjudgeable") or {}
    if nj:
        parts.append("not judgeable " + ", ".join(f"{k} {v}" for k, v in nj.items()))
    if w.get("failed"):
        parts.append(f"failed {w['failed']}")
    return "; ".join(parts)


def both_ttfts_dict(w: WindowStat, ttft_of: str) -> BothTtftsDoc:
    """With reasoning in the records (both TTFTs exist): the answer TTFT and the any-token TTFT side by side
    (``ttft_answer_ms``, ``ttft_any_ms``, flat like ``ttft_ms``) and which one ``ttft_ms`` is, the one judged
    (``ttft_judged``: "answer" or "any"); {} without reasoning."""
    lat = w.latency
    if "ttft_answer" not in lat or "ttft_any" not in lat:
        return {}
    return {"ttft_answer_ms": latency_dict(lat["ttft_answer"]), "ttft_any_ms": latency_dict(lat["ttft_any"]),
            "ttft_judged": ttft_of}


#: the long text's label of an SLO kind's latency line (a kind not named here: its key, upper case)
_TEXT_TITLES = {"tpot_ms": "TPOT", "itl_ms": "ITL (largest gap)", "e2e_ms": "E2E"}


def window_dict(w: WindowStat, ttft_of: str = "answer", table: tuple[SloKind, ...] = SLO_TABLE) -> WindowDoc:
    lat = w.latency
    ttft_flat = latency_dict(lat.get("ttft", w.ttft))
    return cast(WindowDoc, {
        "n": w.good.n,
        "good": w.good.good,
        "good_fraction": w.good.fraction,
        "wilson_95_descriptive": [w.good.lo, w.good.hi],
        "completed": w.completed,
        "failed": w.failed,
        "slow": w.slow,
        # TTFT: the detailed reading by label ("P50": {...}) and issue 21's flat one (p50, p95, p99, n) side by side
        "ttft_ms": cast(TtftDoc, {**{p.label: {"value": _jnum(p.value_ms), "n": p.n, "supported": p.supported,
                                               "n_needed": p.n_needed, "approximate": p.approximate} for p in w.ttft},
                                  **ttft_flat}),  # labelled by the percentiles: P50, P95, P99
        **both_ttfts_dict(w, ttft_of),
        **cast(Any, {k.json_key: latency_dict(lat.get(k.key, ())) for k in table[1:]}),  # TPOT, ITL, E2E, ... (the table)
        "misses": dict(w.misses),
        "miss_combos": dict(w.miss_combos),
        "unjudgeable": dict(w.unjudgeable),
        "goodput_rps": w.goodput_per_s,
        "goodput_tok_s": w.good_output_tok_per_s,
        "throughput_rps": w.req_per_s,
        "ttft_ms_failures_as_inf": cast(TtftInfDoc, {p.label: {"value": _jnum(p.value_ms), "n": p.n,
                                                               "supported": p.supported} for p in w.ttft_fail_inf}),
        "req_per_s": w.req_per_s,
        "output_tok_per_s": w.output_tok_per_s,
        "goodput_per_s": w.goodput_per_s,
        "tpot_ms_p50": w.tpot_ms_p50,
        "seconds": w.seconds,
    })


def _jnum(v: float | None) -> float | str | None:
    if v is not None and math.isinf(v):
        return "inf"
    return v


def conclusion(budget_fits: bool | None, measured: str, quality: str | None,
               teaching: bool = False) -> tuple[bool, list[str]]:
    """The three-part conclusion. Returns (ready, one sentence per part that is missing or failed).

    A teaching-case budget (``--teaching``) is an example, not this deployment's budget: never evidence."""
    lines = []
    if teaching:
        lines.append("Budget: the teaching case is an example, not this deployment's budget; give the budget flags "
                     "for your model.")
    if budget_fits is None:
        lines.append("Budget: no budget given, so it is unknown whether the model fits.")
    elif not budget_fits:
        lines.append("Budget: the model and one sequence's cache do not fit in GPU memory.")
    if measured == INSUFFICIENT_WINDOW:
        lines.append("Measured: the observation window is too small to judge the target.")
    elif measured == UNDECIDED:
        lines.append("Measured: the evidence does not yet show the target is met or missed.")
    elif measured == FAIL:
        lines.append("Measured: the good fraction is below the target at this load.")
    if quality is None:
        lines.append("Quality: the regression set has not been run against this configuration.")
    elif quality != PASS:
        lines.append(f"Quality: {quality}.")
    ready = budget_fits is True and not teaching and measured == PASS and quality == PASS
    return ready, lines


def build_report(snap: Snapshot, budget: Any = None, level: float | None = None, quality: str | None = None,
                 budget_origin: str | None = None, server_log: Mapping[str, Any] | None = None) -> ReportDoc:
    """The report dict. ``budget`` defaults to the snapshot's (given for the run, or the file's budget record);
    ``level`` is the required level (None: the highest tested); ``server_log``: the engine's startup-log figures
    (``tui.sources.server_log``), shown beside the memory-only candidate. Raises LevelNotInFile."""
    j = judge(snap, level)
    row = select_row(snap, level)
    v = row.verdict if row else snap.verdict
    w = row.window if row else snap.cumulative
    state = j.state if j is not None else v.state
    if budget is None:
        budget = snap.budget
        view = snap.budget_view if snap.budget_view is not None else _budget_view(None, None, snap.header)
        if budget_origin is None and view.known:
            budget_origin = view.origin
    else:
        view = _budget_view(budget, budget_origin, snap.header)
    if server_log is not None:
        view = _with_server_log(view, budget, server_log)
    frac = w.good.fraction
    ready, missing = conclusion(None if budget is None else bool(budget.fits), state, quality, teaching=view.teaching)
    if row is not None and row.problems and state != FAIL:
        missing.append(f"Measured: the record file does not support a PASS at this level: {row.problems[0]}")
    reason = v.reason
    if j is not None and j.rounds > 1 and state != v.state:
        reason = f"{j.rounds} rounds at this level combine to {state} (FAIL if any round FAILs); last round: {v.reason}"
    rep: ReportDoc = {
        "schema": "servewatch.report/1",
        "source": snap.source,
        "provenance": _prov.as_dict(snap.header),
        "synthetic": snap.synthetic,
        "header": snap.header,
        "slo": {"ttft_ms": ttft_or_default(snap.slos), "target": snap.target, "alpha": v.alpha,
                "slos": cast(SlosDoc, {**cast(Any, {k.json_key: v for k, v in zip(snap.slos.table, snap.slos.limits())}),
                         "ttft_of": snap.slos.ttft_shown()}),
                "in_force": list(snap.slos.in_force()), "text": snap.slos.describe()},
        "identity": _identity(snap.header),
        "budget": None,
        "budget_view": view.as_dict(),
        "judged": None if j is None else {
            "level": j.level, "mode": j.mode, "unit": j.unit, "state": j.state, "why": j.why, "rounds": j.rounds,
            "measured_capacity": j.capacity, "has_measured_capacity": j.has_capacity,
            "levels_present": list(j.present), "text": j.describe()},
        "measured": {
            "level": None if row is None else row.level,
            "round": None if row is None else row.round,
            "cancelled_open": 0 if row is None else row.cancelled_open,
            # issue 36: requests that failed in the client (its own resources ran out): unknown, not the server's
            "client_limited": 0 if row is None else row.client_limited,
            "good_fraction": frac,
            "latency_success_gate": None if frac is None else frac >= snap.target,
            "window": window_dict(w, snap.slos.ttft_of, snap.slos.table),
            "verdict": {
                "state": state, "reason": reason, "missing": v.missing, "n": v.n, "minutes": v.elapsed_s / 60,
                "need_requests": v.need_requests, "need_seconds": v.need_seconds,
                "e_pass": _jnum(v.e_pass), "e_fail": _jnum(v.e_fail), "threshold": v.threshold,
                "vif": v.vif, "n_eff": v.n_eff, "bursty": v.bursty, "decided_at_n": v.decided_at_n,
                "episodes": v.episodes, "longest_episode_s": v.longest_episode_s,
                "unseen_episode_period_s": v.unseen_episode_period_s, "minutes_more": v.minutes_more,
            },
        },
        "levels": [
            cast(LevelDoc, {"level": r.level, "round": r.round, "mode": r.mode, "verdict": r.verdict.state,
             "saturated": r.saturated, "lateness_p99_ms": r.lateness_p99_ms, "max_waiting": r.max_waiting,
             "peak_gpu_gib": r.peak_gpu_gib, "cancelled_open": r.cancelled_open,
             "client_limited": r.client_limited, "client_limited_kinds": r.client_limited_kinds,
             "delivered": r.delivered or None, "not_reached": r.not_reached, "evidence_problems": list(r.problems),
             **({"search_probe": True} if r.search_probe else {}),
             **window_dict(r.window, snap.slos.ttft_of, snap.slos.table)})  # LevelDoc: the row's own keys, then its window's
            for r in snap.levels
        ],
        # what the file says against itself (tui.core.evidence): each of these forbids PASS where it applies
        "evidence": {"problems": list(snap.evidence_problems),
                     "judged_level_problems": [] if row is None else list(row.problems),
                     "judged_level_delivered": None if row is None else (row.delivered or None),
                     "judged_level_not_reached": None if row is None else row.not_reached},
        "requests_total": snap.requests_total,
        "warmup_total": snap.warmup_total,
        "errors_by_class": snap.errors_by_class,
        "cancelled": {"open_not_judged": snap.cancelled_open, "past_slo_counted_failed": snap.cancelled_late,
                      "note": snap.cancelled_note},
        "input_problems": {"malformed": snap.malformed, "truncated": snap.truncated,
                           "unknown_types": snap.unknown_types, "duplicate_request_ids": snap.duplicates,
                           "records_of_levels_over_cap": snap.levels_over_cap,
                           "examples": list(snap.malformed_examples)},
        "quality": quality or "not run",
        "conclusion": {"ready_for_traffic": ready, "missing_or_failed": missing,
                       "budget": None if budget is None else ("feasible" if budget.fits else "does not fit"),
                       "measured": state, "quality": quality or "not run"},
        "notes": list(snap.notes),
        # every verdict state change a watcher re-checking after each measured request would have seen
        # (n = measured requests of that level so far, t = that request's t_end); the first 1000 and the
        # last 1000 changes are kept, "timeline_omitted" counts those in between
        "timeline": [{"level": lv, "round": rd, "state": stt, "n": n, "t": t} for lv, rd, stt, n, t in snap.timeline],
        "timeline_omitted": snap.timeline_omitted,
        "exit_code": exit_code(state),
    }
    br = _search.capacity_bracket(snap.levels, snap.header, j.unit if j is not None else "level",
                                  j.mode if j is not None else None)
    if br is not None:  # issue 26: a `sweep --search` file: the capacity bracket and its evidence
        rep["capacity_bracket"] = br
    raw = cast(dict[str, Any], rep)  # the level blocks below are other modules' (declared NotRequired in ReportDoc)
    _server_timing.attach(raw, snap.levels)  # issue 21: the server's own brackets beside the client's, per level
    _token_counts.attach(raw, snap.levels, snap.tokens)  # issue 21: counted tokens per level and run-wide
    rep["workload"] = {"text": _workload.describe_header(snap.header)}  # issue 23: what each request looked like
    ds_line = _workload.dataset_line(snap.header)
    if ds_line is not None:
        rep["workload"]["dataset"] = ds_line
        note = json_get(snap.header, "load", "dataset", "note")
        if isinstance(note, str) and note:
            rep["workload"]["dataset_note"] = note  # what the dataset's preparation said (estimates, defaults)
    _turns.attach(raw, snap.levels)  # issue 23: the per-turn table of a session workload, per level
    _prefix_cache.attach(raw, snap.levels)  # issue 23: the server's prefix-cache use per level
    rep["memory"] = memory_dict(snap)  # issue 22: GPU (NVML) and the engine's own KV memory beside the KV ceiling
    if budget is not None:
        rep["budget"] = {
            "origin": budget_origin, "teaching": view.teaching,
            "weights_gib": budget.weights_gib, "margin_gib": budget.margin_gib,
            "kv_per_seq_gib": budget.kv_per_seq_gib, "cache_budget_gib": budget.cache_budget_gib,
            "memory_only_candidate": budget.candidate, "fits": budget.fits,
            "assumptions_not_measured": list(budget.assumptions),
            # issue 22: where the memory came from; the KV space when it IS the cache budget (no GPU, no margin)
            "memory": view.memory,
            "kv_space_gib": (budget.inputs.kv_space_bytes / 2**30) if budget.inputs.kv_space_bytes else None,
        }
    # a record file may carry secrets its writer did not redact (another tool's, or edited): header values and the
    # target URL's password never reach the report, its JSON or its page (as for `accept`)
    secrets = run_secrets(snap.header)
    return scrub(rep, secrets) if secrets else rep


def memory_dict(snap: Snapshot) -> MemoryDoc:
    """What the run's memory readings say: NVML per device (when a GPU was sampled) and the engine's own KV
    memory in use (kv_cache_usage x kv_cache_memory_bytes), beside the budget's predicted KV ceiling."""
    g = snap.gpu
    nvml: list[NvmlDeviceDoc] = [{"device": d.device, "name": d.name, "peak_used_gib": d.peak_used_gib, "total_gib": d.total_gib}
            for d in g.devices] if g.available else []
    engine: EngineKvDoc | None = None
    if g.engine_kv_samples:
        engine = {"label": g.engine_kv_label, "samples": g.engine_kv_samples,
                  "allocated_gib": g.engine_kv_allocated_gib, "peak_used_gib": g.engine_kv_peak_gib,
                  "last_used_gib": g.engine_kv_used_gib, "peak_usage": g.engine_kv_peak_usage,
                  "last_usage": g.engine_kv_usage, "series_gib": list(g.engine_kv_series)}
    ceiling = g.kv_ceiling_gib
    vs = None
    if engine is not None and engine["peak_used_gib"] is not None and ceiling:
        vs = (f"the engine's peak KV use {engine['peak_used_gib']:.2f} GiB is {engine['peak_used_gib'] / ceiling:.0%} "
              f"of the predicted KV ceiling {ceiling:.2f} GiB")
    return {"nvml": nvml, "nvml_note": None if g.available else (g.note or "no GPU telemetry"),
            "engine_kv": engine, "predicted_kv_ceiling_gib": ceiling, "budget_memory": g.memory,
            "peak_vs_ceiling": vs}


def _format_memory(mem: MemoryDoc | None) -> list[str]:
    if not mem or not (mem.get("nvml") or mem.get("engine_kv")):  # nothing read: the section stays out
        return []
    out = ["Memory (what the run read; the KV ceiling is the budget's prediction)"]
    for d in mem.get("nvml") or []:
        out.append(f"  GPU{d['device']} {d.get('name') or ''}: peak {_f(d.get('peak_used_gib'))} / "
                   f"{_f(d.get('total_gib'))} GiB (NVML)")
    if not mem.get("nvml"):
        out.append(f"  GPU: {mem.get('nvml_note') or 'no GPU telemetry'}")
    e = mem.get("engine_kv")
    if e is None:
        out.append("  engine KV cache: no kv_cache_usage in the queue samples")
    elif e.get("allocated_gib") is None:
        out.append(f"  engine KV cache: peak {e['peak_usage']:.1%} in use over {e['samples']} samples "
                   "(the engine stated no kv_cache_memory_bytes: no bytes)")
    else:
        out.append(f"  engine KV cache: peak {e['peak_used_gib']:.3f} GiB, last {e['last_used_gib']:.3f} GiB of "
                   f"{e['allocated_gib']:.2f} GiB allocated, {e['samples']} samples: {e['label']}")
    ceiling = mem.get("predicted_kv_ceiling_gib")
    out.append(f"  predicted KV ceiling: {'unknown (no budget)' if ceiling is None else f'{ceiling:.2f} GiB'}"
               + (f"  ({mem['peak_vs_ceiling']})" if mem.get("peak_vs_ceiling") else ""))
    return out + [""]


def _identity(header: Mapping[str, Any] | None) -> IdentityDoc:
    """The run's identity as the report shows it (tui.core.identity): the model claimed and served, the engine,
    GPU and host, and what forbids acceptance-grade (a claimed model the server does not serve)."""
    ident = identity_of(header)
    return {"line": ident.line(), "claimed_model": ident.claimed_model, "served_model": ident.served_model,
            "engine": ident.engine, "build": ident.build, "gpu": ident.gpu, "host": ident.host,
            "not_acceptance_grade": identity_problems(ident)}


#: the two TTFTs with reasoning in the records (the latency rows beside TTFT come from the SLO table)
_BOTH_TTFTS: tuple[tuple[Literal["ttft_answer_ms", "ttft_any_ms"], str], ...] = (
    ("ttft_answer_ms", "answer"), ("ttft_any_ms", "any"))


def format_report(rep: ReportDoc) -> str:
    out: list[str] = []
    add = out.append
    if rep["synthetic"]:
        add("SYNTHETIC DATA: this record file is labelled synthetic; nothing below is a measurement of a real server.")
    add(f"servewatch report: {rep['source']}")
    prov = rep.get("provenance") or {}
    add(f"data from: {prov.get('text') or _prov.UNKNOWN}")
    hdr = rep.get("header") or {}
    tgt = hdr.get("target") if isinstance(hdr.get("target"), dict) else {}  # a record file may get it wrong
    if tgt:
        add(f"target: {tgt.get('url') or '-'}  model: {tgt.get('model') or '-'}")
    ident = rep.get("identity") or {}
    if ident.get("line"):
        add(term(f"identity: {ident['line']}"))
    for why in ident.get("not_acceptance_grade") or ():
        add(term(f"WARNING: {why}: not acceptance-grade"))
    if rep.get("workload"):
        add(f"workload: {rep['workload']['text']}")
        if rep["workload"].get("dataset"):
            add(rep["workload"]["dataset"])
            if rep["workload"].get("dataset_note"):
                add(f"  dataset note: {rep['workload']['dataset_note']}")
    add("")
    b = rep.get("budget")
    bv = rep.get("budget_view") or {}
    add("Budget (memory only, formula output: NOT a measurement)")
    if b and b.get("title"):
        add(f"  {b['title']}" + ("  [TEACHING CASE: an example, not this run's model]" if b.get("teaching") else ""))
    if b and b.get("origin"):
        add(f"  from: {b['origin']}")
    if b and b.get("memory"):
        add(f"  memory: {b['memory']}")
    if b:
        if b.get("kv_space_gib"):  # the KV space itself is the cache budget: no GPU size, weights or margin in it
            add(f"  kv_space={b['kv_space_gib']:.2f} GiB (weights and runtime margin not subtracted)  "
                f"kv_per_sequence={b['kv_per_seq_gib']:.4f} GiB")
        else:
            add(f"  weights={b['weights_gib']:.2f} GiB  runtime_margin={b['margin_gib']:.2f} GiB  "
                f"kv_per_sequence={b['kv_per_seq_gib']:.2f} GiB")
        add(f"  cache_budget={b['cache_budget_gib']:.2f} GiB")
        add(f"  memory_only_candidate={b['memory_only_candidate']} sequences (a number to test, not a concurrency limit)")
        add("  assumptions (not measured):")
        for a in b["assumptions_not_measured"]:
            add(f"    - {a}")
    else:
        add(f"  {bv.get('hint') or 'budget unknown'}")
    if bv.get("problem"):
        add(f"  {bv['problem']}")
    if bv.get("capacity_vs_server"):
        add(f"  {bv['capacity_vs_server']}")
    if bv.get("server_log_vs_candidate"):
        add(f"  {bv['server_log_vs_candidate']}")
    alloc = bv.get("allocation_vs_engine")
    if isinstance(alloc, dict):
        for line in alloc.get("text") or ():
            add(f"  {line}")
    add("")
    out.extend(_format_memory(rep.get("memory")))
    m = rep["measured"]
    w = m["window"]
    slo = rep["slo"]
    good_is = (f"client TTFT <= {slo['ttft_ms']:g} ms" if slo.get("in_force", ["TTFT"]) == ["TTFT"]
               and (slo.get("slos") or {}).get("ttft_of", "answer") == "answer" else slo["text"])
    add(f"Measured (good = completed AND {good_is}, over ALL measured requests; "
        f"target {slo['target']:.0%})")
    add(f"  level={fmt_level(m['level'])} round={m['round'] or '-'}  measured requests={w['n']}  "
        f"warmup excluded={rep['warmup_total']}")
    if m.get("client_limited"):
        add(f"  CLIENT-LIMITED: {m['client_limited']} more measured requests failed in the client (its own resources "
            "ran out): not the server's outcome, not counted above, and the level cannot PASS")
    gf = m["good_fraction"]
    lo, hi = w["wilson_95_descriptive"]
    add(f"  good_fraction={fmt_pct(gf)} ({w['good']}/{w['n']}; completed {w['completed']}, slow {w['slow']}, "
        f"failed {w['failed']})  Wilson 95% {fmt_pct(lo)}-{fmt_pct(hi)} (descriptive)")
    add(f"  latency_success_gate={m['latency_success_gate']} (point estimate >= target; NOT the verdict)")
    marked = False  # the one mark for a percentile with too few samples (tui.core.stats), explained once
    ttft_blocks: tuple[tuple[Mapping[str, Any], str], ...] = (
        (w["ttft_ms"], "TTFT over completed requests"), (w["ttft_ms_failures_as_inf"], "TTFT, failures as +inf"))
    for block, title in ttft_blocks:
        parts = []
        for label, p in block.items():
            if not label.startswith("P"):  # the flat reading (p50, ..., n) beside the detailed one
                continue
            val = p["value"]
            s = f"{label}=" + ("N/A" if val is None else ("inf" if val == "inf" else f"{val:.0f} ms"))
            if val is not None and not p["supported"]:
                s += INSUFFICIENT_MARK
                marked = True
            if p.get("approximate"):
                s += " (approx.)"
            parts.append(s)
        n = next(iter(block.values()))["n"]
        add(f"  {title} (n={n}): " + "  ".join(parts))
    if "ttft_any_ms" in w:  # reasoning in the records: both TTFTs, the one judged said
        for both_key, what in _BOTH_TTFTS:
            title = "TTFT to the first answer token" if what == "answer" else "TTFT to the first token of any kind"
            judged = " (judged)" if w["ttft_judged"] == what else " (not judged)"
            add(f"  {title}{judged} (n={w[both_key]['n']}): {_lat(w[both_key])}")
    wk = cast(Mapping[str, Any], w)  # the SLO table's keys (a kind added to the table has its own)
    for key in (k for k in (slo.get("slos") or SLO_JSON_KEYS) if k not in ("ttft_ms", "ttft_of") and k in wk):
        title = _TEXT_TITLES.get(key) or key.removesuffix("_ms").upper()
        add(f"  {title} over completed requests (n={wk[key]['n']}): {_lat(wk[key])}")
        marked = marked or bool(wk[key].get("insufficient_n"))
    if marked:
        add(f"  ({insufficient_legend()})")
    add(f"  {misses_text(w)}")
    add(f"  goodput={_f(w['goodput_rps'])} req/s, {_f(w['goodput_tok_s'])} good tok/s  "
        f"(throughput={_f(w['throughput_rps'])} req/s, {_f(w['output_tok_per_s'])} tok/s)")
    vd = m["verdict"]
    judged_doc = rep.get("judged")
    if judged_doc:
        add(f"  {judged_doc['text']}")
    add(f"  verdict={vd['state']}" + (f": {vd['missing']}" if vd["missing"] else "") + f"  (judged on {slo['text']})")
    add(f"    {vd['reason']}")
    ev = rep.get("evidence") or {}
    if ev.get("judged_level_delivered"):
        add(f"  load delivered: {ev['judged_level_delivered']}" + ("" if not ev.get("judged_level_not_reached")
                                                                  else "  [NOT REACHED: cannot PASS]"))
    if ev.get("problems"):
        add("  evidence problems (the file checked against itself; each forbids PASS where it applies):")
        for p in ev["problems"]:
            add(f"    - {p}")
    shown = [e for e in rep.get("timeline", ()) if e["level"] == m["level"] and e["round"] == m["round"]
             and e["state"] in (PASS, FAIL)]
    if shown and any(e["state"] != vd["state"] for e in shown):
        firsts: dict[str, int] = {}
        for e in shown:
            firsts.setdefault(e["state"], e["n"])
        add("    a watcher re-checking after each request also saw " + ", ".join(
            f"{st} (from request {n})" for st, n in firsts.items()) + f"; the state at the end of the data is {vd['state']} "
            f"(see the timeline in --json)")
    out.extend(_server_timing.report_lines(rep))  # issue 21: server-side brackets per level, flags
    out.extend(_token_counts.report_lines(rep))  # issue 21: asked vs received tokens, disagreements, per level
    out.extend(_turns.report_lines(rep))  # issue 23: the judged level per turn index
    if len(rep["levels"]) > 1:
        add("")
        add("  level round      n   good%  " + "".join(f" {q:<8}" for q in labels()) + "req/s  goodput/s verdict")
        for r in rep["levels"]:
            t = r["ttft_ms"]

            def ms(lbl: str, t: Mapping[str, Any] = t) -> str:
                v = t[lbl]["value"]
                return "N/A" if v is None else f"{v:.0f}" + ("" if t[lbl]["supported"] else "*")

            add(f"  {fmt_level(r['level']):>5} {r['round']:>5} {r['n']:>6} {fmt_pct(r['good_fraction'], 1):>7} "
                + " ".join(f"{ms(q):>8}" for q in labels()) + f" {_f(r['req_per_s']):>6} {_f(r['goodput_per_s']):>9} "
                f"{r['verdict']}" + ("  client saturated, results not valid" if r["saturated"] else "")
                + (f"  CLIENT-LIMITED ({r['client_limited']} failed in the client)" if r.get("client_limited") else "")
                + ("  NOT REACHED" if r.get("not_reached") else ""))
        add(f"  ({insufficient_legend()})")
        if rep.get("capacity_bracket"):
            out.extend("  " + ln for ln in _search.format_bracket(rep["capacity_bracket"]))
        qs = "/".join(labels())
        add(f"  level round  {'TPOT ' + qs + ' (n)':<24} {'ITL ' + qs + ' (n)':<24} {'E2E ' + qs + ' (n)':<24} "
            "goodput tok/s  misses")
        for r in rep["levels"]:
            add(f"  {fmt_level(r['level']):>5} {r['round']:>5}  {_lat(r['tpot_ms'], True):<24} "
                f"{_lat(r['itl_ms'], True):<24} {_lat(r['e2e_ms'], True):<24} {_f(r['goodput_tok_s']):>13}  "
                f"{misses_text(r)}")
    if rep["errors_by_class"]:
        add("  errors: " + ", ".join(f"{k}={v}" for k, v in sorted(rep["errors_by_class"].items())))
    cn = (rep.get("cancelled") or {}).get("note")
    if cn:
        add(f"  cancelled: {cn} (measured requests, all levels; open ones are excluded from the good fraction "
            "and the verdict, and all stay in the record file)")
    ip = rep["input_problems"]
    if ip["malformed"] or ip["truncated"] or ip["unknown_types"] or ip["duplicate_request_ids"]:
        add(f"  input problems: {ip['malformed']} malformed, {ip['truncated']} truncated, "
            f"{ip['unknown_types']} unknown-type lines, {ip['duplicate_request_ids']} repeated request ids "
            "(counted once)")
        for example in ip["examples"]:
            add(f"    {example}")
    if ip.get("records_of_levels_over_cap"):
        add(f"  input problems: {ip['records_of_levels_over_cap']:,} records of levels beyond the first "
            f"{MAX_LEVELS:,} distinct levels: counted, not judged; the run cannot PASS")
    for n in rep["notes"]:
        add(f"  note: {n}")
    out.extend(_prefix_cache.report_lines(rep))  # issue 23: per level and round, or "unknown"
    add("")
    add(f"Quality: {rep['quality']}")
    add("")
    c = rep["conclusion"]
    add("Conclusion (three separate kinds of evidence; none replaces another)")
    add(f"  budget: {c['budget'] or 'unknown'}   measured: {c['measured']}   quality: {c['quality']}")
    add("  -> READY for real traffic" if c["ready_for_traffic"] else "  -> NOT ready for real traffic")
    for line in c["missing_or_failed"]:
        add(f"     {line}")
    return "\n".join(term(line) for line in out) + "\n"  # one line each: a CR/LF in a value shows as \x0d\x0a


def _lat(d: Mapping[str, Any], short: bool = False) -> str:
    """"P50=210 ms  P95=380 ms*  P99=N/A" of a flat latency dict (the one rule, ``tui.core.stats.latency_value``:
    * marks a value too few requests support; N/A only when there is no value)."""
    def v(q: str) -> str:
        x = latency_value(d, q)
        return x if x == "N/A" else f"{x.rstrip(INSUFFICIENT_MARK)} ms{INSUFFICIENT_MARK * x.endswith(INSUFFICIENT_MARK)}"
    if short:
        return "/".join(latency_value(d, q) for q in keys()) + f" ({d['n']})"
    return "  ".join(f"P{q[1:]}=" + v(q) for q in keys())


def _f(v: float | None) -> str:
    return "N/A" if v is None else f"{v:.2f}"
