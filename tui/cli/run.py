"""`servewatch run` (headless load test, recorded, then the report) and `servewatch live` (the same load test
watched in the console).

    servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos
    servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300
    servewatch run --url http://127.0.0.1:8080 --trace azure.csv --trace-window 0-600 --trace-speed 2

Exit codes: those of the report (0 PASS, 1 FAIL, 3 insufficient/undecided); 2 for bad usage or a
server that cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from typing import Any

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
from tui.sources.load.trace import MAX_LISTED, Trace, load_trace, parse_window

RUN_EPILOG = epilog("servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos",
                    "servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300",
                    "servewatch run --url http://127.0.0.1:8080 --trace azure.csv --trace-window 0-600 --trace-speed 2",
                    codes="exit codes: those of the report (0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or UNDECIDED); "
                          "2 bad usage or a server that cannot be reached")
LIVE_EPILOG = epilog("servewatch live --url http://127.0.0.1:8080 --concurrency 1,2,4 --theme light",
                     codes="exit codes (when the console closes): the verdict on screen, 0 PASS, 1 FAIL, "
                           "3 INSUFFICIENT_WINDOW or UNDECIDED; 2 bad usage or a server that cannot be reached")


# ------------------------------------------------------------------ flags


def trace_window(text: str) -> tuple[float, float | None]:
    """``--trace-window START-END`` (or ``START-``): seconds of the trace after its first arrival."""
    try:
        return parse_window(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--trace-window ")) from None


def add_load_arguments(parser: argparse.ArgumentParser, *, trace: bool = False) -> None:
    """Flags of `servewatch run`, `live` and `sweep`: target, load, recording, connection, acceptance, budget.
    ``trace``: also --trace, --trace-speed, --trace-window (`run` and `live`; a sweep has no trace)."""
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
    if trace:
        m.add_argument("--trace", default=None, metavar="FILE",
                       help="open loop: replay the arrival times and token lengths of a trace, one step at its mean "
                            "rate: a servewatch open-loop record file, an Azure LLM inference CSV, a BurstGPT CSV or "
                            "Mooncake JSONL, detected from the content (default: none)")
        g.add_argument("--trace-speed", type=positive_float, default=None, metavar="FACTOR",
                       help="with --trace: replay FACTOR times faster, 2 = the gaps halved (default 1)")
        g.add_argument("--trace-window", type=trace_window, default=None, metavar="START-END",
                       help="with --trace: only the arrivals from START to END seconds after the trace's first "
                            "(END may be left out: to the end), before --trace-speed (default: the whole trace)")
    # None = not given (defaults in config_from_args): a trace refuses the flags that describe another load
    g.add_argument("--arrival", choices=("poisson", "constant", "gamma"), default=None,
                   help="open loop arrival process (default poisson)")
    g.add_argument("--burstiness", type=non_negative_float, default=None, metavar="FACTOR",
                   help="gamma arrivals: coefficient of variation of the gaps (shape 1/X^2); 1 = Poisson, "
                        ">1 burstier (default 1)")
    g.add_argument("--input-tokens", type=token_range, default=None, metavar="N|MIN-MAX",
                   help="prompt length in tokens, fixed or uniform MIN-MAX (default 128)")
    g.add_argument("--output-tokens", type=token_range, default=None, metavar="N|MIN-MAX",
                   help="max_tokens per request, fixed or uniform MIN-MAX (default 64)")
    g.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=None,
                   help="send ignore_eos: true so every answer has exactly max_tokens tokens (default: off; on "
                        "with --trace unless --no-ignore-eos; every request records output_tokens_asked beside "
                        "the output_tokens it got)")
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

    w = parser.add_argument_group("load processes")
    w.add_argument("--workers", type=workers_arg, default=None, metavar="N|auto",
                   help="processes that send the load: 1 = this process (default); N >= 2 = N worker processes "
                        "beside this one, which keeps the record file, the verdict and the console; auto = one per "
                        "64 streams or 250 req/s of the heaviest level, at most the cores")
    w.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                   help="run the workers as actors on a Ray cluster (pip install 'servewatch[ray]'): auto = the "
                        "cluster RAY_ADDRESS names or one already running here; local = start a throwaway one here; "
                        "or ray://HOST:10001 / HOST:6379; with --workers N "
                        "(default with --ray: one per CPU the cluster offers, at most 64)")

    o = parser.add_argument_group("recording and telemetry")
    o.add_argument("--record", default=None, metavar="FILE",
                   help="record file (default servewatch-YYYYmmdd-HHMMSS.jsonl here); appended to")
    o.add_argument("--metrics-url", default=None, metavar="URL", help="Prometheus endpoint (default URL/metrics)")
    o.add_argument("--metrics-interval", type=positive_float, default=1.0, metavar="SECONDS",
                   help="seconds between metrics/GPU samples (default 1)")
    o.add_argument("--no-gpu", action="store_true", help="do not sample NVML/host telemetry")
    from tui.cli.chainopts import add_sign_key_argument

    add_sign_key_argument(o)

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
    add_load_arguments(parser, trace=True)


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch live`: those of `run` plus every console flag `replay` takes
    (--theme, --themes-dir, --export-dir, --rolling-seconds, --rolling-requests)."""
    parser.description = "The console watching a live load test, recorded like `run`."
    parser.epilog = LIVE_EPILOG
    add_load_arguments(parser, trace=True)
    add_console_arguments(parser)
    add_rolling_arguments(parser)


