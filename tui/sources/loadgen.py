"""The live load generator: streamed OpenAI-style requests against a real server, recorded.

One ``LoadGenerator`` runs one load test: setup (server facts, model, prompt calibration), the
``run`` header, then the steps (warmup, then each level of the ramp, ``rounds`` times) while the
metrics scraper and the GPU sampler run beside it. Every record goes to ``emit(dict)``; the caller
writes it (``tui.sources.recorder``) and/or hands it to a monitor.

Timing (all stamps are epoch seconds derived from ONE ``time.perf_counter`` anchor, so intervals
are monotonic):

- ``t_intended``: when the request was scheduled (open loop: the arrival time; closed loop: when
  a worker became free);
- ``t_sent``: when httpx/httpcore started writing the request headers on the socket (the
  ``http11.send_request_headers.started`` trace event); connection setup is before it;
- ``t_first_token``: the first SSE event carrying non-empty generated text (``delta.content``,
  ``delta.reasoning_content`` or completions ``text``); role-only chunks, comments and usage-only
  chunks are not tokens;
- ``t_end``: ``[DONE]``, end of stream, the failure, or the cancellation (error ``cancelled``).

A fresh connection is used per request (servers such as llama-server close the connection after
every stream although they advertise keep-alive). A failure before any request byte was written
is retried (at most twice) and counted in ``retried``.
"""

from __future__ import annotations

from tui.core.redact import Scrubber, redact_url

import asyncio
import json
import math
import os
import platform
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from time import perf_counter
from typing import Any, Callable
from urllib.parse import urlsplit

import httpx

from tui import __version__
from tui.core.records import parse_object, run_header, source_block
from tui.sources import openai_http as oh
from tui.sources.sse import SSEParser

Emit = Callable[[dict], Any]
Progress = Callable[[str], Any]

SATURATION_LATENESS_MS = 10.0
MAX_RETRIES = 2  # re-sends of a request that failed before any byte was written
_OPTIONAL_FIELDS = ("stream_options", "cache_prompt")  # dropped (and remembered) when a server rejects them
_ERROR_BODY_LIMIT = 4096


CLIENT_BUSY_LIMIT = 0.9  # closed loop: client CPU-seconds per wall second that flag the step as saturated


class ConfigError(ValueError):
    """The load configuration is not usable (bad usage: exit code 2)."""


class SetupError(RuntimeError):
    """The run could not start (server unreachable, no model to use)."""


# ------------------------------------------------------------------ configuration


@dataclass
class LoadConfig:
    url: str
    model: str | None = None
    api: str = "chat"  # "chat" | "completions"
    mode: str = "closed"  # "closed" (levels = concurrency) | "open" (levels = req/s)
    levels: list[float] = field(default_factory=lambda: [1.0])
    arrival: str = "poisson"  # open loop: "poisson" | "constant" | "gamma"
    burstiness: float = 1.0  # gamma: coefficient of variation of inter-arrival gaps
    input_tokens: tuple[int, int] = (128, 128)  # (min, max), uniform
    output_tokens: tuple[int, int] = (64, 64)
    ignore_eos: bool = False
    warmup: int = 0
    requests: int | None = None  # per step
    duration: float | None = None  # seconds per step
    rounds: int = 1
    stop_on_fail: bool = False
    until_decided: bool = False  # end each step as soon as its verdict is PASS or FAIL (capped: step_duration)
    max_step_seconds: float | None = None  # cap of a step run until decided (None: default_step_cap())
    min_requests: int | None = None  # the verdict's minimum count (None: the fewest with which PASS is possible)
    budget: dict | None = None  # budget inputs given for this run: written as a `budget` record after the header
    record: str | None = None
    metrics_url: str | None = None
    metrics_interval: float = 1.0
    metrics: bool = True  # run the Prometheus scraper
    gpu: bool = True  # run the GPU/host sampler
    connect_timeout: float = 10.0
    read_timeout: float = 300.0  # must cover queueing: a queued request gets no bytes at all
    api_key_env: str | None = "OPENAI_API_KEY"
    headers: list[tuple[str, str]] = field(default_factory=list)
    insecure: bool = False
    seed: int = 0
    slo_ttft_ms: float = 1000.0
    target: float = 0.95
    alpha: float = 0.05
    min_window_minutes: float = 10.0
    progress_interval: float = 5.0
    max_in_flight: int = 4096  # open loop: arrivals beyond this wait (and show as lateness)
    token_offsets: bool = False  # also record per-token arrival offsets (costs one float per token)

    def validate(self) -> None:
        if not isinstance(self.url, str) or not self.url.strip():
            raise ConfigError("--url is required")
        p = urlsplit(self.url.strip())
        if p.scheme not in ("http", "https") or not p.hostname:
            raise ConfigError(f"--url must be an http(s) URL, got {redact_url(self.url)!r}")
        if self.api not in ("chat", "completions"):
            raise ConfigError("--api must be chat or completions")
        if self.mode not in ("closed", "open"):
            raise ConfigError("mode must be closed or open")
        if not self.levels:
            raise ConfigError("give at least one level (--concurrency or --rate)")
        for lv in self.levels:
            if not (isinstance(lv, (int, float)) and math.isfinite(lv) and lv > 0):
                raise ConfigError(f"levels must be positive numbers, got {lv!r}")
            if self.mode == "closed" and int(lv) != lv:
                raise ConfigError(f"--concurrency levels must be whole numbers, got {lv!r}")
        if self.arrival not in ("poisson", "constant", "gamma"):
            raise ConfigError("--arrival must be poisson, constant or gamma")
        if not (math.isfinite(self.burstiness) and self.burstiness >= 0):
            raise ConfigError("--burstiness must be >= 0")
        if self.arrival == "gamma" and self.burstiness == 0:
            raise ConfigError("--burstiness 0 means constant arrivals: use --arrival constant")
        for name, (lo, hi) in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if not (1 <= lo <= hi):
                raise ConfigError(f"{name} must be N or MIN-MAX with 1 <= MIN <= MAX")
        if self.warmup < 0 or self.rounds < 1:
            raise ConfigError("--warmup must be >= 0 and --rounds >= 1")
        if self.requests is not None and self.requests < 1:
            raise ConfigError("--requests must be >= 1")
        if self.max_step_seconds is not None and not (math.isfinite(self.max_step_seconds)
                                                       and self.max_step_seconds > 0):
            raise ConfigError("--max-step-seconds must be > 0")
        if self.duration is not None and not self.duration > 0:
            raise ConfigError("--duration must be > 0")
        if not (self.connect_timeout > 0 and self.read_timeout > 0):
            raise ConfigError("timeouts must be > 0")
        if not self.metrics_interval > 0:
            raise ConfigError("--metrics-interval must be > 0")
        if not self.slo_ttft_ms > 0 or not (0 < self.target < 1):
            raise ConfigError("--slo-ttft-ms must be > 0 and --target in (0, 1)")
        for k, _v in self.headers:
            if not k or any(c in k for c in " :\r\n\t"):
                raise ConfigError("--header must look like 'Name: value'")

    @property
    def step_requests(self) -> int | None:
        """Requests per step: the given count; 40 when nothing bounds the step (neither --requests,
        --duration nor until_decided: programmatic use only, the CLI runs steps until decided)."""
        if self.requests is None and self.duration is None and not self.until_decided:
            return 40
        return self.requests

    @property
    def step_duration(self) -> float | None:
        """Seconds per step: --duration, and for a step run until decided at most the step cap."""
        if not self.until_decided:
            return self.duration
        cap = self.max_step_seconds if self.max_step_seconds is not None else default_step_cap(self.min_window_minutes)
        return cap if self.duration is None else min(self.duration, cap)


