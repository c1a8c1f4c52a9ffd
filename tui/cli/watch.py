"""`servewatch watch`: on-call spot check of a running service from what it already measures.

    servewatch watch --prometheus-url http://prometheus:9090 --selector 'model_name="m"' --once
    servewatch watch --metrics-url http://10.0.0.5:8000/metrics            # console, one replica
    servewatch watch --metrics-url http://h:8080/metrics --url http://h:8080 --probe-rate 0.2

Without --probe-rate nothing is sent to the model server (only its metrics page, or Prometheus).
Thin glue: the logic is in tui/core/watch.py and tui/sources/watch.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time

import tui.core.defaults as D
from tui.cli.options import APPEND, path_arg
from tui.core.exitcodes import ExitCode, UsageError
from tui.core.report import exit_code
from tui.core.textsafe import term
from tui.sources.watch_setup import WatchSettings, build_session

EXIT_INSUFFICIENT = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tui.cli.options import (
        add_acceptance_arguments,
        add_header_arguments,
        epilog,
        non_negative_float,
        positive_float,
    )

    p.epilog = epilog("servewatch watch --prometheus-url http://prometheus:9090 --selector 'model_name=\"m\"' --once",
                      "servewatch watch --metrics-url http://127.0.0.1:8000/metrics --probe-rate 0.2 --url "
                      "http://127.0.0.1:8000")

    s = p.add_argument_group("what to watch (one of)")
    m = s.add_mutually_exclusive_group(required=True)
    m.add_argument("--prometheus-url", metavar="URL",
                   help="the team's Prometheus: the whole fleet, the last window at once (HTTP API /api/v1/query) (default: none)")
    m.add_argument("--metrics-url", metavar="URL",
                   help="one server's metrics page (TensorRT-LLM: /prometheus/metrics): one replica, judged from "
                        "when the watch starts (default: none)")
    s.add_argument("--selector", metavar="LABELS", default=None,
                   help="label selector such as 'model_name=\"x\"' (required when several models are present) (default: none)")
    w = p.add_argument_group("windows and output")
    w.add_argument("--once", action="store_true", help="judge one fixed window, print the verdict, exit")
    w.add_argument("--window-minutes", type=positive_float, default=None, metavar="MINUTES",
                   help="--once window (default: the minimum window, --min-window-minutes)")
    w.add_argument("--window-end", type=positive_float, default=None, metavar="EPOCH",
                   help="with --prometheus-url --once: the window ends at this Unix time in seconds, e.g. an incident "
                        "already over (default: now)")
    w.add_argument("--interval", type=positive_float, default=None, metavar="SECONDS",
                   help=f"seconds between scrapes / queries (default {D.WATCH_METRICS_INTERVAL_S:g} for --metrics-url, "
                        f"{D.WATCH_PROMETHEUS_INTERVAL_S:g} for --prometheus-url; with Prometheus keep it at least "
                        "twice its scrape interval)")
    w.add_argument("--headless", action="store_true", help="no console: print one line per update")
    w.add_argument("--duration", type=non_negative_float, default=None, metavar="SECONDS",
                   help="stop after S seconds (headless; default: until Ctrl-C)")
    w.add_argument("--json", action="store_true", help="print the verdict as JSON (--once / --headless)")
    path_arg(w, "--record", role=APPEND, metavar="FILE", default=None,
                   help="write the windows (and canary requests) as records, for replay and report (default: none)")
    from tui.cli.chainopts import add_sign_key_argument

    add_sign_key_argument(w)
    c = p.add_argument_group("canary (off by default: without it watch sends the model server nothing)")
    c.add_argument("--url", default=None, metavar="URL", help="the model server's base URL (for --probe-rate) (default: none)")
    c.add_argument("--probe-rate", type=positive_float, default=None, metavar="RATE",
                   help="one small streamed request every 1/RATE seconds, recorded like any load request (default: none, "
                        "nothing is sent)")
    c.add_argument("--model", default=None, metavar="NAME", help="model name for the canary (default: the first listed)")
    n = p.add_argument_group("connection")
    n.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable holding a key sent as Authorization: Bearer (never written anywhere) (default: none)")
    add_header_arguments(n)  # --header, --header-env, --header-file (values never written anywhere)
    n.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    add_acceptance_arguments(p)


def settings_from_args(args: argparse.Namespace) -> WatchSettings:
    """The watch's settings from its parsed flags (the sources never see the namespace)."""
    from tui.cli.options import extra_headers

    return WatchSettings(
        prometheus_url=args.prometheus_url, metrics_url=args.metrics_url, selector=args.selector,
        interval=args.interval, url=args.url, probe_rate=args.probe_rate, model=args.model,
        api_key_env=args.api_key_env, headers=tuple(extra_headers(args)), insecure=args.insecure,
        slo_ttft_ms=_watch_ttft_slo(args), target=args.target, alpha=args.alpha,
        min_window_minutes=args.min_window_minutes, min_requests=args.min_requests,
        slo_tpot_ms=args.slo_tpot_ms, slo_itl_ms=args.slo_itl_ms, slo_e2e_ms=args.slo_e2e_ms)


