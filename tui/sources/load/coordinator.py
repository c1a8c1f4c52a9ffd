"""The coordinator: the load of one run split over several worker processes (or Ray actors), one record file.

``--workers N`` (N >= 2, or ``auto``) starts N worker processes (``python -m tui.sources.load.worker_process``, :mod:`tui.sources.load.worker_process`)
beside the coordinator (the process the user started). Each worker has its own event loop, HTTP
client and :class:`~tui.sources.load.runner.StepRunner`; the coordinator keeps everything that must
be one: the server probe and prompt calibration, the single record file, the monitor and its
verdict, the console, and the decision to end a step.

The split (:func:`tui.sources.load.wire.split_orders`):

- closed loop: the concurrency (and a request count) is divided among the workers, remainders to
  the first ones;
- open loop: every worker computes the same arrival schedule from the run seed and takes every
  W-th arrival (:func:`tui.sources.load.arrivals.share`); a trace's arrivals are dealt the same way
  by the coordinator. The union is exactly the requested process, and ``t_intended`` stays exact
  because workers on this machine use the coordinator's clock anchor (``perf_counter`` is the
  system-wide monotonic clock).

The wire (:class:`PipeLink`, :mod:`tui.sources.load.wire`): length-prefixed pickle frames over the worker's standard input and
output (our own child, our own data). A worker sends a batch every ``FLUSH_S`` seconds or
``FLUSH_RECORDS`` records (:mod:`tui.sources.load.worker`, :mod:`tui.sources.load.worker_process`), never one message per token or per request: the records finished
since the last batch, the requests started since the last batch (id, intended time, lengths: what
the coordinator needs to record a request whose worker died) and a mark
``settled`` (epoch s) before which it has handed over every finished request. The coordinator
keeps a heap of received records and releases them in ``t_end`` order up to the smallest mark of
the workers still running: the monitor's timeline and the record file see one ordered stream.

Failures (documented in docs/load-workers.md):

- Ctrl-C, ``q`` in the console, SIGTERM: the coordinator tells every worker to cancel; each records
  its in-flight requests as ``cancelled`` (the cancellation rule of ``tui.core.records.outcome_rule``),
  sends its last batch and ends. Workers ignore SIGINT so a terminal's Ctrl-C reaches only the
  coordinator, which decides.
- SIGKILL of a worker: everything it had sent is kept; each request it had started and not yet
  reported is recorded as failed with error ``worker_lost``; the step is marked ``degraded`` (its
  verdict cannot be PASS: the level was not held) and the run stops after it.
- SIGKILL of the coordinator: the records in transit are lost (at most one batch per worker, about
  ``FLUSH_S`` of requests, plus the requests still open); workers see their input close and exit.
  Workers do not spool their own files: one writer, one file.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Protocol

from tui.sources.load.wire import Batch, StepOrder, WorkerSetup, frame, read_frame

SETUP_TIMEOUT_S = 60.0  # a worker that has not said "ready" by then is a failed start
CANCEL_TIMEOUT_S = 15.0  # how long the coordinator waits for the workers' last batches after a cancel
SILENCE_S = 30.0  # a running worker that sent no batch for this long (it sends one every FLUSH_S) is stuck: lost
WORKER_MODULE = "tui.sources.load.worker_process"  # what a worker process runs (python -m)


class WorkerLink(Protocol):
    """The coordinator's handle on one worker (a process here; a Ray actor in tui.sources.load.ray_workers)."""

    index: int

    async def start(self) -> None: ...
    async def send(self, msg: tuple) -> None: ...
    async def recv(self) -> Any: ...  # the next message, or None when the worker is gone
    def describe_exit(self) -> str: ...
    async def reap(self) -> None: ...  # after recv() gave None: wait for the worker's exit status
    def kill(self) -> None: ...  # stop a worker that no longer reports
    async def close(self) -> None: ...


