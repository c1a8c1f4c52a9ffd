"""The load test that `servewatch run`, `live` and `sweep` share: its flags, the settings built from them, the
recorded run.

- :class:`LoadSettings`: the flags (target, load, load processes, recording, connection, acceptance, budget),
  each declared once (``tui.cli.declare``); every default is a name of :mod:`tui.core.defaults`, the same names
  the settings use; a flag declared with ``into=NAME`` is the :class:`~tui.sources.load.config.LoadConfig` field
  NAME as it is (copied by :func:`config_fields`, not by hand);
- :func:`config_from_args`: the ``LoadConfig`` (its ``monitor``, the verdict's settings, included) from the
  settings; :func:`console_monitor_config`: the console's :class:`~tui.core.monitor.MonitorConfig` for `live`,
  from the same settings plus the rolling-window flags;
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
from typing import Any

import tui.core.defaults as defaults
from tui.cli.budgetflags import BudgetFlags
from tui.cli.chainopts import key_from_env, sign_key, sign_key_flag
from tui.cli.declare import CoreDefault, CoreText, Settings, arg_values, block, declared_args, flag, path, switch
from tui.cli.options import (
    APPEND,
    INPUT,
    Acceptance,
    Http,
    UsageError,
    embeddings_slos,
    extra_headers,
    levels,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    share,
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
from tui.sources.load.kinds import APIS, ARRIVALS, Arrival
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


@dataclass(frozen=True, kw_only=True)
class Target(Settings):
    GROUP = "target"

    url: str = flag("--url", required=True, metavar="URL", into="url",
                    help="server base URL, with or without a trailing /v1 (required; no default)")
    model: str | None = flag("--model", default=None, metavar="NAME", into="model",
                             help="model name sent (default: the first id of /v1/models); the model the server says "
                                  "it serves is recorded beside it, and a name it does not serve is printed and not "
                                  "acceptance-grade")
    api: str = flag("--api", choices=APIS, default=CoreDefault("LOAD_API"), into="api",
                    help=CoreText("/v1/chat/completions (default), /v1/completions or /v1/embeddings (embeddings: no "
                                  "tokens are streamed, so TTFT, TPOT and ITL are not judgeable and E2E is the SLO, "
                                  "default {EMBEDDINGS_SLO_E2E_MS:g} ms)"))


@dataclass(frozen=True, kw_only=True)
class Workload(Settings):
    """The workload's shape (issue 23): sessions, shared prefixes, a dataset (in the "load" group)."""

    turns: LengthDist | None = flag(
        "--turns", type=token_lengths, default=None, metavar="DIST", into="turns",
        help="multi-turn sessions: turns per session, drawn per session (the forms of --input-tokens); each turn "
             "sends the whole conversation so far with the answers the server gave; the levels then count sessions "
             "(closed loop: concurrent sessions; open loop: session starts per second) and --requests counts "
             "sessions (default: one request per arrival)")
    think_time: Any = flag(
        "--think-time", type=think_time, default=None, metavar="DIST", into="think_time",
        help="with --turns: seconds between a turn's end and the next turn: SECONDS, uniform:A-B, normal:M,SD[LO-HI], "
             "lognormal:MEDIAN,SIGMA[LO-HI] or exponential:MEAN (default 0)")
    shared_prefix_tokens: int | None = flag(
        "--shared-prefix-tokens", type=positive_int, default=None, metavar="TOKENS", into="shared_prefix_tokens",
        help="every prompt starts with a shared system prompt of TOKENS tokens (one of --prefix-groups); requests "
             "then send cache_prompt: true (default: none)")
    prefix_groups: int | None = flag(
        "--prefix-groups", type=positive_int, default=None, metavar="N",
        help="with --shared-prefix-tokens: N different system prompts, one drawn per session or request (default 1)")
    dataset: str | None = path(
        "--dataset", role=INPUT, default=None, metavar="FILE", into="dataset",
        help="prompts from FILE: JSON Lines of prompts or chat messages, or ShareGPT JSON; order seeded by --seed "
             "(default: synthetic prompts)")
    max_context: int | None = flag(
        "--max-context", type=positive_int, default=None, metavar="TOKENS", into="max_context",
        help="with --dataset: the model's context when the server does not tell it; longer conversations are "
             "skipped and counted (default: the server's)")
    dataset_max_bad_share: float | None = flag(
        "--dataset-max-bad-share", type=share, default=None, metavar="FRACTION",
        help=CoreText("with --dataset: refuse a file with more bad rows than this share "
                      "(default {DATASET_MAX_BAD_SHARE:g})"))


