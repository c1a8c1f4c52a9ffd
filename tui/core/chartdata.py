"""The data behind the HTML report's charts: plain dicts and lists, no drawing (``tui.html`` draws them).

Pure domain, standard library only. Everything here is computed from what `report`, `accept` and `compare` already
computed (the level rows of their JSON, the verdict timeline, the budget's candidate and the measured capacity),
plus one bounded pass over the records for what no aggregate holds: the requests of a level one by one, the queue
and GPU memory samples over time. That pass is :class:`RunSampler` (fed the same blocks the Monitor is fed); it
keeps an evenly spaced sample (:class:`Thinned`) so a 1,000,000-request file draws at most
``defaults.CHART_SAMPLE_REQUESTS`` points per level, and every chart that draws from a sample says so
(``sampled`` / ``shown`` / ``seen``).

Two shapes of level rows are read (``level_rows``): the report's (``servewatch report --json``: ``levels``) and
the acceptance document's (``measured.levels``); compare's per-level pairs go through ``compare_levels``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, cast

import tui.core.defaults as defaults
from tui.core.bounds import MAX_GPU_DEVICES, MAX_LEVELS
from tui.core.outcomes import FAILED
from tui.core.records import GpuSample, QueueSample, RequestRecord, StepRecord
from tui.core.slos import SLO_TABLE, Slos, slo_rule

GIB = 1024 ** 3
#: latency metrics beside TTFT (the SLO table's kinds after TTFT): key in the level rows -> what the chart calls it
OTHER_LATENCY = tuple((k.json_key, k.title, k.json_key) for k in SLO_TABLE[1:])


# ------------------------------------------------------------------------------------------ the documents
# What the HTML pages draw (``tui.html.charts``), as ``TypedDict``s: a misspelled key is a mypy error, and
# tests/unit/core/test_typed_documents.py checks that these keys are the keys the functions below produce.

#: one percentile of one level as drawn: (value in ms, supported by the level's n)
Point = tuple[float | None, bool]


class GoodPoint(TypedDict):
    fraction: float | None
    lo: float | None
    hi: float | None
    n: object  # the row's own values, as its document holds them
    good: object
    state: object


class LatencyChart(TypedDict):
    """One latency metric beside TTFT: its title, the SLO key, and "P50"/"P95"/"P99" -> one point per level."""

    title: str
    slo_key: str
    P50: list[Point]
    P95: list[Point]
    P99: list[Point]


class LevelChart(TypedDict):
    """The per-level chart data (``level_rows``), in row order."""

    labels: list[str]
    x: list[float | None]
    numeric: bool  # every level a positive number: a log axis is possible
    good: list[GoodPoint]
    ttft: dict[str, list[Point]]  # "P50", "P95", "P99"
    latency: dict[str, LatencyChart]  # "tpot_ms", "itl_ms", "e2e_ms": only the metrics some level has
    goodput_rps: list[float | None]
    throughput_rps: list[float | None]
    goodput_tok_s: list[float | None]
    output_tok_s: list[float | None]


class Marks(TypedDict):
    candidate: float | None
    measured: float | None
    unit: str


class TimelineRow(TypedDict):
    """A timeline entry as the report's JSON holds it (``timeline_rows``)."""

    level: float | None
    round: int
    state: str
    n: int
    t: float


#: the verdict's state over a stretch of time at one level, in seconds from the origin ("from" is a keyword: the
#: functional form)
Band = TypedDict("Band", {"state": object, "from": float, "to": float | None, "n": object})


class JudgedSeries(TypedDict):
    level: float | None
    round: int
    label: str
    points: list[list[float | str | None]]  # [seconds, ttft_ms | None, outcome]
    failures: list[list[float | str | None]]  # [seconds, ttft_ms | None, error]
    bands: list[Band]
    seen: int
    shown: int
    distinct: int
    sampled: bool
    origin: float
    end: float | None
    timeline_omitted: int


class StepStart(TypedDict):
    t: float
    label: str


