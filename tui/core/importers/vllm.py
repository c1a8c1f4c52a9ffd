"""``vllm bench serve --save-result --save-detailed`` result JSON (also ``benchmarks/benchmark_serving.py``).

One JSON object per run with parallel per-request arrays: ``input_lens``, ``output_lens``, ``ttfts``,
``itls``, ``start_times`` (newer versions only), ``generated_texts``, ``errors``. With ``--append-result``
several such objects sit in one file, one per line: each is one level. Whole-document JSON otherwise.
Field mapping and sources: docs/record-format.md, "Importing other tools' runs".
"""

from __future__ import annotations

from typing import Any

import tui.core.importers.common as C
import tui.core.importers.crosscheck as X
import tui.core.importers.descriptor as D
from tui.core.records.parse import long_line_issue
from tui.core.records.schema import LineIssue

FORMAT = "vllm-bench"
TOOL = "vllm bench serve"
TTFT_DEFINITION = (
    "vLLM bench: perf_counter at the first streamed chunk with a non-empty 'choices' list (for chat even a "
    "role-only chunk with no content, which llama.cpp sends first) minus perf_counter just before the HTTP POST "
    "(vllm/benchmarks/lib/endpoint_request_func.py)"
)
DEFINITIONS = {
    "tpot": "vLLM TPOT = (latency - ttft) / (output_len - 1) per request, output_len = output_lens[i] (usage."
            "completion_tokens when the server sent it, else vLLM's re-tokenized count: the file does not say which); "
            "servewatch's TPOT here is the same quotient from t_first_token, t_last_token and output_tokens",
    "itl": "vLLM itls[i]: the gaps between consecutive streamed chunks with a non-empty 'choices' list "
           "(vllm/benchmarks/lib/endpoint_request_func.py): for chat a role-only first chunk counts, so against "
           "llama.cpp the first gap holds the prefill; itl_max_ms is the largest",
    "e2e": "vLLM latency: the last such chunk minus perf_counter before the POST = ttfts[i] + sum(itls[i]) "
           "(t_last_token = t_end)",
    "tokens": "output_lens[i] (see tpot); no separate server count and no count of token-carrying chunks (the "
              "chunks counted in itls include role-only and finish-only chunks)",
}
SUMMARY_WHERE = "each result's completed / failed"
ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors", "start_times")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("ttfts"), list) and "itls" in obj and (
        "errors" in obj or "output_lens" in obj)


def looks_like_summary_only(obj: Any) -> bool:
    """A result saved without --save-detailed: run-level numbers only."""
    return isinstance(obj, dict) and "completed" in obj and "mean_ttft_ms" in obj and "ttfts" not in obj


def _level(obj: dict) -> tuple[float | None, str | None]:
    mc = obj.get("max_concurrency")
    rate = obj.get("request_rate")
    if C.is_num(mc):
        return float(mc), "closed"
    if C.is_num(rate):
        return float(rate), "open"
    return None, None


