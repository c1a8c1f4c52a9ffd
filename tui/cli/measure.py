"""`servewatch measure`: a short measurement with no verdict (issue 41), the flags of `run`.

    servewatch measure --url http://127.0.0.1:8080 --concurrency 4 --duration 60
    servewatch measure --url http://127.0.0.1:8080 --rate 2 --duration 60 --record m.jsonl --percentiles 50,90,99

Throughput, goodput at the SLOs given, the latency percentiles and the errors by class, in one screen, and the line
"measure only: no verdict": never PASS, never FAIL (the users of GuideLLM, AIPerf and `vllm bench serve` expect a
benchmark mode). Its record file is a normal record file (its header's ``load.purpose`` is "measure"): `servewatch
report FILE` judges it like any other (INSUFFICIENT_WINDOW when the window is short).

Exit codes: 0 the measurement completed; 2 bad usage, or a server that could not be measured (nothing recorded);
130 after Ctrl-C and 143 after SIGTERM (the record sealed, the partial measurement printed first).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.cli.loadtest import LoadSettings, config_or_usage, record_run, say
from tui.cli.options import epilog, percentiles_flag

NO_VERDICT = "measure only: no verdict"
EPILOG = epilog("servewatch measure --url http://127.0.0.1:8080 --concurrency 4 --duration 60",
                "servewatch measure --url http://127.0.0.1:8080 --rate 2 --duration 60 --record m.jsonl",
                codes="exit codes: 0 the measurement completed (no verdict: `servewatch report FILE` judges its "
                      "record); 2 bad usage or a server that could not be measured; 130 Ctrl-C, 143 SIGTERM")


@dataclass(frozen=True, kw_only=True)
class MeasureSettings(LoadSettings):
    """`servewatch measure`: the flags of `run`, nothing new."""

    DESCRIPTION = ("A short measurement with no verdict: throughput, goodput at the SLOs given, latency "
                   "percentiles, errors by class. The record file is a normal one: `report` judges it.")
    EPILOG = EPILOG

    percentiles: tuple[float, ...] | None = percentiles_flag()


def run(settings: MeasureSettings) -> int:
    """`servewatch measure`."""
    cfg = config_or_usage(settings)
    cfg.purpose = "measure"
    recorded = record_run(cfg)
    if recorded.failed is not None:
        return recorded.failed
    from tui.cli.reporting import ReportSettings, run_report
    from tui.sources.evidence_reader import LAST_RUN

    assert cfg.record is not None  # record_run named it
    report = ReportSettings(file=cfg.record, run=LAST_RUN, json=True, acceptance=settings.acceptance,
                            budget=settings.budget)
    buf = io.StringIO()
    run_report(report, default_budget=False, out=buf)  # its exit code is a verdict's: not this one's
    say("")
    print(format_measure(json.loads(buf.getvalue()), cfg.record), end="")
    return recorded.stop_code(0)


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "N/A" if not isinstance(v, (int, float)) or isinstance(v, bool) else fmt.format(v)


def format_measure(rep: Mapping[str, Any], record: str) -> str:
    """The measurement of a report's JSON, without its verdict: per level the requests, throughput, goodput, the
    percentiles of each latency metric (the one mark for too few requests), the errors by class."""
    from tui.core.stats import insufficient_legend, labels, latency_cell

    slo = (rep.get("slo") or {}).get("text") or "the SLOs"
    out = [f"servewatch measure: {record}", f"  {NO_VERDICT} (servewatch report {record} judges this record)"]
    wl = rep.get("workload")
    if isinstance(wl, Mapping) and wl.get("text"):
        out.append(f"  workload: {wl['text']}")
    marked = False
    for r in rep.get("levels") or ():
        unit = "concurrency" if r.get("mode") == "closed" else "req/s"
        out.append(f"  {unit} {r.get('level'):g} round {r.get('round')}: {r.get('n')} requests, "
                   f"{r.get('completed')} completed, {r.get('failed')} failed, over {_f(r.get('seconds'), '{:.1f}')} s")
        out.append(f"    throughput {_f(r.get('req_per_s'))} req/s, {_f(r.get('output_tok_per_s'), '{:.1f}')} output "
                   f"tok/s; goodput {_f(r.get('goodput_per_s'))} req/s at {slo} "
                   f"({_f(r.get('good_fraction'), '{:.1%}')} good)")
        out.append(f"    latency, ms: {' / '.join(labels())} (n requests)")
        for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E")):
            block = r.get(key)
            if isinstance(block, Mapping):
                cell = latency_cell(dict(block))
                marked = marked or "*" in cell
                out.append(f"      {name:<5}{cell}")
        if r.get("not_reached"):
            out.append(f"    load not delivered: {r['not_reached']}")
    if not rep.get("levels"):
        out.append("  no measured request")
    if marked:
        out.append(f"  ({insufficient_legend()})")
    errs = rep.get("errors_by_class") or {}
    out.append("  errors: " + (", ".join(f"{k}={v}" for k, v in sorted(errs.items())) if errs else "none"))
    out.append(NO_VERDICT)
    return "\n".join(out) + "\n"
