"""What the console screen reads from the outside world, as types of the pure domain.

The screens and widgets may not import ``tui.sources`` (an import-linter contract), so the console
screen is typed against these: a source as the console sees it (``SourceView``; every
``tui.sources.base.Source`` satisfies it), its replay keys (``ReplayControls``) and the snapshot
feed (``ConsoleFeed``: plain callables the application builds from its ``MonitorSink``).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tui.core.snapshot import Snapshot


class ReplayControls(Protocol):
    """The replay keys: what a recorded run's source lets the viewer do (a live run has none)."""

    def toggle_pause(self) -> bool:
        """Pause or resume; returns the new paused state."""
        ...

    def speed_up(self) -> float: ...

    def slow_down(self) -> float: ...

    def step(self, unit: str = "record") -> None:
        """Pause and hand over one record (``"record"``) or one second of record time (``"second"``)."""
        ...

    def jump_to_end(self) -> None: ...


@runtime_checkable
class DrillMark(Protocol):
    """A live drill waiting for the operator's act (``--fault-manual``): the console's key marks the moment."""

    def mark_disturbance(self, by: str = ...) -> None: ...

    @property
    def awaits_mark(self) -> bool:
        """True while the drill would take a mark (a manual drill that has not been marked yet)."""
        ...


class SourceView(Protocol):
    """The read-only side of a source that the console screen shows (starting and stopping it is the
    application's business)."""

    @property
    def mode(self) -> str:
        """REPLAY, LIVE or WATCH: the header's badge when ``status`` is empty."""
        ...

    @property
    def notices(self) -> Sequence[str]:
        """Notable events, oldest first (the console shows each once)."""
        ...

    @property
    def label(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def finished(self) -> bool: ...

    @property
    def in_flight(self) -> int | None: ...

    @property
    def controls(self) -> ReplayControls | None: ...


@dataclass(frozen=True, slots=True)
class ConsoleFeed:
    """Where the console's tick takes its snapshots from.

    ``snapshot`` takes one (thread-safe). ``seq_no`` reads the monitor's record count without taking a
    snapshot (None: unknown, every tick snapshots). ``set_client_in_flight`` hands the client's in-flight
    count to the monitor (None: the feed has no such figure)."""

    snapshot: Callable[[], Snapshot]
    seq_no: Callable[[], int] | None = None
    set_client_in_flight: Callable[[int], None] | None = None


class SnapshotFeed(Protocol):
    """Anything the console can take snapshots from (a ``MonitorSink``, the watch console's sink)."""

    def snapshot(self) -> Snapshot: ...
