"""The load test that `servewatch run`, `live` and `sweep` share: its flags, the settings built from them, the
recorded run.

- :func:`add_load_arguments`: the flags (target, load, load processes, recording, connection, acceptance,
  budget); every default is a name of :mod:`tui.core.defaults`, the same names the settings use;
- :func:`config_from_args`: the :class:`~tui.sources.load.config.LoadConfig` (its ``monitor``, the verdict's
  settings, included) from the parsed flags; :func:`console_monitor_config`: the console's
  :class:`~tui.core.monitor.MonitorConfig` for `live`, from the same settings plus the rolling-window flags;
- :func:`record_run`: run the load test into its record file, printing progress (`run`, `sweep`).

The sources below (``tui.sources.load``, ``tui.sources.live``) take these settings dataclasses, never the
argparse namespace. Not a command: the command modules are :mod:`tui.cli.run`, :mod:`tui.cli.live` and
:mod:`tui.cli.sweep`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import math
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import tui.core.defaults as defaults
from tui.cli.chainopts import add_sign_key_argument, key_from_env, sign_key
from tui.cli.options import (
    APPEND,
    INPUT,
    UsageError,
    add_acceptance_arguments,
    add_budget_arguments,
    add_http_arguments,
    embeddings_slos,
    extra_headers,
    levels,
    non_negative_float,
    non_negative_int,
    path_arg,
    positive_float,
    positive_int,
    share,
    slos_from_args,
    think_time,
    token_lengths,
    url_credentials,
)
from tui.core.exitcodes import ExitCode
from tui.core.lengths import LengthDist
from tui.core.monitor import MonitorConfig
from tui.core.redact import redact_url
from tui.core.textsafe import term
from tui.sources.live import default_record_path
from tui.sources.load.config import LoadConfig, monitor_config
from tui.sources.load.errors import ConfigError, SetupError
from tui.sources.load.generator import RunSummary, run_load
from tui.sources.load.kinds import APIS, ARRIVALS
from tui.sources.load.sizing import MAX_WORKERS
from tui.sources.load.tokenizer import load_tokenizer
from tui.sources.load.trace import MAX_LISTED, Trace, load_trace, parse_window
from tui.sources.recorder import Recorder

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
    t.add_argument("--model", default=None, metavar="NAME",
                   help="model name sent (default: the first id of /v1/models); the model the server says it serves "
                        "is recorded beside it, and a name it does not serve is printed and not acceptance-grade")
    t.add_argument("--api", choices=APIS, default=defaults.LOAD_API,
                   help="/v1/chat/completions (default), /v1/completions or /v1/embeddings (embeddings: no tokens "
                        "are streamed, so TTFT, TPOT and ITL are not judgeable and E2E is the SLO, default "
                        f"{defaults.EMBEDDINGS_SLO_E2E_MS:g} ms)")

    g = parser.add_argument_group("load")
    m = g.add_mutually_exclusive_group(required=True)
    m.add_argument("--concurrency", type=levels(int), metavar="LIST",
                   help="closed loop: in-flight requests per step, a ramp such as 1,2,4,8 (no default: this or --rate)")
    m.add_argument("--rate", type=levels(float), metavar="LIST",
                   help="open loop: arrivals per second per step, such as 0.5,1,2 (no default: this or --concurrency)")
    if trace:
        path_arg(m, "--trace", role=INPUT, default=None, metavar="FILE",
                       help="open loop: replay the arrival times and token lengths of a trace, one step at its mean "
                            "rate: a servewatch open-loop record file, an Azure LLM inference CSV, a BurstGPT CSV or "
                            "Mooncake JSONL, detected from the content (default: none)")
        g.add_argument("--trace-speed", type=positive_float, default=None, metavar="FACTOR",
                       help="with --trace: replay FACTOR times faster, 2 = the gaps halved (default 1)")
        g.add_argument("--trace-window", type=trace_window, default=None, metavar="START-END",
                       help="with --trace: only the arrivals from START to END seconds after the trace's first "
                            "(END may be left out: to the end), before --trace-speed (default: the whole trace)")
    else:  # a sweep replays no trace
        parser.set_defaults(trace=None, trace_speed=None, trace_window=None)
    # None = not given (the defaults apply in config_from_args): a trace refuses the flags that describe another load
    g.add_argument("--arrival", choices=ARRIVALS, default=None,
                   help=f"open loop arrival process (default {defaults.ARRIVAL})")
    g.add_argument("--burstiness", type=non_negative_float, default=None, metavar="FACTOR",
                   help="gamma arrivals: coefficient of variation of the gaps (shape 1/X^2); 1 = Poisson, "
                        f">1 burstier (default {defaults.BURSTINESS:g})")
    g.add_argument("--input-tokens", type=token_lengths, default=None, metavar="DIST",
                   help="prompt length in tokens: N, MIN-MAX (uniform, the old draws), uniform:MIN-MAX, "
                        "normal:MEAN,SD[LO-HI] or lognormal:MEDIAN,SIGMA[LO-HI] (clamped to LO-HI, default "
                        f"{defaults.LENGTH_CLIP_MIN}-{defaults.LENGTH_CLIP_MAX}; seeded by --seed) "
                        f"(default {defaults.INPUT_TOKENS})")
    g.add_argument("--output-tokens", type=token_lengths, default=None, metavar="DIST",
                   help=f"max_tokens per request, the same forms as --input-tokens (default {defaults.OUTPUT_TOKENS})")
    path_arg(g, "--tokenizer", role=INPUT, default=None, metavar="FILE",
             help="the model's tokenizer: a local tokenizer.json or a model folder holding one (never downloaded; "
                  "pip install 'servewatch[tokenizer]'): prompts cut to the exact --input-tokens and answers counted "
                  "with it, its SHA-256 in the run header (default: the server's /tokenize, else an estimate of "
                  "~4 chars/token, labelled as one)")
    g.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=None,
                   help="send ignore_eos: true so every answer has exactly max_tokens tokens (default: off; on "
                        "with --trace unless --no-ignore-eos; every request records output_tokens_asked beside "
                        "the output_tokens it got)")
    g.add_argument("--warmup", type=non_negative_int, default=defaults.WARMUP_REQUESTS, metavar="N",
                   help="requests before the first step, recorded as phase warmup "
                        f"(default {defaults.WARMUP_REQUESTS})")
    g.add_argument("--requests", type=positive_int, default=None, metavar="N",
                   help="requests per step (default: each step runs until its verdict is PASS or FAIL, "
                        "see --max-step-seconds)")
    g.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds per step (with --requests: whichever comes first; default: until decided)")
    g.add_argument("--max-step-seconds", type=positive_float, default=None, metavar="SECONDS",
                   help="a step run until decided (the default without --requests/--duration, and every sweep "
                        "step) ends UNDECIDED after SECONDS; default: the minimum window + 300 s (900 s for "
                        "the 10-min window). Shorter than the window, a step cannot PASS.")
    g.add_argument("--rounds", type=positive_int, default=defaults.ROUNDS, metavar="N",
                   help=f"repeat the ramp N times (default {defaults.ROUNDS})")
    g.add_argument("--stop-on-fail", action="store_true", help="end the ramp at the first step whose verdict is FAIL")
    add_workload_arguments(g)
    g.add_argument("--seed", type=int, default=defaults.LOAD_SEED, metavar="N",
                   help=f"seed for lengths and arrivals (default {defaults.LOAD_SEED})")

    w = parser.add_argument_group("load processes")
    w.add_argument("--workers", type=workers_arg, default=None, metavar="N|auto",  # None: depends on --ray
                   help=f"processes that send the load: {defaults.LOAD_WORKERS} = this process (default); N >= 2 = N worker processes "
                        "beside this one, which keeps the record file, the verdict and the console; auto = one per "
                        "64 streams or 250 req/s of the heaviest level, at most the cores")
    w.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                   help="run the workers as actors on a Ray cluster (pip install 'servewatch[ray]'): auto = the "
                        "cluster RAY_ADDRESS names or one already running here; local = start a throwaway one here; "
                        "or ray://HOST:10001 / HOST:6379; with --workers N "
                        "(default with --ray: one per CPU the cluster offers, at most 64)")

    o = parser.add_argument_group("recording and telemetry")
    path_arg(o, "--record", role=APPEND, default=None, metavar="FILE",
                   help="record file (default servewatch-YYYYmmdd-HHMMSS.jsonl here); appended to")
    o.add_argument("--metrics-url", default=None, metavar="URL", help="Prometheus endpoint (default URL/metrics)")
    o.add_argument("--metrics-interval", type=positive_float, default=defaults.METRICS_INTERVAL_S, metavar="SECONDS",
                   help=f"seconds between metrics/GPU samples (default {defaults.METRICS_INTERVAL_S:g})")
    o.add_argument("--no-gpu", action="store_true", help="do not sample NVML/host telemetry")
    add_sign_key_argument(o)

    c = add_http_arguments(parser)
    c.add_argument("--connect-timeout", type=positive_float, default=defaults.CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help=f"seconds to open a connection (default {defaults.CONNECT_TIMEOUT_S:g})")
    c.add_argument("--read-timeout", type=positive_float, default=defaults.READ_TIMEOUT_S, metavar="SECONDS",
                   help=f"longest silence allowed, queueing included (default {defaults.READ_TIMEOUT_S:g})")

    add_acceptance_arguments(parser)
    add_budget_arguments(parser)


def add_workload_arguments(g: argparse._ArgumentGroup) -> None:
    """The workload's shape (issue 23): sessions, shared prefixes, a dataset."""
    g.add_argument("--turns", type=token_lengths, default=None, metavar="DIST",
                   help="multi-turn sessions: turns per session, drawn per session (the forms of --input-tokens); "
                        "each turn sends the whole conversation so far with the answers the server gave; the levels "
                        "then count sessions (closed loop: concurrent sessions; open loop: session starts per "
                        "second) and --requests counts sessions (default: one request per arrival)")
    g.add_argument("--think-time", type=think_time, default=None, metavar="DIST",
                   help="with --turns: seconds between a turn's end and the next turn: SECONDS, uniform:A-B, "
                        "normal:M,SD[LO-HI], lognormal:MEDIAN,SIGMA[LO-HI] or exponential:MEAN (default 0)")
    g.add_argument("--shared-prefix-tokens", type=positive_int, default=None, metavar="TOKENS",
                   help="every prompt starts with a shared system prompt of TOKENS tokens (one of --prefix-groups); "
                        "requests then send cache_prompt: true (default: none)")
    g.add_argument("--prefix-groups", type=positive_int, default=None, metavar="N",
                   help="with --shared-prefix-tokens: N different system prompts, one drawn per session or "
                        "request (default 1)")
    path_arg(g, "--dataset", role=INPUT, default=None, metavar="FILE",
                   help="prompts from FILE: JSON Lines of prompts or chat messages, or ShareGPT JSON; order seeded "
                        "by --seed (default: synthetic prompts)")
    g.add_argument("--max-context", type=positive_int, default=None, metavar="TOKENS",
                   help="with --dataset: the model's context when the server does not tell it; longer "
                        "conversations are skipped and counted (default: the server's)")
    g.add_argument("--dataset-max-bad-share", type=share, default=None, metavar="FRACTION",
                   help="with --dataset: refuse a file with more bad rows than this share "
                        f"(default {defaults.DATASET_MAX_BAD_SHARE:g})")