def convert_run(obj: dict, label: str, *, where: str = "", line: int = 0, rnd: int = 1,
                issues: list[LineIssue] | None = None, ordinal: int = 1) -> tuple[list[dict], int, int, dict]:
    """One result object -> (records incl. steps, entries, converted, facts). ``ordinal``: the result's place in
    the file (1-based), part of every request id (ids stay unique across appended results)."""
    issues = issues if issues is not None else []
    ttfts = obj.get("ttfts") or []
    n = len(ttfts)
    starts = obj.get("start_times")
    has_starts = isinstance(starts, list) and len(starts) == n and n > 0
    level, mode = _level(obj)
    arrays = {k: obj.get(k) for k in ARRAYS}
    for k, v in arrays.items():
        if k == "start_times" and starts is None:
            continue  # older versions: no start times at all (said in the header, verdict withheld)
        if v is not None and (not isinstance(v, list) or len(v) != n):
            issues.append(C.entry_issue(label, f"{where}'{k}'", f"has {len(v) if isinstance(v, list) else 'no'} "
                                        f"entries, 'ttfts' has {n}: the requests it lacks are reported"))
    origin = (min((s for s in starts if C.is_num(s)), default=0.0) if has_starts and isinstance(starts, list) else 0.0) - C.AXIS_ORIGIN
    recs: list[dict] = []
    converted = 0
    for i in range(n):
        def at(key: str, default: Any = None, i: int = i) -> Any:
            v = arrays.get(key)
            return v[i] if isinstance(v, list) and i < len(v) else default

        try:
            lacking = [k for k in ("itls", "errors", "output_lens") if isinstance(lst := arrays.get(k), list)
                       and i >= len(lst)]
            if lacking:
                raise ValueError(f"missing from {', '.join(lacking)} (the lists have different lengths)")
            ttft = at("ttfts")
            if ttft is not None and not C.is_num(ttft):
                raise ValueError(f"ttfts entry is not a number ({str(ttft)[:20]!r})")
            err = at("errors", "")
            itl = at("itls") or []
            if not isinstance(itl, list) or not all(C.is_num(x) for x in itl):
                raise ValueError("itls entry is not a list of numbers")
            # vLLM marks a failure with success=False and an error text that may be empty ("response.reason
            # or ''"); a failed request keeps ttft 0.0, so a TTFT that is not positive also means failed
            failed = bool(err) or not (C.is_num(ttft) and ttft > 0)
            if has_starts:
                s = at("start_times")
                if not C.is_num(s):
                    raise ValueError("start_times entry is not a number")
                t_sent = float(s) - origin
            else:
                t_sent = C.AXIS_ORIGIN  # no time axis: every request at one instant (the verdict is withheld, see source.time_axis)
            if failed:
                # vLLM keeps no end time for a failed request: zero length (its latency is not recorded)
                t_first, t_end = None, t_sent
            else:
                if not C.is_num(ttft):
                    raise ValueError("ttfts entry is not a number")
                t_first = t_sent + float(ttft)
                t_end = t_first + sum(float(x) for x in itl)
            rec = C.request(rid=f"vllm-{ordinal}-{i:06d}", t_sent=t_sent, t_end=t_end, t_first=t_first,
                            complete=not failed,
                            error=C.classify_error(message=str(err or "")) if failed else None,
                            error_detail=(str(err) or "failed, no error text") if failed else None, input_tokens=at("input_lens"),
                            output_tokens=at("output_lens"), level=level, rnd=rnd)
            if not failed:
                C.add_timing(rec, t_last=rec["t_end"], gaps_s=itl)
        except (ValueError, TypeError) as exc:
            issues.append(C.entry_issue(label, f"{where}request {i}", str(exc)))
            continue
        recs.append(rec)
        converted += 1
    facts = {"level": level, "mode": mode, "has_starts": has_starts, "completed": obj.get("completed"),
             "failed": obj.get("failed"), "num_prompts": obj.get("num_prompts"), "entries": n, "round": rnd}
    return C.add_steps(recs, level, mode, rnd), n, converted, facts