#: the flags of another load that a trace refuses (it replays its own arrivals, lengths, sessions and prefixes)
_TRACE_REFUSES = ("arrival", "burstiness", "input_tokens", "output_tokens", "max_step_seconds")
_TRACE_REFUSES_WORKLOAD = ("turns", "think_time", "shared_prefix_tokens", "prefix_groups")
TRACE_FLAGS = ("trace", "trace_speed", "trace_window")


@dataclass(frozen=True, kw_only=True)
class Load(Settings):
    """The load: a ramp of concurrency or rates, or a trace (`run`, `live`); its requests and steps."""

    GROUP = "load"
    REQUIRED_SETS = ("ladder",)

    concurrency: list[float] | None = flag(
        "--concurrency", type=levels(int), metavar="LIST", exclusive="ladder",
        help="closed loop: in-flight requests per step, a ramp such as 1,2,4,8 (no default: this or --rate)")
    rate: list[float] | None = flag(
        "--rate", type=levels(float), metavar="LIST", exclusive="ladder",
        help="open loop: arrivals per second per step, such as 0.5,1,2 (no default: this or --concurrency)")
    trace: str | None = path(
        "--trace", role=INPUT, default=None, metavar="FILE", exclusive="ladder",
        help="open loop: replay the arrival times and token lengths of a trace, one step at its mean rate: a "
             "servewatch open-loop record file, an Azure LLM inference CSV, a BurstGPT CSV or Mooncake JSONL, "
             "detected from the content (default: none)")
    trace_speed: float | None = flag(
        "--trace-speed", type=positive_float, default=None, metavar="FACTOR",
        help="with --trace: replay FACTOR times faster, 2 = the gaps halved (default 1)")
    trace_window: tuple[float, float | None] | None = flag(
        "--trace-window", type=trace_window, default=None, metavar="START-END",
        help="with --trace: only the arrivals from START to END seconds after the trace's first (END may be left "
             "out: to the end), before --trace-speed (default: the whole trace)")
    # None = not given (the defaults apply in config_from_args): a trace refuses the flags that describe another load
    arrival: Arrival | None = flag("--arrival", choices=ARRIVALS, default=None,
                               help=CoreText("open loop arrival process (default {ARRIVAL})"))
    burstiness: float | None = flag(
        "--burstiness", type=non_negative_float, default=None, metavar="FACTOR",
        help=CoreText("gamma arrivals: coefficient of variation of the gaps (shape 1/X^2); 1 = Poisson, >1 burstier "
                      "(default {BURSTINESS:g})"))
    input_tokens: LengthDist | None = flag(
        "--input-tokens", type=token_lengths, default=None, metavar="DIST",
        help=CoreText("prompt length in tokens: N, MIN-MAX (uniform, the old draws), uniform:MIN-MAX, "
                      "normal:MEAN,SD[LO-HI] or lognormal:MEDIAN,SIGMA[LO-HI] (clamped to LO-HI, default "
                      "{LENGTH_CLIP_MIN}-{LENGTH_CLIP_MAX}; seeded by --seed) (default {INPUT_TOKENS})"))
    output_tokens: LengthDist | None = flag(
        "--output-tokens", type=token_lengths, default=None, metavar="DIST",
        help=CoreText("max_tokens per request, the same forms as --input-tokens (default {OUTPUT_TOKENS})"))
    tokenizer: str | None = path(
        "--tokenizer", role=INPUT, default=None, metavar="FILE", into="tokenizer",
        help="the model's tokenizer: a local tokenizer.json or a model folder holding one (never downloaded; pip "
             "install 'servewatch[tokenizer]'): prompts cut to the exact --input-tokens and answers counted with it, "
             "its SHA-256 in the run header (default: the server's /tokenize, else an estimate of ~4 chars/token, "
             "labelled as one)")
    ignore_eos: bool | None = flag(
        "--ignore-eos", action=argparse.BooleanOptionalAction, default=None,
        help="send ignore_eos: true so every answer has exactly max_tokens tokens (default: off; on with --trace "
             "unless --no-ignore-eos; every request records output_tokens_asked beside the output_tokens it got)")
    warmup: int = flag("--warmup", type=non_negative_int, default=CoreDefault("WARMUP_REQUESTS"), metavar="N",
                       into="warmup",
                       help=CoreText("requests before the first step, recorded as phase warmup "
                                     "(default {WARMUP_REQUESTS})"))
    requests: int | None = flag("--requests", type=positive_int, default=None, metavar="N", into="requests",
                                help="requests per step (default: each step runs until its verdict is PASS or FAIL, "
                                     "see --max-step-seconds)")
    duration: float | None = flag("--duration", type=positive_float, default=None, metavar="SECONDS",
                                  into="duration",
                                  help="seconds per step (with --requests: whichever comes first; default: until "
                                       "decided)")
    max_step_seconds: float | None = flag(
        "--max-step-seconds", type=positive_float, default=None, metavar="SECONDS", into="max_step_seconds",
        help="a step run until decided (the default without --requests/--duration, and every sweep step) ends "
             "UNDECIDED after SECONDS; default: the minimum window + 300 s (900 s for the 10-min window). Shorter "
             "than the window, a step cannot PASS.")
    rounds: int = flag("--rounds", type=positive_int, default=CoreDefault("ROUNDS"), metavar="N", into="rounds",
                       help=CoreText("repeat the ramp N times (default {ROUNDS})"))
    stop_on_fail: bool = switch("--stop-on-fail", help="end the ramp at the first step whose verdict is FAIL")
    workload: Workload = block(Workload)
    seed: int = flag("--seed", type=int, default=CoreDefault("LOAD_SEED"), metavar="N", into="seed",
                     help=CoreText("seed for lengths and arrivals (default {LOAD_SEED})"))