def workload_from_args(args: argparse.Namespace) -> dict:
    """The LoadConfig fields of :func:`add_workload_arguments` (ConfigError on a combination that means nothing)."""
    v = vars(args)
    # (--think-time without --turns: LoadConfig.validate says so; --prefix-groups needs its None-ness, seen only here)
    if v.get("prefix_groups") is not None and v.get("shared_prefix_tokens") is None:
        raise ConfigError("--prefix-groups needs --shared-prefix-tokens")
    if v.get("dataset") is None:
        for flag, attr in (("--max-context", "max_context"), ("--dataset-max-bad-share", "dataset_max_bad_share")):
            if v.get(attr) is not None:
                raise ConfigError(f"{flag} needs --dataset FILE")
    share = v.get("dataset_max_bad_share")
    return {"turns": v.get("turns"), "think_time": v.get("think_time"),
            "shared_prefix_tokens": v.get("shared_prefix_tokens"), "prefix_groups": v.get("prefix_groups") or 1,
            "dataset": v.get("dataset"), "max_context": v.get("max_context"),
            "dataset_max_bad_share": defaults.DATASET_MAX_BAD_SHARE if share is None else float(share)}


# ------------------------------------------------------------------ the settings


_TRACE_REFUSES = (("--arrival", "arrival"), ("--burstiness", "burstiness"), ("--input-tokens", "input_tokens"),
                  ("--output-tokens", "output_tokens"), ("--max-step-seconds", "max_step_seconds"),
                  # issue 23: a trace replays its own workload (a servewatch record's sessions and prefixes)
                  ("--turns", "turns"), ("--think-time", "think_time"),
                  ("--shared-prefix-tokens", "shared_prefix_tokens"), ("--prefix-groups", "prefix_groups"))