class PipeLink:
    """A worker process on this machine, spoken to over its standard input and output."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr: deque[str] = deque(maxlen=20)
        self._err_task: asyncio.Task | None = None

    async def start(self) -> None:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", WORKER_MODULE,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, limit=2**26)
        self._err_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def send(self, msg: tuple) -> None:
        p = self.proc
        if p is None or p.stdin is None or p.returncode is not None:
            return
        try:
            p.stdin.write(frame(msg))
            await p.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def recv(self) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        return await read_frame(self.proc.stdout)

    async def reap(self) -> None:
        if self.proc is not None:
            await self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()

    def describe_exit(self) -> str:
        p = self.proc
        rc = None if p is None else p.returncode
        if rc is not None and rc < 0:
            try:
                how = f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                how = f"killed by signal {-rc}"
        else:
            how = "ended" if rc is None else f"exited with status {rc}"
        tail = f" ({self._stderr[-1]})" if self._stderr else ""
        return f"worker {self.index} (pid {p.pid if p else '?'}) {how}{tail}"

    async def close(self) -> None:
        p = self.proc
        if p is None:
            return
        if p.returncode is None:
            await self.send(("exit",))
            if p.stdin is not None:
                with contextlib.suppress(Exception):
                    p.stdin.close()
            try:
                await asyncio.wait_for(p.wait(), 5.0)
            except TimeoutError:
                p.kill()
                await p.wait()
        if self._err_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._err_task, 1.0)


@dataclass
class StepResult:
    cpu_s: float = 0.0  # the workers' process CPU over the step
    thread_cpu_s: float = 0.0
    busiest: float = 0.0  # the busiest worker's CPU-seconds per second
    per_worker_cpu_s: list[float] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # how each lost worker ended
    worker_lost_requests: int = 0
    sessions: dict | None = None  # session workloads: the workers' sessions blocks summed (started, completed, ...)

    @property
    def degraded(self) -> bool:
        return bool(self.lost)


class WorkerPool:
    """The coordinator's side: the workers of one run, one step at a time."""

    def __init__(self, links: Sequence[WorkerLink], say: Callable[[str], Any],
                 scrub: Callable[[str], str] = str) -> None:
        self.links = list(links)
        self.say = say
        self.scrub = scrub  # a worker's last stderr line goes into the step record: never a secret
        self.alive: set[int] = set()
        self.info: list[dict] = []
        self._inflight: dict[int, dict[str, tuple]] = {}
        self.last_result: StepResult | None = None

    @property
    def workers(self) -> int:
        return len(self.links)

    @property
    def in_flight(self) -> int:
        return sum(len(v) for v in self._inflight.values())

    async def start(self, setups: Sequence[WorkerSetup]) -> list[dict]:
        """Start every worker and hand it its setup; raises RuntimeError when one does not start."""
        await asyncio.gather(*(link.start() for link in self.links))

        async def one(link: WorkerLink, setup: WorkerSetup) -> dict:
            await link.send(("setup", setup))
            msg = await asyncio.wait_for(link.recv(), SETUP_TIMEOUT_S)
            if not (isinstance(msg, tuple) and msg and msg[0] == "ready"):
                raise RuntimeError(f"a load worker did not start: {self.scrub(link.describe_exit())}")
            return dict(msg[1])

        try:
            self.info = list(await asyncio.gather(*(one(lk, s) for lk, s in zip(self.links, setups, strict=True))))
        except TimeoutError:
            raise RuntimeError(f"a load worker did not start within {SETUP_TIMEOUT_S:g} s") from None
        self.alive = {lk.index for lk in self.links}
        self._inflight = {lk.index: {} for lk in self.links}
        return self.info

    async def close(self) -> None:
        await asyncio.gather(*(lk.close() for lk in self.links), return_exceptions=True)

    async def run_step(self, orders: Sequence[StepOrder], on_record: Callable[[dict], Any],
                       decided: Callable[[], bool], on_started: Callable[[int], Any] | None = None,
                       now_epoch: Callable[[], float] = time.time) -> StepResult:
        """Run one step on every live worker; records reach ``on_record`` in ``t_end`` order."""
        result = self.last_result = StepResult()  # (also what a cancelled step measured)
        queue: asyncio.Queue = asyncio.Queue()
        live = [lk for lk in self.links if lk.index in self.alive]
        running = {lk.index for lk in live}
        settled = {lk.index: -float("inf") for lk in live}
        heap: list[tuple[float, int, dict]] = []
        seq = itertools.count()
        stopped = False

        async def pump(link: WorkerLink) -> None:
            while True:
                try:
                    msg = await link.recv()
                except Exception as exc:  # noqa: BLE001 (an unreadable frame: the worker is treated as lost)
                    self.say(f"note: worker {link.index}: unreadable message ({type(exc).__name__}: {exc})")
                    msg = None
                await queue.put((link.index, msg))
                if msg is None or (isinstance(msg, Batch) and msg.done is not None):
                    return

        def release(upto: float) -> None:
            while heap and heap[0][0] <= upto:
                on_record(heapq.heappop(heap)[2])

        def take(k: int, b: Batch) -> None:
            fl = self._inflight[k]
            for s in b.started:
                fl[s[0]] = s
            if b.started and on_started is not None:
                on_started(len(b.started))
            for d in b.records:
                fl.pop(str(d.get("id")), None)
                t = d.get("t_end")
                heapq.heappush(heap, (t if isinstance(t, (int, float)) else -float("inf"), next(seq), d))
            settled[k] = b.settled

        def lose(k: int, reason: str | None = None) -> None:
            link = next(lk for lk in self.links if lk.index == k)
            why = self.scrub(link.describe_exit() if reason is None else reason)
            result.lost.append(why)
            self.alive.discard(k)
            t = now_epoch()
            for rid, (_id, t_int, phase, level, rnd, n_in, n_out) in sorted(self._inflight[k].items()):
                result.worker_lost_requests += 1
                d = {"type": "request", "id": rid, "t_intended": t_int, "t_sent": t_int, "t_first_token": None,
                     "t_end": max(t, t_int), "input_tokens": None, "output_tokens": None, "finish_reason": None,
                     "http_status": None, "complete": False, "error": "worker_lost",
                     "error_detail": f"its load worker process was lost: {why}; the outcome is unknown",
                     "phase": phase, "level": level, "round": rnd, "input_tokens_asked": n_in,
                     "output_tokens_asked": n_out}
                heapq.heappush(heap, (d["t_end"], next(seq), d))
            self._inflight[k] = {}
            self.say(f"note: {why}: step degraded, {result.worker_lost_requests} requests in flight recorded as "
                     "worker_lost")

        def give_up(k: int, reason: str) -> None:
            """A worker that no longer reports: stop it, and record its requests as lost."""
            running.discard(k)
            with contextlib.suppress(Exception):
                next(lk for lk in live if lk.index == k).kill()
            lose(k, reason)

        async def cancel_all() -> None:
            for lk in live:
                if lk.index in running:
                    await lk.send(("cancel",))

        async def handle(k: int, msg: Any) -> None:
            nonlocal stopped
            if msg is None:
                running.discard(k)
                link = next(lk for lk in live if lk.index == k)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(link.reap(), 2.0)
                lose(k)
            elif isinstance(msg, Batch):
                take(k, msg)
                if msg.done is not None:
                    running.discard(k)
                    settled[k] = float("inf")
                    cpu = float(msg.done.get("cpu_s", 0.0))
                    result.cpu_s += cpu
                    result.thread_cpu_s += float(msg.done.get("thread_cpu_s", 0.0))
                    result.per_worker_cpu_s.append(round(cpu, 4))
                    ss = msg.done.get("sessions")
                    if isinstance(ss, dict):
                        tot = result.sessions if result.sessions is not None else {}
                        for sk, sv in ss.items():
                            if isinstance(sv, int):
                                tot[sk] = tot.get(sk, 0) + sv
                        result.sessions = tot
                    wall = float(msg.done.get("wall_s", 0.0)) or 1e-9
                    if wall >= 1.0:
                        result.busiest = max(result.busiest, cpu / wall)
            release(min(settled[i] for i in running) if running else float("inf"))
            if not stopped and not cancelled and decided():
                stopped = True
                for lk in live:
                    if lk.index in running:
                        await lk.send(("stop",))

        pumps: list[asyncio.Task] = []
        cancelled = False
        deadline: float | None = None
        last_seen = dict.fromkeys(running, perf_counter())
        next_check = perf_counter() + 1.0
        try:
            for lk, order in zip(live, orders, strict=False):
                await lk.send(("step", order))
            pumps = [asyncio.create_task(pump(lk)) for lk in live]
            while running:
                try:
                    wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - perf_counter()))
                    k, msg = await asyncio.wait_for(queue.get(), wait)
                    if k in running:  # (a worker already given up as lost is not heard again: each id once)
                        last_seen[k] = perf_counter()
                        await handle(k, msg)
                except asyncio.CancelledError:
                    if cancelled:
                        raise
                    cancelled = True  # Ctrl-C / quit / SIGTERM: every worker records its in-flight requests
                    deadline = perf_counter() + CANCEL_TIMEOUT_S
                    await cancel_all()
                except TimeoutError:
                    if deadline is not None and perf_counter() >= deadline:  # after a cancel: no last batch came
                        for k in sorted(running):
                            give_up(k, f"worker {k} sent no last batch within {CANCEL_TIMEOUT_S:g} s of the cancel")
                        continue
                now = perf_counter()
                if now >= next_check:  # (at most once a second, whatever else arrives)
                    next_check = now + 1.0
                    for k in sorted(running):
                        if now - last_seen[k] > SILENCE_S:  # alive or not, it no longer reports: stuck
                            give_up(k, f"worker {k} sent nothing for {SILENCE_S:g} s (stuck; stopped)")
                    release(min(settled[i] for i in running) if running else float("inf"))
        finally:
            release(float("inf"))
            for p in pumps:
                p.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
        if cancelled:
            raise asyncio.CancelledError
        return result
