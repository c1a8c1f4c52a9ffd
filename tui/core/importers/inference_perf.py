"""inference-perf (kubernetes-sigs/inference-perf) ``per_request_lifecycle_metrics.json``: a JSON list of
request lifecycle objects (``stage_id``, ``scheduled_time``, ``start_time``, ``end_time``, ``info``,
``error``), written when ``report.request_lifecycle.per_request`` is true. Times are
``time.perf_counter()`` values: one clock of unknown origin (relative). Whole-document JSON.
Field mapping and sources: docs/record-format.md, "Importing other tools' runs".
"""

from __future__ import annotations

from typing import Any

import tui.core.importers.common as C
import tui.core.importers.crosscheck as X
import tui.core.importers.descriptor as D

FORMAT = "inference-perf"
TOOL = "inference-perf"
TTFT_DEFINITION = (
    "inference-perf: the time of the first content-bearing SSE chunk (info.response_metrics."
    "output_token_times[0], perf_counter) minus start_time, taken just before the POST "
    "(inference_perf/reportgen/base.py, inference_perf/apis/streaming_parser.py)"
)

DEFINITIONS = {
    "tpot": "servewatch's TPOT (t_last_token - t_first_token) / (tokens - 1) from info.response_metrics."
            "output_token_times (the first and last content-bearing chunk) over server_usage.completion_tokens when "
            "present, else the chunk count; inference-perf's own TPOT divides the same span by its output_tokens - 1",
    "itl": "the gaps between consecutive output_token_times (perf_counter when each content-bearing SSE message "
           "was parsed; role-only, usage-only and [DONE] messages excluded: inference_perf/apis/streaming_parser.py); "
           "itl_max_ms is the largest",
    "e2e": "the last content-bearing chunk (t_last_token) minus start_time; end_time (after the stream closed) "
           "beside it as t_end",
    "tokens": "server_usage.completion_tokens (the server's usage) when recorded; output_tokens is inference-perf's "
              "own count",
}


def _is_lifecycle(d: Any) -> bool:
    """0.7.0 writes {start_time, end_time, request?, response?, info?, computed_metrics?, error}
    (reportgen/base.py build_per_request_lifecycle_entry); older versions the raw RequestLifecycleMetric."""
    return isinstance(d, dict) and "start_time" in d and "end_time" in d and "error" in d and (
        "info" in d or "request" in d or "request_data" in d or "computed_metrics" in d)


def looks_like(obj: Any) -> bool:
    if not isinstance(obj, list) or not obj:
        return False
    first = next((x for x in obj if isinstance(x, dict)), None)
    return _is_lifecycle(first)