def _watch_ttft_slo(args: argparse.Namespace) -> float:
    """The watch judges the TTFT SLO: ``--slo-ttft-ms off`` is bad usage here (not judged silently at a default)."""
    if args.slo_ttft_ms is None:
        raise UsageError("watch judges the TTFT SLO: --slo-ttft-ms off is not supported here")
    return float(args.slo_ttft_ms)


def _check_url(u: str, flag: str) -> str | None:
    from urllib.parse import urlsplit

    p = urlsplit(u or "")
    if p.scheme not in ("http", "https") or not p.hostname:
        return f"{flag} must be an http(s) URL"
    return None


def usage_error(args) -> str | None:
    for flag, val in (("--prometheus-url", args.prometheus_url), ("--metrics-url", args.metrics_url)):
        if val is not None:
            err = _check_url(val, flag)
            if err:
                return err
    if args.probe_rate and not args.url:
        return "--probe-rate needs --url (the model server to send the canary to)"
    if args.url and not args.probe_rate:
        return "--url is only for the canary: add --probe-rate R (without it watch sends the server nothing)"
    if args.url:
        err = _check_url(args.url, "--url")
        if err:
            return err
    if args.window_minutes is not None and not args.once:
        return "--window-minutes is for --once (the console judges from the start of the watch)"
    if args.once and args.probe_rate:
        return "--once judges server metrics only; the canary runs with the console or --headless"
    if args.window_end is not None and not (args.once and args.prometheus_url):
        return ("--window-end is for --prometheus-url --once (one server's /metrics has no past: it is judged from "
                "when the watch starts)")
    if args.once and args.window_minutes is None and args.min_window_minutes <= 0:
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


def slo_lines(v) -> list[str]:
    """Several SLOs: each one's share bracket and the Fréchet bound on all, with which end decides what."""
    if not v.slos:
        return []
    out = ["  SLOs (share of requests meeting each, server-side histograms, bracket):"]
    for row in v.slos:
        lo, hi = row.get("share_lo"), row.get("share_hi")
        rng = "N/A" if lo is None or hi is None else f"{100 * lo:.1f}-{100 * hi:.1f}%"
        if row["slo"] == "all":
            out.append(f"    all of them: {rng} (Fréchet bound: lower max(0, sum p_i - (k - 1)), upper min p_i; "
                       "PASS judged on the lower end, FAIL on the upper)")
        else:
            bad = row.get("unjudgeable_windows") or 0
            out.append(f"    {row['slo']} <= {row['limit_ms']:g} ms: {rng}"
                       + (f" (not judgeable in {bad} window(s))" if bad else ""))
    return out


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    return str(o)


# ------------------------------------------------------------------ commands


