"""Immutable snapshots of everything the console shows.

The UI (``tui/app.py``, ``tui/widgets``) renders these and computes nothing:
every number, label and colour *class* (good / warn / bad / na) comes from here.
``None`` means "not available" and renders as ``N/A``.

``Snapshot`` is the aggregate: it carries the budget, its view, the measured capacity, the records' integrity and
the settings the run was judged at, each with its own type, so this module sits above ``tui.core.budgetview`` and
``tui.core.capacity`` in the core's layers. Its parts (windows, verdicts, level and request rows, ...) are in
``tui.core.snapshot_parts``, low in the layers, and re-exported here for the snapshot's readers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TypeAlias

from tui.core.budget.results import BudgetResult
from tui.core.budgetview import BudgetView
from tui.core.capacity import Capacity
from tui.core.chain import RecordsIntegrity
from tui.core.phases import DrillView
from tui.core.slos import Slos
from tui.core.snapshot_parts import BAD as BAD
from tui.core.snapshot_parts import FAIL as FAIL
from tui.core.snapshot_parts import GOOD as GOOD
from tui.core.snapshot_parts import INSUFFICIENT_WINDOW as INSUFFICIENT_WINDOW
from tui.core.snapshot_parts import NA as NA
from tui.core.snapshot_parts import PASS as PASS
from tui.core.snapshot_parts import UNDECIDED as UNDECIDED
from tui.core.snapshot_parts import WARN as WARN
from tui.core.snapshot_parts import FractionStat as FractionStat
from tui.core.snapshot_parts import GpuDevice as GpuDevice
from tui.core.snapshot_parts import GpuState as GpuState
from tui.core.snapshot_parts import JsonObject as JsonObject
from tui.core.snapshot_parts import JsonValue as JsonValue
from tui.core.snapshot_parts import LevelRow as LevelRow
from tui.core.snapshot_parts import Outcome as Outcome
from tui.core.snapshot_parts import Percentile as Percentile
from tui.core.snapshot_parts import QueueState as QueueState
from tui.core.snapshot_parts import RequestRow as RequestRow
from tui.core.snapshot_parts import Severity as Severity
from tui.core.snapshot_parts import Verdict as Verdict
from tui.core.snapshot_parts import VerdictState as VerdictState
from tui.core.snapshot_parts import WindowStat as WindowStat
from tui.core.snapshot_parts import cancelled_note as cancelled_note
from tui.core.snapshot_parts import json_get as json_get
from tui.core.verdict_settings import Resolution

#: One verdict state change of the timeline (``Monitor.timeline``): (level, round, state, measured requests of
#: that level so far, that request's t_end)
TimelineEntry: TypeAlias = tuple[float | None, int, str, int, float]


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int  # increases with every ingested record
    source: str  # file path or URL
    synthetic: bool
    header: JsonObject  # the run header as the file holds it ({} when none)
    run_elapsed_s: float  # record time from first to last request
    current_level: float | None
    current_round: int
    cumulative: WindowStat  # measured phase of the current level+round
    rolling: WindowStat
    verdict: Verdict
    levels: tuple[LevelRow, ...]
    recent: tuple[RequestRow, ...]  # newest last, capped
    good_series: tuple[float, ...]  # rolling good fraction per time bucket
    p95_series: tuple[float, ...]  # per-bucket TTFT P95 in ms
    target: float
    queue: QueueState
    gpu: GpuState
    errors_by_class: dict[str, int]
    requests_total: int
    warmup_total: int
    malformed: int
    malformed_examples: tuple[str, ...]  # "file:line: reason", first few
    unknown_types: int
    truncated: int
    host: dict[str, float | None] = field(default_factory=dict)  # the last host sample
    notes: tuple[str, ...] = ()
    budget: BudgetResult | None = None  # the BudgetResult shown with this run (given, or from the file's budget record); None: unknown
    budget_view: BudgetView | None = None  # tui.core.budgetview.BudgetView: what every view shows about the budget
    provenance: str = ""  # tui.core.provenance.describe(header): where the data came from
    provenance_short: str = ""  # the same in a few words (the console header)
    timeline: tuple[TimelineEntry, ...] = ()  # (level, round, state, n, t) per verdict state change (Monitor.timeline)
    timeline_omitted: int = 0  # state changes past the bound, not kept
    # Measured requests cancelled by the user or by servewatch (all levels; warmup not counted):
    cancelled_open: int = 0  # still open when cancelled: excluded from good fractions and verdicts, shown
    cancelled_late: int = 0  # already past the SLO without a first token within it: counted as failed
    duplicates: int = 0  # request records whose id was seen before: not counted again (an input problem)
    #: tui.core.capacity.Capacity of ``levels`` against the budget's candidate: the sweep pane's (and `sweep`'s
    #: and `accept`'s) measured capacity, per-level states and what limits it; None: not computed
    capacity: Capacity | None = None
    #: evidence problems that forbid PASS (Monitor.block_pass): cross-checks of the file against itself, a broken
    #: digest chain, ...; every view lists them beside the verdict
    evidence_problems: tuple[str, ...] = ()
    #: tui.core.chain.RecordsIntegrity of the file read (digest chain verified, broken, unverified); None: not
    #: verified by this view (a live run, a stream still being read)
    records_integrity: RecordsIntegrity | None = None
    #: issue 35: what the file was judged at (``tui.core.verdict_settings.Resolution``; None: a Monitor that
    #: judges at its config as given); when re-judged, the level rows and the current verdict at the run's own
    run_levels: tuple[LevelRow, ...] | None = None
    run_verdict: Verdict | None = None
    settings: Resolution | None = None
    #: the SLOs in force (tui.core.slos.Slos): ``slos.describe()`` names them wherever the verdict is shown
    slos: Slos = field(default_factory=Slos)
    #: counted tokens over every measured level (``TokenTally.summary()``); None: none measured / not computed
    tokens: JsonObject | None = None
    #: the console's prefix-cache line for the current level (``tui.core.prefix_cache.short_text``); None: nothing
    #: known there (no request said cached tokens, no step counters), the line is not shown
    prefix_cache_text: str | None = None
    #: issue 39: a drill's phases as bands, its recovery point and the verdict bar's line (``tui.core.drill.live``);
    #: None: not a drill
    drill: DrillView | None = None
    #: measured request and step records of levels beyond ``tui.core.bounds.MAX_LEVELS`` distinct ones: counted,
    #: never judged; any such record forbids PASS (an evidence problem says so)
    levels_over_cap: int = 0

    @property
    def cancelled_note(self) -> str | None:
        """The one line every view shows when requests were cancelled (None when none were)."""
        return cancelled_note(self.cancelled_open, self.cancelled_late)

    def to_dict(self) -> dict:
        return asdict(self)

