"""Parts of a load run's header that describe where it ran: the environment, the load workers, and what a trace
replay adds (its arrivals and lengths, its file, and SYNTHETIC when the trace says so in its own words). The
generator (``tui.sources.load.generator.LoadGenerator.header``) assembles the header from these."""

from __future__ import annotations

import os
import platform
from typing import Any

import httpx

from tui import __version__

__all__ = ["environment", "with_trace", "workers_block"]

RAY_CLOCK_NOTE = ("clock_offset_ms: the actor's time.time() minus this process's, best of 5 round trips "
                  "(+- clock_offset_pm_ms, half that round trip); actors on this machine use this "
                  "process's clock anchor, others their own; no stamp is corrected by the offset")


def environment(server: Any, gpu_env: dict | None) -> dict:
    """The header's ``environment``: Python, OS, machine, client library versions, the server's facts, the GPU."""
    return {
        "python": platform.python_version(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "httpx": httpx.__version__,
        "servewatch": __version__,
        "server": server,
        "gpu": gpu_env if gpu_env is not None else {"gpu": "not sampled (--no-gpu)"},
    }


def workers_block(pooled: bool, ray: bool, workers: int, workers_info: list) -> dict:
    """The header's ``load.workers``: in process, or the worker processes / Ray actors and each one's facts."""
    if not pooled:
        return {"count": 1, "kind": "in-process"}
    kind = "ray" if ray else "processes"
    block = {"count": workers, "kind": kind, "split": "closed: concurrency divided; open: every W-th arrival",
             "workers": [dict(i) for i in workers_info]}
    if kind == "ray":
        block["clock"] = RAY_CLOCK_NOTE
    return block


def with_trace(hdr: dict, trace: Any) -> dict:
    """``hdr`` of a trace replay: its arrivals and lengths, the trace file it came from, and SYNTHETIC with the reason
    when the trace says it is synthetic (its own first comment line; ``Trace.synthetic_reason``)."""
    (i0, i1), (o0, o1) = trace.input_range, trace.output_range
    hdr["load"].update(arrival="trace", trace=trace.header_block(), input_tokens={"min": i0, "max": i1},
                       output_tokens={"min": o0, "max": o1},
                       note="arrivals and token lengths replayed from " + trace.describe())
    hdr["source"] = trace.header_source()
    why = trace.synthetic_reason  # the trace's own word: the run is labelled SYNTHETIC everywhere
    if why is not None:
        hdr["synthetic"] = True
        hdr["synthetic_reason"] = f"real requests, but a synthetic workload: {why}"
    return hdr
