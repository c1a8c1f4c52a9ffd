"""The drill (issue 39, ``servewatch drill``; docs/recovery.md): how the service comes back from a spike, a crash or a
lost replica, judged from a drill's record file. Standard library only. Its modules, bottom to top (each imports only
those below it, by module path; an import-linter ``layers`` contract holds it):

- :mod:`~tui.core.drill.settings`: ``DrillPlan``, the drill's settings and steps, in and out of the run header;
- :mod:`~tui.core.drill.collect`: ``DrillCollector``, the drill's requests, phases and queue samples, compactly;
- :mod:`~tui.core.drill.recovery`: the rolling windows, the recovery point and its hold, the queue's way back;
- :mod:`~tui.core.drill.judge`: ``judge(collector, monitor)`` -> ``DrillResult``: phases, impact, server, burn-rate
  rules, the verdict;
- :mod:`~tui.core.drill.document`: the JSON document and its text;
- :mod:`~tui.core.drill.compare`, :mod:`~tui.core.drill.live`: two drills compared; the console's view.

The names below are the interface for callers outside this package.
"""

from __future__ import annotations

from tui.core.drill.collect import DrillCollector
from tui.core.drill.compare import compare_drills, format_compare
from tui.core.drill.document import drill_document, format_text
from tui.core.drill.judge import DrillResult, judge
from tui.core.drill.live import DrillTracker
from tui.core.drill.settings import DrillPlan, PlannedStep, is_drill_header, plan_from_header

__all__ = [
    "DrillCollector",
    "DrillPlan",
    "DrillResult",
    "DrillTracker",
    "PlannedStep",
    "compare_drills",
    "drill_document",
    "format_compare",
    "format_text",
    "is_drill_header",
    "judge",
    "plan_from_header",
]
