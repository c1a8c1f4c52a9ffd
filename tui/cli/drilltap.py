"""The drill tap of a report (issue 39): the blocks a reader hands its Monitor, also handed to a drill collector when
the file is a drill's. Light on purpose: ``report`` of a file that is not a drill never imports the drill's
judgement (``tui.core.drill``) nor the drill's flags (``tui.cli.drillopts``, which import the load generator), only
the run header's test (``tui.core.phases.is_drill_header``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tui.core.phases import is_drill_header
from tui.core.records.model import RunHeader

if TYPE_CHECKING:
    from tui.core.drill import DrillCollector
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.core.slos import Slos


class DrillTap:
    """Hands each block to a drill collector made with the SLOs the Monitor judges at (known once it has read the run
    header: ``settled``), made only when the run header says drill; ``also``: another tap (the HTML charts'
    sampler). The collector sees every block from the one that holds the run header on (before it, a collector
    ignores every record: the same outcome as seeing them)."""

    def __init__(self, cfg: MonitorConfig, also: Any = None) -> None:
        self.cfg = cfg
        self.also = also
        self.col: DrillCollector | None = None
        self._slos: Slos = cfg.slos
        self._drill: bool | None = None  # None: no run header seen yet

    def settled(self, mon: Monitor) -> None:
        if self.col is None:
            self._slos = mon.cfg.slos

    def __call__(self, items: Sequence) -> None:
        if self._drill is None:
            for it in items:
                if type(it) is RunHeader:
                    self._drill = is_drill_header(it.data)
                    if self._drill:
                        from tui.core.drill import DrillCollector

                        self.col = DrillCollector(self._slos)
                    break
        if self.col is not None:
            self.col.add_many(items)
        if self.also is not None:
            self.also(items)

    @property
    def active(self) -> bool:
        """Whether the file read is a drill's (its run header says so)."""
        return self.col is not None and bool(self.col.active)

    @property
    def collector(self) -> DrillCollector:
        if self.col is not None:
            return self.col
        from tui.core.drill import DrillCollector

        return DrillCollector(self._slos)
