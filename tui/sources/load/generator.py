"""The live load generator: streamed OpenAI-style requests against a real server, recorded.

One :class:`LoadGenerator` runs one load test: setup (the server probe, server facts, model, prompt
calibration), the ``run`` header (and the ``budget`` record when budget inputs were given), then the
steps (warmup, then each level of the ramp, ``rounds`` times) while the metrics scraper and the GPU
sampler run beside it. Every record goes to ``emit(dict)``; the caller writes it
(``tui.sources.recorder``) and/or hands it to a monitor.

Timing (all stamps are epoch seconds derived from ONE ``time.perf_counter`` anchor, so intervals
are monotonic):

- ``t_intended``: when the request was scheduled (open loop: the arrival time; closed loop: when
  a worker became free);
- ``t_sent``: when the request headers started being written (the ``http11.send_request_headers.started`` trace event, ``tui.sources.load.executor``);
- ``t_first_token``: when the network read returned that completed the first token event
  (``tui.sources.load.stream``; all token events of one read share its stamp);
- ``t_end``: ``[DONE]``, end of stream, the failure, or the cancellation (error ``cancelled``).

A fresh connection is used per request (servers such as llama-server close the connection after
every stream although they advertise keep-alive).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import httpx

import tui.sources.openai_http as oh
from tui.core.identity import identity_of, identity_problems
from tui.core.monitor import Monitor, settings_of
from tui.core.records import parse_object, run_header, source_block
from tui.core.redact import Scrubber, redact_url
from tui.core.slos import header_block as slo_header_block
from tui.core.slos import ttft_or_default
from tui.core.textsafe import term
from tui.core.verdict_settings import header_block as verdict_settings_block
from tui.sources.load.arrivals import PlannedArrival, open_schedule, process_arrivals, trace_arrivals
from tui.sources.load.config import LoadConfig, build_headers, resolve_workers
from tui.sources.load.coordinator import PipeLink, StepResult, WorkerLink, WorkerPool
from tui.sources.load.errors import SetupError
from tui.sources.load.executor import RequestExecutor
from tui.sources.load.kinds import ENDPOINTS, Mode, Phase
from tui.sources.load.prompts import prompt_builder, prompt_prefix
from tui.sources.load.ray_workers import ray_links
from tui.sources.load.run_header import environment, load_block, with_trace, workers_block
from tui.sources.load.runner import Clock, StepRunner, lengths_block
from tui.sources.load.sessions import SessionCounts
from tui.sources.load.sizing import fd_shortfall, raise_fd_limit
from tui.sources.load.steps import (
    Step,
    describe_step,
    ladder_stop,
    pool_fields,
    step_end_record,
    step_start_record,
)
from tui.sources.load.wire import WorkerSetup, split_orders
from tui.sources.load.workload import Workload, header_blocks

Emit = Callable[[dict], Any]
Progress = Callable[[str], Any]


@dataclass
class RunSummary:
    record: str | None = None
    requests: int = 0
    steps: list[dict] = field(default_factory=list)
    stopped_early: str | None = None
    cancelled: bool = False
    header: dict = field(default_factory=dict)


class LoadGenerator:
    """Runs one load test. ``await run()``; cancel the task to stop (in-flight requests are then
    recorded as ``cancelled`` before the cancellation propagates)."""

    metrics_retry_s = 30.0  # an unusable /metrics asked again after this (a drill's server restarts: sooner)

    def __init__(self, config: LoadConfig, emit: Emit, progress: Progress | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, environ: dict | None = None) -> None:
        config.validate()
        self.cfg = config
        self._emit_raw = emit
        self._progress = progress
        self._transport = transport
        self.clock = Clock()
        self.root, self.api_base, self._query = oh.split_url(config.url)
        self.label = redact_url(config.url)
        self.headers, secrets = build_headers(config, environ)
        self._secrets = list(secrets)
        self.scrub = Scrubber(secrets)
        self.header_names = {k: "<redacted>" for k in self.headers}
        self.model: str | None = config.model
        self.prompts = prompt_builder(config.tokenizer)  # --tokenizer: exact lengths (tui.sources.load.tokenizer)
        self.run_id = os.urandom(4).hex()
        self.summary = RunSummary(record=config.record)
        self._monitor: Any = None
        self._step: Step | None = None
        self._client: httpx.AsyncClient | None = None
        self._executor: RequestExecutor | None = None
        self._runner: StepRunner | None = None
        self.pool: WorkerPool | None = None  # when the load runs in worker processes (tui.sources.load.coordinator)
        self._step_hist: Any = None  # tui.sources.metrics.StepHistograms when metrics are on (issue 21)
        self.workers = 1  # resolved --workers (1: the load runs in this process)
        self.fd_limit: dict = {}  # the open-file limit this process runs under (sizing.raise_fd_limit), in the header
        self.workers_info: list[dict] = []
        self._pool_sent = 0
        self._chat = config.api == "chat"
        self._endpoint = self.api_base + ENDPOINTS[config.api]
        self.server: dict = {}
        self.server_capacity: dict | None = None  # what the server says it allocated (tui.sources.server_info)
        self.server_identity: dict | None = None  # the model the server says it serves (the same module)
        self.status_line = ""
        self.dataset: Any = None  # the prepared --dataset (tui.sources.load.dataset.Dataset), read at setup
        self.workload: Workload | None = self._workload() if _shaped(config) else None

    @property
    def in_flight(self) -> int:
        if self.pool is not None:
            return int(self.pool.in_flight)
        return self._runner.in_flight if self._runner is not None else 0

    @property
    def sent_total(self) -> int:
        return self._pool_sent + (self._runner.sent_total if self._runner is not None else 0)

    # -- output ------------------------------------------------------------

    def emit(self, d: dict) -> None:
        self._emit_raw(d)
        mon = self._monitor
        if mon is not None:
            try:
                mon.add(parse_object(d))
            except Exception:  # noqa: BLE001, S110 (a side channel must not stop the run)
                pass

    def say(self, line: str) -> None:
        self.status_line = line
        if self._progress is not None:
            try:
                self._progress(line)
            except Exception:  # noqa: BLE001, S110 (a side channel must not stop the run)
                pass

    # -- setup -------------------------------------------------------------

    def _make_client(self) -> httpx.AsyncClient:
        c = self.cfg
        return oh.make_client(headers=self.headers, connect_timeout=c.connect_timeout, read_timeout=c.read_timeout,
                              insecure=c.insecure, transport=self._transport)

    def _use_client(self, client: httpx.AsyncClient | None) -> None:
        self._client = client
        if client is None:
            self._executor = None
            return
        c = self.cfg
        self._executor = RequestExecutor(client, self._endpoint, self._query, chat=self._chat, model=self.model,
                                         ignore_eos=c.ignore_eos, read_timeout=c.read_timeout,
                                         token_offsets=c.token_offsets, scrub=self.scrub, say=self.say,
                                         cache_prompt=c.cache_prompt, count=self.prompts.count, api=c.api)
        if self._runner is None:  # one runner for the generator's life: its id sequence never restarts
            self._runner = StepRunner(self._executor, self.clock, self.prompts, self.run_id,
                                      input_tokens=c.input_tokens, output_tokens=c.output_tokens, seed=c.seed,
                                      on_record=self._on_record, max_in_flight=c.max_in_flight,
                                      input_lengths=c.input_lengths, output_lengths=c.output_lengths,
                                      workload=self.workload)
        else:
            self._runner.executor = self._executor

    async def _setup(self) -> None:
        client = self._client
        assert client is not None
        # the server probe first: one clear line (unreachable, TLS, 401/403, 5xx) instead of a run of errors
        try:
            found = await oh.probe(client, self.cfg.url, scrub=self.scrub,
                                   connect_timeout=min(oh.PROBE_CONNECT_TIMEOUT, self.cfg.connect_timeout))
        except oh.ProbeError as exc:
            raise SetupError(str(exc)) from None
        self.server = found.server or {}
        if not self.model:
            models = self.server.get("models") or found.models
            if not models:
                raise SetupError(f"{self.label}/v1/models lists no model (or needs a key, see --api-key-env): "
                                 "pass --model NAME")
            self.model = models[0]
        if self._executor is not None:
            self._executor.model = self.model
        self._make_monitor()  # judges steps (until decided, --stop-on-fail) and feeds the progress line
        from tui.sources.server_info import server_capacity, server_identity

        try:
            self.server_capacity = await server_capacity(self.root, self.server, client=client, headers=self.headers,
                                                         metrics_url=self.cfg.metrics_url)
        except Exception:  # noqa: BLE001 (a side channel must not stop the run)
            self.server_capacity = None
        self.server_identity = await server_identity(self.root, client, self.headers, self.model, self.api_base)
        sizes = [self.cfg.input_tokens[1] if self.cfg.input_lengths is None else self.cfg.input_lengths.typical_max()]
        await self.prompts.calibrate(client, self.root, prompt_prefix("00000000-000000"), sizes)
        if self.cfg.dataset is not None:
            await self._setup_dataset(client)

    def _workload(self) -> Workload:
        c = self.cfg
        if c.replay is not None:  # a trace replay: the recorded sessions, prefixes and dataset rows
            return Workload.replaying(c.seed, c.replay)
        return Workload(seed=c.seed, turns=c.turns, think=c.think_time, prefix_tokens=c.shared_prefix_tokens,
                        prefix_groups=c.prefix_groups, output_given=c.output_lengths is not None)

    async def _setup_dataset(self, client: httpx.AsyncClient) -> None:
        c = self.cfg
        assert c.dataset is not None
        from tui.sources.load.dataset import load_dataset

        out = c.output_tokens[1] if c.output_lengths is None else c.output_lengths.typical_max()
        self.dataset = await load_dataset(c.dataset, client, self.root, max_bad_share=c.dataset_max_bad_share,
                                          tokenize_form=self.prompts.tokenize_form, max_context=c.max_context,
                                          server=self.server, output_tokens_default=out, say=self.say,
                                          output_tokens_given=c.output_lengths is not None, replay=c.replay,
                                          tokenizer=self.prompts.tokenizer)
        if self.workload is None:
            self.workload = self._workload()
        self.workload.dataset = self.dataset
        if self._runner is not None:
            self._runner.workload = self.workload

    def _worker_setups(self, workers: int, anchor: tuple[float, float] | None) -> list[WorkerSetup]:
        c = self.cfg
        return [WorkerSetup(worker=k, workers=workers, endpoint=self._endpoint, query=self._query, chat=self._chat,
                            model=self.model, ignore_eos=c.ignore_eos, connect_timeout=c.connect_timeout,
                            read_timeout=c.read_timeout, insecure=bool(c.insecure), token_offsets=c.token_offsets,
                            headers=dict(self.headers), secrets=list(self._secrets), run_id=self.run_id, seed=c.seed,
                            input_tokens=c.input_tokens, output_tokens=c.output_tokens, max_in_flight=c.max_in_flight,
                            prompts=self.prompts.state(), anchor=anchor, input_lengths=c.input_lengths,
                            output_lengths=c.output_lengths, workload=self.workload, cache_prompt=c.cache_prompt,
                            api=c.api)
                for k in range(workers)]

    async def _start_workers(self) -> None:
        """--workers N >= 2: start the worker processes (the load then runs there, not here)."""
        links: list[WorkerLink]
        if self._transport is not None and (self.cfg.ray or resolve_workers(self.cfg) >= 2):
            raise SetupError("worker processes need a real server: an in-memory transport cannot be shared "
                             "with them (use workers=1)")
        if self.cfg.ray:  # --workers auto with --ray: one actor per CPU the cluster offers (ray_workers.AUTO_MAX)
            ray_list, anchor_shared = await ray_links(self.cfg.ray, self.cfg.workers, self.say)
            links = list(ray_list)
        else:
            n = resolve_workers(self.cfg)
            self.workers = n
            if n < 2:
                return
            links, anchor_shared = [PipeLink(k) for k in range(n)], True
        pool = WorkerPool(links, self.say, scrub=self.scrub)
        self.workers = len(links)
        try:
            self.workers_info = await pool.start(self._worker_setups(len(links),
                                                                     self.clock.anchor if anchor_shared else None))
        except (RuntimeError, OSError) as exc:
            await pool.close()
            raise SetupError(f"could not start the load workers: {exc}") from None
        self.pool = pool
        where = "Ray actors" if self.cfg.ray else "worker processes"
        self.say(f"load split over {len(links)} {where}, one record file and one verdict here")

    def _make_monitor(self) -> None:
        # request ids are unique by construction (run id + sequence): no set of every id, so a soak's memory stays flat
        self._monitor = Monitor(replace(self.cfg.monitor, check_duplicate_ids=False), source=self.label or "run")

    def environment(self, gpu_env: dict | None) -> dict:
        return environment(self.server, gpu_env)

    def header(self, gpu_env: dict | None) -> dict:
        c = self.cfg
        hdr = run_header(
            target={"url": self.label, "model": self.model, "api": c.api, "endpoint": redact_url(self._endpoint)},
            load=load_block(c, input_tokens=lengths_block(c.input_tokens, c.input_lengths),  # tui.sources.load.run_header
                            output_tokens=None if c.embeddings else lengths_block(c.output_tokens, c.output_lengths),
                            prompt_builder=self.prompts.describe(), fd_limit=self.fd_limit,
                            workers=workers_block(self.pool is not None, bool(c.ray), self.workers, self.workers_info),
                            workload=self._workload_blocks()),
            environment=self.environment(gpu_env),
            synthetic=False,
            started_at=self.clock.now(),
            insecure=bool(c.insecure),
            headers=dict(self.header_names),
            slo=slo_header_block(c.monitor.slos, c.monitor.target),  # every SLO in force (tui.core.slos)
            # issue 35: what this run is judged at, read back by every reader (tui.core.verdict_settings)
            verdict_settings=verdict_settings_block(settings_of(c.monitor)),
            run_id=self.run_id,
            source=source_block("run"),
            server_capacity=self.server_capacity,
            server_identity=self.server_identity,
        )
        if c.trace is not None:  # a trace replay: its arrivals and lengths, and the trace file it came from
            hdr = with_trace(hdr, c.trace)
        return hdr

    def _workload_blocks(self) -> dict:
        c = self.cfg
        return header_blocks(c.turns, c.think_time, c.shared_prefix_tokens, c.prefix_groups, self.dataset,
                             cache_prompt=c.cache_prompt, replay=c.replay,
                             rejected=self._executor is not None and "cache_prompt" in self._executor.dropped)

    # -- requests ----------------------------------------------------------

    def _on_record(self, d: dict, _req: Any = None) -> None:
        self.emit(d)

    def _pool_record(self, d: dict) -> None:
        """A record from a worker (already in t_end order): the step's counters, then out."""
        step = self._step
        if step is not None and d.get("type") == "request":
            t_sent, t_int, t_first = d.get("t_sent"), d.get("t_intended"), d.get("t_first_token")
            late = (t_sent - t_int) if isinstance(t_sent, (int, float)) and isinstance(t_int, (int, float)) else 0.0
            ttft = (t_first - t_sent) if isinstance(t_first, (int, float)) and isinstance(t_sent, (int, float)) else None
            out = d.get("output_tokens")
            step.add(late, None if d.get("complete") else (d.get("error") or "other"), ttft,
                     out if isinstance(out, int) else 0)
        self.emit(d)

    async def request_once(self, level: float = 1.0, phase: Phase = "measure") -> dict:
        """Send one request outside any step (no setup, no header) and return its record.

        For smoke checks and tests; the record also goes to ``emit``.
        """
        out: list[dict] = []
        emit = self._emit_raw

        def keep(d: dict) -> None:
            out.append(d)
            emit(d)

        self._emit_raw = keep
        own = self._client is None
        if own:
            self._use_client(self._make_client())
        try:
            step = Step(level, 1, phase, "closed")
            runner = self._runner
            assert runner is not None
            await runner.send_one(runner.new_req(step, perf_counter()))
        finally:
            self._emit_raw = emit
            if own:
                assert self._client is not None
                await self._client.aclose()
                self._use_client(None)
        return out[-1]

    # -- steps -------------------------------------------------------------

    def _decided(self, step: Step) -> bool:
        """Sweep mode: the step's verdict (core Monitor, anytime-valid) is already PASS or FAIL."""
        mon = self._monitor
        if not self.cfg.until_decided or mon is None or step.phase != "measure":
            return False
        st = mon.levels.get((float(step.level), step.round))
        return st is not None and mon.verdict_for(st).state in ("PASS", "FAIL")

    def _arrivals(self, step: Step, rate: float, n_requests: int | None) -> Iterator[PlannedArrival]:
        """The planned arrivals of one open-loop step (all of them): a trace's, or one schedule from the seed."""
        c = self.cfg
        if c.trace is not None:
            return trace_arrivals(c.trace, n_requests)
        return process_arrivals(open_schedule(c.arrival, rate, c.burstiness, c.seed, step.round), n_requests)

    async def _closed_step(self, step: Step, concurrency: int, n_requests: int | None, duration: float | None) -> None:
        assert self._runner is not None
        await self._runner.closed_step(step, concurrency, n_requests, duration, lambda: self._decided(step))

    async def _open_step(self, step: Step, rate: float, n_requests: int | None, duration: float | None) -> None:
        assert self._runner is not None
        await self._runner.open_step(step, self._arrivals(step, rate, n_requests), duration,
                                     lambda: self._decided(step))

    async def _pool_step(self, step: Step, mode: Mode, concurrency: int, n_requests: int | None,
                         duration: float | None) -> StepResult:
        """One step on the worker processes: each gets its share; records come back in t_end order."""
        c = self.cfg
        pool = self.pool
        assert pool is not None
        step.t0 = perf_counter() + 0.05  # a common start, a little ahead so every worker has its order in time
        t0_epoch = self.clock.epoch(step.t0)
        process = arrivals = None
        if mode == "open" and c.trace is not None:
            arrivals = list(trace_arrivals(c.trace, n_requests))  # dealt round robin by the coordinator
        elif mode == "open":
            process = (c.arrival, float(step.level), c.burstiness, c.seed, step.round)
        orders = split_orders(level=step.level, rnd=step.round, phase=step.phase, mode=mode, t0_epoch=t0_epoch,
                              duration=duration, n_requests=n_requests, workers=pool.workers,
                              concurrency=concurrency, process=process, arrivals=arrivals)

        def started(n: int) -> None:
            step.sent += n
            self._pool_sent += n

        return await pool.run_step(orders, self._pool_record, lambda: self._decided(step), on_started=started,
                                   now_epoch=self.clock.now)

    async def _run_step(self, level: float, rnd: int, phase: Phase, n_requests: int | None,
                        duration: float | None, mode: Mode, label: str, concurrency: int | None = None,
                        probe: bool = False, ladder: bool = False) -> dict:
        step = Step(level, rnd, phase, mode)
        self._step = step
        c = self.cfg
        probe_flag = {"search_probe": True} if probe else {}  # a step of `sweep --search` (tui.core.search)
        hist = self._step_hist if phase == "measure" else None
        h0 = h1 = None
        if hist is not None:  # the server's latency histograms at the step's start (and end, below)
            h0 = await hist.snapshot(self._client, self.model)
        if phase == "measure":
            self.emit(step_start_record(self.clock.now(), level, rnd, mode, phase, n_requests, duration,
                                        "trace" if c.trace is not None else c.arrival) | probe_flag)
        self.say(label)
        pooled = None
        if self._runner is not None:
            self._runner.sessions = None
        try:
            if self.pool is not None:
                self.pool.last_result = None
                await self._pool_step(step, mode, concurrency or int(level), n_requests, duration)
            elif mode == "closed":
                await self._closed_step(step, concurrency or int(level), n_requests, duration)
            else:
                await self._open_step(step, float(level), n_requests, duration)
            if h0 is not None and hist is not None:
                h1 = await hist.snapshot(self._client, self.model)
        finally:
            step.t1 = perf_counter()
            if self.pool is not None:
                pooled = self.pool.last_result
            end = self._step_end(step)
            if pooled is not None:
                pool_fields(end, pooled, step.mode)
            if c.sessions:
                sess = pooled.sessions if pooled is not None else (
                    self._runner.sessions.block() if self._runner is not None and self._runner.sessions else None)
                end["sessions"] = dict(sess) if sess else SessionCounts().block()
            if h0 is not None and hist is not None:
                sh = hist.combine(h0, h1)
                if sh is not None:
                    end["server_histograms"] = sh
                pc = hist.prefix_cache(h0, h1)  # issue 23: vLLM's prefix-cache counters' deltas, same scrapes
                if pc is not None:
                    end["prefix_cache"] = pc
            end.update(probe_flag)
            stop = ladder_stop(end, c.stop_on_fail, c.search is not None) if ladder and phase == "measure" else None
            if stop is not None:  # a reader holds the header's planned levels against the steps present
                end["stop"] = stop
            if phase == "measure":
                self.emit(end)
                self.summary.steps.append(end)
            self._step = None
        line = describe_step(end)
        if self.cfg.purpose == "measure":  # `servewatch measure`: no verdict is shown, not even a step's
            line = line.split("; verdict ", 1)[0]
        self.say("  " + line)
        if end.get("saturated"):
            self.say(f"note: {step.mode} loop {step.level:g} req/s round {step.round}: {end['note']}")
        if end.get("client_limited"):  # issue 36: what ran out in the client, what to do
            self.say(f"note: {step.mode} loop {step.level:g} round {step.round}: {end['client_limited_note']}")
        return end

    def _step_end(self, step: Step) -> dict:
        verdict = None
        if self._monitor is not None and step.phase == "measure":
            try:
                verdict = self._monitor.verdict_for(self._monitor.levels.get((float(step.level), step.round)))
            except Exception:  # noqa: BLE001 (a side channel must not stop the run)
                verdict = None
        assert step.t1 is not None
        st = self._monitor.levels.get((float(step.level), step.round)) if self._monitor is not None else None
        client_text = self._monitor.client_limited_text(st) if st is not None else None  # what ran out, what to do
        end = step_end_record(step, self.clock.epoch(step.t1), verdict, slo_ms=ttft_or_default(self.cfg.monitor.slos),
                              client_text=client_text)
        if step.phase == "measure":  # issue 35: the settings this step was judged at, as the header states them (a
            # reader holds one against the other: an edit of the header's settings alone is detected)
            end["verdict_settings"] = verdict_settings_block(settings_of(self.cfg.monitor))
        return end

    async def _ticker(self) -> None:
        t0 = perf_counter()
        while True:
            await asyncio.sleep(self.cfg.progress_interval)
            st = self._step
            if st is None:
                continue
            unit = "concurrency" if st.mode == "closed" else "req/s"
            head = f"  [{perf_counter() - t0:7.1f} s] {unit} {st.level:g} round {st.round}: "
            mon = self._monitor
            if mon is not None and st.phase == "measure" and self.cfg.purpose != "measure":
                from tui.core.progress import evidence_line

                v = mon.verdict_for(mon.levels.get((float(st.level), st.round)))
                self.say(head + evidence_line(v, mon.cfg.min_window_s)
                         + f"; {self.in_flight} in flight")
                continue
            self.say(head + f"{st.sent} sent, {st.finished} done ({st.finished - st.complete} failed), "
                     f"{self.in_flight} in flight")

    # -- the run -----------------------------------------------------------

    async def run(self, gpu_sampler: Any = None) -> RunSummary:
        c = self.cfg
        self.fd_limit = raise_fd_limit()
        self._use_client(self._make_client())
        client = self._client
        assert client is not None
        aux: list[asyncio.Task] = []
        stop_aux = asyncio.Event()
        ticker: asyncio.Task | None = None
        try:
            await self._setup()
            await self._start_workers()
            gpu_env = None
            if gpu_sampler is not None:
                try:
                    gpu_env = gpu_sampler.environment()
                except Exception as exc:  # noqa: BLE001 (a side channel must not stop the run)
                    gpu_env = {"gpu": "none", "reason": type(exc).__name__}
            hdr = self.header(gpu_env)
            self.summary.header = hdr
            self.emit(hdr)
            short = fd_shortfall(self.fd_limit, -(-int(max(c.levels)) // self.workers)) if c.mode == "closed" else None
            if short:  # issue 36: the connections a level needs do not fit the open-file limit
                self.say("note: " + short)
            if c.budget:
                self.emit({"type": "budget", **c.budget})  # the budget inputs given for this run
            self.say(f"target {self.label}, model {self.model}, api {c.api}")
            for why in identity_problems(identity_of(hdr)):  # printed at start; the run goes on (not acceptance-grade)
                self.say(term(f"WARNING: {why}; not acceptance-grade"))
            self.say(f"note: {self.prompts.note}")
            if self.server_capacity is not None:
                from tui.sources.server_info import describe_capacity

                self.say("server: " + describe_capacity(self.server_capacity))
            if c.metrics:
                from tui.sources.metrics import MetricsScraper, StepHistograms

                self._step_hist = StepHistograms(self.root, metrics_url=c.metrics_url, headers=self.headers)

                scraper = MetricsScraper(self.root, metrics_url=c.metrics_url, interval=c.metrics_interval,
                                         headers=self.headers, in_flight=lambda: self.in_flight,
                                         client=client,  # same TLS settings (--insecure) as the load
                                         retry_s=self.metrics_retry_s)
                aux.append(asyncio.create_task(scraper.run(self.emit, stop_aux)))
            if gpu_sampler is not None:
                aux.append(asyncio.create_task(gpu_sampler.run(self.emit, stop_aux, c.metrics_interval)))
            if c.progress_interval and c.progress_interval > 0:
                ticker = asyncio.create_task(self._ticker())
            await self._ramp()
        except asyncio.CancelledError:
            self.summary.cancelled = True
            raise
        finally:
            if ticker is not None:
                ticker.cancel()
            stop_aux.set()
            if aux:
                _done, pending = await asyncio.wait(aux, timeout=5.0)
                for t in pending:
                    t.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=2.0)
            if self.pool is not None:
                await self.pool.close()
            await client.aclose()
            self.summary.requests = self.sent_total
        return self.summary

    async def _ramp(self) -> None:
        c = self.cfg
        if await self._ladder() and c.search is not None and self._monitor is not None:
            from tui.sources.load.capacity_search import run_search

            mon = self._monitor
            await run_search(c.search, c.mode, c.rounds, c.level_unit, mon.level_rows,
                             lambda lvl, rnd, label: self._run_step(lvl, rnd, "measure", c.step_requests,
                                                                    c.step_duration, c.mode, label, probe=True),
                             self.say)

    async def _ladder(self) -> bool:
        """The warmup and the ladder; False when a degraded step stopped the run (no search may follow)."""
        c = self.cfg
        unit = c.level_unit
        if not await self._warmup():
            return False
        total = len(c.levels) * c.rounds
        k = 0
        for rnd in range(1, c.rounds + 1):
            for lvl in c.levels:
                k += 1
                limits = []
                if c.step_requests is not None:
                    limits.append(f"{c.step_requests} requests")
                if c.until_decided:
                    limits.append("until PASS or FAIL")
                if c.step_duration is not None:
                    limits.append(f"{c.step_duration:g} s")
                if c.trace is not None:
                    limits.append(f"the trace's {len(c.trace):,} arrivals")
                end = await self._run_step(lvl, rnd, "measure", c.step_requests, c.step_duration, c.mode,
                                           f"step {k}/{total}: {unit} {lvl:g}, round {rnd} ({' or '.join(limits)})",
                                           ladder=True)
                if c.until_decided and end.get("verdict") not in (None, "PASS", "FAIL"):
                    self.say(f"note: {unit} {lvl:g} round {rnd} ended {end['verdict']}, undecided at its limit: "
                             f"{end.get('verdict_reason', '')} (a longer --max-step-seconds gives it more time)")
                if c.stop_on_fail and end.get("verdict") == "FAIL":
                    self.summary.stopped_early = f"{unit} {lvl:g} round {rnd} FAILED: " + (
                        "the ladder stopped there, the search follows" if c.search else "run stopped (--stop-on-fail)")
                    self.say("note: " + self.summary.stopped_early)
                    return True
                if self._stop_degraded(end, f"{unit} {lvl:g} round {rnd}"):
                    return False
        return True

    async def _warmup(self) -> bool:
        """The warmup step (``--warmup N``: closed loop at the first level's concurrency, at most N); False when a
        degraded step stopped the run."""
        c = self.cfg
        if not c.warmup:
            return True
        lvl = c.levels[0]
        conc = max(1, min(c.warmup, int(lvl))) if c.mode == "closed" else 1
        end = await self._run_step(lvl, 1, "warmup", c.warmup, None, "closed",
                                   f"warmup: {c.warmup} requests at concurrency {conc}", concurrency=conc)
        return not self._stop_degraded(end, "the warmup")

    def _stop_degraded(self, end: dict, what: str) -> bool:
        """A load worker was lost in this step: the run stops after it (the workers left cannot hold the
        next levels as configured; their shares would silently shrink)."""
        if not end.get("degraded"):
            return False
        self.summary.stopped_early = f"{what} degraded (a load worker was lost): run stopped"
        self.say("note: " + self.summary.stopped_early)
        return True


def _shaped(c: LoadConfig) -> bool:
    """A workload shaped beyond lengths and arrivals (sessions, shared prefixes; a dataset joins at setup)."""
    return c.turns is not None or c.shared_prefix_tokens is not None or c.replay is not None


# ------------------------------------------------------------------ one-call entry point


def make_gpu_sampler(config: LoadConfig) -> Any:
    """A GpuSampler, or None when disabled (--no-gpu) or unavailable without host data either."""
    if not config.gpu:
        return None
    try:
        from tui.sources.gpu import GpuSampler, local_server_pid

        sampler = GpuSampler()
        sampler.server_pid = local_server_pid(config.url)  # a local server: its RSS in the host samples
        return sampler
    except Exception:  # noqa: BLE001 (a side channel must not stop the run)
        return None


async def run_load(config: LoadConfig, emit: Emit, progress: Progress | None = None,
                   on_generator: Callable[[LoadGenerator], Any] | None = None,
                   transport: httpx.AsyncBaseTransport | None = None) -> RunSummary:
    """Set up, run and tear down one load test; every record goes to ``emit``."""
    gen = LoadGenerator(config, emit, progress, transport=transport)
    if on_generator is not None:
        on_generator(gen)
    sampler = make_gpu_sampler(config)
    try:
        return await gen.run(gpu_sampler=sampler)
    finally:
        if sampler is not None:
            try:
                sampler.close()
            except Exception:  # noqa: BLE001, S110 (a side channel must not stop the run)
                pass