class QueueSeries(TypedDict):
    t: list[float]
    waiting: list[float | None]
    running: list[float | None]
    in_flight: list[int | None]
    recorded: bool
    in_flight_recorded: bool
    sampled: bool
    seen: int
    steps: list[StepStart]


class DeviceSeries(TypedDict):
    device: int
    name: str | None
    t: list[float]
    used_gib: list[float]
    total_gib: float | None


class KvSeries(TypedDict):
    t: list[float]
    used: list[float]
    unit: str  # "GiB" or "fraction"
    allocated_gib: float | None


class MemorySeries(TypedDict):
    devices: list[DeviceSeries]
    kv: KvSeries | None
    ceiling_gib: float | None
    kv_ceiling_gib: float | None
    sampled: bool
    steps: list[StepStart]


class CompareLevels(TypedDict):
    labels: list[str]
    base: LevelChart
    cand: LevelChart
    numeric: bool
    x: list[float | None]
    verdicts: list[object]
    difference: list[float | None]


class CompareCdf(TypedDict):
    label: str
    base: list[list[float]]
    cand: list[list[float]]
    base_n: int
    cand_n: int
    why: str


class SloLimits(TypedDict):
    ttft_ms: float | None
    tpot_ms: float | None
    itl_ms: float | None
    e2e_ms: float | None


class ChartBundle(TypedDict):
    """Everything the report / acceptance page charts (``report_bundle``)."""

    levels: LevelChart
    marks: Marks
    target: float
    slos: SloLimits
    judged: JudgedSeries | None
    queue: QueueSeries | None
    memory: MemorySeries | None


class Thinned:
    """An evenly spaced bounded sample of a stream: every ``stride``-th item is kept; when ``cap`` are held, every
    other one is dropped and the stride doubles (so the sample stays evenly spread over the whole stream)."""

    __slots__ = ("cap", "stride", "seen", "items")

    def __init__(self, cap: int) -> None:
        self.cap = max(2, int(cap))
        self.stride = 1
        self.seen = 0
        self.items: list = []

    def add(self, item: Any) -> None:
        s = self.seen
        self.seen = s + 1
        if s % self.stride:
            return
        self.keep(item)

    def keep(self, item: Any) -> None:
        """Hold ``item`` (the caller counted it in ``seen`` and found it on the stride: ``RunSampler``'s hot
        loop does that inline)."""
        items = self.items
        items.append(item)
        if len(items) >= self.cap:
            self.items = items[::2]
            self.stride *= 2

    @property
    def sampled(self) -> bool:
        return self.stride > 1


_DROPPED = Thinned(1)  # the box of a level beyond MAX_LEVELS: nothing is kept


