"""The watch record: one window of a ``servewatch watch`` session (``{"type": "watch", ...}``, see
docs/record-format.md), its data (``Window``, with histogram ``Buckets``) and its one reader and writer.

The record reader (``tui.core.records.parse``) checks every watch record with ``window_from_record``; the watch
pipeline (``tui.core.watch``) builds ``Window`` values from scrapes and judges them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from tui.core.engines import ENGINES

INF = math.inf
Buckets = tuple  # ((le: float, cumulative count: float), ...) sorted by le, last le = inf


def finite(v: object) -> TypeGuard[float]:
    """A finite int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Window:
    """What happened between ``t_start`` and ``t_end`` (counts are increases in the window)."""

    t_start: float
    t_end: float
    engine: str
    source: str  # "metrics" (one server, two scrapes) | "prometheus" (increase() over replicas)
    ttft: Buckets | None = None
    e2e: Buckets | None = None
    queue_time: Buckets | None = None
    success: float | None = None
    failed: float | None = None
    preemptions: float | None = None
    waiting_start: float | None = None
    waiting_end: float | None = None
    running: float | None = None
    kv_cache: float | None = None
    gaps: tuple[str, ...] = ()
    reset: str | None = None  # why this window restarted (counter reset), if it did
    itl: Buckets | None = None  # inter-token gaps (one observation per gap), issue 21
    tpot: Buckets | None = None  # time per output token (one observation per request), issue 21

    @property
    def seconds(self) -> float:
        return max(0.0, self.t_end - self.t_start)


def _jb(b: Buckets | None) -> list[list[Any]] | None:
    if b is None:
        return None
    return [["+Inf" if math.isinf(le) else le, c] for le, c in b]


def _pb(v: object) -> Buckets | None:
    if v is None:
        return None
    if not isinstance(v, list):
        raise ValueError("buckets must be a list of [le, count]")
    out = []
    for item in v:
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError("buckets must be a list of [le, count]")
        le, c = item
        le = INF if le == "+Inf" else le
        if not isinstance(le, (int, float)) or isinstance(le, bool) or not finite(c):
            raise ValueError("bucket bound and count must be numbers")
        out.append((float(le), float(c)))
    out.sort()
    if not out or not math.isinf(out[-1][0]):
        raise ValueError("buckets need a +Inf bound")
    return tuple(out)


def window_to_record(w: Window) -> dict:
    """A ``watch`` record (see docs/record-format.md); ``itl_buckets`` / ``tpot_buckets`` only when present."""
    d = {
        "type": "watch", "t_start": w.t_start, "t_end": w.t_end, "engine": w.engine, "source": w.source,
        "ttft_buckets": _jb(w.ttft), "e2e_buckets": _jb(w.e2e), "queue_time_buckets": _jb(w.queue_time),
        "success": w.success, "failed": w.failed, "preemptions": w.preemptions,
        "waiting_start": w.waiting_start, "waiting_end": w.waiting_end, "running": w.running,
        "kv_cache_usage": w.kv_cache, "gaps": list(w.gaps), "reset": w.reset,
    }
    if w.itl is not None:
        d["itl_buckets"] = _jb(w.itl)
    if w.tpot is not None:
        d["tpot_buckets"] = _jb(w.tpot)
    return d


def window_from_record(d: dict) -> Window:
    """Inverse of ``window_to_record``; raises ValueError on a bad record."""
    def num(key, required=False):
        v = d.get(key)
        if v is None:
            if required:
                raise ValueError(f"missing required field {key!r}")
            return None
        if not finite(v):
            raise ValueError(f"field {key!r} must be a finite number")
        return float(v)

    t0, t1 = num("t_start", True), num("t_end", True)
    if t1 < t0:
        raise ValueError("t_end is before t_start")
    eng = d.get("engine")
    if not isinstance(eng, str) or eng not in ENGINES:
        raise ValueError(f"unknown engine {eng!r:.30}")
    gaps = d.get("gaps") or []
    if not isinstance(gaps, list):
        raise ValueError("field 'gaps' must be a list")
    reset = d.get("reset")
    return Window(
        t_start=t0, t_end=t1, engine=eng, source=str(d.get("source") or "metrics"),
        ttft=_pb(d.get("ttft_buckets")), e2e=_pb(d.get("e2e_buckets")), queue_time=_pb(d.get("queue_time_buckets")),
        success=num("success"), failed=num("failed"), preemptions=num("preemptions"),
        waiting_start=num("waiting_start"), waiting_end=num("waiting_end"), running=num("running"),
        kv_cache=num("kv_cache_usage"), gaps=tuple(str(g) for g in gaps), reset=None if reset is None else str(reset),
        itl=_pb(d.get("itl_buckets")), tpot=_pb(d.get("tpot_buckets")),
    )

