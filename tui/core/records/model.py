"""The record types other than the request (``tui.core.records.request``): samples, steps, drill phases, the run
header, budget, watch and seal records, and ``Record``, the union a reader yields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.core.records.request import RequestRecord
from tui.core.records.schema import is_num


@dataclass(slots=True)
class GpuSample:
    t: float
    device: int
    name: str | None
    memory_used: int | None
    memory_total: int | None
    utilization: float | None = None


@dataclass(slots=True)
class QueueSample:
    t: float
    source: str
    waiting: float | None = None
    running: float | None = None
    kv_cache_usage: float | None = None
    client_in_flight: int | None = None


@dataclass(slots=True)
class HostSample:
    t: float
    cpu_percent: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    client_cpu_percent: float | None = None
    # issue 41: the served model's process when the server is local and its PID is known (the host pane)
    server_rss: int | None = None  # bytes
    server_pid: int | None = None


@dataclass(slots=True)
class StepRecord:
    """Marks the start or end of one load step (level, round)."""

    t: float
    event: str  # "start" | "end"
    level: float | None
    round: int = 1
    mode: str | None = None  # "closed" | "open"
    info: dict = field(default_factory=dict)
    # issue 21: the server's latency histograms scraped at the step's start and end (an end record's
    # ``server_histograms``, read by tui.core.server_timing); None when the step carries none. Also in ``info``.
    server_histograms: dict | None = None


@dataclass(slots=True)
class PhaseRecord:
    """Marks the start or end of one phase of a drill (``servewatch drill``: baseline, disturbance, recovery; issue
    39). ``level`` and ``round`` name the step whose requests are the phase's (None: the phase has no step of its
    own, such as an operator's act marked at one instant); ``info`` holds the rest (the disturbance's details, the
    health probe's findings)."""

    t: float
    name: str  # tui.core.phases.PHASE_NAMES
    event: str  # "start" | "end"
    level: float | None = None
    round: int | None = None
    info: dict = field(default_factory=dict)


@dataclass(slots=True)
class RunHeader:
    data: dict
    line: int | None = None  # the file line it was read from (the block reader sets it; None: made elsewhere)

    @property
    def synthetic(self) -> bool:
        return bool(self.data.get("synthetic", False))

    @property
    def started_at(self) -> float | None:
        v = self.data.get("started_at")
        return float(v) if is_num(v) else None  # type: ignore[arg-type]  # (is_num checked it)


@dataclass(slots=True)
class BudgetRecord:
    data: dict


@dataclass(slots=True)
class WatchRecord:
    """One window of a `servewatch watch` session (checked by ``tui.core.records.watch.window_from_record``)."""

    data: dict


@dataclass(slots=True)
class SealRecord:
    """The final record of a chained run (tui.core.chain): its checkpoint; verified by ``ChainVerifier``."""

    data: dict


@dataclass(slots=True)
class UnknownRecord:
    type: str
    data: dict


Record = (RequestRecord | GpuSample | QueueSample | HostSample | StepRecord | RunHeader | BudgetRecord | WatchRecord
          | SealRecord | PhaseRecord | UnknownRecord)