def trace_from_args(args: argparse.Namespace) -> Trace | None:
    """The Trace of ``--trace`` (None without it); ConfigError on a bad file or a flag that contradicts it."""
    if args.trace is None:
        for flag, value in (("--trace-speed", args.trace_speed), ("--trace-window", args.trace_window)):
            if value is not None:
                raise ConfigError(f"{flag} needs --trace FILE")
        return None
    given = [flag for flag, attr in _TRACE_REFUSES if vars(args).get(attr) is not None]
    if args.rounds != 1:
        given.append("--rounds")
    if given:
        raise ConfigError(f"--trace replays the trace's arrivals and lengths (a recording's sessions and prefixes too) "
                          f"once, to its end (--duration or --requests cut it short): {', '.join(given)} cannot be "
                          "given with it")
    trace = load_trace(args.trace, speed=args.trace_speed or 1.0, window=args.trace_window)
    rp = trace.replay
    if rp is not None and rp.dataset is not None and vars(args).get("dataset") is not None:
        # --dataset of a replay: the file the recording used (its SHA-256), checked before any request
        rp.check_dataset_file(args.dataset, trace.source["file"])
    return trace


def config_from_args(args: argparse.Namespace) -> LoadConfig:
    """The LoadConfig the flags of :func:`add_load_arguments` describe (raises ConfigError on bad combinations).
    A flag left at None (not given) takes the default of :mod:`tui.core.defaults`, or the trace's value."""
    trace = trace_from_args(args)
    slos = embeddings_slos(args) if args.api == "embeddings" else slos_from_args(args)
    if args.tokenizer is not None:
        load_tokenizer(args.tokenizer)  # a bad path or file is bad usage now, before any request (loaded once)
    closed = args.concurrency is not None
    levels = args.concurrency if closed else args.rate
    if trace is not None:
        levels = [trace.level]
    if not levels:
        raise ConfigError("give --concurrency LIST or --rate LIST")
    cfg = LoadConfig(
        url=args.url,
        model=args.model,
        api=args.api,
        mode="closed" if closed else "open",
        levels=list(levels),
        arrival=args.arrival or defaults.ARRIVAL,
        burstiness=defaults.BURSTINESS if args.burstiness is None else float(args.burstiness),
        input_tokens=_lengths(args.input_tokens, trace.input_range if trace else None, defaults.INPUT_TOKENS),
        output_tokens=_lengths(args.output_tokens, trace.output_range if trace else None, defaults.OUTPUT_TOKENS),
        input_lengths=args.input_tokens,
        output_lengths=args.output_tokens,
        ignore_eos=trace is not None if args.ignore_eos is None else bool(args.ignore_eos),
        warmup=args.warmup,
        requests=args.requests,
        duration=args.duration,
        rounds=args.rounds,
        stop_on_fail=bool(args.stop_on_fail),
        record=args.record,
        metrics_url=args.metrics_url,
        metrics_interval=float(args.metrics_interval),
        gpu=not args.no_gpu,
        connect_timeout=float(args.connect_timeout),
        read_timeout=float(args.read_timeout),
        api_key_env=args.api_key_env,
        url_credentials_env=args.url_credentials_env if url_credentials(args) else None,  # checked: set, user:password
        sign_key_env=args.sign_key_env,
        headers=extra_headers(args),  # --header, --header-file, --header-env
        insecure=bool(args.insecure),
        seed=args.seed,
        monitor=monitor_config(
            slo_ttft_ms=defaults.SLO_TTFT_MS if slos.ttft_ms is None else float(slos.ttft_ms),
            slos=slos,
            target=float(args.target),
            alpha=float(args.alpha),
            min_window_minutes=float(args.min_window_minutes),
            min_requests=args.min_requests,
        ),
        # without --requests/--duration every step runs until its verdict is PASS or FAIL (capped);
        # a trace replay runs to the end of the trace
        until_decided=trace is None and args.requests is None and args.duration is None,
        max_step_seconds=args.max_step_seconds,
        budget=budget_record_from_args(args),
        workers=_workers_value(args),
        ray=args.ray,
        trace=trace,
        tokenizer=args.tokenizer,
        **workload_from_args(args),
    )
    cfg.validate()
    return cfg


