"""`servewatch run` (headless load test, recorded, then the report) and `servewatch live` (the same load test
watched in the console).

    servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos
    servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300

Exit codes: those of the report (0 PASS, 1 FAIL, 3 insufficient/undecided); 2 for bad usage or a
server that cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tui.cli.options import (
    UsageError,
    add_acceptance_arguments,
    add_budget_arguments,
    add_console_arguments,
    add_http_arguments,
    add_rolling_arguments,
    epilog,
    levels,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    token_range,
)
from tui.core.exitcodes import ExitCode
from tui.core.redact import redact_url
from tui.sources.load import ConfigError, LoadConfig, SetupError, monitor_config, run_load

RUN_EPILOG = epilog("servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos",
                    "servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300",
                    codes="exit codes: those of the report (0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or UNDECIDED); "
                          "2 bad usage or a server that cannot be reached")
LIVE_EPILOG = epilog("servewatch live --url http://127.0.0.1:8080 --concurrency 1,2,4 --theme light",
                     codes="exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, "
                           "3 INSUFFICIENT_WINDOW or UNDECIDED; 2 bad usage or a server that cannot be reached")


# ------------------------------------------------------------------ flags


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `servewatch run`, `live` and `sweep`: target, load, recording, connection, acceptance, budget."""
    t = parser.add_argument_group("target")
    t.add_argument("--url", required=True, metavar="URL",
                   help="server base URL, with or without a trailing /v1 (required; no default)")
    t.add_argument("--model", default=None, metavar="NAME", help="model name (default: the first id of /v1/models)")
    t.add_argument("--api", choices=("chat", "completions"), default="chat",
                   help="/v1/chat/completions (default) or /v1/completions")

    g = parser.add_argument_group("load")
    m = g.add_mutually_exclusive_group(required=True)
    m.add_argument("--concurrency", type=levels(int), metavar="LIST",
                   help="closed loop: in-flight requests per step, a ramp such as 1,2,4,8 (no default: this or --rate)")
    m.add_argument("--rate", type=levels(float), metavar="LIST",
                   help="open loop: arrivals per second per step, such as 0.5,1,2 (no default: this or --concurrency)")
    g.add_argument("--arrival", choices=("poisson", "constant", "gamma"), default="poisson",
                   help="open loop arrival process (default poisson)")
    g.add_argument("--burstiness", type=non_negative_float, default=1.0, metavar="FACTOR",
                   help="gamma arrivals: coefficient of variation of the gaps (shape 1/X^2); 1 = Poisson, "
                        ">1 burstier (default 1)")
    g.add_argument("--input-tokens", type=token_range, default=(128, 128), metavar="N|MIN-MAX",
                   help="prompt length in tokens, fixed or uniform MIN-MAX (default 128)")
    g.add_argument("--output-tokens", type=token_range, default=(64, 64), metavar="N|MIN-MAX",
                   help="max_tokens per request, fixed or uniform MIN-MAX (default 64)")
    g.add_argument("--ignore-eos", action="store_true",
                   help="send ignore_eos: true so every answer has exactly max_tokens tokens")
    g.add_argument("--warmup", type=non_negative_int, default=0, metavar="N",
                   help="requests before the first step, recorded as phase warmup (default 0)")
    g.add_argument("--requests", type=positive_int, default=None, metavar="N",
                   help="requests per step (default: each step runs until its verdict is PASS or FAIL, "
                        "see --max-step-seconds)")
    g.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds per step (with --requests: whichever comes first; default: until decided)")
    g.add_argument("--max-step-seconds", type=positive_float, default=None, metavar="SECONDS",
                   help="a step run until decided (the default without --requests/--duration, and every sweep "
                        "step) ends UNDECIDED after SECONDS; default: the minimum window + 300 s (900 s for "
                        "the 10-min window). Shorter than the window, a step cannot PASS.")
    g.add_argument("--rounds", type=positive_int, default=1, metavar="N", help="repeat the ramp N times (default 1)")
    g.add_argument("--stop-on-fail", action="store_true", help="end the ramp at the first step whose verdict is FAIL")
    g.add_argument("--seed", type=int, default=0, metavar="N", help="seed for lengths and arrivals (default 0)")

    o = parser.add_argument_group("recording and telemetry")
    o.add_argument("--record", default=None, metavar="FILE",
                   help="record file (default servewatch-YYYYmmdd-HHMMSS.jsonl here); appended to")
    o.add_argument("--metrics-url", default=None, metavar="URL", help="Prometheus endpoint (default URL/metrics)")
    o.add_argument("--metrics-interval", type=positive_float, default=1.0, metavar="SECONDS",
                   help="seconds between metrics/GPU samples (default 1)")
    o.add_argument("--no-gpu", action="store_true", help="do not sample NVML/host telemetry")

    c = add_http_arguments(parser)
    c.add_argument("--connect-timeout", type=positive_float, default=10.0, metavar="SECONDS",
                   help="seconds to open a connection (default 10)")
    c.add_argument("--read-timeout", type=positive_float, default=300.0, metavar="SECONDS",
                   help="longest silence allowed, queueing included (default 300)")

    add_acceptance_arguments(parser)
    add_budget_arguments(parser)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch run`."""
    parser.description = "Headless load test against a server, recorded, then the report on the record file."
    parser.epilog = RUN_EPILOG
    add_load_arguments(parser)


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch live`: those of `run` plus every console flag `replay` takes
    (--theme, --themes-dir, --export-dir, --rolling-seconds, --rolling-requests)."""
    parser.description = "The console watching a live load test, recorded like `run`."
    parser.epilog = LIVE_EPILOG
    add_load_arguments(parser)
    add_console_arguments(parser)
    add_rolling_arguments(parser)


def config_from_args(args: argparse.Namespace) -> LoadConfig:
    """The LoadConfig the flags describe (raises ConfigError on bad combinations)."""
    closed = getattr(args, "concurrency", None) is not None
    levels = args.concurrency if closed else getattr(args, "rate", None)
    if not levels:
        raise ConfigError("give --concurrency LIST or --rate LIST")
    cfg = LoadConfig(
        url=args.url,
        model=getattr(args, "model", None),
        api=getattr(args, "api", "chat"),
        mode="closed" if closed else "open",
        levels=list(levels),
        arrival=getattr(args, "arrival", "poisson"),
        burstiness=float(getattr(args, "burstiness", 1.0)),
        input_tokens=tuple(getattr(args, "input_tokens", (128, 128))),
        output_tokens=tuple(getattr(args, "output_tokens", (64, 64))),
        ignore_eos=bool(getattr(args, "ignore_eos", False)),
        warmup=int(getattr(args, "warmup", 0) or 0),
        requests=getattr(args, "requests", None),
        duration=getattr(args, "duration", None),
        rounds=int(getattr(args, "rounds", 1) or 1),
        stop_on_fail=bool(getattr(args, "stop_on_fail", False)),
        record=getattr(args, "record", None),
        metrics_url=getattr(args, "metrics_url", None),
        metrics_interval=float(getattr(args, "metrics_interval", 1.0)),
        gpu=not getattr(args, "no_gpu", False),
        connect_timeout=float(getattr(args, "connect_timeout", 10.0)),
        read_timeout=float(getattr(args, "read_timeout", 300.0)),
        api_key_env=getattr(args, "api_key_env", "OPENAI_API_KEY"),
        headers=list(getattr(args, "headers", None) or []),
        insecure=bool(getattr(args, "insecure", False)),
        seed=int(getattr(args, "seed", 0) or 0),
        monitor=monitor_config(
            slo_ttft_ms=float(getattr(args, "slo_ttft_ms", 1000.0)),
            target=float(getattr(args, "target", 0.95)),
            alpha=float(getattr(args, "alpha", 0.05)),
            min_window_minutes=float(getattr(args, "min_window_minutes", 10.0)),
            min_requests=getattr(args, "min_requests", None),
        ),
        # without --requests/--duration every step runs until its verdict is PASS or FAIL (capped)
        until_decided=getattr(args, "requests", None) is None and getattr(args, "duration", None) is None,
        max_step_seconds=getattr(args, "max_step_seconds", None),
        budget=budget_record_from_args(args),
    )
    cfg.validate()
    return cfg


def budget_record_from_args(args: argparse.Namespace) -> dict | None:
    """The budget JSON (``servewatch budget --json``) when budget inputs were given, else None (no budget is
    made up for a run). Raises ConfigError on bad budget input."""
    from tui.cli.budget import budget_from_args, budget_given
    from tui.core.budget import budget_to_dict

    try:
        if not budget_given(args):
            return None
        result = budget_from_args(args)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"bad budget: {exc}") from None
    if result is None:
        return None
    return budget_to_dict(result)


def step_plan(cfg: LoadConfig) -> str:
    """How each step ends, for the first lines of output."""
    if cfg.until_decided:
        cap = cfg.step_duration or 0.0
        text = f"each step until PASS or FAIL, at most {cap:g} s"
        if cfg.step_requests is not None:
            text += f" or {cfg.step_requests} requests"
        if cap < cfg.min_window_minutes * 60.0:
            text += (f" (shorter than the {cfg.min_window_minutes:g}-min window: no step can PASS; "
                     "raise --max-step-seconds)")
        return text
    parts = []
    if cfg.step_requests is not None:
        parts.append(f"{cfg.step_requests} requests")
    if cfg.duration is not None:
        parts.append(f"{cfg.duration:g} s")
    text = "each step " + " or ".join(parts)
    if cfg.duration is not None and cfg.duration < cfg.min_window_minutes * 60.0:
        text += f" (shorter than the {cfg.min_window_minutes:g}-min window: no verdict can PASS)"
    return text


# ------------------------------------------------------------------ commands


def _print(line: str) -> None:
    print(line, flush=True)


def config_or_usage(args: argparse.Namespace) -> LoadConfig:
    """``config_from_args``, with a bad combination raised as UsageError."""
    try:
        return config_from_args(args)
    except ConfigError as exc:
        raise UsageError(exc) from None


def cmd_run(args: argparse.Namespace) -> int:
    """`servewatch run`."""
    cfg = config_or_usage(args)
    failed = record_run(cfg)
    if failed is not None:
        return failed
    from tui.cli.report import run_report

    _print("")
    return run_report(cfg.record, args, default_budget=False)


def record_run(cfg: LoadConfig) -> int | None:
    """Run the load test described by ``cfg`` into its record file (printing progress).

    Returns None when a record file with requests was written; raises UsageError when the server cannot be used
    or the record file cannot be written; returns 2 when nothing was recorded (interrupted before any record)."""
    from tui.sources.live import default_record_path
    from tui.sources.recorder import Recorder

    if not cfg.record:
        cfg.record = default_record_path()
    import os

    existed = os.path.exists(cfg.record)
    try:
        rec = Recorder(cfg.record, ids_unique=True)  # the generator's ids are unique by construction
    except OSError as exc:
        raise UsageError(f"cannot write {cfg.record}: {exc.strerror or exc}") from None
    unit = "concurrency" if cfg.mode == "closed" else "req/s"
    _print(f"servewatch run: {redact_url(cfg.url)}, {unit} {','.join(f'{v:g}' for v in cfg.levels)}; "
           f"{step_plan(cfg)}")
    _print(f"recording to {cfg.record}")
    interrupted = False
    try:
        try:
            summary = asyncio.run(run_load(cfg, rec.write, progress=_print))
        except KeyboardInterrupt:
            interrupted = True
            summary = None
        except SetupError as exc:
            if not existed and rec.records_written == 0:
                try:  # leave no empty record file behind
                    os.remove(cfg.record)
                except OSError:
                    pass
            raise UsageError(exc) from None
        except OSError as exc:  # the record file could not be written (disk full, removed folder)
            raise UsageError(f"writing {cfg.record} failed: {exc.strerror or exc}") from None
    finally:
        rec.close()
    if interrupted:
        _print(f"interrupted: in-flight requests recorded as cancelled; {rec.requests_written} requests in {cfg.record}")
    else:
        _print(f"done: {summary.requests if summary else rec.requests_written} requests recorded in {cfg.record}")
        if summary and summary.stopped_early:
            _print(summary.stopped_early)
    if rec.requests_written == 0 and rec.records_written == 0:
        return ExitCode.USAGE
    return None


def cmd_live(args: argparse.Namespace) -> int:
    """`servewatch live`: the console watching a live load test (recorded like `run`)."""
    from tui.cli.budget import view_budget
    from tui.cli.replay import open_console
    from tui.cli.report import monitor_config_from_args
    from tui.sources.live import LiveSource

    cfg = config_or_usage(args)
    try:
        budget, budget_origin = view_budget(args)  # no budget flags: unknown, never the teaching case
        mcfg = monitor_config_from_args(args, check_duplicate_ids=False)  # the generator's ids: unique by construction
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    source = LiveSource(cfg)
    code = open_console(source, args, budget, mcfg, budget_origin=budget_origin)
    try:  # the terminal may be gone (the console closed on SIGHUP or a closed input)
        print(f"record file: {source.record_path}", flush=True)
        if source.error:
            print(f"servewatch: {source.error}", file=sys.stderr)
    except OSError:
        pass
    return ExitCode.INSUFFICIENT if code is None else int(code)
