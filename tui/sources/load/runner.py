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

from tui.core.lengths import LengthDist, draw_at, header_block, parse_lengths
from tui.sources.load.arrivals import PlannedArrival
from tui.sources.load.executor import Req, RequestExecutor, TurnInfo, request_record
from tui.sources.load.prompts import PromptBuilder, prompt_prefix
from tui.sources.load.sessions import SessionCounts, closed_sessions, open_sessions
from tui.sources.load.steps import Step, closed_loops
from tui.sources.load.workload import SessionPlan, Workload, where_key


def range_lengths(pair: tuple[int, int]) -> LengthDist:
    """A (min, max) pair as the distribution it always meant: fixed when equal, else the old ``A-B`` uniform."""
    lo, hi = int(pair[0]), int(pair[1])
    return parse_lengths(str(lo) if lo == hi else f"{lo}-{hi}")


def lengths_block(pair: tuple[int, int], dist: LengthDist | None) -> dict:
    """The run header's ``load.input_tokens`` / ``load.output_tokens`` (:func:`tui.core.lengths.header_block`)."""
    return header_block(range_lengths(pair) if dist is None else dist)


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
                 on_start: Callable[[Req], Any] | None = None, input_lengths: LengthDist | None = None,
                 output_lengths: LengthDist | None = None, workload: Workload | None = None) -> None:
        self.executor = executor
        # a shaped workload (sessions, shared prefixes, a dataset: tui.sources.load.workload); None: plain requests
        self.workload = workload
        self._sess_seq = worker  # session ids: run_id-s(seq+1), steps of `workers`, like request ids
        self.sessions: SessionCounts | None = None  # the sessions of the last (or running) session step
        self.clock = clock
        self.prompts = prompts
        self.run_id = run_id
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        # the distributions (tui.core.lengths); without them the (min, max) pairs: fixed, or the old A-B form
        self.input_lengths = input_lengths if input_lengths is not None else range_lengths(input_tokens)
        self.output_lengths = output_lengths if output_lengths is not None else range_lengths(output_tokens)
        self.seed = seed
        self._closed_index: dict[tuple, int] = {}  # closed loop: requests this runner built per step
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

    def new_req(self, step: Step, t_intended: float, n_in: int | None = None, n_out: int | None = None,
                index: int | None = None) -> Req:
        """The next request of ``step``. ``index``: its place in the step's one schedule (an open-loop arrival's
        ``seq``); None in closed loop, where this runner's k-th request of the step is number
        ``worker + k * workers`` (the workers' numbers partition 0, 1, 2, ... as one process's do)."""
        if self.workload is not None:
            return self._shaped_req(step, t_intended, n_in, n_out, index)
        rid = self._next_id()
        if n_in is None or n_out is None:
            if index is None:
                index = self.closed_index(step)
            where = where_key(step.phase, step.level, step.round, index)
            if n_in is None:
                n_in = self._draw(self.input_lengths, "in", where)
            if n_out is None:
                n_out = self._draw(self.output_lengths, "out", where)
        prompt, counted = self.prompts.build_counted(prompt_prefix(rid), n_in)
        req = Req(rid, step.phase, step.level, step.round, step, n_in, n_out, prompt, t_intended)
        req.in_counted = counted  # the tokenizer's count of the prompt (--tokenizer), else None
        return req

    def closed_index(self, step: Step) -> int:
        """Closed loop: the index of this runner's next request (or session) of ``step``: its k-th is number
        ``worker + k * workers`` (the workers' numbers partition 0, 1, 2, ... as one process's do)."""
        skey = (step.phase, step.level, step.round)
        k = self._closed_index.get(skey, 0)
        self._closed_index[skey] = k + 1
        return self.worker + k * self.workers

    def _next_id(self) -> str:
        """The next request id, ``run_id-(seq+1)``: this runner's stripe of the sequence (steps of ``workers``)."""
        self._seq += 1
        rid = f"{self.run_id}-{self._seq:06d}"
        self._seq += self.workers - 1
        return rid

    # -- shaped workloads (issue 23) ------------------------------------------

    def session_plan(self, step: Step, index: int) -> SessionPlan:
        assert self.workload is not None
        return self.workload.plan(where_key(step.phase, step.level, step.round, index), index, self.prompts)

    def next_session_id(self) -> str:
        self._sess_seq += 1
        sid = f"{self.run_id}-s{self._sess_seq:06d}"
        self._sess_seq += self.workers - 1
        return sid

    def begin_sessions(self) -> SessionCounts:
        self.sessions = SessionCounts()
        return self.sessions

    def new_turn(self, step: Step, t_intended: float, plan: SessionPlan, k: int, session: str | None,
                 history: list[tuple[str, str]], history_tokens: int, think_s: float,
                 n_in: int | None = None, n_out: int | None = None) -> tuple[Req, str, int]:
        """Turn ``k`` of ``plan`` (a session's, or the one request of a single-turn shaped workload): (its request,
        its user message, that message's tokens)."""
        wl = self.workload
        assert wl is not None
        rid = self._next_id()
        key = f"{plan.where}:t{k}"
        recorded = wl.replay_lengths(plan, k)  # a trace replay: the recorded turn's lengths asked
        if recorded is not None:
            n_in, n_out = recorded
        ds = wl.dataset_turn(plan, k)
        counted = None
        if ds is not None:
            user, n_user, n_ds_out = ds
            if n_out is None:
                n_out = n_ds_out if n_ds_out is not None else self._draw(self.output_lengths, "out", key)
        else:
            n_user = n_in if n_in is not None else self._draw(self.input_lengths, "in", key)
            if n_out is None:
                n_out = self._draw(self.output_lengths, "out", key)
            user, counted = self.prompts.build_counted(prompt_prefix(rid), n_user)
        fields = wl.record_fields(plan)
        if session is not None:
            fields.update(session=session, turn=k, turns_planned=plan.turns)
        fields["context_tokens"] = plan.system_tokens + history_tokens + n_user
        if k > 1:
            fields["think_s"] = round(think_s, 6)
        turn = TurnInfo(plan.system, list(history) if history else None, fields, keep=session is not None,
                        turns_left=plan.turns - k)
        req = Req(rid, step.phase, step.level, step.round, step, n_user, n_out, user, t_intended)
        req.turn = turn
        req.in_counted = counted if ds is None else None
        return req, user, n_user

    def _shaped_req(self, step: Step, t_intended: float, n_in: int | None, n_out: int | None,
                    index: int | None) -> Req:
        """A single request of a shaped workload (shared prefixes and/or a dataset, no sessions)."""
        if index is None:
            index = self.closed_index(step)
        plan = self.session_plan(step, index)
        req, _user, _n = self.new_turn(step, t_intended, plan, 1, None, [], 0, 0.0, n_in, n_out)
        return req

    def _draw(self, d: LengthDist, stream: str, where: str) -> int:
        if d.kind == "fixed" or d.lo == d.hi:
            return d.lo
        if d.sequential:  # the A-B form: the old sequential stream, so a seed asks what it asked before
            return self._len_rng.randint(d.lo, d.hi)
        return draw_at(d, self.seed, f"lengths:{stream}:{where}")

    async def send_one(self, req: Req) -> None:
        """Run one request to its end, recording it exactly once (also when cancelled)."""
        self.sent_total += 1
        req.step.sent += 1
        if self.executor.embeddings:
            req.out_asked = None  # an embeddings request generates nothing: no output length is asked
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
                self.executor.fail(req, "other", f"{type(exc).__name__}: {exc}", exc)  # "client" when EMFILE ...
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
        if self.workload is not None and self.workload.sessions:
            return await closed_sessions(self, step, concurrency, n_requests, duration, stop)

        async def request(now: float) -> bool:
            req = self.new_req(step, now)
            await self.send_one(req)
            return req.error == "client"  # the client's own resources ran out: this loop backs off (closed_loops)

        await closed_loops(step, concurrency, n_requests, duration, stop, request)

    async def open_step(self, step: Step, arrivals: Iterable[PlannedArrival], duration: float | None,
                        stop: Callable[[], bool]) -> None:
        """Send each planned arrival at ``step.t0 + offset`` (offsets ascending) until the plan
        ends, ``duration`` passed or ``stop()``; at most ``max_in_flight`` open at once (the rest
        wait, and their wait shows as lateness)."""
        if self.workload is not None and self.workload.sessions:
            return await open_sessions(self, step, arrivals, duration, stop)
        sem = asyncio.Semaphore(self.max_in_flight)

        async def one(req: Req) -> None:
            try:
                await self.send_one(req)
            finally:
                sem.release()

        async with asyncio.TaskGroup() as tg:
            for i, offset, n_in, n_out in arrivals:
                if duration is not None and offset >= duration:
                    break
                if stop():
                    break
                t_int = step.t0 + offset
                req = self.new_req(step, t_int, n_in, n_out, i)  # built before the wait: at t_int only the send
                seq = self._seq
                delay = t_int - perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                    if stop():
                        if self._seq == seq:  # never sent: its id goes to the next request (unless another step
                            self._seq -= self.workers  # on this runner took an id meanwhile: a drill's next phase)
                        break
                await sem.acquire()
                tg.create_task(one(req))