def _lengths(given: LengthDist | None, traced: tuple[int, int] | None, default: int) -> tuple[int, int]:
    """--input-tokens / --output-tokens: the bounds of the distribution given, else the trace's range, else the
    default (fixed)."""
    if given is not None:
        return given.bounds
    return traced if traced is not None else (default, default)


def console_monitor_config(args: argparse.Namespace, cfg: LoadConfig) -> MonitorConfig:
    """The console's verdict settings for `live`: the run's own (``cfg.monitor``, from the acceptance flags) with
    the rolling window of --rolling-seconds / --rolling-requests; the generator's request ids are unique by
    construction, so no set of every id is kept."""
    m = cfg.monitor
    return dataclasses.replace(
        m, check_duplicate_ids=False,
        rolling_s=m.rolling_s if args.rolling_seconds is None else float(args.rolling_seconds),
        rolling_n=m.rolling_n if args.rolling_requests is None else int(args.rolling_requests))


def _workers_value(args: argparse.Namespace) -> int | str:
    """--workers as given; not given: 1 (this process), or with --ray auto (one per cluster CPU, at most 64)."""
    if args.workers is not None:
        return args.workers
    return "auto" if args.ray else defaults.LOAD_WORKERS


def workers_arg(text: str) -> int | str:
    """``--workers``: a whole number from 1 or ``auto``."""
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
    from tui.core.budget.memory import MemoryMissing

    if result is None or isinstance(result, MemoryMissing):  # no memory input: no budget record is made up
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
    if t.replay is not None:
        out += [f"trace: session anomaly {p}" for p in t.replay.anomalies]
    return out


