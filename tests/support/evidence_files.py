"""Record files shaped like `servewatch run` writes them (header, step start/end with their counts, requests in
completion order), built in memory for the cross-check tests: an honest one, and the edits a reviewer may meet.

Times are real epoch seconds (the reader refuses anything before 2000-01-01). Everything here is a test fixture:
the headers say ``synthetic: false`` only because the cross-checks are what is being tested (a SYNTHETIC file never
exits 0, whatever it holds)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

T0 = 1_767_225_600.0  # 2026-01-01


def header(mode: str = "closed", levels: tuple = (4,), rounds: int = 1, **load) -> dict:
    return {"type": "run", "schema": "servewatch.record/1", "schema_version": 1, "tool": "servewatch",
            "tool_version": "0.1.0", "started_at": T0, "target": {"url": "http://127.0.0.1:9", "model": "m"},
            "load": {"mode": mode, "levels": list(levels), "rounds": rounds, "warmup": 0, **load},
            "environment": {}, "synthetic": False,
            "source": {"kind": "run", "tool": "servewatch", "version": "0.1.0", "file": None, "sha256": None,
                       "derived": []},
            "run_id": "test-run"}


def request(i: int, t_sent: float, ttft: float, dur: float, *, level: float, rnd: int = 1, ok: bool = True,
            t_intended: float | None = None, phase: str = "measure", **extra) -> dict:
    d = {"type": "request", "id": f"r{level:g}-{rnd}-{i:06d}", "t_intended": t_sent if t_intended is None else t_intended,
         "t_sent": t_sent, "t_first_token": t_sent + ttft if ok else None, "t_end": t_sent + dur,
         "input_tokens": 100, "output_tokens": 32 if ok else None, "finish_reason": "length" if ok else None,
         "http_status": 200 if ok else 503, "complete": ok, "error": None if ok else "http_5xx",
         "error_detail": None, "phase": phase, "level": level, "round": rnd}
    d.update(extra)
    return d


def closed_step(level: int, t0: float, seconds: float, *, rnd: int = 1, ttft: float = 0.2, dur: float = 2.0,
                fail: Callable[[int], bool] = lambda i: False, idle: float = 0.0) -> list[dict]:
    """``level`` slots, each sending its next request ``idle`` s after the previous one ended, for ``seconds``."""
    reqs = []
    i = 0
    for slot in range(level):
        t = t0 + slot * 0.01
        while t + dur <= t0 + seconds:
            bad = fail(i)
            reqs.append(request(i, t, ttft, dur if not bad else 0.3, level=level, rnd=rnd, ok=not bad))
            t += (dur if not bad else 0.3) + idle
            i += 1
    return reqs


def open_step(rate: float, t0: float, seconds: float, *, rnd: int = 1, ttft: float = 0.2, dur: float = 1.0,
              late: float = 0.0, fail: Callable[[int], bool] = lambda i: False) -> list[dict]:
    """Constant arrivals at ``rate``; each sent ``late`` s after its intended time."""
    n = int(seconds * rate)
    out = []
    for i in range(n):
        ti = t0 + i / rate
        bad = fail(i)
        out.append(request(i, ti + late, ttft, dur, level=rate, rnd=rnd, ok=not bad, t_intended=ti))
    return out


def step_records(reqs: list[dict], level: float, mode: str, rnd: int = 1) -> tuple[dict, dict]:
    """The step start/end records `servewatch run` writes around ``reqs``, with their counts."""
    t_start = min(r["t_sent"] for r in reqs)
    t_end = max(r["t_end"] for r in reqs)
    failed = sum(1 for r in reqs if not r["complete"] or r["error"])
    errors: dict[str, int] = {}
    for r in reqs:
        if r["error"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    start = {"type": "step", "t": t_start, "event": "start", "level": level, "round": rnd, "mode": mode,
             "phase": "measure", "requests": None, "duration": None}
    end = {"type": "step", "t": t_end, "event": "end", "level": level, "round": rnd, "mode": mode,
           "phase": "measure", "requests": len(reqs), "completed": len(reqs) - failed, "failed": failed,
           "errors": errors, "duration_s": round(t_end - t_start, 3)}
    if mode == "open":
        late = sorted(r["t_sent"] - r["t_intended"] for r in reqs)
        # nearest rank, as the load generator computes it (a reader recomputes and compares it: issue 35)
        end["lateness_p99_ms"] = round(late[max(1, math.ceil(0.99 * len(late))) - 1] * 1000, 3)
        end["saturated"] = end["lateness_p99_ms"] > 10
    return start, end


def assemble(hdr: dict, steps: list[tuple[dict, list[dict], dict]]) -> list[dict]:
    """Header, then per step: start, requests in completion order, end."""
    out = [hdr]
    for start, reqs, end in steps:
        out.append(start)
        out.extend(sorted(reqs, key=lambda r: r["t_end"]))
        out.append(end)
    return out


def another_run(records: list[dict], seed: int) -> list[dict]:
    """A copy that is ANOTHER run of the same test (`compare` refuses one run's data on both sides): its own run id,
    and each request's first token (or, failed, its end) moved by a seeded fraction of a millisecond to a few ms,
    the send times, durations and counts kept (two real runs never share a request's times to the microsecond)."""
    import random

    rng = random.Random(seed)
    out = []
    for r in records:
        r = dict(r)
        if r.get("type") == "run":
            r["run_id"] = f"{r.get('run_id') or 'run'}-{seed}"
            r["started_at"] = (r.get("started_at") or T0) + seed * 1e-3
        elif r.get("type") == "request":
            if r.get("t_first_token") is not None:
                r["t_first_token"] = min(r["t_end"], r["t_first_token"] + rng.uniform(0.0, 0.005))
            else:
                r["t_end"] = max(r["t_sent"], r["t_end"] - rng.uniform(0.0, 0.001))
        out.append(r)
    return out


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def honest_closed(level: int = 4, seconds: float = 660.0, **kw) -> list[dict]:
    reqs = closed_step(level, T0 + 1.0, seconds, **kw)
    start, end = step_records(reqs, level, "closed")
    return assemble(header("closed", (level,)), [(start, reqs, end)])


def honest_open(rate: float = 2.0, seconds: float = 660.0, **kw) -> list[dict]:
    reqs = open_step(rate, T0 + 1.0, seconds, **kw)
    start, end = step_records(reqs, rate, "open")
    return assemble(header("open", (rate,), arrival="constant"), [(start, reqs, end)])
