"""Watch mode: judge a running service from what its servers already measure.

Pure logic (standard library only). The sources (``tui/sources/watch.py``) hand in either
labelled samples from one server's ``/metrics`` (cumulative counters and histograms) or
window increases already computed by Prometheus (``increase(...[w])`` summed over replicas);
everything here turns them into per-window figures and an honest verdict:

- cumulative snapshots -> per-window deltas; a counter that went *down* means the server
  restarted (counter reset): the window restarts there and says so;
- the good fraction from histogram buckets is exact only when the SLO is a bucket bound;
  otherwise it is a bracket [pessimistic, optimistic] from the neighbouring bounds, never an
  interpolated point. PASS is judged on the pessimistic end, FAIL on the optimistic end;
- denominator = all TTFT observations plus the requests the server counts as aborted or
  errored (a request aborted after its first token is then counted twice: conservative);
- requests still queued are in neither count, so when the queue grew over the window, or
  queue time exceeded the SLO for a share that matters, the verdict cannot be PASS;
- completion is not observable from a TTFT histogram, and server-side TTFT excludes the
  network, TLS, proxies and client queueing: both are said wherever a verdict is shown.

Why ~1,100 lines: per-engine metric names, window deltas with counter resets, the bracketed good fraction,
the queue rule, the watch record and the console snapshot are one pure pipeline from scrape to verdict; each
step is tested on its own (tests/test_watch_core.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from tui.core.records import Outcome
from tui.core.snapshot import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED, Snapshot, VerdictState
from tui.core.verdict import LevelJudge, MixtureTest

SERVER_TTFT_LABEL = ("server-side TTFT: from arrival at the server; excludes network, TLS, proxies and "
                     "client queueing")
COMPLETION_NOTE = ("completion is not observable from TTFT histograms: a request that got its first token in "
                   "time and failed later counts as good here")
NO_TTFT_NOTE = "no TTFT histogram: use --probe-rate"
NOT_EXPOSED = "not exposed by this server"

INF = math.inf
Sample = tuple  # (name: str, labels: dict[str, str], value: float)


# ------------------------------------------------------------------ metric names per engine


@dataclass(frozen=True)
class WatchMetrics:
    """Where each watched figure lives on one engine. Histogram names are base names (the
    exposition adds ``_bucket``/``_count``/``_sum``); counters are sample names as written on
    the wire (with ``_total``). ``failed`` entries are ``(sample name, label, values)``:
    the counter summed over series whose ``label`` is one of ``values`` (``label`` None: all)."""

    engine: str
    ttft: str | None
    e2e: str | None = None
    queue_time: str | None = None
    success: tuple[tuple[str, str | None, tuple[str, ...]], ...] = ()
    failed: tuple[tuple[str, str | None, tuple[str, ...]], ...] = ()
    waiting: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    kv_cache: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()
    metrics_path: str = "/metrics"
    model_labels: tuple[str, ...] = ("model_name", "model")
    detect: tuple[str, ...] = ()  # any of these sample names present -> this engine


_ABORT_REASONS = ("abort", "error")

ENGINES: dict[str, WatchMetrics] = {
    "vllm": WatchMetrics(
        engine="vllm",
        ttft="vllm:time_to_first_token_seconds",
        e2e="vllm:e2e_request_latency_seconds",
        queue_time="vllm:request_queue_time_seconds",
        success=(("vllm:request_success_total", "finished_reason", ("stop", "length")),),
        failed=(("vllm:request_success_total", "finished_reason", _ABORT_REASONS),),
        waiting=("vllm:num_requests_waiting",),
        running=("vllm:num_requests_running",),
        kv_cache=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        preemptions=("vllm:num_preemptions_total",),
        detect=("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:time_to_first_token_seconds_count"),
    ),
    "sglang": WatchMetrics(
        engine="sglang",
        ttft="sglang:time_to_first_token_seconds",
        e2e="sglang:e2e_request_latency_seconds",
        queue_time="sglang:queue_time_seconds",
        success=(("sglang:num_requests_total", None, ()),),
        failed=(("sglang:num_aborted_requests_total", None, ()),),
        waiting=("sglang:num_queue_reqs",),
        running=("sglang:num_running_reqs",),
        kv_cache=("sglang:token_usage",),
        detect=("sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:time_to_first_token_seconds_count"),
    ),
    "trtllm": WatchMetrics(
        engine="trtllm",
        ttft="trtllm_time_to_first_token_seconds",
        e2e="trtllm_e2e_request_latency_seconds",
        queue_time="trtllm_request_queue_time_seconds",
        success=(("trtllm_request_success_total", "finished_reason", ("stop", "length")),),
        failed=(("trtllm_request_success_total", "finished_reason", _ABORT_REASONS),
                ("trtllm_request_error_total", None, ())),
        waiting=("trtllm_num_requests_waiting",),
        running=("trtllm_num_requests_running",),
        kv_cache=("trtllm_kv_cache_utilization",),
        metrics_path="/prometheus/metrics",
        detect=("trtllm_time_to_first_token_seconds_count", "trtllm_request_success_total",
                "trtllm_num_requests_waiting"),
    ),
    "dynamo": WatchMetrics(
        engine="dynamo",
        ttft="dynamo_frontend_time_to_first_token_seconds",
        e2e="dynamo_frontend_request_duration_seconds",
        success=(("dynamo_frontend_requests_total", "status", ("success",)),),
        failed=(("dynamo_frontend_requests_total", "status", ("error",)),),
        waiting=("dynamo_frontend_queued_requests",),
        running=("dynamo_frontend_inflight_requests",),
        model_labels=("model", "model_name"),
        detect=("dynamo_frontend_queued_requests", "dynamo_frontend_inflight_requests",
                "dynamo_frontend_time_to_first_token_seconds_count"),
    ),
    "llamacpp": WatchMetrics(
        engine="llamacpp",
        ttft=None,
        waiting=("llamacpp:requests_deferred",),
        running=("llamacpp:requests_processing",),
        kv_cache=("llamacpp:kv_cache_usage_ratio",),
        detect=("llamacpp:requests_processing", "llamacpp:requests_deferred"),
    ),
    "tgi": WatchMetrics(
        engine="tgi",
        ttft=None,
        e2e="tgi_request_duration",
        queue_time="tgi_request_queue_duration",
        # the Rust exporter's counter names with and without _total have both been seen; only one exists
        success=(("tgi_request_success", None, ()), ("tgi_request_success_total", None, ())),
        failed=(("tgi_request_failure", None, ()), ("tgi_request_failure_total", None, ())),
        waiting=("tgi_queue_size",),
        running=("tgi_batch_current_size",),
        detect=("tgi_queue_size", "tgi_request_duration_count"),
    ),
}


def detect_engine(names: Iterable[str]) -> str | None:
    """Which engine wrote these sample names (first match in ENGINES order; Dynamo before the
    engines it fronts would be wrong when both are on one page, so a page with a Dynamo
    frontend TTFT histogram is Dynamo)."""
    names = set(names)
    if "dynamo_frontend_time_to_first_token_seconds_count" in names:
        return "dynamo"
    for eng, m in ENGINES.items():
        if any(n in names for n in m.detect):
            return eng
    return None


# ------------------------------------------------------------------ selectors and models


def parse_selector(text: str | None) -> list[tuple[str, str, str]]:
    """``k="v",k2!="w"`` -> [(k, op, v)]; ops ``=`` and ``!=``. Raises ValueError on anything else
    (regex matchers are left to Prometheus)."""
    out: list[tuple[str, str, str]] = []
    s = (text or "").strip().strip("{}").strip()
    i = 0
    while i < len(s):
        while i < len(s) and s[i] in " ,":
            i += 1
        if i >= len(s):
            break
        j = i
        while j < len(s) and (s[j].isalnum() or s[j] == "_"):
            j += 1
        key = s[i:j]
        if not key:
            raise ValueError(f"bad selector near {s[i:i + 20]!r}: expected label=\"value\"")
        if s.startswith("!=", j):
            op, j = "!=", j + 2
        elif s.startswith("=~", j) or s.startswith("!~", j):
            raise ValueError("regex matchers (=~, !~) work with --prometheus-url only")
        elif s.startswith("=", j):
            op, j = "=", j + 1
        else:
            raise ValueError(f"bad selector near {s[i:i + 20]!r}: expected label=\"value\"")
        if j >= len(s) or s[j] != '"':
            raise ValueError("selector values must be in double quotes, e.g. model_name=\"x\"")
        k = j + 1
        val = []
        while k < len(s) and s[k] != '"':
            if s[k] == "\\" and k + 1 < len(s):
                k += 1
            val.append(s[k])
            k += 1
        if k >= len(s):
            raise ValueError("unterminated quoted value in selector")
        out.append((key, op, "".join(val)))
        i = k + 1
    return out


def matches(labels: dict, matchers: Sequence[tuple[str, str, str]]) -> bool:
    for key, op, val in matchers:
        have = labels.get(key, "")
        if (op == "=" and have != val) or (op == "!=" and have == val):
            return False
    return True


def models_seen(samples: Iterable[Sample], engine: str) -> list[str]:
    """Model label values on the engine's TTFT / queue series (sorted)."""
    m = ENGINES[engine]
    prefixes = tuple(x for x in (m.ttft,) if x) + m.waiting + m.running
    found: set[str] = set()
    for name, labels, _v in samples:
        if not name.startswith(prefixes):
            continue
        for lab in m.model_labels:
            v = labels.get(lab)
            if v:
                found.add(v)
                break
    return sorted(found)


