"""A record file is a claim: the checks that hold it against itself before it is judged.

Pure functions over what the Monitor gathered while reading (per level and round: request counts, send and end
times, dispatch lateness; the step records; the run header). Each returns plain sentences; the Monitor turns them
into ``block_pass`` reasons (a PASS becomes UNDECIDED with the reason, a FAIL stands: an overloaded server is still
overloaded). Bounds and tolerances are documented in docs/statistics.md ("Delivered load", "Window coverage") and
docs/record-format.md ("Cross-checks").

- **Delivered load** (``delivered``): a level counts as tested only if the load it is labelled with was
  delivered, read from what cannot be forged cheaply: the ``[t_sent, t_end]`` intervals (moving ``t_sent`` moves the
  TTFT with it), the queue samples' ``client_in_flight`` and the step record's own clock. Open loop: dispatch
  lateness p99 (the worse of the records' and the step record's own) within the SLO and its spread (p99 - p50)
  within one mean arrival gap (at least ``LATENESS_FLOOR_MS``), and the achieved send rate within
  ``rate_tolerance`` of the label. Closed loop: the time-averaged number of ``[t_sent, t_end]`` intervals open over
  the measured part of the step (from the moment the ``level``-th request was sent to the last send: ramp-up and
  drain excluded), and the mean of the queue samples' ``client_in_flight`` over the same span where the file has
  at least ``QUEUE_MIN_SAMPLES``, each within ``INFLIGHT_TOLERANCE`` below the concurrency and never more than
  ``INFLIGHT_ABOVE_TOLERANCE`` above it (a closed loop never holds more than its concurrency). Both loops: Little's
  law with the step's own clock (its requests over its ``duration_s``, times the mean latency, against the mean in
  flight of the records over their span and of the queue samples over the step) within ``LITTLE_TOLERANCE``; the
  dispatch times (``t_intended``) never after ``t_sent`` and never before it by more than the step's own recorded
  send overhead (lateness) p99 plus ``INTENDED_SLACK_S``, beyond the share the p99 itself allows. Each broken rule
  is named; any of them makes the level "not reached".
- **Delivered load in sessions** (``delivered_sessions``, records that carry ``session``): closed loop, the
  time-averaged number of sessions in flight (a session busy from its first turn's ``t_sent`` to its last turn's
  ``t_end``, think time included; ramp-up and drain excluded as above: from the moment the ``level``-th session
  started to the last session start) within ``INFLIGHT_TOLERANCE`` below the level (concurrent sessions) and at
  most ``INFLIGHT_ABOVE_TOLERANCE`` above it; open loop, the first turns' send rate and dispatch lateness against
  the rate (sessions/s), by the open-loop rule above. The step-clock and dispatch-time rules hold for the level's
  requests as above. Records without ``session`` keep the request rule. ``SessionSpans`` gathers them (bounded:
  the first ``EVIDENCE_CAP`` sessions of a level).
- **The one duplicate rule** (``Duplicates``): a request record whose id was seen before, or whose send,
  first-token and end times are identical to an earlier record's under another id, is counted once (the first);
  every reader (the Monitor: report, replay, accept, plan, the console) and compare apply it, and any duplicate
  forbids PASS (and NOT WORSE) with its count ("5,000 duplicates of 1 request"). Files without a time axis
  (``source.time_axis: "none"``: every ``t_sent`` the same instant, the other times derived) have no identical-times
  rule: their times are durations, equal by rounding, and they get no verdict anyway.
- **Step records against the request records** (``step_count_problem``): a step ``end`` record's request and
  failure counts against the request records of its level and round.
- **Planned rounds** (``rounds_problem``), **warmup placement** (``warmup_problem``), **records without a step**.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: open loop: the lateness spread (p99 - p50) may reach one mean arrival gap, and never less than this
LATENESS_FLOOR_MS = 10.0
#: open loop: the achieved send rate may differ from the label by this share, or by 3 standard errors of a rate
#: estimated from n arrivals (sqrt(cv2 / n)), whichever is larger
RATE_TOLERANCE = 0.10
#: closed loop: the time-averaged requests in flight may be below the concurrency by this share
INFLIGHT_TOLERANCE = 0.20
#: closed loop: ... and above it by this share at most (an honest closed loop never holds more than its concurrency:
#: a slot sends its next request after the previous one ended; the slack covers rounding and several worker clocks)
INFLIGHT_ABOVE_TOLERANCE = 0.05
#: Little's law: the step's throughput x the mean latency against the mean in flight may differ by this share
LITTLE_TOLERANCE = 0.25
#: t_intended may precede t_sent by the step's own recorded send overhead (closed) / lateness (open) p99 plus this
INTENDED_SLACK_S = 0.100
#: t_intended after t_sent by more than this is a contradiction (a request is sent after it was dispatched)
INTENDED_AFTER_S = 0.001
#: closed loop: queue samples inside the measured part needed before their in-flight mean is held against the label
QUEUE_MIN_SAMPLES = 5
#: queue samples inside a step's span needed before their in-flight mean is held against Little's law
LITTLE_MIN_SAMPLES = 20
#: queue samples (time, client_in_flight) kept for these checks, 16 bytes each (a day of 1-s samples is 86,400)
QUEUE_CAP = 400_000
#: values per level kept exactly for these checks (16-24 bytes a request); beyond, the checks use the first ones
EVIDENCE_CAP = 50_000

__all__ = [
    "EVIDENCE_CAP", "INFLIGHT_ABOVE_TOLERANCE", "INFLIGHT_TOLERANCE", "INTENDED_AFTER_S", "INTENDED_SLACK_S",
    "LATENESS_FLOOR_MS", "LITTLE_MIN_SAMPLES", "LITTLE_TOLERANCE", "QUEUE_CAP", "QUEUE_MIN_SAMPLES", "RATE_TOLERANCE",
    "Delivered", "Duplicates", "QueueInFlight", "SessionSpans", "delivered", "delivered_sessions", "duplicates_problem",
    "FIRST", "SAME_ID", "SAME_TIMES", "level_name", "mode_problem", "rate_tolerance", "recorded_p99", "rounds_problem", "step_count_problem", "warmup_problem",
]


def level_name(level: float | None, rnd: int, mode: str | None) -> str:
    """'concurrency 4 round 1', 'rate 2 req/s round 1', 'level 4 round 1'."""
    lv = "-" if level is None else f"{level:g}"
    if mode == "closed":
        return f"concurrency {lv} round {rnd}"
    if mode == "open":
        return f"rate {lv} req/s round {rnd}"
    return f"level {lv} round {rnd}"


def _pct(sorted_vals: Sequence[float], q: float) -> float:
    k = max(1, math.ceil(q * len(sorted_vals)))
    return sorted_vals[min(k, len(sorted_vals)) - 1]


def _num(d: Mapping | None, key: str) -> float | None:
    """A finite number in ``d[key]`` (a step record's field), else None (a bool is not a number)."""
    v = d.get(key) if d else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def rate_tolerance(n: int, cv2: float = 1.0) -> float:
    """The relative tolerance of an achieved rate measured from ``n`` sends of an arrival process whose gaps have
    squared coefficient of variation ``cv2`` (Poisson 1, constant 0, gamma 1/burstiness)."""
    if n <= 1:
        return math.inf
    return max(RATE_TOLERANCE, 3.0 * math.sqrt(max(cv2, 0.0) / n))


@dataclass(frozen=True, slots=True)
class Delivered:
    """What a level's own records say about the load that reached the server."""

    ok: bool | None  # None: not checkable (mode unknown, too few requests, no time axis)
    figure: str  # "mean 0.4 in flight (concurrency 4)", "achieved 1.95 req/s (label 2), lateness p99 12 ms"
    problem: str | None  # the "not reached: ..." sentence, or None


NO_AXIS = "not checked: the file has no time axis (every request at one instant)"


class QueueInFlight:
    """The queue samples' ``client_in_flight`` (the load generator's own count of requests in flight, sampled by the
    scraper beside the requests) with their times: the first ``cap`` samples, 16 bytes each."""

    __slots__ = ("cap", "t", "v", "_sorted")

    def __init__(self, cap: int = QUEUE_CAP) -> None:
        self.cap = cap
        self.t = array("d")
        self.v = array("d")
        self._sorted = True

    def add(self, t: float, v: float) -> None:
        ts = self.t
        if len(ts) >= self.cap or not (math.isfinite(t) and math.isfinite(v)):
            return
        if ts and t < ts[-1]:
            self._sorted = False
        ts.append(t)
        self.v.append(v)

    def __len__(self) -> int:
        return len(self.t)

    def between(self, a: float, b: float) -> tuple[float, int]:
        """(mean, count) of the samples taken from ``a`` to ``b`` (inclusive); (nan, 0) when there are none."""
        if not self._sorted:
            pairs = sorted(zip(self.t, self.v))
            self.t = array("d", (p[0] for p in pairs))
            self.v = array("d", (p[1] for p in pairs))
            self._sorted = True
        i, j = bisect_left(self.t, a), bisect_right(self.t, b)
        if j <= i:
            return math.nan, 0
        return math.fsum(self.v[i:j]) / (j - i), j - i


#: what ``Duplicates.check`` found
FIRST, SAME_ID, SAME_TIMES = 0, 1, 2


#: ``t_first_token`` None, as the duplicate rule stores it (no valid time is negative)
NO_FIRST = -1.0


class Duplicates:
    """The one duplicate rule (module doc): ``check(id, t_sent, t_first_token, t_end)`` is FIRST (0) for a request
    record seen for the first time, else what makes it a duplicate (counted): SAME_ID, its id was seen before, or
    (``times``) SAME_TIMES, its send, first-token and end times are those of an earlier record under another id.

    Memory and time (the Monitor inlines ``check`` on its hot path; bench/bench_report.py): one 64-bit hash per id in
    a set, and per record its three times in one of two append-only arrays (24 bytes): a record sent after every
    earlier one (files in send order) or ended after every earlier one (servewatch writes in completion order)
    cannot repeat an earlier record's times, and goes to the array kept sorted by that time; only a record that
    comes in neither order is looked up (``repeated``: a binary search in each array, then a set of hashes of such
    records). A file in no order at all (more than 1,024 such records, and more than one in 16) turns every kept
    time into a hash once (``hashed``) and is checked by hash from then on. Sources unique by construction (the load
    generator) leave the rule out so a soak's memory stays flat; ``problem()`` names what was found."""

    __slots__ = ("seen", "times", "copies", "by_id", "by_times", "_dup_keys", "max_sent", "max_end", "by_sent",
                 "by_end", "hashed", "unordered")

    def __init__(self, times: bool = True) -> None:
        self.seen: set[int] = set()  # hashes of ids, and of the times of records that came in neither order
        self.times = times
        self.copies = 0
        self.by_id = 0
        self.by_times = 0
        self._dup_keys: set[int] = set()  # the keys that were copied: one per original request
        self.max_sent = self.max_end = -math.inf
        # (t_sent, t_end, t_first_token or NO_FIRST) of the records that came in t_sent order / in t_end order
        self.by_sent = (array("d"), array("d"), array("d"))
        self.by_end = (array("d"), array("d"), array("d"))
        self.hashed = False  # every record's times are in ``seen`` as a hash (a file in no order)
        self.unordered = 0  # records that came neither in send nor in end order

    def check(self, rid: object, t_sent: float, t_first: float | None, t_end: float) -> int:
        seen = self.seen
        h = hash(rid)  # 64-bit: a collision among a million keys has odds of about 1 in 10^7
        if h in seen:
            self.count(h, True)
            return SAME_ID
        if self.times:
            if self.hashed:
                if self.repeated(t_sent, t_first, t_end):
                    return SAME_TIMES
            elif t_sent > self.max_sent:
                self.max_sent = t_sent
                if t_end > self.max_end:
                    self.max_end = t_end
                _keep(self.by_sent, t_sent, t_end, t_first)
            elif t_end > self.max_end:
                self.max_end = t_end
                _keep(self.by_end, t_sent, t_end, t_first)
            elif self.repeated(t_sent, t_first, t_end):
                return SAME_TIMES
        seen.add(h)
        return FIRST

    def repeated(self, t_sent: float, t_first: float | None, t_end: float) -> bool:
        """A record that came neither in send nor in end order (any record once ``hashed``): True (counted) when an
        earlier record has its three times, else False (its times kept for the records after it)."""
        tf = NO_FIRST if t_first is None else t_first
        key = hash((t_sent, tf, t_end))
        hit = False
        if not self.hashed:
            self.unordered = u = self.unordered + 1
            if u > 1024 and u * 16 > len(self.by_sent[0]) + len(self.by_end[0]):
                self._to_hashes()
            else:
                ts_, te_, tf_ = self.by_sent
                i = bisect_left(ts_, t_sent)
                hit = i < len(ts_) and ts_[i] == t_sent and te_[i] == t_end and tf_[i] == tf
                if not hit:
                    ts_, te_, tf_ = self.by_end
                    j = bisect_left(te_, t_end)
                    hit = j < len(te_) and te_[j] == t_end and ts_[j] == t_sent and tf_[j] == tf
        if hit or key in self.seen:
            self.count(key, False)
            return True
        self.seen.add(key)
        return False

    def _to_hashes(self) -> None:
        """From now on by hash: every kept time into ``seen``, the arrays emptied."""
        seen = self.seen
        for ts_, te_, tf_ in (self.by_sent, self.by_end):
            for key in zip(ts_, tf_, te_):
                seen.add(hash(key))
            for a in (ts_, te_, tf_):
                del a[:]
        self.hashed = True

    def count(self, key: int, by_id: bool) -> None:
        """One duplicate found by ``key`` (its id's hash when ``by_id``, else its times')."""
        self.copies += 1
        if by_id:
            self.by_id += 1
        else:
            self.by_times += 1
        self._dup_keys.add(key)

    @property
    def originals(self) -> int:
        """The requests that were copied (each counted once however many copies it has)."""
        return len(self._dup_keys)

    def problem(self) -> str | None:
        return duplicates_problem(self.copies, self.originals, self.by_id, self.by_times)


def _keep(arrays: tuple[array, array, array], t_sent: float, t_end: float, t_first: float | None) -> None:
    arrays[0].append(t_sent)
    arrays[1].append(t_end)
    arrays[2].append(NO_FIRST if t_first is None else t_first)


def duplicates_problem(copies: int, originals: int, by_id: int, by_times: int) -> str | None:
    """"5,000 duplicates of 1 request (...)": the sentence that forbids PASS, None without duplicates."""
    if copies <= 0:
        return None
    how = []
    if by_id:
        how.append(f"{by_id:,} with a request id seen before")
    if by_times:
        how.append(f"{by_times:,} with the send, first-token and end times of an earlier request under another id")
    return (f"{copies:,} duplicate{'s' if copies != 1 else ''} of {originals:,} request{'s' if originals != 1 else ''} "
            f"({'; '.join(how)}): each counted once; a file holding copies is not evidence of the load it claims")


def delivered(level: float | None, mode: str | None, sends: Sequence[float], ends: Sequence[float],
              lateness_s: Sequence[float], slo_ms: float, cv2: float = 1.0, *, step: Mapping | None = None,
              queue: QueueInFlight | None = None, total: int | None = None, axis: bool = True) -> Delivered:
    """The delivered-load check of one level (see the module doc). ``sends``/``ends``: the measured requests'
    ``t_sent``/``t_end`` (same order); ``lateness_s``: ``t_sent - t_intended``; ``step``: the level's step end
    record (its ``duration_s`` and send overhead / lateness p99), None when the file has none; ``queue``: the file's
    queue samples; ``total``: the level's request records (more than ``len(sends)`` when the values were capped);
    ``axis``: False for a file without a time axis (nothing to check)."""
    n = len(sends)
    if level is None or not level > 0 or mode not in ("closed", "open") or n < 2:
        return Delivered(None, "", None)
    if not axis:
        return Delivered(None, NO_AXIS, None)
    exact = total is None or total <= n
    if mode == "open":
        fig, why = _open_loop(level, sends, lateness_s, slo_ms, cv2, "req/s", "send rate",
                              recorded_p99_ms=recorded_p99(step, "open"))
    else:
        conc = level
        c = max(1, int(round(conc)))
        if n < c:
            mean = sum(e - s for s, e in zip(sends, ends)) / max(1e-9, max(ends) - min(sends))
            fig = f"mean {mean:.2f} in flight (concurrency {conc:g}; only {n} requests)"
            return Delivered(False, fig, f"not reached: only {n} requests recorded at concurrency {conc:g}")
        fig, why = _closed_loop(conc, c, sends, ends, queue, "requests", f"concurrency {conc:g}")
        if why and why[0].startswith("mean"):  # below the label: say when the client's own overhead explains it
            why[0] += _overhead_hint(sends, ends, step)
        why += _step_clock(sends, ends, step, queue, exact)
    why += _dispatch_problems(lateness_s, step, mode, exact)
    if why:
        return Delivered(False, fig, "not reached: " + "; ".join(why))
    return Delivered(True, fig, None)


def _closed_loop(conc: float, c: int, starts: Sequence[float], ends: Sequence[float], queue: QueueInFlight | None,
                 what: str, label: str) -> tuple[str, list[str]]:
    """The closed-loop rule: the time-averaged number of ``[start, end]`` spans open over the measured part (and the
    queue samples' in-flight mean over it, for requests) against the label, both ways."""
    mean, a, b = _mean_in_flight(starts, ends, c)  # ramp-up (until every slot was filled once) and drain excluded
    fig = (f"mean {mean:.2f} requests in flight ({label})" if what == "requests"
           else f"mean {mean:.2f} sessions in flight ({label}, think time included)")
    why = []
    if mean < (1.0 - INFLIGHT_TOLERANCE) * conc:
        why.append(f"{fig}, more than {INFLIGHT_TOLERANCE:.0%} below it")
    elif mean > (1.0 + INFLIGHT_ABOVE_TOLERANCE) * conc:
        why.append(f"more in flight than the label: {fig} (a closed loop never holds more {what} than its "
                   "level: records copied, shifted or relabelled)")
    if queue is not None and len(queue) and what == "requests":
        q, k = queue.between(a, b)
        if k >= QUEUE_MIN_SAMPLES:
            said = f"the queue samples say mean {q:.2f} requests in flight ({k} samples in the measured part)"
            if q < (1.0 - INFLIGHT_TOLERANCE) * conc:
                why.append(f"{said}, more than {INFLIGHT_TOLERANCE:.0%} below {label}")
            elif q > (1.0 + INFLIGHT_ABOVE_TOLERANCE) * conc:
                why.append(f"{said}: more in flight than {label}")
    return fig, why


def _overhead_hint(sends: Sequence[float], ends: Sequence[float], step: Mapping | None) -> str:
    """Why an honest closed loop of very short requests holds fewer in flight at the server than its label: each
    slot spends the client's send overhead (a new connection per request) before the request is sent."""
    o50 = _num(step, "send_overhead_p50_ms")
    if o50 is None or o50 <= 0:
        return ""
    mean_ms = 1000.0 * math.fsum(e - s for s, e in zip(sends, ends)) / len(sends)
    if o50 < 0.1 * (mean_ms + o50):
        return ""
    return (f" (the client's own send overhead, p50 {o50:.1f} ms before each request of {mean_ms:.1f} ms on "
            "average, leaves the server's slots idle: requests this short cannot hold the label)")


def _step_clock(sends: Sequence[float], ends: Sequence[float], step: Mapping | None, queue: QueueInFlight | None,
                exact: bool) -> list[str]:
    """Little's law with the step's own clock (closed loop): the step's requests over its ``duration_s`` times the
    mean latency is the mean number in flight over the step; the records' own mean over their span (and the queue
    samples' over it, where there are enough) must agree within LITTLE_TOLERANCE. Records moved together in time
    (compressed to overlap) keep their latencies but not the step's clock."""
    dur = _num(step, "duration_s")
    n = len(sends)
    if dur is None or dur <= 0 or not exact or n < 2:
        return []
    t0, t1 = min(sends), max(ends)
    span = t1 - t0
    busy = math.fsum(e - s for s, e in zip(sends, ends))
    if span <= 0 or busy <= 0:
        return []
    little = busy / dur  # (n / duration) x (busy / n)
    head = (f"Little's law broken: the step's {n} requests over its own {dur:.1f} s ({n / dur:.3g} req/s) x mean "
            f"latency {busy / n:.3g} s = {little:.2f} in flight, ")
    out = []
    held = busy / span
    if abs(little - held) > LITTLE_TOLERANCE * max(little, held):
        out.append(head + f"but the records hold {held:.2f} in flight over their {span:.1f} s span (more than "
                   f"{LITTLE_TOLERANCE:.0%} apart: the records' times do not match the step's clock)")
    if queue is not None and len(queue):
        q, k = queue.between(t0, t1)
        if k >= LITTLE_MIN_SAMPLES and abs(little - q) > LITTLE_TOLERANCE * max(little, q):
            out.append(head + f"but the queue samples say {q:.2f} in flight over the step ({k} samples; more than "
                       f"{LITTLE_TOLERANCE:.0%} apart)")
    return out


def recorded_p99(step: Mapping | None, mode: str | None) -> float | None:
    """The step record's own p99 of ``t_sent - t_intended`` (ms): ``send_overhead_p99_ms`` in closed loop,
    ``lateness_p99_ms`` in open loop (either name accepted); None when the step record has neither."""
    first, second = (("lateness_p99_ms", "send_overhead_p99_ms") if mode == "open"
                     else ("send_overhead_p99_ms", "lateness_p99_ms"))
    v = _num(step, first)
    return _num(step, second) if v is None else v


def _dispatch_problems(lateness_s: Sequence[float], step: Mapping | None, mode: str | None,
                       exact: bool) -> list[str]:
    """The dispatch times (``t_intended``) against ``t_sent`` and the step's own record of their difference: never
    after ``t_sent``; before it by more than the step's p99 + INTENDED_SLACK_S on no more records than that p99
    leaves above it (nearest rank: n - ceil(0.99 n)); in open loop the records' p99 not below the step's."""
    n = len(lateness_s)
    if n == 0:
        return []
    out = []
    after = sum(1 for x in lateness_s if x < -INTENDED_AFTER_S)
    if after:
        out.append(f"t_intended after t_sent on {after} of {n} requests: a request is never sent before it was "
                   "dispatched (times altered)")
    p99 = recorded_p99(step, mode)
    if p99 is None or not exact or p99 < 0:
        return out
    what = "lateness" if mode == "open" else "send overhead"
    rel = _num(step, "percentiles_rel_error") or 0.0
    bound = p99 / 1000.0 * (1.0 + rel) + INTENDED_SLACK_S
    early = sum(1 for x in lateness_s if x > bound)
    allowed = n - math.ceil(0.99 * n) if not rel else math.ceil(0.02 * n)
    if early > allowed:
        out.append(f"t_intended precedes t_sent by more than the step's own {what} p99 ({p99:.1f} ms) + "
                   f"{INTENDED_SLACK_S * 1000:.0f} ms on {early} of {n} requests (at most {allowed} can be above "
                   "its p99): dispatch times altered")
    if mode == "open" and not rel:
        mine = _pct(sorted(lateness_s), 0.99) * 1000.0
        if mine < p99 - max(1.0, 0.02 * p99):
            out.append(f"the records' dispatch lateness p99 {mine:.1f} ms is below the {p99:.1f} ms the step "
                       "recorded: t_intended moved towards t_sent")
    return out


def _open_loop(level: float, sends: Sequence[float], lateness_s: Sequence[float], slo_ms: float, cv2: float,
               unit: str, what: str, recorded_p99_ms: float | None = None) -> tuple[str, list[str]]:
    """The open-loop rule: the achieved rate of ``sends`` and their dispatch lateness against the label ``level``
    (``unit``: "req/s", "sessions/s"; ``what``: "send rate", "session start rate"). The lateness p99 judged is the
    worse of the records' and ``recorded_p99_ms`` (the step record's own, when it covers the same requests)."""
    n = len(sends)
    span = max(sends) - min(sends)
    if span <= 0:
        return "", []
    achieved = (n - 1) / span
    tol = rate_tolerance(n, cv2)
    late = sorted(lateness_s)
    p50 = _pct(late, 0.50) * 1000.0 if late else 0.0
    p99 = _pct(late, 0.99) * 1000.0 if late else 0.0
    if recorded_p99_ms is not None and recorded_p99_ms > p99:
        p99 = recorded_p99_ms
    gap_ms = 1000.0 / level
    spread_bound = max(LATENESS_FLOOR_MS, gap_ms)
    late_bound = max(LATENESS_FLOOR_MS, slo_ms)
    fig = f"achieved {achieved:.3g} {unit} (label {level:g}), dispatch lateness p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    if unit != "req/s":
        fig += " (first turns)"
    why = []
    if abs(achieved / level - 1.0) > tol:
        why.append(f"the achieved {what} {achieved:.3g} {unit} is off the label {level:g} {unit} by more than "
                   f"{tol:.0%}")
    if p99 > late_bound:
        why.append(f"dispatch lateness p99 {p99:.0f} ms exceeds {late_bound:g} ms (the SLO)")
    elif p99 - p50 > spread_bound:
        why.append(f"dispatch lateness spread p99-p50 {p99 - p50:.0f} ms exceeds {spread_bound:.0f} ms "
                   "(one mean arrival gap): the client fell behind its schedule")
    return fig, why


class SessionSpans:
    """What a level's records say about its sessions, for ``delivered_sessions``: per session (the first
    ``cap``) its start (the earliest ``t_sent`` of its turns: the first turn's) and its end (the latest ``t_end``);
    per first turn (``turn`` 1, the first ``cap``) its ``t_sent`` and dispatch lateness. About 100 bytes a
    session."""

    __slots__ = ("cap", "index", "starts", "ends", "first_sends", "first_late")

    def __init__(self, cap: int = EVIDENCE_CAP) -> None:
        self.cap = cap
        self.index: dict[str, int] = {}
        self.starts = array("d")
        self.ends = array("d")
        self.first_sends = array("d")
        self.first_late = array("d")

    def add(self, session: str, turn: int | None, t_intended: float, t_sent: float, t_end: float) -> None:
        i = self.index.get(session)
        if i is None:
            if len(self.starts) < self.cap:
                self.index[session] = len(self.starts)
                self.starts.append(t_sent)
                self.ends.append(t_end)
        else:
            if t_sent < self.starts[i]:
                self.starts[i] = t_sent
            if t_end > self.ends[i]:
                self.ends[i] = t_end
        if turn == 1 and len(self.first_sends) < self.cap:
            self.first_sends.append(t_sent)
            self.first_late.append(t_sent - t_intended)

    def __len__(self) -> int:
        return len(self.starts)


def delivered_sessions(level: float | None, mode: str | None, spans: SessionSpans, slo_ms: float,
                       cv2: float = 1.0, *, sends: Sequence[float] = (), ends: Sequence[float] = (),
                       lateness_s: Sequence[float] = (), step: Mapping | None = None, total: int | None = None,
                       axis: bool = True) -> Delivered:
    """The delivered-load check of a session workload's level (see the module doc): sessions in flight against
    the concurrent sessions (closed loop), session starts against the rate (open loop); ``sends``/``ends``/
    ``lateness_s``/``step``/``total``: the level's requests and step record, for the step-clock and dispatch-time
    rules (as ``delivered``)."""
    if level is None or not level > 0 or mode not in ("closed", "open"):
        return Delivered(None, "", None)
    if not axis:
        return Delivered(None, NO_AXIS, None)
    exact = total is None or total <= len(sends)
    if mode == "open":
        if len(spans.first_sends) < 2:
            return Delivered(None, "", None)
        fig, why = _open_loop(level, spans.first_sends, spans.first_late, slo_ms, cv2, "sessions/s",
                              "session start rate")
    else:
        n = len(spans)
        if n < 1:
            return Delivered(None, "", None)
        c = max(1, int(round(level)))
        starts, s_ends = spans.starts, spans.ends
        if n < c:
            span = max(s_ends) - min(starts)
            mean = sum(e - s for s, e in zip(starts, s_ends)) / span if span > 0 else 0.0
            fig = f"mean {mean:.2f} sessions in flight ({level:g} concurrent sessions; only {n} sessions)"
            return Delivered(False, fig, f"not reached: only {n} sessions recorded at {level:g} concurrent sessions")
        fig, why = _closed_loop(level, c, starts, s_ends, None, "sessions", f"{level:g} concurrent sessions")
        why += _step_clock(sends, ends, step, None, exact)
    why += _dispatch_problems(lateness_s, step, mode, exact)
    if why:
        return Delivered(False, fig, "not reached: " + "; ".join(why))
    return Delivered(True, fig, None)


def _mean_in_flight(starts: Sequence[float], ends: Sequence[float], c: int) -> tuple[float, float, float]:
    """(mean, a, b): the time-averaged number of spans (requests, or sessions) open between the moment ``a`` the
    ``c``-th started (every slot filled once: ramp-up ends) and the last start ``b`` (the drain begins); over the
    whole (``a``, ``b`` its ends) when those coincide."""
    a = heapq.nsmallest(c, starts)[-1]
    b = max(starts)
    if b - a <= 0:
        t0, t1 = min(starts), max(ends)
        total = sum(e - s for s, e in zip(starts, ends))
        return (total / (t1 - t0) if t1 > t0 else 0.0), t0, t1
    total = 0.0
    for s, e in zip(starts, ends):
        lo = s if s > a else a
        hi = e if e < b else b
        if hi > lo:
            total += hi - lo
    return total / (b - a), a, b


def mode_problem(header_mode: object, step_modes: Sequence[object], run_file: bool) -> str | None:
    """The loop mode a level is judged by: a servewatch run's header must name a known one ("closed" or "open";
    without it the delivered load cannot be checked), and a step record's mode must agree with the header's.
    ``step_modes``: the modes the level's step records name (None where they name none)."""
    known = ("closed", "open")
    named = sorted({str(m) for m in step_modes if m is not None})
    if header_mode in known:
        other = [m for m in named if m != header_mode]
        if other:
            return (f"the step record says {other[0]!r} loop, the run header {header_mode!r}: the level's load "
                    "cannot be read two ways")
        return None
    if not run_file:
        return None
    said = "no loop mode" if header_mode is None else f"loop mode {str(header_mode)[:40]!r}"
    return (f"the run header names {said} (a servewatch run is \"closed\" or \"open\"): the delivered load cannot "
            "be checked")


def step_count_problem(name: str, end: Mapping, n: int, err: int, bad: int) -> str | None:
    """A step end record's counts against the request records of its level and round: ``n`` records, ``err`` with
    an error, ``bad`` with an error or not complete. None when they agree (or the record counts nothing)."""
    req = end.get("requests")
    fail = end.get("failed")
    if not isinstance(req, int) or isinstance(req, bool):
        return None
    fail_ok = not isinstance(fail, int) or isinstance(fail, bool) or fail in (err, bad)
    if req == n and fail_ok:
        return None
    said = f"{req} requests" + (f", {fail} failed" if isinstance(fail, int) and not isinstance(fail, bool) else "")
    return (f"{name}: the step record counts {said}; the file holds {n}, {bad} failed: records missing or "
            "altered")


def rounds_problem(planned: object, present: Sequence[int], level_desc: str) -> str | None:
    """Rounds a run header planned against those present for one level."""
    if not isinstance(planned, int) or isinstance(planned, bool) or planned <= 1:
        return None
    have = sorted(set(present))
    if len(have) >= planned:
        return None
    shown = ", ".join(str(r) for r in have)
    return (f"{level_desc}: the run header plans {planned} rounds, {len(have)} present (round{'s' if len(have) != 1 else ''} "
            f"{shown}): the run ended early or records are missing")


def warmup_problem(late_warmups: int, total_warmups: int) -> str | None:
    """Warmup records sent after the first measured request (servewatch's warmup runs before every measured step:
    a warmup record in the middle of the measured load is a failure relabelled)."""
    if late_warmups <= 0:
        return None
    return (f"{late_warmups} of {total_warmups} warmup records were sent after the first measured request: warmup "
            "only ever runs before the measured steps, so these are measured requests relabelled")