#: Time allowed beyond the minimum window for a step to reach the minimum count too (default cap = window + this).
COUNT_ALLOWANCE_S = 300.0


def default_step_cap(min_window_minutes: float) -> float:
    """Default cap of a step run until decided: the minimum window plus COUNT_ALLOWANCE_S to reach the minimum
    count (15 min for the default 10-min window). A PASS needs the whole window, so a shorter cap cannot PASS."""
    return max(0.0, float(min_window_minutes)) * 60.0 + COUNT_ALLOWANCE_S


# ------------------------------------------------------------------ URLs and secrets


# (server root, API base ending in /v1, query string); user info removed: the shared HTTP layer's split
split_base_url = oh.split_url


def build_headers(config: LoadConfig, environ: dict | None = None) -> tuple[dict[str, str], list[str]]:
    """(request headers, secret strings to scrub from any text we write): ``openai_http.auth_headers``."""
    env = os.environ if environ is None else environ
    key = env.get(config.api_key_env) if config.api_key_env else None
    return oh.auth_headers(config.url, key, config.headers)


def redacted_header_names(config: LoadConfig, environ: dict | None = None) -> dict[str, str]:
    headers, _ = build_headers(config, environ)
    return {k: "<redacted>" for k in headers}


# ------------------------------------------------------------------ clock


class Clock:
    """Epoch seconds from one perf_counter anchor: monotonic intervals, wall-clock meaning."""

    __slots__ = ("perf0", "epoch0")

    def __init__(self) -> None:
        self.epoch0 = time.time()
        self.perf0 = perf_counter()

    def epoch(self, perf: float) -> float:
        return self.epoch0 + (perf - self.perf0)

    def now(self) -> float:
        return self.epoch0 + (perf_counter() - self.perf0)


# ------------------------------------------------------------------ arrivals and lengths


def gap_sampler(arrival: str, rate: float, burstiness: float, rng: random.Random) -> Callable[[], float]:
    """Inter-arrival gaps (seconds) with mean 1/rate.

    - constant: exactly 1/rate;
    - poisson: exponential gaps (coefficient of variation 1);
    - gamma: gamma gaps with coefficient of variation = ``burstiness``: shape k = 1/burstiness**2,
      scale = 1/(rate*k). burstiness 1 is Poisson, > 1 burstier (clumps and long pauses),
      < 1 more regular. (Note: vLLM's benchmark uses the inverse convention, shape = burstiness.)
    """
    mean = 1.0 / rate
    if arrival == "constant":
        return lambda: mean
    if arrival == "poisson":
        return lambda: rng.expovariate(rate)
    k = 1.0 / (burstiness * burstiness)
    theta = mean / k
    return lambda: rng.gammavariate(k, theta)


def arrival_offsets(arrival: str, rate: float, burstiness: float, seed: Any, n: int) -> list[float]:
    """The first ``n`` arrival offsets (seconds from step start; the first arrival is at 0)."""
    rng = random.Random(str(seed))
    gap = gap_sampler(arrival, rate, burstiness, rng)
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        t += gap()
    return out


# ------------------------------------------------------------------ prompts

_WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education"
).split()


