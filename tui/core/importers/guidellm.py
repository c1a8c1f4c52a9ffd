"""GuideLLM ``benchmarks.json`` (or ``.yaml``, decoded by the caller): ``{"benchmarks": [...]}``, each
benchmark one load level with per-request lists ``requests.successful / incomplete / errored``.
0.4+ files carry ``info.timings.request_start / first_token_iteration / request_end`` (epoch seconds);
0.3 files ``start_time / first_token_time / end_time``. The lists may be a reservoir SAMPLE of the
requests (``--sample-requests``): then the import is labelled a sample and no verdict is given on the
whole run. Whole-document JSON. Field mapping and sources: docs/record-format.md.
"""

from __future__ import annotations

import re
from typing import Any

import tui.core.importers.common as C
import tui.core.importers.crosscheck as X
import tui.core.importers.descriptor as D

FORMAT = "guidellm"
TOOL = "guidellm"
TTFT_DEFINITION = (
    "GuideLLM: info.timings.first_token_iteration (time.time() when the first streamed iteration carrying "
    "tokens arrived) minus info.timings.request_start (time.time() when the HTTP request started) "
    "(src/guidellm/schemas/request_stats.py time_to_first_token_ms)"
)
DEFINITIONS = {
    "tpot": "GuideLLM inter_token_latency_ms = (last_token_iteration - first_token_iteration) / (output_tokens - 1): "
            "the same quantity as servewatch's TPOT, rebuilt here from t_first_token / t_last_token; GuideLLM's "
            "time_per_output_token_ms ((last token - request_start) / output_tokens) includes the TTFT and is not used",
    "itl": "not recorded per request: GuideLLM keeps the first and last token times and the number of token "
           "iterations, no gaps (its per-request inter_token_latency_ms is a mean, not the largest gap)",
    "e2e": "request_start to last_token_iteration (t_last_token); request_end beside it as t_end",
    "tokens": "output_metrics.total_tokens: the server's usage.completion_tokens (GuideLLM falls back to the "
              "token-iteration count only when the server sent no usage; that fallback is not imported as usage)",
}
UNJUDGEABLE = {"ITL": "GuideLLM records no per-request gaps between tokens (only first and last token times)"}
STATUSES = (("successful", None), ("incomplete", "cancelled"), ("errored", "error"))
SUMMARY_WHERE = "the requests_made totals of each benchmark in the file"


