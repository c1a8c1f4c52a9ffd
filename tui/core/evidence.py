"""A record file is a claim: the checks that hold it against itself before it is judged.

Pure functions over what the Monitor gathered while reading (per level and round: request counts, send and end
times, dispatch lateness; the step records; the run header). Each returns plain sentences; the Monitor turns them
into ``block_pass`` reasons (a PASS becomes UNDECIDED with the reason, a FAIL stands: an overloaded server is still
overloaded). Bounds and tolerances are documented in docs/statistics.md ("Delivered load", "Window coverage") and
docs/record-format.md ("Cross-checks").

- **Delivered load** (``delivered_problem``): a level counts as tested only if the load it is labelled with was
  delivered. Open loop: dispatch lateness p99 within the SLO and its spread (p99 - p50) within one mean arrival gap
  (at least ``LATENESS_FLOOR_MS``), and the achieved send rate within ``rate_tolerance`` of the label. Closed loop:
  the time-averaged number of requests in flight over the measured part of the step (from the moment the
  ``level``-th request was sent to the last send: ramp-up and drain excluded) within ``INFLIGHT_TOLERANCE`` of the
  concurrency, a slot counting as busy from the request's dispatch (``t_intended``: connection setup included) to its
  end. Otherwise the level is "not reached".
- **Delivered load in sessions** (``delivered_sessions``, records that carry ``session``): closed loop, the
  time-averaged number of sessions in flight (a session busy from its first turn's dispatch ``t_intended`` to its
  last turn's ``t_end``, think time included; ramp-up and drain excluded as above: from the moment the ``level``-th
  session started to the last session start) within ``INFLIGHT_TOLERANCE`` of the level (concurrent sessions);
  open loop, the first turns' send rate and dispatch lateness against the rate (sessions/s), by the open-loop rule
  above. Records without ``session`` keep the request rule. ``SessionSpans`` gathers them (bounded: the first
  ``EVIDENCE_CAP`` sessions of a level).
- **Step records against the request records** (``step_count_problem``): a step ``end`` record's request and
  failure counts against the request records of its level and round.
- **Planned rounds** (``rounds_problem``), **warmup placement** (``warmup_problem``), **records without a step**.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: open loop: the lateness spread (p99 - p50) may reach one mean arrival gap, and never less than this
LATENESS_FLOOR_MS = 10.0
#: open loop: the achieved send rate may differ from the label by this share, or by 3 standard errors of a rate
#: estimated from n arrivals (sqrt(cv2 / n)), whichever is larger
RATE_TOLERANCE = 0.10
#: closed loop: the time-averaged requests in flight may differ from the concurrency by this share
INFLIGHT_TOLERANCE = 0.20
#: values per level kept exactly for these checks (16-24 bytes a request); beyond, the checks use the first ones
EVIDENCE_CAP = 50_000

__all__ = [
    "EVIDENCE_CAP", "INFLIGHT_TOLERANCE", "LATENESS_FLOOR_MS", "RATE_TOLERANCE", "Delivered", "SessionSpans",
    "delivered", "delivered_sessions", "level_name", "rate_tolerance", "rounds_problem", "step_count_problem", "warmup_problem",
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


def rate_tolerance(n: int, cv2: float = 1.0) -> float:
    """The relative tolerance of an achieved rate measured from ``n`` sends of an arrival process whose gaps have
    squared coefficient of variation ``cv2`` (Poisson 1, constant 0, gamma 1/burstiness)."""
    if n <= 1:
        return math.inf
    return max(RATE_TOLERANCE, 3.0 * math.sqrt(max(cv2, 0.0) / n))


@dataclass(frozen=True, slots=True)
class Delivered:
    """What a level's own records say about the load that reached the server."""

    ok: bool | None  # None: not checkable (mode unknown, too few requests)
    figure: str  # "mean 0.4 in flight (concurrency 4)", "achieved 1.95 req/s (label 2), lateness p99 12 ms"
    problem: str | None  # the "not reached" sentence, or None


def delivered(level: float | None, mode: str | None, sends: Sequence[float], ends: Sequence[float],
              lateness_s: Sequence[float], slo_ms: float, cv2: float = 1.0) -> Delivered:
    """The delivered-load check of one level (see the module doc). ``sends``/``ends``: the measured requests'
    ``t_sent``/``t_end`` (same order); ``lateness_s``: ``t_sent - t_intended`` (open loop)."""
    n = len(sends)
    if level is None or not level > 0 or mode not in ("closed", "open") or n < 2:
        return Delivered(None, "", None)
    if mode == "open":
        return _open_loop(level, sends, lateness_s, slo_ms, cv2, "req/s", "send rate")
    conc = level
    c = max(1, int(round(conc)))
    # a closed-loop slot is busy from the request's dispatch (t_intended: connection setup is the client's work on
    # it) to its end; the gap to the next dispatch is the client's own overhead
    sends = [s - lt for s, lt in zip(sends, lateness_s)] if len(lateness_s) == n else list(sends)
    if n < c:
        mean = sum(e - s for s, e in zip(sends, ends)) / max(1e-9, max(ends) - min(sends))
        fig = f"mean {mean:.2f} in flight (concurrency {conc:g}; only {n} requests)"
        return Delivered(False, fig, f"not reached: only {n} requests recorded at concurrency {conc:g}")
    mean = _mean_in_flight(sends, ends, c)  # ramp-up (until every slot was filled once) and drain excluded
    fig = f"mean {mean:.2f} requests in flight (concurrency {conc:g})"
    if mean < (1.0 - INFLIGHT_TOLERANCE) * conc:  # more in flight than the label only makes the test harder
        return Delivered(False, fig, f"not reached: {fig}, more than {INFLIGHT_TOLERANCE:.0%} below it")
    return Delivered(True, fig, None)


