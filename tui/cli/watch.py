"""`servewatch watch`: on-call spot check of a running service from what it already measures.

    servewatch watch --prometheus-url http://prometheus:9090 --selector 'model_name="m"' --once
    servewatch watch --metrics-url http://10.0.0.5:8000/metrics            # console, one replica
    servewatch watch --metrics-url http://h:8080/metrics --url http://h:8080 --probe-rate 0.2

Without --probe-rate nothing is sent to the model server (only its metrics page, or Prometheus).
Thin glue: the logic is in tui/core/watch.py and tui/sources/watch.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import tui.core.defaults as D
from tui.cli.chainopts import sign_key_flag
from tui.cli.declare import Settings, block, flag, path, switch
from tui.cli.options import (
    APPEND,
    Acceptance,
    Headers,
    epilog,
    extra_headers,
    non_negative_float,
    percentiles_flag,
    positive_float,
)
from tui.cli.watchfiles import EXIT_INSUFFICIENT, judge_watch_file, slo_lines, watch_ttft_slo
from tui.cli.watchfiles import json_default as _json_default
from tui.core.exitcodes import ExitCode, UsageError
from tui.core.report import exit_code
from tui.core.textsafe import term
from tui.sources.watch_setup import WatchSettings as SessionSettings
from tui.sources.watch_setup import build_session

__all__ = ["EXIT_INSUFFICIENT", "WatchSettings", "format_state", "judge_watch_file", "run", "session_settings",
           "slo_lines"]


@dataclass(frozen=True, kw_only=True)
class Watched(Settings):
    """What to watch: a Prometheus or one server's metrics page."""

    GROUP = "what to watch (one of)"
    REQUIRED_SETS = ("source",)

    prometheus_url: str | None = flag(
        "--prometheus-url", metavar="URL", exclusive="source",
        help="the team's Prometheus: the whole fleet, the last window at once (HTTP API /api/v1/query) (default: "
             "none)")
    metrics_url: str | None = flag(
        "--metrics-url", metavar="URL", exclusive="source",
        help="one server's metrics page (TensorRT-LLM: /prometheus/metrics): one replica, judged from when the "
             "watch starts (default: none)")
    selector: str | None = flag(
        "--selector", metavar="LABELS", default=None,
        help="label selector such as 'model_name=\"x\"' (required when several models are present) (default: none)")


@dataclass(frozen=True, kw_only=True)
class Windows(Settings):
    """Windows and output."""

    GROUP = "windows and output"

    once: bool = switch("--once", help="judge one fixed window, print the verdict, exit")
    window_minutes: float | None = flag("--window-minutes", type=positive_float, default=None, metavar="MINUTES",
                                        help="--once window (default: the minimum window, --min-window-minutes)")
    window_end: float | None = flag(
        "--window-end", type=positive_float, default=None, metavar="EPOCH",
        help="with --prometheus-url --once: the window ends at this Unix time in seconds, e.g. an incident already "
             "over (default: now)")
    interval: float | None = flag(
        "--interval", type=positive_float, default=None, metavar="SECONDS",
        help=f"seconds between scrapes / queries (default {D.WATCH_METRICS_INTERVAL_S:g} for --metrics-url, "
             f"{D.WATCH_PROMETHEUS_INTERVAL_S:g} for --prometheus-url; with Prometheus keep it at least twice its "
             "scrape interval)")
    headless: bool = switch("--headless", help="no console: print one line per update")
    duration: float | None = flag("--duration", type=non_negative_float, default=None, metavar="SECONDS",
                                  help="stop after S seconds (headless; default: until Ctrl-C)")
    json: bool = switch("--json", help="print the verdict as JSON (--once / --headless)")
    record: str | None = path("--record", role=APPEND, metavar="FILE", default=None,
                              help="write the windows (and canary requests) as records, for replay and report "
                                   "(default: none)")
    sign_key_env: str | None = sign_key_flag()


