"""The recovery rule (issue 39; docs/recovery.md), on a drill's requests sorted by send time.

- **Windows.** Rolling windows of ``width`` seconds whose starts step by ``step`` from the reference ``ref`` (the
  end of a spike, the start of a fault): window j holds the requests SENT in [ref + j step, ref + j step + width).
  Its good fraction is over every request in it but those cancelled while still open (the verdict's rule); a window
  with no request in it is not good (nothing was served).
- **Recovery point.** The start of the earliest window from which every later complete window (one that ends by the
  end of the recovery phase) is at or above the target, AND whose requests sent from it through the hold period
  PASS the usual verdict (``hold_verdict``: one level at the run's target, alpha and minimum requests, the hold as
  its window). A candidate whose hold has not ended by the end of the recovery phase cannot be confirmed.
- **Time to recover**: the point minus ``ref``, given as the interval [point - step, point] (the true moment lies
  between the window start before and this one), clipped at 0; where the sends are sparser than the step, from the
  last send before the point to the first at or after it (nothing was observed in between).

Standard library only; the Monitor's verdict words (``verdict_from_judge``) for the hold.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from tui.core.drill.collect import CODE_EXCLUDED, CODE_GOOD
from tui.core.monitor import MonitorConfig, verdict_from_judge
from tui.core.snapshot import Verdict
from tui.core.states import FAIL, PASS
from tui.core.verdict import FAIL_MIN_S, LevelJudge, MixtureTest

HOLD_COVER = 0.9  # the hold judged with this share of it as its window (its sends span a little less than it)
MAX_HOLD_TRIES = 40  # candidate points whose hold is judged, at most (each judges every request of its hold)
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Window:
    """One rolling window: its start (epoch s), the requests judged in it (cancelled-open ones left out) and the
    good ones among them."""

    start: float
    n: int
    good: int

    @property
    def fraction(self) -> float | None:
        return self.good / self.n if self.n else None

    def at_target(self, target: float) -> bool:
        return self.n > 0 and self.good >= target * self.n - 1e-9


class SentOrder:
    """A drill's requests in send order with running counts, for windows in O(log n) each."""

    def __init__(self, t_sent: Sequence[float], t_end: Sequence[float], codes: Sequence[int],
                 ttft_ms: Sequence[float] | None = None) -> None:
        order = sorted(range(len(t_sent)), key=t_sent.__getitem__)
        self.order = order
        self.ts = array("d", (t_sent[i] for i in order))
        self.te = array("d", (t_end[i] for i in order))
        self.code = array("b", (codes[i] for i in order))
        self.ttft = array("d", (ttft_ms[i] for i in order)) if ttft_ms is not None else None
        good = judged = 0
        self.cum_good = array("l", [0])
        self.cum_judged = array("l", [0])
        for c in self.code:
            if c != CODE_EXCLUDED:
                judged += 1
                if c == CODE_GOOD:
                    good += 1
            self.cum_good.append(good)
            self.cum_judged.append(judged)

    def span(self, lo: float, hi: float) -> tuple[int, int]:
        """Indices [i, j) of the requests sent in [lo, hi)."""
        return bisect.bisect_left(self.ts, lo), bisect.bisect_left(self.ts, hi)

    def window(self, start: float, width: float) -> Window:
        i, j = self.span(start, start + width)
        return Window(start, self.cum_judged[j] - self.cum_judged[i], self.cum_good[j] - self.cum_good[i])


def grid(ref: float, step: float, lo: float, hi: float, width: float) -> list[float]:
    """Window starts ref + j step (j may be negative) from the first at or after ``lo`` to the last whose window ends
    by ``hi``."""
    if hi - width < lo - _EPS:
        return []
    j0 = math.ceil((lo - ref) / step - _EPS)
    j1 = math.floor((hi - width - ref) / step + _EPS)
    return [ref + j * step for j in range(j0, j1 + 1)]


def hold_verdict(sent: SentOrder, start: float, end: float, cfg: MonitorConfig, hold_s: float) -> Verdict:
    """The usual verdict of the requests sent in [start, end): one level at the run's target, alpha and minimum
    requests, its window the hold (``HOLD_COVER`` of it), fed in the order the requests ended."""
    i, j = sent.span(start, end)
    test = MixtureTest(cfg.target, cfg.alpha)
    window = min(cfg.min_window_s, hold_s) * HOLD_COVER
    judge = LevelJudge(test, min_window_s=window, min_requests=max(cfg.min_requests or 0, test.min_requests_to_pass()),
                       fail_min_s=min(FAIL_MIN_S, window), batch_s=cfg.batch_s)
    idx = sorted(range(i, j), key=sent.te.__getitem__)
    for k in idx:
        c = sent.code[k]
        if c != CODE_EXCLUDED:
            judge.add(sent.te[k], c == CODE_GOOD, start=sent.ts[k])
    if judge.n == 0:
        judge.note_start(start)
    return verdict_from_judge(judge, cfg)


@dataclass
class Finding:
    """What the rule found after ``ref``."""

    ref: float
    end: float
    windows: list[Window]
    point: float | None = None
    hold: Verdict | None = None  # the hold verdict of the point (or of the first candidate judged)
    held_from: float | None = None  # the start whose hold is ``hold``
    last_below: Window | None = None  # the latest complete window below the target
    undecided_before_rto: bool = False  # a candidate within the RTO whose hold could not decide (or did not end)
    tries: int = 0

    def ttr(self, step: float, sent: SentOrder | None = None) -> tuple[float, float] | None:
        """The time to recover as [low, high] seconds after ``ref``; None without a point. [point - step, point],
        widened where the sends are sparser than the step (``sent``): nothing is observed between the last send
        before the point and the first one at or after it, so the moment lies anywhere between them."""
        if self.point is None:
            return None
        lo, hi = self.point - step, self.point
        if sent is not None and len(sent.ts):
            i = bisect.bisect_left(sent.ts, self.point)
            if i > 0:
                lo = min(lo, sent.ts[i - 1])
            if i < len(sent.ts):
                hi = max(hi, sent.ts[i])
        return (max(0.0, lo - self.ref), max(0.0, hi - self.ref))