# ------------------------------------------------------------------ the recorded run


def say(line: str) -> None:
    """One progress line on standard output, at once (a CR/LF in a server's model id stays on it: textsafe)."""
    print(term(line), flush=True)


def config_or_usage(args: argparse.Namespace) -> LoadConfig:
    """``config_from_args``, with a bad combination raised as UsageError."""
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        raise UsageError(exc) from None
    sign_key(args)  # a missing key variable is bad usage before anything runs
    return cfg


class _Terminated(Exception):
    """SIGTERM reached `servewatch run`: stopped like Ctrl-C (in-flight requests recorded as cancelled)."""


#: what runs the load into ``write`` with progress lines (``run_load``; a drill's ``run_drill``)
LoadRunner = Callable[[LoadConfig, Callable[[dict], object], Callable[[str], object]], Awaitable[RunSummary]]


async def _run_until_signal(cfg: LoadConfig, write: Callable[[dict], object], runner: LoadRunner | None = None,
                            progress: Callable[[str], object] = say) -> RunSummary:
    """run_load (or ``runner``), with SIGTERM handled like Ctrl-C: the load task is cancelled, so every in-flight
    request (in this process or in the worker processes) is recorded as cancelled before the run ends."""
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
        if runner is not None:
            return await runner(cfg, write, progress)
        return await run_load(cfg, write, progress=progress)
    except asyncio.CancelledError:
        if got:
            raise _Terminated from None
        raise
    finally:
        try:
            loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