class RunSampler:
    """What the charts need from the records themselves, bounded: per (level, round) the measured requests (an
    evenly spaced sample, failures sampled apart so none is lost to thinning below the cap), the queue samples, the
    GPU samples per device and the level steps. Feed it the blocks the Monitor gets (``add_many``). A request kept
    is held as ``(t_sent, t_end, ttft_ms, outcome, error)``, classified by the SLOs given (the Monitor's own), so no
    record outlives its block."""

    def __init__(self, slos: Slos | None = None, requests_cap: int = defaults.CHART_SAMPLE_REQUESTS,
                 points_cap: int = defaults.CHART_SAMPLE_POINTS) -> None:
        self.classify = slo_rule(slos or Slos())  # the one rule, applied to the requests kept only
        self.requests_cap = requests_cap
        self.points_cap = points_cap
        self.requests: dict[tuple, Thinned] = {}
        self.failures: dict[tuple, Thinned] = {}
        self.queue = Thinned(points_cap)
        self.gpu: dict[int, Thinned] = {}
        self.gpu_names: dict[int, str | None] = {}
        self.steps: list[tuple[float, str, float | None, int]] = []
        self.t0: float | None = None

    def use_slos(self, slos: Slos) -> None:
        """Classify by ``slos`` from now on (the settings the Monitor settled on, before any request came)."""
        self.classify = slo_rule(slos)

    def add_many(self, items: Iterable) -> None:
        """The hot path (every record of a 1M-request report passes here once): per request a type check, the
        level's box (the last one reused while the level stays the same) and the stride test inline."""
        reqs = self.requests
        fails = self.failures
        cap = self.requests_cap
        t0 = self.t0
        level: Any = object()  # no record's level: the first request looks its boxes up
        rnd = -1
        ok_box = bad_box = Thinned(2)
        classify = self.classify
        for r in items:
            tp = type(r)
            if tp is RequestRecord:
                if r.phase != "measure":
                    continue
                ts = r.t_sent
                if t0 is None or ts < t0:
                    t0 = ts
                if r.level != level or r.round != rnd:
                    level, rnd = r.level, r.round
                    key = (level, rnd)
                    if key not in reqs and len(reqs) >= MAX_LEVELS:  # the Monitor judges no more levels either
                        ok_box = bad_box = _DROPPED
                    else:
                        ok_box = reqs.get(key) or reqs.setdefault(key, Thinned(cap))
                        bad_box = fails.get(key) or fails.setdefault(key, Thinned(cap))
                if ok_box is _DROPPED:
                    continue
                box = bad_box if r.error is not None or not r.complete else ok_box
                n = box.seen
                box.seen = n + 1
                if not n % box.stride:
                    outcome, ttft_ms, _m = classify(r)
                    box.keep((ts, r.t_end, ttft_ms, str(outcome), r.error))
            elif tp is QueueSample:
                self.queue.add((r.t, r.waiting, r.running, r.kv_cache_usage, r.client_in_flight))
            elif tp is GpuSample:
                gbox = self.gpu.get(r.device)
                if gbox is None and len(self.gpu) >= MAX_GPU_DEVICES:
                    continue
                if gbox is None:
                    gbox = self.gpu[r.device] = Thinned(self.points_cap)
                    self.gpu_names[r.device] = r.name
                gbox.add((r.t, r.memory_used, r.memory_total))
            elif tp is StepRecord and len(self.steps) < self.points_cap:
                self.steps.append((r.t, r.event, r.level, r.round))
        self.t0 = t0

    def origin(self) -> float | None:
        """The time every chart's x axis counts seconds from: the first measured request sent, else the first
        sample or step."""
        cands = [t for t in (self.t0,) if t is not None]
        if self.queue.items:
            cands.append(self.queue.items[0][0])
        for box in self.gpu.values():
            if box.items:
                cands.append(box.items[0][0])
        if self.steps:
            cands.append(self.steps[0][0])
        return min(cands) if cands else None


# ----------------------------------------------------------------------------------------------- level rows

def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def level_label(level: Any, rnd: Any = 1, source: str | None = None) -> str:
    lv = "?" if _num(level) is None else f"{float(level):g}"
    out = lv if not isinstance(rnd, int) or rnd <= 1 else f"{lv} r{rnd}"
    return out if source is None else f"{out} ({source})"


def _percentile(p: Any) -> tuple[float | None, bool]:
    """(value, supported) of one percentile block of either shape ({"value"} or {"value_ms"})."""
    if not isinstance(p, Mapping):
        return None, False
    v = _num(p.get("value", p.get("value_ms")))
    return v, bool(p.get("supported"))


def _latency_block(row: Mapping, key: str) -> Mapping:
    lat = row.get("latency")
    if isinstance(lat, Mapping) and isinstance(lat.get(key), Mapping):
        return lat[key]
    own = row.get(key)
    return own if isinstance(own, Mapping) else {}


#: the percentiles charted when the rows do not say (the default reading)
DEFAULT_LABELS = ("P50", "P95", "P99")