def find_recovery(sent: SentOrder, ref: float, end: float, width: float, step: float, hold_s: float,
                  rto_s: float, cfg: MonitorConfig) -> Finding:
    """The recovery point after ``ref`` with the recovery phase ending at ``end`` (see the module doc)."""
    starts = grid(ref, step, ref, end, width)
    wins = [sent.window(s, width) for s in starts]
    f = Finding(ref, end, wins)
    ok_from = len(wins)  # every window from this index on is at the target
    for k in range(len(wins) - 1, -1, -1):
        if not wins[k].at_target(cfg.target):
            f.last_below = wins[k]
            break
        ok_from = k
    for k in range(ok_from, len(wins)):
        s = wins[k].start
        if f.tries >= MAX_HOLD_TRIES:
            f.undecided_before_rto = f.undecided_before_rto or s - ref <= rto_s + _EPS
            break
        if s + hold_s > end + _EPS:  # its hold has not ended by the end of the recovery phase: not confirmed
            if s - ref <= rto_s + _EPS:
                f.undecided_before_rto = True
            break
        v = hold_verdict(sent, s, s + hold_s, cfg, hold_s)
        f.tries += 1
        if f.hold is None or v.state == PASS:
            f.hold, f.held_from = v, s
        if v.state == PASS:
            f.point = s
            return f
        if v.state != FAIL and s - ref <= rto_s + _EPS:
            f.undecided_before_rto = True
    return f


def verdict_until(t_sent: Sequence[float], t_end: Sequence[float], codes: Sequence[int], until: float,
                  cfg: MonitorConfig) -> Verdict:
    """The usual verdict (the run's settings, its window) of the requests given that ended by ``until``: the
    baseline as it stood when the disturbance started (requests still in flight then are the disturbance's)."""
    test = MixtureTest(cfg.target, cfg.alpha)
    judge = LevelJudge(test, min_window_s=cfg.min_window_s,
                       min_requests=max(cfg.min_requests or 0, test.min_requests_to_pass()),
                       fail_min_s=min(FAIL_MIN_S, cfg.min_window_s), batch_s=cfg.batch_s)
    for k in sorted((k for k in range(len(t_end)) if t_end[k] <= until), key=t_end.__getitem__):
        if codes[k] != CODE_EXCLUDED:
            judge.add(t_end[k], codes[k] == CODE_GOOD, start=t_sent[k])
    if judge.n == 0 and t_sent:
        judge.note_start(min(t_sent))
    return verdict_from_judge(judge, cfg)


def after_verdict(sent: SentOrder, start: float, end: float, cfg: MonitorConfig) -> Verdict | None:
    """The usual verdict of the requests sent from ``start`` (the RTO's end) to ``end`` at the run's settings; None
    when the RTO ends after the recovery phase."""
    if start >= end:
        return None
    return hold_verdict(sent, start, end, cfg, end - start)


def queue_back(ts: Sequence[float], waiting: Sequence[float], base_lo: float, base_hi: float, ref: float,
               end: float) -> tuple[float | None, float | None, str | None, float | None]:
    """(seconds after ``ref`` until the server's queue is back at its baseline level and stays there to ``end``, the
    baseline level: the highest ``waiting`` sampled in the baseline, a note, the lower end of that time). The queue
    is seen only where it is sampled: it came back between the sample before the first one of the final run at or
    below the level (``ref`` when there is none) and that one, and a gap in the samples there (the metrics endpoint
    down with the server) is said. None with a note when it cannot be said (no samples, or not back by the end)."""
    base = [w for t, w in zip(ts, waiting) if base_lo <= t <= base_hi]
    after = [(t, w) for t, w in zip(ts, waiting) if ref <= t <= end]
    if not base or not after:
        return None, (max(base) if base else None), (
            "the server's metrics give no queue (waiting) samples" if not ts else
            "no queue samples in the baseline or after the disturbance"), None
    level = max(base)
    base_ts = sorted(t for t in ts if base_lo <= t <= base_hi)
    gaps = sorted(y - x for x, y in zip(base_ts, base_ts[1:]))
    limit = max(3.0, 3 * (gaps[len(gaps) // 2] if gaps else 1.0))  # 3 x the baseline's usual sampling interval
    back: float | None = None
    before = prev = ref  # the sample before ``back`` (the reference before the first)
    for t, w in after:
        if t - prev > limit:  # no sample in between (the metrics down with the server): unknown, a new run starts
            back = None
        if w <= level:
            if back is None:
                back, before = t, prev
        else:
            back = None
        prev = t
    if back is None:
        return None, level, f"the queue was still above its baseline level ({level:g} waiting) at the drill's end", None
    note = None
    if back - before > limit:
        note = (f"no server queue sample from {max(0.0, before - ref):.3g} s to {back - ref:.3g} s after the "
                "disturbance (its metrics did not answer): the queue was back at its baseline level by then; when "
                "within that gap is not known")
    return max(0.0, back - ref), level, note, max(0.0, before - ref)