def convert(doc: Any, label: str, *, file: str | None = None, sha256: str | None = None,
            stage_levels: dict[int, float] | None = None, stage_counts: dict[int, int] | None = None,
            mode: str | None = None, stage_summaries: dict[int, dict] | None = None, run_summary: dict | None = None,
            summary_missing: str | None = None) -> C.ImportResult:
    """``stage_levels``: stage -> rate (req/s); ``stage_counts``: stage -> request count (both from the
    stage_N_lifecycle_metrics.json files beside the file, when present). 0.7.0's per-request entries do
    not name their stage: stages run one after another, so the k-th request in start-time order belongs
    to the stage whose cumulative count first exceeds k (only when the counts add up exactly)."""
    stage_levels = stage_levels or {}
    items = doc if isinstance(doc, list) else []
    by_start = _stage_by_start(items, stage_counts)
    # the earliest time on the clock (a request is scheduled before it starts): relative times placed from 2000-01-01
    starts = [t0 for d in items if isinstance(d, dict) for k in ("start_time", "scheduled_time")
              if C.is_num(t0 := d.get(k))]
    origin = (min(starts) if starts else 0.0) - C.AXIS_ORIGIN
    derived = ["t_sent = 2000-01-01 + start_time - min(start_time, scheduled_time) (perf_counter, origin unknown: "
               "relative times)",
               "stage = stage_id when written, else position in start-time order against the stage counts of "
               "stage_N_lifecycle_metrics.json (stages run one after another)",
               "t_intended = scheduled_time on the same clock",
               "t_first_token = info.response_metrics.output_token_times[0] (streaming only)",
               "t_end = end_time", "failed = error not null; class from error.error_type / error_msg",
               "level = the stage's rate when known, else stage_id (labelled)",
               "t_last_token = the last output_token_times entry; itl_max_ms / itl_p50_ms / itl_p95_ms = max / "
               "nearest-rank P50 / P95 of the gaps between consecutive output_token_times; output_chunks = their number",
               "usage_output_tokens / usage_input_tokens / usage_reasoning_tokens = info.response_metrics.server_usage "
               "completion_tokens / prompt_tokens / completion_tokens_details.reasoning_tokens (when recorded)",
               "reasoning_chunk_times (versions that keep them apart): t_first_reasoning = the first of them, "
               "t_first_answer = output_token_times[0]; t_first_token = the earlier of the two"]
    src = C.source_block(tool=TOOL, version=None, file=file, sha256=sha256, derived=derived,
                         ttft_definition=TTFT_DEFINITION, time_axis=C.AXIS_RELATIVE, fmt=FORMAT,
                         definitions=DEFINITIONS)
    res = C.ImportResult(format=FORMAT, header={})
    by_stage: dict[Any, list[dict]] = {}
    for i, d in enumerate(items):
        res.entries += 1
        where = f"entry {i}"
        if not _is_lifecycle(d):
            res.issues.append(C.entry_issue(label, where, "not a request lifecycle object (start_time/end_time/info)"))
            continue
        try:
            st, en = d.get("start_time"), d.get("end_time")
            if not (C.is_num(st) and C.is_num(en)):
                raise ValueError("start_time / end_time missing or not numbers")
            info = C.sub_dict(d, "info")
            rm = C.sub_dict(info, "response_metrics")
            times = rm.get("output_token_times") or rm.get("chunk_times") or []
            rtimes = rm.get("reasoning_chunk_times") or rm.get("reasoning_token_times") or []
            if not isinstance(times, list) or not isinstance(rtimes, list):
                raise ValueError("output_token_times is not a list")
            if times and not all(C.is_num(x) for x in times) or not all(C.is_num(x) for x in rtimes):
                raise ValueError("output_token_times holds a value that is not a number")
            every = sorted(float(x) for x in list(times) + list(rtimes))
            t_first = every[0] - origin if every else None
            err = d.get("error")
            failed = err is not None
            e = err if isinstance(err, dict) else {}
            stage = d.get("stage_id", by_start.get(i))
            level = stage_levels.get(stage, float(stage) if C.is_num(stage) else None)
            reqm = C.sub_dict(info, "request_metrics")
            text = C.sub_dict(reqm, "text")
            cm = C.sub_dict(d, "computed_metrics")
            itok = text.get("input_tokens", info.get("input_tokens", cm.get("input_tokens")))
            if not rm.get("output_tokens") and cm.get("output_tokens") is not None:
                rm = dict(rm, output_tokens=cm.get("output_tokens"))
            rec = C.request(rid=f"ip-{i:06d}", t_sent=float(st) - origin, t_end=float(en) - origin, t_first=t_first,
                            complete=not failed,
                            error=C.classify_error(kind=e.get("error_type"), message=e.get("error_msg"))
                            if failed else None,
                            error_detail=" ".join(str(x) for x in (e.get("error_type"), e.get("error_msg")) if x)
                            if failed else None,
                            input_tokens=itok, output_tokens=rm.get("output_tokens"), level=level)
            usage = C.sub_dict(rm, "server_usage")
            C.add_timing(rec, t_last=every[-1] - origin if every else None, gaps_s=C.gaps_of(every),
                         output_chunks=len(every) if every else None, reasoning_chunks=len(rtimes) if rtimes else None,
                         usage_output=usage.get("completion_tokens"), usage_input=usage.get("prompt_tokens"),
                         usage_reasoning=C.sub_dict(usage, "completion_tokens_details").get("reasoning_tokens"),
                         t_first_reasoning=min(rtimes) - origin if rtimes else None,
                         t_first_answer=float(times[0]) - origin if rtimes and times else None)
            sched = d.get("scheduled_time")
            if C.is_num(sched) and sched - origin <= rec["t_sent"]:
                rec["t_intended"] = float(sched) - origin
        except (ValueError, TypeError, IndexError) as exc:
            res.issues.append(C.entry_issue(label, where, str(exc)))
            continue
        by_stage.setdefault(stage, []).append(rec)
        res.converted += 1
    for stage, recs in sorted(by_stage.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else 0)):
        level = recs[0]["level"]
        res.records.extend(C.add_steps(recs, level, mode, stage_id=stage))
    levels = sorted({r[0]["level"] for r in by_stage.values() if r and r[0]["level"] is not None})
    unnamed = [s for s in by_stage if s not in stage_levels]
    if unnamed:
        src["derived"].append(f"stages {sorted(x for x in unnamed if x is not None)} have no known rate: level = stage_id")
        res.notes.append("stage rates unknown (no config/summary beside the file): levels are stage numbers, "
                         "not rates")
    res.header = C.header(src, started_at=None, load={"mode": mode, "levels": levels})
    res.tool_summary = src["tool_summary"] = tool_summary(stage_levels, stage_summaries, run_summary, summary_missing,
                                                           mode)
    return res


