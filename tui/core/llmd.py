"""One step of a run as an llm-d benchmark report, schema v0.2 (`servewatch export --format llmd`; standard
library only).

The llm-d report describes one stage of a benchmark (their converters from vllm bench, AIPerf and GuideLLM
write one report per stage): here one (level, round) of the run, by default the level the report judges.
What goes where:

- ``run``: ``uid`` (this step: a hash of the run and the step), ``eid`` (the run: every step of one run shares
  it), the step's time span, and a ``description`` with servewatch's verdict in words; ``keywords`` carry
  ``servewatch``, the verdict and ``SYNTHETIC`` when the data is made up.
- ``scenario.stack``: the serving engine as a ``generic`` component (engine, build, served model: what the server
  said of itself, ``tui.core.identity``); never an ``inference_engine`` with an accelerator count servewatch
  did not read.
- ``scenario.load``: servewatch as the load generator (tool, version, the step as ``stage``, the level as
  ``concurrency`` or ``rate_qps``, the asked lengths) and, in ``native.config.servewatch``, the verdict, the SLOs
  and settings judged at, the good fraction, the goodput and the workload line (the schema has no field for
  them).
- ``results.request_performance.aggregate``: the step's measured requests (the report's ``n``) and failures,
  and over the completed ones the input and output lengths, TTFT, TPOT and end-to-end latency, in seconds;
  the throughputs are the report's (per second of the step). Percentiles are nearest-rank (the report's
  numbers), and a percentile the sample cannot support (docs/statistics.md: ``1 - q^n >= 0.95``) is left out
  and listed in ``native.config.servewatch.percentiles_left_out``. ``inter_token_latency`` is left out:
  servewatch records each request's largest gap, not every gap (said there too).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import tui.core.identity as identity
import tui.core.workload as workload
from tui.core.stats import n_needed, nearest_rank

VERSION: Final = "0.2"
#: the schema's percentile keys and their quantiles
PERCENTILES: Final = (("p0p1", 0.001), ("p1", 0.01), ("p5", 0.05), ("p10", 0.10), ("p25", 0.25), ("p50", 0.50),
                      ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("p99p9", 0.999))
#: the step's value lists a caller collects (``tui.sources.export_files``): name -> (units, the schema's place)
SERIES: Final = {"input_length": "count", "output_length": "count", "ttft_s": "s", "tpot_s": "s/token",
                 "e2e_s": "s"}
_DIST = {"fixed": "fixed", "uniform": "uniform", "normal": "gaussian", "gaussian": "gaussian"}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def statistics(values: Sequence[float], units: str, left_out: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The schema's ``Statistics`` of ``values``: mean, population standard deviation, min, max and the
    percentiles the sample supports (nearest rank; the others listed in ``left_out[name]``). None: no values."""
    vals = sorted(v for v in values if _num(v) is not None)
    n = len(vals)
    if not n:
        return None
    mean = math.fsum(vals) / n
    out: dict[str, Any] = {"units": units, "mean": mean,
                           "stddev": math.sqrt(max(0.0, math.fsum((v - mean) ** 2 for v in vals) / n)),
                           "min": vals[0], "max": vals[-1]}
    missing = {}
    for key, q in PERCENTILES:
        need = n_needed(max(q, 1.0 - q)) if q != 0.5 else n_needed(0.5)
        if n >= need:
            out[key] = nearest_rank(vals, q)
        else:
            missing[key] = {"n": n, "n_needed": need}
    if missing:
        left_out[name] = missing
    return out


def _iso(t: float | None) -> str | None:
    if t is None or not math.isfinite(t) or t <= 0:
        return None
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hash(obj: Any, n: int = 32) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:n]


