"""The Monitor: ingests records one by one, answers snapshots.

One Monitor serves the console (snapshots at 2-4 Hz), the headless report and the
live runner. Everything it keeps is bounded: exact TTFT lists are capped (beyond the
cap, cumulative percentiles come from a streaming sketch and say so), the rolling
window, recent rows and series are bounded deques.

Why one module of ~800 lines: ``add_many`` is the hot path of every reader and keeps its per-level, rolling,
queue, GPU and timeline state in one object so a snapshot is one consistent read under one lock; splitting the
state across modules would add attribute hops per record (measured by bench/bench_report.py).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import tui.core.advice as advice
import tui.core.clientlimit as clientlimit
import tui.core.completeness as completeness
import tui.core.defaults as defaults
import tui.core.evidence as evidence
import tui.core.importers.crosscheck as crosscheck
import tui.core.provenance as provenance
import tui.core.slos as slo_defs
import tui.core.stats as stats
import tui.core.turns as turns
from tui.core.bounds import MAX_ERROR_CLASSES, MAX_GPU_DEVICES, MAX_LEVELS, OTHER_ERRORS
from tui.core.budget import BudgetError
from tui.core.budget.memory import (
    ENGINE_KV_LABEL,
    WHY_NO_HEADER,
    MemoryMissing,
    engine_kv_space,
    engine_name,
    memory_label,
    resolve,
)
from tui.core.budgetview import (
    ORIGIN_RECORD,
    BudgetView,
    budget_from_record,
    budget_view,
)
from tui.core.capacity import budget_candidate, cap_rows, measure_capacity
from tui.core.importers.limits import ttft_of_label
from tui.core.levels import fmt_level, row_mode
from tui.core.outcomes import CLIENT, EXCLUDED, FAILED, SLOW
from tui.core.prefix_cache import PrefixTally
from tui.core.prefix_cache import by_level as prefix_cache_by_level
from tui.core.prefix_cache import is_known as prefix_cache_known
from tui.core.prefix_cache import level_summary as prefix_cache_summary
from tui.core.prefix_cache import short_text as prefix_cache_short
from tui.core.records.model import BudgetRecord, GpuSample, HostSample, QueueSample, Record, RunHeader, StepRecord
from tui.core.records.request import RequestRecord, contradiction
from tui.core.records.schema import LineIssue
from tui.core.severity import BAD, GOOD, NA, WARN, Severity, fraction_severity
from tui.core.slos import MISS_MASK, NEEDS, NOJUDGE_SHIFT, SLO_NAMES, Slos, combo_name, itl_ms, miss_names, slo_rule
from tui.core.snapshot import (
    FractionStat,
    GpuDevice,
    GpuState,
    LevelRow,
    Percentile,
    QueueState,
    RequestRow,
    Snapshot,
    Verdict,
    WindowStat,
)
from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED, VerdictState
from tui.core.textfmt import fmt_minutes, fmt_span
from tui.core.token_counts import TokenTally
from tui.core.verdict import FAIL_MIN_S, LevelJudge, MixtureTest
from tui.core.verdict_settings import (
    NO_SETTINGS,
    VERDICT_SETTINGS,
    FileSettings,
    JudgeAt,
    Resolution,
    VerdictSettings,
    read_header,
)
from tui.core.verdict_settings import resolve as resolve_settings

GIB = 2**30
EVIDENCE_CAP = evidence.EVIDENCE_CAP
EXACT_CAP = 100_000  # exact TTFT values kept per level before the sketch takes over
SERIES_LEN = 240
MAX_EXAMPLES = 5
TIMELINE_HEAD = 1000  # verdict state changes kept from the start of the run
TIMELINE_TAIL = 1000  # ... and the latest ones; changes in between are counted, not kept
ROLLING_MAX = 200_000  # most requests a time-based rolling window holds (above that rate it is the last 200,000)
_UNSET_SLOS = Slos()  # MonitorConfig.slos not given: the TTFT SLO of ``slo_ttft_ms`` alone
LATENCY_KEYS = ("ttft", "tpot", "itl", "e2e")  # WindowStat.latency, in the order of tui.core.slos.SLO_NAMES


@dataclass(frozen=True)
class MonitorConfig:
    slo_ttft_ms: float = defaults.SLO_TTFT_MS
    target: float = defaults.TARGET
    alpha: float = defaults.ALPHA
    min_window_s: float = defaults.MIN_WINDOW_S
    min_requests: int | None = None  # default: the fewest requests with which PASS is possible
    rolling_s: float = defaults.ROLLING_S
    rolling_n: int | None = None  # when set, the rolling window is the last N requests instead
    # The one duplicate rule (tui.core.evidence.Duplicates): a request id seen again, or the send, first-token and
    # end times of an earlier request under another id, is an input problem: counted once, named, and it forbids
    # PASS (a file with each request repeated ten times must not reach PASS on a tenth of the evidence). The load
    # generator makes ids unique by construction and turns this off so a soak's memory stays flat.
    check_duplicate_ids: bool = True
    recent_rows: int = defaults.RECENT_ROWS
    bucket_s: float = defaults.BUCKET_S  # sparkline bucket width (record time)
    batch_s: float = defaults.BATCH_S  # shortest batch length of the dependence correction (also x2, x4, x8)
    max_batches: int = 1024  # unused since the judge keeps running sums per batch length
    # every SLO a request must meet to be good (tui.core.slos); not given: the TTFT SLO ``slo_ttft_ms`` alone.
    # ``slo_ttft_ms`` stays the TTFT SLO for the callers that read it (the default's value when TTFT is off)
    slos: Slos = _UNSET_SLOS

    def __post_init__(self) -> None:
        if not self.slo_ttft_ms > 0:
            raise ValueError("slo_ttft_ms must be > 0")
        if self.slos is _UNSET_SLOS:
            object.__setattr__(self, "slos", Slos(ttft_ms=self.slo_ttft_ms))
        elif self.slos.ttft_ms is not None:
            if self.slo_ttft_ms != defaults.SLO_TTFT_MS and self.slo_ttft_ms != self.slos.ttft_ms:
                raise ValueError(f"slo_ttft_ms ({self.slo_ttft_ms:g}) and slos.ttft_ms ({self.slos.ttft_ms:g}) "
                                 "must agree")
            object.__setattr__(self, "slo_ttft_ms", float(self.slos.ttft_ms))
        if not 0.0 < self.target < 1.0:
            raise ValueError("target must be a fraction between 0 and 1 (for example 0.95)")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be between 0 and 1 (for example 0.05)")
        if self.min_window_s < 0:
            raise ValueError("min_window_s must be >= 0")


def config_at(cfg: MonitorConfig, vs: VerdictSettings) -> MonitorConfig:
    """``cfg`` with the verdict settings ``vs`` (``tui.core.verdict_settings``); the views (rolling window, ...)
    kept."""
    s = vs.slos
    return dataclasses.replace(cfg, slo_ttft_ms=defaults.SLO_TTFT_MS if s.ttft_ms is None else s.ttft_ms, slos=s,
                               target=vs.target, alpha=vs.alpha, min_window_s=vs.min_window_s,
                               min_requests=vs.min_requests)


def settings_of(cfg: MonitorConfig, required_level: float | None = None) -> VerdictSettings:
    """The verdict settings of ``cfg`` (and the required level): what a load command writes into its header."""
    return VerdictSettings(slos=cfg.slos, target=cfg.target, alpha=cfg.alpha, min_window_s=cfg.min_window_s,
                           min_requests=cfg.min_requests, required_level=required_level)


def _episode_note(judge: LevelJudge) -> str:
    """What the window cannot rule out (issue 8): failure episodes that have not happened yet."""
    k, longest_s, longest_n = judge.episode_summary()
    period = judge.unseen_episode_period_s()
    if k == 0 and judge.outage_summary()[0]:
        seen = "No run of 3 or more not-good requests seen (the outage held fewer)"
    elif k == 0:
        seen = "No failure episodes seen (runs of 3 or more not-good requests)"
    else:
        seen = (f"{k} failure episode{'s' if k != 1 else ''} seen, longest {longest_s:.0f} s "
                f"({longest_n} requests)")
    if not judge.episodes_exact:
        seen += " (aggregated counts: episodes inside them not counted)"
    if period is None:
        return seen + "."
    return f"{seen}; episodes rarer than one per ~{fmt_minutes(period)} are not ruled out: run longer."


def verdict_from_judge(judge: LevelJudge, cfg: MonitorConfig, unjudged: int = 0) -> Verdict:
    """The verdict of one level's judge in words. ``unjudged``: requests not judgeable on an SLO in force (the
    judge counts them good, so that a FAIL holds even if they were; they are never shown as good: the good fraction
    in the reason is the one every view shows, and they are named beside it)."""
    n = judge.n
    good = judge.good - unjudged  # what every view shows as good
    elapsed = judge.covered  # the window as judged: time in which measured requests were flowing
    span = judge.elapsed
    state = judge.state
    need_n = max(0, judge.min_requests - n)
    need_s = max(0.0, judge.min_window_s - elapsed)
    parts = []
    if judge.failing and state != FAIL:
        # advice that decides soonest: the evidence already shows FAIL, only the 60-s minimum is missing
        parts.append(f"FAIL in about {fmt_minutes(max(1.0, judge.fail_min_s - elapsed))} if this holds")
    else:
        if need_n:
            parts.append(f"need {need_n} more requests")
        if need_s > 0:
            parts.append(f"{fmt_minutes(need_s)} more" if parts else f"need {fmt_minutes(need_s)} more")
    missing = ", ".join(parts) or None
    gaps = ""
    if span - elapsed > max(1.0, 0.05 * span):
        gaps = (f" Requests were flowing for {fmt_span(elapsed)} of the {fmt_span(span)} span: stretches "
                "with nothing in flight count only up to 10 send gaps each.")
    v = judge.vif
    n_eff = judge.n_eff
    bursty = judge.vif_point is not None and judge.vif_point >= 2.0  # the point estimate, not the bound
    pct = 100.0 * good / n
    if unjudged:  # "0.0% (0/4; 2 more not judgeable ...)": never a fraction that contradicts the table's
        counted = f"{good}/{n} good; {unjudged} not judgeable on an SLO, counted good only for FAIL"
    else:
        counted = f"{good}/{n}"
    outages = advice.outage_text(judge)  # what made the outcomes dependent, named (issue 37)
    if state == INSUFFICIENT_WINDOW and v <= 1.0:
        corr = ""
    elif v > 1.0:
        corr = ((f" {outages}." if outages else " Outcomes are bursty." if bursty else "")
                + f" Dependence correction: counts divided by {v:.1f} (upper 95% bound of the batch-means variance "
                f"ratio), effective n = {n_eff:.0f}.")
    else:
        corr = " No dependence correction yet (needs 45 s of batches with both outcomes)."
    test = f"(anytime-valid test, alpha {cfg.alpha:g})"
    more = judge.minutes_more_needed() if state == UNDECIDED else None
    if state == FAIL:
        reason = (f"good fraction {pct:.1f}% ({counted}): the evidence shows it is below the "
                  f"{cfg.target:.0%} target {test}.{corr}")
    elif state == INSUFFICIENT_WINDOW:
        lean = (" The evidence already shows FAIL; FAIL needs at least "
                f"{fmt_minutes(judge.fail_min_s)} of data." if judge.failing
                else " Evidence so far favours PASS." if judge.passing else "")
        reason = (f"good fraction {pct:.1f}% on {n} requests{f' ({counted})' if unjudged else ''} over "
                  f"{fmt_span(elapsed)}: too few to judge "
                  f"the {cfg.target:.0%} target honestly.{lean}{corr}{gaps}")
    elif state == PASS:
        reason = (f"good fraction {pct:.1f}% ({counted}): the evidence shows it is at or above the "
                  f"{cfg.target:.0%} target {test}.{corr} {_episode_note(judge)}")
    else:
        reason = (f"good fraction {pct:.1f}% ({counted}): not yet enough evidence either way; "
                  f"keep the load running.{corr} {_episode_note(judge)}")
        hourly = advice.minutes_with_recurring_outages(judge) if outages and v > 1.0 else None
        if hourly is not None:
            reason += " " + advice.recurring_text(hourly, judge)
        elif more is not None and more > 0 and v > 1.0:
            when = (f"about {math.ceil(more - 1e-9)} more minutes" if more <= 24 * 60
                    else "more than a day more")
            reason += (f" Failures arrive in bursts: {when} at this rate "
                       f"(until the effective n reaches what PASS needs, if the fraction holds).")
    slos = cfg.slos
    if slos != Slos(ttft_ms=cfg.slo_ttft_ms):  # more than the TTFT SLO alone (whose value every view shows)
        reason += f" Good = completed AND {slos.describe()}."
    e_pass, e_fail = judge.e_values()
    k, longest_s, _ = judge.episode_summary()
    return Verdict(
        state=state, reason=reason, missing=missing if state == INSUFFICIENT_WINDOW else None, n=n, good=good,
        elapsed_s=elapsed, need_requests=need_n, need_seconds=need_s,
        e_pass=e_pass, e_fail=e_fail, threshold=judge.test.threshold,
        vif=v, n_eff=n_eff, bursty=bursty,
        decided_at_n=judge.state_since_n if state in (PASS, FAIL) else None,
        target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha,
        episodes=k, longest_episode_s=longest_s, unseen_episode_period_s=judge.unseen_episode_period_s(),
        minutes_more=more, vif_point=judge.vif_point, slos=slos.describe(),
    )


class _LevelState:
    __slots__ = (
        "level", "round", "mode", "n", "good", "failed", "slow", "completed", "first_t", "last_t",
        "ttft", "out_tokens", "judge", "verdict_cache", "saturated",
        "lateness_p99_ms", "max_waiting", "peak_gpu_gib", "_sorted_cache", "degraded",
        "waiting_sum", "waiting_n", "peak_kv_usage", "order",
        "rec_n", "rec_err", "rec_incomplete", "times", "delivered_cache",
        "tpot", "itl", "e2e", "combos", "good_out_tokens", "lat_cache", "ttft_other", "unjudged",
        "tokens", "sessions", "turns", "pcache", "ttft0", "err_classes", "step_over", "client", "client_kinds",
        "client_step",
    )

    def __init__(self, level: float | None, rnd: int, test: MixtureTest, cfg: MonitorConfig, min_requests: int) -> None:
        self.level = level
        self.round = rnd
        self.mode: str | None = None
        self.n = self.good = self.failed = self.slow = self.completed = 0
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.ttft = stats.QuantileStore(EXACT_CAP)
        self.out_tokens = 0
        # issue 21: TPOT (last-token based), the largest inter-token gap and end-to-end of completed requests
        # (bounded stores like TTFT's), the miss / not-judgeable bits per combination, good output tokens
        self.tpot = stats.QuantileStore(EXACT_CAP)
        self.itl = stats.QuantileStore(EXACT_CAP)
        self.e2e = stats.QuantileStore(EXACT_CAP)
        self.combos: dict[int, int] = {}
        self.good_out_tokens = 0
        self.unjudged = 0  # completed, nothing missed, an SLO in force not judgeable: unknown (judged as good for FAIL)
        # the client's own resources ran out (error "client", tui.core.clientlimit): unknown, judged as good for FAIL
        # only, never in n / good / failed; per errno name; and whether a step end record says client_limited
        self.client = 0
        self.client_kinds: dict[str, int] = {}
        self.client_step = False
        self.lat_cache: dict[str, tuple[int, tuple[Percentile, ...]]] = {}
        self.tokens = TokenTally()  # counted tokens: asked vs received, server vs client (tui.core.token_counts)
        self.pcache = PrefixTally()  # the server's prefix-cache counts per request (tui.core.prefix_cache)
        # the TTFT NOT judged (any token when the answer's is judged, and the reverse), kept from the level's first
        # record with reasoning on (``_add_other_ttft``); None while no record of the level reasoned
        self.ttft_other: stats.QuantileStore | None = None
        self.judge = LevelJudge(test, min_window_s=cfg.min_window_s, min_requests=min_requests,
                                fail_min_s=min(FAIL_MIN_S, cfg.min_window_s), batch_s=cfg.batch_s)
        self.verdict_cache: tuple | None = None
        self.saturated = False
        self.degraded: str | None = None  # why the level was not held (a load worker lost): it cannot PASS
        self.lateness_p99_ms: float | None = None
        self.max_waiting: float | None = None
        self.order = 0  # the order the levels appeared in (the rolling window follows the newest)
        self.waiting_sum = 0.0  # the level's queue samples (waiting), for the mean queue depth
        self.waiting_n = 0
        self.peak_kv_usage: float | None = None  # the engine's kv_cache_usage (0..1), highest sample of the level
        self.peak_gpu_gib: float | None = None
        self._sorted_cache: tuple[int, Sequence[float]] | None = None
        # what the level's own records say, for the cross-checks (tui.core.evidence): every measured record of
        # the level (cancelled ones included), those with an error, those not complete without one; send / end times
        # and dispatch lateness of the first EVIDENCE_CAP
        self.rec_n = self.rec_err = self.rec_incomplete = 0
        self.times = array("d")  # (t_sent, t_end, t_sent - t_intended) per record, interleaved: one extend each
        self.delivered_cache: tuple[int, evidence.Delivered] | None = None
        # what the level's step end record is recomputed from (tui.core.completeness): the TTFT (t_first_token -
        # t_sent, +inf without one) of its records without an error, the first EVIDENCE_CAP; the error classes;
        # the values past the cap (the generator's histogram, created only then)
        self.ttft0 = array("d")
        self.err_classes: dict[str, int] = {}
        self.step_over: completeness.StepValues | None = None
        # issue 23: session workloads (records that carry ``session`` / ``turn``): the sessions' spans for the
        # delivered-load rule in sessions, the per-turn table; None while no record of the level carries them
        self.sessions: evidence.SessionSpans | None = None
        self.turns: turns.TurnTable | None = None

    def percentiles_of(self, name: str, store: stats.QuantileStore) -> tuple[Percentile, ...]:
        """P50/P95/P99 of one bounded store with the n-support rule (exact, or the sketch's past the cap, said),
        recomputed only when the store has grown."""
        c = self.lat_cache.get(name)
        if c is not None and c[0] == store.n:
            return c[1]
        if store.approximate:
            out = tuple(Percentile(q=q, value_ms=store.quantile(q), n=store.n, supported=store.n >= stats.n_needed(q),
                                   n_needed=stats.n_needed(q), approximate=True) for q in stats.QUANTILES)
        else:
            out = stats.percentiles(sorted(store.exact))
        self.lat_cache[name] = (store.n, out)
        return out

    def miss_counts(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """(misses per SLO, miss combinations, not judgeable per SLO) of the level's completed requests."""
        misses: dict[str, int] = {}
        combos: dict[str, int] = {}
        nojudge: dict[str, int] = {}
        for bits, k in self.combos.items():
            m = bits & MISS_MASK
            if m:
                for name in miss_names(m):
                    misses[name] = misses.get(name, 0) + k
                key = combo_name(m)
                combos[key] = combos.get(key, 0) + k
            for name in miss_names(bits >> NOJUDGE_SHIFT):
                nojudge[name] = nojudge.get(name, 0) + k
        order = {name: i for i, name in enumerate(SLO_NAMES)}
        return (dict(sorted(misses.items(), key=lambda kv: order[kv[0]])),
                dict(sorted(combos.items(), key=lambda kv: (kv[0].count("+"), kv[0]))),
                dict(sorted(nojudge.items(), key=lambda kv: order[kv[0]])))

    def sorted_ttfts(self) -> Sequence[float]:
        exact = self.ttft.exact
        c = self._sorted_cache
        if c is not None and c[0] == len(exact):
            return c[1]
        s = array("d", sorted(exact))  # kept between snapshots: 8 bytes a value
        self._sorted_cache = (len(exact), s)
        return s


_INF = math.inf


def _step_over(st: _LevelState) -> completeness.StepValues:
    """A level's values past EVIDENCE_CAP, for its step record's percentiles (created at the first of them)."""
    if st.step_over is None:
        st.step_over = completeness.StepValues()
    return st.step_over


def _store(st: _LevelState | None, ttfts: list[float], lat: tuple[list, list, list]) -> None:
    if st is not None:
        st.ttft.extend(ttfts)
        st.tpot.extend(lat[0])
        st.itl.extend(lat[1])
        st.e2e.extend(lat[2])


def _add_other_ttft(st: _LevelState, r: RequestRecord, pending: list[float], answer_judged: bool) -> None:
    """Keep the TTFT not judged of a completed request, once the level has seen reasoning. Started at the level's
    first record with reasoning from the judged TTFTs so far (records without reasoning: answer TTFT == any TTFT)
    and ``pending`` (the level's judged TTFTs not yet stored); a record without reasoning never gets here before."""
    other = st.ttft_other
    if other is None:
        other = st.ttft_other = copy.deepcopy(st.ttft)
        other.extend(pending)
    v = slo_defs.any_ttft_ms(r) if answer_judged else slo_defs.answer_ttft_ms(r)
    if v is not None:  # None: reasoning and no answer token (the answer TTFT does not exist)
        other.add(v)


class Monitor:
    """Ingests records (``add``) and produces ``Snapshot``s. Not thread-safe: wrap it
    with ``tui.sources.base.MonitorSink`` when a source thread feeds it."""

    def __init__(self, config: MonitorConfig | None = None, budget: Any = None, source: str = "",
                 budget_origin: str | None = None, judge_at: JudgeAt | None = None) -> None:
        cfg = config or MonitorConfig()
        #: issue 35: a reader's Monitor judges a file at the settings its run header states (``judge_at``: what
        #: the reader's flags change, ``tui.core.verdict_settings.resolve``), settled at the header (before any
        #: request); None: ``config`` as given (the load generator's own Monitor, which writes the header)
        self._judge_at = judge_at
        self.settings: Resolution | None = None
        self._file_settings: FileSettings | None = None  # what the run header states (held against step records)
        #: when a reader re-judges at other settings: a second Monitor at the run's own, for "the run was judged
        #: at 50 ms: FAIL" (fed the same records; only while re-judging)
        self._shadow: Monitor | None = None
        #: a budget given without its memory input (issue 22): completed from the run header (NVML, else the
        #: engine's own KV space) when it comes; until then, and when neither is there, the budget is unknown
        self.memory_pending: MemoryMissing | None = budget if isinstance(budget, MemoryMissing) else None
        if self.memory_pending is not None:
            budget = None
        self.budget = budget
        #: where the budget came from ("flags: ...", "file: ...", the record file's budget record, the teaching case)
        self.budget_origin = budget_origin if budget is not None else None
        self.budget_memory: str | None = memory_label(budget, self.budget_origin)
        self.budget_hint: str | None = (None if self.memory_pending is None
                                        else self.memory_pending.hint(WHY_NO_HEADER))
        self.budget_problem: str | None = None
        #: the engine's startup-log figures (``--server-log``: ``tui.sources.server_log``), shown beside the
        #: memory-only candidate; None: no log given
        self.server_log: dict | None = None
        self._budget_view_key: tuple | None = None
        self._budget_view: BudgetView | None = None
        self.source = source
        self._use_config(cfg)
        # measured requests cancelled (by the user or by servewatch), per (level, round): still open
        # (excluded from the good fraction and the verdict) / already past the SLO (counted as failed)
        self.cancelled_open: dict[tuple, int] = {}
        self.cancelled_late: dict[tuple, int] = {}
        self._rolling_n = cfg.rolling_n
        self._rolling_s = cfg.rolling_s
        self._bucket_s = cfg.bucket_s
        self.header: dict = {}
        self.seq_no = 0
        self.requests_total = 0
        self.warmup_total = 0
        self.malformed = 0
        self.truncated = 0
        self.unknown_types = 0
        self.duplicates = 0
        self.levels_over_cap = 0  # measured request and step records of levels beyond MAX_LEVELS (never judged)
        #: refused lines that may have been measured requests (``LineIssue.request`` not False), by the
        #: (level, round) the line still names, or under None when it names none (it may belong to any level)
        self.unreadable: dict[tuple | None, int] = {}
        self._dups: evidence.Duplicates | None = evidence.Duplicates() if cfg.check_duplicate_ids else None
        #: False when the run header says the file has no time axis (``source.time_axis: "none"``)
        self.time_axis = True
        #: the queue samples' client_in_flight with their times (the delivered-load check; bounded)
        self._queue_in_flight = evidence.QueueInFlight()
        self.examples: list[str] = []
        self.errors_by_class: dict[str, int] = {}
        self.levels: dict[tuple, _LevelState] = {}
        self.current: _LevelState | None = None
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.ids_seen = 0
        # rolling window of measured requests: (t_end, good, ttft_ms|None, failed, out_tokens, tpot_ms|None)
        # bounded by what it shows: the last ``rolling_n`` requests, else those of the last ``rolling_s`` (pruned
        # on every request; at 50 req/s and 60 s, ~3,000 entries), with ROLLING_MAX as a ceiling above 3,333 req/s
        self._roll: deque = deque(maxlen=cfg.rolling_n or ROLLING_MAX)
        self._roll_good = 0
        # the level+round the rolling window shows: the newest one that has measured requests (a level change
        # starts the window afresh; a straggler of an earlier level counts in its level, not in the window)
        self._roll_owner: _LevelState | None = None
        self._recent: deque = deque(maxlen=cfg.recent_rows)
        # sparkline buckets
        self._bucket_idx: int | None = None
        self._bucket_good = 0
        self._bucket_n = 0
        self._bucket_ttfts: list[float] = []
        self._good_series: deque = deque(maxlen=SERIES_LEN)
        self._p95_series: deque = deque(maxlen=SERIES_LEN)
        # queue / gpu / host
        self._queue_latest: QueueSample | None = None
        self._queue_source: str | None = None
        self._waiting_series: deque = deque(maxlen=SERIES_LEN)
        self._running_series: deque = deque(maxlen=SERIES_LEN)
        self._inflight_series: deque = deque(maxlen=SERIES_LEN)
        self._max_waiting: float | None = None
        self._kv_usage_series: deque = deque(maxlen=SERIES_LEN)  # the engine's kv_cache_usage (0..1)
        self._kv_usage_peak: float | None = None
        self._kv_usage_n = 0
        self._client_in_flight: int | None = None
        self._gpu: dict[int, dict] = {}
        self._host: dict = {}
        self._notes: list[str] = []
        self.step_info: dict[tuple, dict] = {}
        #: every step end record in file order: ((level, round), search probe, its fields, its mode)
        self.step_ends: list[tuple[tuple, bool, dict, str | None]] = []
        # every verdict state change a watcher re-checking after each request would have seen
        self._timeline_head: list[tuple] = []
        self._timeline_tail: deque = deque(maxlen=TIMELINE_TAIL)
        self.timeline_omitted = 0
        # evidence problems that forbid a PASS (tui.core.evidence cross-checks, the digest chain, ...): per
        # (level, round), or for every level under the key None; each reason is shown wherever the verdict is
        self._pass_blocks: dict[tuple | None, list[str]] = {}
        self._warm_sends = array("d")  # t_sent of warmup records (the first EVIDENCE_CAP)
        self._warm_tally = crosscheck.Tally()  # warmup records per (level, round): an import's tool counts them
        self.contradictions = 0
        self.finished = False  # ``finish()`` ran: the whole file has been read

    def _use_config(self, cfg: MonitorConfig) -> None:
        """The verdict settings in force (before any request is judged)."""
        self.cfg = cfg
        self.test = MixtureTest(cfg.target, cfg.alpha)
        self.min_requests = max(cfg.min_requests or 0, self.test.min_requests_to_pass())
        self.slo_s = cfg.slo_ttft_ms / 1000.0
        self._slo_ms = cfg.slo_ttft_ms
        self._classify = slo_rule(cfg.slos)  # the one rule (tui.core.slos)

    # ------------------------------------------------------------------ the run's settings (issue 35)
    def _settle(self, items: Iterable) -> list:
        """Before the first request: the settings this file is judged at, from its run header (or none)."""
        items = list(items)
        for it in items:
            if isinstance(it, RunHeader):
                self._adopt(it.data)
                break
            if type(it) is RequestRecord:
                self._adopt(None)
                break
        return items

    def _adopt(self, header: dict | None) -> None:
        at = self._judge_at
        assert at is not None
        self._file_settings = fs = read_header(header)
        res = resolve_settings(fs, at)
        label = ttft_of_label(header)  # an import's TTFT is its tool's: said wherever its settings are (issue 37)
        if label is not None:
            eff = res.effective
            res = dataclasses.replace(res, effective=dataclasses.replace(
                eff, slos=dataclasses.replace(eff.slos, ttft_label=label)))
        self.settings = res
        self._use_config(config_at(self.cfg, res.effective))
        if res.rejudged and res.run is not None:
            self._shadow = Monitor(config_at(self.cfg, res.run), source=self.source)
        for problem in res.problems:
            self.block_pass(problem)

    def _check_step_settings(self, s: StepRecord, block: Any) -> None:
        """A step end record states the settings its step was judged at (as `run` writes them): held against the
        run header's; a difference, or settings the header no longer states, forbids PASS run-wide."""
        step = read_header({"verdict_settings": block})
        own = self._file_settings
        name = evidence.level_name(s.level, s.round, s.mode)
        if step.problems:
            self.block_pass(f"{name}: its step end record's verdict_settings is malformed: the settings it was "
                            "judged at are unknown")
        elif own is None or own.origin != VERDICT_SETTINGS:
            self.block_pass(f"{name}: its step end record states verdict settings ({block.get('text')}) and the run "
                            "header does not: the header's settings were removed or edited")
        else:
            diff = [k for k in step.values if step.values[k] != own.values.get(k)]
            if diff:
                self.block_pass(f"{name}: its step end record states other verdict settings than the run header ("
                                + "; ".join(f"{k}: {step.values[k]!r} vs {own.values.get(k)!r}" for k in diff)
                                + "): the settings were edited")

    def run_settings_monitor(self) -> Monitor:
        """The Monitor that judges at the run's own settings: this one, or the second one when re-judging."""
        return self._shadow if self._shadow is not None else self

    # ------------------------------------------------------------------ evidence problems
    def block_pass(self, reason: str, key: tuple | None = None) -> None:
        """Record an evidence problem that forbids PASS: for the level ``key`` = (level, round), or for every
        level when ``key`` is None. A PASS becomes UNDECIDED with the reason; FAIL stands (a failing server is
        still failing); the reason is listed in the snapshot's ``evidence_problems``."""
        if self._shadow is not None:
            self._shadow.block_pass(reason, key)
        reasons = self._pass_blocks.setdefault(key, [])
        if reason not in reasons:
            reasons.append(reason)
            if key is not None:  # one level's problem: only its verdict changes (per-level work stays linear)
                one = self.levels.get(key)
                if one is not None:
                    one.verdict_cache = None
                return
            for st in self.levels.values():
                st.verdict_cache = None

    def pass_blocks(self, key: tuple | None) -> list[str]:
        """The reasons that forbid PASS for level ``key`` (the run-wide ones first: the duplicates so far)."""
        return (self._run_blocks() + self._pass_blocks.get(None, [])
                + (self._pass_blocks.get(key, []) if key is not None else []))

    def _run_blocks(self) -> list[str]:
        """Run-wide reasons that grow while the file is read (their sentence carries the count so far)."""
        dups = self._dups
        if not self.duplicates or dups is None:
            return []
        problem = dups.problem()
        return [] if problem is None else [problem]

    def evidence_problems(self) -> tuple[str, ...]:
        """Every evidence problem recorded, run-wide first, in the order found."""
        out: list[str] = self._run_blocks() + list(self._pass_blocks.get(None, []))
        for key, reasons in self._pass_blocks.items():
            if key is not None:
                out.extend(r for r in reasons if r not in out)
        return tuple(out)

    def _contradiction(self, r: RequestRecord) -> None:
        """A record that says complete but contradicts itself: judged failed (the outcome rule), counted, shown."""
        self.contradictions += 1
        why = contradiction(r)
        if why is not None and len(self.examples) < MAX_EXAMPLES:
            where = f"{self.source}: " if self.source else ""
            self.examples.append(f"{where}request {r.id!r}: {why}: counted as failed")

    def _mode_of(self, st: _LevelState) -> str | None:
        return row_mode(st.mode, self.header)  # the one rule: the level's own mode, else the header's

    def _cv2(self) -> float:
        """Squared coefficient of variation of the header's arrival process (the achieved-rate tolerance)."""
        ld = self.header.get("load") if self.header else None
        if not isinstance(ld, dict):
            return 1.0
        arr = ld.get("arrival")
        if arr == "constant":
            return 0.0
        b = ld.get("burstiness")
        if arr == "gamma" and isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0:
            return 1.0 / b
        return 1.0

    def delivered(self, st: _LevelState) -> evidence.Delivered:
        """The delivered-load check of a level (tui.core.evidence.delivered), recomputed when the level has grown
        by 2% since the last time (or after ``finish``): the console asks at every tick."""
        n = st.rec_n if st.rec_n < EVIDENCE_CAP else EVIDENCE_CAP
        c = st.delivered_cache
        if c is not None and (c[0] == n or (not self.finished and n - c[0] < max(1, c[0] // 50))):
            return c[1]
        ts = st.times
        step = self.step_info.get((st.level, st.round))
        if st.sessions is not None:  # a session workload: sessions in flight / session starts (issue 23)
            d = evidence.delivered_sessions(st.level, self._mode_of(st), st.sessions, self._slo_ms, self._cv2(),
                                            sends=ts[0::3], ends=ts[1::3], lateness_s=ts[2::3], step=step,
                                            total=st.rec_n, axis=self.time_axis)
        else:
            d = evidence.delivered(st.level, self._mode_of(st), ts[0::3], ts[1::3], ts[2::3], self._slo_ms,
                                   self._cv2(), step=step, queue=self._queue_in_flight, total=st.rec_n,
                                   axis=self.time_axis)
        st.delivered_cache = (n, d)
        return d

    def finish(self) -> None:
        """The whole file has been read: hold what it says against itself (tui.core.evidence) and record every
        contradiction as a reason that forbids PASS. Readers of complete files call it once at the end; a live
        run does not (its steps are still being written)."""
        self.finished = True
        if self._shadow is not None:
            self._shadow.finish()
        header = self.header
        load = header.get("load")
        ld: dict = load if isinstance(load, dict) else {}
        by_key = {(st.level, st.round): st for st in self.levels.values()}
        load_run = completeness.is_load_run(header)  # issue 35: complete or not PASS
        # a step record's verdict was reached at the run's own settings: held against the level judged at those
        # (the second monitor when this one re-judges at a reader's flags), never against a re-judgement
        rs = self.run_settings_monitor()
        settings = rs._settings_words()

        def recomputed(key: tuple) -> str:
            return rs._recomputed_state(rs.levels.get(key) if rs is not self else by_key.get(key))
        # step end records against the request records of their level and round
        if self.step_info:
            for key, info in self.step_info.items():
                st = by_key.get(key)
                name = self._name_of(*key)
                n, err, inc = (st.rec_n, st.rec_err, st.rec_incomplete) if st is not None else (0, 0, 0)
                problem = evidence.step_count_problem(name, info, n, err, err + inc)
                if problem:
                    self.block_pass(problem, key)
                if load_run and not all(isinstance(info.get(k), int) for k in ("requests", "completed", "failed")):
                    self.block_pass(f"{name}: the step record holds no request counts (requests, completed, failed): "
                                    "its request records cannot be checked against it", key)
                for problem in completeness.step_problems(
                        name, info, (n, err, inc),
                        st.err_classes if st is not None else {}, st.times[2::3] if st is not None else (),
                        st.ttft0 if st is not None else (), st.step_over if st is not None else None,
                        recomputed(key), settings):
                    self.block_pass(problem, key)
            for key, st in by_key.items():
                if st.rec_n and key not in self.step_info:
                    name = evidence.level_name(key[0], key[1], self._mode_of(st))
                    self.block_pass(f"{name}: {st.rec_n} request records but no step end record for them (the "
                                    "file has step records for other levels): records added or relabelled", key)
        if load_run:  # its planned steps present in order (or a recorded stop), and its seal
            ends = [(key, probe, info) for key, probe, info, _mode in self.step_ends]
            def held_back(key: tuple) -> bool:  # the delivered-load check, on the whole file
                st = by_key.get(key)
                if st is None or not st.n:
                    return False
                st.delivered_cache = None
                return bool(self.delivered(st).problem)
            for problem in completeness.plan_problems(header, ends, self._name_of, recomputed, held_back):
                self.block_pass(problem)
            problem = completeness.seal_problem(self.records_integrity)
            if problem:
                self.block_pass(problem)
        # planned rounds against those present (a sweep that stopped at a FAIL legitimately has fewer; a load
        # run's plan is held against its steps above)
        stopped_on_fail = bool(ld.get("stop_on_fail")) and any(
            self.verdict_for(st).state == FAIL for st in self.levels.values() if st.n)
        if not stopped_on_fail and not load_run:
            rounds: dict[float | None, list[int]] = {}
            for (lv, rnd), st in by_key.items():
                if st.rec_n:
                    rounds.setdefault(lv, []).append(rnd)
            for lv, present in rounds.items():
                st0 = by_key[(lv, present[0])]
                problem = evidence.rounds_problem(ld.get("rounds"), present,
                                                  evidence.level_name(lv, 1, self._mode_of(st0)).rsplit(" round", 1)[0])
                if problem:
                    for rnd in present:
                        self.block_pass(problem, (lv, rnd))
        # warmup records in the middle of the measured load
        fm = min((min(st.times[0::3]) for st in self.levels.values() if st.times), default=None)
        if fm is not None and self._warm_sends:
            late = sum(1 for t in self._warm_sends if t > fm)
            problem = evidence.warmup_problem(late, self.warmup_total)
            if problem:
                self.block_pass(problem)
        # the loop mode the delivered load is read by: known in a servewatch run, one for header and steps
        run_file = self.run_file()
        for key, st in by_key.items():
            if st.rec_n:
                problem = evidence.mode_problem(ld.get("mode"), (st.mode,), run_file)
                if problem:
                    self.block_pass(f"{evidence.level_name(key[0], key[1], self._mode_of(st))}: {problem}", key)
                if run_file and self._mode_of(st) == "open" and key in self.step_info and \
                        evidence.recorded_p99(self.step_info[key], "open") is None:
                    self.block_pass(f"{evidence.level_name(key[0], key[1], 'open')}: the step record carries no "
                                    "dispatch lateness p99 (lateness_p99_ms): the requests' dispatch times "
                                    "(t_intended) cannot be held against it", key)
        # delivered load: a level not reached can never PASS (shown with the measured figure); recomputed now that
        # the step records and queue samples are all in
        for st in by_key.values():
            st.delivered_cache = None
        for key, st in by_key.items():
            if st.n:
                d = self.delivered(st)
                if d.problem:
                    self.block_pass(f"{evidence.level_name(key[0], key[1], self._mode_of(st))} {d.problem}", key)
        for key, st in by_key.items():
            for problem in self.unjudgeable_problems(st):
                self.block_pass(problem, key)
        self._hold_against_tool_summary()
        if self.contradictions:
            self._notes.append(f"{self.contradictions} request record(s) say complete but contradict themselves (an "
                               "HTTP status other than 2xx, 0 output tokens, an abort/error finish reason or no first "
                               "token): counted as failed")
        for st in self.levels.values():
            st.verdict_cache = None

    def _hold_against_tool_summary(self) -> None:
        """An imported file against its own tool's counts (``source.tool_summary``: tui.core.importers.crosscheck):
        each disagreement forbids PASS run-wide, with both numbers; what was checked is a note."""
        src = self.header.get("source") if self.header else None
        ts = src.get("tool_summary") if isinstance(src, dict) else None
        if ts is None:
            return
        tally = crosscheck.Tally(warmup=self._warm_tally.warmup, unusable=sum(self.unreadable.values()))
        for key, st in self.levels.items():
            if st.rec_n:
                canc = self.cancelled_open.get(key, 0) + self.cancelled_late.get(key, 0)
                tally.measured[key] = crosscheck.Counts(st.rec_n, st.rec_n - st.rec_err - st.rec_incomplete,
                                                        st.rec_err - canc + st.rec_incomplete, canc)
        problems, notes = crosscheck.problems(ts, tally)
        for problem in problems:
            self.block_pass(problem)
        self._notes.extend(n for n in notes if n not in self._notes)

    def _name_of(self, level: float | None, rnd: int) -> str:
        """'concurrency 4 round 1' (the level's own loop mode, else the header's)."""
        st = self.levels.get((level, rnd))
        return evidence.level_name(level, rnd, row_mode(st.mode if st is not None else None, self.header))

    def _recomputed_state(self, st: _LevelState | None) -> str:
        """A level's verdict from its request records alone (its judge, and the unreadable lines that may be
        its requests), before any evidence problem holds it back: what its step record's verdict is held against."""
        if st is None or st.n == 0:
            return INSUFFICIENT_WINDOW
        v = verdict_from_judge(st.judge, self.cfg)
        lost = self.unreadable_requests((st.level, st.round))
        if lost:
            v = self._hold_against_unreadable(st.judge, v, lost)
        return v.state

    def _settings_words(self) -> str:
        cfg = self.cfg
        return (f"{cfg.slos.describe()}, target {cfg.target:.0%}, window {fmt_minutes(cfg.min_window_s)}, "
                f"alpha {cfg.alpha:g}")

    # ------------------------------------------------------------------ records integrity (tui.core.chain)
    records_integrity: Any = None  # the RecordsIntegrity of the file read; None: not verified

    def set_records_integrity(self, integrity: Any) -> None:
        """The digest chain's verification of the file (``tui.core.chain.RecordsIntegrity``): shown in every view;
        each of its problems (a broken chain, a signature that does not verify) forbids PASS run-wide."""
        self.records_integrity = integrity
        if self._shadow is not None:
            self._shadow.set_records_integrity(integrity)
        for problem in integrity.problems:
            self.block_pass(f"records integrity: {problem}")

    # ------------------------------------------------------------------ ingest
    def add_request(self, r: RequestRecord) -> None:
        """``add`` for a request record."""
        self.add_many((r,))

    def add(self, item: Record | LineIssue) -> None:
        """One record or line issue: ``add_many`` of one."""
        self.add_many((item,))

    def _add_other(self, item: Record | LineIssue) -> None:
        """Everything but a request, dispatched by type."""
        if isinstance(item, LineIssue):
            self._add_issue(item)
        elif isinstance(item, QueueSample):
            self._add_queue(item)
        elif isinstance(item, GpuSample):
            self._add_gpu(item)
        elif isinstance(item, RunHeader):
            if not self.header:
                if (self.settings is not None and self.settings.origin == NO_SETTINGS and self.requests_total
                        and read_header(item.data).origin != NO_SETTINGS):
                    self.block_pass("the run header came after request records: the verdict settings it states "
                                    "were not applied")
                self.header = item.data
                self._resolve_memory()
                label = ttft_of_label(item.data)  # an import's TTFT is its tool's, never "answer" (issue 37)
                if label is not None and self.cfg.slos.ttft_label != label:
                    self.cfg = dataclasses.replace(self.cfg, slos=dataclasses.replace(self.cfg.slos, ttft_label=label))
                    for st in self.levels.values():
                        st.verdict_cache = None
                self._header_axis()
            else:
                self._notes.append("more than one run header: the first is shown")
        elif isinstance(item, StepRecord):
            self._add_step(item)
        elif isinstance(item, HostSample):
            self._host = {
                "cpu_percent": item.cpu_percent,
                "memory_used": item.memory_used,
                "memory_total": item.memory_total,
                "client_cpu_percent": item.client_cpu_percent,
            }
        elif isinstance(item, BudgetRecord):
            self._add_budget_record(item)
        # anything else: ignored on purpose (parse_lines already counted unknown types)

    def _header_axis(self) -> None:
        """A header that says the file has no time axis (an import whose requests all start at one instant, their
        other times derived): no identical-times duplicate rule (equal durations by rounding are not copies), no
        delivered-load check."""
        src = provenance.source_block(self.header) or {}
        self.time_axis = src.get("time_axis") != "none"
        if self._dups is not None:
            self._dups.times = self.time_axis

    def run_file(self) -> bool:
        """The header says a servewatch load run wrote the file (source kind "run" or "trace"; a header without a
        valid source block counts when it names servewatch, a digest chain or a run id): its loop mode is required."""
        h = self.header
        if not h:
            return False
        ld = h.get("load")
        if h.get("synthetic") is True and isinstance(ld, dict) and ld.get("mode") == "synthetic":
            return False  # a SYNTHETIC teaching file says so (never exits 0): not a run
        src = provenance.source_block(h)
        if src is not None:
            return src.get("kind") in ("run", "trace")
        return h.get("tool") == "servewatch" or "chain" in h or "run_id" in h

    def _resolve_memory(self) -> None:
        """A budget given without its memory: complete it from the run header (tui.core.budget.memory.resolve)."""
        pending = self.memory_pending
        if pending is None:
            return
        res = resolve(pending, self.header)
        self.budget, self.budget_origin, self.budget_memory = res.budget, res.origin, res.memory
        self.budget_hint = res.hint

    def _add_budget_record(self, item: BudgetRecord) -> None:
        """The record file's budget: used (verified like --budget FILE) unless one was given for this view."""
        if self.budget is not None or self.memory_pending is not None:
            given = self.budget_origin or (self.memory_pending.origin if self.memory_pending else None)
            if self.budget_origin != ORIGIN_RECORD:
                self._notes.append(f"the record file carries a budget record; the budget given ({given}) "
                                   "is shown instead")
            return
        try:
            self.budget = budget_from_record(item.data)
        except (BudgetError, ValueError, TypeError, KeyError) as exc:
            self.budget_problem = f"the record file's budget record failed verification: {str(exc)[:200]}"
            self._notes.append(self.budget_problem + "; budget unknown")
            return
        self.budget_origin = ORIGIN_RECORD
        self.budget_memory = memory_label(self.budget, ORIGIN_RECORD)

    def usable_lines(self) -> int:
        """Lines read that were records this reader can use (every ``add`` minus the problem lines)."""
        return self.seq_no - self.malformed - self.truncated - self.unknown_types

    def _add_issue(self, issue: LineIssue) -> None:
        if issue.kind == "unknown_type":
            self.unknown_types += 1
        elif issue.kind == "truncated":
            self.truncated += 1
        else:
            self.malformed += 1
        if issue.kind in ("malformed", "truncated") and issue.request is not False:
            key = issue.level_round
            if key is not None and key not in self.unreadable and len(self.unreadable) >= MAX_LEVELS:
                key = None  # beyond the level cap: counted against every level (the stricter), never dropped
            self.unreadable[key] = self.unreadable.get(key, 0) + 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(str(issue))

    def _state_for(self, level: float | None, rnd: int) -> _LevelState | None:
        """The state of level (level, round), made on its first record; None beyond ``MAX_LEVELS`` distinct ones
        (the caller counts the record as over the cap: ``_over_cap``)."""
        key = (level, rnd)
        st = self.levels.get(key)
        if st is None:
            if len(self.levels) >= MAX_LEVELS:
                return None
            st = self.levels[key] = _LevelState(level, rnd, self.test, self.cfg, self.min_requests)
            st.order = len(self.levels)
        return st

    def _over_cap(self, level: float | None, rnd: int) -> None:
        """A record of a level beyond the first ``MAX_LEVELS``: counted, never judged, and no level of the run can
        PASS (a file that holds more levels than are judged is not judged whole)."""
        self.levels_over_cap += 1
        if self.levels_over_cap == 1:
            name = evidence.level_name(level, rnd, None)
            self.block_pass(f"the run holds more than {MAX_LEVELS:,} distinct levels (level, round), the most "
                            f"servewatch judges: the records of the levels after the first {MAX_LEVELS:,} (from "
                            f"{name} on) are counted and reported, never judged")

    def _add_step(self, s: StepRecord) -> None:
        st = self._state_for(s.level, s.round)
        if st is None:
            self._over_cap(s.level, s.round)
            return
        if s.mode:
            st.mode = s.mode
        if s.event == "start":
            self.current = st
        else:
            info = s.info
            if info.get("saturated"):
                st.saturated = True
            if info.get("client_limited"):  # the records say so too (derived there); a step record can only add it
                st.client_step = True
                st.verdict_cache = None
            if info.get("degraded"):
                st.degraded = (f"degraded: a load worker was lost during this step ({info.get('worker_lost', '?')} "
                               "requests in flight recorded as worker_lost); the level was not held, so it cannot PASS")
                st.verdict_cache = None
            lp = info.get("lateness_p99_ms")
            if isinstance(lp, (int, float)):
                st.lateness_p99_ms = float(lp)
            if self._judge_at is not None and "verdict_settings" in info:
                self._check_step_settings(s, info["verdict_settings"])
            self.step_info[(s.level, s.round)] = dict(info)
            self.step_ends.append(((s.level, s.round), info.get("search_probe") is True, info, s.mode))

    def add_many(self, items: Iterable) -> None:
        """Ingest records and line issues in order: the one ingest path (``add`` is a batch of one).

        The hot path of every reader (1M-record reports and replays): per request a few attribute
        reads, the outcome rule (``tui.core.records.outcome_rule``, its one definition), the level's
        judge and two tuples; what does not change within a batch is looked up once per batch."""
        if self._judge_at is not None:  # a reader: the run's settings first (once), then both judges when re-judging
            if self.settings is None:
                items = self._settle(items)
            if self._shadow is not None:
                if not isinstance(items, (list, tuple)):
                    items = list(items)
                self._shadow.add_many(items)
        classify = self._classify
        answer_judged = self.cfg.slos.ttft_of == "answer"
        recent_append = self._recent.append
        errors = self.errors_by_class
        roll = self._roll
        roll_append = roll.append
        roll_max = roll.maxlen
        rolling_n = self._rolling_n
        horizon_s = self._rolling_s
        bucket_s = self._bucket_s
        timeline_add = self._timeline_add
        dups = self._dups
        # the one duplicate rule (tui.core.evidence.Duplicates.check), inlined: a call per record costs more than
        # the check (bench/bench_report.py); tests/unit/core/test_delivered_forgery.py holds the two equal
        seen = seen_add = None
        dup_times = dup_hashed = False
        max_sent = max_end = -math.inf
        if dups is not None:
            seen = dups.seen
            seen_add = seen.add
            dup_times, dup_hashed = dups.times, dups.hashed
            max_sent, max_end = dups.max_sent, dups.max_end
            bs_ts, bs_te, bs_tf = (a.append for a in dups.by_sent)
            be_ts, be_te, be_tf = (a.append for a in dups.by_end)
        st = self.current
        seq = self.seq_no
        requests = 0
        # TTFT / TPOT values of level ``st`` not yet in its stores: stored when the level changes and at
        # the end of the batch (a store keeps values, not their order), so a snapshot sees them all
        ttfts: list[float] = []
        lat: tuple[list, list, list] = ([], [], [])  # new TPOT, ITL, E2E values (the same batching)
        tp_add, itl_add, e2e_add = lat[0].append, lat[1].append, lat[2].append
        try:
            for r in items:
                seq += 1
                if type(r) is not RequestRecord:
                    if ttfts or lat[2]:
                        _store(st, ttfts, lat)
                        ttfts = []
                        lat = ([], [], [])
                        tp_add, itl_add, e2e_add = lat[0].append, lat[1].append, lat[2].append
                    self.seq_no = seq
                    self._add_other(r)
                    st = self.current
                    if dups is not None:
                        dup_times = dups.times  # a run header says whether the file has a time axis
                    continue
                t_end = r.t_end
                t_sent = r.t_sent
                if seen is not None:  # the one duplicate rule: counted once, shown, forbids PASS
                    h = hash(r.id)
                    if h in seen:
                        dups.count(h, True)  # type: ignore[union-attr]
                        self._duplicate(r, evidence.SAME_ID)
                        continue
                    if dup_times:
                        if dup_hashed:  # a file in no order: every record by the hash of its times
                            tf = r.t_first_token
                            k = hash((t_sent, -1.0 if tf is None else tf, t_end))  # Duplicates.repeated's key
                            if k in seen:
                                dups.count(k, False)  # type: ignore[union-attr]
                                self._duplicate(r, evidence.SAME_TIMES)
                                continue
                            seen_add(k)  # type: ignore[misc]
                        elif t_sent > max_sent:  # after every earlier send: cannot repeat earlier times
                            max_sent = t_sent
                            if t_end > max_end:
                                max_end = t_end
                            tf = r.t_first_token
                            bs_ts(t_sent)
                            bs_te(t_end)
                            bs_tf(-1.0 if tf is None else tf)  # evidence.NO_FIRST
                        elif t_end > max_end:  # after every earlier end: neither
                            max_end = t_end
                            tf = r.t_first_token
                            be_ts(t_sent)
                            be_te(t_end)
                            be_tf(-1.0 if tf is None else tf)
                        elif dups.repeated(t_sent, r.t_first_token, t_end):  # type: ignore[union-attr]
                            # (this call may have turned the rule to hashes: every later record by its hash)
                            dup_hashed = dups.hashed  # type: ignore[union-attr]
                            self._duplicate(r, evidence.SAME_TIMES)
                            continue
                        else:
                            dup_hashed = dups.hashed  # type: ignore[union-attr]
                    seen_add(h)  # type: ignore[misc]
                requests += 1
                ft = self.first_t
                if ft is None or t_sent < ft:
                    self.first_t = t_sent
                lt = self.last_t
                if lt is None or t_end > lt:
                    self.last_t = t_end
                err = r.error
                if err is not None:
                    c = errors.get(err)
                    if c is None and len(errors) >= MAX_ERROR_CLASSES:  # a class named per record: bounded
                        errors[OTHER_ERRORS] = errors.get(OTHER_ERRORS, 0) + 1
                    else:
                        errors[err] = 1 if c is None else c + 1
                outcome, ttft_ms, misses = classify(r)  # the one rule: tui.core.slos.slo_rule
                recent_append((r, outcome, ttft_ms))  # rows are built at snapshot time only
                if r.phase != "measure":
                    self.warmup_total += 1
                    ws = self._warm_sends
                    if len(ws) < EVIDENCE_CAP:
                        ws.append(t_sent)
                    self._warm_tally.count((r.level, r.round), True, r.complete, err)
                    continue
                if st is None or st.level != r.level or st.round != r.round:
                    if ttfts or lat[2]:
                        _store(st, ttfts, lat)
                        ttfts = []
                        lat = ([], [], [])
                        tp_add, itl_add, e2e_add = lat[0].append, lat[1].append, lat[2].append
                    nst = self._state_for(r.level, r.round)
                    if nst is None:  # beyond MAX_LEVELS distinct levels: counted, never judged
                        self._over_cap(r.level, r.round)
                        continue
                    st = self.current = nst
                # what the file says about this level, for the cross-checks (tui.core.evidence)
                rn = st.rec_n = st.rec_n + 1
                if err is not None:
                    st.rec_err += 1
                    ec = st.err_classes
                    ec[err] = ec.get(err, 0) + 1
                else:
                    if not r.complete:
                        st.rec_incomplete += 1
                    elif outcome == FAILED:
                        self._contradiction(r)
                    tf = r.t_first_token  # the step record's TTFT (tui.core.completeness)
                    if len(st.ttft0) < EVIDENCE_CAP:
                        st.ttft0.append(_INF if tf is None else tf - t_sent)
                    else:
                        _step_over(st).add_ttft(_INF if tf is None else tf - t_sent)
                if rn <= EVIDENCE_CAP:  # rec_n == len(times) / 3 up to the cap
                    st.times.extend((t_sent, t_end, t_sent - r.t_intended))
                else:
                    _step_over(st).add_lateness(t_sent - r.t_intended)
                if r.session is not None:  # a session workload (issue 23): its spans, bounded by EVIDENCE_CAP
                    sp = st.sessions
                    if sp is None:
                        sp = st.sessions = evidence.SessionSpans(EVIDENCE_CAP)
                    sp.add(r.session, r.turn, r.t_intended, t_sent, t_end)
                if err == "cancelled":
                    key = (r.level, r.round)
                    if outcome == EXCLUDED:  # still open when cancelled: counted and shown, never judged
                        self.cancelled_open[key] = self.cancelled_open.get(key, 0) + 1
                        continue
                    self.cancelled_late[key] = self.cancelled_late.get(key, 0) + 1
                elif err == CLIENT and outcome == EXCLUDED:  # the client's own resources ran out: unknown
                    self._client_unknown(st, r, t_sent, t_end)
                    continue
                # counted tokens: one tuple and one dict update (TokenTally.pending, tallied when read)
                tk = st.tokens.pending
                # a session's turn asked its whole prompt (context_tokens), not only its user message
                asked_in = r.input_tokens_asked if r.session is None or r.context_tokens is None else r.context_tokens
                tkey = (asked_in, r.usage_input_tokens, r.input_tokens, r.output_tokens_asked,
                       r.usage_output_tokens, r.output_chunks, r.output_tokens)  # token_counts.record_key
                c = tk.get(tkey)
                if c is None:
                    tk[tkey] = 1
                    if len(tk) > st.tokens.cap:
                        st.tokens.flush()
                else:
                    tk[tkey] = c + 1
                pc = st.pcache  # the server's prefix-cache count (issue 23): a count, and the rest when it said
                if r.cached_tokens is None:
                    pc.n += 1
                else:
                    pc.add_record(r)
                good = outcome == "good"
                failed = outcome == "failed"
                # nothing missed, but an SLO in force could not be judged (the record lacks what it needs): unknown.
                # Never shown or counted as good, and PASS is blocked (unjudgeable_problems); the judge counts it
                # good, so a FAIL holds even if every such request was good (the upper bound), never a FAIL made of
                # requests nobody saw miss
                unjudged = outcome == EXCLUDED
                n = st.n = st.n + 1
                if r.turn is not None:  # the per-turn table (issue 23): the same outcome, the same TTFT
                    tt = st.turns
                    if tt is None:
                        tt = st.turns = turns.TurnTable()
                    tt.add(r.turn, good, None if failed else ttft_ms, r.context_tokens, r.input_tokens)
                if st.first_t is None or t_sent < st.first_t:
                    st.first_t = t_sent
                if st.last_t is None or t_end > st.last_t:
                    st.last_t = t_end
                tpot_ms = None
                ot = r.output_tokens or 0
                if failed:
                    st.failed += 1
                else:
                    if good:
                        st.good += 1
                    elif unjudged:
                        st.unjudged += 1
                    else:
                        st.slow += 1
                    st.completed += 1
                    if st.ttft_other is not None or r.t_first_reasoning is not None:  # both TTFTs exist
                        _add_other_ttft(st, r, ttfts, answer_judged)
                    if ttft_ms is not None:  # None: reasoning and no answer token (a TTFT miss, tui.core.slos)
                        ttfts.append(ttft_ms)
                    if misses:
                        combos = st.combos
                        combos[misses] = combos.get(misses, 0) + 1
                    if ot:
                        st.out_tokens += ot
                        if good:
                            st.good_out_tokens += ot
                    # the per-token metrics (tui.core.slos: one derivation each; inlined on the hot path)
                    tl = r.t_last_token
                    if tl is None:
                        e2e_add((t_end - t_sent) * 1000.0)
                    else:
                        e2e_add((tl - t_sent) * 1000.0)
                        nt = r.usage_output_tokens
                        if nt is None:
                            nt = r.output_chunks
                            if nt is None:
                                nt = ot
                        if nt > 1:  # the one TPOT (tui.core.slos.tpot_ms): also the rolling window's and the P50's
                            tpot_ms = (tl - r.t_first_token) * 1000.0 / (nt - 1)  # type: ignore[operator]
                            tp_add(tpot_ms)
                    gap = r.itl_max_ms
                    if gap is None and r.token_offsets is not None:
                        gap = itl_ms(r)
                    if gap is not None:
                        itl_add(gap)
                # the verdict: one judge per level, re-checked after every measured outcome (its window
                # starts when the level's first measured request was sent)
                judge = st.judge
                before = judge.state
                judge.add(t_end, good or unjudged, t_sent)
                if judge.state != before or n == 1:  # the first check of a level is what a watcher sees first
                    timeline_add(st, judge.state, n, t_end)
                # rolling window: the current level's last ``rolling_n`` requests, else those that ended in the last
                # ``rolling_s``
                owner = self._roll_owner
                if st is not owner and (owner is None or st.order > owner.order):
                    roll.clear()
                    self._roll_good = 0
                    owner = self._roll_owner = st
                if st is owner:
                    if len(roll) == roll_max:
                        self._roll_good -= roll[0][1]
                    roll_append((t_end, good, ttft_ms, failed, ot, tpot_ms))
                    if good:
                        self._roll_good += 1
                    if rolling_n:
                        while len(roll) > rolling_n:
                            self._roll_good -= roll.popleft()[1]
                    else:
                        horizon = t_end - horizon_s
                        while roll and roll[0][0] < horizon:
                            self._roll_good -= roll.popleft()[1]
                # sparkline buckets
                bidx = int(t_end // bucket_s)
                if bidx != self._bucket_idx:
                    if self._bucket_idx is not None:
                        self._close_bucket()
                    self._bucket_idx = bidx
                self._bucket_n += 1
                if good:
                    self._bucket_good += 1
                if ttft_ms is not None:
                    bt = self._bucket_ttfts
                    if len(bt) < 20_000:
                        bt.append(ttft_ms)
        finally:
            if ttfts or lat[2]:
                _store(st, ttfts, lat)
            self.seq_no = seq
            self.requests_total += requests
            if dups is not None:
                dups.max_sent, dups.max_end = max_sent, max_end

    def _client_unknown(self, st: _LevelState, r: RequestRecord, t_sent: float, t_end: float) -> None:
        """A measured request the client itself could not carry out (``error: "client"``, outcome still open):
        counted per errno name, never in the level's n / good / failed (not the server's outcome); the judge counts
        it good, so a FAIL is one the server's failures alone prove (``_client_limited`` forbids PASS)."""
        st.client += 1
        kind = clientlimit.kind_of(r.error_detail)
        st.client_kinds[kind] = st.client_kinds.get(kind, 0) + 1
        judge = st.judge
        before = judge.state
        judge.add(t_end, True, t_sent)
        if judge.state != before or judge.n == 1:
            self._timeline_add(st, judge.state, judge.n, t_end)

    def client_limited_text(self, st: _LevelState) -> str | None:
        """The client_limited sentence of a level (what ran out, what to do), or None when it is not."""
        if st.client:
            return clientlimit.describe(st.client, st.client_kinds, clientlimit.fd_limit_of(self.header),
                                        self._mode_of(st), of=st.client + st.n)
        if st.client_step:
            return ("client_limited: the step record says the client ran out of its own resources (no request record "
                    "of the level shows it)")
        return None

    def _client_limited(self, st: _LevelState, v: Verdict) -> Verdict:
        """A client-limited level: it cannot PASS; FAIL only when the server's failures alone prove it (the judge
        counted the client's failures good); otherwise UNDECIDED with what ran out and what to do."""
        text = self.client_limited_text(st)
        if text is None:
            return v
        if v.state == FAIL:
            if not st.client:
                return v
            return dataclasses.replace(v, reason=(
                f"FAIL on the server's failures alone ({text}). The {st.client:,} requests that failed in the client "
                f"are counted good here (their outcome at the server is unknown: the most favourable case) and the "
                f"evidence still shows FAIL: {v.reason}"))
        if st.n:
            server = (f"the server's own outcomes ({st.good:,} good of the {st.n:,} requests it answered or failed) "
                      "do not show FAIL")
        else:
            server = "the server saw none of them"
        prev = v.reason if v.reason.startswith("cannot PASS: ") else None
        return dataclasses.replace(v, state=UNDECIDED, missing=None, reason=(
            f"cannot PASS: {text}. Their outcome at the server is unknown, so the level cannot PASS, and {server}."
            + (f" Also {prev}" if prev else "")))

    def _timeline_add(self, st: _LevelState, state: VerdictState, n: int, t: float) -> None:
        entry = (st.level, st.round, state, n, t)
        if len(self._timeline_head) < TIMELINE_HEAD:
            self._timeline_head.append(entry)
            return
        tail = self._timeline_tail
        if len(tail) == tail.maxlen:
            self.timeline_omitted += 1
        tail.append(entry)

    def timeline(self) -> tuple[tuple, ...]:
        """(level, round, state, n, t) for every verdict state change, in arrival order: the first
        TIMELINE_HEAD and the last TIMELINE_TAIL of them (``timeline_omitted`` counts the rest)."""
        return tuple(self._timeline_head) + tuple(self._timeline_tail)

    def _duplicate(self, r: RequestRecord, how: int) -> None:
        self.duplicates += 1
        if len(self.examples) < MAX_EXAMPLES:
            where = f"{self.source}: " if self.source else ""
            if how == evidence.SAME_TIMES:
                self.examples.append(f"{where}request {r.id!r} has the send, first-token and end times of an earlier "
                                     "request under another id: counted once (the first)")
            else:
                self.examples.append(f"{where}request id {r.id!r} appears again: counted once (the first)")

    def _close_bucket(self) -> None:
        if self._bucket_n:
            self._good_series.append(self._bucket_good / self._bucket_n)
            v = stats.nearest_rank(sorted(self._bucket_ttfts), 0.95)
            self._p95_series.append(v if v is not None else 0.0)
        self._bucket_good = self._bucket_n = 0
        self._bucket_ttfts = []

    def _add_queue(self, q: QueueSample) -> None:
        if q.client_in_flight is not None:
            self._client_in_flight = q.client_in_flight
            self._queue_in_flight.add(q.t, q.client_in_flight)
            self._inflight_series.append(float(q.client_in_flight))
        if q.source in ("none", "client"):
            return
        self._queue_latest = q
        self._queue_source = q.source
        u = q.kv_cache_usage
        if u is not None and math.isfinite(u) and u >= 0:
            self._kv_usage_series.append(u)
            self._kv_usage_n += 1
            self._kv_usage_peak = u if self._kv_usage_peak is None else max(self._kv_usage_peak, u)
            cur = self.current
            if cur is not None:
                cur.peak_kv_usage = u if cur.peak_kv_usage is None else max(cur.peak_kv_usage, u)
        if q.waiting is not None:
            self._waiting_series.append(q.waiting)
            self._max_waiting = q.waiting if self._max_waiting is None else max(self._max_waiting, q.waiting)
            st = self.current
            if st is not None:
                st.max_waiting = q.waiting if st.max_waiting is None else max(st.max_waiting, q.waiting)
                if math.isfinite(q.waiting):
                    st.waiting_sum += q.waiting
                    st.waiting_n += 1
        if q.running is not None:
            self._running_series.append(q.running)

    def _add_gpu(self, g: GpuSample) -> None:
        if g.device not in self._gpu and len(self._gpu) >= MAX_GPU_DEVICES:
            return  # a device number per sample would grow without end: the first MAX_GPU_DEVICES are shown
        d = self._gpu.setdefault(g.device, {"series": deque(maxlen=SERIES_LEN), "peak": None})
        d["name"] = g.name
        d["util"] = g.utilization
        used = None if g.memory_used is None else g.memory_used / GIB
        d["used"] = used
        d["total"] = None if g.memory_total is None else g.memory_total / GIB
        if used is not None:
            d["series"].append(used)
            d["peak"] = used if d["peak"] is None else max(d["peak"], used)
            st = self.current
            if st is not None:
                st.peak_gpu_gib = used if st.peak_gpu_gib is None else max(st.peak_gpu_gib, used)

    def set_client_in_flight(self, n: int) -> None:
        self._client_in_flight = n

    # ------------------------------------------------------------------ snapshot
    def _window_from_state(self, st: _LevelState | None) -> WindowStat:
        cfg = self.cfg
        if st is None or st.n == 0:
            return self._empty_window("cumulative")
        if st.ttft.approximate:
            ttft = tuple(
                Percentile(q=q, value_ms=st.ttft.quantile(q), n=st.ttft.n,
                           supported=st.ttft.n >= stats.n_needed(q), n_needed=stats.n_needed(q), approximate=True)
                for q in stats.QUANTILES
            )
            ttft_inf = ttft  # documented: beyond the exact cap only the completed-only reading is kept exactly
        else:
            srt = st.sorted_ttfts()
            ttft = stats.percentiles(srt)
            ttft_inf = stats.percentiles(srt, extra_inf=st.failed)
        secs = max(0.0, (st.last_t or 0) - (st.first_t or 0))
        lo, hi = stats.wilson(st.good, st.n)
        frac = st.good / st.n
        misses, combos, nojudge = st.miss_counts()
        return WindowStat(
            label="cumulative",
            good=FractionStat(st.good, st.n, frac, lo, hi, fraction_severity(frac, cfg.target)),
            ttft=ttft,
            ttft_fail_inf=ttft_inf,
            completed=st.completed,
            failed=st.failed,
            slow=st.slow,
            req_per_s=st.n / secs if secs > 0 else None,
            output_tok_per_s=st.out_tokens / secs if secs > 0 else None,
            goodput_per_s=st.good / secs if secs > 0 else None,
            tpot_ms_p50=st.tpot.quantile(0.5),
            seconds=secs,
            latency={"ttft": ttft, "tpot": st.percentiles_of("tpot", st.tpot), "itl": st.percentiles_of("itl", st.itl),
                     "e2e": st.percentiles_of("e2e", st.e2e), **self._both_ttfts(st, ttft)},
            misses=misses, miss_combos=combos, unjudgeable=nojudge,
            good_output_tok_per_s=st.good_out_tokens / secs if secs > 0 else None,
        )

    def _both_ttfts(self, st: _LevelState, judged: tuple[Percentile, ...]) -> dict[str, tuple[Percentile, ...]]:
        """``{"ttft_answer": ..., "ttft_any": ...}`` when the level saw reasoning (both TTFTs exist), else {}."""
        if st.ttft_other is None:
            return {}
        other = st.percentiles_of("ttft_other", st.ttft_other)
        if self.cfg.slos.ttft_of == "answer":
            return {"ttft_answer": judged, "ttft_any": other}
        return {"ttft_answer": other, "ttft_any": judged}

    def _empty_window(self, label: str) -> WindowStat:
        return WindowStat(
            label=label,
            good=FractionStat(0, 0, None, None, None, NA),
            ttft=stats.percentiles([]),
            ttft_fail_inf=stats.percentiles([]),
            completed=0, failed=0, slow=0, req_per_s=None, output_tok_per_s=None,
            goodput_per_s=None, tpot_ms_p50=None, seconds=0.0,
        )

    def _rolling(self) -> WindowStat:
        cfg = self.cfg
        label = f"last {cfg.rolling_n} requests" if cfg.rolling_n else f"last {cfg.rolling_s:g} s"
        owner = self._roll_owner
        if owner is not None and owner.level is not None:
            label += f" of level {fmt_level(owner.level)}"
        roll = self._roll
        n = len(roll)
        if n == 0:
            return self._empty_window(label)
        ttfts = sorted(x[2] for x in roll if not x[3] and x[2] is not None)
        failed = sum(1 for x in roll if x[3])
        good = self._roll_good
        tpots = sorted(x[5] for x in roll if x[5] is not None)
        out_tok = sum(x[4] for x in roll if not x[3])
        secs = cfg.rolling_s if not cfg.rolling_n else max(0.0, roll[-1][0] - roll[0][0])
        span = max(0.0, roll[-1][0] - roll[0][0])
        secs = min(secs, span) if span > 0 else 0.0
        lo, hi = stats.wilson(good, n)
        frac = good / n
        return WindowStat(
            label=label,
            good=FractionStat(good, n, frac, lo, hi, fraction_severity(frac, cfg.target)),
            ttft=stats.percentiles(ttfts),
            ttft_fail_inf=stats.percentiles(ttfts, extra_inf=failed),
            completed=n - failed,
            failed=failed,
            slow=n - failed - good,
            req_per_s=n / secs if secs > 0 else None,
            output_tok_per_s=out_tok / secs if secs > 0 else None,
            goodput_per_s=good / secs if secs > 0 else None,
            tpot_ms_p50=stats.nearest_rank(tpots, 0.5),
            seconds=secs,
        )

    def verdict_for(self, st: _LevelState | None) -> Verdict:
        """The verdict of one level: the state its ``LevelJudge`` reached after the last measured
        request (the console, report, run, sweep and accept all read it from here)."""
        cfg = self.cfg
        thr = self.test.threshold
        if st is None or (st.n == 0 and not st.client):
            return Verdict(
                state=INSUFFICIENT_WINDOW, reason="no measured requests yet",
                missing=f"need {self.min_requests} more requests, {fmt_minutes(cfg.min_window_s)} more",
                n=0, good=0, elapsed_s=0.0, need_requests=self.min_requests, need_seconds=cfg.min_window_s,
                e_pass=1.0, e_fail=1.0, threshold=thr, vif=1.0, n_eff=0.0, bursty=False,
                target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha,
            )
        j = st.judge
        lost = self.unreadable_requests((st.level, st.round))
        key = (j.n, j.good, j.t_last, j.vif, lost, self.duplicates)
        c = st.verdict_cache
        if c is None or c[0] != key:  # the verdict is a function of the judge; the load generator asks often
            v = verdict_from_judge(j, cfg, st.unjudged)
            if lost:
                v = self._hold_against_unreadable(j, v, lost)
            if st.degraded and v.state == "PASS":
                v = dataclasses.replace(v, state="UNDECIDED", reason=st.degraded)
            blocks = self.pass_blocks((st.level, st.round))
            nj = self.unjudgeable_problems(st)
            if nj:
                blocks = blocks + [b for b in nj if b not in blocks]
            if not self.finished and v.state == PASS:  # live: the load must have been delivered (finish() adds it)
                d = self.delivered(st)
                if d.problem:
                    blocks = blocks + [d.problem]
            if blocks and v.state == PASS:
                v = dataclasses.replace(v, state=UNDECIDED, reason="cannot PASS: " + "; ".join(blocks))
            if st.unjudged and v.state == FAIL:
                v = dataclasses.replace(v, reason=v.reason + f" This holds even counting the {st.unjudged} requests "
                                        "not judgeable on an SLO as good (they are not shown as good).")
            if st.client or st.client_step:
                v = self._client_limited(st, v)
            c = st.verdict_cache = (key, v)
        return c[1]

    def unreadable_requests(self, key: tuple) -> int:
        """Refused lines that may have been measured requests of level ``key`` = (level, round): those that still
        name it, plus those that name no level (counted against every level)."""
        u = self.unreadable
        return u.get(None, 0) + u.get(key, 0) if u else 0

    def _hold_against_unreadable(self, j: LevelJudge, v: Verdict, lost: int) -> Verdict:
        """A FAIL must hold even if every one of the ``lost`` unreadable request lines had been good, a PASS even
        if every one had failed: the same judge re-checked with them added (``LevelJudge.with_unknown``; for a
        FAIL as one burst of good outcomes, which the dependence correction sees, so that a FAIL is kept only if it
        would hold wherever they were; for a PASS under the correction in force: a burst of failures in a run
        without any would make every PASS UNDECIDED over one line); otherwise the level is UNDECIDED and the reason names the count."""
        if v.state != FAIL and v.state != PASS:
            return v
        alt = j.with_unknown(0, lost, burst=False) if v.state == PASS else j.with_unknown(lost, lost, burst=True)
        if v.state == FAIL and alt.state != FAIL and j.closed().state != FAIL:
            # closing the open batches alone (nothing added) already changes the state: the batch-means estimate
            # moves with the last, partial batch, not with the unreadable lines. Judge them under the correction
            # in force instead, as outcomes added at the end
            alt = j.with_unknown(lost, lost, burst=False)
        as_what = "good" if v.state == FAIL else "failed"
        if alt.state == v.state:
            lines = "line" if lost == 1 else "lines"
            return dataclasses.replace(v, reason=v.reason + f" This holds even counting the {lost} unreadable "
                                       f"request {lines} as {as_what}.")
        anywhere = self.unreadable.get(None, 0)
        where = (f" ({anywhere} of them name no level and are counted against every level)" if anywhere else "")
        return dataclasses.replace(v, state=UNDECIDED, reason=(
            f"{lost} request {'line' if lost == 1 else 'lines'} unreadable: counted as {as_what} "
            f"{'it' if lost == 1 else 'they'} would change this {v.state}{where}; "
            f"their outcome is unknown, so the verdict is not decided. Judged on the readable lines: " + v.reason))

    def unjudgeable_problems(self, st: _LevelState) -> list[str]:
        """One sentence per SLO in force that some completed requests of the level could not be judged on (never
        good; each forbids PASS): "TPOT not judgeable on 400 of 400 requests: the file has no last-token times"."""
        out: list[str] = []
        if not any(bits >> NOJUDGE_SHIFT for bits in st.combos):
            return out
        nojudge = st.miss_counts()[2]
        name = evidence.level_name(st.level, st.round, self._mode_of(st))
        for slo, k in nojudge.items():
            out.append(f"{name}: {slo} not judgeable on {k} of {st.rec_n} requests: the file has no {NEEDS[slo]}")
        return out

    def _missed_text(self, r: RequestRecord, outcome: str) -> str:
        """Which SLOs a slow request missed ("TTFT+TPOT") and which it could not be judged on ("ITL?"): the one
        rule again, for the capped recent rows only (the hot path keeps no per-request miss bits)."""
        if outcome != SLOW and outcome != EXCLUDED:
            return ""
        bits = self._classify(r)[2]
        return "+".join(miss_names(bits & MISS_MASK) + tuple(f"{n}?" for n in miss_names(bits >> NOJUDGE_SHIFT)))

    def level_rows(self) -> tuple[LevelRow, ...]:
        rows = []
        for st in self.levels.values():
            if st.n == 0 and not st.client:
                continue
            d = self.delivered(st)
            problems = self.pass_blocks((st.level, st.round))
            problems = problems + [p for p in self.unjudgeable_problems(st) if p not in problems]
            limited = self.client_limited_text(st)
            if limited is not None:
                problems.append(limited)
            rows.append(LevelRow(
                level=st.level, round=st.round, mode=st.mode, window=self._window_from_state(st),
                verdict=self.verdict_for(st), saturated=st.saturated, lateness_p99_ms=st.lateness_p99_ms,
                max_waiting=st.max_waiting, peak_gpu_gib=st.peak_gpu_gib,
                mean_waiting=st.waiting_sum / st.waiting_n if st.waiting_n else None, queue_samples=st.waiting_n,
                peak_kv_usage=st.peak_kv_usage,
                cancelled_open=self.cancelled_open.get((st.level, st.round), 0),
                delivered=d.figure, not_reached=d.problem,
                problems=tuple(problems),
                server_histograms=self.step_info.get((st.level, st.round), {}).get("server_histograms"),
                tokens=st.tokens.summary(),
                turns=None if st.turns is None else st.turns.rows(),
                prefix_cache=prefix_cache_summary(
                    st.pcache, (self.step_info.get((st.level, st.round), {}).get("prefix_cache"),)),
                search_probe=bool(self.step_info.get((st.level, st.round), {}).get("search_probe")),
                step_s=_step_seconds(self.step_info.get((st.level, st.round), {})),
                client_limited=st.client, client_limited_kinds=dict(st.client_kinds) if st.client else None,
            ))
        return tuple(rows)

    @staticmethod
    def _prefix_cache_text(st: Any, levels: Sequence[LevelRow]) -> str | None:
        """The console's prefix-cache line for the current level, None when nothing is known there."""
        if st is None:
            return None
        for row in levels:
            if row.level == st.level and row.round == st.round and row.prefix_cache:
                return prefix_cache_short(row.prefix_cache) if prefix_cache_known(row.prefix_cache) else None
        return None

    def prefix_cache_by_level(self) -> dict:
        """``{level: tui.core.prefix_cache.level_summary}`` with the rounds of a level merged (compare's view)."""
        tallies = {k: st.pcache for k, st in self.levels.items() if st.n}
        steps = {k: info.get("prefix_cache") for k, info in self.step_info.items()}
        return prefix_cache_by_level(tallies, steps)

    def tokens_summary(self) -> dict | None:
        """Counted tokens over every measured level (``TokenTally.summary()`` of the levels' tallies merged); None
        before any measured request."""
        whole = TokenTally()
        for st in self.levels.values():
            if st.n:
                whole.merge(st.tokens)
        return whole.summary() if whole.added else None

    def _queue_state(self) -> QueueState:
        q = self._queue_latest
        return QueueState(
            source=self._queue_source,
            waiting=None if q is None else q.waiting,
            running=None if q is None else q.running,
            kv_cache_usage=None if q is None else q.kv_cache_usage,
            client_in_flight=self._client_in_flight,
            waiting_series=tuple(self._waiting_series),
            running_series=tuple(self._running_series),
            in_flight_series=tuple(self._inflight_series),
            max_waiting=self._max_waiting,
        )

    def _gpu_state(self) -> GpuState:
        b = self.budget
        predicted = ceiling = gpu_gib = None
        # a budget of the KV space itself (--kv-cache-gib, the engine's own) knows no GPU size nor margin: no GPU
        # figures are predicted from it (its KV ceiling is GpuState.kv_ceiling_gib)
        if b is not None and not getattr(b.inputs, "kv_space_bytes", 0):
            gpu_gib = getattr(b.inputs, "gpu_gib", None)
            ceiling = b.weights_gib + b.margin_gib + max(0.0, b.cache_budget_gib)
            st = self.current
            conc = None
            if st is not None and st.level is not None and st.mode != "open":
                conc = int(st.level)
            elif self._client_in_flight is not None:
                conc = self._client_in_flight
            if conc is not None:
                predicted = b.predicted_used_gib(conc)
        devices = []
        for dev in sorted(self._gpu):
            d = self._gpu[dev]
            used, total = d.get("used"), d.get("total")
            sev: Severity = NA
            if used is not None:
                sev = GOOD
                if predicted is not None and used > predicted:
                    sev = WARN
                if total and used >= 0.95 * total:
                    sev = BAD
            devices.append(GpuDevice(dev, d.get("name"), used, total, d.get("util"), d.get("peak"),
                                     tuple(d["series"]), sev))
        note = "" if devices else "no GPU telemetry"
        return GpuState(bool(devices), tuple(devices), predicted, ceiling, gpu_gib, note, **self._engine_kv())

    def _engine_kv(self) -> dict[str, Any]:
        """The engine's own KV memory in use: kv_cache_usage x the KV bytes it allocated (run header)."""
        b = self.budget
        out: dict[str, Any] = {"kv_ceiling_gib": None if b is None else max(0.0, b.cache_budget_gib),
                               "memory": self.budget_memory}
        if not self._kv_usage_n:
            return out
        cap = self.header.get("server_capacity") if self.header else None
        cap = cap if isinstance(cap, dict) else {}
        nbytes, _why = engine_kv_space(self.header)  # the one reading of the engine's kv_cache_memory_bytes
        allocated = None if nbytes is None else nbytes / GIB
        series = tuple(self._kv_usage_series)
        out.update(engine_kv_usage=series[-1], engine_kv_peak_usage=self._kv_usage_peak,
                   engine_kv_samples=self._kv_usage_n)
        if allocated is not None:
            peak = self._kv_usage_peak
            out.update(engine_kv_label=ENGINE_KV_LABEL.format(engine=engine_name(cap.get("engine"))),
                       engine_kv_allocated_gib=allocated, engine_kv_used_gib=series[-1] * allocated,
                       engine_kv_peak_gib=None if peak is None else peak * allocated,
                       engine_kv_series=tuple(u * allocated for u in series))
        return out

    def snapshot(self) -> Snapshot:
        st = self.current
        header = self.header
        synthetic = bool(header.get("synthetic", False))
        notes = list(self._notes)
        if not header and self.requests_total:
            notes.append("no run header: provenance unknown")
        series_good = list(self._good_series)
        series_p95 = list(self._p95_series)
        if self._bucket_n:  # include the bucket still filling
            series_good.append(self._bucket_good / self._bucket_n)
            v = stats.nearest_rank(sorted(self._bucket_ttfts), 0.95)
            series_p95.append(v if v is not None else 0.0)
        elapsed = 0.0
        if self.first_t is not None and self.last_t is not None:
            elapsed = self.last_t - self.first_t
        key = (id(self.budget), self.budget_origin, self.budget_problem, id(header), self.budget_hint,
               id(self.server_log))
        if key != self._budget_view_key:
            self._budget_view_key = key
            self._budget_view = budget_view(self.budget, self.budget_origin, header, self.budget_problem,
                                            memory=self.budget_memory, hint=self.budget_hint,
                                            server_log=self.server_log)
        levels = self.level_rows()
        cand, fits = budget_candidate(self.budget)
        cap = measure_capacity(cap_rows(self.source, levels, header), cand, fits)
        return Snapshot(
            seq=self.seq_no,
            source=self.source,
            synthetic=synthetic,
            header=header,
            run_elapsed_s=elapsed,
            current_level=None if st is None else st.level,
            current_round=1 if st is None else st.round,
            cumulative=self._window_from_state(st),
            rolling=self._rolling(),
            verdict=self.verdict_for(st),
            levels=levels,
            recent=tuple(
                RequestRow(r.id, r.level, r.round, r.phase, ttft_ms,
                           r.output_tokens, outcome, r.error, (r.t_end - r.t_sent) * 1000.0, r.t_end,
                           self._missed_text(r, outcome))
                for r, outcome, ttft_ms in self._recent
            ),
            good_series=tuple(series_good),
            p95_series=tuple(series_p95),
            target=self.cfg.target,
            slo_ttft_ms=self.cfg.slo_ttft_ms,
            slos=self.cfg.slos,
            tokens=self.tokens_summary(),
            prefix_cache_text=self._prefix_cache_text(st, levels),
            queue=self._queue_state(),
            gpu=self._gpu_state(),
            errors_by_class=dict(self.errors_by_class),
            requests_total=self.requests_total,
            warmup_total=self.warmup_total,
            malformed=self.malformed,
            malformed_examples=tuple(self.examples),
            unknown_types=self.unknown_types,
            duplicates=self.duplicates,
            truncated=self.truncated,
            host=dict(self._host),
            notes=tuple(notes),
            budget=self.budget,
            budget_view=self._budget_view,
            provenance=provenance.describe(header),
            provenance_short=provenance.short(header),
            timeline=self.timeline(),
            timeline_omitted=self.timeline_omitted,
            cancelled_open=sum(self.cancelled_open.values()),
            cancelled_late=sum(self.cancelled_late.values()),
            capacity=cap,
            evidence_problems=self.evidence_problems(),
            levels_over_cap=self.levels_over_cap,
            records_integrity=self.records_integrity,
            settings=self.settings,
            run_levels=None if self._shadow is None else self._shadow.level_rows(),
            run_verdict=None if self._shadow is None else self._shadow.verdict_for(self._shadow.current),
        )


def _step_seconds(info: dict) -> float | None:
    """A step end record's ``duration_s`` (None: not a number)."""
    v = info.get("duration_s")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