# ------------------------------------------------------------------ cumulative snapshots


Buckets = tuple  # ((le: float, cumulative count: float), ...) sorted by le, last le = inf


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


def _finite(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
        if math.isnan(le) or not _finite(v):
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
            if not _finite(v):
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
        vals = [float(v) for n, _l, v in samples if n == want and _finite(v)]
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
        kv_cache=_gauge(samples, m.kv_cache, "max"), missing=tuple(missing),
    )


# ------------------------------------------------------------------ windows


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

    @property
    def seconds(self) -> float:
        return max(0.0, self.t_end - self.t_start)


def _bucket_delta(a: Buckets | None, b: Buckets | None) -> tuple[Buckets | None, bool]:
    """(b - a per bound, reset?) ; bounds must match."""
    if a is None or b is None:
        return None, False
    da, db = dict(a), dict(b)
    if set(da) != set(db):
        return None, True  # bucket layout changed: a restart with other settings
    out = []
    for le, cb in b:
        d = cb - da[le]
        if d < -1e-9:
            return None, True
        out.append((le, max(0.0, d)))
    return tuple(out), False


def window_between(a: Cumulative, b: Cumulative, source: str = "metrics") -> Window:
    """The window from scrape ``a`` to scrape ``b``. A counter that decreased is a reset: the
    returned window then starts at ``b`` (empty) and carries ``reset``."""
    gaps = list(b.missing)
    reset = False
    parts = {}
    for key in ("ttft", "e2e", "queue_time"):
        d, r = _bucket_delta(getattr(a, key), getattr(b, key))
        reset |= r
        parts[key] = d
    scal: dict[str, float | None] = {}
    for key in ("success", "failed", "preemptions"):
        va, vb = getattr(a, key), getattr(b, key)
        if va is None or vb is None:
            scal[key] = None
            continue
        if vb + 1e-9 < va:
            reset = True
        scal[key] = max(0.0, vb - va)
    if reset:
        return Window(t_start=b.t, t_end=b.t, engine=b.engine, source=source, waiting_start=b.waiting,
                      waiting_end=b.waiting, running=b.running, kv_cache=b.kv_cache, gaps=tuple(gaps),
                      reset="counter reset between scrapes (server restarted?): the window restarts at this scrape")
    return Window(t_start=a.t, t_end=b.t, engine=b.engine, source=source, ttft=parts["ttft"], e2e=parts["e2e"],
                  queue_time=parts["queue_time"], success=scal["success"], failed=scal["failed"],
                  preemptions=scal["preemptions"], waiting_start=a.waiting, waiting_end=b.waiting,
                  running=b.running, kv_cache=b.kv_cache, gaps=tuple(gaps))