@dataclass(frozen=True, kw_only=True)
class Canary(Settings):
    """The canary: off unless --probe-rate and --url are given."""

    GROUP = "canary (off by default: without it watch sends the model server nothing)"

    url: str | None = flag("--url", default=None, metavar="URL",
                           help="the model server's base URL (for --probe-rate) (default: none)")
    probe_rate: float | None = flag(
        "--probe-rate", type=positive_float, default=None, metavar="RATE",
        help="one small streamed request every 1/RATE seconds, recorded like any load request (default: none, "
             "nothing is sent)")
    model: str | None = flag("--model", default=None, metavar="NAME",
                             help="model name for the canary (default: the first listed)")


@dataclass(frozen=True, kw_only=True)
class WatchConnection(Settings):
    """The watch's connection: its own key flag (no default variable), headers, TLS."""

    GROUP = "connection"

    api_key_env: str | None = flag(
        "--api-key-env", default=None, metavar="VAR",
        help="environment variable holding a key sent as Authorization: Bearer (never written anywhere) (default: "
             "none)")
    extra: Headers = block(Headers)  # --header, --header-env, --header-file (values never written anywhere)
    insecure: bool = switch("--insecure", help="do not verify TLS certificates")


@dataclass(frozen=True, kw_only=True)
class WatchSettings(Settings):
    """`servewatch watch`."""

    EPILOG = epilog("servewatch watch --prometheus-url http://prometheus:9090 --selector 'model_name=\"m\"' --once",
                    "servewatch watch --metrics-url http://127.0.0.1:8000/metrics --probe-rate 0.2 --url "
                    "http://127.0.0.1:8000")

    watched: Watched = block(Watched)
    windows: Windows = block(Windows)
    canary: Canary = block(Canary)
    connection: WatchConnection = block(WatchConnection)
    acceptance: Acceptance = block(Acceptance)
    percentiles: tuple[float, ...] | None = percentiles_flag()


def session_settings(settings: WatchSettings) -> SessionSettings:
    """The watch's session settings (``tui.sources.watch_setup.WatchSettings``) from its command-line settings."""
    a = settings.acceptance
    return SessionSettings(
        prometheus_url=settings.watched.prometheus_url, metrics_url=settings.watched.metrics_url,
        selector=settings.watched.selector, interval=settings.windows.interval, url=settings.canary.url,
        probe_rate=settings.canary.probe_rate, model=settings.canary.model,
        api_key_env=settings.connection.api_key_env, headers=tuple(extra_headers(settings.connection.extra)),
        insecure=settings.connection.insecure, slo_ttft_ms=watch_ttft_slo(a), target=a.target, alpha=a.alpha,
        min_window_minutes=a.min_window_minutes, min_requests=a.min_requests,
        slo_tpot_ms=a.slos.tpot_ms, slo_itl_ms=a.slos.itl_ms, slo_e2e_ms=a.slos.e2e_ms)


def _check_url(u: str, flag: str) -> str | None:
    from urllib.parse import urlsplit

    p = urlsplit(u or "")
    if p.scheme not in ("http", "https") or not p.hostname:
        return f"{flag} must be an http(s) URL"
    return None


def usage_error(settings: WatchSettings) -> str | None:
    src, win, canary = settings.watched, settings.windows, settings.canary
    for opt, val in (("--prometheus-url", src.prometheus_url), ("--metrics-url", src.metrics_url)):
        if val is not None:
            err = _check_url(val, opt)
            if err:
                return err
    if canary.probe_rate and not canary.url:
        return "--probe-rate needs --url (the model server to send the canary to)"
    if canary.url and not canary.probe_rate:
        return "--url is only for the canary: add --probe-rate R (without it watch sends the server nothing)"
    if canary.url:
        err = _check_url(canary.url, "--url")
        if err:
            return err
    if win.window_minutes is not None and not win.once:
        return "--window-minutes is for --once (the console judges from the start of the watch)"
    if win.once and canary.probe_rate:
        return "--once judges server metrics only; the canary runs with the console or --headless"
    if win.window_end is not None and not (win.once and src.prometheus_url):
        return ("--window-end is for --prometheus-url --once (one server's /metrics has no past: it is judged from "
                "when the watch starts)")
    if win.once and win.window_minutes is None and settings.acceptance.min_window_minutes <= 0:
        return "--once needs a window: give --window-minutes"
    return None


