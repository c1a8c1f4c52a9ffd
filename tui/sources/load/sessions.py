"""Session loops (issue 23, ``--turns``): multi-turn conversations in closed and open loop.

A session is a conversation: turn ``k`` sends the system prompt (if any), every earlier user message with the answer
text the server actually returned, and the next user message (:class:`tui.sources.load.executor.TurnInfo`). Between
turns the session waits its think time. A failed turn ends its session (its record carries ``turns_not_sent``) and
the loop starts the next session. A step that ends (``--duration``, decided, stopped) sends no further turns: the
sessions cut so are counted in ``cut_at_step_end``.

- closed loop (:func:`closed_sessions`): the level is the number of concurrent sessions, each loop runs one session
  after another; ``n_sessions`` (``--requests``) counts sessions started;
- open loop (:func:`open_sessions`): each planned arrival starts a session at its offset.

The loops drive a :class:`~tui.sources.load.runner.StepRunner` (``r``): ``r.session_plan(step, index)`` says what
a session asks (a function of the seed, the step and the index alone, :mod:`tui.sources.load.workload`),
``r.new_turn(...)`` builds a turn's request, ``r.send_one(req)`` sends and records it. Sessions never move: a
session runs to its end in the loop (and the process) that started it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from time import perf_counter
from typing import Any

from tui.sources.load.arrivals import PlannedArrival
from tui.sources.load.steps import Step, closed_loops


@dataclass
class SessionCounts:
    """One step's sessions: the step end record's ``sessions`` block."""

    started: int = 0
    completed: int = 0
    ended_by_failure: int = 0
    cut_at_step_end: int = 0
    cancelled: int = 0  # stopped by the user (Ctrl-C, SIGTERM) mid-session: its request in flight recorded cancelled

    def block(self) -> dict[str, int]:
        return asdict(self)

    def add(self, other: dict) -> None:
        for k in ("started", "completed", "ended_by_failure", "cut_at_step_end", "cancelled"):
            v = other.get(k)
            if isinstance(v, int):
                setattr(self, k, getattr(self, k) + v)


def _answer_tokens(req: Any) -> int:
    """The tokens of a turn's answer: the server's usage, else the counted content events."""
    if req.usage_server and req.out_tok is not None:
        return int(req.out_tok)
    return int(req.n_content)


STOP_POLL_S = 0.25  # a session thinking checks this often whether its step was stopped (decided, cancelled)


async def _think(seconds: float, end_at: float | None, stop: Callable[[], bool]) -> bool:
    """Wait a think time; False when the step ended (or was stopped) first. A session thinking past the step's end
    thinks until that end (it holds its place in the level) and is then cut."""
    until = perf_counter() + seconds
    while True:
        if stop():
            return False
        now = perf_counter()
        if end_at is not None and now >= end_at:
            return False
        if now >= until:
            return True
        wake = until if end_at is None else min(until, end_at)
        await asyncio.sleep(min(STOP_POLL_S, wake - now))


def first_turn(r: Any, step: Step, index: int, t_start: float) -> tuple:
    """(plan, session id, (request, user text, its tokens)) of session ``index``'s first turn."""
    plan = r.session_plan(step, index)
    sid = r.next_session_id()
    return plan, sid, r.new_turn(step, t_start, plan, 1, sid, [], 0, 0.0)


async def run_session(r: Any, step: Step, index: int, t_start: float, end_at: float | None,
                      stop: Callable[[], bool], counts: SessionCounts, first: tuple | None = None) -> None:
    """Session ``index`` of ``step``: its turns one after another (see the module docstring). ``first``: its first
    turn already built (open loop builds it before the wait for its arrival time: at that time only the send)."""
    if first is None:
        first = first_turn(r, step, index, t_start)
    counts.started += 1
    try:
        await _turns(r, step, first, t_start, end_at, stop, counts)
    except asyncio.CancelledError:
        counts.cancelled += 1  # every session started ends in exactly one of the counts
        raise


async def _turns(r: Any, step: Step, first: tuple, t_start: float, end_at: float | None, stop: Callable[[], bool],
                 counts: SessionCounts) -> None:
    """The turns of one session, counting how it ended (completed, failed, cut at the step's end)."""
    plan, sid, turn1 = first
    history: list[tuple[str, str]] = []
    history_tokens = 0
    t_int = t_start
    for k in range(1, plan.turns + 1):
        think = 0.0
        if k > 1:
            think = r.workload.think_for(plan, k)
            if not await _think(think, end_at, stop):
                counts.cut_at_step_end += 1
                return
            t_int = perf_counter()
        if k == 1:
            req, user, n_user = turn1
        else:
            req, user, n_user = r.new_turn(step, t_int, plan, k, sid, history, history_tokens, think)
        await r.send_one(req)
        if req.error is not None:
            counts.ended_by_failure += 1
            return
        history.append((user, req.answer or ""))
        history_tokens += n_user + _answer_tokens(req)
    counts.completed += 1


async def closed_sessions(r: Any, step: Step, concurrency: int, n_sessions: int | None, duration: float | None,
                          stop: Callable[[], bool]) -> None:
    """``concurrency`` loops, each starting its next session when the last one ended, until ``n_sessions`` were
    started (by all loops of this runner), ``duration`` passed or ``stop()``."""
    end_at = step.t0 + duration if duration else None
    counts = r.begin_sessions()

    async def session(now: float) -> None:
        await run_session(r, step, r.closed_index(step), now, end_at, stop, counts)

    await closed_loops(step, concurrency, n_sessions, duration, stop, session)


async def open_sessions(r: Any, step: Step, arrivals: Iterable[PlannedArrival], duration: float | None,
                        stop: Callable[[], bool]) -> None:
    """Start a session at each planned arrival (``step.t0 + offset``) until the plan ends, ``duration`` passed or
    ``stop()``; at most ``max_in_flight`` sessions open at once (the rest wait, and their wait shows as the first
    turn's lateness)."""
    end_at = step.t0 + duration if duration else None
    counts = r.begin_sessions()
    sem = asyncio.Semaphore(r.max_in_flight)

    async def one(i: int, t_int: float, first: tuple) -> None:
        try:
            await run_session(r, step, i, t_int, end_at, stop, counts, first)
        finally:
            sem.release()

    async with asyncio.TaskGroup() as tg:
        for a in arrivals:
            if duration is not None and a.offset >= duration:
                break
            if stop():
                break
            t_int = step.t0 + a.offset
            first = first_turn(r, step, a.seq, t_int)  # built before the wait: at t_int only the send
            delay = t_int - perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
                if stop():
                    break
            await sem.acquire()
            tg.create_task(one(a.seq, t_int, first))
