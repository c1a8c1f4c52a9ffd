"""The contract between a data source and whoever consumes it (console or headless runner).

A source produces parsed records (``tui.core.records``) and line issues and hands them,
in batches, to a *sink* callable. It never touches the UI. The console's timer takes a
snapshot from the core ``Monitor`` a few times per second; sources never wait on the UI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from tui.core.records import LineIssue, Record

Sink = Callable[[Iterable["Record | LineIssue"]], None]


class Source(Protocol):
    label: str  # file path or URL (never with credentials)
    mode: str  # "REPLAY" | "LIVE"

    def start(self, sink: Sink) -> None:
        """Begin producing (in a background thread); returns at once."""

    def stop(self) -> None:
        """Stop producing; a live source records in-flight requests as cancelled first."""

    @property
    def finished(self) -> bool:
        """True once the source has nothing more to produce."""


class MonitorSink:
    """Thread-safe bridge: sources add records, the UI tick takes snapshots."""

    def __init__(self, monitor) -> None:
        self.monitor = monitor
        self.lock = threading.Lock()

    def __call__(self, items: Iterable[Record | LineIssue]) -> None:
        with self.lock:
            add = self.monitor.add
            for item in items:
                add(item)

    def snapshot(self):
        with self.lock:
            return self.monitor.snapshot()