_TRACE_REFUSES = (("--arrival", "arrival"), ("--burstiness", "burstiness"), ("--input-tokens", "input_tokens"),
                  ("--output-tokens", "output_tokens"), ("--max-step-seconds", "max_step_seconds"))


def trace_from_args(args: argparse.Namespace) -> Trace | None:
    """The Trace of ``--trace`` (None without it); ConfigError on a bad file or a flag that contradicts it."""
    path = getattr(args, "trace", None)
    if path is None:
        for flag, attr in (("--trace-speed", "trace_speed"), ("--trace-window", "trace_window")):
            if getattr(args, attr, None) is not None:
                raise ConfigError(f"{flag} needs --trace FILE")
        return None
    given = [flag for flag, attr in _TRACE_REFUSES if getattr(args, attr, None) is not None]
    if int(getattr(args, "rounds", 1) or 1) != 1:
        given.append("--rounds")
    if given:
        raise ConfigError(f"--trace replays the trace's arrivals and lengths once, to its end (--duration or "
                          f"--requests cut it short): {', '.join(given)} cannot be given with it")
    return load_trace(path, speed=getattr(args, "trace_speed", None) or 1.0,
                      window=getattr(args, "trace_window", None))


def config_from_args(args: argparse.Namespace) -> LoadConfig:
    """The LoadConfig the flags describe (raises ConfigError on bad combinations)."""
    trace = trace_from_args(args)
    closed = getattr(args, "concurrency", None) is not None
    levels = args.concurrency if closed else getattr(args, "rate", None)
    if trace is not None:
        levels = [trace.level]
    if not levels:
        raise ConfigError("give --concurrency LIST or --rate LIST")
    ignore_eos = getattr(args, "ignore_eos", None)
    burstiness = getattr(args, "burstiness", None)
    cfg = LoadConfig(
        url=args.url,
        model=getattr(args, "model", None),
        api=getattr(args, "api", "chat"),
        mode="closed" if closed else "open",
        levels=list(levels),
        arrival=getattr(args, "arrival", None) or "poisson",
        burstiness=1.0 if burstiness is None else float(burstiness),
        input_tokens=tuple(getattr(args, "input_tokens", None) or (trace.input_range if trace else (128, 128))),
        output_tokens=tuple(getattr(args, "output_tokens", None) or (trace.output_range if trace else (64, 64))),
        ignore_eos=trace is not None if ignore_eos is None else bool(ignore_eos),
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
        sign_key_env=getattr(args, "sign_key_env", None),
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
        # without --requests/--duration every step runs until its verdict is PASS or FAIL (capped);
        # a trace replay runs to the end of the trace
        until_decided=(trace is None and getattr(args, "requests", None) is None
                       and getattr(args, "duration", None) is None),
        max_step_seconds=getattr(args, "max_step_seconds", None),
        budget=budget_record_from_args(args),
        workers=_workers_value(args),
        ray=getattr(args, "ray", None),
        trace=trace,
    )
    cfg.validate()
    return cfg