def run(args: argparse.Namespace) -> int:
    err = usage_error(args)
    if err:
        raise UsageError(err)
    settings = settings_from_args(args)
    try:
        settings.watch_config()
    except ValueError as exc:
        raise UsageError(exc) from None
    if not (args.once or args.headless):
        return run_console(args, settings)
    return asyncio.run(_headless(args, settings))


def _open_recorder(path, args=None):
    from tui.cli.chainopts import sign_key
    from tui.sources.recorder import Recorder

    key = sign_key(args) if args is not None else None  # UsageError (exit 2) when the key variable is missing
    return Recorder(path, ids_unique=True, sign_key=key)  # canary ids: the load generator's, unique by construction


async def _headless(args: argparse.Namespace, settings: WatchSettings) -> int:
    from tui.sources.watch import WatchError, make_client

    rec = None
    if args.record:
        try:
            rec = _open_recorder(args.record, args)
        except OSError as exc:
            raise UsageError(f"cannot write {args.record}: {exc.strerror or exc}") from None
    client = make_client(settings.request_headers(), insecure=settings.insecure)
    try:
        session, err = build_session(settings, client, emit=rec.write if rec else None)
        if err:
            raise UsageError(err)
        try:
            if args.once:
                minutes = args.window_minutes if args.window_minutes is not None else args.min_window_minutes
                w = await session.once(minutes * 60.0, t_end=args.window_end,
                                       progress=lambda line: print(line, file=sys.stderr, flush=True))
                if w is None and session.watcher.engine is None:
                    raise UsageError(f"{session.watcher.label}: {session.error}")
                if w is None and session.error and session.error.startswith("nothing to judge"):
                    print(f"servewatch: {session.error}", file=sys.stderr)  # the answer, not a verdict
                    if args.json:
                        sys.stdout.write(format_state(session, out_json=True))
                    return int(ExitCode.INSUFFICIENT)
            else:
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                if args.duration:
                    loop.call_later(args.duration, stop.set)

                def tick():
                    if not args.json:
                        v = session.verdict()
                        lw = session.last_window
                        extra = f" gap: {session.last_gap}" if session.last_gap and (lw is None or lw.ttft is None) else ""
                        print(term(f"[{time.strftime('%H:%M:%S')}] {v.state}: {v.reason}{extra}"), flush=True)

                try:
                    await session.run(stop, first_window_s=args.min_window_minutes * 60.0 or None, on_update=tick)
                except asyncio.CancelledError:
                    pass
        except WatchError as exc:
            raise UsageError(exc) from None
        except Exception as exc:  # the first query/scrape could not even start
            from tui.sources.watch import QueryError

            if isinstance(exc, QueryError):
                raise UsageError(f"{session.watcher.label}: {exc}") from None
            raise
        sys.stdout.write(format_state(session, out_json=args.json))
        return exit_code(session.verdict().state)  # no TTFT histogram and no canary: INSUFFICIENT (3)
    finally:
        await client.aclose()
        if rec is not None:
            rec.close()


# ------------------------------------------------------------------ console


def run_console(args: argparse.Namespace, settings: WatchSettings) -> int:
    from tui.sources.watch_console import WatchConsoleSource, WatchSink

    rec = None
    if args.record:
        try:
            rec = _open_recorder(args.record, args)
        except OSError as exc:
            raise UsageError(f"cannot write {args.record}: {exc.strerror or exc}") from None
    try:
        source = WatchConsoleSource(settings, emit=rec.write if rec else None)
        sink = WatchSink(source)
        from tui.app import build_app

        app = build_app(source, sink, None, theme=getattr(args, "theme", None))
        code = app.run()
        return int(code if code is not None else exit_code(sink.snapshot().verdict.state))
    finally:
        if rec is not None:
            rec.close()