# ------------------------------------------------------------------ printing


def _fmt(v, unit="", digits=1) -> str:
    if v is None:
        return "N/A"
    if isinstance(v, str):
        return v
    return f"{v:.{digits}f}{unit}"


def _hist_text(d) -> str:
    if isinstance(d, dict):
        return ", ".join(f"{k} {v}" for k, v in d.items() if k != "n")
    return str(d)


def format_state(session, out_json: bool = False) -> str:
    from tui.core.watch import describe_window

    v = session.verdict()
    w = session.judgement.span or session.last_window
    desc = describe_window(w, session.cfg) if w is not None else None
    last = describe_window(session.last_window, session.cfg) if session.last_window is not None else None
    if out_json:
        return json.dumps({
            "verdict": v.to_dict(), "engine": session.watcher.engine, "source": session.watcher.kind,
            "scope": session.watcher.scope, "window": desc, "last_window": last,
            "canary": session.canary_summary(), "error": session.error, "last_gap": session.last_gap,
        }, indent=2, default=_json_default) + "\n"
    lines = [f"servewatch watch: {session.watcher.engine or '?'} via {session.watcher.kind} "
             f"{session.watcher.label}", f"  scope: {session.watcher.scope}"]
    if desc is not None:
        lines.append(f"  window: {desc['seconds']:.1f} s")
        lines.append(f"  {desc['server_ttft_label']}")
        lines.append(f"  finished: {_fmt(desc['finished_per_s'], ' req/s', 2)}; success {_fmt(desc['success'], '', 0)}, "
                     f"aborted/errored {_fmt(desc['aborted_or_errored'], '', 0)}")
        lines.append(f"  TTFT (server-side): {_hist_text(desc['ttft'])}")
        lines.append(f"  end-to-end latency: {_hist_text(desc['e2e'])}")
        lines.append(f"  queue time: {_hist_text(desc['queue_time'])}")
        for key, title in (("itl", "inter-token latency (per gap)"), ("tpot", "time per output token (per request)")):
            if key in desc:
                lines.append(f"  {title}: {_hist_text(desc[key])}")
        kv = desc["kv_cache_usage"]
        lines.append(f"  queue: waiting {_fmt(desc['waiting'], '', 0)} (at start {_fmt(desc['waiting_at_start'], '', 0)}), "
                     f"running {_fmt(desc['running'], '', 0)}, KV cache "
                     f"{kv if isinstance(kv, str) else _fmt(None if kv is None else 100 * kv, '%', 0)}, "
                     f"preemptions {_fmt(desc['preemptions'], '', 0)}")
        gf = desc.get("good_fraction")
        if gf:
            lines.append(f"  good fraction (TTFT <= {session.cfg.slo_ttft_ms:g} ms): {gf['text']}")
        if desc["gaps"]:
            lines.append("  gaps: " + "; ".join(desc["gaps"]))
    if session.error:
        lines.append(f"  gap: {session.error}")
    elif session.last_gap:
        lines.append(f"  last gap: {session.last_gap}")
    from tui.core.watch import canary_text

    cs = canary_text(session.canary_summary())
    if cs:
        lines.append("  " + cs)
    lines.extend(slo_lines(v))
    lines.append(f"verdict: {v.state}: {v.reason}")
    if v.missing:
        lines.append(f"  missing: {v.missing}")
    for b in v.blocked:
        lines.append(f"  PASS blocked: {b}")
    for note in v.notes:
        lines.append(f"  note: {note}")
    return "\n".join(term(line) for line in lines) + "\n"  # outside text stays on its line (tui.core.textsafe)


# ------------------------------------------------------------------ commands


