"""LLMPerf (ray-project/llmperf, ``token_benchmark_ray.py``) ``*_individual_responses.json``: a JSON list,
one object per request, with durations only (``ttft_s``, ``end_to_end_latency_s``, ...) and NO start
times: there is no time axis, so no observation window and no verdict. Whole-document JSON.
Field mapping and sources: docs/record-format.md, "Importing other tools' runs".
"""

from __future__ import annotations

from typing import Any

import tui.core.importers.common as C
import tui.core.importers.crosscheck as X
import tui.core.importers.descriptor as D

FORMAT = "llmperf"
TOOL = "llmperf"
TTFT_DEFINITION = (
    "LLMPerf: time.monotonic() at the first SSE chunk whose delta has non-empty content minus "
    "time.monotonic() before the POST (src/llmperf/ray_clients/openai_chat_completions_client.py); "
    "0 when no content arrived"
)
DEFINITIONS = {
    "tpot": "not recorded: LLMPerf keeps no last-token time; its inter_token_latency_s is the sum of the gaps from "
            "the POST to each content chunk (TTFT included) divided by the chunk count or its re-tokenized output "
            "count: a per-request MEAN that includes the TTFT, neither TPOT nor an inter-token gap (not imported)",
    "itl": "not recorded: no per-request gaps between tokens (inter_token_latency_s is a mean, see tpot)",
    "e2e": "end_to_end_latency_s: time.monotonic() after the stream ended minus before the POST (t_end; no "
           "last-token time, so E2E is judged on the end of the response, the stricter stand-in)",
    "tokens": "number_output_tokens: LLMPerf's re-count with its own tokenizer (hf-internal-testing/llama-tokenizer), "
              "not the server's",
}
UNJUDGEABLE = {"TPOT": "LLMPerf records no last-token time (only TTFT and the end-to-end latency)",
               "ITL": "LLMPerf records no per-request gaps between tokens (inter_token_latency_s is a mean "
                      "that includes the TTFT)"}
KEYS = ("ttft_s", "end_to_end_latency_s", "error_code")


def looks_like(obj: Any) -> bool:
    if not isinstance(obj, list) or not obj:
        return False
    first = next((x for x in obj if isinstance(x, dict)), None)
    return first is not None and "ttft_s" in first and "end_to_end_latency_s" in first


def summary_counts(summary: Any) -> dict[str, Any]:
    """LLMPerf's own counts in its ``*_summary.json`` (flattened ``results_*`` keys, or a ``results`` block)."""
    d = summary if isinstance(summary, dict) else {}
    inner = C.sub_dict(d, "results")

    def get(name: str) -> Any:
        return d.get(f"results_{name}", inner.get(name))

    return {"requests": get("num_requests_started"), "completed": get("num_completed_requests"),
            "errors": get("number_errors")}


def tool_summary(summary: Any, where: str | None, missing: str | None, level: float | None) -> dict | None:
    """The cross-check block (``source.tool_summary``) from the summary file beside the per-request file."""
    if missing:
        return X.missing("LLMPerf", missing)
    if summary is None:
        return None
    c = summary_counts(summary)
    mode = "closed" if level else None
    return X.summary("LLMPerf", where or "its *_summary.json", [
        X.entry(level=level, scope="level" if level else "run", label=X.level_label(level, mode), **c)])


