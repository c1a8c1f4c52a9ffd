"""Other tools' exports built in memory, shaped as each tool writes them (the key names and nesting of the committed
fixtures in tests/fixtures/imports and their README), with their own summaries: an honest closed- or open-loop run
whose errors make it FAIL, and the edit a reviewer may meet: per-request entries deleted while the summary stays.

Each builder writes into a folder and returns the per-request file; the summary is inline (GuideLLM, vLLM) or a file
beside it (AIPerf, LLMPerf, inference-perf). ``drop(fmt, path, indices)`` deletes entries by their index in request
order (the summary untouched). Times are plausible epoch seconds (AIPerf, GuideLLM) or perf_counter values (vLLM,
inference-perf). The tool versions are real ones (not ``from-source``): these files stand in for real exports so that
a verdict may exit 0, which is what the tests hold them to."""

from __future__ import annotations

import json
import random
from pathlib import Path

T0 = 1_790_000_000.0
FORMATS = ("aiperf", "vllm-bench", "guidellm", "llmperf", "inference-perf")


def _plan(n: int, errors: int, conc: int, dur: float, seed: int) -> list[tuple[float, float, float, bool]]:
    """(t_sent, ttft, e2e, failed) of n requests on ``conc`` slots, back to back (a closed loop that delivers its
    load); ``errors`` of them failed, spread evenly; TTFT ~0.2 s."""
    rng = random.Random(seed)
    bad = set(round(k * n / errors) for k in range(errors)) if errors else set()
    out = []
    for i in range(n):
        slot, k = i % conc, i // conc
        t = T0 + slot * 0.013 + k * dur
        out.append((t, 0.2 + rng.uniform(0.0, 0.05), dur - rng.uniform(0.001, 0.01), i in bad))
    return out


def aiperf(folder: Path, n: int = 1100, errors: int = 101, conc: int = 2, dur: float = 1.2, seed: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (t, ttft, e2e, failed) in enumerate(_plan(n, errors, conc, dur, seed)):
        md = {"x_request_id": f"req-{seed}-{i:05d}", "request_start_ns": int(t * 1e9),
              "request_end_ns": int((t + e2e) * 1e9), "benchmark_phase": "profiling", "was_cancelled": False}
        if failed:
            lines.append({"metadata": {**md, "request_end_ns": int((t + 0.05) * 1e9)},
                          "metrics": {"error_isl": {"value": 64, "unit": "tokens"}},
                          "error": {"code": 500, "type": "HTTPError", "message": "Internal Server Error"}})
        else:
            lines.append({"metadata": md, "metrics": {
                "time_to_first_token": {"value": ttft * 1000, "unit": "ms"},
                "request_latency": {"value": (e2e - 0.0005) * 1000, "unit": "ms"},
                "output_sequence_length": {"value": 32, "unit": "tokens"},
                "input_sequence_length": {"value": 64, "unit": "tokens"}}, "error": None})
    p = folder / "profile_export.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = {"schema_version": "1.4", "aiperf_version": "0.13.0",
               "request_count": {"unit": "requests", "avg": n - errors},
               "error_request_count": {"unit": "requests", "avg": errors},
               "completed_request_count": {"unit": "requests", "avg": n},
               "input_config": {"phases": [{"name": "profiling", "kind": "profiling", "type": "concurrency",
                                            "requests": n, "concurrency": conc}]}}
    (folder / "profile_export_aiperf.json").write_text(json.dumps(summary))
    return p


