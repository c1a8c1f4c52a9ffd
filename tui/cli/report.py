"""`servewatch report FILE`: the headless verdict on a record file (no Textual, no httpx).

The report itself (its settings, ``ReportSettings``, and ``run_report``) is ``tui.cli.reporting``, shared with
`servewatch run`, which prints the same report of the run it has just recorded."""

from __future__ import annotations

from tui.cli.reporting import ReportSettings, run_report

__all__ = ["ReportSettings", "run"]


def run(settings: ReportSettings) -> int:
    """`servewatch report FILE`."""
    return run_report(settings)