def merge_windows(ws: Sequence[Window]) -> Window | None:
    """Consecutive windows added up (the per-window figures of a longer span)."""
    ws = [w for w in ws if w is not None]
    if not ws:
        return None

    def add_b(x: Buckets | None, y: Buckets | None) -> Buckets | None:
        if x is None:
            return y
        if y is None:
            return x
        dx, dy = dict(x), dict(y)
        if set(dx) != set(dy):
            return None
        return tuple((le, dx[le] + dy[le]) for le in sorted(dx))

    def add_s(x: float | None, y: float | None) -> float | None:
        if x is None:
            return y
        if y is None:
            return x
        return x + y

    out = ws[0]
    for w in ws[1:]:
        out = Window(t_start=out.t_start, t_end=w.t_end, engine=w.engine, source=w.source,
                     ttft=add_b(out.ttft, w.ttft), e2e=add_b(out.e2e, w.e2e),
                     queue_time=add_b(out.queue_time, w.queue_time), success=add_s(out.success, w.success),
                     failed=add_s(out.failed, w.failed), preemptions=add_s(out.preemptions, w.preemptions),
                     waiting_start=out.waiting_start, waiting_end=w.waiting_end, running=w.running,
                     kv_cache=w.kv_cache, gaps=tuple(dict.fromkeys(out.gaps + w.gaps)), reset=out.reset or w.reset)
    return out


# ------------------------------------------------------------------ histogram arithmetic


def count_of(b: Buckets | None) -> float | None:
    return None if not b else b[-1][1]


@dataclass(frozen=True)
class Bracket:
    """Good fraction from histogram buckets. ``exact`` when the SLO is a bucket bound."""

    good_lo: float  # observations certainly <= SLO (pessimistic)
    good_hi: float  # observations possibly <= SLO (optimistic)
    total: float  # TTFT observations + aborted/errored
    ttft_n: float
    failed: float
    exact: bool
    bound_lo: float | None  # the neighbouring bounds used (seconds)
    bound_hi: float | None

    @property
    def lo(self) -> float | None:
        return None if self.total <= 0 else min(1.0, self.good_lo / self.total)

    @property
    def hi(self) -> float | None:
        return None if self.total <= 0 else min(1.0, self.good_hi / self.total)

    def text(self) -> str:
        lo, hi = self.lo, self.hi
        if lo is None or hi is None:  # total <= 0
            return "no requests finished in the window"
        if self.exact:
            return f"{100 * lo:.1f}% (exact: the SLO is a bucket bound)"
        return (f"{100 * lo:.1f}-{100 * hi:.1f}% (bracket from bucket bounds "
                f"{_fmt_s(self.bound_lo)}..{_fmt_s(self.bound_hi)}; no interpolation)")


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "0"
    if math.isinf(v):
        return "+Inf"
    return f"{v * 1000:g} ms" if v < 1 else f"{v:g} s"


def good_bracket(ttft: Buckets, slo_s: float, failed: float | None = None) -> Bracket:
    """Good fraction bounds at ``slo_s`` (seconds) from cumulative bucket counts."""
    n = ttft[-1][1]
    fail = max(0.0, failed or 0.0)
    lo_b, lo_c = None, 0.0
    hi_b, hi_c = INF, n
    exact = False
    for le, c in ttft:
        if math.isclose(le, slo_s, rel_tol=1e-9, abs_tol=1e-12):
            lo_b, lo_c, hi_b, hi_c, exact = le, c, le, c, True
            break
        if le < slo_s:
            lo_b, lo_c = le, c
        elif le > slo_s:
            hi_b, hi_c = le, c
            break
    return Bracket(good_lo=min(lo_c, n), good_hi=min(hi_c, n), total=n + fail, ttft_n=n, failed=fail,
                   exact=exact, bound_lo=lo_b, bound_hi=hi_b)


