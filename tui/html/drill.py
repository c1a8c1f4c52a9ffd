"""The recovery chart (issue 39) and the page of `report --html` on a drill file, from the drill document
(``tui.core.drill.document``; the same dict `drill --json` prints).

The chart: the rolling good fraction (each window at its start, as the recovery rule reads it) against the target,
and the TTFT P50 / P95 of each window's completed requests, over seconds since the baseline started; the phases as
bands (baseline grey, disturbance red, recovery amber), the recovery point and the RTO's end as vertical lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tui.html.charts import Chart, Missing, _base, _time_axis, latency_axis
from tui.html.page import banners, chart_block, esc, page, render_value, table, verdict_boxes

PHASE_BANDS = {"baseline": "rgba(158,158,158,0.14)", "disturbance": "rgba(198,40,40,0.16)",
               "recovery": "rgba(249,168,37,0.14)"}


def _phase_areas(d: Mapping, t0: float) -> list[list[dict[str, Any]]]:
    out = []
    for p in d.get("phases") or []:
        s, e = p.get("start"), p.get("end")
        if not isinstance(s, (int, float)) or p.get("name") not in PHASE_BANDS:
            continue
        e = e if isinstance(e, (int, float)) else s
        if e <= s and p.get("name") != "disturbance":
            continue
        if e <= s:  # an instant (the operator's act): a thin band so it shows
            e = s + 0.5
        out.append([{"xAxis": round(s - t0, 3), "name": str(p["name"]),
                     "itemStyle": {"color": PHASE_BANDS[str(p["name"])]}}, {"xAxis": round(e - t0, 3)}])
    return out


def recovery_chart(cid: str, doc: Mapping, label: str = "") -> Chart | Missing:
    """The recovery chart of one drill document (``{"drill": {...}}``)."""
    d = doc.get("drill") or {}
    title = "Recovery: rolling good fraction and TTFT over the drill" + (f" ({label})" if label else "")
    pts = d.get("series") or []
    t0 = d.get("start")
    if not pts or not isinstance(t0, (int, float)):
        return Missing(cid, title, "no rolling window in this drill (it ended after its baseline, or holds no request)")
    target = ((d.get("settings") or {}).get("verdict") or {}).get("target")
    good = [[p["t"], None if p.get("good") is None else round(100 * p["good"], 2)] for p in pts]
    p50 = [[p["t"], p.get("ttft_p50_ms")] for p in pts]
    p95 = [[p["t"], p.get("ttft_p95_ms")] for p in pts]
    lines: list[dict[str, Any]] = []
    ref = d.get("reference")
    rp = d.get("recovery_point")
    if isinstance(rp, (int, float)):
        lines.append({"xAxis": round(rp - t0, 3), "label": {"formatter": "recovery point", "position": "insideEndTop"},
                      "lineStyle": {"color": "#2e7d32", "width": 2}})
    if isinstance(ref, (int, float)) and isinstance(d.get("rto_s"), (int, float)):
        lines.append({"xAxis": round(ref + d["rto_s"] - t0, 3),
                      "label": {"formatter": f"RTO {d['rto_s']:g} s", "position": "insideStartTop"},
                      "lineStyle": {"color": "#6a1b9a", "type": "dashed"}})
    if isinstance(target, (int, float)):
        lines.append({"yAxis": round(100 * target, 2), "label": {"formatter": f"target {100 * target:g}%"},
                      "lineStyle": {"color": "#c62828", "type": "dashed"}})
    w = (d.get("settings") or {}).get("recovery_window_s")
    sub = (f"each point: the requests sent in the {w:g}-s window starting there (drawn at its start)"
           if isinstance(w, (int, float))
           else "each point: one rolling window") + "; bands: baseline (grey), disturbance (red), recovery (amber)"
    ttr = d.get("time_to_recover_s")
    sub += (f"\ntime to recover {ttr['low']:g}-{ttr['high']:g} s; verdict {d.get('verdict')}" if ttr
            else f"\nno recovery point; verdict {d.get('verdict')}")
    series: list[dict[str, Any]] = [
        {"type": "line", "name": "good fraction (%)", "data": good, "yAxisIndex": 0, "showSymbol": False,
         "connectNulls": False, "itemStyle": {"color": "#2e7d32"},
         "markArea": {"silent": True, "label": {"position": "insideTop", "fontSize": 10}, "data": _phase_areas(d, t0)},
         "markLine": {"symbol": "none", "silent": True, "data": lines}},
        {"type": "line", "name": "TTFT P50 (ms)", "data": p50, "yAxisIndex": 1, "showSymbol": False,
         "itemStyle": {"color": "#1565c0"}},
        {"type": "line", "name": "TTFT P95 (ms)", "data": p95, "yAxisIndex": 1, "showSymbol": False,
         "itemStyle": {"color": "#ef6c00"}},
    ]
    ttfts = [v for _t, v in p50 + p95 if isinstance(v, (int, float))]
    y_lat = latency_axis("TTFT of completed requests (ms)", ttfts or [1.0])
    y = [{"type": "value", "name": "good (%)", "min": 0, "max": 100}, y_lat]
    axis = _time_axis("seconds since the baseline started")
    return Chart(cid, title, _base(title, sub, axis, y, series))


def _ttr(ttr: Any) -> str:
    return "none" if not ttr else f"{ttr['low']:g}-{ttr['high']:g} s"


def drill_html(doc: Mapping) -> str:
    """`servewatch report DRILL.jsonl --html OUT`: the drill document on one page with its recovery chart."""
    d = doc.get("drill") or {}
    ex = d.get("exit") or {}
    synthetic = "input labelled synthetic" if d.get("synthetic") else None
    ri = d.get("records_integrity") or {}
    extra = [str(ri.get("summary"))] if ri.get("state") not in (None, "intact") else []
    extra += [str(x) for x in (ex.get("synthetic"), ex.get("settings")) if x]
    chart = recovery_chart("drill-recovery", doc)
    ttr = d.get("time_to_recover_s")
    dist = d.get("disturbance") or {}
    rows = [[p.get("name"), p.get("step") or "-", p.get("sent"), p.get("good"), p.get("slow"),
             (p.get("failed") or {}).get("total"), p.get("cancelled"), p.get("excluded")]
            for p in [*(d.get("phases") or []), d.get("overall") or {}]]
    body = [f"<h1>servewatch drill: {esc((d.get('target') or {}).get('url'))}</h1>",
            f'<p class="note">disturbance: {esc(dist.get("description"))}</p>',
            banners(synthetic, [], extra + [f"evidence problem: {p}" for p in d.get("evidence_problems") or []]),
            verdict_boxes([("drill: did it recover?", d.get("verdict")),
                           ("baseline", (d.get("baseline") or {}).get("state")),
                           ("recovery phase", (d.get("recovery") or {}).get("state"))]),
            f'<p class="overall">{esc(d.get("reason"))}</p>',
            f"<p>time to recover: {esc(_ttr(ttr))}; RTO {esc(d.get('rto_s'))} s; exit code {esc(ex.get('code'))}</p>",
            "<h2>Phases</h2>",
            table(["phase", "step", "sent", "good", "slow", "failed", "cancelled", "open"], rows),
            "<h2>Recovery chart</h2>"]
    body.append(chart_block(chart))
    for key, name in (("impact", "Impact"), ("server", "Server side"), ("rollback", "Rollback rules (burn rate)"),
                      ("settings", "Settings")):
        if d.get(key):
            body += [f"<h2>{name}</h2>", render_value(d[key])]
    body.append('<details id="raw-json"><summary>The drill document as JSON (the same as --json)</summary>'
                f"<pre>{esc(json.dumps(doc, indent=2, default=str))}</pre></details>")
    return page("servewatch drill" + (" (SYNTHETIC)" if synthetic else ""), "\n".join(body), [chart],
                synthetic=bool(synthetic))


def compare_drills_html(result: Mapping, docs: list[Mapping]) -> str:
    """`compare BASE CAND --html OUT` on two drills: the verdict, its reasons and both recovery charts."""
    c = result.get("compare") or {}
    charts = [recovery_chart(f"cmp-{i}", d, str((c.get(side) or {}).get("label") or side))
              for i, (side, d) in enumerate(zip(("base", "candidate"), docs))]
    rows = [[side, (c.get(side) or {}).get("label"), (c.get(side) or {}).get("verdict"),
             _ttr((c.get(side) or {}).get("time_to_recover_s")), (c.get(side) or {}).get("impact_bad")]
            for side in ("base", "candidate")]
    body = ["<h1>servewatch compare: two drills</h1>",
            banners("input labelled synthetic" if c.get("synthetic") else None, [], []),
            verdict_boxes([("candidate vs base", c.get("verdict"))]),
            "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in c.get("reasons") or []) + "</ul>",
            table(["side", "file", "verdict", "time to recover", "failed or slow"], rows),
            "<h2>Recovery charts</h2>", *[chart_block(ch) for ch in charts]]
    return page("servewatch compare (drills)", "\n".join(body), charts, synthetic=bool(c.get("synthetic")))