def _labels(rows: Sequence[Mapping]) -> tuple[str, ...]:
    """The percentiles the rows' TTFT blocks carry ("P50", "P90", "P99.9", ...: ``--percentiles``), ascending."""
    for row in rows:
        tt = row.get("ttft_ms")
        if isinstance(tt, Mapping):
            found = []
            for k in tt:
                if isinstance(k, str) and k[:1] == "P" and k[1:].replace(".", "", 1).isdigit():
                    found.append((float(k[1:]), k))
            if found and not {k for _v, k in found} <= set(DEFAULT_LABELS):  # another reading than the default's
                return tuple(k for _v, k in sorted(found))
    return DEFAULT_LABELS


def _other_quantiles(block: Mapping, labels: Sequence[str] = DEFAULT_LABELS) -> dict[str, tuple[float | None, bool]]:
    """P50/P95/P99 (``labels``) of a {"p50", ..., "insufficient_n": {"p50": {"value"}}} block: (value, supported)."""
    out: dict[str, tuple[float | None, bool]] = {}
    short = block.get("insufficient_n") if isinstance(block.get("insufficient_n"), Mapping) else {}
    for q in labels:
        v = _num(block.get(q.lower()))
        if v is not None:
            out[q] = (v, True)
        else:
            alt = short.get(q.lower()) if isinstance(short, Mapping) else None
            out[q] = (_num(alt.get("value")) if isinstance(alt, Mapping) else None, False)
    return out


def level_rows(rows: Sequence[Mapping], several_sources: bool = False) -> LevelChart:
    """The per-level chart data of report (``levels``) or accept (``measured.levels``) rows, in row order.

    ``{"labels", "x", "numeric", "good": [{"fraction", "lo", "hi", "n", "state"}], "ttft": {"P50": [(v, ok)]},
    "latency": {key: {"title", "P50": [...]}}, "goodput_rps", "throughput_rps", "goodput_tok_s", "output_tok_s"}``.
    ``numeric``: every level is a positive number (the charts can then put levels on a log axis)."""
    labels: list[str] = []
    xs: list[float | None] = []
    good: list[GoodPoint] = []
    qls = _labels(rows)
    ttft: dict[str, list] = {q: [] for q in qls}
    other: dict[str, dict[str, list]] = {k: {q: [] for q in qls} for k, _t, _s in OTHER_LATENCY}
    gp, tp, gtok, otok = [], [], [], []
    for row in rows:
        src = row.get("source") if several_sources else None
        labels.append(level_label(row.get("level"), row.get("round", 1), src))
        xs.append(_num(row.get("level")))
        interval = row.get("wilson_95", row.get("wilson_95_descriptive")) or (None, None)
        good.append({"fraction": _num(row.get("good_fraction")), "lo": _num(interval[0]), "hi": _num(interval[1]),
                     "n": row.get("n"), "good": row.get("good"), "state": row.get("verdict")})
        tt = row.get("ttft_ms")
        for q in qls:
            ttft[q].append(_percentile(tt.get(q) if isinstance(tt, Mapping) else None))
        for key, _title, _slo in OTHER_LATENCY:
            qs = _other_quantiles(_latency_block(row, key), qls)
            for q in qls:
                other[key][q].append(qs[q])
        gp.append(_num(row.get("goodput_rps", row.get("goodput_per_s"))))
        tp.append(_num(row.get("throughput_rps", row.get("req_per_s"))))
        gtok.append(_num(row.get("goodput_tok_s")))
        otok.append(_num(row.get("output_tok_per_s")))
    latency = {key: cast(LatencyChart, {"title": title, "slo_key": slo, **other[key]})  # keys: the labels shown
               for key, title, slo in OTHER_LATENCY
               if any(v is not None for q in qls for v, _ok in other[key][q])}
    return {"labels": labels, "x": xs, "numeric": bool(xs) and all(x is not None and x > 0 for x in xs),
            "good": good, "ttft": ttft, "latency": latency, "goodput_rps": gp, "throughput_rps": tp,
            "goodput_tok_s": gtok, "output_tok_s": otok}