def share_above(b: Buckets | None, limit_s: float) -> float | None:
    """Share of observations certainly or possibly above ``limit_s``: everything above the largest
    bound <= limit (the conservative reading for a rule that blocks PASS)."""
    if not b or b[-1][1] <= 0:
        return None
    n = b[-1][1]
    below = 0.0
    for le, c in b:
        if le <= limit_s * (1 + 1e-9):
            below = c
        else:
            break
    return max(0.0, min(1.0, 1.0 - below / n))


def quantile_bracket(b: Buckets | None, q: float) -> tuple[float, float] | None:
    """The bucket (lower, upper bound, seconds) that holds the q-quantile; no interpolation."""
    if not b or b[-1][1] <= 0:
        return None
    n = b[-1][1]
    rank = q * n
    prev = 0.0
    for le, c in b:
        if c >= rank - 1e-9 and c > 0:
            return prev, le
        prev = le
    return prev, INF


def fmt_quantile(b: Buckets | None, q: float) -> str:
    br = quantile_bracket(b, q)
    if br is None:
        return "N/A"
    lo, hi = br
    if math.isinf(hi):
        return f"> {_fmt_s(lo)}"
    return f"{_fmt_s(lo)}..{_fmt_s(hi)}"


# ------------------------------------------------------------------ the judge


def _fmt_min(seconds: float) -> str:
    return f"{math.ceil(seconds / 60 - 1e-9)} min" if seconds >= 60 else f"{math.ceil(seconds)} s"


def make_judge(test: MixtureTest, *, min_window_s: float, min_requests: int, fail_min_s: float = 60.0) -> LevelJudge:
    """The judge watch uses: the same engine and window rules as load runs (``tui.core.verdict.LevelJudge``).
    ``add_many(t, 0, 0)`` marks the start of the watch."""
    return LevelJudge(test, min_window_s=min_window_s, min_requests=min_requests, fail_min_s=fail_min_s)


@dataclass(frozen=True)
class WatchConfig:
    slo_ttft_ms: float = 1000.0
    target: float = 0.95
    alpha: float = 0.05
    min_window_s: float = 600.0
    min_requests: int | None = None
    fail_min_s: float = 60.0
    queue_share: float | None = None  # queue-time-over-SLO share that blocks PASS; default (1 - target) / 2

    @property
    def slo_s(self) -> float:
        return self.slo_ttft_ms / 1000.0

    @property
    def blocking_share(self) -> float:
        return self.queue_share if self.queue_share is not None else (1.0 - self.target) / 2.0


@dataclass(frozen=True)
class WatchVerdict:
    state: VerdictState
    reason: str
    lo: float | None
    hi: float | None
    exact: bool
    n: float  # denominator (TTFT observations + aborted/errored)
    good_lo: float
    good_hi: float
    elapsed_s: float
    missing: str | None = None
    blocked: tuple[str, ...] = ()  # why PASS is not allowed (queue rule)
    notes: tuple[str, ...] = ()
    target: float = 0.95
    slo_ttft_ms: float = 1000.0
    alpha: float = 0.05

    def to_dict(self) -> dict:
        return {
            "state": self.state, "reason": self.reason, "good_fraction_lo": self.lo, "good_fraction_hi": self.hi,
            "exact": self.exact, "n": self.n, "good_lo": self.good_lo, "good_hi": self.good_hi,
            "elapsed_s": self.elapsed_s, "missing": self.missing, "pass_blocked_by": list(self.blocked),
            "notes": list(self.notes), "target": self.target, "slo_ttft_ms": self.slo_ttft_ms, "alpha": self.alpha,
        }


def queue_blocks(w: Window, cfg: WatchConfig) -> list[str]:
    """Reasons the queue forbids PASS over this window (empty: none)."""
    out = []
    ws, we = w.waiting_start, w.waiting_end
    if ws is not None and we is not None and we > ws + 1e-9:
        out.append(f"the queue grew over the window ({ws:g} -> {we:g} waiting): requests still queued are in "
                   "neither count, so an overloaded server can look fine")
    share = share_above(w.queue_time, cfg.slo_s)
    if share is not None and share > cfg.blocking_share:
        out.append(f"queue time exceeded the {cfg.slo_ttft_ms:g} ms SLO for up to {100 * share:.1f}% of finished "
                   f"requests (more than {100 * cfg.blocking_share:.1f}% matters at a {cfg.target:.0%} target)")
    if ws is None and we is None and w.queue_time is None:
        out.append("the server's queue is not observable (no waiting gauge, no queue-time histogram): queued "
                   "requests are in neither count")
    return out


