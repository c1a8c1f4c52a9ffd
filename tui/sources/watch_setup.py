"""Building a watch session from :class:`WatchSettings` (no Textual, no command line): the command line builds the
settings from its flags (``tui.cli.watch.session_settings``); the console's watch source and the headless watch
both build their session here, so the source layer never sees the argparse namespace."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tui.core.defaults as D
from tui.core.slos import Slos
from tui.core.watch import WatchConfig


@dataclass(frozen=True)
class WatchSettings:
    """What `servewatch watch` watches and how it judges: one of ``prometheus_url`` / ``metrics_url``; the canary
    (``url`` + ``probe_rate``) only when both are given. Header values are sent, never written anywhere."""

    prometheus_url: str | None = None
    metrics_url: str | None = None
    selector: str | None = None
    interval: float | None = None  # None: WATCH_PROMETHEUS_INTERVAL_S / WATCH_METRICS_INTERVAL_S
    url: str | None = None
    probe_rate: float | None = None
    model: str | None = None
    api_key_env: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    insecure: bool = False
    slo_ttft_ms: float = D.SLO_TTFT_MS
    target: float = D.TARGET
    alpha: float = D.ALPHA
    min_window_minutes: float = D.MIN_WINDOW_MINUTES
    min_requests: int | None = None
    slo_tpot_ms: float | None = None  # issue 21: more SLOs with TTFT (the Fréchet bound, tui.core.watch.combine)
    slo_itl_ms: float | None = None
    slo_e2e_ms: float | None = None

    @property
    def scrape_interval(self) -> float:
        if self.interval:
            return self.interval
        return D.WATCH_PROMETHEUS_INTERVAL_S if self.prometheus_url else D.WATCH_METRICS_INTERVAL_S

    @property
    def first_window_s(self) -> float | None:
        """The console's first judged window (None: judge from the first scrape)."""
        return self.min_window_minutes * 60.0 or None

    def watch_config(self) -> WatchConfig:
        """The judgement's settings (raises ValueError for values the judge refuses)."""
        return WatchConfig(slos=self.slos(), target=self.target, alpha=self.alpha,
                           min_window_s=self.min_window_minutes * 60.0, min_requests=self.min_requests)

    def slos(self) -> Slos:
        """The SLOs judged, from the flag values (raises ValueError for a value the table refuses)."""
        return Slos(ttft_ms=self.slo_ttft_ms, tpot_ms=self.slo_tpot_ms, itl_ms=self.slo_itl_ms, e2e_ms=self.slo_e2e_ms)

    def request_headers(self) -> dict[str, str]:
        h: dict[str, str] = {}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key:
                h["Authorization"] = f"Bearer {key}"
        for k, v in self.headers:
            h[k] = v
        return h


def _header_record(s: WatchSettings, cfg: WatchConfig) -> dict:
    from tui import __version__
    from tui.core.records import run_header
    from tui.core.redact import redact_url

    return run_header(
        target={"url": redact_url(s.url) if s.url else None,
                "metrics_url": redact_url(s.metrics_url) if s.metrics_url else None,
                "prometheus_url": redact_url(s.prometheus_url) if s.prometheus_url else None,
                "model": s.model},
        load={"mode": "watch", "probe_rate": s.probe_rate},
        synthetic=False,
        started_at=time.time(),
        headers={k: "<redacted>" for k in s.request_headers()},
        insecure=bool(s.insecure),
        acceptance={"slo_ttft_ms": cfg.slo_ttft_ms, "target": cfg.target, "alpha": cfg.alpha,
                    "min_window_s": cfg.min_window_s, "slo_tpot_ms": cfg.slos.tpot_ms, "slo_itl_ms": cfg.slos.itl_ms,
                    "slo_e2e_ms": cfg.slos.e2e_ms},
        source={"kind": "watch", "tool": "servewatch", "version": __version__, "file": None, "sha256": None,
                "derived": ["good fraction bracket from histogram bucket bounds",
                            "window counts from counter deltas (metrics) or increase() (Prometheus)"]},
        watch={"source": "prometheus" if s.prometheus_url else "metrics", "selector": s.selector,
               "interval_s": s.interval},
    )


def build_session(s: WatchSettings, client: Any, emit: Callable[[dict], Any] | None = None) -> tuple[Any, str | None]:
    """(session, error line) from the settings; no network traffic happens here."""
    from tui.sources.watch import Canary, MetricsWatcher, PrometheusWatcher, WatchSession

    cfg = s.watch_config()
    watcher: PrometheusWatcher | MetricsWatcher
    try:
        if s.prometheus_url:
            watcher = PrometheusWatcher(s.prometheus_url, selector=s.selector, client=client)
        else:
            watcher = MetricsWatcher(s.metrics_url or "", selector=s.selector, client=client)
    except ValueError as exc:
        return None, f"--selector: {exc}"
    canary = None
    if s.probe_rate and s.url:
        canary = Canary(s.url, s.probe_rate, lambda d: session.emit(d), model=s.model,
                        api_key_env=s.api_key_env, headers=list(s.headers), insecure=s.insecure,
                        slos=cfg.slos)
    session = WatchSession(watcher, cfg, emit=emit, interval=s.scrape_interval, canary=canary,
                           header=_header_record(s, cfg))
    return session, None
