"""The console fed by a watch: a Source (background thread with its own asyncio loop running a
``WatchSession``) and a sink whose ``snapshot()`` builds a console Snapshot from the watch state
(``tui.core.watch.build_snapshot``). No Textual here; the console renders what it gets.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from tui.core import watch as core
from tui.sources.base import ReplayControls, SourceMode
from tui.sources.watch_setup import WatchSettings, build_session


class WatchConsoleSource:
    mode: SourceMode = "WATCH"

    def __init__(self, settings: WatchSettings | None = None, emit: Callable[[dict], Any] | None = None, *,
                 session: Any = None, client_factory: Callable[[], Any] | None = None,
                 first_window_s: float | None = None) -> None:
        self.settings = settings
        self._emit = emit
        self.session = session
        self._client_factory = client_factory
        self.first_window_s = first_window_s
        self.notices: list[str] = []
        self.error: str | None = None
        self.lock = threading.Lock()
        self.seq = 0
        self.waiting_series: deque = deque(maxlen=240)
        self.running_series: deque = deque(maxlen=240)
        self.good_series: deque = deque(maxlen=240)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._done = threading.Event()
        self._seen_resets = 0
        self._told_no_ttft = False
        if session is not None:
            session.lock = self.lock
        elif settings is not None:
            self._build_from_settings(settings)

    def _build_from_settings(self, s: WatchSettings) -> None:
        from tui.sources.watch import make_client

        self._client_factory = lambda: make_client(s.request_headers(), insecure=s.insecure)
        self.first_window_s = s.first_window_s

    @property
    def label(self) -> str:
        s = self.session
        return s.watcher.label if s is not None else ""

    @property
    def status(self) -> str:
        s = self.session
        if s is None or s.watcher is None:
            return "WATCH starting"
        if self.error:
            return "WATCH error"
        if s.watcher.kind == "prometheus":
            return "WATCH fleet (Prometheus), last window then from watch start"
        return "WATCH one replica, from watch start"

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def in_flight(self) -> int | None:
        """No client in-flight count: the watch sends no load (its canary is not a live run)."""
        return None

    @property
    def controls(self) -> ReplayControls | None:
        """No replay keys (a watch record file is replayed at once)."""
        return None

    def start(self, sink: Any = None) -> None:
        if self._thread is not None:
            raise RuntimeError("start() called twice")
        self._thread = threading.Thread(target=self._main, name="servewatch-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        loop, ev = self._loop, self._stop
        if loop is not None and ev is not None:
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._run())
        finally:
            loop.close()
            self._done.set()

    def _updated(self) -> None:
        s = self.session
        with self.lock:
            self.seq += 1
            w = s.last_window
            if w is not None:
                if w.waiting_end is not None:
                    self.waiting_series.append(w.waiting_end)
                if w.running is not None:
                    self.running_series.append(w.running)
                if w.ttft is not None:
                    br = core.good_bracket(w.ttft, s.cfg.slo_s, w.failed)
                    if br.lo is not None:
                        self.good_series.append(br.lo)
            resets = s.judgement.resets
            while self._seen_resets < len(resets):
                self.notices.append(resets[self._seen_resets])
                self._seen_resets += 1
            if not self._told_no_ttft and s.watcher.engine and not s.has_ttft():
                self._told_no_ttft = True
                self.notices.append(f"{s.watcher.engine}: {core.NO_TTFT_NOTE} R (the queue is still shown)")

    async def _run(self) -> None:
        from tui.sources.watch import WatchError

        self._stop = asyncio.Event()
        client = self._client_factory() if self._client_factory is not None else None
        try:
            if self.session is not None and getattr(self.session.watcher, "client", True) is None:
                self.session.watcher.client = client  # the client lives on this thread's loop
            if self.session is None and self.settings is not None:
                session, err = build_session(self.settings, client, emit=self._emit)
                if err:
                    self.error = err
                    self.notices.append(err)
                    return
                self.session = session
            self.session.lock = self.lock
            self.notices.append(core.SERVER_TTFT_LABEL)
            self.notices.append("scope: " + self.session.watcher.scope)
            await self.session.run(self._stop, first_window_s=self.first_window_s, on_update=self._updated)
        except WatchError as exc:
            self.error = str(exc)
            self.notices.append(str(exc))
            self._updated()
        except Exception as exc:  # never let the thread die silently
            self.error = f"watch stopped: {type(exc).__name__}: {exc}"
            self.notices.append(self.error)
        finally:
            if client is not None:
                try:
                    await client.aclose()
                except Exception:
                    pass


def _watched_s(session: Any) -> float | None:
    """Seconds since a live watch started (None for a replayed watch file: its judged windows' span is shown)."""
    started = getattr(session, "started_at", None)
    clock = getattr(session, "clock", None)
    return None if started is None or clock is None else clock() - started


class WatchSink:
    """``snapshot()`` for the console (thread-safe); the app never calls the source's internals."""

    def __init__(self, source: WatchConsoleSource) -> None:
        self.source = source

    def snapshot(self):
        src = self.source
        s = src.session
        with src.lock:
            if s is None:
                cfg = core.WatchConfig()
                j = core.WatchJudgement(cfg)
                return core.build_snapshot(seq=src.seq, label=src.label, judgement=j, last=None, has_ttft=True,
                                           engine=None, scope="starting", gap=src.error)
            return core.build_snapshot(
                seq=src.seq, label=s.watcher.label, judgement=s.judgement, last=s.last_window,
                has_ttft=s.has_ttft() if s.watcher.engine else True, engine=s.watcher.engine, scope=s.watcher.scope,
                canary=list(s.canary_records), waiting_series=list(src.waiting_series),
                running_series=list(src.running_series), good_series=list(src.good_series),
                gap=src.error or s.last_gap, header=s.header,
                canary_line=core.canary_text(s.canary_summary()) if hasattr(s, "canary_summary") else None,
                verdict=s.verdict() if hasattr(s, "verdict") and s.watcher.engine else None,
                watched_s=_watched_s(s),  # the header's clock runs (a replayed file: its windows' span)
            )


class _ReplayedWatcher:
    kind = "replay"

    def __init__(self, label: str, engine: str | None, scope: str) -> None:
        self.label = label
        self.engine = engine
        self.scope = scope


class _ReplayedSession:
    """The parts of a WatchSession the sink reads, rebuilt from a watch record file."""

    def __init__(self, label: str, cfg: core.WatchConfig) -> None:
        self.watcher = _ReplayedWatcher(label, None, "recorded watch")
        self.cfg = cfg
        self.judgement = core.WatchJudgement(cfg)
        self.last_window = None
        self.last_gap = None
        self.canary_records: list[dict] = []
        self.header: dict = {}
        self.lock = None

    def has_ttft(self) -> bool:
        e = self.watcher.engine
        return bool(e and core.ENGINES[e].ttft)


class WatchFileSource(WatchConsoleSource):
    """Replays a `servewatch watch --record` file into the console (at once: the windows carry
    their own times; the verdict is the one `report` gives)."""

    mode: SourceMode = "REPLAY"

    def __init__(self, path: str, cfg: core.WatchConfig, label: str | None = None) -> None:
        super().__init__(None)
        self.path = str(path)
        self.session = _ReplayedSession(label or self.path, cfg)
        self.session.lock = self.lock
        self.problems: list[str] = []

    @property
    def status(self) -> str:
        return "REPLAY watch record" + (" (finished)" if self.finished else "")

    def start(self, sink: Any = None) -> None:
        from tui.sources.evidence_reader import ReadSettings, open_evidence
        from tui.sources.evidence_watch import watch_lines
        from tui.sources.importing import ImportProblem

        s = self.session
        try:
            with open_evidence(self.path, ReadSettings(watch=False)) as ev:  # the one way in for evidence
                for n, d in watch_lines(ev):
                    try:
                        if isinstance(d, ValueError):
                            raise d
                        if not isinstance(d, dict):
                            raise ValueError("line is not a JSON object")
                        if d.get("type") == "run":
                            if not s.header:
                                s.header = d
                                sc = (d.get("watch") or {}).get("scope")
                                if sc:
                                    s.watcher.scope = f"recorded: {sc}"
                            continue
                        if d.get("type") == "request":
                            s.canary_records.append(d)
                            continue
                        if d.get("type") != "watch":
                            continue
                        w = core.window_from_record(d)
                    except ValueError as exc:
                        self.problems.append(f"{self.path}:{n}: {str(exc)[:80]}")
                        continue
                    s.watcher.engine = w.engine
                    with self.lock:
                        s.last_window = w
                        s.judgement.add(w)
                        s.last_gap = "; ".join(w.gaps) if w.ttft is None and w.gaps and not w.reset else None
                    self._updated()
        except (OSError, ImportProblem) as exc:
            self.error = f"cannot read {self.path}: {getattr(exc, 'strerror', None) or exc}"
            self.notices.append(self.error)
        for p in self.problems[:5]:
            self.notices.append(p)
        with self.lock:
            self.seq += 1
        self._done.set()

    def stop(self, timeout: float = 30.0) -> None:
        pass