class WatchJudgement:
    """Sequential judging of consecutive windows from the start of the watch.

    Two judges share the window rules of load runs: the pessimistic one (good = observations
    under the bucket bound below the SLO) decides PASS, the optimistic one (bound above) FAIL.
    A counter reset restarts both, and says so."""

    def __init__(self, cfg: WatchConfig) -> None:
        self.cfg = cfg
        self.test = MixtureTest(cfg.target, cfg.alpha)
        self.min_requests = max(cfg.min_requests or 0, self.test.min_requests_to_pass())
        self.resets: list[str] = []
        self.windows = 0
        self.span: Window | None = None  # everything since the (last) start
        self.last: Window | None = None
        self.gap_windows = 0
        self._new_judges()

    def _new_judges(self) -> None:
        cfg = self.cfg
        self.pess = make_judge(self.test, min_window_s=cfg.min_window_s, min_requests=self.min_requests,
                               fail_min_s=cfg.fail_min_s)
        self.opt = make_judge(self.test, min_window_s=cfg.min_window_s, min_requests=self.min_requests,
                              fail_min_s=cfg.fail_min_s)
        self._started = False
        self.span = None
        self.exact = True
        self.good_lo = self.good_hi = self.n = 0.0

    def add(self, w: Window) -> None:
        self.windows += 1
        self.last = w
        if w.reset:
            self.resets.append(f"{w.reset} (t={w.t_end:.0f})")
            self._new_judges()
            return
        if w.ttft is None:
            self.gap_windows += 1
            return  # a gap: nothing invented, the judges wait
        br = good_bracket(w.ttft, self.cfg.slo_s, w.failed)
        if not self._started:
            # anchor the evidence at the window's start (same call shape as LevelJudge: no new method)
            self.pess.add_many(w.t_start, 0, 0)
            self.opt.add_many(w.t_start, 0, 0)
            self._t0 = w.t_start
            self._started = True
        self._t = w.t_end
        # conservative rounding: Prometheus' increase() extrapolates to non-integer counts
        total = math.ceil(br.total - 1e-6)
        g_lo = math.floor(br.good_lo + 1e-6)
        g_hi = min(total, math.ceil(br.good_hi - 1e-6))
        self.pess.add_many(w.t_end, g_lo, total)
        self.opt.add_many(w.t_end, g_hi, total)
        self.good_lo += g_lo
        self.good_hi += g_hi
        self.n += total
        self.exact = self.exact and br.exact
        self.span = merge_windows([self.span, w]) if self.span is not None else w

    def verdict(self, has_ttft: bool = True) -> WatchVerdict:
        cfg = self.cfg
        notes = [SERVER_TTFT_LABEL, COMPLETION_NOTE] + self.resets
        if not has_ttft:
            return WatchVerdict(state=INSUFFICIENT_WINDOW, reason=f"{NO_TTFT_NOTE} R to judge from a gentle canary",
                                lo=None, hi=None, exact=False, n=0, good_lo=0, good_hi=0, elapsed_s=0.0,
                                missing=NO_TTFT_NOTE, notes=(NOT_EXPOSED + ": server-side TTFT",),
                                target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha)
        elapsed = max(0.0, self._t - self._t0) if self._started else 0.0
        n = self.n
        lo = self.good_lo / n if n else None
        hi = self.good_hi / n if n else None
        if lo is None or hi is None:  # n == 0
            frac = "no finished requests yet"
        elif self.exact:
            frac = f"good fraction {100 * lo:.1f}%"
        else:
            frac = f"good fraction {100 * lo:.1f}-{100 * hi:.1f}%"
        need_n = max(0, self.min_requests - int(n))
        need_s = max(0.0, cfg.min_window_s - elapsed)
        parts = []
        if need_n:
            parts.append(f"need {need_n} more requests")
        if need_s > 0:
            parts.append(f"{_fmt_min(need_s)} more" if parts else f"need {_fmt_min(need_s)} more")
        missing = ", ".join(parts) or None
        blocked = tuple(queue_blocks(self.span, cfg)) if self.span is not None else ()
        if self.last is not None and self.last.ttft is None and self.last.gaps:
            notes.append("last window is a gap: " + "; ".join(self.last.gaps))
        ps, os_ = self.pess.state, self.opt.state
        rule = f"anytime-valid test, alpha {cfg.alpha:g}"
        state: VerdictState
        if os_ == FAIL:
            state = FAIL
            reason = (f"{frac} over {int(n)} requests: even the optimistic end is below the {cfg.target:.0%} target "
                      f"({rule}).")
        elif ps == PASS and blocked:
            state = UNDECIDED
            reason = f"{frac}: would PASS, but " + "; ".join(blocked) + "."
        elif ps == PASS:
            state = PASS
            reason = f"{frac} over {int(n)} requests: the pessimistic end is at or above the {cfg.target:.0%} target ({rule})."
        elif ps == INSUFFICIENT_WINDOW:
            state = INSUFFICIENT_WINDOW
            if not n:
                reason = f"no finished requests yet: nothing to judge the {cfg.target:.0%} target on."
            else:
                reason = (f"{frac} on {int(n)} requests over {_fmt_min(elapsed)}: too few to judge the "
                          f"{cfg.target:.0%} target.")
        else:
            state = UNDECIDED
            reason = f"{frac} over {int(n)} requests: not yet enough evidence either way."
        return WatchVerdict(state=state, reason=reason, lo=lo, hi=hi, exact=self.exact, n=n, good_lo=self.good_lo,
                            good_hi=self.good_hi, elapsed_s=elapsed, missing=missing if state == INSUFFICIENT_WINDOW else None,
                            blocked=blocked, notes=tuple(notes), target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms,
                            alpha=cfg.alpha)


