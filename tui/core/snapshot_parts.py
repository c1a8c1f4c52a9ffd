"""The parts a snapshot is made of: percentiles, windows, verdicts, level and request rows, queue and GPU state.

The aggregate, ``tui.core.snapshot.Snapshot``, sits higher in the core's layers (above the budget view and the
measured capacity it carries); these parts sit low, so the modules that compute them (``stats``, ``capacity``,
``search``, ...) import them without importing the aggregate. ``tui.core.snapshot`` re-exports every name here.
``None`` means "not available" and renders as ``N/A``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

import tui.core.defaults as defaults
from tui.core.outcomes import Outcome as Outcome
from tui.core.severity import BAD as BAD
from tui.core.severity import GOOD as GOOD
from tui.core.severity import NA as NA
from tui.core.severity import WARN as WARN
from tui.core.severity import Severity as Severity
from tui.core.states import FAIL as FAIL
from tui.core.states import INSUFFICIENT_WINDOW as INSUFFICIENT_WINDOW
from tui.core.states import PASS as PASS
from tui.core.states import UNDECIDED as UNDECIDED
from tui.core.states import VerdictState as VerdictState

#: A JSON value as a file holds it or a document carries it: the type of the blocks a snapshot carries for another
#: module to read (a step's server histograms, a token tally's summary, ...), which their readers narrow.
JsonValue: TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]


def json_get(value: JsonValue, *keys: str) -> JsonValue:
    """``value[k1][k2]...``, or None where a key is missing or a value on the way is not an object (a file may say
    anything: never a crash)."""
    for k in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(k)
    return value

# The vocabularies (verdict states, severity classes, request outcomes) are defined in tui.core.states,
# tui.core.severity and tui.core.outcomes; their names are re-exported here for the snapshot's readers.


@dataclass(frozen=True, slots=True)
class Percentile:
    q: float  # 0.50, 0.95, 0.99
    value_ms: float | None  # raw order-statistic value (None when n == 0; inf allowed in the failures-as-inf reading)
    n: int
    supported: bool  # n large enough for a distribution-free 95% upper bound
    n_needed: int  # smallest n that supports it
    approximate: bool = False  # from the streaming sketch (relative error bound in docs)

    @property
    def label(self) -> str:
        return f"P{round(self.q * 100, 6):g}"  # P50, P95, P99.9


@dataclass(frozen=True, slots=True)
class FractionStat:
    good: int
    n: int
    fraction: float | None  # None when n == 0
    lo: float | None  # descriptive Wilson interval (not a decision)
    hi: float | None
    severity: Severity = NA


@dataclass(frozen=True, slots=True)
class WindowStat:
    """Statistics over one window (rolling or cumulative) of measured requests."""

    label: str  # "last 60 s", "last 500 requests", "cumulative"
    good: FractionStat
    ttft: tuple[Percentile, ...]  # over completed requests
    ttft_fail_inf: tuple[Percentile, ...]  # failures counted as +inf
    completed: int
    failed: int
    slow: int
    req_per_s: float | None
    output_tok_per_s: float | None
    goodput_per_s: float | None
    tpot_ms_p50: float | None
    seconds: float
    # issue 21 (tui.core.slos): P50/P95/P99 of "ttft", "tpot", "itl", "e2e" over completed requests (the TTFT
    # judged, as ``ttft``), with the same n-support rule; per SLO the requests that missed it (a request missing two
    # counts in both), the combinations ("TTFT+TPOT": 7), the requests an SLO in force could not be judged on (never
    # good), and good output tokens per second (``goodput_per_s`` is good requests per second)
    latency: dict[str, tuple[Percentile, ...]] = field(default_factory=dict)
    misses: dict[str, int] = field(default_factory=dict)
    miss_combos: dict[str, int] = field(default_factory=dict)
    unjudgeable: dict[str, int] = field(default_factory=dict)
    good_output_tok_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    state: VerdictState
    reason: str  # one plain sentence
    missing: str | None  # "need 41 more requests, 7 min more" (None when nothing missing)
    n: int
    good: int
    elapsed_s: float
    need_requests: int  # extra measured requests still needed for the window
    need_seconds: float  # extra observation time still needed
    e_pass: float  # e-value against H0: p <= target (PASS when >= 1/alpha)
    e_fail: float  # e-value against H0: p >= target (FAIL when >= 1/alpha)
    threshold: float  # 1/alpha
    vif: float  # dependence correction in force: counts are divided by it (>= 1; 1.0 before it can be estimated)
    n_eff: float  # effective sample size used for the decision (n / vif)
    bursty: bool  # the point estimate of the variance ratio (vif_point) is >= 2
    decided_at_n: int | None = None  # request count at which the current PASS/FAIL state began (not latched)
    target: float = defaults.TARGET
    alpha: float = defaults.ALPHA
    episodes: int = 0  # failure episodes seen (maximal runs of >= 3 not-good requests)
    longest_episode_s: float = 0.0
    unseen_episode_period_s: float | None = None  # episodes rarer than one per this are not ruled out
    minutes_more: float | None = None  # UNDECIDED only: minutes until the effective n would PASS at this rate
    vif_point: float | None = None  # point estimate behind vif (max over batch lengths; descriptive)
    slos: str = ""  # the SLOs judged, ``tui.core.slos.Slos.describe()`` ("TTFT <= 1000 ms (answer), TPOT <= 50 ms")

    @property
    def severity(self) -> str:
        return {PASS: GOOD, FAIL: BAD, UNDECIDED: WARN}.get(self.state, WARN)


@dataclass(frozen=True, slots=True)
class RequestRow:
    id: str
    level: float | None
    round: int
    phase: str
    ttft_ms: float | None
    output_tokens: int | None
    outcome: Outcome  # excluded: cancelled while still open, not judged
    error: str | None
    latency_ms: float
    t_end: float
    #: the SLOs a not-good request missed ("TPOT+ITL"), and those it could not be judged on ("TPOT?"); "" when good
    missed: str = ""


@dataclass(frozen=True, slots=True)
class QueueState:
    source: str | None  # None: no server metrics source
    waiting: float | None
    running: float | None
    kv_cache_usage: float | None  # 0..1
    client_in_flight: int | None
    waiting_series: tuple[float, ...] = ()
    running_series: tuple[float, ...] = ()
    in_flight_series: tuple[float, ...] = ()
    max_waiting: float | None = None


@dataclass(frozen=True, slots=True)
class GpuDevice:
    device: int
    name: str | None
    used_gib: float | None
    total_gib: float | None
    utilization: float | None
    peak_used_gib: float | None
    used_series: tuple[float, ...] = ()
    severity: Severity = NA  # vs the predicted ceiling


@dataclass(frozen=True, slots=True)
class GpuState:
    available: bool  # False -> "no GPU telemetry"
    devices: tuple[GpuDevice, ...]
    predicted_gib: float | None  # weights + margin + KV x current concurrency (from the budget)
    ceiling_gib: float | None  # weights + margin + full cache budget
    gpu_gib: float | None  # the budget's GPU size
    note: str = ""
    # issue 22: the engine's own KV memory in use (kv_cache_usage x kv_cache_memory_bytes), beside NVML or alone
    engine_kv_label: str | None = None  # "engine's own figure (vLLM kv_cache_usage_perc x kv_cache_memory_bytes)"
    engine_kv_allocated_gib: float | None = None  # the KV space the engine allocated (kv_cache_memory_bytes)
    engine_kv_used_gib: float | None = None  # the latest sample
    engine_kv_peak_gib: float | None = None  # the highest sample of the run
    engine_kv_series: tuple[float, ...] = ()  # GiB in use, newest last (bounded like the other series)
    engine_kv_usage: float | None = None  # the latest kv_cache_usage (0..1), also when the bytes are not known
    engine_kv_peak_usage: float | None = None
    engine_kv_samples: int = 0  # queue samples that carried kv_cache_usage
    kv_ceiling_gib: float | None = None  # the budget's predicted KV ceiling (cache_budget)
    memory: str | None = None  # where the budget's memory came from (BudgetView.memory)


@dataclass(frozen=True, slots=True)
class LevelRow:
    """One row of the per-level (and round) table."""

    level: float | None
    round: int
    mode: str | None
    window: WindowStat
    verdict: Verdict
    saturated: bool = False  # open loop: client could not keep the schedule
    lateness_p99_ms: float | None = None
    max_waiting: float | None = None
    peak_gpu_gib: float | None = None
    #: the level's server queue samples: their mean of ``waiting`` (samples are evenly spaced in time, so this is
    #: the time-averaged queue depth) and their count; the engine's highest kv_cache_usage (0..1) at the level
    mean_waiting: float | None = None
    queue_samples: int = 0
    peak_kv_usage: float | None = None
    cancelled_open: int = 0  # measured requests of this level+round cancelled while still open: not judged
    delivered: str = ""  # the load the level's own records show ("mean 3.96 requests in flight (concurrency 4)")
    not_reached: str | None = None  # why the labelled load was not delivered (then it can never PASS)
    problems: tuple[str, ...] = ()  # evidence problems that forbid PASS at this level (run-wide ones included)
    server_histograms: JsonObject | None = None  # the step's server-side histograms at its start and end (issue 21)
    #: counted tokens of the level's measured requests: ``tui.core.token_counts.TokenTally.summary()`` (asked vs
    #: received lengths, server vs client disagreements); None: not computed
    tokens: JsonObject | None = None
    #: issue 23: the per-turn table of a session workload (``tui.core.turns.TurnTable.rows()``); None: no record of
    #: the level carries ``turn``
    turns: tuple[JsonObject, ...] | None = None
    #: the server's prefix-cache use at this level (issue 23): ``tui.core.prefix_cache.level_summary``; None: not
    #: computed
    prefix_cache: JsonObject | None = None
    #: issue 26: the level's step records say ``search_probe`` (a probe of `sweep --search`, not a ladder level)
    search_probe: bool = False
    #: the step's recorded duration (its end record's ``duration_s``); None: no step end record
    step_s: float | None = None
    #: issue 36: measured requests of the level that failed in the client (its own resources ran out: error
    #: ``client``, outcome unknown, not in ``window``); with any the level cannot PASS. Per errno name when > 0
    client_limited: int = 0
    client_limited_kinds: dict[str, int] | None = None


def cancelled_note(open_: int, late: int) -> str | None:
    """"4 cancelled while still open, not judged; 1 cancelled after the SLO had passed, counted as failed"."""
    parts = []
    if open_:
        parts.append(f"{open_} cancelled while still open, not judged")
    if late:
        parts.append(f"{late} cancelled after the SLO had passed, counted as failed")
    return "; ".join(parts) or None
