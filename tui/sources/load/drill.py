"""A drill (issue 39, ``servewatch drill`` / ``live --drill``): one load test in three phases at a steady load,
baseline, disturbance and recovery, recorded like every run.

:class:`DrillGenerator` is the load generator (:class:`tui.sources.load.generator.LoadGenerator`: setup, the run
header, the metrics scraper and GPU sampler, the warmup, the step records, the request runner) with its ramp replaced
by the drill's phases (``tui.core.drill.settings.DrillPlan``):

- **the load does not pause between phases.** Open loop: each phase's step sends its own arrival schedule from the
  moment the phase starts (``StepRunner.open_step``), while the previous step's requests still in flight finish under
  their own step. Closed loop: the concurrency's loops run through the whole drill, each sending its next request
  (or session) under the step of the phase in force when it starts; a closed-loop spike adds the loops that make
  K x C for its length. A step's end record is written when its last request has ended (in order).
- **baseline** until the disturbance: the spike's start, ``--fault-at``, or the operator's mark. The baseline's
  verdict must be PASS then, or the drill ends there (nothing is disturbed) and says why in the baseline's phase
  end record (``stop``).
- **disturbance**: the spike as its own step at its own level; or the fault command (``tui.sources.load.fault``) run
  during its own step, the ``/health`` probe started with it; or the operator's act, an instant marked by SIGUSR1
  (headless) or the console's key (no step of its own).
- **recovery** for ``recovery_s`` after the disturbance ends; then every request still in flight is cancelled and
  judged by the cancellation rule (a request past its SLO without a first token is failed; one still open is not
  judged), so a hanging server is judged, never waited for.

Each phase starts and ends with a ``phase`` record (docs/record-format.md); every record goes through ``emit`` like
the generator's, so the digest chain covers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from time import perf_counter
from typing import Any

import httpx

import tui.core.defaults as D
from tui.core.drill.settings import DrillPlan, PlannedStep
from tui.core.phases import BASELINE, DISTURBANCE, FAULT_CMD, FAULT_MANUAL, RECOVERY, SPIKE, fmt_duration
from tui.core.states import FAIL, PASS
from tui.sources.load.arrivals import open_schedule, process_arrivals
from tui.sources.load.config import LoadConfig
from tui.sources.load.fault import HealthProbe, run_fault_command
from tui.sources.load.generator import Emit, LoadGenerator, Progress, RunSummary, make_gpu_sampler
from tui.sources.load.sessions import SessionCounts, run_session
from tui.sources.load.steps import Step, step_start_record

DRAIN_POLL_S = 0.05  # how often a closed step is looked at for its last request's end
BASELINE_POLL_S = 0.1  # how often the baseline's verdict is looked at once its length has passed


def baseline_cap(baseline_s: float) -> float:
    """How much longer than its length a baseline may run to reach PASS: half of it, at least 30 s."""
    return max(30.0, 0.5 * baseline_s)


class DrillGenerator(LoadGenerator):
    """See the module doc. ``mark_disturbance(by)`` marks the operator's act (thread-safe)."""

    # a fault takes /metrics down with the server: asked again every second, so the queue after a restart is
    # sampled from its first moments (the default 30 s would leave the recovery's first half unseen)
    metrics_retry_s = 1.0

    def __init__(self, config: LoadConfig, plan: DrillPlan, emit: Emit, progress: Progress | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, environ: dict | None = None) -> None:
        super().__init__(config, emit, progress, transport=transport, environ=environ)
        plan.validate()
        self.plan = plan
        self.loop: asyncio.AbstractEventLoop | None = None
        self.phase: str | None = None  # the phase in force
        self.stopped: str | None = None  # why the drill ended early (after its baseline)
        self._current: Step | None = None  # closed loop: the step a loop's next request belongs to
        self._closed: set[Step] = set()
        self._segments: dict[Step, asyncio.Task] = {}
        self._loops: list[asyncio.Task] = []
        self._sessions: dict[Step, SessionCounts] = {}
        self._order: list[Step] = []
        self._ended: set[Step] = set()
        self._mark: tuple[float, str] | None = None
        self._marked: asyncio.Event | None = None
        self._ending = False
        self._watch: asyncio.Task | None = None  # the /health probe of a fault drill
        self.waiting_for_mark = False  # --fault-manual: the baseline PASSed and the operator's act is awaited
        self._stop_info: dict | None = None  # why the drill ended after its baseline (its step end record's stop)

    # -- the header: the drill's settings and steps -----------------------

    def header(self, gpu_env: dict | None) -> dict:
        hdr = super().header(gpu_env)
        block = self.plan.block()
        if block.get("fault"):
            block["fault"]["command"] = self.scrub.text(block["fault"]["command"])
        hdr["load"].update(drill=block, requests=None, duration=None, until_decided=False)
        return hdr

    # -- the operator's mark ---------------------------------------------

    def mark_disturbance(self, by: str = "SIGUSR1") -> None:
        """The operator acted now (``--fault-manual``): called from a signal handler or another thread."""
        loop = self.loop
        if loop is None:
            return
        t = perf_counter()
        with contextlib.suppress(RuntimeError):  # the loop has closed: the drill is over
            loop.call_soon_threadsafe(self._on_mark, t, by)

    def _on_mark(self, t: float, by: str) -> None:
        if self._mark is None:
            self._mark = (t, by)
            if self._marked is not None:
                self._marked.set()

    # -- records ------------------------------------------------------------

    def _on_record(self, d: dict, _req: Any = None) -> None:
        if self._ending and d.get("error") == "cancelled":
            d["error_detail"] = "in flight at the drill's end: judged by the cancellation rule"
        self.emit(d)

    def _phase(self, name: str, event: str, t: float, step: PlannedStep | None, **info: Any) -> None:
        d: dict[str, Any] = {"type": "phase", "t": self.clock.epoch(t), "name": name, "event": event}
        if step is not None:
            d.update(level=step.level, round=step.round)
        d.update(info)
        self.emit(d)
        if event == "start":
            self.phase = name

    def _start_step(self, ps: PlannedStep, t0: float, duration: float | None = None) -> Step:
        """Start ``ps`` at ``t0`` (perf_counter): its start record, and (open loop) its own arrival schedule, which
        ends by itself after ``duration`` when the length is known (else when the step is closed)."""
        c = self.cfg
        step = Step(ps.level, ps.round, "measure", c.mode)
        step.t0 = t0
        self.emit(step_start_record(self.clock.epoch(t0), ps.level, ps.round, c.mode, "measure", None, None,
                                    c.arrival if c.mode == "open" else None) | {"drill_phase": ps.phase})
        self._order.append(step)
        self._step = step
        if c.mode == "open":
            task = asyncio.create_task(self._segment(step, duration))
            self._segments[step] = task
        else:
            self._current = step
        return step

    def _close(self, step: Step) -> None:
        self._closed.add(step)
        if self._current is step:
            self._current = None

    def _drained(self, step: Step) -> bool:
        if step not in self._closed:
            return False
        task = self._segments.get(step)
        if task is not None:
            return task.done()
        return step.finished >= step.sent

    async def _close_steps(self) -> None:
        """Write each step's end record, in order, once its last request has ended."""
        i = 0
        while True:
            while i < len(self._order) and self._drained(self._order[i]):
                self._end_step(self._order[i])
                i += 1
            if self._ending and i >= len(self._order):
                return
            await asyncio.sleep(DRAIN_POLL_S)

    def _end_step(self, step: Step) -> None:
        if step in self._ended:
            return
        self._ended.add(step)
        step.t1 = perf_counter()
        end = self._step_end(step)
        if self._stop_info is not None and step is self._order[0]:
            end["stop"] = dict(self._stop_info)
        if self.cfg.sessions:
            counts = self._sessions.get(step)
            end["sessions"] = counts.block() if counts is not None else SessionCounts().block()
        self.emit(end)
        self.summary.steps.append(end)
        self.say(f"  {self.cfg.level_unit} {step.level:g} round {step.round}: "
                 f"{end['requests']} requests, {end['completed']} complete, {end['failed']} failed"
                 + (f"; verdict {end['verdict']}" if end.get("verdict") else ""))

    # -- the load -------------------------------------------------------------

    async def _segment(self, step: Step, duration: float | None) -> None:
        """Open loop: ``step``'s own arrival schedule from its start until it is closed."""
        c = self.cfg
        runner = self._runner
        assert runner is not None
        arrivals = process_arrivals(open_schedule(c.arrival, float(step.level), c.burstiness, c.seed, step.round),
                                    None)
        if c.sessions:
            task = asyncio.ensure_future(runner.open_step(step, arrivals, duration, lambda: step in self._closed))
            await asyncio.sleep(0)  # the session loop has begun its counts (StepRunner.begin_sessions)
            if runner.sessions is not None:
                self._sessions[step] = runner.sessions
            await task
            return
        await runner.open_step(step, arrivals, duration, lambda: step in self._closed)

    async def _loop(self, spike: Step | None = None) -> None:
        """Closed loop: one slot of the concurrency, through the drill (``spike``: one of the spike's own slots,
        while the spike lasts)."""
        runner = self._runner
        assert runner is not None
        sessions = self.cfg.sessions
        while True:
            st = self._current
            if st is None or (spike is not None and st is not spike):
                return
            now = perf_counter()
            if sessions:
                counts = self._sessions.setdefault(st, SessionCounts())
                await run_session(runner, st, runner.closed_index(st), now, None, self._stopper(st), counts)
            else:
                await runner.send_one(runner.new_req(st, now))

    def _stopper(self, step: Step) -> Callable[[], bool]:
        return lambda: step in self._closed

    # -- the phases -----------------------------------------------------------

    async def _ramp(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._marked = asyncio.Event()
        if not await self._warmup():
            return
        health = None
        if self.plan.kind != SPIKE and self._client is not None:
            health = HealthProbe(self._client, self.root, self.clock.now, D.DRILL_HEALTH_INTERVAL_S, self.scrub)
            await health.check()
            if health.note:
                self.say(f"note: {health.note}")
        closer = asyncio.create_task(self._close_steps())
        try:
            await self._phases(health)
        finally:
            await self._wind_down(closer, health)

    async def _phases(self, health: HealthProbe | None) -> None:
        p, c = self.plan, self.cfg
        steps = {s.phase: s for s in p.planned_steps()}
        t0 = perf_counter() + 0.05
        unit = c.level_unit
        self.say(f"drill: {unit} {c.levels[0]:g}; baseline {fmt_duration(p.baseline_s)}, then "
                 f"{p.describe_disturbance()}, then recovery {fmt_duration(p.recovery_s)}")
        self._phase(BASELINE, "start", t0, steps[BASELINE])
        base = self._start_step(steps[BASELINE], t0)
        if c.mode == "closed":
            self._loops = [asyncio.create_task(self._loop()) for _ in range(int(c.levels[0]))]
        if p.kind == FAULT_MANUAL:
            mark = await self._await_mark(base, t0)
            if mark is None:
                return
            b1 = mark
        else:
            passed = await self._baseline_until_pass(base, t0 + p.fault_start_s)
            if passed is None:
                return
            b1 = passed
        self._close(base)
        self._phase(BASELINE, "end", b1, steps[BASELINE])
        if p.kind != SPIKE and health is not None:
            self._watch = asyncio.create_task(health.watch(lambda: self._ending))
        if p.kind == SPIKE:
            b2 = await self._spike(steps[DISTURBANCE], b1)
        elif p.kind == FAULT_CMD:
            b2 = await self._fault(steps[DISTURBANCE], b1)
        else:
            assert self._mark is not None
            self._phase(DISTURBANCE, "start", b1, None, kind=p.kind, marked_by=self._mark[1])
            self._phase(DISTURBANCE, "end", b1, None)
            b2 = b1
        self._phase(RECOVERY, "start", b2, steps[RECOVERY])
        self._start_step(steps[RECOVERY], b2, p.recovery_s)
        self.say(f"recovery: {fmt_duration(p.recovery_s)} at {unit} {c.levels[0]:g}")
        await _sleep_until(b2 + p.recovery_s)

    def _baseline_verdict(self, base: Step) -> Any:
        mon = self._monitor
        return mon.verdict_for(mon.levels.get((float(base.level), base.round))) if mon is not None else None

    async def _baseline_until_pass(self, base: Step, at_least: float) -> float | None:
        """The baseline runs until ``at_least`` (perf_counter) and then until its verdict is PASS (the moment, returned)
        or FAIL, at most ``baseline_cap`` longer; else the drill ends there (None), saying why."""
        await _sleep_until(at_least)
        cap = at_least + baseline_cap(self.plan.baseline_s)
        while True:
            v = self._baseline_verdict(base)
            now = perf_counter()
            if v is not None and v.state == PASS:
                self.say(f"baseline PASS after {fmt_duration(now - base.t0)}: {v.reason}")
                return now
            if v is None or v.state == FAIL or now >= cap:
                state = "not judged" if v is None else v.state
                when = "" if v is not None and v.state == FAIL else f" {fmt_duration(now - base.t0)} into it"
                self._stop(base, now, f"the baseline is {state}{when}: no steady state to recover to"
                           + ("" if v is None else f" ({v.reason})"))
                return None
            await asyncio.sleep(BASELINE_POLL_S)

    def _stop(self, base: Step, t: float, why: str, cause: str = "drill_baseline") -> None:
        """The drill ends after its baseline: said in the baseline's step end record (``stop``, held against the plan
        by tui.core.completeness) and phase end record."""
        self.stopped = why
        self._stop_info = {"cause": cause, "reason": why}
        self.summary.stopped_early = "drill ended after its baseline: " + why
        self.say("note: " + self.summary.stopped_early)
        self._close(base)
        self._phase(BASELINE, "end", t, self.plan.step_of(BASELINE), stop={"reason": why})

    async def _await_mark(self, base: Step, t0: float) -> float | None:
        """--fault-manual: the baseline runs until it PASSes (as above), then until the operator's mark (at most the
        wait); a mark before the baseline has PASSed ends the drill."""
        p = self.plan
        ev = self._marked
        assert ev is not None
        waiting = asyncio.create_task(ev.wait())
        passing = asyncio.create_task(self._baseline_until_pass(base, t0 + p.baseline_s))
        await asyncio.wait({waiting, passing}, return_when=asyncio.FIRST_COMPLETED)
        passed_at = passing.result() if passing.done() else None
        if self._mark is not None and (passed_at is None or passed_at > self._mark[0]):
            passing.cancel()
            await asyncio.gather(passing, return_exceptions=True)
            t, by = self._mark
            if base not in self._closed:
                self._stop(base, t, f"the operator's act was marked ({by}) {fmt_duration(t - base.t0)} into the "
                                    "baseline, before it PASSed", "drill_marked_early")
            return None
        if await passing is None:
            waiting.cancel()
            return None
        self.say(f"act now (the fault you drill), then mark the moment: kill -USR1 {os.getpid()} (or the console's key); "
                 f"waiting at most {fmt_duration(p.manual_wait_s)}")
        self.waiting_for_mark = True
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiting, timeout=p.manual_wait_s)
        finally:
            self.waiting_for_mark = False
        if self._mark is None:
            self._stop(base, perf_counter(), f"no act was marked within {fmt_duration(p.manual_wait_s)} of the "
                                             "baseline's end", "drill_no_mark")
            return None
        self.say(f"disturbance marked ({self._mark[1]})")
        return self._mark[0]

    async def _spike(self, ps: PlannedStep, b1: float) -> float:
        p, c = self.plan, self.cfg
        self._phase(DISTURBANCE, "start", b1, ps, kind=SPIKE, factor=p.spike_factor, duration_s=p.spike_s,
                    spike_level=p.spike_level)
        spike = self._start_step(ps, b1, p.spike_s)
        self.say(f"disturbance: {p.describe_disturbance()}")
        if c.mode == "closed":
            extra = int(p.spike_level) - int(c.levels[0])
            self._loops += [asyncio.create_task(self._loop(spike)) for _ in range(extra)]
        b2 = b1 + float(p.spike_s or 0.0)
        await _sleep_until(b2)
        self._close(spike)
        self._phase(DISTURBANCE, "end", b2, ps)
        return b2

    async def _fault(self, ps: PlannedStep, b1: float) -> float:
        p = self.plan
        self._phase(DISTURBANCE, "start", b1, ps, kind=FAULT_CMD, command=self.scrub.text(p.fault_cmd or ""))
        step = self._start_step(ps, b1)
        self.say(f"disturbance: running the fault command: {self.scrub.text(p.fault_cmd or '')}")
        result = await run_fault_command(p.fault_cmd or "", self.scrub, self.clock.now, p.recovery_s)
        b2 = perf_counter()
        self._close(step)
        status = (f"exit status {result['exit_status']}" if result.get("exit_status") is not None
                  else f"signal {result.get('signal')}" if result.get("signal") is not None else "not run")
        self.say(f"fault command ended ({status}) after {fmt_duration(result['end'] - result['start'])}"
                 + (f": {result['note']}" if result.get("note") else ""))
        info = {k: v for k, v in result.items() if k not in ("start", "end", "command")}
        self._phase(DISTURBANCE, "end", b2, ps, **info)
        return b2

    async def _wind_down(self, closer: asyncio.Task, health: HealthProbe | None) -> None:
        """The end (or a stop): every step closed, every request still in flight cancelled (and recorded), the step
        end records written, and the recovery phase's end record with what the /health probe saw."""
        t_end = perf_counter()
        self._ending = True
        for st in self._order:
            self._close(st)
        self._current = None
        tasks = [*self._loops, *self._segments.values()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(closer), timeout=30.0)
        if not closer.done():
            closer.cancel()
            for st in self._order:
                self._end_step(st)
        self._step = None
        rec = self.plan.step_of(RECOVERY)
        if self.phase == RECOVERY:
            self._phase(RECOVERY, "end", t_end, rec, health=health.block() if health is not None else
                        {"probed": False, "note": "a spike restarts nothing"})


async def _sleep_until(t: float) -> None:
    delay = t - perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def run_drill(config: LoadConfig, plan: DrillPlan, emit: Emit, progress: Progress | None = None,
                    on_generator: Callable[[DrillGenerator], Any] | None = None,
                    transport: httpx.AsyncBaseTransport | None = None, usr1: bool = True) -> RunSummary:
    """Set up, run and tear down one drill; every record goes to ``emit``. ``usr1``: SIGUSR1 marks the operator's
    act (``--fault-manual``; only where this runs in the main thread)."""
    gen = DrillGenerator(config, plan, emit, progress, transport=transport)
    if on_generator is not None:
        on_generator(gen)
    sampler = make_gpu_sampler(config)
    loop = asyncio.get_running_loop()
    handled = False
    if usr1 and plan.kind == FAULT_MANUAL:
        try:
            loop.add_signal_handler(signal.SIGUSR1, gen.mark_disturbance, "SIGUSR1")
            handled = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            pass
    try:
        return await gen.run(gpu_sampler=sampler)
    finally:
        if handled:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGUSR1)
        if sampler is not None:
            with contextlib.suppress(Exception):
                sampler.close()