def _open_loop(level: float, sends: Sequence[float], lateness_s: Sequence[float], slo_ms: float, cv2: float,
               unit: str, what: str) -> Delivered:
    """The open-loop rule: the achieved rate of ``sends`` and their dispatch lateness against the label ``level``
    (``unit``: "req/s", "sessions/s"; ``what``: "send rate", "session start rate")."""
    n = len(sends)
    span = max(sends) - min(sends)
    if span <= 0:
        return Delivered(None, "", None)
    achieved = (n - 1) / span
    tol = rate_tolerance(n, cv2)
    late = sorted(lateness_s)
    p50 = _pct(late, 0.50) * 1000.0 if late else 0.0
    p99 = _pct(late, 0.99) * 1000.0 if late else 0.0
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
    if why:
        return Delivered(False, fig, "not reached: " + "; ".join(why))
    return Delivered(True, fig, None)


class SessionSpans:
    """What a level's records say about its sessions, for ``delivered_sessions``: per session (the first
    ``cap``) its start (the earliest dispatch ``t_intended`` of its turns: the first turn's) and its end (the
    latest ``t_end``); per first turn (``turn`` 1, the first ``cap``) its ``t_sent`` and dispatch lateness.
    About 100 bytes a session."""

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
                self.starts.append(t_intended)
                self.ends.append(t_end)
        else:
            if t_intended < self.starts[i]:
                self.starts[i] = t_intended
            if t_end > self.ends[i]:
                self.ends[i] = t_end
        if turn == 1 and len(self.first_sends) < self.cap:
            self.first_sends.append(t_sent)
            self.first_late.append(t_sent - t_intended)

    def __len__(self) -> int:
        return len(self.starts)


def delivered_sessions(level: float | None, mode: str | None, spans: SessionSpans, slo_ms: float,
                       cv2: float = 1.0) -> Delivered:
    """The delivered-load check of a session workload's level (see the module doc): sessions in flight against
    the concurrent sessions (closed loop), session starts against the rate (open loop)."""
    if level is None or not level > 0 or mode not in ("closed", "open"):
        return Delivered(None, "", None)
    if mode == "open":
        if len(spans.first_sends) < 2:
            return Delivered(None, "", None)
        return _open_loop(level, spans.first_sends, spans.first_late, slo_ms, cv2, "sessions/s",
                          "session start rate")
    n = len(spans)
    if n < 1:
        return Delivered(None, "", None)
    c = max(1, int(round(level)))
    starts, ends = spans.starts, spans.ends
    if n < c:
        span = max(ends) - min(starts)
        mean = sum(e - s for s, e in zip(starts, ends)) / span if span > 0 else 0.0
        fig = f"mean {mean:.2f} sessions in flight ({level:g} concurrent sessions; only {n} sessions)"
        return Delivered(False, fig, f"not reached: only {n} sessions recorded at {level:g} concurrent sessions")
    mean = _mean_in_flight(starts, ends, c)  # ramp-up (until every loop had started a session once) and drain excluded
    fig = f"mean {mean:.2f} sessions in flight ({level:g} concurrent sessions, think time included)"
    if mean < (1.0 - INFLIGHT_TOLERANCE) * level:
        return Delivered(False, fig, f"not reached: {fig}, more than {INFLIGHT_TOLERANCE:.0%} below it")
    return Delivered(True, fig, None)


def _mean_in_flight(starts: Sequence[float], ends: Sequence[float], c: int) -> float:
    """The time-averaged number of spans (requests, or sessions) open between the moment the ``c``-th started (every
    slot filled once: ramp-up ends) and the last start (the drain begins); over the whole when those coincide."""
    a = heapq.nsmallest(c, starts)[-1]
    b = max(starts)
    if b - a <= 0:
        t0, t1 = min(starts), max(ends)
        total = sum(e - s for s, e in zip(starts, ends))
        return total / (t1 - t0) if t1 > t0 else 0.0
    total = 0.0
    for s, e in zip(starts, ends):
        lo = s if s > a else a
        hi = e if e < b else b
        if hi > lo:
            total += hi - lo
    return total / (b - a)


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