@dataclass(frozen=True, kw_only=True)
class Processes(Settings):
    GROUP = "load processes"

    workers: int | str | None = flag(  # None: depends on --ray
        "--workers", type=workers_arg, default=None, metavar="N|auto",
        help=CoreText("processes that send the load: {LOAD_WORKERS} = this process (default); N >= 2 = N worker "
                      "processes beside this one, which keeps the record file, the verdict and the console; auto = "
                      "one per 64 streams or 250 req/s of the heaviest level, at most the cores"))
    ray: str | None = flag("--ray", default=None, metavar="auto|ADDRESS", into="ray",
                           help="run the workers as actors on a Ray cluster (pip install 'servewatch[ray]'): auto = "
                                "the cluster RAY_ADDRESS names or one already running here; local = start a "
                                "throwaway one here; or ray://HOST:10001 / HOST:6379; with --workers N (default "
                                "with --ray: one per CPU the cluster offers, at most 64)")


@dataclass(frozen=True, kw_only=True)
class Recording(Settings):
    GROUP = "recording and telemetry"

    record: str | None = path("--record", role=APPEND, default=None, metavar="FILE", into="record",
                              help="record file (default servewatch-YYYYmmdd-HHMMSS.jsonl here); appended to")
    metrics_url: str | None = flag("--metrics-url", default=None, metavar="URL", into="metrics_url",
                                   help="Prometheus endpoint (default URL/metrics)")
    metrics_interval: float = flag(
        "--metrics-interval", type=positive_float, default=CoreDefault("METRICS_INTERVAL_S"), metavar="SECONDS",
        into="metrics_interval", help=CoreText("seconds between metrics/GPU samples (default {METRICS_INTERVAL_S:g})"))
    no_gpu: bool = switch("--no-gpu", help="do not sample NVML/host telemetry")
    sign_key_env: str | None = sign_key_flag()


@dataclass(frozen=True, kw_only=True)
class Connection(Settings):
    GROUP = "connection"

    http: Http = block(Http)
    connect_timeout: float = flag(
        "--connect-timeout", type=positive_float, default=CoreDefault("CONNECT_TIMEOUT_S"), metavar="SECONDS",
        into="connect_timeout", help=CoreText("seconds to open a connection (default {CONNECT_TIMEOUT_S:g})"))
    read_timeout: float = flag(
        "--read-timeout", type=positive_float, default=CoreDefault("READ_TIMEOUT_S"), metavar="SECONDS",
        into="read_timeout", help=CoreText("longest silence allowed, queueing included (default {READ_TIMEOUT_S:g})"))


