"""Arrival schedules (pure: no clock, no I/O).

Closed loop has no schedule: each of ``concurrency`` workers sends its next request when the last
one ends. Open loop sends on a schedule of offsets from the step start, computed from the seed alone
(:func:`open_schedule`), so the same seed, rate and round give the same arrival times wherever they
are computed: one coordinator can compute the schedule and hand each worker process its share
(:func:`share`) with the union still exactly the requested process.

What a step's request loop takes is a plan of :class:`PlannedArrival` (index, offset, lengths): the
seed's process (:func:`process_arrivals`) or a trace's arrivals (:func:`trace_arrivals`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from tui.sources.load.kinds import Arrival
from tui.sources.load.trace import Trace, trace_schedule


class PlannedArrival(NamedTuple):
    """One planned arrival of an open-loop step. None lengths are drawn from the configured ranges."""

    seq: int  # the arrival's number in the whole schedule (0-based, all workers together)
    offset: float  # seconds from the step start
    input_tokens: int | None
    output_tokens: int | None


def gap_sampler(arrival: Arrival | str, rate: float, burstiness: float, rng: random.Random) -> Callable[[], float]:
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


def offsets(arrival: Arrival | str, rate: float, burstiness: float, rng: random.Random) -> Iterator[float]:
    """Endless arrival offsets (seconds from step start; the first arrival is at 0)."""
    gap = gap_sampler(arrival, rate, burstiness, rng)
    t = 0.0
    while True:
        yield t
        t += gap()


def schedule_seed(seed: Any, rate: float, rnd: int) -> str:
    """The random stream of one open-loop step: the run seed, the rate and the round."""
    return f"{seed}:arrivals:{rate}:{rnd}"


def open_schedule(arrival: Arrival | str, rate: float, burstiness: float, seed: Any, rnd: int) -> Iterator[float]:
    """The arrival offsets of one open-loop step (endless; the step stops taking them at its limit)."""
    return offsets(arrival, rate, burstiness, random.Random(schedule_seed(seed, rate, rnd)))


def arrival_offsets(arrival: Arrival | str, rate: float, burstiness: float, seed: Any, n: int) -> list[float]:
    """The first ``n`` arrival offsets (seconds from step start; the first arrival is at 0)."""
    return list(itertools.islice(offsets(arrival, rate, burstiness, random.Random(str(seed))), n))


def share(schedule: Iterator[float], worker: int, workers: int) -> Iterator[tuple[int, float]]:
    """Worker ``worker``'s share (0-based) of one schedule: (arrival index, offset) of every
    ``workers``-th arrival, round robin. The shares of all workers partition the schedule."""
    if not 0 <= worker < workers:
        raise ValueError("worker must be in [0, workers)")
    return itertools.islice(enumerate(schedule), worker, None, workers)


def process_arrivals(schedule: Iterator[float], n_requests: int | None, worker: int = 0,
                     workers: int = 1) -> Iterator[PlannedArrival]:
    """The arrivals of one open-loop step for worker ``worker`` of ``workers``: every
    ``workers``-th arrival of the one schedule (round robin by arrival index), the first
    ``n_requests`` of the whole schedule only. The shares of all workers partition the process."""
    for i, offset in share(schedule, worker, workers):
        if n_requests is not None and i >= n_requests:
            return
        yield PlannedArrival(i, offset, None, None)


def trace_arrivals(trace: Trace, n_requests: int | None) -> Iterator[PlannedArrival]:
    """A trace's arrivals with their lengths, the first ``n_requests`` only (0 lengths: drawn from the ranges)."""
    for i, (offset, n_in, n_out) in enumerate(trace_schedule(trace)):
        if n_requests is not None and i >= n_requests:
            return
        yield PlannedArrival(i, offset, n_in or None, n_out or None)