def _workers_value(args: argparse.Namespace) -> int | str:
    """--workers as given; not given: 1 (this process), or with --ray auto (one per cluster CPU, at most 64)."""
    w = getattr(args, "workers", None)
    if w is not None:
        return w
    return "auto" if getattr(args, "ray", None) else 1


def workers_arg(text: str) -> int | str:
    """``--workers``: a whole number from 1 or ``auto``."""
    from tui.sources.load.config import MAX_WORKERS

    t = text.strip().lower()
    if t == "auto":
        return "auto"
    try:
        n = int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None
    if not 1 <= n <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_WORKERS} or auto, got {text!r}")
    return n


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
    if cfg.trace is not None:
        text = "one step replaying " + cfg.trace.describe()
        cut = [f"{cfg.requests} requests"] if cfg.requests is not None else []
        if cfg.duration is not None:
            cut.append(f"{cfg.duration:g} s")
        if cut:
            text += f"; cut at {' or '.join(cut)}"
        if min(cfg.duration or math.inf, cfg.trace.span_s) < cfg.min_window_minutes * 60.0:
            text += f" (shorter than the {cfg.min_window_minutes:g}-min window: no verdict can PASS)"
        return text
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


def trace_lines(cfg: LoadConfig) -> list[str]:
    """What reading the trace changed or left out (notes), and its bad rows (FILE:LINE: reason)."""
    t = cfg.trace
    if t is None:
        return []
    out = [f"trace: {n}" for n in t.notes]
    out += [f"trace: bad row {p}" for p in t.problems]
    more = t.source["skipped"] - len(t.problems)
    if more > 0:
        out.append(f"trace: ... and {more:,} more bad rows (the first {MAX_LISTED} are listed)")
    return out


# ------------------------------------------------------------------ commands


def _print(line: str) -> None:
    print(line, flush=True)


def config_or_usage(args: argparse.Namespace) -> LoadConfig:
    """``config_from_args``, with a bad combination raised as UsageError."""
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        raise UsageError(exc) from None
    from tui.cli.chainopts import sign_key

    sign_key(args)  # a missing key variable is bad usage before anything runs
    return cfg


def cmd_run(args: argparse.Namespace) -> int:
    """`servewatch run`."""
    cfg = config_or_usage(args)
    failed = record_run(cfg)
    if failed is not None:
        return failed
    from tui.cli.report import LAST_RUN, run_report

    _print("")
    args.run = LAST_RUN  # the record file may hold earlier runs (appended): the verdict is on this one
    return run_report(cfg.record, args, default_budget=False)


class _Terminated(Exception):
    """SIGTERM reached `servewatch run`: stopped like Ctrl-C (in-flight requests recorded as cancelled)."""


async def _run_until_signal(cfg: LoadConfig, write: Any) -> Any:
    """run_load, with SIGTERM handled like Ctrl-C: the load task is cancelled, so every in-flight request (in
    this process or in the worker processes) is recorded as cancelled before the run ends."""
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    got: list[int] = []

    def on_term() -> None:
        got.append(signal.SIGTERM)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_term)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        pass
    try:
        return await run_load(cfg, write, progress=_print)
    except asyncio.CancelledError:
        if got:
            raise _Terminated from None
        raise
    finally:
        try:
            loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


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
    from tui.cli.chainopts import key_from_env

    key = key_from_env(cfg.sign_key_env, "--sign-key-env")
    try:
        rec = Recorder(cfg.record, ids_unique=True, sign_key=key)  # the generator's ids are unique by construction
    except OSError as exc:
        raise UsageError(f"cannot write {cfg.record}: {exc.strerror or exc}") from None
    unit = "concurrency" if cfg.mode == "closed" else "req/s"
    _print(f"servewatch run: {redact_url(cfg.url)}, {unit} {','.join(f'{v:g}' for v in cfg.levels)}; "
           f"{step_plan(cfg)}")
    for line in trace_lines(cfg):
        _print(line)
    _print(f"recording to {cfg.record}")
    interrupted = False
    try:
        try:
            summary = asyncio.run(_run_until_signal(cfg, rec.write))
        except (KeyboardInterrupt, _Terminated):
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
    for line in trace_lines(cfg):
        print(line, flush=True)
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