@dataclass(frozen=True, kw_only=True)
class LoadSettings(Settings):
    """Flags of `servewatch run`, `live` and `sweep`: target, load, load processes, recording, connection,
    acceptance, budget."""

    target: Target = block(Target)
    load: Load = block(Load)
    processes: Processes = block(Processes)
    recording: Recording = block(Recording)
    connection: Connection = block(Connection)
    acceptance: Acceptance = block(Acceptance)
    budget: BudgetFlags = block(BudgetFlags)


@dataclass(frozen=True, kw_only=True)
class SweepLoadSettings(LoadSettings):
    """A sweep's load flags: no trace, and the ladder may be left to the default."""

    load: Load = block(Load, omit=TRACE_FLAGS, optional=("ladder",))


def config_fields(settings: Any) -> dict[str, Any]:
    """The ``LoadConfig`` fields the settings give as they are: every flag declared with ``into=NAME`` (nested
    blocks included)."""
    return {arg.into: value for arg, value, _holder in arg_values(settings) if arg.into is not None}


def workload_from_args(w: Workload) -> dict:
    """The LoadConfig fields of :class:`Workload` that are not as given (ConfigError on a combination that means
    nothing)."""
    # (--think-time without --turns: LoadConfig.validate says so; --prefix-groups needs its None-ness, seen only here)
    if w.prefix_groups is not None and w.shared_prefix_tokens is None:
        raise ConfigError("--prefix-groups needs --shared-prefix-tokens")
    if w.dataset is None:
        for flag_name, value in (("--max-context", w.max_context), ("--dataset-max-bad-share", w.dataset_max_bad_share)):
            if value is not None:
                raise ConfigError(f"{flag_name} needs --dataset FILE")
    bad = w.dataset_max_bad_share
    return {"prefix_groups": w.prefix_groups or 1,
            "dataset_max_bad_share": defaults.DATASET_MAX_BAD_SHARE if bad is None else float(bad)}


# ------------------------------------------------------------------ the settings


def trace_from_args(load: Load, dataset: str | None = None) -> Trace | None:
    """The Trace of ``--trace`` (None without it); ConfigError on a bad file or a flag that contradicts it."""
    if load.trace is None:
        for name, value in (("--trace-speed", load.trace_speed), ("--trace-window", load.trace_window)):
            if value is not None:
                raise ConfigError(f"{name} needs --trace FILE")
        return None
    refused = {f.name: arg.flags[0] for f, arg in declared_args(Load)}
    given = [refused[name] for name in _TRACE_REFUSES if getattr(load, name) is not None]
    given += [refused[name] for name in _TRACE_REFUSES_WORKLOAD if getattr(load.workload, name) is not None]
    if load.rounds != 1:
        given.append("--rounds")
    if given:
        raise ConfigError(f"--trace replays the trace's arrivals and lengths (a recording's sessions and prefixes too) "
                          f"once, to its end (--duration or --requests cut it short): {', '.join(given)} cannot be "
                          "given with it")
    trace = load_trace(load.trace, speed=load.trace_speed or 1.0, window=load.trace_window)
    rp = trace.replay
    if rp is not None and rp.dataset is not None and dataset is not None:
        # --dataset of a replay: the file the recording used (its SHA-256), checked before any request
        rp.check_dataset_file(dataset, trace.source["file"])
    return trace