def _seq_len(block: Any, observed: dict[str, Any] | None) -> dict[str, Any]:
    """The schema's ``SequenceLength`` from the run header's asked lengths, else the lengths observed (said as
    ``other``)."""
    if isinstance(block, Mapping):
        d = block.get("distribution")
        dist: Mapping[str, Any] = d if isinstance(d, Mapping) else {}
        lo, hi = _num(block.get("min")), _num(block.get("max"))
        kind = _DIST.get(str(dist.get("kind")), "other")
        value = _num(dist.get("mean")) or _num(block.get("mean"))
        if value is None and lo is not None and hi is not None:
            value = (lo + hi) / 2 if kind != "fixed" else lo
        if value is not None and value >= 0:
            out: dict[str, Any] = {"distribution": kind, "value": value}
            if lo is not None and lo >= 0 and kind != "fixed":
                out["min"] = int(lo)
            if hi is not None and hi >= 1 and kind != "fixed":
                out["max"] = int(hi)
            sd = _num(dist.get("std_dev")) or _num(dist.get("sd"))
            if kind == "gaussian" and sd is not None and sd >= 0:
                out["std_dev"] = sd
            return out
    if observed:
        return {"distribution": "other", "value": observed["mean"]}
    return {"distribution": "other", "value": 0}


def _source(load: Mapping[str, Any]) -> str:
    if load.get("dataset") or load.get("trace"):
        return "sampled"
    if load.get("prompt_builder"):
        return "random"
    return "unknown"


def description(step: Mapping[str, Any], model: str | None, slos_text: str, synthetic: bool) -> str:
    """"servewatch: gemma at concurrency 4 (round 1): PASS; good 98.6% of 432 at TTFT <= 1000 ms (answer); goodput
    0.72 req/s" (SYNTHETIC first when the data is made up)."""
    gf = _num(step.get("good_fraction"))
    gp = _num(step.get("goodput_rps"))
    unit = "req/s" if step.get("mode") == "open" else "concurrency"
    where = f"{unit} {step.get('level'):g}" if _num(step.get("level")) is not None else "an unknown level"
    text = (f"servewatch: {model or 'unknown model'} at {where} (round {step.get('round', 1)}): "
            f"{step.get('verdict')}; good {'N/A' if gf is None else f'{gf * 100:.1f}%'} of {step.get('n')} at "
            f"{slos_text}; goodput {'N/A' if gp is None else f'{gp:.2f}'} req/s")
    return ("SYNTHETIC (made-up data, not a measurement): " + text) if synthetic else text


