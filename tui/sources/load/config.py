"""The load configuration: what one ``run``/``live``/``sweep`` load test does.

``LoadConfig`` holds the verdict's settings as one :class:`tui.core.monitor.MonitorConfig` (SLO,
target, alpha, minimum window and count) rather than copies of its fields; :func:`monitor_config`
builds it from the flag values and turns a bad value into :class:`~tui.sources.load.errors.ConfigError`
(exit 2). Every default comes from :mod:`tui.core.defaults`, the names the command line uses too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import tui.core.defaults as defaults
import tui.sources.openai_http as oh
from tui.core.lengths import LengthDist
from tui.core.monitor import MonitorConfig
from tui.core.redact import redact_url
from tui.core.search import SearchSettings
from tui.core.slos import Slos
from tui.core.thinktime import ThinkDist
from tui.sources.load.errors import ConfigError
from tui.sources.load.kinds import APIS, ARRIVALS, MODES, Api, Arrival, Mode
from tui.sources.load.sizing import MAX_WORKERS, auto_workers
from tui.sources.load.trace import Trace
from tui.sources.load.trace_sessions import ReplayWorkload


def resolve_workers(config: LoadConfig) -> int:
    """The number of load workers ``config.workers`` means (``auto``: enough for the heaviest level,
    at most the machine's cores; see :func:`tui.sources.load.sizing.auto_workers`)."""
    if config.workers == "auto":
        return auto_workers(config.mode, config.levels)
    return int(config.workers)


def default_step_cap(min_window_minutes: float) -> float:
    """Default cap of a step run until decided: the minimum window plus COUNT_ALLOWANCE_S to reach the minimum
    count (15 min for the default 10-min window). A PASS needs the whole window, so a shorter cap cannot PASS."""
    return max(0.0, float(min_window_minutes)) * 60.0 + defaults.COUNT_ALLOWANCE_S


def monitor_config(slo_ttft_ms: float = defaults.SLO_TTFT_MS, target: float = defaults.TARGET,
                   alpha: float = defaults.ALPHA, min_window_minutes: float = defaults.MIN_WINDOW_MINUTES,
                   min_requests: int | None = None, slos: Slos | None = None) -> MonitorConfig:
    """The verdict settings from the flag values (``--slo-ttft-ms``, ``--target``, ``--alpha``,
    ``--min-window-minutes``, ``--min-requests``; ``slos``: every SLO in force, ``tui.cli.options.slos_from_args``,
    whose TTFT SLO, when on, is ``slo_ttft_ms``); a bad value raises ConfigError."""
    if not (isinstance(slo_ttft_ms, (int, float)) and slo_ttft_ms > 0) or not (0 < target < 1):
        raise ConfigError("--slo-ttft-ms must be > 0 and --target in (0, 1)")
    if not (math.isfinite(min_window_minutes) and min_window_minutes >= 0):
        raise ConfigError("--min-window-minutes must be a number >= 0")
    try:
        return MonitorConfig(target=float(target), alpha=float(alpha),
                             min_window_s=float(min_window_minutes) * 60.0, min_requests=min_requests,
                             slos=Slos(ttft_ms=float(slo_ttft_ms)) if slos is None else slos)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass
class LoadConfig:
    url: str
    model: str | None = None
    api: Api = defaults.LOAD_API
    mode: Mode = "closed"  # "closed" (levels = concurrency) | "open" (levels = req/s)
    levels: list[float] = field(default_factory=lambda: [1.0])
    arrival: Arrival = defaults.ARRIVAL  # open loop
    burstiness: float = defaults.BURSTINESS  # gamma: coefficient of variation of inter-arrival gaps
    input_tokens: tuple[int, int] = (defaults.INPUT_TOKENS, defaults.INPUT_TOKENS)  # (min, max), uniform
    output_tokens: tuple[int, int] = (defaults.OUTPUT_TOKENS, defaults.OUTPUT_TOKENS)
    # the distributions of --input-tokens / --output-tokens (tui.core.lengths); None: the (min, max) pair above
    # means what it always did (fixed, or the old A-B uniform). When given, the pair above is its bounds.
    input_lengths: LengthDist | None = None
    output_lengths: LengthDist | None = None
    ignore_eos: bool = False
    warmup: int = defaults.WARMUP_REQUESTS
    requests: int | None = None  # per step
    duration: float | None = None  # seconds per step
    rounds: int = defaults.ROUNDS
    stop_on_fail: bool = False
    until_decided: bool = False  # end each step as soon as its verdict is PASS or FAIL (capped: step_duration)
    max_step_seconds: float | None = None  # cap of a step run until decided (None: default_step_cap())
    budget: dict | None = None  # budget inputs given for this run: written as a `budget` record after the header
    record: str | None = None
    metrics_url: str | None = None
    metrics_interval: float = defaults.METRICS_INTERVAL_S
    metrics: bool = True  # run the Prometheus scraper
    gpu: bool = True  # run the GPU/host sampler
    connect_timeout: float = defaults.CONNECT_TIMEOUT_S
    read_timeout: float = defaults.READ_TIMEOUT_S  # must cover queueing: a queued request gets no bytes at all
    api_key_env: str | None = defaults.API_KEY_ENV
    # issue 36: user:password for the URL's Basic authentication from this environment variable (not in the URL,
    # which `ps` shows); the URL must then carry no user info
    url_credentials_env: str | None = None
    sign_key_env: str | None = None  # sign the record file's digest chain with the key in this variable (tui.core.chain)
    headers: list[tuple[str, str]] = field(default_factory=list)
    insecure: bool = False
    seed: int = defaults.LOAD_SEED
    monitor: MonitorConfig = field(default_factory=MonitorConfig)  # the verdict's settings (SLO, target, window)
    progress_interval: float = 5.0
    max_in_flight: int = 4096  # open loop: arrivals beyond this wait (and show as lateness)
    token_offsets: bool = False  # also record per-token arrival offsets (costs one float per token)
    workers: int | str = defaults.LOAD_WORKERS  # load processes: 1 = this process; N >= 2 = worker processes; "auto" (resolve_workers)
    ray: str | None = None  # "auto", "local" or a Ray cluster address: the workers run as Ray actors (tui.sources.load.ray_workers)
    # arrivals and lengths replayed from a trace (tui.sources.load.trace.load_trace): one open-loop step at
    # levels == [trace.level], round 1, ending when the trace is exhausted (or --requests/--duration earlier)
    trace: Trace | None = None
    # issue 23, sessions and shared prefixes (tui.sources.load.workload, tui.sources.load.sessions): turns per session
    # (None: one request per arrival, as always), the think time between turns (seconds; needs turns), every
    # prompt's start: one of prefix_groups system prompts of shared_prefix_tokens tokens
    turns: LengthDist | None = None
    think_time: ThinkDist | None = None
    shared_prefix_tokens: int | None = None
    prefix_groups: int = 1
    # --dataset FILE (read and prepared at setup by tui.sources.load.dataset), --max-context, --dataset-max-bad-share
    dataset: str | None = None
    max_context: int | None = None
    dataset_max_bad_share: float = defaults.DATASET_MAX_BAD_SHARE
    # issue 26, `sweep --search`: after the ladder, bisect between its last PASS and first FAIL (tui.core.search);
    # None: no search. Needs until_decided (each probe a step run until decided, capped like the ladder's)
    search: SearchSettings | None = None
    # issue 41: --tokenizer PATH (a tokenizer.json or a model folder holding one: exact prompt lengths, answers
    # counted; tui.sources.load.tokenizer); None: the server's /tokenize, else the labelled estimate
    tokenizer: str | None = None
    # issue 41: "measure" for `servewatch measure` (one level, no verdict printed; the header says so); None: a run
    purpose: str | None = None

    @property
    def min_window_minutes(self) -> float:
        return self.monitor.min_window_s / 60.0

    def validate(self) -> None:
        if not isinstance(self.url, str) or not self.url.strip():
            raise ConfigError("--url is required")
        p = urlsplit(self.url.strip())
        if p.scheme not in ("http", "https") or not p.hostname:
            raise ConfigError(f"--url must be an http(s) URL, got {redact_url(self.url)!r}")
        if self.url_credentials_env and (p.username or p.password):
            raise ConfigError("--url-credentials-env: the URL carries user:password too; give the credentials once")
        if self.api not in APIS:
            raise ConfigError("--api must be chat, completions or embeddings")
        if self.purpose not in (None, "measure"):
            raise ConfigError("purpose must be None or measure")
        if self.mode not in MODES:
            raise ConfigError("mode must be closed or open")
        if not self.levels:
            raise ConfigError("give at least one level (--concurrency or --rate)")
        for lv in self.levels:
            if not (isinstance(lv, (int, float)) and math.isfinite(lv) and lv > 0):
                raise ConfigError(f"levels must be positive numbers, got {lv!r}")
            if self.mode == "closed" and int(lv) != lv:
                raise ConfigError(f"--concurrency levels must be whole numbers, got {lv!r}")
        if self.arrival not in ARRIVALS:
            raise ConfigError("--arrival must be poisson, constant or gamma")
        if not (math.isfinite(self.burstiness) and self.burstiness >= 0):
            raise ConfigError("--burstiness must be >= 0")
        if self.arrival == "gamma" and self.burstiness == 0:
            raise ConfigError("--burstiness 0 means constant arrivals: use --arrival constant")
        for name, (lo, hi), dist in (("--input-tokens", self.input_tokens, self.input_lengths),
                                     ("--output-tokens", self.output_tokens, self.output_lengths)):
            if not (1 <= lo <= hi):
                raise ConfigError(f"{name} must be N or MIN-MAX with 1 <= MIN <= MAX")
            if dist is not None and (not isinstance(dist, LengthDist) or dist.bounds != (lo, hi)):
                raise ConfigError(f"{name}: the distribution's bounds must be the (min, max) pair")
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
        if not isinstance(self.monitor, MonitorConfig):
            raise ConfigError("monitor must be a MonitorConfig")
        if not (self.workers == "auto" or (isinstance(self.workers, int) and not isinstance(self.workers, bool)
                                           and 1 <= self.workers <= MAX_WORKERS)):
            raise ConfigError(f"--workers must be auto or a whole number from 1 to {MAX_WORKERS}")
        if self.ray is not None and not (isinstance(self.ray, str) and self.ray.strip()):
            raise ConfigError("--ray must be auto, local or a cluster address (ray://HOST:10001 or HOST:6379)")
        for k, _v in self.headers:
            if not k or any(c in k for c in " :\r\n\t"):
                raise ConfigError("--header must look like 'Name: value'")
        self._validate_workload()
        if self.api == "embeddings":
            self._validate_embeddings()
        if self.search is not None and (self.trace is not None or not self.until_decided):
            raise ConfigError("--search bisects a sweep's levels: it needs steps run until decided, and no --trace")
        if self.trace is not None:
            self._validate_trace()

    def _validate_workload(self) -> None:
        if self.turns is not None and not isinstance(self.turns, LengthDist):
            raise ConfigError("--turns must be N, A-B or a length distribution")
        if self.think_time is not None:
            if not isinstance(self.think_time, ThinkDist):
                raise ConfigError("--think-time must be SECONDS or a think-time distribution")
            if self.turns is None:
                raise ConfigError("--think-time needs --turns (a think time is the wait between a session's turns)")
        p = self.shared_prefix_tokens
        if p is not None and not (isinstance(p, int) and not isinstance(p, bool) and p >= 1):
            raise ConfigError("--shared-prefix-tokens must be a whole number >= 1")
        g = self.prefix_groups
        if not (isinstance(g, int) and not isinstance(g, bool) and g >= 1):
            raise ConfigError("--prefix-groups must be a whole number >= 1")
        if g != 1 and p is None:
            raise ConfigError("--prefix-groups needs --shared-prefix-tokens")
        if self.dataset is not None and not (isinstance(self.dataset, str) and self.dataset.strip()):
            raise ConfigError("--dataset must name a file")
        mc = self.max_context
        if mc is not None and not (isinstance(mc, int) and not isinstance(mc, bool) and mc >= 1):
            raise ConfigError("--max-context must be a whole number of tokens >= 1")
        share = self.dataset_max_bad_share
        if not (isinstance(share, (int, float)) and math.isfinite(share) and 0 <= share <= 1):
            raise ConfigError("--dataset-max-bad-share must be a share from 0 to 1")

    def _validate_embeddings(self) -> None:
        """/v1/embeddings answers in one piece: nothing is generated (no output length, no ignore_eos), no
        conversation follows (no sessions), and no SLO on tokens can be judged (E2E is the SLO)."""
        given = [f for f, v in (("--output-tokens", self.output_lengths), ("--turns", self.turns)) if v is not None]
        if self.ignore_eos:
            given.append("--ignore-eos")
        if self.replay is not None and self.replay.sessions_mode:
            given.append("--trace of a session recording")
        if given:
            raise ConfigError(f"--api embeddings generates no tokens and holds no conversation: {', '.join(given)} "
                              "cannot be given with it")
        s = self.monitor.slos
        on = [n for n, v in (("TTFT", s.ttft_ms), ("TPOT", s.tpot_ms), ("ITL", s.itl_ms)) if v is not None]
        if on:
            raise ConfigError(f"--api embeddings streams no tokens: {', '.join(on)} cannot be judged (give "
                              "--slo-e2e-ms MS, the SLO of an embeddings run; default "
                              f"{defaults.EMBEDDINGS_SLO_E2E_MS:g})")

    @property
    def embeddings(self) -> bool:
        """``--api embeddings``: answers in one piece, no tokens streamed."""
        return self.api == "embeddings"

    @property
    def replay(self) -> ReplayWorkload | None:
        """A trace replay's recorded workload (sessions, prefixes, dataset rows of a servewatch recording)."""
        return self.trace.replay if self.trace is not None else None

    @property
    def sessions(self) -> bool:
        """A session workload (--turns, or a replayed session recording): levels count sessions, not requests."""
        rp = self.replay
        return self.turns is not None or (rp is not None and rp.sessions_mode)

    @property
    def cache_prompt(self) -> bool:
        """What the requests send as ``cache_prompt``: true with shared prefixes or sessions (the server may serve
        a prefix it saw from its cache: that is what such a workload measures), false otherwise."""
        rp = self.replay
        return (self.sessions or self.shared_prefix_tokens is not None
                or (rp is not None and rp.prefix_tokens is not None))

    def _validate_trace(self) -> None:
        t = self.trace
        if not isinstance(t, Trace):
            raise ConfigError("trace must be a Trace (tui.sources.load.trace.load_trace)")
        if self.mode != "open":
            raise ConfigError("--trace replays arrivals: open loop only (not with --concurrency)")
        if self.rounds != 1:
            raise ConfigError("--trace is replayed once: --rounds must be 1")
        if list(self.levels) != [t.level]:
            raise ConfigError(f"with a trace the one level is its mean rate, {t.level:g} req/s")
        if len(t) < 2:
            raise ConfigError("a trace needs at least two arrivals")
        given = [f for f, v in (("--turns", self.turns), ("--think-time", self.think_time),
                                ("--shared-prefix-tokens", self.shared_prefix_tokens)) if v is not None]
        if given or self.prefix_groups != 1:
            raise ConfigError(f"--trace replays the recording's own workload: {', '.join(given or ['--prefix-groups'])} "
                              "cannot be given with it")
        ds = t.replay.dataset if t.replay is not None else None
        if ds is not None and self.dataset is None:
            raise ConfigError(f"trace {t.source['file']} was recorded with the dataset {ds.get('name')} (sha256 "
                              f"{ds.get('sha256')}): give that file with --dataset FILE to replay it")
        if ds is None and self.dataset is not None:
            raise ConfigError(f"--dataset with --trace: the recording {t.source['file']} used no dataset (its texts are "
                              "regenerated at the recorded lengths)")

    @property
    def step_requests(self) -> int | None:
        """Requests per step: the given count; 40 when nothing bounds the step (neither --requests,
        --duration nor until_decided: programmatic use only, the CLI runs steps until decided); a trace
        replay is bounded by the trace itself."""
        if self.trace is None and self.requests is None and self.duration is None and not self.until_decided:
            return 40
        return self.requests

    @property
    def step_duration(self) -> float | None:
        """Seconds per step: --duration, and for a step run until decided at most the step cap."""
        if not self.until_decided:
            return self.duration
        cap = self.max_step_seconds if self.max_step_seconds is not None else default_step_cap(self.min_window_minutes)
        return cap if self.duration is None else min(self.duration, cap)

    @property
    def level_unit(self) -> str:
        if self.sessions:
            return "sessions" if self.mode == "closed" else "sessions/s"
        return "concurrency" if self.mode == "closed" else "req/s"


def build_headers(config: LoadConfig, environ: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(request headers, secret strings to scrub from any text we write): ``openai_http.auth_headers``."""
    env = os.environ if environ is None else environ
    key = env.get(config.api_key_env) if config.api_key_env else None
    creds = None
    if config.url_credentials_env:
        creds = env.get(config.url_credentials_env)
        if not creds or ":" not in creds:
            raise ConfigError(f"--url-credentials-env {config.url_credentials_env}: expected user:password in "
                              f"{config.url_credentials_env}")
    return oh.auth_headers(config.url, key, config.headers, credentials=creds)