def judge_once(w: Window, cfg: WatchConfig) -> WatchVerdict:
    """One fixed window judged once (``watch --once``)."""
    j = WatchJudgement(cfg)
    j.add(w)
    m = ENGINES.get(w.engine)
    return j.verdict(has_ttft=bool(m and m.ttft))


# ------------------------------------------------------------------ describing a window


def describe_window(w: Window, cfg: WatchConfig) -> dict:
    """Everything one window shows, as plain values (None / NOT_EXPOSED where absent)."""
    m = ENGINES.get(w.engine)
    secs = w.seconds

    def rate(x):
        return None if x is None or secs <= 0 else x / secs

    ttft_n = count_of(w.ttft)
    d = {
        "engine": w.engine,
        "source": w.source,
        "t_start": w.t_start,
        "t_end": w.t_end,
        "seconds": secs,
        "server_ttft_label": SERVER_TTFT_LABEL,
        "finished_per_s": rate((w.success or 0) + (w.failed or 0)) if (w.success is not None or w.failed is not None)
        else rate(ttft_n),
        "ttft_observations": ttft_n,
        "success": w.success,
        "aborted_or_errored": w.failed,
        "waiting": w.waiting_end,
        "waiting_at_start": w.waiting_start,
        "running": w.running,
        "kv_cache_usage": w.kv_cache,
        "preemptions": w.preemptions,
        "gaps": list(w.gaps),
        "reset": w.reset,
    }
    for key, b, base in (("ttft", w.ttft, m.ttft if m else None), ("e2e", w.e2e, m.e2e if m else None),
                         ("queue_time", w.queue_time, m.queue_time if m else None)):
        if base is None:
            d[key] = NOT_EXPOSED
        elif b is None:
            d[key] = "gap (series missing or unusable)"
        else:
            d[key] = {f"P{round(q * 100)}": fmt_quantile(b, q) for q in (0.5, 0.95, 0.99)} | {"n": count_of(b)}
    if w.ttft is not None:
        br = good_bracket(w.ttft, cfg.slo_s, w.failed)
        d["good_fraction"] = {"lo": br.lo, "hi": br.hi, "exact": br.exact, "text": br.text(),
                              "bound_lo_s": br.bound_lo, "bound_hi_s": None if br.bound_hi is None or math.isinf(br.bound_hi) else br.bound_hi}
    for key, names in (("waiting", m.waiting if m else ()), ("running", m.running if m else ()),
                       ("kv_cache_usage", m.kv_cache if m else ()), ("preemptions", m.preemptions if m else ())):
        if not names and d.get(key) is None:
            d[key] = NOT_EXPOSED
    if m and not m.failed and d["aborted_or_errored"] is None:
        d["aborted_or_errored"] = NOT_EXPOSED
    return d


# ------------------------------------------------------------------ records


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
        if not isinstance(le, (int, float)) or isinstance(le, bool) or not _finite(c):
            raise ValueError("bucket bound and count must be numbers")
        out.append((float(le), float(c)))
    out.sort()
    if not out or not math.isinf(out[-1][0]):
        raise ValueError("buckets need a +Inf bound")
    return tuple(out)


def window_to_record(w: Window) -> dict:
    """A ``watch`` record (see docs/record-format.md)."""
    return {
        "type": "watch", "t_start": w.t_start, "t_end": w.t_end, "engine": w.engine, "source": w.source,
        "ttft_buckets": _jb(w.ttft), "e2e_buckets": _jb(w.e2e), "queue_time_buckets": _jb(w.queue_time),
        "success": w.success, "failed": w.failed, "preemptions": w.preemptions,
        "waiting_start": w.waiting_start, "waiting_end": w.waiting_end, "running": w.running,
        "kv_cache_usage": w.kv_cache, "gaps": list(w.gaps), "reset": w.reset,
    }


def window_from_record(d: dict) -> Window:
    """Inverse of ``window_to_record``; raises ValueError on a bad record."""
    def num(key, required=False):
        v = d.get(key)
        if v is None:
            if required:
                raise ValueError(f"missing required field {key!r}")
            return None
        if not _finite(v):
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
    )


@dataclass
class WatchState:
    """What the console / headless printer shows at one moment."""

    engine: str | None
    source_kind: str
    label: str
    verdict: WatchVerdict
    last: dict | None
    scope: str
    notes: tuple[str, ...] = field(default_factory=tuple)


# ------------------------------------------------------------------ the console's Snapshot


