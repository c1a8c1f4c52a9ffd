"""Describing a window as plain values (None / "not exposed by this server" where absent), what the console or
the headless printer shows at one moment, and the canary's one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tui.core.engines import ENGINES
from tui.core.records.watch import Window
from tui.core.stats import percent_text, selected
from tui.core.watch.histogram import count_of, fmt_quantile, good_bracket
from tui.core.watch.judge import WatchConfig, WatchVerdict
from tui.core.watch.notes import NOT_EXPOSED, SERVER_TTFT_LABEL


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
            d[key] = {f"P{percent_text(q)}": fmt_quantile(b, q) for q in selected()} | {"n": count_of(b)}
    for key, b, names in (("itl", w.itl, m.itl if m else ()), ("tpot", w.tpot, m.tpot if m else ())):
        if names:  # issue 21: only for an engine that exports it (older pages: "gap")
            d[key] = ("gap (series missing or unusable)" if b is None else
                      {f"P{percent_text(q)}": fmt_quantile(b, q) for q in selected()} | {"n": count_of(b)})
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
