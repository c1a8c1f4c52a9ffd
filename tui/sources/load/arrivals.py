"""Arrival schedules (pure: no clock, no I/O).

Closed loop has no schedule: each of ``concurrency`` workers sends its next request when the last
one ends. Open loop sends on a schedule of offsets from the step start, computed from the seed alone
(:func:`open_schedule`), so the same seed, rate and round give the same arrival times wherever they
are computed: one coordinator can compute the schedule and hand each worker process its share
(:func:`share`) with the union still exactly the requested process.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

from tui.sources.load.config import Arrival


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
