"""The acceptance report's markdown rendering (one function per section; the HTML page is ``tui.html``).

Reads only the JSON-ready document that ``tui.core.acceptance.build_acceptance`` builds; computes no
statistic and decides nothing. Pure, standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tui.core.acceptance.document import AcceptanceDoc
from tui.core.acceptance.recovery import md_recovery  # the drills beside the rollback rules (issue 39)
from tui.core.chain import md_records_integrity  # the digest chain's section (issue 19)
from tui.core.compare import LATENCY_NAMES
from tui.core.levels import fmt_level as _fmt_level
from tui.core.report import fmt_pct
from tui.core.search import format_bracket
from tui.core.slos import SLO_JSON_KEYS
from tui.core.stats import INSUFFICIENT_MARK, insufficient_legend, latency_cell
from tui.core.textsafe import md, md_code
from tui.core.token_counts import TOLERANCE_RULE

_MISSING = "not recorded"
_UNESCAPED_PIPE = re.compile(r"(?<!\\)((?:\\\\)*)\|")  # a pipe after an even number of backslashes


def _pct(v: float | None, digits: int = 1) -> str:
    return fmt_pct(v, digits)


HUGE = 1e12  # beyond this a figure is shown as a bound, never as a 13-digit made-up number


def _num(v: Any, spec: str) -> str:
    """A number formatted with ``spec``; None: N/A; NaN, wrong types and "nan": unknown; +-inf (or the "inf"
    strings of the JSON document) and magnitudes over 1e12: "over 1e12" / "below -1e12". Never raises."""
    if v is None:
        return "N/A"
    if isinstance(v, str):
        return {"inf": "over 1e12", "-inf": "below -1e12"}.get(v, "unknown")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "unknown"
    if v != v:
        return "unknown"
    if v > HUGE:
        return "over 1e12"
    if v < -HUGE:
        return "below -1e12"
    return format(v, spec)


def _f(v: float | None, digits: int = 2) -> str:
    return _num(v, f".{digits}f")


def _md_cell(v: Any) -> str:
    s = "N/A" if v is None else str(v)
    return _UNESCAPED_PIPE.sub(r"\1\\|", s).replace("\n", " ")  # a pipe md() escaped stays escaped once


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return out


def _ms(p: Mapping) -> str:
    v = p.get("value_ms")
    if v is None:
        return "N/A"
    s = "inf" if v == "inf" else f"{_num(v, '.0f')} ms"
    if p.get("approximate"):
        s += " (approx.)"
    if p.get("label"):  # the one mark for too few samples (tui.core.stats), explained under the table
        s += INSUFFICIENT_MARK
    return s


def _rate(r: Mapping | None) -> str:
    if not r or r.get("pass_rate") is None:
        return "N/A"
    lo, hi = r.get("wilson_95") or [None, None]
    ci = "" if lo is None else f" [{_pct(lo, 0)}-{_pct(hi, 0)}]"
    return f"{r['passed']}/{r['n']} ({_pct(r['pass_rate'], 0)}){ci}"


def md_title(doc: AcceptanceDoc) -> list[str]:
    """The banner, title, inputs, SLO and the conclusion line."""
    L: list[str] = []
    add = L.append
    c = doc["conclusion"]
    for it in doc.get("records_integrity") or ():  # the first lines: what was verified, per record file (issue 36)
        add(f"> Records {md(it.get('source'))}: {md(it.get('summary'))}")
    if doc.get("records_integrity"):
        add("")
    if doc.get("banner"):
        add(f"> **{md(doc['banner'])}**")
        add("")
    add("# Acceptance report" + (" (SYNTHETIC)" if doc.get("synthetic") else ""))
    add("")
    g = doc.get("generator") or {}
    add(f"Generated {doc.get('generated_at') or 'N/A'} by servewatch {g.get('servewatch') or 'N/A'} "
        f"(Python {g.get('python') or 'N/A'}, httpx {g.get('httpx') or 'N/A'}).")
    inp = doc["inputs"]
    add("")
    add(f"- Record files: {', '.join(md(x) for x in inp['records']) or 'none'}")
    add(f"- Quality result: {md(inp['quality']) if inp['quality'] else 'not run'}")
    add(f"- Budget: {md(inp['budget']) if inp['budget'] else 'none'}")
    add(f"- Rollback rules file: {md(inp['rollback']) if inp['rollback'] else 'none (defaults only)'}")
    for n in inp.get("notes") or ():
        add(f"- Input: {md(n)}")
    slo = doc["slo"]
    add(f"- SLO: good = {slo['good']}; target {_pct(slo['target'], 0)} good; alpha {slo['alpha']:g}; "
        f"minimum observation window {slo['min_window_minutes']:g} min"
        + (f" (settings not default: {', '.join(c['settings_changed'])})" if c.get("settings_changed") else ""))
    for vs in doc.get("verdict_settings") or ():  # issue 35: what each record file was judged at, and why
        for line in vs.get("lines") or ():
            add(f"- {vs.get('source')}: {str(line).strip()}")
    add("")
    add(f"**Conclusion: {c['verdict']}**" + (f" ({c['at_load']})" if c.get("at_load") else "")
        + f" - budget: {c['budget']}, measured: {c['measured']}, quality: {c['quality']}")
    for line in c["missing_or_failed"]:
        add(f"- {md(line)}")
    add("")
    return L


def md_budget(doc: AcceptanceDoc) -> list[str]:
    """1. Memory budget."""
    L: list[str] = []
    add = L.append
    b = doc["budget"]
    add("## 1. Memory budget (formula output, not a measurement)")
    add("")
    if not b.get("given"):
        hint = str(b.get("hint") or "")
        hint = hint.split(": ", 1)[1] if hint.lower().startswith("budget unknown: ") else hint
        add(f"Budget unknown: no budget was given for this run{'; ' + hint if hint else ''}.")
    else:
        if b.get("teaching"):
            add("**TEACHING CASE**: the budget below is the teaching example (7B bf16 on a 24 GiB GPU), not the "
                "model of this run.")
            add("")
        if b.get("model"):
            add(f"Model: {md(b['model'])}. Source: {md(b.get('source') or 'N/A')}.")
        else:
            add(f"Source: {md(b.get('source') or 'N/A')}.")
        add("")
        L += _table(("item", "value", "basis"), (
            (t["item"], f"{t['value']:.2f} {t['unit']}" if t["unit"] == "GiB" else f"{t['value']} {t['unit']}", t["basis"])
            for t in b["table"]))
        add("")
        add(f"Verdict: {b['verdict']}.")
        add("")
        add("Variants (same assumptions, one change each):")
        add("")
        L += _table(("variant", "weights GiB", "KV/seq GiB", "cache budget GiB", "candidate"), (
            (v["name"], f"{v['weights_gib']:.2f}", f"{v['kv_per_seq_gib']:.2f}", f"{v['cache_budget_gib']:.2f}",
             v["candidate"]) for v in b["variants"]))
        add("")
        add("Assumptions (not measured):")
        add("")
        for a in b["assumptions"]:
            add(f"- {a['text']} *({a['status']})*")
        add("")
        add(b["note"])
    if b.get("capacity_vs_server"):
        add("")
        add(f"Server allocation: {md(b['capacity_vs_server'])}")
    if b.get("server_log_vs_candidate"):
        add("")
        add(f"Server log: {md(b['server_log_vs_candidate'])}")
    alloc = b.get("allocation_vs_engine")
    if isinstance(alloc, Mapping) and alloc.get("prediction"):
        add("")
        add(f"KV allocation, predicted from the config vs the engine's own figures: **{alloc['result'].upper()}**")
        add("")
        L += _table(("figure", "predicted", "engine", "result"),
                    ((r["figure"], r["predicted"], r["engine"], r["result"]) for r in alloc["rows"]))
        if alloc.get("explanations"):
            add("")
            for x in alloc["explanations"]:
                add(f"- {x}")
    elif isinstance(alloc, Mapping):
        add("")
        add(f"KV allocation vs the engine: {md(alloc['result'])} ({md(alloc.get('problem') or 'nothing to compare')})")
    add("")
    return L


def md_environment(doc: AcceptanceDoc) -> list[str]:
    """2. Environment."""
    L: list[str] = []
    add = L.append
    e = doc["environment"]
    add("## 2. Environment")
    add("")
    rg = e["report_generator"]
    add(f"- Report generator: servewatch {rg.get('servewatch') or 'N/A'}, Python {rg.get('python') or 'N/A'}, "
        f"httpx {rg.get('httpx') or 'N/A'}")
    for r in e["runs"]:
        add(f"- Run {md_code(r['source'])} (provenance: {md(r['provenance'])}; data from: {md(r.get('data_from') or 'N/A')})")
        lg = {k: md(v) if v else v for k, v in r["load_generator"].items()}  # every string of a record is data
        add(f"  - load generator: servewatch {lg['servewatch'] or _MISSING}, Python {lg['python'] or _MISSING}, "
            f"httpx {lg['httpx'] or _MISSING}" + (f", {lg['os']}" if lg.get("os") else ""))
        s = {k: md(v) if v else v for k, v in r["server"].items()}
        add(f"  - server: engine {s['engine'] or _MISSING}, build {s['build'] or _MISSING}, model {s['model'] or _MISSING}"
            + (f", quantization {s['quantization']}" if s.get("quantization") else "")
            + (f", {s['slots']} slots" if s.get("slots") else "")
            + (f", {s['context_per_slot']} tokens per slot" if s.get("context_per_slot") else ""))
        t = {k: md(v) if v else v for k, v in r["target"].items()}
        add(f"  - target: {t['url'] or _MISSING}, model {t['model'] or _MISSING}" + (f", API {t['api']}" if t.get("api") else ""))
        gpu = r["gpu"]
        if gpu.get("available"):
            devs = "; ".join(f"{md(d.get('name') or 'GPU')} {d['memory_gib']:.1f} GiB" if d.get("memory_gib") is not None
                             else f"{md(d.get('name') or 'GPU')}" for d in gpu["devices"])
            add(f"  - GPU ({md(gpu['from'])}): {devs}" + (f", driver {md(gpu['driver'])}" if gpu.get("driver") else "")
                + (f", CUDA {md(gpu['cuda'])}" if gpu.get("cuda") else ""))
        else:
            add(f"  - GPU: {md(gpu['note'])}")
        if r["request_headers"]:
            add(f"  - request headers sent (values never shown): {', '.join(md(h) for h in r['request_headers'])}")
        if r.get("note"):
            add(f"  - note: {md(r['note'])}")
    L += _md_identity(doc.get("identity"))
    add("")
    return L


def _md_identity(ident: Any) -> list[str]:
    """What the servers said they serve, against --model and the budget (tui.core.identity.evidence_identity)."""
    if not isinstance(ident, Mapping):
        return []
    out = ["- Identity (the model the server said it serves, against --model and the budget):"]
    out += [f"  - {md_code(x['source'])}: {md(x['line'])}" for x in ident.get("runs") or ()]
    out += [f"  - NOT acceptance-grade: {md(p)}" for p in ident.get("problems") or ()]
    b = ident.get("budget") or {}
    out += [f"  - checked: {md(c)}" for c in b.get("checked") or ()]
    out += [f"  - not checked: {md(c)}" for c in b.get("not_checked") or ()]
    return out


def md_load(doc: AcceptanceDoc) -> list[str]:
    """3. Load configuration."""
    L: list[str] = []
    add = L.append
    add("## 3. Load configuration")
    add("")
    L += _table(("run", "mode", "arrival", "input tokens asked", "input received (min / P50 / max)",
                 "output tokens asked", "output received (min / P50 / max)", "server vs client counts disagree",
                 "levels", "requests/step", "duration s", "warmup", "rounds", "seed"), (
        (md_code(x["source"]), md(x["mode"]) if x["mode"] else _MISSING,
         (md(x["arrival"]) if x["arrival"] else "-") + (f" (burstiness {x['burstiness']:g})" if x.get("burstiness") is not None else ""),
         _asked(x, "input"), _received(x, "input"), _asked(x, "output"), _received(x, "output"), _disagreements(x),
         ", ".join(f"{v:g}" for v in x["levels"]) + (f" {md(x['level_unit'])}" if x.get("level_unit") else "")
         if x["levels"] else _MISSING,
         x["requests_per_step"] if x["requests_per_step"] is not None else "-",
         f"{x['duration_s']:g}" if x["duration_s"] is not None else "-",
         x["warmup"] if x["warmup"] is not None else _MISSING,
         x["rounds"] if x["rounds"] is not None else _MISSING,
         x["seed"] if x["seed"] is not None else _MISSING) for x in doc["load_configuration"]))
    if any(isinstance(x.get("token_disagreements"), Mapping) for x in doc["load_configuration"]):
        add("")
        add("Asked: the run header's setting (records: the lengths the requests asked for, min / P50 / max). "
            "Received: the server's count when it sent usage, else the chunks the client saw. A server count and a "
            f"client count disagree when they are {TOLERANCE_RULE}.")
    for x in doc["load_configuration"]:
        if x.get("workload"):
            add("")
            add(f"Workload of {md_code(x['source'])}: {md(x['workload'])}")
        if x.get("note"):
            add("")
            add(f"Note on {md_code(x['source'])}: {md(x['note'])}")
    add("")
    return L


def _asked(x: Mapping, side: str) -> str:
    """The lengths asked: the run header's setting, and beside it what the records say was asked (min / P50 /
    max) when they carry it."""
    cfg = x.get(f"{side}_tokens")
    seen = x.get(f"{side}_tokens_asked_seen")
    cfg = md(cfg) if cfg else cfg  # the run header's own text
    if not isinstance(seen, Mapping):
        return cfg or _MISSING
    mpm = " / ".join("?" if seen.get(k) is None else f"{seen[k]:g}" for k in ("min", "p50", "max"))
    return f"{cfg or _MISSING} (records: {mpm})"


def _disagreements(x: Mapping) -> str:
    """"output 12 of 212, input 0 of 212" (requests whose server count and client count are more than the
    tolerance apart, of those carrying both); "not computed" / "-" when no request carries both."""
    d = x.get("token_disagreements")
    if not isinstance(d, Mapping):
        return "not computed"
    parts = [f"{side} {d[side]} of {d[side + '_compared']}" for side in ("output", "input")
             if isinstance(d.get(side), int) and d.get(side + "_compared")]
    return ", ".join(parts) or "-"


def _received(x: Mapping, side: str) -> str:
    """The received lengths of one side as "min / P50 / max"; "not computed" / "not in the records"."""
    got = x.get(f"{side}_tokens_received")
    if not isinstance(got, Mapping):
        return "not in the records" if x.get("received_computed") else "not computed"
    return " / ".join("?" if got.get(k) is None else f"{got[k]:g}" for k in ("min", "p50", "max"))


def _misses(r: Mapping) -> str:
    """"TTFT 20, TPOT 41; TTFT+TPOT 7" (or "-" when no request missed an SLO, or nothing counted them)."""
    parts = [f"{k} {v}" for k, v in (r.get("misses") or {}).items() if v]
    combos = [f"{k} {v}" for k, v in (r.get("miss_combos") or {}).items() if v and "+" in str(k)]
    return (", ".join(parts) + (f"; {', '.join(combos)}" if combos else "")) if parts else "-"


def md_latency(m: Mapping) -> list[str]:
    """Per level: P50 / P95 / P99 of TTFT, TPOT, inter-token and end-to-end; goodput beside throughput."""
    L = _table(("run", "level", "round", *(f"{LATENCY_NAMES[k]} P50 / P95 / P99 ms" for k in SLO_JSON_KEYS),
                "throughput req/s", "goodput req/s", "goodput tok/s", "missed"), (
        (md_code(r["source"]), _fmt_level(r["level"]), r["round"],
         *(latency_cell((r.get("latency") or {}).get(k)) for k in SLO_JSON_KEYS),
         _f(r.get("throughput_rps")), _f(r.get("goodput_rps")), _f(r.get("goodput_tok_s"), 1), _misses(r))
        for r in m["levels"]))
    L.append("")
    L.append("TPOT = (last token - first token) / (tokens - 1); ITL = the largest gap between two tokens of a "
             "request; E2E = request sent to last token; over completed requests. * too few requests to support "
             "that percentile (raw value shown); N/A: the records do not carry it. Goodput = good requests "
             "(and their output tokens) per second.")
    for r in m["levels"]:
        for name, n in (r.get("unjudgeable") or {}).items():
            if n:
                L.append(f"- {md_code(r['source'])} level {_fmt_level(r['level'])}: {md(name)} not judgeable on {n} requests")
    L.append("")
    return L


def md_measured(doc: AcceptanceDoc) -> list[str]:
    """4. Measured results: every level row, the measured capacity and what limits it."""
    L: list[str] = []
    add = L.append
    m = doc["measured"]
    add("## 4. Measured results")
    add("")
    if not m["levels"]:
        add("No measured requests.")
    else:
        L += _table(("run", "mode", "level", "round", "n", "good (Wilson 95%)", "TTFT P50", "TTFT P95", "TTFT P99",
                     "TPOT P50", "req/s", "out tok/s", "goodput/s", "verdict", "window"), (
            (md_code(r["source"]), md(r["mode"]) if r["mode"] else "-", _fmt_level(r["level"]), r["round"], r["n"],
             f"{_pct(r['good_fraction'])} ({r['good']}/{r['n']}) [{_pct(r['wilson_95'][0], 0)}-{_pct(r['wilson_95'][1], 0)}]",
             _ms(r["ttft_ms"]["P50"]), _ms(r["ttft_ms"]["P95"]), _ms(r["ttft_ms"]["P99"]),
             "N/A" if r["tpot_ms_p50"] is None else f"{_num(r['tpot_ms_p50'], '.1f')} ms",
             _f(r["req_per_s"]), _f(r["output_tok_per_s"], 1), _f(r["goodput_per_s"]),
             r["verdict"] + (" (client saturated: not valid)" if r["saturated"] else ""),
             f"n={r['window']['n']}, {_num(r['window']['minutes'], '.1f')} min, VIF {_num(r['window']['vif'], '.2f')}"
             + (" (bursty)" if r["window"]["bursty"] else "")) for r in m["levels"]))
        add("")
        add("TTFT percentiles are over completed requests; failed requests count against the good fraction. "
            f"Good-fraction intervals are descriptive; the verdict is the anytime-valid test. {insufficient_legend()}.")
        add("")
        L += md_latency(m)
        for r in m["levels"]:
            add(f"- {md_code(r['source'])} level {_fmt_level(r['level'])} round {r['round']}: **{r['verdict']}**"
                + (f" ({md(r['missing'])})" if r["missing"] else "") + f". {md(r['reason'])}")
    add("")
    cap = m["measured_capacity"]
    cand = m["memory_only_candidate"]
    add(f"**Measured capacity:** {(m['unit'] + ' ' + _fmt_level(cap)) if m['has_measured_capacity'] else 'none (no level PASSes)'}"
        f" | **memory-only candidate:** {cand if cand is not None else 'N/A'} sequences")
    add("")
    for s in m["capacity_vs_memory"]:
        add(f"- {md(s)}")
    for b in m.get("capacity_brackets") or []:  # issue 26: `sweep --search`
        lines = format_bracket(b)
        add(f"- {md_code(b['source'])}: {lines[0]}")
        L.extend(f"  {ln.strip()}" if ln.strip().startswith("-") else f"  - {ln.strip()}" for ln in lines[1:])
    for s in m["notes"]:
        add(f"- Note: {md(s)}")
    for p in m.get("input_problems") or []:
        if p["malformed"] or p["truncated"] or p["unknown_types"]:
            add(f"- Input problems in {md_code(p['source'])}: {p['malformed']} malformed, {p['truncated']} truncated, "
                f"{p['unknown_types']} unknown-type lines (counted, not used)"
                + ("; e.g. " + "; ".join(md(x) for x in p["examples"][:3]) if p["examples"] else ""))
        for n in p["notes"]:
            add(f"- Note on {md_code(p['source'])}: {md(n)}")
    for e in m.get("evidence_problems") or []:  # the file held against itself: each forbids PASS where it applies
        for pr in e["problems"]:
            add(f"- Evidence problem in {md_code(e['source'])}: {md(pr)}")
    add("")
    L += md_memory_queue(m)
    add(f"Measured verdict: **{m['state']}**: {md(m['reason'])}.")
    add("")
    return L


def md_memory_queue(m: Mapping) -> list[str]:
    """What was measured about memory and queueing: per run one line, per level the server queue and KV peaks."""
    mq = m.get("memory_queue")
    if not isinstance(mq, Mapping):
        return []
    L = ["### Memory and queueing (measured)", ""]
    for r in mq.get("runs") or ():
        L.append(f"- {md_code(r['source'])}: {md(r['summary'])}")
    rows = [x for x in m.get("levels") or () if x.get("queue_samples") or x.get("peak_kv_usage") is not None
            or x.get("peak_gpu_gib") is not None]
    if rows:
        L.append("")
        L += _table(("run", "level", "round", "queue waiting peak", "queue waiting mean", "queue samples",
                     "engine KV peak", "GPU memory peak"), (
            (md_code(x["source"]), _fmt_level(x["level"]), x["round"],
             _MISSING if x.get("max_waiting") is None else f"{x['max_waiting']:g}",
             _MISSING if x.get("mean_waiting") is None else f"{x['mean_waiting']:.2f}", x.get("queue_samples") or 0,
             _MISSING if x.get("peak_kv_usage") is None else _pct(x["peak_kv_usage"]),
             _MISSING if x.get("peak_gpu_gib") is None else f"{x['peak_gpu_gib']:.2f} GiB") for x in rows))
        L.append("")
        L.append("Queue mean: the mean of the level's server queue samples (taken at a fixed interval, so the "
                 "time-averaged depth); not recorded: the file has no such samples.")
    L.append("")
    return L


def md_quality(doc: AcceptanceDoc) -> list[str]:
    """5. Quality regression."""
    L: list[str] = []
    add = L.append
    q = doc["quality"]
    add("## 5. Quality regression")
    add("")
    if not q["run"]:
        add("Not run. Run `servewatch quality --url URL --baseline-url URL` (or `--baseline FILE`) and pass "
            "`--quality FILE`.")
    else:
        add(f"Verdict: **{q['state']}**: {md(q['reason'])}.")
        if q.get("advice"):
            add("")
            add("Next configuration to try (from what was compared):")
            add("")
            for a in q["advice"]:
                add(f"- {md(a.get('category'))}: try {md(a.get('try'))} (because {md(a.get('because'))})")
        elif q.get("fallback"):
            add("")
            add(f"Fallback: {md(q['fallback'])}.")
        add("")
        st = q["set"]
        add(f"- Set: {md(st['source'] or 'N/A')} ({st['cases']} cases{', STARTER set' if st['starter'] else ''})")
        L += _quality_facts(q)
        add(f"- Candidate: {md(q['target']['url'] or 'N/A')}, model {md(q['target']['model'] or 'N/A')}: "
            f"{_rate(q['candidate_overall'])}")
        if q["baseline"]:
            bl = q["baseline"]
            add(f"- Baseline: {md(bl.get('url') or bl.get('source') or 'N/A')}, model {md(bl.get('model') or 'N/A')}: "
                f"{_rate(bl.get('overall'))}")
        else:
            add("- Baseline: none")
        if q.get("failed_requests"):
            add(f"- Failed requests: {q['failed_requests']} (HTTP errors are failed cases; a transport error drops "
                "the pair)")
        cp = q.get("comparison")
        if cp:
            add(f"- Usable paired cases {cp['paired']}: both pass {cp['both_pass']}, regressed {cp['regressed']}, "
                f"improved {cp['improved']}, both fail {cp['both_fail']}; margin {_pct(cp['margin'], 0)}, "
                f"alpha {cp['alpha']:g}")
            dropped = (cp.get("dropped") or {}).get("pairs") or {}
            if dropped:
                add("- Dropped pairs (no answer to compare, not scored): "
                    + ", ".join(f"{md(k)} {v}" for k, v in dropped.items()))
        add("")
        states = q.get("category_states") or {}
        cats = sorted(set(q["categories"]) | set(q.get("baseline_categories") or {}) | set(states))
        L += _table(("category", "candidate pass rate [Wilson 95%]", "baseline pass rate", "category verdict"), (
            (md(cat), _rate(q["categories"].get(cat)),
             _rate((q.get("baseline_categories") or {}).get(cat)) if q.get("baseline_categories") else "no baseline",
             _cat_state(states.get(cat)))
            for cat in cats))
        if q["notes"] or q.get("not_acceptance_grade") or q.get("tied"):
            add("")
        if q.get("tied"):
            add(f"- Tied: {md(q['tied'])}")
        if q.get("integrity"):
            add(f"- Integrity: {md(q['integrity']['summary'])}")
        if q.get("policy"):
            pol = q["policy"]
            add(f"- Judged with accept's own policy: margin {pol['margin']:g}, alpha {pol['alpha']:g}, "
                f"min cases {pol['min_cases']}")
        for n in q.get("not_acceptance_grade") or ():
            add(f"- Not acceptance-grade: {md(n)}")
        for n in q["notes"]:
            add(f"- Note: {md(n)}")
    add("")
    return L


def _quality_facts(q: Mapping) -> list[str]:
    """The suite, the required categories, the decoding and the long-context lengths reached (quality section)."""
    out: list[str] = []
    su = q.get("suite")
    if su:
        out.append(f"- Suite: {md(su.get('name'))} version {md(su.get('version'))}, seed {md(su.get('seed'))}, "
                   f"{md(su.get('cases'))} cases, level {md(su.get('level'))}, context {md(su.get('context_tokens'))} tokens")
    if q.get("required"):
        out.append(f"- Required categories (each must PASS on its own): {', '.join(md(x) for x in q['required'])}")
    dec = q.get("decoding")
    if dec:
        seed = f", seed {dec.get('seed')}" if dec.get("seed_sent") else ", no seed sent"
        rep = dec.get("repeat") or 1
        out.append(f"- Decoding: {'deterministic' if dec.get('deterministic') else 'not deterministic'} "
                   f"(temperature {dec.get('temperature')}{seed})"
                   + (f", each case sent {rep} times and the majority scored" if rep > 1 else ""))
    lc = q.get("long_context_reached") or {}
    if lc.get("cases"):
        mp = lc.get("max_prompt_tokens")
        out.append(f"- Long context reached: {lc['cases']} cases, longest prompt served "
                   f"{mp if mp is not None else 'unknown'} tokens (intended up to "
                   f"{lc.get('max_target_tokens') or 'unknown'}), {lc.get('rejected_too_long') or 0} rejected as "
                   "too long (HTTP 4xx)")
    return out


def _cat_state(d: Mapping | None) -> str:
    if not d or not d.get("state"):
        return "N/A"
    req = " (required)" if d.get("required") else ""
    if d["state"] == "NO_EVIDENCE":
        return f"NO_EVIDENCE{req}: {d.get('n') or 0} usable pairs, a PASS needs at least {d.get('pairs_needed')}"
    return f"{d['state']}{req}"


def md_cost(doc: AcceptanceDoc) -> list[str]:
    """6. Cost basis."""
    L: list[str] = []
    add = L.append
    m = doc["measured"]
    cs = doc["cost"]
    add("## 6. Cost basis")
    add("")
    if cs["gpu_hour_usd"] is None:
        add(f"{cs['status']}.")
    else:
        gpus_from = cs.get("gpus_from") or ("1 GPU assumed: pass --gpus" if cs["gpus_assumed"] else "--gpus")
        add(f"- Price: ${cs['gpu_hour_usd']:g} per GPU-hour x {cs['gpus']} GPU(s) ({gpus_from}) = "
            f"**${cs['usd_per_hour']:g} per hour**")
        if cs["usd_per_1m_output_tokens"] is None and cs["usd_per_1000_good_requests"] is None:
            add(f"- {cs['status']}")
        else:
            level = cs.get("basis_level", cs.get("capacity_level"))
            add(f"- At {m['unit']} {_fmt_level(level)}, {cs.get('basis_state') or 'the measured capacity'}: "
                f"{_f(cs['output_tok_per_s'], 1)} output tok/s, {_f(cs['goodput_per_s'])} good requests/s")
            add(f"- **${_f(cs['usd_per_1m_output_tokens'], 4)} per 1M output tokens**, "
                f"**${_f(cs['usd_per_1000_good_requests'], 4)} per 1,000 good requests**")
        add(f"- Basis: {cs['basis']}.")
    add("")
    return L


def md_rollback(doc: AcceptanceDoc) -> list[str]:
    """7. Rollback conditions."""
    L: list[str] = []
    add = L.append
    rb = doc["rollback"]
    add("## 7. Rollback conditions")
    add("")
    add(f"Default: multi-window burn-rate rules on the same SLO (error budget = 1 - target = "
        f"{_pct(rb['defaults'][0]['error_budget'])}).")
    add("")
    L += _table(("rule", "windows", "burn rate", "bad share threshold", "budget spent (30-day)", "action"), (
        (r["name"], f"{r['long_window']} and {r['short_window']}", f"{r['burn_rate']:g}x",
         _pct(r["bad_fraction_threshold"]), _pct(r["budget_spent_in_long_window"]), r["action"]) for r in rb["defaults"]))
    add("")
    for r in rb["defaults"]:
        add(f"- {r['name']}: when {r['condition']}: {r['action']}.")
    for n in rb["notes"]:
        add(f"- Note: {n}")
    if rb["user"]:
        add("")
        add(f"From {md(rb['user_source'] or 'the user')}:")
        add("")
        for u in rb["user"]:
            add(f"- {md(u)}")
    add("")
    return L


def md_conclusion(doc: AcceptanceDoc) -> list[str]:
    """8. Conclusion: the three kinds of evidence side by side, and the exit code."""
    L: list[str] = []
    add = L.append
    c = doc["conclusion"]
    m = doc["measured"]
    cap = m["measured_capacity"]
    add("## 8. Conclusion")
    add("")
    bq = doc["budget"]
    L += _table(("evidence", "question", "answer"), (
        ("budget", "does it fit?", "N/A (no budget)" if not bq.get("given") else
         (f"yes: feasible, memory-only candidate {bq['memory_only_candidate']}" if bq["fits"] else "no: does not fit")),
        ("measured", "does it finish in time at the target load?", m["state"] + (
            f" (capacity {m['unit']} {_fmt_level(cap)})" if m["has_measured_capacity"] else "")
         + (f": {md(m['summary'])}" if m.get("summary") else "")),
        ("quality", "are the answers still usable?", c["quality"]),
    ))
    add("")
    add(f"**{c['verdict']}**" + (f" ({c['at_load']})" if c.get("at_load") else "") + ".")
    add("")
    for line in c["missing_or_failed"]:
        add(f"- {md(line)}")
    if not c["missing_or_failed"]:
        add("All three kinds of evidence agree; none of them replaces another.")
    if c.get("recovery") and not any(str(x).startswith("Recovery:") for x in c["missing_or_failed"]):
        add("")
        add(md(c["recovery"]))  # issue 39: a drill is optional; the conclusion names what there is
    add("")
    add(f"Exit code: {doc['exit_code']}.")
    return L


#: The report's sections in order, one function each (each returns its markdown lines).
MD_SECTIONS = (md_title, md_budget, md_environment, md_load, md_measured, md_records_integrity, md_quality, md_cost,
               md_rollback, md_recovery, md_conclusion)


def render_markdown(doc: AcceptanceDoc) -> str:
    """The acceptance document as markdown: the sections of MD_SECTIONS, in order."""
    L: list[str] = []
    for section in MD_SECTIONS:
        L += section(doc)
    return "\n".join(L).rstrip("\n") + "\n"