def capacity_marks(candidate: Any, measured: Any, unit: str | None) -> Marks:
    """The memory-only candidate and the measured capacity, for the good-fraction chart (None: unknown)."""
    return {"candidate": _num(candidate), "measured": _num(measured), "unit": unit or "level"}


# ------------------------------------------------------------------------------------------ the judged level

def timeline_rows(timeline: Iterable[tuple]) -> list[TimelineRow]:
    """A Snapshot's timeline tuples (level, round, state, n, t) as the report's dicts (``build_report``)."""
    return [{"level": lv, "round": rnd, "state": str(state), "n": n, "t": t} for lv, rnd, state, n, t in timeline]


def _band(entries: Sequence[Mapping], level: Any, rnd: int, end: float | None, origin: float) -> list[Band]:
    """The verdict's state over time at one level: [{"state", "from", "to"}] in seconds from ``origin``."""
    mine = [e for e in entries if _same_level(e.get("level"), level) and e.get("round", 1) == rnd
            and _num(e.get("t")) is not None]
    out: list[Band] = []
    for i, e in enumerate(mine):
        t = float(e["t"]) - origin
        nxt = float(mine[i + 1]["t"]) - origin if i + 1 < len(mine) else (None if end is None else end - origin)
        if out and out[-1]["state"] == e.get("state"):
            out[-1]["to"] = nxt
            continue
        out.append({"state": e.get("state"), "from": t, "to": nxt, "n": e.get("n")})
    return [b for b in out if b["to"] is not None and b["to"] >= b["from"]]


def _same_level(a: Any, b: Any) -> bool:
    fa, fb = _num(a), _num(b)
    return a is b or (fa is not None and fb is not None and abs(fa - fb) <= 1e-9 * max(1.0, abs(fb)))


def judged_series(sampler: RunSampler, timeline: Sequence[Mapping], level: Any, rnd: int = 1,
                  timeline_omitted: int = 0) -> JudgedSeries:
    """TTFT of the judged level's requests over time, and the verdict's state band, on ONE time axis: each request at
    its end (``t_end``: when its outcome was known, which is when the verdict's timeline moves too), in seconds from
    the level's first request sent, so the verdict's last state (a final FAIL) lies inside the axis.

    ``{"points": [[s, ttft_ms, outcome]], "failures": [[s, ttft_ms|None, error]], "bands": [...], "seen",
    "shown", "distinct" (points that do not overlap another), "sampled", "origin", "end", "timeline_omitted"}``."""
    key = next((k for k in sampler.requests.keys() | sampler.failures.keys()
                if _same_level(k[0], level) and k[1] == rnd), (level, rnd))
    ok = sampler.requests.get(key) or Thinned(2)
    bad = sampler.failures.get(key) or Thinned(2)
    sends = [it[0] for it in ok.items] + [it[0] for it in bad.items]
    origin = min(sends) if sends else (sampler.origin() or 0.0)
    points, failures = [], []
    end = None
    for _t_sent, t_end, ttft_ms, outcome, _err in ok.items:
        end = t_end if end is None or t_end > end else end
        points.append([round(t_end - origin, 3), None if ttft_ms is None else round(ttft_ms, 2), outcome])
    for _t_sent, t_end, ttft_ms, outcome, err in bad.items:
        end = t_end if end is None or t_end > end else end
        if outcome != FAILED:  # cancelled while open: counted, not judged, not drawn as a failure
            continue
        failures.append([round(t_end - origin, 3), None if ttft_ms is None else round(ttft_ms, 2),
                         err or "incomplete"])
    points.sort(key=lambda p: (p[0], p[1] if p[1] is not None else -1.0))
    failures.sort(key=lambda p: p[0])
    # what a reader sees: identical values overlap (at the drawn precision: 1 s, 1 ms), said, not hidden
    distinct = len({(round(p[0]), None if p[1] is None else round(p[1])) for p in points}
                   | {("f", round(f[0]), None if f[1] is None else round(f[1])) for f in failures})
    return {"level": _num(level), "round": rnd, "label": level_label(level, rnd), "points": points,
            "failures": failures, "bands": _band(timeline, level, rnd, end, origin), "seen": ok.seen + bad.seen,
            "shown": len(points) + len(failures), "distinct": distinct, "sampled": ok.sampled or bad.sampled,
            "origin": origin, "end": None if end is None else round(end - origin, 3),
            "timeline_omitted": int(timeline_omitted or 0)}


