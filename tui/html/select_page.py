"""The HTML page of `servewatch select --html OUT` (issue 40): the decision table and one chart, cost per 1M good
output tokens against measured capacity, each candidate's capacity bracket a horizontal error bar and the Pareto front
(lower cost, higher capacity) marked. Drawn from the decision document (``tui.core.choice.decide``) alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tui.core.levels import fmt_level
from tui.html.charts import Chart, Missing, _base
from tui.html.page import banners, esc, page, render_value, table, verdict_boxes

CHOSEN, READY, NOT_READY = "#2e7d32", "#1565c0", "#9e9e9e"


def _cost(r: Mapping[str, Any], basis: str | None) -> float | None:
    v = r.get("gpu_hours_per_1m_good_tokens") if basis == "GPU-hours" else r.get("cost_per_1m_good_tokens")
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def cost_chart(cid: str, doc: Mapping[str, Any]) -> Chart | Missing:
    """Cost per 1M good output tokens (y) against the measured capacity (x): one point per candidate at its bracket's
    lower end, its bracket [low, high) as a horizontal bar, the Pareto front as a line."""
    basis = doc.get("basis")
    unit = "USD" if basis == "USD" else "GPU-hours"
    title = f"Cost per 1M good output tokens ({unit}) against measured capacity"
    rows = [r for r in doc.get("candidates") or [] if _cost(r, basis) is not None and r["capacity"]["low"] is not None]
    if not rows:
        return Missing(cid, title, "no candidate has both a measured capacity and a cost per 1M good output tokens "
                                   "(no level PASSes, no good tokens measured, or no comparable cost basis)")
    cap_unit = rows[0]["capacity"]["unit"]
    pts, bars, open_above = [], [], []
    for r in rows:
        low, high, cost = r["capacity"]["low"], r["capacity"]["high"], _cost(r, basis) or 0.0
        colour = CHOSEN if r.get("chosen") else READY if r.get("ready") else NOT_READY
        state = "chosen" if r.get("chosen") else "ready" if r.get("ready") else "not ready"
        pts.append({"value": [low, round(cost, 6)], "name": f"{r['name']} ({state})", "itemStyle": {"color": colour},
                    "label": {"show": True, "formatter": str(r["name"]), "position": "top"}})
        if high is not None:
            bars.append([round(cost, 6), low, high])
        else:
            open_above.append(str(r["name"]))
    front = sorted(((r["capacity"]["low"], _cost(r, basis) or 0.0) for r in rows if r.get("pareto")),
                   key=lambda p: p[0])
    series: list[dict[str, Any]] = [
        {"type": "scatter", "name": "candidate (at its measured capacity)", "data": pts, "symbolSize": 13, "z": 3},
        {"type": "custom", "name": "capacity bracket [low, high)", "errorAxis": "x", "data": bars,
         "itemStyle": {"color": "#37474f"}, "encode": {"x": [1, 2], "y": 0}, "z": 1},
        {"type": "line", "name": "Pareto front (no candidate both cheaper and of higher capacity)",
         "data": [[x, round(y, 6)] for x, y in front], "lineStyle": {"type": "dashed", "color": "#ef6c00"},
         "itemStyle": {"color": "#ef6c00"}, "symbol": "diamond", "symbolSize": 9, "z": 2}]
    sub = [f"x: measured capacity ({cap_unit}), the bracket's lower end; bar: up to the lowest level that did not "
           "PASS; colour: green chosen, blue ready, grey not ready"]
    if open_above:
        sub.append("no bar (open above: nothing above decided): " + ", ".join(open_above))
    x = {"type": "value", "name": f"measured capacity ({cap_unit})", "nameLocation": "middle", "nameGap": 28,
         "min": 0}
    y = {"type": "value", "name": f"{unit} per 1M good output tokens", "min": 0}
    return Chart(cid, title, _base(title, "\n".join(sub), x, y, series))


def _n(v: Any, spec: str = "{:.3g}") -> str:
    return "-" if not isinstance(v, (int, float)) or isinstance(v, bool) else spec.format(v)


def select_html(doc: Mapping[str, Any]) -> str:
    """`servewatch select --html OUT`: banners, the choice, the decision table with each candidate's reasons, the
    chart, the comparability checks."""
    basis = doc.get("basis")
    chart = cost_chart("select-cost", doc)
    rows = []
    for r in doc.get("candidates") or []:
        cap, b, q = r["capacity"], r.get("budget") or {}, r.get("quality") or {}
        capacity = ("none" if cap["low"] is None else
                    f"[{fmt_level(cap['low'])}, {'open' if cap['high'] is None else fmt_level(cap['high'])}) {cap['unit']}")
        budget = "unknown" if b.get("fits") is None else ("fits" if b["fits"] else "does not fit")
        if b.get("memory_only_candidate") is not None:
            budget += f", memory-only candidate {b['memory_only_candidate']}"
        rows.append([r["name"] + (" (chosen)" if r.get("chosen") else ""), "ready" if r["ready"] else "NOT READY",
                     budget, capacity, _n(r.get("goodput_tok_s"), "{:.1f}"), q.get("state") or "not run",
                     _n(r.get("usd_per_hour"), "{:,.2f}"), _n(_cost(r, basis), "{:,.4g}"),
                     "yes" if r.get("pareto") else "", " ".join(r.get("reasons") or []) or "-"])
    synthetic = ("SYNTHETIC input: " + ", ".join(doc["synthetic"])) if doc.get("synthetic") else None
    extra = [str(x) for x in doc.get("refused") or []]
    if doc.get("near_tie"):
        extra.append(str(doc["near_tie"]))
    cost_head = "GPU-h / 1M good tokens" if basis == "GPU-hours" else "$ / 1M good tokens"
    body = [f"<h1>servewatch select{' (SYNTHETIC)' if synthetic else ''}</h1>",
            banners(synthetic, doc.get("not_acceptance_grade") or (), extra),
            verdict_boxes([("choice", doc.get("choice") or ("NOT ENOUGH EVIDENCE" if doc.get("exit_code") == 3
                                                             else "no ready candidate"))]),
            f'<p class="overall" id="select-reason">{esc(doc.get("reason"))}</p>',
            (f'<p class="note" id="select-cheapest">cheapest measured: {esc(doc["cheapest_measured"])}</p>'
             if doc.get("cheapest_measured") else ""),
            "".join(f'<p class="note">allowed difference: {esc(f)} (--allow-different {esc(f)})</p>'
                    for f in doc.get("allowed") or ()),
            f'<p>cost basis: {esc(doc.get("basis_why"))}; exit code {esc(doc.get("exit_code"))}</p>',
            "<h2>Decision table</h2>",
            table(["candidate", "acceptance", "budget", "capacity bracket", "good tok/s at capacity", "quality",
                   "$ / hour", cost_head, "Pareto", "reasons (as accept gives them)"], rows),
            "<h2>Cost against capacity</h2>",
            f'<div class="chart" id="{chart.id}" role="img" aria-label="{esc(chart.title)}"></div>'
            if isinstance(chart, Chart) else f'<p class="missing" id="{chart.id}-missing">{esc(chart.why)}</p>',
            "<h2>Comparability</h2>", render_value((doc.get("comparability") or {}).get("fields") or []),
            "<h2>Each candidate's acceptance command</h2>",
            "<ul>" + "".join(f"<li><code>{esc(r.get('accept_command'))}</code></li>"
                             for r in doc.get("candidates") or []) + "</ul>"]
    return page("servewatch select" + (" (SYNTHETIC)" if synthetic else ""), "\n".join(body), [chart],
                synthetic=bool(synthetic))