def replay_watch_file(path: str, args) -> int:
    """`servewatch replay` of a watch record file: the console on the recorded windows."""
    from tui.sources.watch_console import WatchFileSource, WatchSink

    cfg = watch_config_from_args(args)
    source = WatchFileSource(path, cfg)
    sink = WatchSink(source)
    from tui.app import build_app

    app = build_app(source, sink, None, theme=getattr(args, "theme", None))
    code = app.run()
    return 3 if code is None else int(code)


# ------------------------------------------------------------------ report on a watch record file


def watch_config_from_args(args: argparse.Namespace):
    """The judgement's settings of a watch recording (report, replay) from the acceptance flags."""
    from tui.core.watch import WatchConfig

    try:
        return WatchConfig(slo_ttft_ms=_watch_ttft_slo(args), target=args.target, alpha=args.alpha,
                           min_window_s=args.min_window_minutes * 60.0, min_requests=args.min_requests,
                           slo_tpot_ms=args.slo_tpot_ms, slo_itl_ms=args.slo_itl_ms, slo_e2e_ms=args.slo_e2e_ms)
    except (AttributeError, ValueError) as exc:
        raise UsageError(exc) from None


def judge_watch_file(path: str, cfg):
    """(WatchJudgement, engine, header, problems) from a watch record file; never raises on content."""
    from tui.sources.evidence_reader import ReadSettings, open_evidence
    from tui.sources.evidence_watch import read_watch

    with open_evidence(path, ReadSettings(watch=False)) as ev:
        got = read_watch(ev, cfg)
    return got.judgement, got.engine, got.header, got.problems


def report_watch(ev, args: argparse.Namespace, out=None) -> int:
    """`servewatch report` on a watch recording (``ev``, opened by the evidence reader): the same judgement as
    the live watch; a broken digest chain forbids PASS."""
    from tui.core.watch import ENGINES, describe_window
    from tui.sources.evidence_watch import read_watch, verdict_with_integrity

    out = out or sys.stdout
    path = ev.name
    cfg = watch_config_from_args(args)
    got = read_watch(ev, cfg)
    j, engine, header, problems = got.judgement, got.engine, got.header, got.problems
    for p in problems[:5]:
        print(f"servewatch: {term(p)}", file=sys.stderr)
    if len(problems) > 5:
        print(f"servewatch: ... and {len(problems) - 5} more problem lines", file=sys.stderr)
    if engine is None:
        raise UsageError(f"{path}: a watch file without usable watch records (0 windows)")
    integrity = got.integrity
    assert integrity is not None  # read_watch verified the chain while it read
    has_ttft = bool(ENGINES[engine].ttft)
    canary = not has_ttft and bool(got.canary)  # judged on the canary's requests, as the watch did
    from tui.core.watch import canary_verdict

    v = verdict_with_integrity(canary_verdict(got.canary, cfg) if canary else j.verdict(has_ttft=has_ttft), integrity)
    src = (header.get("source") or {}) if isinstance(header, dict) else {}
    w = j.span or j.last
    if getattr(args, "json", False):
        out.write(json.dumps({"source": src, "engine": engine, "windows": j.windows, "verdict": v.to_dict(),
                              "window": describe_window(w, cfg) if w else None, "problems": len(problems),
                              "records_integrity": integrity.to_dict()},
                             indent=2, default=_json_default) + "\n")
    else:
        out.write(f"{term(integrity.summary)}\n")  # the first line: what was verified (issue 36)
        out.write(term(f"servewatch report (watch record, source kind {src.get('kind', 'unknown')}): {path}") + "\n")
        out.write(term(f"  engine {engine}, {j.windows} windows, scope: "
                       f"{(header.get('watch') or {}).get('scope', 'unknown')}") + "\n")
        for line in slo_lines(v):
            out.write(term(line) + "\n")
        out.write(term(f"verdict: {v.state}: {v.reason}") + "\n")
        for b in v.blocked:
            out.write(f"  PASS blocked: {term(b)}\n")
        for note in v.notes:
            out.write(f"  note: {term(note)}\n")
    return exit_code(v.state) if has_ttft or canary else EXIT_INSUFFICIENT