def looks_like(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    b = obj.get("benchmarks")
    if not isinstance(b, list):
        return False
    first = next((x for x in b if isinstance(x, dict)), None)
    if first is None:
        return "args" in obj or "metadata" in obj
    return isinstance(first.get("requests"), dict) or "scheduler_metrics" in first or "run_stats" in first


def _strategy(bench: dict) -> dict:
    for holder in (bench.get("config"), bench.get("args"), bench):
        if isinstance(holder, dict) and isinstance(holder.get("strategy"), dict):
            return holder["strategy"]
    return {}


def _level(bench: dict) -> tuple[float | None, str | None, str]:
    s = _strategy(bench)
    kind = str(s.get("type_") or s.get("type") or "")
    if kind == "synchronous":
        return 1.0, "closed", kind
    if kind == "concurrent" and C.is_num(s.get("streams")):
        return float(s["streams"]), "closed", kind
    if kind in ("constant", "poisson") and C.is_num(s.get("rate")):
        return float(s["rate"]), "open", kind
    if kind == "throughput" and C.is_num(s.get("max_concurrency")):
        return float(s["max_concurrency"]), "closed", kind
    return None, None, kind or "unknown"


def _totals(bench: dict) -> dict | None:
    for path in (("scheduler_metrics", "requests_made"), ("run_stats", "requests_made"), ("request_totals",),
                 ("metrics", "request_totals")):
        cur: Any = bench
        for k in path:
            cur = cur.get(k) if isinstance(cur, dict) else None
        if isinstance(cur, dict) and C.is_num(cur.get("total")):
            return {k: int(cur[k]) for k in ("successful", "incomplete", "errored", "total") if C.is_num(cur.get(k))}
    return None


_SAMPLE_KEYS = ("sample_requests", "sample_size")


def _sample_setting(doc: Any, bench: dict) -> tuple[bool, int | None]:
    """(stated, size): the reservoir size GuideLLM kept per status list (``sample_requests``; 0.8's metrics config
    ``sample_size``), ``(True, None)`` when the file says it kept every request, ``(False, None)`` when it does not
    say."""
    spec = C.sub_dict(C.sub_dict(doc, "config") if isinstance(doc, dict) else {}, "spec")
    holders = (C.sub_dict(bench, "config"), C.sub_dict(bench, "args"),
               C.sub_dict(doc, "args") if isinstance(doc, dict) else {}, C.sub_dict(spec, "metrics"))
    for holder in holders:
        for key in _SAMPLE_KEYS:
            if key in holder:
                v = holder[key]
                return True, (int(v) if C.is_num(v) and v >= 0 else None)
    return False, None


def _times(r: dict) -> tuple[float | None, float | None, float | None]:
    info = C.sub_dict(r, "info")
    t = info.get("timings")
    if isinstance(t, dict):
        start = t.get("request_start") if C.is_num(t.get("request_start")) else t.get("resolve_start")
        end = t.get("request_end") if C.is_num(t.get("request_end")) else t.get("resolve_end")
        first = t.get("first_token_iteration")
        return C.num(start), C.num(first), C.num(end)
    # 0.3.x
    return C.num(r.get("start_time")), C.num(r.get("first_token_time")), C.num(r.get("end_time"))


def _tokens(r: dict) -> tuple[Any, Any]:
    om = C.sub_dict(r, "output_metrics")
    im = C.sub_dict(r, "input_metrics")
    out = r.get("output_tokens", om.get("total_tokens"))
    inp = r.get("prompt_tokens", im.get("total_tokens"))
    return inp, out


def _usage_tokens(metrics: Any) -> Any:
    """The server's count in a 0.4+ ``UsageMetrics`` block (``total_tokens``, else ``text_tokens``); None when
    the block is absent or empty (GuideLLM leaves it empty when the server sent no usage)."""
    if not isinstance(metrics, dict):
        return None
    v = metrics.get("total_tokens")
    return v if v is not None else metrics.get("text_tokens")


def _add_timing(rec: dict, r: dict) -> None:
    """The issue-21 fields GuideLLM records (0.4+ ``info.timings``); 0.3 files have none of them."""
    t = C.sub_dict(C.sub_dict(r, "info"), "timings")
    streamed = rec["t_first_token"] is not None
    reasoning = isinstance(r.get("reasoning_output"), str) and bool(r["reasoning_output"].strip())
    first_out = C.num(t.get("first_output_token_iteration"))
    C.add_timing(rec, t_last=C.num(t.get("last_token_iteration")) if streamed else None,
                 output_chunks=t.get("token_iterations") if streamed and C.is_num(t.get("token_iterations")) else None,
                 usage_output=_usage_tokens(r.get("output_metrics")), usage_input=_usage_tokens(r.get("input_metrics")),
                 t_first_reasoning=rec["t_first_token"] if reasoning and streamed else None,
                 t_first_answer=first_out)


def _error_text(r: dict) -> str | None:
    info = C.sub_dict(r, "info")
    return info.get("error") or r.get("error")


def convert(doc: Any, label: str, *, file: str | None = None, sha256: str | None = None,
            version: str | None = None) -> C.ImportResult:
    res = C.ImportResult(format=FORMAT, header={})
    benches = doc.get("benchmarks") if isinstance(doc, dict) else None
    benches = benches if isinstance(benches, list) else []
    levels_meta: list[dict[str, Any]] = []
    sampled_any = False
    summary = {"successful": 0, "incomplete": 0, "errored": 0, "total": 0}
    started = None
    rnd_by_level: dict[Any, int] = {}
    entries: list[dict] = []
    for bi, bench in enumerate(benches):
        where_b = f"benchmarks[{bi}]"
        if not isinstance(bench, dict):
            res.entries += 1
            res.issues.append(C.entry_issue(label, where_b, "not an object"))
            continue
        level, mode, kind = _level(bench)
        rnd = rnd_by_level[level] = rnd_by_level.get(level, 0) + 1
        reqs = C.sub_dict(bench, "requests")
        sm = C.sub_dict(bench, "scheduler_metrics")
        m_start, m_end = C.num(sm.get("measure_start_time")), C.num(sm.get("measure_end_time"))
        recs: list[dict] = []
        listed = 0
        per_status: dict[str, int] = {}
        for status, err_kind in STATUSES:
            items = reqs.get(status)
            if items is None:
                continue
            if not isinstance(items, list):
                res.issues.append(C.entry_issue(label, f"{where_b}.requests.{status}", "not a list"))
                continue
            per_status[status] = len(items)
            for ri, r in enumerate(items):
                res.entries += 1
                listed += 1
                where = f"{where_b}.requests.{status}[{ri}]"
                if not isinstance(r, dict):
                    res.issues.append(C.entry_issue(label, where, "not an object"))
                    continue
                try:
                    t_sent, t_first, t_end = _times(r)
                    if t_sent is None or t_end is None:
                        raise ValueError("no request start/end time (info.timings.request_start/request_end)")
                    inp, out = _tokens(r)
                    if err_kind is None:
                        error = detail = None
                    elif err_kind == "cancelled":
                        error, detail = "cancelled", "GuideLLM 'incomplete': cancelled after it started"
                    else:
                        detail = _error_text(r) or "errored"
                        error = C.classify_error(message=detail)
                    phase = "measure"
                    if m_start is not None and t_sent < m_start - 1e-9:
                        phase = "warmup"
                    rid = r.get("request_id") or (r.get("info") or {}).get("request_id") or f"gl-{bi}-{status}-{ri}"
                    rec = C.request(rid=str(rid), t_sent=t_sent, t_end=t_end, t_first=t_first,
                                    complete=err_kind is None, error=error, error_detail=detail,
                                    input_tokens=inp, output_tokens=out, phase=phase, level=level, rnd=rnd)
                    _add_timing(rec, r)
                except (ValueError, TypeError) as exc:
                    res.issues.append(C.entry_issue(label, where, str(exc)))
                    continue
                recs.append(rec)
                res.converted += 1
        recs.sort(key=lambda x: x["t_sent"])
        if recs:
            started = recs[0]["t_sent"] if started is None else min(started, recs[0]["t_sent"])
        totals = _totals(bench)
        stated, size = _sample_setting(doc, bench)
        sampled = _is_sample(totals, per_status, stated, size)
        sampled_any |= sampled
        entries.append(_summary_entry(level, mode, rnd, kind, totals, sampled, size))
        if totals:
            for k in summary:
                summary[k] += totals.get(k, 0)
        levels_meta.append({"benchmark": bi, "strategy": kind, "level": level, "mode": mode, "listed": listed,
                            "totals": totals, "sampled": sampled, "measure_start": m_start, "measure_end": m_end})
        res.records.extend(C.add_steps(recs, level, mode, rnd, strategy=kind, **({"sample": True} if sampled else {})))
        if level is None:
            res.notes.append(f"{where_b}: strategy '{kind}' has no fixed level: its requests have no level")
    derived = ["t_sent = info.timings.request_start (0.3: start_time)",
               "t_first_token = info.timings.first_token_iteration (0.3: first_token_time)",
               "t_end = info.timings.request_end (0.3: end_time)",
               "successful -> complete; incomplete -> error 'cancelled'; errored -> error class from info.error",
               "phase warmup when request_start < scheduler_metrics.measure_start_time",
               "level = strategy streams (concurrent, closed) / rate (constant, poisson: open) / 1 (synchronous)",
               "t_last_token = info.timings.last_token_iteration; output_chunks = info.timings.token_iterations",
               "usage_output_tokens / usage_input_tokens = output_metrics / input_metrics total_tokens (0.4+: the "
               "server's usage; absent when the server sent none)",
               "reasoning (reasoning_output not empty): t_first_reasoning = first_token_iteration, "
               "t_first_answer = first_output_token_iteration"]
    sample: dict[str, Any] | None = None
    tool_summary = (X.summary("GuideLLM", SUMMARY_WHERE, entries)
                    if any(x["totals"] for x in levels_meta) else
                    X.missing("GuideLLM", "no requests_made totals in the file's benchmarks")) if levels_meta else None
    if sampled_any:
        sample = {"listed": sum(x["listed"] for x in levels_meta), "total": summary["total"],
                  "note": "GuideLLM kept a sample of the per-request lists (fewer listed than its totals): "
                          "statistics describe the sample; no verdict on the whole run"}
        res.notes.append(sample["note"])
    src = C.source_block(tool=TOOL, version=version or _version(doc), file=file, sha256=sha256, derived=derived,
                         ttft_definition=TTFT_DEFINITION, time_axis=C.AXIS_EPOCH, fmt=FORMAT, sample=sample,
                         definitions=DEFINITIONS, unjudgeable=UNJUDGEABLE)
    src["levels_summary"] = levels_meta
    lv = sorted({x["level"] for x in levels_meta if x["level"] is not None})
    modes = {x["mode"] for x in levels_meta if x["mode"]}
    res.header = C.header(src, started_at=started,
                          load={"mode": modes.pop() if len(modes) == 1 else None, "levels": lv})
    src["tool_summary"] = tool_summary
    res.tool_summary = tool_summary
    return res


def _is_sample(totals: dict | None, per_status: dict[str, int], stated: bool, size: int | None) -> bool:
    """Whether a benchmark's lists are a reservoir sample of its requests: the file names a sample size and a list
    holds fewer than its total, or (the file does not say) the lists hold fewer successful or errored requests than
    its totals. A file that says it kept every request is never a sample: what is missing is missing."""
    if totals is None:
        return False
    short = any(per_status.get(k, 0) < totals.get(k, 0) for k in ("successful", "errored"))
    if stated:
        return size is not None and short
    return short


def _summary_entry(level: float | None, mode: str | None, rnd: int, kind: str, totals: dict | None, sampled: bool,
                   size: int | None) -> dict:
    """The benchmark's ``requests_made`` as a cross-check entry: every listed request (warmup included) against
    them; a request cancelled before it was sent is counted by GuideLLM, never listed."""
    t = totals or {}
    return X.entry(level=level, round_=rnd, label=X.level_label(level, mode, kind),
                   requests=t.get("total"), completed=t.get("successful"), errors=t.get("errored"),
                   cancelled=t.get("incomplete"), warmup_counted=True, unlisted_cancelled_ok=True,
                   sample={"size": size} if sampled else None)


def _version(doc: Any) -> str | None:
    if isinstance(doc, dict):
        md = doc.get("metadata")
        if isinstance(md, dict):
            v = md.get("guidellm_version") or md.get("version")
            return str(v) if v else None
    return None


def _convert(src: D.Source) -> C.ImportResult:
    res = convert(src.document(), src.label, file=src.file, sha256=src.sha256, version=src.options.get("version"))
    res.format = src.format  # guidellm or guidellm-yaml
    return res


IMPORTER = D.Importer(
    name=FORMAT, tool="GuideLLM", reads="GuideLLM benchmarks.json/.yaml", looks_like=looks_like, convert=_convert,
    ttft_definition=TTFT_DEFINITION, ttft_label="first token iteration, as GuideLLM measures",
    sniff=(('"benchmarks"', '"requests"'), ('"benchmarks"', '"scheduler_metrics"')),
    variants=(D.TextVariant("guidellm-yaml", re.compile(r"^benchmarks\s*:", re.M), decoder="yaml",
                            hint="guidellm writes benchmarks.json too"),),
    summary=D.SummaryRule(where=SUMMARY_WHERE, differences=("warmup_counted", "unlisted_cancelled_ok", "sample")),
)
