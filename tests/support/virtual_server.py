"""Run the real load generator at compressed time against a server that replays recorded requests.

Used by tests/docs/test_docs_verdicts.py to check that documented `servewatch run/live/sweep` commands reach a
verdict as written, without waiting the 10-minute windows they need in real time.

- ``VirtualTimeLoop``: an asyncio event loop whose clock jumps to the next timer whenever nothing is ready.
  The load generator's timers (``asyncio.sleep`` in the server model, the step cap, the progress ticker) then
  take no real time, while their order and their recorded durations are exactly those of a real run.
- ``RecordedServer``: an ``httpx.MockTransport`` handler answering like an OpenAI-compatible streaming server.
  Each completion replays one request recorded from a real llama-server run (``tests/fixtures/gemma_sweep_short.jsonl``, the first bundled sample):
  its TTFT (the first token arrives after it) and its total time (the stream ends after it), and whether it
  completed. ``model="keeps-up"`` replays the level-1 requests at every level (a server that keeps up with any
  load: the issue's "perfect server"); ``model="recorded"`` replays, at concurrency c, the requests recorded at
  the highest recorded level <= c (1, 2, 4, 8), so the gate breaks where it broke on the real server.
- ``patched_for_virtual_time(monkeypatch, server)`` points the load generator's clocks at the virtual clock,
  routes its HTTP client to the server model (no socket is opened) and turns off telemetry sampling (NVML,
  Prometheus), which has nothing to do with the verdict.

Nothing about the verdict path is replaced: the CLI parses the literal command, ``config_from_args`` builds
the configuration, ``LoadGenerator`` runs and records the steps (stopping a step by its own monitor's verdict),
and the report reads the record file back.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import random
import time
import types
from pathlib import Path

import httpx

from tests.support.paths import REPO

ROOT = REPO
RECORDED = ROOT / "tests" / "fixtures" / "gemma_sweep_short.jsonl"  # the first bundled run (2026-11)
EPOCH0 = 1_800_000_000.0


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """Time only moves when nothing is ready to run: it jumps to the earliest timer."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0

    def time(self) -> float:  # noqa: D401 - the loop's clock
        return self._virtual_now

    def _run_once(self) -> None:  # type: ignore[override]
        if not self._ready:
            live = [h._when for h in self._scheduled if not h._cancelled]  # type: ignore[attr-defined]
            if live:
                self._virtual_now = max(self._virtual_now, min(live))
        super()._run_once()  # type: ignore[misc]


def recorded_requests(path: Path = RECORDED) -> dict[float, list[tuple[float | None, float, bool]]]:
    """level -> [(ttft_s or None, total_s, complete)] of the measured requests of a record file."""
    by: dict[float, list[tuple[float | None, float, bool]]] = {}
    with open(path) as fh:
        for line in fh:
            d = json.loads(line)
            if d.get("type") != "request" or d.get("phase") != "measure":
                continue
            ttft = d["t_first_token"] - d["t_sent"] if d.get("t_first_token") is not None else None
            by.setdefault(float(d["level"]), []).append((ttft, d["t_end"] - d["t_sent"], bool(d["complete"])))
    return by


class RecordedServer:
    """An OpenAI-compatible streaming server whose requests replay recorded ones (see the module doc)."""

    def __init__(self, model: str = "keeps-up", seed: int = 0, path: Path = RECORDED,
                 pages: dict[str, httpx.Response] | None = None) -> None:
        if model not in ("keeps-up", "recorded"):
            raise ValueError(model)
        self.pages = dict(pages or {})  # extra GET answers by path, e.g. {"/props": httpx.Response(200, json=...)}
        self.model = model
        self.pools = recorded_requests(path)
        self.levels = sorted(self.pools)
        self.rng = random.Random(seed)
        self.in_flight = 0
        self.served = 0

    def pool_for(self, in_flight: int) -> list[tuple[float | None, float, bool]]:
        if self.model == "keeps-up":
            return self.pools[self.levels[0]]
        i = bisect.bisect_right(self.levels, float(in_flight)) - 1
        return self.pools[self.levels[max(0, i)]]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path in self.pages:
            page = self.pages[path]
            return httpx.Response(page.status_code, headers=page.headers, content=page.content)
        if path.endswith("/v1/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "recorded", "object": "model"}]})
        if not path.endswith("/chat/completions") and not path.endswith("/completions"):
            return httpx.Response(404, json={"error": "not found"})
        self.in_flight += 1
        ttft, total, complete = self.rng.choice(self.pool_for(self.in_flight))
        self.served += 1
        # a microsecond a request apart: virtual time has no clock noise, and two requests of one run never share
        # their send, first-token and end times (those would be copies: tui.core.evidence.Duplicates)
        jitter = self.served * 1e-6
        ttft = None if ttft is None else ttft + jitter
        total += jitter
        chat = path.endswith("/chat/completions")

        def chunk(text: str | None, finish: str | None = None) -> bytes:
            if chat:
                choice = {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": text or "", "finish_reason": finish}
            return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"

        done = False

        def finished() -> None:  # the request's server time is over (the generator may never be closed)
            nonlocal done
            if not done:
                done = True
                self.in_flight -= 1

        async def body():
            try:
                if ttft is None or not complete:
                    await asyncio.sleep(total)
                    finished()
                    if ttft is not None:
                        yield chunk("x")
                    return  # ends without a finish_reason: recorded as a failure, as it was
                await asyncio.sleep(ttft)
                yield chunk("x")
                await asyncio.sleep(max(0.0, total - ttft))
                finished()
                yield chunk("y", "length")
                yield b'data: {"choices": [], "usage": {"prompt_tokens": 128, "completion_tokens": 64}}\n\n'
                yield b"data: [DONE]\n\n"
            finally:
                finished()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


class _NoScraper:
    def __init__(self, *a, **k) -> None:
        pass

    async def run(self, emit, stop: asyncio.Event) -> None:
        await stop.wait()


def patched_for_virtual_time(monkeypatch, server: RecordedServer) -> None:
    import tui.cli.loadtest as run_cli
    import tui.sources.load.executor as executor
    import tui.sources.load.generator as loadgen
    import tui.sources.load.runner as runner
    import tui.sources.load.sessions as sessions
    import tui.sources.load.steps as steps
    import tui.sources.metrics as metrics

    def now() -> float:
        loop = asyncio.get_running_loop()
        return loop.time()

    def perf_counter() -> float:
        try:
            return now()
        except RuntimeError:  # outside the loop (configuration): the start of virtual time
            return 0.0

    fake_time = types.SimpleNamespace(
        time=lambda: EPOCH0 + perf_counter(), thread_time=time.thread_time, process_time=time.process_time,
        perf_counter=perf_counter,
    )
    for mod in (loadgen, runner, executor, steps, sessions):  # every module of the load path that reads the clock
        monkeypatch.setattr(mod, "perf_counter", perf_counter)
    monkeypatch.setattr(runner, "time", fake_time)
    monkeypatch.setattr(steps, "time", fake_time)
    monkeypatch.setattr(loadgen, "make_gpu_sampler", lambda config: None)
    monkeypatch.setattr(metrics, "MetricsScraper", _NoScraper)
    transport = httpx.MockTransport(server)
    monkeypatch.setattr(run_cli, "run_load", functools.partial(loadgen.run_load, transport=transport))
    # asyncio.run() makes its loop with asyncio.events.new_event_loop(): hand it the virtual-time loop
    monkeypatch.setattr(asyncio.events, "new_event_loop", VirtualTimeLoop)
