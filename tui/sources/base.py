"""The contract between a data source and whoever consumes it (console or headless runner).

A source produces parsed records (``tui.core.records``) and line issues and hands them,
in batches, to a *sink* callable. It never touches the UI. The console's timer takes a
snapshot from the core ``Monitor`` a few times per second; sources never wait on the UI.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol

from tui.core.console_seams import ReplayControls  # its home is the core (the console screen reads it too)
from tui.core.drill import DrillTracker, is_drill_header
from tui.core.monitor import Monitor
from tui.core.records import LineIssue, Record, RunHeader
from tui.core.snapshot import Snapshot

Sink = Callable[[Iterable["Record | LineIssue"]], None]


#: What kind of source it is (the console header's badge falls back to it).
SourceMode = Literal["REPLAY", "LIVE", "WATCH"]


class Source(Protocol):
    """What the console (``tui.app``) uses of a source: ``ReplaySource``, ``LiveSource`` and the watch
    sources (``tui.sources.watch_console``) satisfy it."""

    mode: SourceMode
    notices: list[str]  # notable events for the console, oldest first (it shows each once)

    @property
    def label(self) -> str:
        """File path or URL (never with credentials); the console only reads it."""
        ...

    @property
    def status(self) -> str:
        """A short badge for the header ("REPLAY x4 · end", "LIVE c=4 r1"); empty: the mode is shown."""
        ...

    @property
    def finished(self) -> bool:
        """True once the source has nothing more to produce."""
        ...

    @property
    def in_flight(self) -> int | None:
        """The client's in-flight request count (a live run), None where there is none (a replay)."""
        ...

    @property
    def controls(self) -> ReplayControls | None:
        """The replay controls, None for a live run (its footer hides the replay keys)."""
        ...

    def start(self, sink: Sink) -> None:
        """Begin producing (in a background thread); returns at once."""
        ...

    def stop(self, timeout: float = ...) -> None:
        """Stop producing, waiting at most ``timeout`` s; a live source records in-flight requests as cancelled
        first."""
        ...


class MonitorSink:
    """Thread-safe bridge: sources add records, the UI tick takes snapshots."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.lock = threading.Lock()

    def __call__(self, items: Iterable[Record | LineIssue]) -> None:
        with self.lock:
            self.monitor.add_many(items)

    def finish(self) -> None:
        """The source has delivered a whole file: the Monitor holds it against itself (``Monitor.finish``)."""
        with self.lock:
            self.monitor.finish()

    def snapshot(self) -> Snapshot:
        with self.lock:
            return self.monitor.snapshot()

    def set_records_integrity(self, integrity: Any) -> None:
        """The digest chain's verification of the file read (``Monitor.set_records_integrity``)."""
        with self.lock:
            self.monitor.set_records_integrity(integrity)


class DrillSink(MonitorSink):
    """A ``MonitorSink`` that also follows a drill (issue 39): once a run header with a ``load.drill`` block passes,
    every block also goes to a ``tui.core.drill.DrillTracker``, and each snapshot carries its ``DrillView`` (the
    phases as bands, the recovery point, the verdict bar's line). Any other file costs one look at its first
    block."""

    def __init__(self, monitor: Monitor) -> None:
        super().__init__(monitor)
        self.tracker: DrillTracker | None = None
        self._looked = False

    def __call__(self, items: Iterable[Record | LineIssue]) -> None:
        batch = items if isinstance(items, list) else list(items)
        with self.lock:
            self.monitor.add_many(batch)
            if not self._looked:
                for it in batch:
                    if isinstance(it, RunHeader):
                        self._looked = True
                        if is_drill_header(it.data):
                            self.tracker = DrillTracker(self.monitor.cfg.slos)
                        break
            if self.tracker is not None:
                self.tracker.add_many(batch)

    def snapshot(self) -> Snapshot:
        snap = super().snapshot()
        tracker = self.tracker
        if tracker is not None and tracker.active:
            with self.lock:
                view = tracker.view(self.monitor)
            snap = dataclasses.replace(snap, drill=view)
        return snap
