"""Step bookkeeping: what one step (a level of the ramp, one round; or the warmup) has sent and
finished, and the ``step`` end record with its lateness, saturation flag and verdict.

Lateness is ``t_sent - t_intended``: in open loop how late requests reached the wire against the
schedule (p99 above :data:`SATURATION_LATENESS_MS` flags the step "client saturated, results not
valid"); in closed loop the same difference is the client's own send overhead, and a client that
used :data:`CLIENT_BUSY_LIMIT` CPU-seconds per second or more is flagged saturated instead.

Memory: a step keeps counters and two :class:`StepQuantiles` (lateness, TTFT), never a value per
request beyond :data:`STEP_EXACT_VALUES`: a step of up to that many finished requests reports exact
nearest-rank percentiles; a longer one (a soak: 50 req/s for an hour is 180,000) reports them from a
log-bucketed histogram, each within :data:`PCT_REL_ERR` (1%) relative error of the exact value, and
its end record says so (``percentiles_rel_error``). The algorithm is ``tui.core.stepstats``: the readers recompute
the same percentiles from the request records and compare them with the record (``tui.core.completeness``).

A ladder step after which the run stops early says why in its end record (``stop``, :func:`ladder_stop`): a reader
holds the planned levels and rounds of the header against the steps present, and only a recorded stop explains
missing ones (docs/record-format.md, "What a file must hold to PASS").
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from tui.core.evidence import LATENESS_FLOOR_MS
from tui.core.stepstats import PCT_REL_ERR, STEP_EXACT_VALUES, StepQuantiles, pct  # noqa: F401 (re-exported)
from tui.sources.load.kinds import Mode, Phase

SATURATION_LATENESS_MS = 10.0
CLIENT_BACKOFF_S = 0.01  # closed loop: a loop whose request failed in the client waits this long before its next ...
CLIENT_BACKOFF_MAX_S = 1.0  # ... doubling per failure in a row up to this (no hot spin on EMFILE), reset by a success
CLIENT_BUSY_LIMIT = 0.9  # closed loop: client CPU-seconds per wall second that flag the step as saturated


class Step:
    """Counters of one running step (times are perf_counter seconds)."""

    __slots__ = (
        "complete",
        "cpu0",
        "errors",
        "finished",
        "lateness",
        "level",
        "mode",
        "out_tokens",
        "pcpu0",
        "phase",
        "round",
        "sent",
        "t0",
        "t1",
        "ttfts",
    )

    def __init__(self, level: float, rnd: int, phase: Phase, mode: Mode) -> None:
        self.level = level
        self.round = rnd
        self.phase: Phase = phase
        self.mode: Mode = mode
        self.sent = 0
        self.finished = 0
        self.complete = 0
        self.errors: Counter = Counter()
        self.lateness = StepQuantiles()  # bounded: see StepQuantiles
        self.ttfts = StepQuantiles()
        self.out_tokens = 0
        self.t0 = perf_counter()
        self.t1: float | None = None
        self.cpu0 = time.thread_time()
        self.pcpu0 = time.process_time()

    def add(self, lateness: float, error: str | None, ttft: float | None, out_tokens: int) -> None:
        """One finished request: its lateness, error class (None: complete), TTFT (s) and output tokens."""
        self.finished += 1
        self.lateness.add(lateness)
        if error is None:
            self.complete += 1
            self.ttfts.add(ttft if ttft is not None else math.inf)
            self.out_tokens += out_tokens
        else:
            self.errors[error] += 1


def step_start_record(t: float, level: float, rnd: int, mode: Mode, phase: Phase, n_requests: int | None,
                      duration: float | None, arrival: str | None) -> dict:
    d: dict[str, Any] = {"type": "step", "t": t, "event": "start", "level": level, "round": rnd,
                         "mode": mode, "phase": phase, "requests": n_requests, "duration": duration}
    if mode == "open":
        d.update(arrival=arrival, rate=level)
    return d


def step_end_record(step: Step, t1_epoch: float, verdict: Any = None, slo_ms: float | None = None,
                    client_text: str | None = None) -> dict:
    """The ``step`` end record. ``step.t1`` must be set (perf_counter); ``verdict`` is the core
    monitor's verdict of the step (its ``state`` and ``reason`` are recorded) or None. With ``slo_ms`` an open-loop
    step is ``saturated`` by the delivered-load bounds the verdict uses (tui.core.evidence: lateness p99 within
    the SLO, p99 - p50 within one arrival gap); without it by the fixed SATURATION_LATENESS_MS. A step with any
    request that failed in the client (error class ``client``: its own resources ran out) is ``client_limited``
    (issue 36; readers derive it from the request records too); ``client_text``: the monitor's sentence for it
    (what ran out, what to do), else a generic one."""
    t1 = step.t1 or perf_counter()
    secs = max(1e-9, t1 - step.t0)
    late50, p99 = step.lateness.quantiles((0.5, 0.99))
    (p50,) = step.ttfts.quantiles((0.5,))
    # open loop: lateness = t_sent - t_intended (the schedule); closed loop: the same
    # difference is the client's own send overhead (connection setup included)
    lk = "lateness" if step.mode == "open" else "send_overhead"
    d: dict[str, Any] = {
        "type": "step", "t": t1_epoch, "event": "end", "level": step.level, "round": step.round,
        "mode": step.mode, "phase": step.phase,
        "requests": step.finished, "completed": step.complete, "failed": step.finished - step.complete,
        "errors": dict(step.errors),
        "duration_s": round(secs, 3),
        "ttft_p50_ms": None if p50 is None or math.isinf(p50) else round(p50 * 1e3, 2),
        "output_tok_per_s": round(step.out_tokens / secs, 2),
        lk + "_p50_ms": None if p99 is None or late50 is None else round(late50 * 1e3, 3),
        lk + "_p99_ms": None if p99 is None else round(p99 * 1e3, 3),
        "client_cpu_s": round(time.thread_time() - step.cpu0, 4),
        "process_cpu_s": round(time.process_time() - step.pcpu0, 4),
    }
    if step.lateness.approximate or step.ttfts.approximate:
        # more than STEP_EXACT_VALUES requests: the percentiles above come from the bounded histogram
        d["percentiles_rel_error"] = PCT_REL_ERR
    if step.mode == "open":
        if slo_ms is None:
            sat = p99 is not None and p99 * 1e3 > SATURATION_LATENESS_MS
            bound = f"> {SATURATION_LATENESS_MS:g} ms"
        else:
            late_bound = max(LATENESS_FLOOR_MS, slo_ms)
            spread_bound = max(LATENESS_FLOOR_MS, 1000.0 / step.level) if step.level > 0 else LATENESS_FLOOR_MS
            sat = p99 is not None and late50 is not None and (
                p99 * 1e3 > late_bound or (p99 - late50) * 1e3 > spread_bound)
            bound = (f"> {late_bound:g} ms (the SLO), or p99 - p50 > {spread_bound:.0f} ms (one arrival gap)")
        d["saturated"] = sat
        if sat:
            assert p99 is not None
            d["note"] = (f"client saturated, results not valid: dispatch lateness p99 {p99 * 1e3:.1f} ms "
                         f"{bound} (requests reached the wire later than scheduled)")
    else:
        # closed loop: no schedule to miss, but a CPU-bound client delays reading tokens (TTFT grows)
        busy = d["process_cpu_s"] / secs
        if secs >= 1.0 and busy >= CLIENT_BUSY_LIMIT:
            d["saturated"] = True
            d["note"] = (f"client saturated, results not valid: the load generator used {busy:.2f} CPU-seconds "
                         f"per second (>= {CLIENT_BUSY_LIMIT:g}); its own delays are inside the measured TTFT")
    client = step.errors.get("client", 0)
    if client:
        d["client_limited"] = True
        note = client_text or (f"client_limited: {client} requests failed in the client (its own resources ran out)")
        d["client_limited_note"] = note + "; not the server's failures, and the level cannot PASS"
    if verdict is not None:
        d["verdict"] = verdict.state
        d["verdict_reason"] = verdict.reason
    return d


def ladder_stop(end: dict, stop_on_fail: bool, search: bool) -> dict | None:
    """Why the ladder stops after this step (the end record's ``stop``), or None when it goes on: a FAIL with
    ``--stop-on-fail`` (a sweep's default), or a lost load worker (a degraded step). The same rule the generator's
    ladder follows (``LoadGenerator._ladder``)."""
    if stop_on_fail and end.get("verdict") == "FAIL":
        return {"cause": "stop_on_fail", "text": "this step FAILED: the ladder stopped here (--stop-on-fail)"
                + ("; the capacity search follows" if search else "")}
    if end.get("degraded"):
        return {"cause": "degraded", "text": "a load worker was lost during this step: the run stopped here"}
    return None


def describe_step(end: dict) -> str:
    """One line for a step end record."""
    parts = [f"{end['requests']} requests, {end['completed']} complete, {end['failed']} failed"]
    if end.get("errors"):
        parts.append("errors " + ", ".join(f"{k} {v}" for k, v in sorted(end["errors"].items())))
    if end.get("ttft_p50_ms") is not None:
        parts.append(f"TTFT p50 {end['ttft_p50_ms']:.0f} ms")
    parts.append(f"{end['output_tok_per_s']:.1f} output tok/s")
    if end.get("lateness_p99_ms") is not None:
        parts.append(f"dispatch lateness p99 {end['lateness_p99_ms']:.1f} ms")
    elif end.get("send_overhead_p99_ms") is not None:
        parts.append(f"send overhead p99 {end['send_overhead_p99_ms']:.1f} ms")
    parts.append(f"client CPU {end['client_cpu_s']:.2f} s")
    line = ", ".join(parts)
    if end.get("verdict"):
        line += f"; verdict {end['verdict']}"
    if end.get("saturated"):
        line += "  [CLIENT SATURATED: results not valid]"
    if end.get("client_limited"):
        line += f"  [CLIENT-LIMITED: {(end.get('errors') or {}).get('client', '?')} requests failed in the client]"
    return line


def pool_fields(end: dict, pooled: Any, mode: str) -> None:
    """Add what the worker processes measured (``pooled``: the coordinator's ``StepResult`` of the step) to a step
    end record: their CPU, and whether one was saturated or lost (a degraded step cannot PASS: the core monitor
    reads ``degraded``)."""
    end["coordinator_cpu_s"] = end["process_cpu_s"]
    end["client_cpu_s"] = round(end["client_cpu_s"] + pooled.thread_cpu_s, 4)
    end["process_cpu_s"] = round(end["process_cpu_s"] + pooled.cpu_s, 4)
    end["worker_cpu_s"] = pooled.per_worker_cpu_s
    secs = max(float(end.get("duration_s") or 0.0), 1e-9)
    coord_busy = end["coordinator_cpu_s"] / secs if secs >= 1.0 else 0.0
    busy = max(pooled.busiest, coord_busy)
    if mode == "closed":
        if busy >= CLIENT_BUSY_LIMIT:
            end["saturated"] = True
            end["note"] = (f"client saturated, results not valid: a load process used {busy:.2f} CPU-seconds per "
                           f"second (>= {CLIENT_BUSY_LIMIT:g}); its own delays are inside the measured TTFT")
        else:
            end.pop("saturated", None)
            end.pop("note", None)
    if pooled.degraded:
        end["degraded"] = True
        end["worker_lost"] = pooled.worker_lost_requests
        end["lost_workers"] = list(pooled.lost)
        end["note"] = ((end.get("note", "") + "; ") if end.get("note") else "") + (
            "degraded: a load worker was lost during this step, the level was not held and cannot PASS")
        if end.get("verdict") in ("PASS", "UNDECIDED"):  # a FAIL stands; a PASS (or one already blocked) cannot
            prev = end.get("verdict_reason") if end.get("verdict") == "UNDECIDED" else None
            end["verdict"] = "UNDECIDED"
            end["verdict_reason"] = (f"degraded: a load worker was lost during this step ({pooled.worker_lost_requests} "
                                     "requests in flight recorded as worker_lost); the level was not held, so it "
                                     "cannot PASS" + (f"; {prev}" if prev and prev.startswith("cannot PASS") else ""))


async def closed_loops(step: Step, concurrency: int, n_units: int | None, duration: float | None,
                       stop: Callable[[], bool], unit: Callable[[float], Awaitable[Any]]) -> None:
    """A closed-loop step: ``concurrency`` loops from the common start ``step.t0``, each starting its next unit
    (``unit(now)``: a request, or a session) when its last one ended, until ``n_units`` were started by all the loops,
    ``duration`` passed or ``stop()``. A unit that returns True failed in the client (its own resources ran out):
    that loop waits :data:`CLIENT_BACKOFF_S`, doubling while it keeps failing so (at most
    :data:`CLIENT_BACKOFF_MAX_S`), instead of spinning out failures the server never saw."""
    end_at = step.t0 + duration if duration else None
    started = 0

    async def loop() -> None:
        nonlocal started
        backoff = 0.0
        while True:
            if n_units is not None and started >= n_units:
                return
            now = perf_counter()
            if end_at is not None and now >= end_at:
                return
            if stop():
                return
            started += 1
            if await unit(now) is True:
                backoff = min(CLIENT_BACKOFF_MAX_S, backoff * 2.0 if backoff else CLIENT_BACKOFF_S)
                wait = backoff if end_at is None else min(backoff, max(0.0, end_at - perf_counter()))
                await asyncio.sleep(wait)
            else:
                backoff = 0.0

    if concurrency <= 0:
        return
    delay = step.t0 - perf_counter()
    if delay > 0:  # a common start time for every worker
        await asyncio.sleep(delay)
    async with asyncio.TaskGroup() as tg:
        for _ in range(concurrency):
            tg.create_task(loop())