def convert_runs(objs: list[tuple[int, Any]], label: str, *, file: str | None = None, sha256: str | None = None,
                 whole_document: bool = True) -> C.ImportResult:
    """``objs``: (line number, decoded object) pairs; one object for a plain result file."""
    res = C.ImportResult(format=FORMAT, header={})
    facts_all: list[dict] = []
    rnd_by_level: dict[Any, int] = {}
    for lineno, obj in objs:
        if not looks_like(obj):
            res.entries += 1
            why = ("a vLLM result saved without --save-detailed: no per-request data"
                   if looks_like_summary_only(obj) else "not a vLLM bench result object")
            res.issues.append(LineIssue(label, lineno, why))
            continue
        level, _ = _level(obj)
        rnd = rnd_by_level[level] = rnd_by_level.get(level, 0) + 1
        where = "" if whole_document else f"result on line {lineno}: "
        recs, n, conv, facts = convert_run(obj, label, where=where, line=lineno, rnd=rnd, issues=res.issues,
                                           ordinal=len(facts_all) + 1)
        res.records.extend(recs)
        res.entries += n
        res.converted += conv
        facts_all.append(facts)
    has_starts = bool(facts_all) and all(f["has_starts"] for f in facts_all)
    axis = C.AXIS_RELATIVE if has_starts else C.AXIS_NONE
    derived = ["t_first_token = t_sent + ttfts[i]", "t_end = t_first_token + sum(itls[i]) (last chunk)",
               "t_last_token = t_end; itl_max_ms / itl_p50_ms / itl_p95_ms = max / nearest-rank P50 / P95 of itls[i]",
               "failed requests (errors[i] non-empty): t_end = t_sent, no first token (vLLM keeps no end time)",
               "error class from the errors[i] message", "level = max_concurrency (closed) else request_rate (open)"]
    lacks = []
    if has_starts:
        derived.insert(0, "t_sent = 2000-01-01 + start_times[i] - min(start_times) (perf_counter, origin unknown: relative times)")
    else:
        lacks.append("start_times: this version of the vLLM benchmark does not save request start times, so the "
                     "file has no time axis and no observation window")
        derived.insert(0, "t_sent = 2000-01-01 for every request (no start times in the source: not a time axis)")
    first = objs[0][1] if objs and isinstance(objs[0][1], dict) else {}
    src = C.source_block(tool=TOOL, version=None, file=file, sha256=sha256, derived=derived,
                         ttft_definition=TTFT_DEFINITION, time_axis=axis, fmt=FORMAT, lacks=lacks,
                         definitions=DEFINITIONS)
    src["levels_summary"] = [{k: f[k] for k in ("level", "mode", "completed", "failed", "entries")} for f in facts_all]
    levels = sorted({f["level"] for f in facts_all if f["level"] is not None})
    modes = {f["mode"] for f in facts_all if f["mode"]}
    res.header = C.header(src, started_at=None,
                          target={"model": first.get("model_id"), "api": first.get("backend")},
                          load={"mode": modes.pop() if len(modes) == 1 else None, "levels": levels,
                                "burstiness": first.get("burstiness")})
    res.tool_summary = src["tool_summary"] = _tool_summary(facts_all) if facts_all else None
    if not has_starts:
        res.notes.append("no request start times: no observation window, so no verdict (INSUFFICIENT WINDOW)")
    return res


def _tool_summary(facts_all: list[dict]) -> dict:
    """Each result's own ``completed`` / ``failed`` (vLLM counts them from the same outputs it lists) as cross-check
    entries, one per result (level and round). ``num_prompts`` is the argument given, not a count, and a result
    without ``failed`` (older versions) is checked on ``completed`` alone."""
    entries = []
    for f in facts_all:
        ok, bad = C.int_or_none(f["completed"]), C.int_or_none(f["failed"])
        entries.append(X.entry(level=f["level"], round_=f["round"], label=X.level_label(f["level"], f["mode"]),
                               requests=ok + bad if ok is not None and bad is not None else None,
                               completed=ok, errors=bad))
    return X.summary(TOOL, SUMMARY_WHERE, entries)


def _convert(src: D.Source) -> C.ImportResult:
    """One result (a whole document), else one result per line (``--append-result``): a line that does not decode
    is reported with its number, the others converted."""
    try:
        return convert_runs([(1, src.document())], src.label, file=src.file, sha256=src.sha256)
    except (ValueError, RecursionError):
        objs: list[tuple[int, Any]] = []
        bad: list[tuple[int, str, bool, Exception]] = []
        longs: list[LineIssue] = []
        for n, line, term in src.lines():
            if isinstance(line, int):  # longer than the line cap: one reported problem, never decoded
                longs.append(long_line_issue(src.label, n, line, term))
                continue
            if not line.strip():
                continue
            try:
                objs.append((n, D.document(line)))
            except (ValueError, RecursionError) as decode_error:
                bad.append((n, line, term, decode_error))
        res = convert_runs(objs, src.label, file=src.file, sha256=src.sha256, whole_document=False)
        res.entries += len(longs)
        res.issues.extend(longs)
        for n, _line, term, exc in bad:
            res.entries += 1
            kind = "malformed" if term else "truncated"
            reason = f"invalid JSON: {str(exc)[:80]}"
            res.issues.append(LineIssue(src.label, n, reason if term else f"truncated final line ({reason})", kind))
        return res


IMPORTER = D.Importer(
    name=FORMAT, tool=TOOL, reads="vllm bench serve --save-detailed JSON", looks_like=looks_like, convert=_convert,
    ttft_definition=TTFT_DEFINITION, ttft_label="first chunk, as vllm bench measures",
    sniff=(('"ttfts"', '"itls"'),),
    unusable=(D.Unusable("vllm-bench-summary", looks_like_summary_only,
                         "a vLLM bench result saved without --save-detailed: it holds no per-request data"),),
    summary=D.SummaryRule(where=SUMMARY_WHERE),
)
