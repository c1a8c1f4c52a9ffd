"""The Monitor (records in, snapshots out), in modules along its seams (``facade`` says how they compose):

- ``config``: ``MonitorConfig`` and the verdict settings it holds (``config_at``, ``settings_of``);
- ``level``: one level's state (``LevelState``);
- ``words``: a level's verdict in words (``verdict_from_judge``);
- ``state``: what the Monitor holds and the evidence problems that forbid PASS (``MonitorState``);
- ``budget``: the budget beside the load (``BudgetTracking``);
- ``ingest``: records in, the hot path ``add_many`` (``Ingest``);
- ``view``: snapshots out (``ReadSide``);
- ``checks``: the whole-file checks, ``finish`` (``WholeFileChecks``);
- ``facade``: ``Monitor``, all of them.

This ``__init__`` re-exports the public names for callers outside the package; the modules inside import each other
by module path, never through it.
"""

from __future__ import annotations

from tui.core.monitor.config import MonitorConfig, config_at, settings_of
from tui.core.monitor.facade import Monitor
from tui.core.monitor.words import verdict_from_judge
from tui.core.slos import LATENCY_KEYS

__all__ = ["LATENCY_KEYS", "Monitor", "MonitorConfig", "config_at", "settings_of", "verdict_from_judge"]