def vllm(folder: Path, n: int = 1100, errors: int = 101, conc: int = 2, dur: float = 1.2, seed: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cols: dict[str, list] = {k: [] for k in ("input_lens", "output_lens", "ttfts", "itls", "start_times",
                                             "generated_texts", "errors")}
    for t, ttft, e2e, failed in _plan(n, errors, conc, dur, seed):
        cols["start_times"].append(t - T0 + 5000.0)  # perf_counter: one clock of unknown origin
        cols["input_lens"].append(64)
        if failed:
            for k, v in (("output_lens", 0), ("ttfts", 0.0), ("itls", []), ("generated_texts", ""),
                         ("errors", "Internal Server Error")):
                cols[k].append(v)
            continue
        gap = (e2e - ttft) / 31
        for k, v in (("output_lens", 32), ("ttfts", ttft), ("itls", [gap] * 31), ("generated_texts", "x" * 32),
                     ("errors", "")):
            cols[k].append(v)
    doc = {"date": "20261201-120000", "backend": "openai-chat", "model_id": "gemma-3-270m", "num_prompts": n,
           "request_rate": "inf", "burstiness": 1.0, "max_concurrency": conc, "completed": n - errors,
           "failed": errors, **cols}
    p = folder / "vllm_result.json"
    p.write_text(json.dumps(doc))
    return p


def guidellm(folder: Path, n: int = 1100, errors: int = 101, conc: int = 2, dur: float = 1.2, seed: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ok, bad = [], []
    for i, (t, ttft, e2e, failed) in enumerate(_plan(n, errors, conc, dur, seed)):
        timings = {"request_start": t, "request_end": t + (0.05 if failed else e2e)}
        if not failed:
            timings.update(first_token_iteration=t + ttft, last_token_iteration=t + e2e - 0.0005, token_iterations=32)
        r = {"request_id": f"gl-{seed}-{i:05d}", "prompt_tokens": 64, "output_tokens": 0 if failed else 32,
             "info": {"timings": timings, **({"error": "HTTPStatusError: 500 Internal Server Error"} if failed else {})}}
        (bad if failed else ok).append(r)
    bench = {"type_": "generative_benchmark",
             "config": {"strategy": {"type_": "concurrent", "streams": conc}, "sample_size": None},
             "scheduler_metrics": {"measure_start_time": T0, "measure_end_time": T0 + n * dur / conc,
                                   "requests_made": {"successful": n - errors, "errored": errors, "incomplete": 0,
                                                     "total": n}},
             "requests": {"successful": ok, "errored": bad, "incomplete": []}}
    p = folder / "benchmarks.json"
    p.write_text(json.dumps({"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [bench]}))
    return p


def llmperf(folder: Path, n: int = 1100, errors: int = 101, conc: int = 2, dur: float = 1.2, seed: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    items = []
    for _t, ttft, e2e, failed in _plan(n, errors, conc, dur, seed):
        items.append({"error_code": 500 if failed else None, "error_msg": "Internal Server Error" if failed else "",
                      "ttft_s": 0 if failed else ttft, "end_to_end_latency_s": 0.05 if failed else e2e,
                      "number_input_tokens": 64, "number_output_tokens": 0 if failed else 32})
    p = folder / "run_individual_responses.json"
    p.write_text(json.dumps(items))
    (folder / "run_summary.json").write_text(json.dumps({
        "version": "2023-08-31", "name": "run_summary", "model": "gemma-3-270m", "num_concurrent_requests": conc,
        "results_num_requests_started": n, "results_number_errors": errors,
        "results_num_completed_requests": n - errors}))
    return p


def inference_perf(folder: Path, n: int = 1300, errors: int = 130, rate: float = 2.0, dur: float = 1.2,
                   seed: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    bad = set(round(k * n / errors) for k in range(errors)) if errors else set()
    items = []
    for i in range(n):
        sched = 9000.0 + i / rate
        st = sched + rng.uniform(0.0005, 0.002)
        e2e = dur - rng.uniform(0.001, 0.01)
        if i in bad:
            items.append({"stage_id": 0, "scheduled_time": sched, "start_time": st, "end_time": st + 0.05,
                          "info": {"response_metrics": {"output_token_times": []}},
                          "error": {"error_type": "HTTPStatusError", "error_msg": "500 Internal Server Error"}})
            continue
        ttft = 0.2 + rng.uniform(0.0, 0.05)
        times = [st + ttft + k * (e2e - ttft - 0.001) / 31 for k in range(32)]
        items.append({"stage_id": 0, "scheduled_time": sched, "start_time": st, "end_time": st + e2e,
                      "info": {"request_metrics": {"text": {"input_tokens": 64}},
                               "response_metrics": {"output_token_times": times, "output_tokens": 32}},
                      "error": None})
    p = folder / "per_request_lifecycle_metrics.json"
    p.write_text(json.dumps(items))
    counts = {"load_summary": {"count": n, "requested_rate": rate}, "successes": {"count": n - errors},
              "failures": {"count": errors}}
    (folder / "stage_0_lifecycle_metrics.json").write_text(json.dumps(counts))
    (folder / "summary_lifecycle_metrics.json").write_text(json.dumps(
        {"load_summary": {"count": n}, "successes": {"count": n - errors}, "failures": {"count": errors}}))
    return p


BUILDERS = {"aiperf": aiperf, "vllm-bench": vllm, "guidellm": guidellm, "llmperf": llmperf,
            "inference-perf": inference_perf}


def failed_indices(fmt: str, path: Path) -> list[int]:
    """The request-order indices of the failed entries of a file built here."""
    if fmt == "aiperf":
        return [i for i, ln in enumerate(path.read_text().splitlines()) if json.loads(ln)["error"] is not None]
    if fmt == "vllm-bench":
        return [i for i, e in enumerate(json.loads(path.read_text())["errors"]) if e]
    if fmt == "guidellm":
        b = json.loads(path.read_text())["benchmarks"][0]["requests"]
        return list(range(len(b["successful"]), len(b["successful"]) + len(b["errored"])))
    if fmt == "llmperf":
        return [i for i, d in enumerate(json.loads(path.read_text())) if d["error_code"] is not None]
    return [i for i, d in enumerate(json.loads(path.read_text())) if d["error"] is not None]


def drop(fmt: str, path: Path, indices) -> None:
    """Delete the per-request entries at ``indices`` (request order; GuideLLM: successful then errored); every
    summary stays as the tool wrote it."""
    gone = set(indices)
    if fmt == "aiperf":
        lines = path.read_text().splitlines()
        path.write_text("".join(ln + "\n" for i, ln in enumerate(lines) if i not in gone))
    elif fmt == "vllm-bench":
        doc = json.loads(path.read_text())
        for k in ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"):
            doc[k] = [v for i, v in enumerate(doc[k]) if i not in gone]
        path.write_text(json.dumps(doc))
    elif fmt == "guidellm":
        doc = json.loads(path.read_text())
        reqs = doc["benchmarks"][0]["requests"]
        n_ok = len(reqs["successful"])
        reqs["successful"] = [r for i, r in enumerate(reqs["successful"]) if i not in gone]
        reqs["errored"] = [r for i, r in enumerate(reqs["errored"]) if n_ok + i not in gone]
        path.write_text(json.dumps(doc))
    else:
        items = json.loads(path.read_text())
        path.write_text(json.dumps([d for i, d in enumerate(items) if i not in gone]))