@dataclass(frozen=True)
class Recorded:
    """What ``record_run`` did: ``failed`` (an exit code: nothing usable was recorded) or None, and the signal that
    stopped the run early (``signal.SIGINT`` / ``signal.SIGTERM``) or None. A stopped run is still sealed and
    judged; the command then exits 130 / 143 (``stop_code``), not with the verdict's code."""

    failed: int | None = None
    stopped_by: int | None = None

    def stop_code(self, verdict_code: int) -> int:
        """The exit code of a load command after its report: the signal's when one stopped it."""
        if self.stopped_by == signal.SIGTERM:
            return int(ExitCode.TERMINATED)
        if self.stopped_by == signal.SIGINT:
            return int(ExitCode.INTERRUPTED)
        return verdict_code


def record_run(cfg: LoadConfig, runner: LoadRunner | None = None, say: Callable[[str], None] = say,
               intro: str | None = None) -> Recorded:
    """Run the load test described by ``cfg`` into its record file (printing progress with ``say``; ``runner``:
    what runs the load, ``run_load`` when None).

    Returns ``Recorded(failed=None)`` when a record file with requests was written (``stopped_by`` says whether
    Ctrl-C or SIGTERM ended it early); raises UsageError when the server cannot be used or the record file cannot
    be written; ``failed=2`` when nothing was recorded (interrupted before any record)."""
    if not cfg.record:
        cfg.record = default_record_path()
    existed = os.path.exists(cfg.record)
    key = key_from_env(cfg.sign_key_env, "--sign-key-env")
    try:
        rec = Recorder(cfg.record, ids_unique=True, sign_key=key)  # the generator's ids are unique by construction
    except OSError as exc:
        raise UsageError(f"cannot write {cfg.record}: {exc.strerror or exc}") from None
    unit = cfg.level_unit  # concurrency, req/s; sessions, sessions/s (issue 23)
    say(intro or f"servewatch {cfg.purpose or 'run'}: {redact_url(cfg.url)}, {unit} "
                 f"{','.join(f'{v:g}' for v in cfg.levels)}; {step_plan(cfg)}")
    for line in trace_lines(cfg):
        say(line)
    say(f"recording to {cfg.record}")
    interrupted = False
    stopped_by: int | None = None
    try:
        try:
            summary = asyncio.run(_run_until_signal(cfg, rec.write, runner, say))
        except (KeyboardInterrupt, _Terminated) as exc:
            interrupted = True
            stopped_by = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
            summary = None
        except SetupError as exc:
            if not existed and rec.records_written == 0:
                try:  # leave no empty record file behind
                    os.remove(cfg.record)
                except OSError:
                    pass
            raise UsageError(exc) from None
        except OSError as exc:  # the record file could not be written (disk full, removed folder)
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # not the file: this process is out of descriptors
                raise UsageError(f"the client ran out of file descriptors ({exc.strerror or exc}): raise the open-file "
                                 "limit (ulimit -n)") from None
            raise UsageError(f"writing {cfg.record} failed: {exc.strerror or exc}") from None
    finally:
        rec.close()
    if interrupted:
        what = "interrupted by SIGTERM" if stopped_by == signal.SIGTERM else "interrupted (Ctrl-C)"
        say(f"{what}: sending stopped, in-flight requests recorded as cancelled, record sealed; "
            f"{rec.requests_written} requests in {cfg.record}; the partial "
            + ("measurement follows" if cfg.purpose == "measure" else "verdict follows"))
    else:
        say(f"done: {summary.requests if summary else rec.requests_written} requests recorded in {cfg.record}")
        if summary and summary.stopped_early:
            say(summary.stopped_early)
    if rec.requests_written == 0 and rec.records_written == 0:
        nothing = Recorded(stopped_by=stopped_by)  # stopped before anything was written: the signal's code
        return Recorded(failed=nothing.stop_code(int(ExitCode.USAGE)), stopped_by=stopped_by)
    return Recorded(stopped_by=stopped_by)