class PromptBuilder:
    """Prompts of a requested token length, unique from their first token on.

    With the server's ``/tokenize`` (POST {"content": text} -> {"tokens": [...]}) the builder
    measures tokens per filler word and the cost of the unique prefix once, then checks one built
    prompt; without it, it estimates ~4 characters per token. The lengths are of the prompt text;
    a chat template adds its own tokens (about 20-25 for small chat models): the server's reported
    usage is recorded per request.
    """

    CHARS_PER_TOKEN = 4.0

    def __init__(self) -> None:
        self.method = "estimate"
        self.tokens_per_word = 1.0
        self.prefix_tokens = 8.0
        self.check: dict | None = None
        self.note = ""
        self._filler = ""
        self._ends: list[int] = [0]  # char offset after k words
        self._grow(512)

    def _grow(self, words: int) -> None:
        if len(self._ends) - 1 >= words:
            return
        parts = [self._filler] if self._filler else []
        i = len(self._ends) - 1
        n = len(_WORDS)
        pos = len(self._filler)
        while i < words:
            w = _WORDS[(i * 7 + i // n) % n]  # a fixed, non-repeating-looking order
            piece = w if pos == 0 else " " + w
            parts.append(piece)
            pos += len(piece)
            self._ends.append(pos)
            i += 1
        self._filler = "".join(parts)

    def words_for(self, tokens: int) -> int:
        if self.method == "tokenize":
            return max(0, int(round((tokens - self.prefix_tokens) / self.tokens_per_word)))
        avg = self._ends[-1] / max(1, len(self._ends) - 1)  # chars per word incl. the space
        return max(0, int(round((tokens * self.CHARS_PER_TOKEN - self.prefix_chars) / avg)))

    prefix_chars = 24  # "[xxxxxxxx-000001] Repeat: " is about this long

    def build(self, prefix: str, tokens: int) -> str:
        k = self.words_for(tokens)
        self._grow(k)
        return prefix + self._filler[: self._ends[k]]

    async def calibrate(self, client: httpx.AsyncClient, root: str, sample_prefix: str, sizes: list[int],
                        timeout: float = 10.0) -> None:
        """Try the server's /tokenize; keep the estimate when it is missing or odd."""

        async def count(text: str) -> int | None:
            try:
                r = await client.post(root + "/tokenize", json={"content": text}, timeout=timeout)
            except (httpx.HTTPError, OSError):
                return None
            if r.status_code != 200:
                return None
            try:
                toks = r.json().get("tokens")
            except (ValueError, AttributeError):
                return None
            return len(toks) if isinstance(toks, list) else None

        w = 256
        self._grow(w)
        n_fill = await count(self._filler[: self._ends[w]])
        n_pre = await count(sample_prefix) if n_fill is not None else None
        if not n_fill or n_pre is None:
            self.note = "server has no usable /tokenize: prompt lengths estimated at ~4 chars/token"
            return
        self.method = "tokenize"
        self.tokens_per_word = n_fill / w
        self.prefix_tokens = float(n_pre)
        target = max(sizes)
        got = await count(self.build(sample_prefix, target))
        self.check = {"asked": target, "got": got}
        self.note = f"prompt lengths from the server's /tokenize (check: asked {target}, got {got} tokens)"

    def describe(self) -> dict:
        d: dict = {"method": self.method}
        if self.method == "tokenize":
            d.update(tokens_per_word=round(self.tokens_per_word, 4), prefix_tokens=self.prefix_tokens,
                     check=self.check, note="lengths count the prompt text; the chat template adds its own tokens")
        else:
            d["chars_per_token"] = self.CHARS_PER_TOKEN
        return d


# ------------------------------------------------------------------ per-request state


class _Req:
    __slots__ = (
        "id", "phase", "level", "round", "step", "in_asked", "out_asked", "prompt",
        "t_intended", "t_dispatch", "t_sent", "t_headers", "t_first", "t_end", "status", "error", "detail",
        "finish", "in_tok", "out_tok", "n_content", "retried", "done", "wrote", "offsets", "usage_server",
    )

    def __init__(self, rid: str, phase: str, level: float, rnd: int, step: "_Step", in_asked: int,
                 out_asked: int, prompt: str, t_intended: float) -> None:
        self.id = rid
        self.phase = phase
        self.level = level
        self.round = rnd
        self.step = step
        self.in_asked = in_asked
        self.out_asked = out_asked
        self.prompt = prompt
        self.t_intended = t_intended  # perf_counter
        self.t_dispatch = t_intended
        self.t_sent: float | None = None
        self.t_headers: float | None = None
        self.t_first: float | None = None
        self.t_end: float | None = None
        self.status: int | None = None
        self.error: str | None = None
        self.detail: str | None = None
        self.finish: str | None = None
        self.in_tok: int | None = None
        self.out_tok: int | None = None
        self.n_content = 0
        self.retried = 0
        self.done = False
        self.wrote = False
        self.offsets: list[float] | None = None
        self.usage_server = False


class _Step:
    __slots__ = ("level", "round", "phase", "mode", "sent", "finished", "complete", "errors", "lateness",
                 "ttfts", "out_tokens", "t0", "t1", "cpu0", "pcpu0")

    def __init__(self, level: float, rnd: int, phase: str, mode: str) -> None:
        self.level = level
        self.round = rnd
        self.phase = phase
        self.mode = mode
        self.sent = 0
        self.finished = 0
        self.complete = 0
        self.errors: Counter = Counter()
        self.lateness: list[float] = []
        self.ttfts: list[float] = []
        self.out_tokens = 0
        self.t0 = perf_counter()
        self.t1: float | None = None
        self.cpu0 = time.thread_time()
        self.pcpu0 = time.process_time()


def _pct(sorted_vals: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(q * len(sorted_vals)))
    return sorted_vals[min(k, len(sorted_vals)) - 1]


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass
class RunSummary:
    record: str | None = None
    requests: int = 0
    steps: list[dict] = field(default_factory=list)
    stopped_early: str | None = None
    cancelled: bool = False
    header: dict = field(default_factory=dict)


# ------------------------------------------------------------------ the generator


class LoadGenerator:
    """Runs one load test. ``await run()``; cancel the task to stop (in-flight requests are then
    recorded as ``cancelled`` before the cancellation propagates)."""

    def __init__(self, config: LoadConfig, emit: Emit, progress: Progress | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, environ: dict | None = None) -> None:
        config.validate()
        self.cfg = config
        self._emit_raw = emit
        self._progress = progress
        self._transport = transport
        self.clock = Clock()
        self.root, self.api_base, self._query = split_base_url(config.url)
        self.label = redact_url(config.url)
        self.headers, secrets = build_headers(config, environ)
        self.scrub = Scrubber(secrets)
        self.header_names = {k: "<redacted>" for k in self.headers}
        self.model: str | None = config.model
        self.prompts = PromptBuilder()
        self.run_id = os.urandom(4).hex()
        self.in_flight = 0
        self.sent_total = 0
        self.summary = RunSummary(record=config.record)
        self._seq = 0
        self._dropped: set[str] = set()
        self._len_rng = random.Random(f"{config.seed}:lengths")
        self._monitor = None
        self._step: _Step | None = None
        self._client: httpx.AsyncClient | None = None
        self._chat = config.api == "chat"
        self._endpoint = self.api_base + ("/chat/completions" if self._chat else "/completions")
        self.server: dict = {}
        self.server_capacity: dict | None = None  # what the server says it allocated (tui.sources.server_info)
        self.status_line = ""

    # -- output ------------------------------------------------------------

    def emit(self, d: dict) -> None:
        self._emit_raw(d)
        mon = self._monitor
        if mon is not None:
            try:
                mon.add(parse_object(d))
            except Exception:
                pass

    def say(self, line: str) -> None:
        self.status_line = line
        if self._progress is not None:
            try:
                self._progress(line)
            except Exception:
                pass

    # -- setup -------------------------------------------------------------

    def _verify(self) -> Any:
        """TLS verification: off only with --insecure; honours SSL_CERT_FILE / SSL_CERT_DIR
        (the client ignores other environment settings such as proxies, on purpose)."""
        return oh.tls_verify(self.cfg.insecure)

    def _make_client(self) -> httpx.AsyncClient:
        c = self.cfg
        return oh.make_client(headers=self.headers, connect_timeout=c.connect_timeout, read_timeout=c.read_timeout,
                              insecure=c.insecure, transport=self._transport)

    async def _setup(self) -> None:
        from tui.sources.metrics import server_info

        client = self._client
        assert client is not None
        # reachability first: a clear message instead of a run full of connect errors
        try:
            await client.get(self.api_base + "/models", timeout=min(10.0, self.cfg.connect_timeout + 5.0))
        except httpx.ConnectTimeout:
            raise SetupError(f"cannot reach {self.label}: connect timed out") from None
        except httpx.ConnectError as exc:
            raise SetupError(f"cannot reach {self.label}: {self.scrub(exc)}") from None
        except httpx.HTTPError:
            pass  # reachable; the answer does not matter here
        try:
            self.server = await server_info(self.root, headers=self.headers, client=client)
        except Exception:
            self.server = {}
        if not self.model:
            models = self.server.get("models") or []
            if not models:
                raise SetupError(f"{self.label}/v1/models lists no model (or needs a key, see --api-key-env): "
                                 "pass --model NAME")
            self.model = models[0]
        self._make_monitor()  # judges steps (until decided, --stop-on-fail) and feeds the progress line
        from tui.sources.server_info import server_capacity

        try:
            self.server_capacity = await server_capacity(self.root, self.server, client=client, headers=self.headers,
                                                         metrics_url=self.cfg.metrics_url)
        except Exception:
            self.server_capacity = None
        sizes = [self.cfg.input_tokens[1]]
        await self.prompts.calibrate(client, self.root, self._prefix("00000000-000000"), sizes)

    def _make_monitor(self) -> None:
        try:
            from tui.core.monitor import Monitor, MonitorConfig
        except ImportError:
            self.say("note: core monitor unavailable: --stop-on-fail cannot judge steps")
            return
        c = self.cfg
        self._monitor = Monitor(MonitorConfig(slo_ttft_ms=c.slo_ttft_ms, target=c.target, alpha=c.alpha,
                                              min_window_s=c.min_window_minutes * 60.0, min_requests=c.min_requests),
                                source=self.label)

    def environment(self, gpu_env: dict | None) -> dict:
        return {
            "python": platform.python_version(),
            "os": platform.platform(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "httpx": httpx.__version__,
            "servewatch": __version__,
            "server": self.server,
            "gpu": gpu_env if gpu_env is not None else {"gpu": "not sampled (--no-gpu)"},
        }

    def header(self, gpu_env: dict | None) -> dict:
        c = self.cfg
        return run_header(
            target={"url": self.label, "model": self.model, "api": c.api, "endpoint": redact_url(self._endpoint)},
            load={
                "mode": c.mode,
                "levels": list(c.levels),
                "level_unit": "concurrency" if c.mode == "closed" else "req/s",
                "arrival": c.arrival if c.mode == "open" else None,
                "burstiness": c.burstiness if c.mode == "open" and c.arrival == "gamma" else None,
                "input_tokens": {"min": c.input_tokens[0], "max": c.input_tokens[1]},
                "output_tokens": {"min": c.output_tokens[0], "max": c.output_tokens[1]},
                "ignore_eos": c.ignore_eos,
                "warmup": c.warmup,
                "requests": c.step_requests,
                "duration": c.step_duration,
                "until_decided": c.until_decided,
                "rounds": c.rounds,
                "stop_on_fail": c.stop_on_fail,
                "seed": c.seed,
                "prompt_builder": self.prompts.describe(),
                "connect_timeout": c.connect_timeout,
                "read_timeout": c.read_timeout,
                "connection": "new connection per request",
                "client_pid": os.getpid(),
            },
            environment=self.environment(gpu_env),
            synthetic=False,
            started_at=self.clock.now(),
            insecure=bool(c.insecure),
            headers=dict(self.header_names),
            slo={"ttft_ms": c.slo_ttft_ms, "target": c.target},
            run_id=self.run_id,
            source=source_block("run"),
            server_capacity=self.server_capacity,
        )

    # -- requests ----------------------------------------------------------

    def _prefix(self, rid: str) -> str:
        return f"[{rid}] Repeat these words: "

    def _new_req(self, phase: str, level: float, rnd: int, step: _Step, t_intended: float) -> _Req:
        self._seq += 1
        rid = f"{self.run_id}-{self._seq:06d}"
        lo, hi = self.cfg.input_tokens
        n_in = lo if lo == hi else self._len_rng.randint(lo, hi)
        lo, hi = self.cfg.output_tokens
        n_out = lo if lo == hi else self._len_rng.randint(lo, hi)
        prompt = self.prompts.build(self._prefix(rid), n_in)
        return _Req(rid, phase, level, rnd, step, n_in, n_out, prompt, t_intended)

    def _body(self, req: _Req) -> bytes:
        c = self.cfg
        body: dict[str, Any] = {}
        if self.model:
            body["model"] = self.model
        if self._chat:
            body["messages"] = [{"role": "user", "content": req.prompt}]
        else:
            body["prompt"] = req.prompt
        body["max_tokens"] = req.out_asked
        body["stream"] = True
        if "stream_options" not in self._dropped:
            body["stream_options"] = {"include_usage": True}
        if "cache_prompt" not in self._dropped:
            body["cache_prompt"] = False
        if c.ignore_eos:
            body["ignore_eos"] = True
        return json.dumps(body, separators=(",", ":")).encode()

    async def _send_one(self, req: _Req) -> None:
        """Run one request to its end, recording it exactly once (also when cancelled)."""
        self.in_flight += 1
        self.sent_total += 1
        req.step.sent += 1
        try:
            await self._attempts(req)
        except asyncio.CancelledError:
            if req.error is None and req.t_end is None:  # (t_end set: it had completed already)
                # t_end = when the cancellation reached the request: with t_sent and t_first_token it tells
                # whether the outcome was still open then (tui.core.records.outcome_rule)
                req.t_end = perf_counter()
                req.error = "cancelled"
                req.detail = "stopped by the user" if req.t_sent is not None else "stopped before the request was sent"
            raise
        except Exception as exc:  # a bug here must not lose the request
            if req.error is None:
                req.error = "other"
                req.detail = self.scrub(f"{type(exc).__name__}: {exc}")
        finally:
            self.in_flight -= 1
            self._finish(req)

    async def _attempts(self, req: _Req) -> None:
        client = self._client
        assert client is not None
        pc = perf_counter
        ext_params = {"params": self._query} if self._query else {}
        while True:
            req.t_dispatch = pc()
            req.t_sent = None
            req.t_headers = None
            req.wrote = False

            async def trace(name: str, info: dict, _r: _Req = req) -> None:
                if name == "http11.send_request_headers.started":
                    _r.t_sent = pc()
                elif name == "http11.send_request_headers.complete":
                    _r.wrote = True  # the request is on the wire: from here on never re-send
                elif name == "http11.receive_response_headers.complete":
                    _r.t_headers = pc()

            request = client.build_request(
                "POST", self._endpoint, content=self._body(req),
                headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                         "Accept-Encoding": "identity"},
                extensions={"trace": trace}, **ext_params,
            )
            try:
                resp = await client.send(request, stream=True)
            except httpx.ConnectTimeout:
                return self._fail(req, "connect_timeout", "connect timed out")
            except httpx.ConnectError as exc:
                return self._fail(req, "connect", self._exc_detail(exc))
            except httpx.ReadTimeout:
                return self._fail(req, "read_timeout", f"no response within {self.cfg.read_timeout:g} s")
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if not req.wrote and req.retried < MAX_RETRIES:
                    req.retried += 1
                    continue
                return self._fail(req, "stream_reset", "connection dropped before the response: " + self._exc_detail(exc))
            except httpx.HTTPError as exc:
                return self._fail(req, "other", self._exc_detail(exc))
            if req.t_sent is None:  # transport without trace events: best available stamp
                req.t_sent = req.t_dispatch
            try:
                req.status = resp.status_code
                if resp.status_code >= 300 or resp.status_code < 200:
                    if await self._http_error(req, resp):
                        req.retried += 1
                        continue  # retry without a field the server rejected
                    return None
                await self._stream(req, resp)
                return None
            finally:
                await resp.aclose()

    def _exc_detail(self, exc: BaseException) -> str:
        msg = str(exc) or type(exc).__name__
        return self.scrub(msg)

    def _fail(self, req: _Req, error: str, detail: str) -> None:
        req.error = error
        req.detail = self.scrub(detail)
        if req.t_sent is None:
            req.t_sent = req.t_dispatch
        return None

    async def _http_error(self, req: _Req, resp: httpx.Response) -> bool:
        """Classify a non-2xx answer. True when the request should be re-sent without an optional field."""
        body = b""
        try:
            async for chunk in resp.aiter_raw():
                body += chunk
                if len(body) >= _ERROR_BODY_LIMIT:
                    break
        except httpx.HTTPError:
            pass
        text = body[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
        code = resp.status_code
        msg = oh.error_message(text)
        if code == 400:
            # judged on the error message, not the whole body (some servers echo the request back)
            for fld in oh.rejected_fields(msg, _OPTIONAL_FIELDS, self._dropped)[:1]:
                self._dropped.add(fld)
                self.say(f"note: server rejected {fld}; sending requests without it from now on")
                return True
        cls = oh.status_class(code)
        self._fail(req, cls, f"HTTP {code}: {msg}" if msg else f"HTTP {code}")
        return False

    async def _stream(self, req: _Req, resp: httpx.Response) -> None:
        pc = perf_counter
        ctype = resp.headers.get("content-type", "")
        if "json" in ctype and "event-stream" not in ctype:
            return self._fail(req, "malformed_stream", f"server answered {ctype.split(';')[0]}, not an event stream")
        parser = SSEParser()
        feed = parser.feed
        loads = json.loads
        chat = self._chat
        offsets = [] if self.cfg.token_offsets else None
        done = False
        finish = None
        n = 0
        t_first = None
        it = resp.aiter_raw()
        try:
            eof = False
            while not done:
                try:
                    chunk = await it.__anext__()
                except StopAsyncIteration:
                    eof = True
                    events = parser.finish()
                else:
                    events = feed(chunk)
                for ev in events:
                    data = ev.data
                    if data == "[DONE]":
                        done = True
                        break
                    try:
                        obj = loads(data)
                    except ValueError:
                        if ev.event == "error":
                            return self._fail(req, "stream_error", f"error event in stream: {data}")
                        return self._fail(req, "malformed_stream", f"invalid JSON in data line: {data[:60]}")
                    if type(obj) is not dict:
                        return self._fail(req, "malformed_stream", f"data line is not a JSON object: {data[:60]}")
                    err = obj.get("error")
                    if err is not None or ev.event == "error":
                        if isinstance(err, dict):
                            err = err.get("message") or err
                        return self._fail(req, "stream_error", f"error in stream: {err if err is not None else data}")
                    choices = obj.get("choices")
                    if choices:
                        c0 = choices[0]
                        if chat:
                            delta = c0.get("delta")
                            text = (delta.get("content") or delta.get("reasoning_content")) if delta else None
                        else:
                            text = c0.get("text")
                        if text:
                            n += 1
                            if t_first is None:
                                t_first = pc()
                                req.t_first = t_first
                            if offsets is not None:
                                offsets.append(pc())
                        fr = c0.get("finish_reason")
                        if fr:
                            finish = fr
                    usage = obj.get("usage")
                    if usage:
                        req.in_tok = _int_or_none(usage.get("prompt_tokens"))
                        req.out_tok = _int_or_none(usage.get("completion_tokens"))
                        req.usage_server = True
                if eof:
                    break
        except httpx.ReadTimeout:
            return self._fail(req, "read_timeout", f"no data for {self.cfg.read_timeout:g} s mid-stream")
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            return self._fail(req, "stream_reset", "connection dropped mid-stream: " + self._exc_detail(exc))
        finally:
            req.n_content = n
            req.finish = finish
            if offsets is not None:
                req.offsets = offsets
            await it.aclose()
        req.t_end = pc()
        if n == 0:
            what = "[DONE]" if done else "end of stream"
            fr = f", finish_reason {finish}" if finish else ""
            return self._fail(req, "empty_response", f"{what} with no generated text{fr}")
        if finish in ("stop", "length"):
            return None  # complete
        if finish is None:
            if done:
                return self._fail(req, "malformed_stream", "[DONE] without a finish_reason")
            return self._fail(req, "stream_reset", "stream ended before a finish_reason")
        return self._fail(req, "stream_error", f"finish_reason {finish}")

    def _finish(self, req: _Req) -> None:
        if req.done:
            return
        req.done = True
        if req.t_end is None:
            req.t_end = perf_counter()
        if req.t_sent is None:
            req.t_sent = req.t_dispatch
        t_end = max(req.t_end, req.t_sent)
        t_first = req.t_first
        if t_first is not None and not (req.t_sent <= t_first <= t_end):
            t_first = None
        ep = self.clock.epoch
        complete = req.error is None
        out_tok = req.out_tok
        counted = False
        if (out_tok is None or not req.usage_server) and req.n_content:
            out_tok = req.n_content
            counted = True
        d = {
            "type": "request",
            "id": req.id,
            "t_intended": ep(req.t_intended),
            "t_sent": ep(req.t_sent),
            "t_first_token": ep(t_first) if t_first is not None else None,
            "t_end": ep(t_end),
            "input_tokens": req.in_tok,
            "output_tokens": out_tok,
            "finish_reason": req.finish,
            "http_status": req.status,
            "complete": complete,
            "error": req.error,
            "error_detail": req.detail,
            "phase": req.phase,
            "level": req.level,
            "round": req.round,
            "input_tokens_asked": req.in_asked,
            "output_tokens_asked": req.out_asked,
        }
        if req.t_headers is not None and req.t_sent <= req.t_headers <= t_end:
            d["t_headers"] = ep(req.t_headers)  # response headers received (queueing shows here, not as TTFT)
        if req.retried:
            d["retried"] = req.retried
        if counted:
            d["usage"] = "counted"  # the server reported no usage: content events were counted
        if req.offsets is not None and t_first is not None:
            d["token_offsets"] = [round(x - t_first, 6) for x in req.offsets]
        st = req.step
        st.finished += 1
        st.lateness.append(req.t_sent - req.t_intended)
        if complete:
            st.complete += 1
            st.ttfts.append(t_first - req.t_sent if t_first is not None else math.inf)
            st.out_tokens += out_tok or 0
        else:
            st.errors[req.error] += 1
        req.prompt = ""
        self.emit(d)

    async def request_once(self, level: float = 1.0, phase: str = "measure") -> dict:
        """Send one request outside any step (no setup, no header) and return its record.

        For smoke checks and tests; the record also goes to ``emit``.
        """
        out: list[dict] = []
        emit = self._emit_raw
        self._emit_raw = lambda d: (out.append(d), emit(d))
        own = self._client is None
        if own:
            self._client = self._make_client()
        try:
            step = _Step(level, 1, phase, "closed")
            await self._send_one(self._new_req(phase, level, 1, step, perf_counter()))
        finally:
            self._emit_raw = emit
            if own:
                await self._client.aclose()
                self._client = None
        return out[-1]

    # -- steps -------------------------------------------------------------

    def _decided(self, step: _Step) -> bool:
        """Sweep mode: the step's verdict (core Monitor, anytime-valid) is already PASS or FAIL."""
        mon = self._monitor
        if not self.cfg.until_decided or mon is None or step.phase != "measure":
            return False
        st = mon.levels.get((float(step.level), step.round))
        return st is not None and mon.verdict_for(st).state in ("PASS", "FAIL")

    async def _closed_step(self, step: _Step, concurrency: int, n_requests: int | None, duration: float | None) -> None:
        end_at = step.t0 + duration if duration else None
        issued = 0

        async def worker() -> None:
            nonlocal issued
            while True:
                if n_requests is not None and issued >= n_requests:
                    return
                now = perf_counter()
                if end_at is not None and now >= end_at:
                    return
                if self._decided(step):
                    return
                issued += 1
                await self._send_one(self._new_req(step.phase, step.level, step.round, step, now))

        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker())

    async def _open_step(self, step: _Step, rate: float, n_requests: int | None, duration: float | None) -> None:
        c = self.cfg
        rng = random.Random(f"{c.seed}:arrivals:{rate}:{step.round}")
        gap = gap_sampler(c.arrival, rate, c.burstiness, rng)
        sem = asyncio.Semaphore(c.max_in_flight)
        offset = 0.0
        i = 0

        async def one(req: _Req) -> None:
            try:
                await self._send_one(req)
            finally:
                sem.release()

        async with asyncio.TaskGroup() as tg:
            while True:
                if n_requests is not None and i >= n_requests:
                    break
                if duration is not None and offset >= duration:
                    break
                if self._decided(step):
                    break
                t_int = step.t0 + offset
                delay = t_int - perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await sem.acquire()
                tg.create_task(one(self._new_req(step.phase, step.level, step.round, step, t_int)))
                i += 1
                offset += gap()

    async def _run_step(self, level: float, rnd: int, phase: str, n_requests: int | None,
                        duration: float | None, mode: str, label: str, concurrency: int | None = None) -> dict:
        step = _Step(level, rnd, phase, mode)
        self._step = step
        c = self.cfg
        start = {"type": "step", "t": self.clock.now(), "event": "start", "level": level, "round": rnd,
                 "mode": mode, "phase": phase, "requests": n_requests, "duration": duration}
        if mode == "open":
            start.update(arrival=c.arrival, rate=level)
        if phase == "measure":
            self.emit(start)
        self.say(label)
        try:
            if mode == "closed":
                await self._closed_step(step, concurrency or int(level), n_requests, duration)
            else:
                await self._open_step(step, float(level), n_requests, duration)
        finally:
            step.t1 = perf_counter()
            end = self._step_end(step)
            if phase == "measure":
                self.emit(end)
                self.summary.steps.append(end)
            self._step = None
        self.say("  " + self.describe_step(end))
        if end.get("saturated"):
            self.say(f"note: {step.mode} loop {step.level:g} req/s round {step.round}: {end['note']}")
        return end

    def _step_end(self, step: _Step) -> dict:
        t1 = step.t1 or perf_counter()
        secs = max(1e-9, t1 - step.t0)
        late = sorted(step.lateness)
        ttfts = sorted(step.ttfts)
        p99 = _pct(late, 0.99)
        p50 = _pct(ttfts, 0.5)
        # open loop: lateness = t_sent - t_intended (the schedule); closed loop: the same
        # difference is the client's own send overhead (connection setup included)
        lk = "lateness" if step.mode == "open" else "send_overhead"
        d: dict[str, Any] = {
            "type": "step", "t": self.clock.epoch(t1), "event": "end", "level": step.level, "round": step.round,
            "mode": step.mode, "phase": step.phase,
            "requests": step.finished, "completed": step.complete, "failed": step.finished - step.complete,
            "errors": dict(step.errors),
            "duration_s": round(secs, 3),
            "ttft_p50_ms": None if p50 is None or math.isinf(p50) else round(p50 * 1e3, 2),
            "output_tok_per_s": round(step.out_tokens / secs, 2),
            lk + "_p50_ms": None if p99 is None else round(_pct(late, 0.5) * 1e3, 3),  # type: ignore[operator]
            lk + "_p99_ms": None if p99 is None else round(p99 * 1e3, 3),
            "client_cpu_s": round(time.thread_time() - step.cpu0, 4),
            "process_cpu_s": round(time.process_time() - step.pcpu0, 4),
        }
        if step.mode == "open":
            sat = p99 is not None and p99 * 1e3 > SATURATION_LATENESS_MS
            d["saturated"] = sat
            if sat:
                d["note"] = (f"client saturated, results not valid: dispatch lateness p99 {p99 * 1e3:.1f} ms "
                             f"> {SATURATION_LATENESS_MS:g} ms (requests reached the wire later than scheduled)")
        else:
            # closed loop: no schedule to miss, but a CPU-bound client delays reading tokens (TTFT grows)
            busy = d["process_cpu_s"] / secs
            if secs >= 1.0 and busy >= CLIENT_BUSY_LIMIT:
                d["saturated"] = True
                d["note"] = (f"client saturated, results not valid: the load generator used {busy:.2f} CPU-seconds "
                             f"per second (>= {CLIENT_BUSY_LIMIT:g}); its own delays are inside the measured TTFT")
        if self._monitor is not None and step.phase == "measure":
            try:
                v = self._monitor.verdict_for(self._monitor.levels.get((float(step.level), step.round)))
                d["verdict"] = v.state
                d["verdict_reason"] = v.reason
            except Exception:
                pass
        return d

    def describe_step(self, end: dict) -> str:
        parts = [f"{end['requests']} requests, {end['completed']} complete, {end['failed']} failed"]
        if end.get("errors"):
            parts.append("errors " + ", ".join(f"{k} {v}" for k, v in sorted(end["errors"].items())))
        if end.get("ttft_p50_ms") is not None:
            parts.append(f"TTFT p50 {end['ttft_p50_ms']:.0f} ms")
        parts.append(f"{end['output_tok_per_s']:.1f} output tok/s")
        if end.get("lateness_p99_ms") is not None:
            parts.append(f"dispatch lateness p99 {end['lateness_p99_ms']:.1f} ms")
        elif end.get("send_overhead_p99_ms") is not None:
            parts.append(f"send overhead p99 {end['send_overhead_p99_ms']:.1f} ms")
        parts.append(f"client CPU {end['client_cpu_s']:.2f} s")
        line = ", ".join(parts)
        if end.get("verdict"):
            line += f"; verdict {end['verdict']}"
        if end.get("saturated"):
            line += "  [CLIENT SATURATED: results not valid]"
        return line

    async def _ticker(self) -> None:
        t0 = perf_counter()
        while True:
            await asyncio.sleep(self.cfg.progress_interval)
            st = self._step
            if st is None:
                continue
            unit = "concurrency" if st.mode == "closed" else "req/s"
            head = f"  [{perf_counter() - t0:7.1f} s] {unit} {st.level:g} round {st.round}: "
            mon = self._monitor
            if mon is not None and st.phase == "measure":
                from tui.core.progress import evidence_line

                v = mon.verdict_for(mon.levels.get((float(st.level), st.round)))
                self.say(head + evidence_line(v, mon.cfg.min_window_s)
                         + f"; {self.in_flight} in flight")
                continue
            self.say(head + f"{st.sent} sent, {st.finished} done ({st.finished - st.complete} failed), "
                     f"{self.in_flight} in flight")

    # -- the run -----------------------------------------------------------

    async def run(self, gpu_sampler: Any = None) -> RunSummary:
        c = self.cfg
        _raise_fd_limit()
        self._client = self._make_client()
        aux: list[asyncio.Task] = []
        stop_aux = asyncio.Event()
        ticker: asyncio.Task | None = None
        try:
            await self._setup()
            gpu_env = None
            if gpu_sampler is not None:
                try:
                    gpu_env = gpu_sampler.environment()
                except Exception as exc:
                    gpu_env = {"gpu": "none", "reason": type(exc).__name__}
            hdr = self.header(gpu_env)
            self.summary.header = hdr
            self.emit(hdr)
            if c.budget:
                self.emit({"type": "budget", **c.budget})  # the budget inputs given for this run
            self.say(f"target {self.label}, model {self.model}, api {c.api}")
            self.say(f"note: {self.prompts.note}")
            if self.server_capacity is not None:
                from tui.sources.server_info import describe_capacity

                self.say("server: " + describe_capacity(self.server_capacity))
            if c.metrics:
                from tui.sources.metrics import MetricsScraper

                scraper = MetricsScraper(self.root, metrics_url=c.metrics_url, interval=c.metrics_interval,
                                         headers=self.headers, in_flight=lambda: self.in_flight,
                                         client=self._client)  # same TLS settings (--insecure) as the load
                aux.append(asyncio.create_task(scraper.run(self.emit, stop_aux)))
            if gpu_sampler is not None:
                aux.append(asyncio.create_task(gpu_sampler.run(self.emit, stop_aux, c.metrics_interval)))
            if c.progress_interval and c.progress_interval > 0:
                ticker = asyncio.create_task(self._ticker())
            await self._ramp()
        except asyncio.CancelledError:
            self.summary.cancelled = True
            raise
        finally:
            if ticker is not None:
                ticker.cancel()
            stop_aux.set()
            if aux:
                done, pending = await asyncio.wait(aux, timeout=5.0)
                for t in pending:
                    t.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=2.0)
            await self._client.aclose()
            self.summary.requests = self.sent_total
        return self.summary

    async def _ramp(self) -> None:
        c = self.cfg
        unit = "concurrency" if c.mode == "closed" else "req/s"
        if c.warmup:
            lvl = c.levels[0]
            conc = max(1, min(c.warmup, int(lvl))) if c.mode == "closed" else 1
            await self._run_step(lvl, 1, "warmup", c.warmup, None, "closed",
                                 f"warmup: {c.warmup} requests at concurrency {conc}", concurrency=conc)
        total = len(c.levels) * c.rounds
        k = 0
        for rnd in range(1, c.rounds + 1):
            for lvl in c.levels:
                k += 1
                limits = []
                if c.step_requests is not None:
                    limits.append(f"{c.step_requests} requests")
                if c.until_decided:
                    limits.append("until PASS or FAIL")
                if c.step_duration is not None:
                    limits.append(f"{c.step_duration:g} s")
                end = await self._run_step(lvl, rnd, "measure", c.step_requests, c.step_duration, c.mode,
                                           f"step {k}/{total}: {unit} {lvl:g}, round {rnd} ({' or '.join(limits)})")
                if c.until_decided and end.get("verdict") not in (None, "PASS", "FAIL"):
                    self.say(f"note: {unit} {lvl:g} round {rnd} ended {end['verdict']}, undecided at its limit: "
                             f"{end.get('verdict_reason', '')} (a longer --max-step-seconds gives it more time)")
                if c.stop_on_fail and end.get("verdict") == "FAIL":
                    self.summary.stopped_early = f"{unit} {lvl:g} round {rnd} FAILED: run stopped (--stop-on-fail)"
                    self.say("note: " + self.summary.stopped_early)
                    return


def _raise_fd_limit() -> None:
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        want = min(want, 65536)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass


# ------------------------------------------------------------------ one-call entry point


def make_gpu_sampler(config: LoadConfig) -> Any:
    """A GpuSampler, or None when disabled (--no-gpu) or unavailable without host data either."""
    if not config.gpu:
        return None
    try:
        from tui.sources.gpu import GpuSampler

        return GpuSampler()
    except Exception:
        return None


async def run_load(config: LoadConfig, emit: Emit, progress: Progress | None = None,
                   on_generator: Callable[[LoadGenerator], Any] | None = None,
                   transport: httpx.AsyncBaseTransport | None = None) -> RunSummary:
    """Set up, run and tear down one load test; every record goes to ``emit``."""
    gen = LoadGenerator(config, emit, progress, transport=transport)
    if on_generator is not None:
        on_generator(gen)
    sampler = make_gpu_sampler(config)
    try:
        return await gen.run(gpu_sampler=sampler)
    finally:
        if sampler is not None:
            try:
                sampler.close()
            except Exception:
                pass


def config_dict(config: LoadConfig) -> dict:
    """The configuration without secrets (header values redacted)."""
    d = asdict(config)
    d["url"] = redact_url(config.url)
    d["headers"] = {k: "<redacted>" for k, _ in config.headers}
    return d


__all__ = [
    "ConfigError", "SetupError", "LoadConfig", "LoadGenerator", "RunSummary", "PromptBuilder", "Clock",
    "run_load", "redact_url", "split_base_url", "build_headers", "gap_sampler", "arrival_offsets",
    "config_dict", "SATURATION_LATENESS_MS", "make_gpu_sampler",
]
