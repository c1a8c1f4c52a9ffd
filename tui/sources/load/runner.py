"""The request loop of one step, shared by the in-process generator and every worker process.

A :class:`StepRunner` owns what sending requests needs and nothing of a run's verdict: the
executor (client, endpoint, scrubber), the clock, the prompt builder, the request-id sequence and
the length stream. It runs a closed-loop or open-loop step, stamps every request, and hands each
finished request to ``on_record(record, req)`` exactly once (also when cancelled). Who calls it:

- :class:`tui.sources.load.generator.LoadGenerator` in process (``--workers 1``): ``on_record``
  writes the record and feeds the monitor at once;
- :class:`tui.sources.load.worker.WorkerEngine` in a worker process or Ray actor: ``on_record``
  puts the record in the next batch for the coordinator.

Request ids are unique by construction, never by remembering them: ``<run id>-<sequence>``, where
worker ``k`` of ``W`` uses the sequence numbers ``k+1, k+1+W, k+1+2W, ...`` (with one worker the
familiar 1, 2, 3, ...).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import Any

from tui.sources.load.arrivals import PlannedArrival
from tui.sources.load.executor import Req, RequestExecutor, request_record
from tui.sources.load.prompts import PromptBuilder, prompt_prefix
from tui.sources.load.steps import Step


class Clock:
    """Epoch seconds from one perf_counter anchor: monotonic intervals, wall-clock meaning.

    Worker processes on the same machine take the coordinator's anchor (``perf_counter`` is the
    system-wide monotonic clock), so their stamps are on the coordinator's timeline exactly; a
    worker on another machine (Ray) makes its own anchor from its own wall clock."""

    __slots__ = ("epoch0", "perf0")

    def __init__(self, anchor: tuple[float, float] | None = None) -> None:
        if anchor is None:
            self.epoch0 = time.time()
            self.perf0 = perf_counter()
        else:
            self.epoch0, self.perf0 = float(anchor[0]), float(anchor[1])

    @property
    def anchor(self) -> tuple[float, float]:
        return (self.epoch0, self.perf0)

    def epoch(self, perf: float) -> float:
        return self.epoch0 + (perf - self.perf0)

    def perf(self, epoch: float) -> float:
        return self.perf0 + (epoch - self.epoch0)

    def now(self) -> float:
        return self.epoch0 + (perf_counter() - self.perf0)


OnRecord = Callable[[dict, Req], Any]


class StepRunner:
    """Runs the requests of steps on one event loop (see the module docstring)."""

    def __init__(self, executor: RequestExecutor, clock: Clock, prompts: PromptBuilder, run_id: str, *,
                 input_tokens: tuple[int, int], output_tokens: tuple[int, int], seed: Any,
                 on_record: OnRecord, worker: int = 0, workers: int = 1, max_in_flight: int = 4096,
                 on_start: Callable[[Req], Any] | None = None) -> None:
        self.executor = executor
        self.clock = clock
        self.prompts = prompts
        self.run_id = run_id
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.on_record = on_record
        self.on_start = on_start  # told of each request as it is sent (a worker reports them in its next batch)
        self.worker = worker
        self.workers = workers
        self.max_in_flight = max_in_flight
        self._seq = worker  # the next id is run_id-(seq+1); steps of `workers`
        lengths = f"{seed}:lengths" if workers == 1 else f"{seed}:lengths:{worker}/{workers}"
        self._len_rng = random.Random(lengths)
        self.sent_total = 0
        self.live: set[Req] = set()  # requests sent and not yet recorded (their outcome still open)

    @property
    def in_flight(self) -> int:
        return len(self.live)

    # -- requests ----------------------------------------------------------

    def new_req(self, step: Step, t_intended: float, n_in: int | None = None, n_out: int | None = None) -> Req:
        self._seq += 1
        rid = f"{self.run_id}-{self._seq:06d}"
        self._seq += self.workers - 1
        if n_in is None:
            lo, hi = self.input_tokens
            n_in = lo if lo == hi else self._len_rng.randint(lo, hi)
        if n_out is None:
            lo, hi = self.output_tokens
            n_out = lo if lo == hi else self._len_rng.randint(lo, hi)
        prompt = self.prompts.build(prompt_prefix(rid), n_in)
        return Req(rid, step.phase, step.level, step.round, step, n_in, n_out, prompt, t_intended)

    async def send_one(self, req: Req) -> None:
        """Run one request to its end, recording it exactly once (also when cancelled)."""
        self.sent_total += 1
        req.step.sent += 1
        self.live.add(req)
        if self.on_start is not None:
            self.on_start(req)
        try:
            await self.executor.execute(req)
        except asyncio.CancelledError:
            if req.error is None and req.t_end is None:  # (t_end set: it had completed already)
                # t_end = when the cancellation reached the request: with t_sent and t_first_token it tells
                # whether the outcome was still open then (tui.core.records.outcome_rule)
                req.t_end = perf_counter()
                req.error = "cancelled"
                req.detail = "stopped by the user" if req.t_sent is not None else "stopped before the request was sent"
            raise
        except Exception as exc:  # noqa: BLE001 -- a bug here must not lose the request
            if req.error is None:
                req.error = "other"
                req.detail = self.executor.scrub(f"{type(exc).__name__}: {exc}")
        finally:
            self.live.discard(req)
            self.finish(req)

    def finish(self, req: Req) -> None:
        if req.done:
            return
        req.done = True
        if req.t_end is None:
            req.t_end = perf_counter()
        if req.t_sent is None:
            req.t_sent = req.t_dispatch
        d, lateness, ttft, out_tok = request_record(req, self.clock.epoch)
        req.step.add(lateness, req.error, ttft, out_tok)
        req.prompt = ""
        self.on_record(d, req)

    def settled_before(self) -> float:
        """An epoch time before which every request of this runner has been handed to ``on_record``:
        now, or the earliest end already stamped on a request not yet recorded (the coordinator
        orders records by ``t_end`` up to this mark)."""
        t = perf_counter()
        for r in self.live:
            if r.t_end is not None and r.t_end < t:
                t = r.t_end
        return self.clock.epoch(t)

    # -- steps -------------------------------------------------------------

    async def closed_step(self, step: Step, concurrency: int, n_requests: int | None, duration: float | None,
                          stop: Callable[[], bool]) -> None:
        """``concurrency`` loops, each sending its next request when the last one ended, until
        ``n_requests`` were issued (by all loops of this runner), ``duration`` passed or ``stop()``."""
        end_at = step.t0 + duration if duration else None
        issued = 0

        async def loop() -> None:
            nonlocal issued
            while True:
                if n_requests is not None and issued >= n_requests:
                    return
                now = perf_counter()
                if end_at is not None and now >= end_at:
                    return
                if stop():
                    return
                issued += 1
                await self.send_one(self.new_req(step, now))

        if concurrency <= 0:
            return
        delay = step.t0 - perf_counter()
        if delay > 0:  # a common start time for every worker
            await asyncio.sleep(delay)
        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(loop())

    async def open_step(self, step: Step, arrivals: Iterable[PlannedArrival], duration: float | None,
                        stop: Callable[[], bool]) -> None:
        """Send each planned arrival at ``step.t0 + offset`` (offsets ascending) until the plan
        ends, ``duration`` passed or ``stop()``; at most ``max_in_flight`` open at once (the rest
        wait, and their wait shows as lateness)."""
        sem = asyncio.Semaphore(self.max_in_flight)

        async def one(req: Req) -> None:
            try:
                await self.send_one(req)
            finally:
                sem.release()

        async with asyncio.TaskGroup() as tg:
            for _i, offset, n_in, n_out in arrivals:
                if duration is not None and offset >= duration:
                    break
                if stop():
                    break
                t_int = step.t0 + offset
                req = self.new_req(step, t_int, n_in, n_out)  # built before the wait: at t_int only the send
                delay = t_int - perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                    if stop():
                        self._seq -= self.workers  # never sent: its id is given to the next request instead
                        break
                await sem.acquire()
                tg.create_task(one(req))

