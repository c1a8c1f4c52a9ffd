"""One level's state (``LevelState``): its counts, bounded latency stores, judge and evidence figures."""

from __future__ import annotations

import copy
import math
from array import array
from collections.abc import Sequence

import tui.core.completeness as completeness
import tui.core.evidence as evidence
import tui.core.slos as slo_defs
import tui.core.stats as stats
import tui.core.turns as turns
from tui.core.monitor.config import MonitorConfig
from tui.core.prefix_cache import PrefixTally
from tui.core.records.request import RequestRecord
from tui.core.slos import MISS_MASK, NOJUDGE_SHIFT, combo_name, miss_names
from tui.core.snapshot import (
    Percentile,
)
from tui.core.token_counts import TokenTally
from tui.core.verdict import FAIL_MIN_S, LevelJudge, MixtureTest

EXACT_CAP = 100_000  # exact TTFT values kept per level before the sketch takes over


class LevelState:
    """What the Monitor keeps of one level and round (bounded: exact values up to EXACT_CAP, then sketches)."""

    __slots__ = (
        "level", "round", "mode", "n", "good", "failed", "slow", "completed", "first_t", "last_t",
        "ttft", "out_tokens", "judge", "verdict_cache", "saturated",
        "lateness_p99_ms", "max_waiting", "peak_gpu_gib", "_sorted_cache", "degraded",
        "waiting_sum", "waiting_n", "peak_kv_usage", "order",
        "rec_n", "rec_err", "rec_incomplete", "times", "delivered_cache",
        "lat", "table", "combos", "good_out_tokens", "lat_cache", "ttft_other", "unjudged",
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
        # issue 21: one bounded store (like TTFT's) per SLO kind after TTFT in the table (tui.core.slos.SLO_TABLE:
        # TPOT, the largest inter-token gap, end-to-end, ...) of completed requests; the miss / not-judgeable bits
        # per combination, good output tokens
        self.table = cfg.slos.table
        self.lat = tuple(stats.QuantileStore(EXACT_CAP) for _ in self.table[1:])
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
                                   n_needed=stats.n_needed(q), approximate=True) for q in stats.selected())
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
                for name in miss_names(m, self.table):
                    misses[name] = misses.get(name, 0) + k
                key = combo_name(m, self.table)
                combos[key] = combos.get(key, 0) + k
            for name in miss_names(bits >> NOJUDGE_SHIFT, self.table):
                nojudge[name] = nojudge.get(name, 0) + k
        order = {k.name: i for i, k in enumerate(self.table)}
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


def step_over(st: LevelState) -> completeness.StepValues:
    """A level's values past EVIDENCE_CAP, for its step record's percentiles (created at the first of them)."""
    if st.step_over is None:
        st.step_over = completeness.StepValues()
    return st.step_over


def store(st: LevelState | None, ttfts: list[float], lat: tuple[list, ...]) -> None:
    """The values of a batch into the level's stores: TTFT's, then one per SLO kind after it (``LevelState.lat``)."""
    if st is not None:
        st.ttft.extend(ttfts)
        for s, vals in zip(st.lat, lat):
            s.extend(vals)


def add_other_ttft(st: LevelState, r: RequestRecord, pending: list[float], answer_judged: bool) -> None:
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



def step_seconds(info: dict) -> float | None:
    """A step end record's ``duration_s`` (None: not a number)."""
    v = info.get("duration_s")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