def summary_counts(d: Any) -> dict[str, Any]:
    """inference-perf's own counts in a lifecycle metrics report: ``load_summary.count``, ``successes.count``,
    ``failures.count``."""
    d = d if isinstance(d, dict) else {}
    return {"requests": C.sub_dict(d, "load_summary").get("count"),
            "completed": C.sub_dict(d, "successes").get("count"), "errors": C.sub_dict(d, "failures").get("count")}


def tool_summary(stage_levels: dict[int, float], stage_summaries: dict[int, dict] | None, run_summary: dict | None,
                 missing: str | None, mode: str | None) -> dict | None:
    """The cross-check block: each stage's counts (``stage_N_lifecycle_metrics.json``) at its level (stages at one
    rate added together: their requests share the level), and the whole run's (``summary_lifecycle_metrics.json``)."""
    if missing:
        return X.missing("inference-perf", missing)
    if not stage_summaries and run_summary is None:
        return None
    by_level: dict[Any, dict[str, Any]] = {}
    for stage, d in sorted((stage_summaries or {}).items()):
        level = stage_levels.get(stage, float(stage))
        c = summary_counts(d)
        acc = by_level.setdefault(level, {"requests": 0, "completed": 0, "errors": 0, "stages": []})
        acc["stages"].append(stage)
        for k in ("requests", "completed", "errors"):
            v = C.int_or_none(c[k])
            acc[k] = None if v is None or acc[k] is None else acc[k] + v
    entries = [X.entry(level=lv, label=f"{X.level_label(lv, mode)} (stage{'s' if len(a['stages']) > 1 else ''} "
                                       f"{', '.join(str(x) for x in a['stages'])})",
                       requests=a["requests"], completed=a["completed"], errors=a["errors"])
               for lv, a in by_level.items()]
    if run_summary is not None:
        entries.append(X.entry(level=None, scope="run", **summary_counts(run_summary)))
    where = ", ".join(x for x in ("stage_N_lifecycle_metrics.json" if stage_summaries else "",
                                  "summary_lifecycle_metrics.json" if run_summary is not None else "") if x)
    return X.summary("inference-perf", where + " beside the file", entries)


def _stage_by_start(items: list, stage_counts: dict[int, int] | None) -> dict[int, int]:
    """entry index -> stage, from start-time order and the per-stage counts (empty when they do not add up)."""
    if not stage_counts or any(isinstance(d, dict) and "stage_id" in d for d in items):
        return {}
    usable = [(d["start_time"], i) for i, d in enumerate(items)
              if _is_lifecycle(d) and C.is_num(d.get("start_time"))]
    if sum(stage_counts.values()) != len(usable):
        return {}
    order = sorted(usable)
    out: dict[int, int] = {}
    pos = 0
    for stage in sorted(stage_counts):
        for _ in range(stage_counts[stage]):
            out[order[pos][1]] = stage
            pos += 1
    return out


