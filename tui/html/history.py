"""`servewatch history --html OUT`: the catalogued runs over time (``tui.core.history``): per deployment (served
model, engine, URL), its measured capacity and its goodput at each run's date, with each run's verdict on its
point, and the table of runs. Draws only; the rows and series come from ``tui.core.history``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tui.core.history import TABLE, table_rows
from tui.html.charts import STATE_COLOURS, Chart, Missing, _base
from tui.html.page import banners, chart_block, esc, page, table

PALETTE = ("#1565c0", "#ef6c00", "#6a1b9a", "#2e7d32", "#c62828", "#00838f", "#5d4037", "#455a64")


def _trend(cid: str, title: str, sub: str, deployments: Mapping[str, list[dict]], key: str, y_name: str) -> Chart | Missing:
    series = []
    for i, (name, points) in enumerate(deployments.items()):
        data = [{"value": [p["t_ms"], p[key]], "name": p["run"],
                 "itemStyle": {"color": STATE_COLOURS.get(str(p["verdict"]), "#9e9e9e")}}
                for p in points if p[key] is not None]
        if data:
            series.append({"type": "line", "name": name, "data": data, "symbolSize": 9, "connectNulls": False,
                           "lineStyle": {"color": PALETTE[i % len(PALETTE)]},
                           "itemStyle": {"color": PALETTE[i % len(PALETTE)]}})
    if not series:
        return Missing(cid, title, f"no catalogued run has a {y_name.split(' (')[0]} to draw")
    x = {"type": "time", "name": "run date (UTC)", "nameLocation": "middle", "nameGap": 28}
    y = {"type": "value", "name": y_name, "min": 0}
    opt = _base(title, sub, x, y, series)
    opt["tooltip"] = {"trigger": "item"}
    return Chart(cid, title, opt)


def history_charts(trends: Mapping[str, Any]) -> list[Chart | Missing]:
    deps = trends.get("deployments") or {}
    return [
        _trend("h-capacity", "Measured capacity over time, per deployment",
               "the highest level that PASSes in each run (points: the run's verdict colour; none: no level PASSes)",
               deps, "capacity", "capacity (the run's level unit)"),
        _trend("h-goodput", "Goodput over time, per deployment",
               "the highest goodput any level of the run reached (good requests per second)", deps, "goodput_rps",
               "goodput (good requests/s)"),
    ]


def history_html(rows: Sequence[Mapping[str, Any]], trends: Mapping[str, Any], *, db: str, filters: str) -> str:
    """The trend page: the charts, then the table of runs (oldest first)."""
    charts = history_charts(trends)
    synthetic = "some catalogued runs are labelled synthetic (made-up data)" if trends.get("synthetic") else None
    undated = trends.get("undated") or 0
    body = [f"<h1>servewatch history{' (SYNTHETIC runs included)' if synthetic else ''}</h1>",
            f"<p>catalogue: {esc(db)}; {esc(filters)}; {len(rows)} runs, "
            f"{len(trends.get('deployments') or {})} deployments (served model | engine | URL)</p>",
            banners(synthetic, (), [f"{undated} runs have no date and are left out of the charts"] if undated else []),
            "<h2>Trends</h2>", "".join(chart_block(c) for c in charts),
            "<h2>Runs</h2>", table(list(TABLE) + ["file"], [r + [str(src.get("path"))] for r, src in
                                                             zip(table_rows(rows), rows)])]
    return page("servewatch history", "\n".join(body), charts, synthetic=bool(synthetic))