# ------------------------------------------------------------------------------------------------ over time

def step_starts(sampler: RunSampler) -> list[StepStart]:
    """Where each level began on the time axis: [{"t", "label"}] (seconds from the origin)."""
    origin = sampler.origin() or 0.0
    return [{"t": round(t - origin, 3), "label": level_label(level, rnd)}
            for t, event, level, rnd in sampler.steps if event == "start"]


def queue_series(sampler: RunSampler) -> QueueSeries:
    """The server queue over time: {"t", "waiting", "running", "in_flight", "recorded", "sampled", "seen"}
    (``recorded``: the file had queue samples with a waiting or running count)."""
    origin = sampler.origin() or 0.0
    rows = sampler.queue.items
    t = [round(s[0] - origin, 3) for s in rows]
    waiting = [s[1] for s in rows]
    running = [s[2] for s in rows]
    inflight = [s[4] for s in rows]
    return {"t": t, "waiting": waiting, "running": running, "in_flight": inflight,
            "recorded": any(v is not None for v in waiting + running),
            "in_flight_recorded": any(v is not None for v in inflight),
            "sampled": sampler.queue.sampled, "seen": sampler.queue.seen, "steps": step_starts(sampler)}


def memory_series(sampler: RunSampler, ceiling_gib: Any = None, kv_allocated_gib: Any = None,
                  kv_ceiling_gib: Any = None) -> MemorySeries:
    """GPU memory (NVML) per device and the engine's KV memory over time, against the budget's ceilings.

    ``{"devices": [{"name", "t", "used_gib", "total_gib"}], "kv": {"t", "used", "unit"} | None,
    "ceiling_gib", "kv_ceiling_gib", "sampled"}``; the engine's KV in GiB when its allocation is known, else as a
    fraction of its KV space."""
    origin = sampler.origin() or 0.0
    devices: list[DeviceSeries] = []
    sampled = False
    for dev in sorted(sampler.gpu):
        box = sampler.gpu[dev]
        sampled = sampled or box.sampled
        rows = [s for s in box.items if s[1] is not None]
        if not rows:
            continue
        total = next((s[2] for s in reversed(rows) if s[2]), None)
        devices.append({"device": dev, "name": sampler.gpu_names.get(dev), "t": [round(s[0] - origin, 3) for s in rows],
                        "used_gib": [round(s[1] / GIB, 4) for s in rows],
                        "total_gib": None if total is None else round(total / GIB, 4)})
    kv: KvSeries | None = None
    rows = [s for s in sampler.queue.items if s[3] is not None]
    if rows:
        alloc = _num(kv_allocated_gib)
        kv = {"t": [round(s[0] - origin, 3) for s in rows],
              "used": [round(s[3] * alloc, 4) if alloc else round(s[3], 4) for s in rows],
              "unit": "GiB" if alloc else "fraction", "allocated_gib": alloc}
        sampled = sampled or sampler.queue.sampled
    return {"devices": devices, "kv": kv, "ceiling_gib": _num(ceiling_gib), "kv_ceiling_gib": _num(kv_ceiling_gib),
            "sampled": sampled, "steps": step_starts(sampler)}


# -------------------------------------------------------------------------------------------------- compare

