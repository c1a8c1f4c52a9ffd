"""The load worker's engine: one share of each step on its own event loop, reported to the coordinator in batches.

``--workers N`` (N >= 2, or ``auto``) starts N worker processes beside the coordinator
(:mod:`tui.sources.load.coordinator`); each runs one :class:`WorkerEngine` with its own event loop, HTTP
client and :class:`~tui.sources.load.runner.StepRunner`, spoken to over its pipe
(:mod:`tui.sources.load.worker_process`). The same engine runs inside a Ray actor
(:mod:`tui.sources.load.ray_workers`).

A worker sends a batch (:class:`~tui.sources.load.wire.Batch`) every :data:`FLUSH_S` seconds or
:data:`FLUSH_RECORDS` records, never one message per token or per request: the records finished since the
last batch, the requests started since the last batch (what the coordinator needs to record a request whose
worker died) and its ``settled`` mark.

Failures, the worker's side: on ``cancel`` (Ctrl-C, ``q``, SIGTERM at the coordinator) it records its
in-flight requests as ``cancelled``, sends its last batch and ends; it ignores SIGINT, so a terminal's Ctrl-C
reaches only the coordinator, which decides; when its input closes (the coordinator is gone) it cancels and
exits. It spools no file of its own: one writer, one file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
from collections.abc import Awaitable, Callable, Iterator
from time import perf_counter
from typing import Any

import tui.sources.openai_http as oh
from tui.core.redact import Scrubber
from tui.sources.load.arrivals import PlannedArrival, open_schedule, process_arrivals
from tui.sources.load.executor import RequestExecutor
from tui.sources.load.prompts import PromptBuilder
from tui.sources.load.runner import Clock, StepRunner
from tui.sources.load.sizing import raise_fd_limit
from tui.sources.load.steps import Step
from tui.sources.load.wire import Batch, StepOrder, WorkerSetup

FLUSH_S = 0.05  # a worker's batch interval
FLUSH_RECORDS = 256  # ... or sooner, when this many records wait


class WorkerEngine:
    """One worker: runs its share of each step and hands batches to ``out`` (a coroutine function).
    The same engine runs in a worker process (:func:`main`) and in a Ray actor."""

    def __init__(self, setup: WorkerSetup, out: Callable[[Batch], Awaitable[Any]]) -> None:
        self.setup = setup
        self.out = out
        self._records: list[dict] = []
        self._started: list[tuple] = []
        self._stop = False
        self._step_task: asyncio.Task | None = None
        self._client: Any = None
        self.runner: Any = None
        self._wake = asyncio.Event()

    async def start(self) -> dict:
        """Make the client and the runner; returns facts for the run header (pid, host)."""
        s = self.setup
        fd_limit = raise_fd_limit()
        self._client = oh.make_client(headers=s.headers, connect_timeout=s.connect_timeout,
                                      read_timeout=s.read_timeout, insecure=s.insecure)
        scrub = Scrubber(s.secrets)
        ex = RequestExecutor(self._client, s.endpoint, s.query, chat=s.chat, model=s.model, ignore_eos=s.ignore_eos,
                             read_timeout=s.read_timeout, token_offsets=s.token_offsets, scrub=scrub,
                             say=lambda _line: None, cache_prompt=s.cache_prompt)
        self.runner = StepRunner(ex, Clock(s.anchor), PromptBuilder.from_state(s.prompts), s.run_id,
                                 input_tokens=s.input_tokens, output_tokens=s.output_tokens, seed=s.seed,
                                 on_record=self._on_record, worker=s.worker, workers=s.workers,
                                 max_in_flight=s.max_in_flight, on_start=self._on_start,
                                 input_lengths=s.input_lengths, output_lengths=s.output_lengths,
                                 workload=s.workload)
        return {"worker": s.worker, "pid": os.getpid(), "host": platform.node(),
                "clock": "coordinator's anchor" if s.anchor is not None else "own anchor",
                "epoch0": self.runner.clock.epoch0, "fd_limit": fd_limit}

    def _on_record(self, d: dict, _req: Any) -> None:
        self._records.append(d)
        if len(self._records) >= FLUSH_RECORDS:
            self._wake.set()

    def _on_start(self, req: Any) -> None:
        ep = self.runner.clock.epoch
        self._started.append((req.id, ep(req.t_intended), req.phase, req.level, req.round, req.in_asked,
                              req.out_asked))

    def _batch(self, done: dict | None = None) -> Batch:
        r = self.runner
        b = Batch(self.setup.worker, r.settled_before(), self._records, self._started, done)
        self._records = []
        self._started = []
        return b

    async def _flusher(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), FLUSH_S)
            self._wake.clear()
            await self.out(self._batch())

    async def run_step(self, order: StepOrder) -> None:
        """Run this worker's share of one step; the last batch carries ``done``."""
        r = self.runner
        self._stop = False
        step = Step(order.level, order.round, order.phase, order.mode)  # type: ignore[arg-type]
        step.t0 = r.clock.perf(order.t0_epoch)
        cpu0, tcpu0, wall0 = time.process_time(), time.thread_time(), perf_counter()
        sent0 = r.sent_total
        r.sessions = None
        flusher = asyncio.create_task(self._flusher())
        try:
            if order.mode == "closed":
                await r.closed_step(step, order.concurrency, order.n_requests, order.duration, self._stopped)
            else:
                if order.arrivals is not None:
                    plan: Iterator[PlannedArrival] = iter(order.arrivals)
                else:
                    assert order.process is not None
                    arrival, rate, burst, seed, rnd = order.process
                    plan = process_arrivals(open_schedule(arrival, rate, burst, seed, rnd), order.n_requests,
                                            self.setup.worker, self.setup.workers)
                await r.open_step(step, plan, order.duration, self._stopped)
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            done = {"cpu_s": time.process_time() - cpu0, "thread_cpu_s": time.thread_time() - tcpu0,
                    "wall_s": max(perf_counter() - max(wall0, step.t0), 1e-9), "sent": r.sent_total - sent0}
            if r.sessions is not None:
                done["sessions"] = r.sessions.block()
            await self.out(self._batch(done))

    def _stopped(self) -> bool:
        return self._stop

    def stop_step(self) -> None:
        """The coordinator decided the step: send nothing more (requests in flight finish)."""
        self._stop = True

    def begin(self, order: StepOrder) -> asyncio.Task:
        self._step_task = asyncio.create_task(self.run_step(order))
        return self._step_task

    def cancel(self) -> None:
        """Stop now: in-flight requests are recorded as cancelled and sent in the last batch."""
        self._stop = True
        if self._step_task is not None and not self._step_task.done():
            self._step_task.cancel()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
