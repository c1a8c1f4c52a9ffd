"""The Monitor: ingests records one by one, answers snapshots.

One Monitor serves the console (snapshots at 2-4 Hz), the headless report and the live runner. Everything it keeps
is bounded: exact latency lists are capped (beyond the cap, cumulative percentiles come from a streaming sketch
and say so), the rolling window, recent rows and series are bounded deques.

It is one object (a snapshot is one consistent read of it under one lock, ``tui.sources.base.MonitorSink``) whose
parts live along their seams, each a class in its own module over the state they share (``state.MonitorState``):

- ``ingest.Ingest``: records in; ``add_many`` is the hot path of every reader (measured by bench/bench_report.py);
- ``view.ReadSide``: snapshots out (windows, level rows, verdicts, queue and GPU states);
- ``checks.WholeFileChecks``: once per file, the file held against itself (``finish``) and its digest chain;
- ``budget.BudgetTracking``: the budget beside the load (completed from the run header, the file's budget record).

The parts are methods of one object, not objects of their own: the hot path reads its state with no attribute hop
more than one module would need.
"""

from __future__ import annotations

from tui.core.monitor.checks import WholeFileChecks
from tui.core.monitor.ingest import Ingest


class Monitor(WholeFileChecks, Ingest):
    """Ingests records (``add``, ``add_many``) and produces ``Snapshot``s. Not thread-safe: wrap it with
    ``tui.sources.base.MonitorSink`` when a source thread feeds it."""