def cdf(values: Iterable[float], points: int = defaults.CHART_CDF_POINTS) -> list[list[float]]:
    """The empirical distribution through at most ``points`` quantiles: [[value, fraction <= value]]."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    n = len(xs)
    if not n:
        return []
    k = min(points, n)
    out = []
    for i in range(1, k + 1):
        idx = max(0, math.ceil(i * n / k) - 1)
        out.append([round(xs[idx], 3), round((idx + 1) / n, 5)])
    return out


def ttfts_at(requests: Iterable[RequestRecord], level: Any, slos: Slos | None = None,
             cap: int = defaults.CHART_SAMPLE_REQUESTS * 25) -> tuple[list[float], int]:
    """The judged TTFTs (ms) of the completed measured requests at ``level`` (at most ``cap`` of them, evenly
    spaced), and how many there were."""
    classify = slo_rule(slos or Slos())
    box = Thinned(cap)
    for r in requests:
        if r.phase == "measure" and _same_level(r.level, level) and r.complete and r.error is None:
            box.add(r)
    out = []
    for r in box.items:
        _o, ttft_ms, _m = classify(r)
        if ttft_ms is not None:
            out.append(ttft_ms)
    return out, box.seen


def compare_levels(result: Mapping) -> CompareLevels:
    """Per matched level of a ``tui.core.compare`` result, base and candidate side by side (``level_rows``
    shapes) and the verdict of each level."""
    pairs = [p for p in result.get("levels") or () if isinstance(p, Mapping)]
    base = level_rows([p.get("base") or {} for p in pairs])
    cand = level_rows([p.get("cand") or {} for p in pairs])
    labels = [level_label(p.get("level_cand", p.get("level_base"))) for p in pairs]
    return {"labels": labels, "base": base, "cand": cand, "numeric": base["numeric"] and cand["numeric"],
            "x": cand["x"], "verdicts": [p.get("verdict") for p in pairs],
            "difference": [_num(p.get("difference")) for p in pairs]}


def compare_cdf(result: Mapping, base_requests: Sequence[RequestRecord], cand_requests: Sequence[RequestRecord],
                slos: Slos | None = None) -> CompareCdf | None:
    """The TTFT distribution at the judged level of a comparison (the highest matched level: the same rule as
    report's judged level), base and candidate; None when no level matched."""
    pairs = [p for p in result.get("levels") or () if isinstance(p, Mapping)]
    if not pairs:
        return None
    best = max(pairs, key=lambda p: _num(p.get("level_cand")) or 0.0)
    b, nb = ttfts_at(base_requests, best.get("level_base"), slos)
    c, nc = ttfts_at(cand_requests, best.get("level_cand"), slos)
    return {"label": level_label(best.get("level_cand")), "base": cdf(b), "cand": cdf(c), "base_n": nb,
            "cand_n": nc, "why": "the highest level both runs tested"}


# ------------------------------------------------------------------------------------------------ one bundle

def report_bundle(rows: Sequence[Mapping], *, judged: Mapping | None, candidate: Any, slos: Slos, target: float,
                  timeline: Sequence[Mapping] = (), timeline_omitted: int = 0, sampler: RunSampler | None = None,
                  gpu_ceiling_gib: Any = None, kv_allocated_gib: Any = None, kv_ceiling_gib: Any = None,
                  several_sources: bool = False) -> ChartBundle:
    """Everything the report / acceptance page charts, as plain data: the level rows, the capacity marks, and
    (with a sampler) the judged level over time, the queue and the memory. ``judged``: the report's ``judged``
    block (``level``, ``unit``, ``measured_capacity``)."""
    judged = judged or {}
    out: ChartBundle = {
        "levels": level_rows(rows, several_sources),
        "marks": capacity_marks(candidate, judged.get("measured_capacity"), judged.get("unit")),
        "target": target,
        "slos": cast(SloLimits, {k.json_key: v for k, v in zip(slos.table, slos.limits())}),  # the table's keys
        "judged": None, "queue": None, "memory": None,
    }
    if sampler is not None:
        if judged.get("level") is not None:
            out["judged"] = judged_series(sampler, timeline, judged.get("level"), int(judged.get("round", 1) or 1),
                                          timeline_omitted)
        out["queue"] = queue_series(sampler)
        out["memory"] = memory_series(sampler, gpu_ceiling_gib, kv_allocated_gib, kv_ceiling_gib)
    return out
