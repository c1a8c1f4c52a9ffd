"""The self-contained HTML pages of `report --html`, `accept` (acceptance.html) and `compare --html`.

Outside ``tui.core`` (which computes the chart data: ``tui.core.chartdata``) and without Textual or the sources
(an import-linter contract): this package only draws. The charts are Apache ECharts 6.1.0, vendored in
``tui/html/vendor`` with its LICENSE and NOTICE and inlined in every page, so a page opens from ``file://`` and
fetches nothing. ``tui.html.charts`` builds the chart options, ``tui.html.page`` the page, ``tui.html.pages``
the three documents, ``tui.html.select_page`` `select`'s decision table and chart, ``tui.html.drill`` the
recovery chart and a drill's page.
"""

from __future__ import annotations

from tui.html.drill import drill_html, recovery_chart
from tui.html.pages import accept_html, compare_html, report_html
from tui.html.select_page import select_html

__all__ = ["accept_html", "compare_html", "drill_html", "recovery_chart", "report_html", "select_html"]