def build_snapshot(*, seq: int, label: str, judgement: WatchJudgement, last: Window | None, has_ttft: bool,
                   engine: str | None, scope: str, canary: Sequence[dict] = (), waiting_series: Sequence[float] = (),
                   running_series: Sequence[float] = (), good_series: Sequence[float] = (), gap: str | None = None,
                   header: dict | None = None, canary_line: str | None = None,
                   verdict: WatchVerdict | None = None) -> Snapshot:
    """A console ``Snapshot`` of a watch: the verdict (with the server-side label and scope in its
    reason), the good fraction of the last window (rolling) and since the start (cumulative) as
    the pessimistic end with the bracket beside it, the queue, and the canary's requests.
    Server-side TTFT percentiles are not points (buckets): they stay N/A in the TTFT pane and the
    bracket is in the verdict reason."""
    from tui.core import snapshot as S
    from tui.core.monitor import fraction_severity

    cfg = judgement.cfg
    v = verdict if verdict is not None else judgement.verdict(has_ttft=has_ttft)
    extra = []
    if v.blocked:
        extra.append("PASS blocked: " + "; ".join(v.blocked))
    if gap:
        extra.append(f"gap: {gap}")
    if judgement.resets:
        extra.append(judgement.resets[-1])
    if canary_line:
        extra.append(canary_line)
    reason = " · ".join([v.reason] + extra + [SERVER_TTFT_LABEL, f"scope: {scope}", COMPLETION_NOTE])
    console_verdict = S.Verdict(
        state=v.state, reason=reason, missing=v.missing, n=int(v.n), good=int(v.good_lo), elapsed_s=v.elapsed_s,
        need_requests=0, need_seconds=0.0, e_pass=1.0, e_fail=1.0, threshold=1.0 / cfg.alpha, vif=1.0,
        n_eff=float(v.n), bursty=False, target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha,
    )

    def wstat(name: str, w: Window | None, good_lo: float, good_hi: float, n: float) -> S.WindowStat:
        frac = good_lo / n if n else None
        fs = S.FractionStat(good=int(good_lo), n=int(n), fraction=frac, lo=frac,
                            hi=(good_hi / n if n else None), severity=fraction_severity(frac, cfg.target))
        secs = w.seconds if w is not None else 0.0
        return S.WindowStat(label=name, good=fs, ttft=(), ttft_fail_inf=(), completed=int(n), failed=0, slow=0,
                            req_per_s=(n / secs if secs > 0 else None), output_tok_per_s=None, goodput_per_s=None,
                            tpot_ms_p50=None, seconds=secs)

    if last is not None and last.ttft is not None:
        br = good_bracket(last.ttft, cfg.slo_s, last.failed)
        rolling = wstat(f"last window {last.seconds:.0f} s · pessimistic end (bracket in brackets)", last,
                        math.floor(br.good_lo + 1e-6), math.ceil(br.good_hi - 1e-6), math.ceil(br.total - 1e-6))
    else:
        rolling = wstat("last window: gap" if last is not None else "no window yet", last, 0, 0, 0)
    cumulative = wstat(f"since the watch started · {SERVER_TTFT_LABEL}", judgement.span,
                       judgement.good_lo, judgement.good_hi, judgement.n)
    q = S.QueueState(
        source=f"{engine} (server)" if engine else None,
        waiting=None if last is None else last.waiting_end, running=None if last is None else last.running,
        kv_cache_usage=None if last is None else last.kv_cache, client_in_flight=None,
        waiting_series=tuple(waiting_series), running_series=tuple(running_series),
        max_waiting=max(waiting_series) if waiting_series else None,
    )
    rows = []
    slo_s = cfg.slo_s
    for r in list(canary)[-200:]:
        t_sent, t_first, t_end = r.get("t_sent"), r.get("t_first_token"), r.get("t_end")
        if not (_finite(t_sent) and _finite(t_end)):
            continue
        ttft = (t_first - t_sent) if _finite(t_first) else None
        outcome: Outcome
        if (not r.get("complete")) or r.get("error") is not None or ttft is None:
            outcome = "failed"
        else:
            outcome = "good" if ttft <= slo_s else "slow"
        rows.append(S.RequestRow(id=str(r.get("id")), level=r.get("level"), round=int(r.get("round") or 1),
                                 phase="canary", ttft_ms=None if ttft is None else ttft * 1000.0,
                                 output_tokens=r.get("output_tokens"), outcome=outcome, error=r.get("error"),
                                 latency_ms=(t_end - t_sent) * 1000.0, t_end=t_end))
    gpu = S.GpuState(available=False, devices=(), predicted_gib=None, ceiling_gib=None, gpu_gib=None,
                     note="watch mode: GPU memory is not read from the servers")
    notes = tuple(v.notes) + ((f"gap: {gap}",) if gap else ())
    return S.Snapshot(
        seq=seq, source=label, synthetic=False, header=dict(header or {}), run_elapsed_s=v.elapsed_s,
        current_level=None, current_round=1, cumulative=cumulative, rolling=rolling, verdict=console_verdict, levels=(),
        recent=tuple(rows), good_series=tuple(good_series), p95_series=(), target=cfg.target,
        slo_ttft_ms=cfg.slo_ttft_ms, queue=q, gpu=gpu, errors_by_class={}, requests_total=len(rows),
        warmup_total=0, malformed=0, malformed_examples=(), unknown_types=0, truncated=0, notes=notes,
    )