def llmd_report(*, header: Mapping[str, Any], step: Mapping[str, Any], stage: int, series: Mapping[str, Sequence[float]],
                span: tuple[float | None, float | None], slos_text: str, settings: Any, synthetic: bool,
                run_key: str, source_file: str | None, steps_in_run: int) -> dict[str, Any]:
    """The llm-d benchmark report v0.2 of one step (``step``: the report's level row; ``series``: the step's
    value lists, ``SERIES``' names, of its completed measured requests; ``span``: its first send and last end)."""
    ident = identity.identity_of(header)
    model = ident.served_model or ident.claimed_model
    # no time axis (an import whose send times are stand-ins: ``source.time_axis`` none): no time span, no duration
    # and no rate per second (each would be made up); said in native.config.servewatch.time_axis
    src = header.get("source")
    rates = not (isinstance(src, Mapping) and src.get("time_axis") == "none")
    if not rates:
        step = {**step, **dict.fromkeys(("seconds", "throughput_rps", "output_tok_per_s", "goodput_rps"))}
    load = header.get("load") if isinstance(header.get("load"), Mapping) else {}
    assert isinstance(load, Mapping)
    level = _num(step.get("level"))
    left_out: dict[str, Any] = {}
    stats = {k: statistics(series.get(k) or (), u, left_out, k) for k, u in SERIES.items()}
    start, end = span if rates else (None, None)
    seconds = _num(step.get("seconds"))
    run: dict[str, Any] = {"uid": _hash([run_key, step.get("level"), step.get("round")]), "eid": _hash(run_key),
                           "description": description(step, model, slos_text, synthetic),
                           "keywords": ["servewatch", str(step.get("verdict"))] + (["SYNTHETIC"] if synthetic else [])}
    times = {"start": _iso(start), "end": _iso(end), "duration": None if seconds is None else f"PT{seconds:.6f}S"}
    if any(v is not None for v in times.values()):
        run["time"] = {k: v for k, v in times.items() if v is not None}
    server = ((header.get("environment") or {}).get("server") if isinstance(header.get("environment"), Mapping)
              else None) or {}
    engine = {"kind": "generic", "tool": ident.engine or "unknown", "tool_version": ident.build or "unknown",
              "model": model or "unknown", "claimed_model": ident.claimed_model}
    standardized: dict[str, Any] = {
        "tool": "servewatch", "tool_version": str(header.get("tool_version") or "unknown"),
        "parallelism": max(1, int(_num((load.get("workers") or {}).get("count")) or 1))
        if isinstance(load.get("workers"), Mapping) else 1,
        "source": _source(load), "stage": max(0, stage),
        "input_seq_len": _seq_len(load.get("input_tokens"), stats["input_length"]),
    }
    if load.get("output_tokens") is not None or stats["output_length"]:
        standardized["output_seq_len"] = _seq_len(load.get("output_tokens"), stats["output_length"])
    if level is not None and level > 0:
        if step.get("mode") == "open":
            standardized["rate_qps"] = level
        elif level >= 1 and float(level).is_integer():
            standardized["concurrency"] = int(level)
    native = {"servewatch": {
        "verdict": step.get("verdict"), "level": step.get("level"), "round": step.get("round"),
        "mode": step.get("mode"), "n": step.get("n"), "good": step.get("good"),
        "good_fraction": step.get("good_fraction"), "goodput_rps": step.get("goodput_rps"),
        "slos": slos_text, "verdict_settings": settings, "synthetic": synthetic,
        "workload": workload.describe_header(header), "source_file": source_file,
        "steps_in_run": steps_in_run, "percentiles": "nearest rank", "percentiles_left_out": left_out,
        "inter_token_latency": "not exported: servewatch records each request's largest gap (itl_max_ms), not every "
                               "gap; time_per_output_token is the per-request mean",
    }, "load": dict(load)}
    requests: dict[str, Any] = {"total": int(step.get("n") or 0), "failures": int(step.get("failed") or 0)}
    for key in ("input_length", "output_length"):
        if stats[key]:
            requests[key] = stats[key]
    latency = {name: stats[key] for name, key in (("time_to_first_token", "ttft_s"), ("time_per_output_token", "tpot_s"),
                                                  ("request_latency", "e2e_s")) if stats[key]}
    throughput: dict[str, Any] = {}
    rps, out_tps = _num(step.get("throughput_rps")), _num(step.get("output_tok_per_s"))
    in_tokens = math.fsum(series.get("input_length") or ())
    if rps is not None:
        throughput["request_rate"] = {"units": "queries/s", "mean": rps}
    if out_tps is not None:
        throughput["output_token_rate"] = {"units": "tokens/s", "mean": out_tps}
    if seconds and series.get("input_length"):
        throughput["input_token_rate"] = {"units": "tokens/s", "mean": in_tokens / seconds}
        if out_tps is not None:
            throughput["total_token_rate"] = {"units": "tokens/s", "mean": in_tokens / seconds + out_tps}
    aggregate: dict[str, Any] = {"requests": requests}
    if latency:
        aggregate["latency"] = latency
    if throughput:
        aggregate["throughput"] = throughput
    return {
        "version": VERSION,
        "run": run,
        "scenario": {
            "stack": [{"metadata": {"schema_version": "0.0.1", "label": "server-0", "cfg_id": _hash(server),
                                    "description": "the server under test, as it described itself"},
                       "standardized": {k: v for k, v in engine.items() if v is not None},
                       "native": {"config": server}}],
            "load": {"metadata": {"schema_version": "0.0.1", "cfg_id": _hash(load),
                                  "description": workload.describe_header(header)},
                     "standardized": standardized, "native": {"config": native}},
        },
        "results": {"request_performance": {"aggregate": aggregate}},
    }
