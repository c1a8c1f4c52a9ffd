"""Cumulative snapshots: one scrape of one server's ``/metrics`` (labelled samples) summed over the selected
series into histogram buckets, counters and gauges (``Cumulative``); what is missing or unusable is said, never
filled in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tui.core.engines import ENGINES
from tui.core.records.watch import INF, Buckets, finite

Sample = tuple  # (name: str, labels: dict[str, str], value: float)


@dataclass(frozen=True)
class Cumulative:
    """One scrape of one server, summed over the selected series."""

    t: float
    engine: str
    ttft: Buckets | None
    e2e: Buckets | None
    queue_time: Buckets | None
    success: float | None
    failed: float | None
    preemptions: float | None
    waiting: float | None
    running: float | None
    kv_cache: float | None
    missing: tuple[str, ...] = ()
    itl: Buckets | None = None  # issue 21: inter-token gaps, per-request TPOT
    tpot: Buckets | None = None


def _histogram(samples: Sequence[Sample], base: str) -> tuple[Buckets | None, str | None]:
    """Cumulative buckets summed over series (by ``le``), or (None, reason)."""
    bname = base + "_bucket"
    acc: dict[float, float] = {}
    bad = 0
    for name, labels, v in samples:
        if name != bname:
            continue
        try:
            le = float(labels.get("le", "nan").replace("+Inf", "inf"))
        except ValueError:
            bad += 1
            continue
        if math.isnan(le) or not finite(v):
            bad += 1
            continue
        acc[le] = acc.get(le, 0.0) + float(v)
    if not acc:
        return None, f"{base}: series missing"
    if bad:
        return None, f"{base}: {bad} NaN or malformed bucket sample(s)"
    if INF not in acc:
        return None, f"{base}: no +Inf bucket"
    out = tuple(sorted(acc.items()))
    for (_a, ca), (_b, cb) in zip(out, out[1:]):
        if cb + 1e-9 < ca:
            return None, f"{base}: buckets not cumulative (a scrape mixed two server lifetimes?)"
    return out, None


def _counter(samples: Sequence[Sample], spec: tuple[tuple[str, str | None, tuple[str, ...]], ...]
             ) -> tuple[float | None, str | None]:
    total, seen = 0.0, False
    for name, label, values in spec:
        for n, labels, v in samples:
            if n != name:
                continue
            if label is not None and labels.get(label) not in values:
                continue
            if not finite(v):
                return None, f"{name}: NaN"
            total += float(v)
            seen = True
    if not spec:
        return None, None
    if not seen:
        return None, f"{spec[0][0]}: series missing"
    return total, None


def _gauge(samples: Sequence[Sample], names: tuple[str, ...], how: str = "sum") -> float | None:
    for want in names:
        vals = [float(v) for n, _l, v in samples if n == want and finite(v)]
        if vals:
            if how == "max":
                v = max(vals)
                if 1.0 < v <= 100.0:
                    v /= 100.0
                return v if 0.0 <= v <= 1.0 else None
            return float(sum(vals))
    return None


def cumulative_from_samples(samples: Sequence[Sample], engine: str, t: float) -> Cumulative:
    m = ENGINES[engine]
    missing: list[str] = []

    def hist(base):
        if base is None:
            return None
        h, why = _histogram(samples, base)
        if why:
            missing.append(why)
        return h

    ttft, e2e, qt = hist(m.ttft), hist(m.e2e), hist(m.queue_time)
    itl, tpot = first_histogram(samples, m.itl), first_histogram(samples, m.tpot)
    succ, why_s = _counter(samples, m.success)
    fail, why_f = _counter(samples, m.failed)
    # a labelled counter with no failing series yet is a zero, not a gap: vLLM creates its
    # finished_reason series up front, SGLang's abort counter only on the first abort.
    if fail is None and why_f and "missing" in why_f and (succ is not None or ttft is not None):
        fail, why_f = 0.0, None
    for why in (why_s, why_f):
        if why:
            missing.append(why)
    pre = None
    if m.preemptions:
        pre = _gauge(samples, m.preemptions)
    return Cumulative(
        t=float(t), engine=engine, ttft=ttft, e2e=e2e, queue_time=qt, success=succ, failed=fail,
        preemptions=pre, waiting=_gauge(samples, m.waiting), running=_gauge(samples, m.running),
        kv_cache=_gauge(samples, m.kv_cache, "max"), missing=tuple(missing), itl=itl, tpot=tpot,
    )


def first_histogram(samples: Sequence[Sample], names: tuple[str, ...]) -> Buckets | None:
    """The first of ``names`` (newer first) present and usable; None when none is (an SLO that needs it then
    says it is not judgeable: ``tui.core.watch.combine``)."""
    for base in names:
        h, _why = _histogram(samples, base)
        if h is not None:
            return h
    return None
