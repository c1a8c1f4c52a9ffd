"""Building a watch session from the parsed `servewatch watch` flags (no Textual, no command line): used by the
command line and by the console's watch source alike, so the source layer never reaches up into tui.cli."""

from __future__ import annotations

import os
import time
from typing import Any


def headers_from_args(args: Any) -> dict:
    h = {}
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if key:
            h["Authorization"] = f"Bearer {key}"
    for k, v in args.headers:
        h[k] = v
    return h


def config_from_args(args: Any) -> Any:
    from tui.core.watch import WatchConfig

    return WatchConfig(slo_ttft_ms=args.slo_ttft_ms, target=args.target, alpha=args.alpha,
                       min_window_s=args.min_window_minutes * 60.0, min_requests=args.min_requests)


def _header_record(args: Any, watcher: Any, cfg: Any) -> dict:
    from tui import __version__
    from tui.core.records import run_header
    from tui.core.redact import redact_url

    return run_header(
        target={"url": redact_url(args.url) if args.url else None,
                "metrics_url": redact_url(args.metrics_url) if args.metrics_url else None,
                "prometheus_url": redact_url(args.prometheus_url) if args.prometheus_url else None,
                "model": args.model},
        load={"mode": "watch", "probe_rate": args.probe_rate},
        synthetic=False,
        started_at=time.time(),
        headers={k: "<redacted>" for k in headers_from_args(args)},
        insecure=bool(args.insecure),
        acceptance={"slo_ttft_ms": cfg.slo_ttft_ms, "target": cfg.target, "alpha": cfg.alpha,
                    "min_window_s": cfg.min_window_s},
        source={"kind": "watch", "tool": "servewatch", "version": __version__, "file": None, "sha256": None,
                "derived": ["good fraction bracket from histogram bucket bounds",
                            "window counts from counter deltas (metrics) or increase() (Prometheus)"]},
        watch={"source": "prometheus" if args.prometheus_url else "metrics", "selector": args.selector,
               "interval_s": args.interval},
    )


def build_session(args: Any, client: Any, emit: Any = None) -> tuple[Any, str | None]:
    """(session, error line) from parsed args; no network traffic happens here."""
    from tui.sources.watch import Canary, MetricsWatcher, PrometheusWatcher, WatchSession

    cfg = config_from_args(args)
    watcher: PrometheusWatcher | MetricsWatcher
    try:
        if args.prometheus_url:
            watcher = PrometheusWatcher(args.prometheus_url, selector=args.selector, client=client)
        else:
            watcher = MetricsWatcher(args.metrics_url, selector=args.selector, client=client)
    except ValueError as exc:
        return None, f"--selector: {exc}"
    canary = None
    if args.probe_rate:
        canary = Canary(args.url, args.probe_rate, lambda d: session.emit(d), model=args.model,
                        api_key_env=args.api_key_env, headers=args.headers, insecure=args.insecure,
                        slo_ttft_ms=cfg.slo_ttft_ms)
    interval = args.interval or (30.0 if args.prometheus_url else 5.0)
    session = WatchSession(watcher, cfg, emit=emit, interval=interval, canary=canary,
                           header=_header_record(args, watcher, cfg))
    return session, None