def advance(fed: Window | None, cur: Window) -> tuple[Window, Window]:
    """Prometheus' sequential windows: ``cur`` holds ``increase()`` over the whole span since the
    watch's anchor; ``fed`` what was already judged. Returns (the new part as a window, the new
    ``fed``). Non-overlapping ``increase()`` windows would lose every increment that falls between
    the last sample of one window and the first of the next; a growing span loses none. A count
    that shrinks (extrapolation settling) is held, never fed back negative."""
    if fed is None:
        return cur, cur
    if cur.ttft is None:
        gap = Window(t_start=fed.t_end, t_end=cur.t_end, engine=cur.engine, source=cur.source,
                     waiting_start=fed.waiting_end, waiting_end=cur.waiting_end, running=cur.running,
                     kv_cache=cur.kv_cache, gaps=cur.gaps)
        return gap, fed

    def bdiff(a: Buckets | None, b: Buckets | None) -> tuple[Buckets | None, Buckets | None]:
        if b is None:
            return None, a
        if a is None:
            return b, b
        da = dict(a)
        if set(da) != {le for le, _ in b}:
            return None, b
        held = tuple((le, max(c, da[le])) for le, c in b)
        return tuple((le, max(0.0, c - da[le])) for le, c in held), held

    def sdiff(a, b):
        if b is None:
            return None, a
        if a is None:
            return b, b
        h = max(a, b)
        return h - a, h

    t, t_f = bdiff(fed.ttft, cur.ttft)
    e, e_f = bdiff(fed.e2e, cur.e2e)
    q, q_f = bdiff(fed.queue_time, cur.queue_time)
    s, s_f = sdiff(fed.success, cur.success)
    f, f_f = sdiff(fed.failed, cur.failed)
    p, p_f = sdiff(fed.preemptions, cur.preemptions)
    delta = Window(t_start=fed.t_end, t_end=cur.t_end, engine=cur.engine, source=cur.source, ttft=t, e2e=e,
                   queue_time=q, success=s, failed=f, preemptions=p, waiting_start=fed.waiting_end,
                   waiting_end=cur.waiting_end, running=cur.running, kv_cache=cur.kv_cache, gaps=cur.gaps)
    new_fed = Window(t_start=fed.t_start, t_end=cur.t_end, engine=cur.engine, source=cur.source, ttft=t_f, e2e=e_f,
                     queue_time=q_f, success=s_f, failed=f_f, preemptions=p_f, waiting_start=fed.waiting_start,
                     waiting_end=cur.waiting_end, running=cur.running, kv_cache=cur.kv_cache)
    return delta, new_fed


def canary_text(summary: dict | None) -> str | None:
    """One line: the canary's client-side TTFT beside the server-side figure, and the difference."""
    if not summary:
        return None
    c = summary.get("client_ttft_p50_ms")
    srv = summary.get("server_ttft_p50_bucket_ms")
    diff = summary.get("client_minus_server_p50_ms")
    line = f"canary: {summary.get('sent', 0)} sent, {summary.get('good', 0)} good"
    if c is not None:
        line += f", client TTFT P50 {c:.0f} ms"
    if srv:
        hi = "+Inf" if srv[1] is None else f"{srv[1]:.0f}"
        line += f" vs server-side P50 bucket {srv[0]:.0f}..{hi} ms"
    if diff:
        line += f" (client minus server {diff[0]:.0f}..{diff[1]:.0f} ms)"
    return line


def canary_verdict(records: Sequence[dict], cfg: WatchConfig) -> WatchVerdict:
    """For a server without a TTFT histogram: the verdict from the canary's own requests (client-side
    TTFT, completion observed), with the same judge and window rules. Good = complete, no error, first
    token within the SLO. A canary is sparse: the minimum request count takes long at gentle rates."""
    test = MixtureTest(cfg.target, cfg.alpha)
    min_n = max(cfg.min_requests or 0, test.min_requests_to_pass())
    judge = make_judge(test, min_window_s=cfg.min_window_s, min_requests=min_n, fail_min_s=cfg.fail_min_s)
    rows = []
    for r in records:
        if r.get("phase", "measure") != "measure" or not (_finite(r.get("t_sent")) and _finite(r.get("t_end"))):
            continue
        tf = r.get("t_first_token")
        good = bool(r.get("complete")) and r.get("error") is None and _finite(tf) and (tf - r["t_sent"]) <= cfg.slo_s
        rows.append((r["t_sent"], r["t_end"], good))
    rows.sort(key=lambda x: x[1])
    n = g = 0
    if rows:
        judge.add_many(rows[0][0], 0, 0)
    for _ts, te, good in rows:
        judge.add_many(te, 1 if good else 0, 1)
        n += 1
        g += good
    elapsed = (rows[-1][1] - rows[0][0]) if rows else 0.0
    st = judge.state if rows else INSUFFICIENT_WINDOW
    frac = f"canary good fraction {100 * g / n:.1f}% ({g}/{n})" if n else "no canary request finished yet"
    need_n = max(0, min_n - n)
    need_s = max(0.0, cfg.min_window_s - elapsed)
    parts = ([f"need {need_n} more canary requests"] if need_n else []) + ([f"{_fmt_min(need_s)} more"] if need_s > 0 else [])
    reason = {
        PASS: f"{frac}: at or above the {cfg.target:.0%} target (anytime-valid test, alpha {cfg.alpha:g}).",
        FAIL: f"{frac}: below the {cfg.target:.0%} target (anytime-valid test, alpha {cfg.alpha:g}).",
        UNDECIDED: f"{frac}: not yet enough evidence either way.",
    }.get(st, f"{frac}: too few to judge the {cfg.target:.0%} target.")
    return WatchVerdict(
        state=st, reason=f"no TTFT histogram on this server; verdict from the canary: {reason}",
        lo=(g / n if n else None), hi=(g / n if n else None), exact=True, n=n, good_lo=g, good_hi=g,
        elapsed_s=elapsed, missing=", ".join(parts) or None if st == INSUFFICIENT_WINDOW else None,
        notes=("canary: client-side TTFT of the probe requests, completion observed; it measures only what "
               "the canary's own requests met", NOT_EXPOSED + ": server-side TTFT"),
        target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha,
    )
