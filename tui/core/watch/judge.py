"""The watch judge: consecutive windows judged sequentially with the window rules of load runs, PASS on the
pessimistic end of the bracket and FAIL on the optimistic end; the queue rule that forbids PASS when requests
still queued (in neither count) could hide an overloaded server; the canary's verdict for a server without a
TTFT histogram.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import tui.core.defaults as defaults
from tui.core.engines import ENGINES
from tui.core.outcomes import Outcome
from tui.core.records.parse import parse_request
from tui.core.records.schema import RecordError
from tui.core.records.watch import Window, finite
from tui.core.slos import Slos, slo_rule
from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED, VerdictState
from tui.core.textfmt import fmt_minutes, fmt_span
from tui.core.verdict import FAIL_MIN_S, LevelJudge, MixtureTest
from tui.core.watch.combine import FRECHET_NOTE, ITL_NOTE, combined_counts
from tui.core.watch.histogram import count_of, good_bracket, share_above
from tui.core.watch.notes import COMPLETION_NOTE, NO_TTFT_NOTE, NOT_EXPOSED, SERVER_TTFT_LABEL
from tui.core.watch.windows import merge_windows


def make_judge(test: MixtureTest, *, min_window_s: float, min_requests: int, fail_min_s: float = FAIL_MIN_S) -> LevelJudge:
    """The judge watch uses: the same engine and window rules as load runs (``tui.core.verdict.LevelJudge``).
    ``add_many(t, 0, 0)`` marks the start of the watch."""
    return LevelJudge(test, min_window_s=min_window_s, min_requests=min_requests, fail_min_s=fail_min_s)


@dataclass(frozen=True)
class WatchConfig:
    #: the SLOs judged (tui.core.slos): TTFT always (the server's histogram is the evidence), TPOT, ITL and E2E
    #: when on (several make the Fréchet bound, tui.core.watch.combine)
    slos: Slos = Slos()
    target: float = defaults.TARGET
    alpha: float = defaults.ALPHA
    min_window_s: float = defaults.MIN_WINDOW_S
    min_requests: int | None = None
    fail_min_s: float = FAIL_MIN_S
    queue_share: float | None = None  # queue-time-over-SLO share that blocks PASS; default (1 - target) / 2

    def __post_init__(self) -> None:
        if self.slos.ttft_ms is None:
            raise ValueError("watch judges the TTFT SLO: --slo-ttft-ms off is not supported here")
        beyond = [k.name for k, v in zip(self.slos.table[4:], self.slos.more) if v is not None]
        if beyond:
            raise ValueError(f"watch judges TTFT, TPOT, ITL and E2E from the server's histograms, not {beyond[0]}")

    @property
    def in_force(self) -> list[tuple[str, float]]:
        """The SLOs in force, TTFT first: [("TTFT", ms), ("TPOT", ms), ...]."""
        return [(k.name, float(v)) for k, v in zip(self.slos.table, self.slos.limits()) if v is not None]

    @property
    def several(self) -> bool:
        return len(self.in_force) > 1

    def describe_slos(self) -> str:
        return ", ".join(f"{n} <= {v:g} ms" for n, v in self.in_force)

    @property
    def slo_ttft_ms(self) -> float:
        """The TTFT SLO (always on in watch)."""
        return float(self.slos.ttft_ms)  # type: ignore[arg-type]

    @property
    def slo_itl_ms(self) -> float | None:
        return self.slos.itl_ms

    @property
    def slo_s(self) -> float:
        return self.slo_ttft_ms / 1000.0

    @property
    def blocking_share(self) -> float:
        return self.queue_share if self.queue_share is not None else (1.0 - self.target) / 2.0


@dataclass(frozen=True)
class WatchVerdict:
    state: VerdictState
    reason: str
    lo: float | None
    hi: float | None
    exact: bool
    n: float  # denominator (TTFT observations + aborted/errored)
    good_lo: float
    good_hi: float
    elapsed_s: float
    missing: str | None = None
    blocked: tuple[str, ...] = ()  # why PASS is not allowed (queue rule)
    notes: tuple[str, ...] = ()
    target: float = defaults.TARGET
    slo_ttft_ms: float = defaults.SLO_TTFT_MS
    alpha: float = defaults.ALPHA
    slos: tuple[dict, ...] = ()  # several SLOs: each one's share bracket, and the Fréchet bound on all

    def to_dict(self) -> dict:
        extra: dict = {}
        if self.slos:
            extra = {"slos": list(self.slos), "combination": FRECHET_NOTE,
                     "pass_judged_on": "the lower end of the bracket", "fail_judged_on": "the upper end"}
        return extra | {
            "state": self.state, "reason": self.reason, "good_fraction_lo": self.lo, "good_fraction_hi": self.hi,
            "exact": self.exact, "n": self.n, "good_lo": self.good_lo, "good_hi": self.good_hi,
            "elapsed_s": self.elapsed_s, "missing": self.missing, "pass_blocked_by": list(self.blocked),
            "notes": list(self.notes), "target": self.target, "slo_ttft_ms": self.slo_ttft_ms, "alpha": self.alpha,
        }


def queue_blocks(w: Window, cfg: WatchConfig) -> list[str]:
    """Reasons the queue forbids PASS over this window (empty: none)."""
    out = []
    ws, we = w.waiting_start, w.waiting_end
    if ws is not None and we is not None and we > ws + 1e-9:
        out.append(f"the queue grew over the window ({ws:g} -> {we:g} waiting): requests still queued are in "
                   "neither count, so an overloaded server can look fine")
    share = share_above(w.queue_time, cfg.slo_s)
    bounded = ""
    if share is not None and w.ttft is not None:
        # queue time is part of the time to first token (queued after arrival, scheduled before the first
        # token), so no more requests queued longer than the SLO than got their first token later than it. The
        # bound matters where the queue-time buckets cannot resolve the SLO: vLLM 0.32's start at 0.3 s, so
        # under a 100 ms SLO the queue histogram alone says "up to 100%" for any traffic
        t_share = share_above(w.ttft, cfg.slo_s)
        if t_share is not None and t_share < share:
            share = t_share
            bounded = " (bounded by the TTFT histogram: queue time is part of TTFT)"
    if share is not None and share > cfg.blocking_share:
        out.append(f"queue time exceeded the {cfg.slo_ttft_ms:g} ms SLO for up to {100 * share:.1f}% of finished "
                   f"requests{bounded} (more than {100 * cfg.blocking_share:.1f}% matters at a {cfg.target:.0%} "
                   "target)")
    if ws is None and we is None and w.queue_time is None:
        out.append("the server's queue is not observable (no waiting gauge, no queue-time histogram): queued "
                   "requests are in neither count")
    return out


class WatchJudgement:
    """Sequential judging of consecutive windows from the start of the watch.

    Two judges share the window rules of load runs: the pessimistic one (good = observations
    under the bucket bound below the SLO) decides PASS, the optimistic one (bound above) FAIL.
    A counter reset restarts both, and says so."""

    def __init__(self, cfg: WatchConfig) -> None:
        self.cfg = cfg
        self.test = MixtureTest(cfg.target, cfg.alpha)
        self.min_requests = max(cfg.min_requests or 0, self.test.min_requests_to_pass())
        self.resets: list[str] = []
        self.windows = 0
        self.span: Window | None = None  # everything since the (last) start
        self.last: Window | None = None
        self.gap_windows = 0
        self._new_judges()

    def _new_judges(self) -> None:
        cfg = self.cfg
        self.pess = make_judge(self.test, min_window_s=cfg.min_window_s, min_requests=self.min_requests,
                               fail_min_s=cfg.fail_min_s)
        self.opt = make_judge(self.test, min_window_s=cfg.min_window_s, min_requests=self.min_requests,
                              fail_min_s=cfg.fail_min_s)
        self._started = False
        self.span = None
        self.exact = True
        self.good_lo = self.good_hi = self.n = 0.0
        # the optimistic end's denominator: Prometheus' increase() extrapolates to non-integer counts, and the
        # upper end rounded with the total rounded UP could fall below the true fraction (a FAIL the evidence
        # does not support); so the upper end divides by the total rounded DOWN (each end conservative for
        # what it decides)
        self.n_opt = 0.0
        # several SLOs: per SLO the summed share ends (x total), windows where it was not judgeable
        self.slo_sum: dict[str, list[float]] = {name: [0.0, 0.0] for name, _v in self.cfg.in_force}
        self.slo_unjudgeable: dict[str, int] = {}

    def add(self, w: Window) -> None:
        self.windows += 1
        self.last = w
        if w.reset:
            self.resets.append(f"{w.reset} (t={w.t_end:.0f})")
            self._new_judges()
            return
        if w.ttft is None:
            self.gap_windows += 1
            return  # a gap: nothing invented, the judges wait
        if self.cfg.several:
            g_lo, g_hi, total, exact, shares = combined_counts(w, self.cfg.in_force)
            # the upper end over the total rounded down, as for one SLO below
            total_opt = math.floor((count_of(w.ttft) or 0.0) + max(0.0, w.failed or 0.0) + 1e-6)
            g_hi = min(total_opt, g_hi)
            for s in shares:
                acc = self.slo_sum[s.name]
                acc[0] += s.lo * total
                acc[1] += s.hi * total
                if not s.judgeable:
                    self.slo_unjudgeable[s.name] = self.slo_unjudgeable.get(s.name, 0) + 1
        else:
            br = good_bracket(w.ttft, self.cfg.slo_s, w.failed)
            # conservative rounding: Prometheus' increase() extrapolates to non-integer counts
            total = math.ceil(br.total - 1e-6)
            total_opt = math.floor(br.total + 1e-6)
            g_lo = math.floor(br.good_lo + 1e-6)
            g_hi = min(total_opt, math.ceil(br.good_hi - 1e-6))
            exact = br.exact  # the SLO is a bucket bound (the ends may still differ by the rounding above)
        if not self._started:
            # anchor the evidence at the window's start (same call shape as LevelJudge: no new method)
            self.pess.add_many(w.t_start, 0, 0)
            self.opt.add_many(w.t_start, 0, 0)
            self._t0 = w.t_start
            self._started = True
        self._t = w.t_end
        self.pess.add_many(w.t_end, g_lo, total)
        self.opt.add_many(w.t_end, g_hi, total_opt)
        self.good_lo += g_lo
        self.good_hi += g_hi
        self.n += total
        self.n_opt += total_opt
        self.exact = self.exact and exact
        self.span = merge_windows([self.span, w]) if self.span is not None else w

    def verdict(self, has_ttft: bool = True) -> WatchVerdict:
        cfg = self.cfg
        notes = [SERVER_TTFT_LABEL, COMPLETION_NOTE] + self.resets
        if not has_ttft:
            return WatchVerdict(state=INSUFFICIENT_WINDOW, reason=f"{NO_TTFT_NOTE} R to judge from a gentle canary",
                                lo=None, hi=None, exact=False, n=0, good_lo=0, good_hi=0, elapsed_s=0.0,
                                missing=NO_TTFT_NOTE, notes=(NOT_EXPOSED + ": server-side TTFT",),
                                target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha)
        elapsed = max(0.0, self._t - self._t0) if self._started else 0.0
        n = self.n
        lo = self.good_lo / n if n else None
        hi = (min(1.0, self.good_hi / self.n_opt) if self.n_opt else 1.0) if n else None
        if lo is None or hi is None:  # n == 0
            frac = "no finished requests yet"
        elif cfg.several:
            frac = (f"share meeting all of {cfg.describe_slos()} {100 * lo:.1f}-{100 * hi:.1f}% (Fréchet bound "
                    "from separate histograms)")
        elif self.exact and hi - lo < 1e-12:
            frac = f"good fraction {100 * lo:.1f}%"
        else:
            frac = f"good fraction {100 * lo:.1f}-{100 * hi:.1f}%"
        need_n = max(0, self.min_requests - int(n))
        need_s = max(0.0, cfg.min_window_s - elapsed)
        parts = []
        if need_n:
            parts.append(f"need {need_n} more requests")
        if need_s > 0:
            parts.append(f"{fmt_minutes(need_s)} more" if parts else f"need {fmt_minutes(need_s)} more")
        missing = ", ".join(parts) or None
        blocked = tuple(queue_blocks(self.span, cfg)) if self.span is not None else ()
        slo_rows: tuple[dict, ...] = ()
        if cfg.several:
            notes.insert(0, FRECHET_NOTE)
            if cfg.slo_itl_ms is not None:
                notes.insert(1, ITL_NOTE)
            blocked = blocked + tuple(
                f"{name} not judgeable in {k} window(s): the server exposes no histogram for it there, so the "
                "share meeting all SLOs has 0 as its lower end" for name, k in self.slo_unjudgeable.items())
            slo_rows = tuple({"slo": name, "limit_ms": v,
                              "share_lo": (self.slo_sum[name][0] / n) if n else None,
                              "share_hi": (self.slo_sum[name][1] / n) if n else None,
                              "unjudgeable_windows": self.slo_unjudgeable.get(name, 0)} for name, v in cfg.in_force)
            slo_rows = slo_rows + ({"slo": "all", "limit_ms": None, "share_lo": lo, "share_hi": hi,
                                    "unjudgeable_windows": None},)
        if self.last is not None and self.last.ttft is None and self.last.gaps:
            notes.append("last window is a gap: " + "; ".join(self.last.gaps))
        ps, os_ = self.pess.state, self.opt.state
        rule = f"anytime-valid test, alpha {cfg.alpha:g}"
        state: VerdictState
        if os_ == FAIL:
            state = FAIL
            reason = (f"{frac} over {int(n)} requests: even the optimistic end is below the {cfg.target:.0%} target "
                      f"({rule}).")
        elif ps == PASS and blocked:
            state = UNDECIDED
            reason = f"{frac}: would PASS, but " + "; ".join(blocked) + "."
        elif ps == PASS:
            state = PASS
            reason = f"{frac} over {int(n)} requests: the pessimistic end is at or above the {cfg.target:.0%} target ({rule})."
        elif ps == INSUFFICIENT_WINDOW:
            state = INSUFFICIENT_WINDOW
            if not n:
                reason = f"no finished requests yet: nothing to judge the {cfg.target:.0%} target on."
            else:
                reason = (f"{frac} on {int(n)} requests over {fmt_span(elapsed)}: too few to judge the "
                          f"{cfg.target:.0%} target.")
        else:
            state = UNDECIDED
            reason = f"{frac} over {int(n)} requests: not yet enough evidence either way."
        return WatchVerdict(state=state, reason=reason, lo=lo, hi=hi, exact=self.exact, n=n, good_lo=self.good_lo,
                            good_hi=self.good_hi, elapsed_s=elapsed, missing=missing if state == INSUFFICIENT_WINDOW else None,
                            blocked=blocked, notes=tuple(notes), target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms,
                            alpha=cfg.alpha, slos=slo_rows)


def judge_once(w: Window, cfg: WatchConfig) -> WatchVerdict:
    """One fixed window judged once (``watch --once``)."""
    j = WatchJudgement(cfg)
    j.add(w)
    m = ENGINES.get(w.engine)
    return j.verdict(has_ttft=bool(m and m.ttft))


def canary_outcome(r: dict, slos: Slos) -> tuple[Outcome, float | None]:
    """(outcome, judged TTFT ms) of one canary request record (a dict as the load generator writes it) by the one
    outcome rule (``tui.core.slos.slo_rule``): every SLO in force, the answer TTFT, the finish reason and the HTTP
    status. A record that does not validate is ``failed`` (never good)."""
    try:
        rec = parse_request(r)
    except (RecordError, TypeError, ValueError):
        return "failed", None
    outcome, ttft, _misses = slo_rule(slos)(rec)
    return outcome, ttft


def canary_verdict(records: Sequence[dict], cfg: WatchConfig) -> WatchVerdict:
    """For a server without a TTFT histogram: the verdict from the canary's own requests (client-side
    TTFT, completion observed), with the same judge and window rules. Good = complete, no error, first
    token within the SLO: the one outcome rule (``canary_outcome``). A canary is sparse: the minimum request count
    takes long at gentle rates."""
    test = MixtureTest(cfg.target, cfg.alpha)
    min_n = max(cfg.min_requests or 0, test.min_requests_to_pass())
    judge = make_judge(test, min_window_s=cfg.min_window_s, min_requests=min_n, fail_min_s=cfg.fail_min_s)
    rows = []
    for r in records:
        if r.get("phase", "measure") != "measure" or not (finite(r.get("t_sent")) and finite(r.get("t_end"))):
            continue
        outcome, _ttft = canary_outcome(r, cfg.slos)
        if outcome == "excluded":  # still open when cancelled, or an SLO not judgeable: not evidence either way
            continue
        rows.append((r["t_sent"], r["t_end"], outcome == "good"))
    rows.sort(key=lambda x: x[1])
    n = g = 0
    if rows:
        judge.add_many(rows[0][0], 0, 0)
    for _ts, te, good in rows:
        judge.add_many(te, 1 if good else 0, 1)
        n += 1
        g += good
    elapsed = (rows[-1][1] - rows[0][0]) if rows else 0.0
    st = judge.state if rows else INSUFFICIENT_WINDOW
    frac = f"canary good fraction {100 * g / n:.1f}% ({g}/{n})" if n else "no canary request finished yet"
    need_n = max(0, min_n - n)
    need_s = max(0.0, cfg.min_window_s - elapsed)
    parts = ([f"need {need_n} more canary requests"] if need_n else []) + ([f"{fmt_minutes(need_s)} more"] if need_s > 0 else [])
    reason = {
        PASS: f"{frac}: at or above the {cfg.target:.0%} target (anytime-valid test, alpha {cfg.alpha:g}).",
        FAIL: f"{frac}: below the {cfg.target:.0%} target (anytime-valid test, alpha {cfg.alpha:g}).",
        UNDECIDED: f"{frac}: not yet enough evidence either way.",
    }.get(st, f"{frac}: too few to judge the {cfg.target:.0%} target.")
    return WatchVerdict(
        state=st, reason=f"no TTFT histogram on this server; verdict from the canary: {reason}",
        lo=(g / n if n else None), hi=(g / n if n else None), exact=True, n=n, good_lo=g, good_hi=g,
        elapsed_s=elapsed, missing=", ".join(parts) or None if st == INSUFFICIENT_WINDOW else None,
        notes=("canary: client-side TTFT of the probe requests, completion observed; it measures only what "
               "the canary's own requests met", NOT_EXPOSED + ": server-side TTFT"),
        target=cfg.target, slo_ttft_ms=cfg.slo_ttft_ms, alpha=cfg.alpha,
    )
