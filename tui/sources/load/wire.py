"""What travels between the coordinator and its load workers, and how: the messages, the split of a step, the frames.

- :class:`WorkerSetup` (once per worker), :class:`StepOrder` (one worker's share of one step) and
  :class:`Batch` (what a worker hands back: finished records, started requests, its ``settled`` mark);
- :func:`split_orders`: the split of one step among the workers (closed loop: the concurrency and a
  request count divided, remainders to the first ones; open loop: every W-th arrival of the one
  schedule, or of a trace's arrivals dealt by the coordinator);
- :func:`frame` / :func:`read_frame`: length-prefixed pickle frames over a worker's standard input and
  output (our own child, our own data).

Plain data and framing only (no event loop of its own, no request): the worker process
(:mod:`tui.sources.load.worker_process`, :mod:`tui.sources.load.worker`), the coordinator (:mod:`tui.sources.load.coordinator`) and the Ray
actors (:mod:`tui.sources.load.ray_workers`) all speak it. The design and the failures are described in
:mod:`tui.sources.load.coordinator` and docs/load-workers.md.
"""

from __future__ import annotations

import asyncio
import itertools
import pickle
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.lengths import LengthDist
from tui.sources.load.arrivals import PlannedArrival

_FRAME = struct.Struct(">I")


@dataclass
class WorkerSetup:
    """What one worker needs to send requests (picklable; holds the auth headers: it travels only
    over the worker's own pipe or Ray's object transfer, never to a file)."""

    worker: int
    workers: int
    endpoint: str
    query: str
    chat: bool
    model: str | None
    ignore_eos: bool
    connect_timeout: float
    read_timeout: float
    insecure: bool
    token_offsets: bool
    headers: dict[str, str]
    secrets: list[str]
    run_id: str
    seed: Any
    input_tokens: tuple[int, int]
    output_tokens: tuple[int, int]
    max_in_flight: int
    prompts: dict
    anchor: tuple[float, float] | None  # the coordinator's clock anchor (same machine) or None (own clock)
    input_lengths: LengthDist | None = None  # the distributions (tui.core.lengths); None: the pairs above
    output_lengths: LengthDist | None = None
    workload: Any = None  # tui.sources.load.workload.Workload of a shaped workload (sessions, prefixes, a dataset)
    cache_prompt: bool = False  # what the requests send as cache_prompt (LoadConfig.cache_prompt)
    api: str = "chat"  # chat, completions or embeddings (LoadConfig.api)


@dataclass
class StepOrder:
    """One worker's share of one step."""

    level: float
    round: int
    phase: str
    mode: str
    t0_epoch: float  # the common start of the step
    duration: float | None
    concurrency: int = 0  # closed loop: this worker's loops
    n_requests: int | None = None  # closed loop: this worker's count; open loop: the whole schedule's
    process: tuple | None = None  # open loop: (arrival, rate, burstiness, seed, round) of the one schedule
    arrivals: list[PlannedArrival] | None = None  # open loop from a trace: this worker's share of (index, offset, n_in, n_out)


@dataclass
class Batch:
    worker: int
    settled: float  # epoch s: every request of this worker that ended before this is in this batch or an earlier one
    records: list[dict] = field(default_factory=list)
    started: list[tuple] = field(default_factory=list)  # (id, t_intended epoch, phase, level, round, n_in, n_out)
    done: dict | None = None  # set on the last batch of a step: {"cpu_s", "thread_cpu_s", "wall_s", "sent"}


def split_count(total: int, workers: int) -> list[int]:
    """``total`` divided among ``workers``: remainders to the first ones."""
    base, extra = divmod(int(total), workers)
    return [base + (1 if k < extra else 0) for k in range(workers)]


def split_orders(*, level: float, rnd: int, phase: str, mode: str, t0_epoch: float, duration: float | None,
                 n_requests: int | None, workers: int, concurrency: int | None = None,
                 process: tuple | None = None, arrivals: Sequence[PlannedArrival] | None = None) -> list[StepOrder]:
    """Each worker's share of one step (see the module docstring)."""
    orders = []
    if mode == "closed":
        conc = split_count(int(concurrency if concurrency is not None else level), workers)
        counts: list[int | None] = ([*split_count(n_requests, workers)] if n_requests is not None
                                    else [None] * workers)
        for k in range(workers):
            n_k = counts[k]
            if conc[k] == 0 and n_k:  # more workers than streams: a worker with a count needs a loop
                conc[k] = 1
            orders.append(StepOrder(level, rnd, phase, mode, t0_epoch, duration, concurrency=conc[k], n_requests=n_k))
        return orders
    for k in range(workers):
        share = None
        if arrivals is not None:
            share = [a for a in itertools.islice(arrivals, k, None, workers)
                     if n_requests is None or a[0] < n_requests]
        orders.append(StepOrder(level, rnd, phase, mode, t0_epoch, duration, n_requests=n_requests,
                                process=process, arrivals=share))
    return orders



# ------------------------------------------------------------------ frames


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """One frame, or None at end of input."""
    try:
        head = await reader.readexactly(_FRAME.size)
        (n,) = _FRAME.unpack(head)
        body = await reader.readexactly(n)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return pickle.loads(body)  # noqa: S301 (our own child process, our own frames)


def frame(msg: Any) -> bytes:
    body = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(body)) + body