def config_from_args(settings: LoadSettings) -> LoadConfig:
    """The LoadConfig the flags of :class:`LoadSettings` describe (raises ConfigError on bad combinations).
    A flag left at None (not given) takes the default of :mod:`tui.core.defaults`, or the trace's value."""
    load, http = settings.load, settings.connection.http
    trace = trace_from_args(load, load.workload.dataset)
    slos = embeddings_slos(settings.acceptance) if settings.target.api == "embeddings" else settings.acceptance.slos
    if load.tokenizer is not None:
        load_tokenizer(load.tokenizer)  # a bad path or file is bad usage now, before any request (loaded once)
    closed = load.concurrency is not None
    levels = load.concurrency if closed else load.rate
    if trace is not None:
        levels = [trace.level]
    if not levels:
        raise ConfigError("give --concurrency LIST or --rate LIST")
    acc = settings.acceptance
    cfg = LoadConfig(
        **config_fields(settings),  # url, model, api, warmup, requests, duration, rounds, record, seed ...: as given
        mode="closed" if closed else "open",
        levels=list(levels),
        arrival=load.arrival or defaults.ARRIVAL,
        burstiness=defaults.BURSTINESS if load.burstiness is None else float(load.burstiness),
        input_tokens=_lengths(load.input_tokens, trace.input_range if trace else None, defaults.INPUT_TOKENS),
        output_tokens=_lengths(load.output_tokens, trace.output_range if trace else None, defaults.OUTPUT_TOKENS),
        input_lengths=load.input_tokens,
        output_lengths=load.output_tokens,
        ignore_eos=trace is not None if load.ignore_eos is None else bool(load.ignore_eos),
        stop_on_fail=bool(load.stop_on_fail),
        gpu=not settings.recording.no_gpu,
        # checked: set, user:password
        url_credentials_env=http.url_credentials_env if url_credentials(http.url_credentials_env) else None,
        headers=extra_headers(http.extra),  # --header, --header-file, --header-env
        monitor=monitor_config(
            slo_ttft_ms=defaults.SLO_TTFT_MS if slos.ttft_ms is None else float(slos.ttft_ms),
            slos=slos,
            target=float(acc.target),
            alpha=float(acc.alpha),
            min_window_minutes=float(acc.min_window_minutes),
            min_requests=acc.min_requests,
        ),
        # without --requests/--duration every step runs until its verdict is PASS or FAIL (capped);
        # a trace replay runs to the end of the trace
        until_decided=trace is None and load.requests is None and load.duration is None,
        budget=budget_record_from_args(settings.budget),
        workers=_workers_value(settings.processes),
        trace=trace,
        **workload_from_args(load.workload),
    )
    cfg.validate()
    return cfg


def _lengths(given: LengthDist | None, traced: tuple[int, int] | None, default: int) -> tuple[int, int]:
    """--input-tokens / --output-tokens: the bounds of the distribution given, else the trace's range, else the
    default (fixed)."""
    if given is not None:
        return given.bounds
    return traced if traced is not None else (default, default)


def console_monitor_config(rolling: Any, cfg: LoadConfig) -> MonitorConfig:
    """The console's verdict settings for `live`: the run's own (``cfg.monitor``, from the acceptance flags) with
    the rolling window of --rolling-seconds / --rolling-requests (``rolling``: ``tui.cli.console.Rolling``); the
    generator's request ids are unique by construction, so no set of every id is kept."""
    m = cfg.monitor
    return dataclasses.replace(
        m, check_duplicate_ids=False,
        rolling_s=m.rolling_s if rolling.rolling_seconds is None else float(rolling.rolling_seconds),
        rolling_n=m.rolling_n if rolling.rolling_requests is None else int(rolling.rolling_requests))


def _workers_value(p: Processes) -> int | str:
    """--workers as given; not given: 1 (this process), or with --ray auto (one per cluster CPU, at most 64)."""
    if p.workers is not None:
        return p.workers
    return "auto" if p.ray else defaults.LOAD_WORKERS


def budget_record_from_args(b: BudgetFlags) -> dict | None:
    """The budget JSON (``servewatch budget --json``) when budget inputs were given, else None (no budget is
    made up for a run). Raises ConfigError on bad budget input."""
    from tui.cli.budgetflags import budget_from_args, budget_given
    from tui.core.budget import budget_to_dict

    try:
        if not budget_given(b):
            return None
        result = budget_from_args(b)
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


def config_or_usage(settings: LoadSettings) -> LoadConfig:
    """``config_from_args``, with a bad combination raised as UsageError."""
    try:
        cfg = config_from_args(settings)
    except ConfigError as exc:
        raise UsageError(exc) from None
    sign_key(settings.recording.sign_key_env)  # a missing key variable is bad usage before anything runs
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