# ------------------------------------------------------------------------------------------------ the descriptor

STAGE_GLOB = "stage_*_lifecycle_metrics.json"
RUN_SUMMARY = "summary_lifecycle_metrics.json"


def looks_like_summary(obj: Any) -> bool:
    """A lifecycle metrics report (a stage's or the whole run's): no per-request data."""
    return isinstance(obj, dict) and ("load_summary" in obj or "successes" in obj and "failures" in obj)


def _stage(name: str) -> str:
    return name.split("_")[1]


def pick_reports(file: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The stage reports (``stage_N_...``, N a number) and the run's summary report."""
    return tuple(n for n in names if n == RUN_SUMMARY or _stage(n).isdigit())


def side_options(side: D.SideInput) -> tuple[dict, list[str]]:
    """Each stage's rate (``load_summary.requested_rate``: the stage's level, open loop) and count (to place the
    requests of versions that do not name their stage), the stage reports and the run's summary report (the
    tool's counts the records are held against)."""
    opts: dict[str, Any] = {}
    notes: list[str] = []
    levels: dict[int, float] = {}
    counts: dict[int, int] = {}
    stages: dict[int, dict] = {}
    whole: Any = None
    for name, d in side.files:
        if name == RUN_SUMMARY:
            whole = d
            continue
        ls = d.get("load_summary") if isinstance(d, dict) else None
        if not isinstance(d, dict) or not isinstance(ls, dict):
            continue
        stage = int(_stage(name))
        stages[stage] = d
        rate, count = ls.get("requested_rate"), ls.get("count")
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            levels[stage] = float(rate)
        if isinstance(count, int) and not isinstance(count, bool):
            counts[stage] = count
    if levels:
        opts["stage_levels"] = levels
        opts["mode"] = "open"
        notes.append("stage rates (load_summary.requested_rate) read from stage_N_lifecycle_metrics.json "
                     "beside the file")
    if counts:
        opts["stage_counts"] = counts
    if stages:
        opts["stage_summaries"] = stages
    if isinstance(whole, dict):
        opts["summary"] = whole
    if not stages and "summary" not in opts:
        opts["summary_missing"] = (f"neither {RUN_SUMMARY} nor stage_N_lifecycle_metrics.json is beside the file")
    return opts, notes


def _convert(src: D.Source) -> C.ImportResult:
    o = src.options
    return convert(src.document(), src.label, file=src.file, sha256=src.sha256, stage_levels=o.get("stage_levels"),
                   stage_counts=o.get("stage_counts"), mode=o.get("mode"), stage_summaries=o.get("stage_summaries"),
                   run_summary=o.get("summary"), summary_missing=o.get("summary_missing"))


IMPORTER = D.Importer(
    name=FORMAT, tool=TOOL, reads="inference-perf per_request_lifecycle_metrics.json", looks_like=looks_like,
    convert=_convert, ttft_definition=TTFT_DEFINITION, ttft_label="first content chunk, as inference-perf measures",
    sniff=(('"start_time"', '"end_time"', '"response_metrics"'),),
    unusable=(D.Unusable("inference-perf-summary", looks_like_summary,
                         "an inference-perf summary report: per-request data needs "
                         "report.request_lifecycle.per_request: true (per_request_lifecycle_metrics.json)"),),
    side_files=D.SideFiles(globs=(STAGE_GLOB, RUN_SUMMARY), options=side_options,
                           label="its lifecycle metrics reports", pick=pick_reports),
    summary=D.SummaryRule(where="stage_N_lifecycle_metrics.json (each stage, at its rate) and "
                                f"{RUN_SUMMARY} (the whole run) beside the file"),
)
