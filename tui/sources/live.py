"""``LiveSource``: a live load test as a Source for the console (``tui.sources.base``).

The load generator, the metrics scraper and the GPU sampler run in one background thread with
its own asyncio event loop. Every record is written to the record file first (durable), then
parsed and handed to the sink. ``stop()`` cancels the run; in-flight requests are recorded as
``cancelled`` before it returns. ``in_flight`` is the client's current in-flight request count
(the consumer passes it to ``Monitor.set_client_in_flight``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tui.core.drill.settings import DrillPlan
from tui.core.records import LineIssue, RecordError, parse_object
from tui.core.redact import redact_url
from tui.sources.base import Sink, Source, SourceMode
from tui.sources.load.config import LoadConfig
from tui.sources.load.errors import ConfigError, SetupError
from tui.sources.load.generator import LoadGenerator, RunSummary, run_load
from tui.sources.recorder import Recorder


def default_record_path(now: float | None = None) -> str:
    """``servewatch-YYYYmmdd-HHMMSS.jsonl`` in the current folder."""
    return time.strftime("servewatch-%Y%m%d-%H%M%S.jsonl", time.localtime(now))


class LiveSource:
    mode: SourceMode = "LIVE"
    controls = None  # a live run has no replay keys

    def __init__(self, config: LoadConfig, progress: Callable[[str], Any] | None = None,
                 drill: DrillPlan | None = None) -> None:
        config.validate()
        self.drill = drill  # `live --drill`: the drill's phases instead of the ramp (tui.sources.load.drill)
        if not config.record:
            config.record = default_record_path()
        self.config = config
        self.label: str = redact_url(config.url)
        self.record_path = config.record
        self.error: str | None = None  # why the run could not start or stopped abnormally
        self.summary: RunSummary | None = None
        self.last_progress = ""  # the generator's latest progress line
        self.notices: list[str] = []  # notable events for the console (notes, errors, early stop)
        self._state = "starting"
        self._progress = progress
        self._gen: LoadGenerator | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._lock = threading.Lock()
        self._stop_requested = False
        self._done = threading.Event()
        self.recorder: Recorder | None = None

    # -- Source protocol ---------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def status(self) -> str:
        """A short badge for the console header: 'LIVE c=4 r1', 'LIVE 2 req/s r1', 'LIVE finished'."""
        gen = self._gen
        st = gen._step if gen is not None else None
        if self._state == "running" and st is not None:
            if st.phase == "warmup":
                return "LIVE warmup"
            phase = getattr(gen, "phase", None)
            if phase is not None:  # a drill: its phase
                return f"LIVE drill {phase}"
            what = f"c={st.level:g}" if st.mode == "closed" else f"{st.level:g} req/s"
            return f"LIVE {what} r{st.round}"
        return f"LIVE {self._state}"

    @property
    def in_flight(self) -> int:
        gen = self._gen
        return int(gen.in_flight) if gen is not None else 0

    @property
    def awaits_mark(self) -> bool:
        """A `live --drill --fault-manual` run that has not been marked yet (the console's m key marks it)."""
        gen = self._gen
        return self._state == "running" and bool(getattr(gen, "waiting_for_mark", False))

    def mark_disturbance(self, by: str = "the console's m key") -> None:
        """The operator acted now (``--fault-manual``): thread-safe, the drill's loop takes the mark."""
        gen = self._gen
        mark = getattr(gen, "mark_disturbance", None)
        if callable(mark):
            mark(by)

    def start(self, sink: Sink) -> None:
        if self._thread is not None:
            raise RuntimeError("LiveSource.start() called twice")
        self._thread = threading.Thread(target=self._thread_main, args=(sink,), name="servewatch-live", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Cancel the run and wait (bounded) until in-flight requests are recorded as cancelled."""
        with self._lock:
            self._stop_requested = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # loop already closed: the run has ended
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ends by itself (or is stopped). True when finished."""
        return self._done.wait(timeout)

    # -- the thread --------------------------------------------------------

    def _thread_main(self, sink: Sink) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(sink, loop))
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            except Exception:
                pass
            loop.close()
            self._done.set()

    def _say(self, line: str) -> None:
        self.last_progress = line
        if line.startswith("note:") and len(self.notices) < 50:
            self.notices.append(line[5:].strip())
        if self._progress is not None:
            try:
                self._progress(line)
            except Exception:
                pass

    async def _main(self, sink: Sink, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._stop_requested:
                return
            self._loop = loop
            self._task = asyncio.current_task()
        try:
            var = self.config.sign_key_env  # checked by the CLI before the console opened (tui.cli.chainopts)
            key = os.environ.get(var, "").encode("utf-8") or None if var else None
            self.recorder = Recorder(self.record_path, ids_unique=True,  # the generator's ids: unique by construction
                                     sign_key=key)
        except OSError as exc:
            self._fail(sink, f"cannot write {self.record_path}: {exc.strerror or exc}")
            return
        rec = self.recorder
        label = self.label

        def emit(d: dict) -> None:
            rec.write(d)
            try:
                item: Any = parse_object(d)
            except RecordError as exc:
                item = LineIssue(label, 0, f"live record not usable: {exc}")
            try:
                sink([item])
            except Exception:
                pass

        def keep(gen: LoadGenerator) -> None:
            self._gen = gen

        self._state = "running"
        try:
            if self.drill is not None:
                from tui.sources.load.drill import run_drill

                self.summary = await run_drill(self.config, self.drill, emit, progress=self._say, on_generator=keep,
                                               usr1=False)
            else:
                self.summary = await run_load(self.config, emit, progress=self._say, on_generator=keep)
            self._state = "finished"
            self._say("run finished")
        except asyncio.CancelledError:
            self._state = "stopped"
            self._say("stopped: in-flight requests recorded as cancelled")
        except (SetupError, ConfigError) as exc:
            self._fail(sink, str(exc))
        except Exception as exc:  # never let the thread die silently
            self._fail(sink, f"live run failed: {type(exc).__name__}: {exc}")
        finally:
            rec.close()

    def _fail(self, sink: Sink, message: str) -> None:
        gen = self._gen
        if gen is not None:
            message = gen.scrub(message, limit=300)
        self.error = message
        self._state = "error"
        self.notices.append(message)
        self._say(message)
        try:
            sink([LineIssue(self.label, 0, message, "source_error")])
        except Exception:
            pass


if TYPE_CHECKING:  # the checker verifies that a live run is a console Source

    def _is_a_source(s: LiveSource) -> Source:
        return s