def run(settings: WatchSettings) -> int:
    """`servewatch watch`."""
    err = usage_error(settings)
    if err:
        raise UsageError(err)
    session = session_settings(settings)
    try:
        session.watch_config()
    except ValueError as exc:
        raise UsageError(exc) from None
    if not (settings.windows.once or settings.windows.headless):
        return run_console(settings, session)
    return asyncio.run(_headless(settings, session))


def _open_recorder(path: str, sign_key_env: str | None = None) -> Any:
    from tui.cli.chainopts import sign_key
    from tui.sources.recorder import Recorder

    key = sign_key(sign_key_env)  # UsageError (exit 2) when the key variable is missing
    return Recorder(path, ids_unique=True, sign_key=key)  # canary ids: the load generator's, unique by construction


async def _headless(flags: WatchSettings, settings: SessionSettings) -> int:
    from tui.sources.watch import WatchError, make_client

    rec = None
    record = flags.windows.record
    if record:
        try:
            rec = _open_recorder(record, flags.windows.sign_key_env)
        except OSError as exc:
            raise UsageError(f"cannot write {record}: {exc.strerror or exc}") from None
    client = make_client(settings.request_headers(), insecure=settings.insecure)
    try:
        session, err = build_session(settings, client, emit=rec.write if rec else None)
        if err:
            raise UsageError(err)
        try:
            if flags.windows.once:
                minutes = flags.windows.window_minutes if flags.windows.window_minutes is not None else flags.acceptance.min_window_minutes
                w = await session.once(minutes * 60.0, t_end=flags.windows.window_end,
                                       progress=lambda line: print(line, file=sys.stderr, flush=True))
                if w is None and session.watcher.engine is None:
                    raise UsageError(f"{session.watcher.label}: {session.error}")
                if w is None and session.error and session.error.startswith("nothing to judge"):
                    print(f"servewatch: {session.error}", file=sys.stderr)  # the answer, not a verdict
                    if flags.windows.json:
                        sys.stdout.write(format_state(session, out_json=True))
                    return int(ExitCode.INSUFFICIENT)
            else:
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                if flags.windows.duration:
                    loop.call_later(flags.windows.duration, stop.set)

                def tick():
                    if not flags.windows.json:
                        v = session.verdict()
                        lw = session.last_window
                        extra = f" gap: {session.last_gap}" if session.last_gap and (lw is None or lw.ttft is None) else ""
                        print(term(f"[{time.strftime('%H:%M:%S')}] {v.state}: {v.reason}{extra}"), flush=True)

                try:
                    await session.run(stop, first_window_s=flags.acceptance.min_window_minutes * 60.0 or None, on_update=tick)
                except asyncio.CancelledError:
                    pass
        except WatchError as exc:
            raise UsageError(exc) from None
        except Exception as exc:  # the first query/scrape could not even start
            from tui.sources.watch import QueryError

            if isinstance(exc, QueryError):
                raise UsageError(f"{session.watcher.label}: {exc}") from None
            raise
        sys.stdout.write(format_state(session, out_json=flags.windows.json))
        return exit_code(session.verdict().state)  # no TTFT histogram and no canary: INSUFFICIENT (3)
    finally:
        await client.aclose()
        if rec is not None:
            rec.close()


# ------------------------------------------------------------------ console


def run_console(flags: WatchSettings, settings: SessionSettings) -> int:
    from tui.sources.watch_console import WatchConsoleSource, WatchSink

    rec = None
    record = flags.windows.record
    if record:
        try:
            rec = _open_recorder(record, flags.windows.sign_key_env)
        except OSError as exc:
            raise UsageError(f"cannot write {record}: {exc.strerror or exc}") from None
    try:
        source = WatchConsoleSource(settings, emit=rec.write if rec else None)
        sink = WatchSink(source)
        from tui.app import build_app

        app = build_app(source, sink, None, theme=None)
        code = app.run()
        return int(code if code is not None else exit_code(sink.snapshot().verdict.state))
    finally:
        if rec is not None:
            rec.close()
