"""Worker processes: the load of one run split over several event loops, one coordinator.

``--workers N`` (N >= 2, or ``auto``) starts N worker processes (``python -m tui.sources.load.workers``)
beside the coordinator (the process the user started). Each worker has its own event loop, HTTP
client and :class:`~tui.sources.load.runner.StepRunner`; the coordinator keeps everything that must
be one: the server probe and prompt calibration, the single record file, the monitor and its
verdict, the console, and the decision to end a step.

The split (:func:`split_orders`):

- closed loop: the concurrency (and a request count) is divided among the workers, remainders to
  the first ones;
- open loop: every worker computes the same arrival schedule from the run seed and takes every
  W-th arrival (:func:`tui.sources.load.arrivals.share`); a trace's arrivals are dealt the same way
  by the coordinator. The union is exactly the requested process, and ``t_intended`` stays exact
  because workers on this machine use the coordinator's clock anchor (``perf_counter`` is the
  system-wide monotonic clock).

The wire (:class:`PipeLink`): length-prefixed pickle frames over the worker's standard input and
output (our own child, our own data). A worker sends a batch every :data:`FLUSH_S` seconds or
:data:`FLUSH_RECORDS` records, never one message per token or per request: the records finished
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
import pickle
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Protocol

FLUSH_S = 0.05  # a worker's batch interval
FLUSH_RECORDS = 256  # ... or sooner, when this many records wait
SETUP_TIMEOUT_S = 60.0  # a worker that has not said "ready" by then is a failed start
CANCEL_TIMEOUT_S = 15.0  # how long the coordinator waits for the workers' last batches after a cancel
SILENCE_S = 30.0  # a running worker that sent no batch for this long (it sends one every FLUSH_S) is stuck: lost
AUTO_STREAMS_PER_WORKER = 64  # --workers auto, closed loop: one worker per this many streams
AUTO_RATE_PER_WORKER = 250.0  # --workers auto, open loop: one worker per this many req/s
_FRAME = struct.Struct(">I")


# ------------------------------------------------------------------ what travels


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
    arrivals: list | None = None  # open loop from a trace: this worker's share of (index, offset, n_in, n_out)


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
                 process: tuple | None = None, arrivals: Sequence[tuple] | None = None) -> list[StepOrder]:
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


def auto_workers(mode: str, levels: Sequence[float], cpus: int | None = None) -> int:
    """``--workers auto``: enough worker processes for the heaviest level (one per
    :data:`AUTO_STREAMS_PER_WORKER` streams or :data:`AUTO_RATE_PER_WORKER` req/s), at most the
    machine's cores; 1 means the load runs in the coordinator itself."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    top = max(levels) if levels else 1.0
    per = AUTO_STREAMS_PER_WORKER if mode == "closed" else AUTO_RATE_PER_WORKER
    need = -(-int(top) // int(per)) if mode == "closed" else int(-(-top // per))
    return max(1, min(cpus, need))


# ------------------------------------------------------------------ the worker side


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
        from tui.core.redact import Scrubber
        from tui.sources import openai_http as oh
        from tui.sources.load.executor import RequestExecutor
        from tui.sources.load.generator import _raise_fd_limit
        from tui.sources.load.prompts import PromptBuilder
        from tui.sources.load.runner import Clock, StepRunner

        s = self.setup
        _raise_fd_limit()
        self._client = oh.make_client(headers=s.headers, connect_timeout=s.connect_timeout,
                                      read_timeout=s.read_timeout, insecure=s.insecure)
        scrub = Scrubber(s.secrets)
        ex = RequestExecutor(self._client, s.endpoint, s.query, chat=s.chat, model=s.model, ignore_eos=s.ignore_eos,
                             read_timeout=s.read_timeout, token_offsets=s.token_offsets, scrub=scrub,
                             say=lambda _line: None)
        self.runner = StepRunner(ex, Clock(s.anchor), PromptBuilder.from_state(s.prompts), s.run_id,
                                 input_tokens=s.input_tokens, output_tokens=s.output_tokens, seed=s.seed,
                                 on_record=self._on_record, worker=s.worker, workers=s.workers,
                                 max_in_flight=s.max_in_flight, on_start=self._on_start)
        import platform

        return {"worker": s.worker, "pid": os.getpid(), "host": platform.node(),
                "clock": "coordinator's anchor" if s.anchor is not None else "own anchor",
                "epoch0": self.runner.clock.epoch0}

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
        from tui.sources.load.arrivals import open_schedule
        from tui.sources.load.runner import process_arrivals
        from tui.sources.load.steps import Step

        r = self.runner
        self._stop = False
        step = Step(order.level, order.round, order.phase, order.mode)  # type: ignore[arg-type]
        step.t0 = r.clock.perf(order.t0_epoch)
        cpu0, tcpu0, wall0 = time.process_time(), time.thread_time(), perf_counter()
        sent0 = r.sent_total
        flusher = asyncio.create_task(self._flusher())
        try:
            if order.mode == "closed":
                await r.closed_step(step, order.concurrency, order.n_requests, order.duration, self._stopped)
            else:
                if order.arrivals is not None:
                    plan: Iterator = iter(order.arrivals)
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


# ------------------------------------------------------------------ the pipe between them


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


async def _serve() -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", 0))
    w_transport, w_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(1, "wb", 0))
    writer = asyncio.StreamWriter(w_transport, w_protocol, None, loop)
    lock = asyncio.Lock()

    async def send(msg: Any) -> None:
        async with lock:
            writer.write(frame(msg))
            await writer.drain()  # backpressure: a slow coordinator slows the batches, not the requests' timing

    engine: WorkerEngine | None = None
    task: asyncio.Task | None = None
    try:
        while True:
            msg = await read_frame(reader)
            if msg is None:  # the coordinator is gone: nobody to record for
                if engine is not None:
                    engine.cancel()
                break
            kind = msg[0]
            if kind == "setup":
                engine = WorkerEngine(msg[1], send)
                info = await engine.start()
                await send(("ready", info))
            elif kind == "step" and engine is not None:
                task = engine.begin(msg[1])
            elif kind == "stop" and engine is not None:
                engine.stop_step()
            elif kind == "cancel" and engine is not None:
                engine.cancel()
            elif kind == "exit":
                break
    finally:
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if engine is not None:
            await engine.close()
    return 0


def main() -> int:
    """Entry point of a worker process (``python -m tui.sources.load.workers``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to decide
    try:
        return asyncio.run(_serve())
    except BrokenPipeError:
        return 0


# ------------------------------------------------------------------ the coordinator side


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
            sys.executable, "-m", "tui.sources.load.workers",
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


if __name__ == "__main__":
    # run the copy of this module imported under its package name, so what it pickles (Batch) names
    # tui.sources.load.workers and not __main__
    from tui.sources.load.workers import main as _main

    sys.exit(_main())