def convert(doc: Any, label: str, *, file: str | None = None, sha256: str | None = None,
            level: float | None = None, summary: Any = None, summary_file: str | None = None,
            summary_missing: str | None = None) -> C.ImportResult:
    derived = ["t_sent = 2000-01-01 for every request (no start times in the source: not a time axis)",
               "t_first_token = ttft_s (when > 0)", "t_end = end_to_end_latency_s",
               "failed = error_code not null; error class from error_code (HTTP status; -1 = exception)",
               "output_tokens = number_output_tokens (LLMPerf re-counts them with its own tokenizer)"]
    lacks = ["request start times: LLMPerf saves only durations, so the file has no time axis and no "
             "observation window", "the load level is in the *_summary.json file, not in this one"]
    src = C.source_block(tool=TOOL, version=None, file=file, sha256=sha256, derived=derived,
                         ttft_definition=TTFT_DEFINITION, time_axis=C.AXIS_NONE, fmt=FORMAT, lacks=lacks,
                         definitions=DEFINITIONS, unjudgeable=UNJUDGEABLE)
    res = C.ImportResult(format=FORMAT, header=C.header(src, started_at=None,
                                                        load={"mode": "closed" if level else None,
                                                              "levels": [level] if level else []}))
    items = doc if isinstance(doc, list) else []
    recs: list[dict] = []
    for i, d in enumerate(items):
        res.entries += 1
        where = f"entry {i}"
        if not isinstance(d, dict):
            res.issues.append(C.entry_issue(label, where, "not an object"))
            continue
        try:
            e2e = d.get("end_to_end_latency_s")
            ttft = d.get("ttft_s")
            code = d.get("error_code")
            failed = code is not None
            if not C.is_num(e2e) or e2e < 0:
                raise ValueError("end_to_end_latency_s missing or not a non-negative number")
            t_first = C.AXIS_ORIGIN + float(ttft) if C.is_num(ttft) and ttft > 0 else None
            rec = C.request(rid=f"llmperf-{i:06d}", t_sent=C.AXIS_ORIGIN, t_end=C.AXIS_ORIGIN + float(e2e), t_first=t_first,
                            complete=not failed,
                            error=C.classify_error(status=code if C.is_num(code) and code > 0 else None,
                                                   message=d.get("error_msg")) if failed else None,
                            error_detail=(f"error_code {code}: {d.get('error_msg') or ''}" if failed else None),
                            input_tokens=d.get("number_input_tokens"), output_tokens=d.get("number_output_tokens"),
                            level=level, http_status=code if C.is_num(code) and code > 0 else None)
        except ValueError as exc:
            res.issues.append(C.entry_issue(label, where, str(exc)))
            continue
        recs.append(rec)
        res.converted += 1
    res.records = C.add_steps(recs, level, "closed" if level else None)
    res.tool_summary = src["tool_summary"] = tool_summary(summary, summary_file, summary_missing, level)
    res.notes.append("no request start times: no observation window, so no verdict (INSUFFICIENT WINDOW)")
    return res


# ------------------------------------------------------------------------------------------------ the descriptor

_MINE = "_individual_responses.json"


def looks_like_summary(obj: Any) -> bool:
    """LLMPerf's ``*_summary.json`` (flattened ``results_*`` keys, or a ``results`` block): no per-request data."""
    return isinstance(obj, dict) and ("results_num_completed_requests" in obj or "results_number_errors" in obj or (
        isinstance(obj.get("results"), dict) and "num_concurrent_requests" in obj))


def pick_summary(file: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """LLMPerf's summary of ``X_individual_responses.json``: ``X_summary.json``, else the only ``*_summary.json``
    beside it (none: none, or several and none named for it)."""
    if file.endswith(_MINE):
        mine = file[: -len(_MINE)] + "_summary.json"
        if mine in names:
            return (mine,)
    return names if len(names) == 1 else ()


def side_options(side: D.SideInput) -> tuple[dict, list[str]]:
    """The summary's counts (``summary``) and the load level (``num_concurrent_requests``)."""
    if not side.files:
        return {"summary_missing": "no *_summary.json named for it beside the file"}, []
    name, d = side.files[0]
    if not isinstance(d, dict):
        raise ValueError("not an object")
    opts: dict[str, Any] = {"summary": d, "summary_file": f"{name} beside the file"}
    notes: list[str] = []
    conc = d.get("num_concurrent_requests")
    if isinstance(conc, (int, float)) and not isinstance(conc, bool) and conc > 0:
        opts["level"] = float(conc)
        notes.append(f"level (concurrency {conc:g}) read from {name} beside the file")
    return opts, notes


def _convert(src: D.Source) -> C.ImportResult:
    o = src.options
    return convert(src.document(), src.label, file=src.file, sha256=src.sha256, level=o.get("level"),
                   summary=o.get("summary"), summary_file=o.get("summary_file"),
                   summary_missing=o.get("summary_missing"))


IMPORTER = D.Importer(
    name=FORMAT, tool="LLMPerf", reads="LLMPerf *_individual_responses.json", looks_like=looks_like,
    convert=_convert, ttft_definition=TTFT_DEFINITION, ttft_label="first content chunk, as LLMPerf measures",
    sniff=(('"ttft_s"', '"end_to_end_latency_s"'),),
    unusable=(D.Unusable("llmperf-summary", looks_like_summary,
                         "an LLMPerf *_summary.json: the per-request data is in *_individual_responses.json"),),
    side_files=D.SideFiles(globs=("*_summary.json",), options=side_options, label="its *_summary.json",
                           pick=pick_summary),
    summary=D.SummaryRule(where="X_summary.json for X_individual_responses.json (else the only *_summary.json) "
                                "beside the file"),
)
