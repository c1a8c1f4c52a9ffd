"""ECharts options (plain dicts, serialised to JSON in the page) from ``tui.core.chartdata``'s data.

Each builder returns a :class:`Chart` (its id, its option) or a :class:`Missing` (the sentence said in its place:
"not recorded in this file"), never an invented series. Error bars are ECharts' own ``custom`` series, drawn by
the page's one ``renderItem`` (``errorBars`` in :mod:`tui.html.page`); targets and SLOs are ``markLine``; the
verdict's state band is ``markArea``. Every chart names its axes with units and says when it draws a sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tui.core.defaults as defaults
from tui.core.stats import labels

STATE_COLOURS = {"PASS": "#2e7d32", "FAIL": "#c62828", "UNDECIDED": "#f9a825", "INSUFFICIENT_WINDOW": "#9e9e9e"}
STATE_BANDS = {"PASS": "rgba(46,125,50,0.13)", "FAIL": "rgba(198,40,40,0.13)", "UNDECIDED": "rgba(249,168,37,0.16)",
               "INSUFFICIENT_WINDOW": "rgba(158,158,158,0.16)"}
Q_COLOURS = {"P50": "#1565c0", "P95": "#ef6c00", "P99": "#6a1b9a"}
#: the colours of the other percentiles --percentiles may ask for (P90, P99.9, ...), in order
MORE_COLOURS = ("#2e7d32", "#ad1457", "#00838f", "#5d4037", "#827717", "#37474f", "#4527a0", "#d84315", "#00695c")


def _colour(q: str) -> str:
    return Q_COLOURS.get(q) or MORE_COLOURS[sum(map(ord, q)) % len(MORE_COLOURS)]


def _shown(qs: Mapping[str, Any]) -> list[str]:
    """The percentiles shown (``--percentiles``, default P50, P95, P99) that the chart's data holds."""
    return [q for q in labels() if q in qs]
BASE, CAND = "#607d8b", "#1565c0"


@dataclass
class Chart:
    id: str
    title: str
    option: dict[str, Any]
    note: str = ""


@dataclass
class Missing:
    id: str
    title: str
    why: str
    option: dict[str, Any] = field(default_factory=dict)


def _title(text: str, sub: str = "") -> dict[str, Any]:
    return {"text": text, "subtext": sub, "left": "center", "textStyle": {"fontSize": 14},
            "subtextStyle": {"fontSize": 11, "color": "#444", "lineHeight": 15}, "itemGap": 6}


def _base(title: str, sub: str, x_axis: dict, y_axis: Any, series: list, legend: bool = True) -> dict[str, Any]:
    for se in series:  # a horizontal line's label sits inside the plot, above the line's end (never clipped)
        for m in (se.get("markLine") or {}).get("data", ()):
            if "yAxis" in m:
                m.setdefault("label", {}).setdefault("position", "insideEndTop")
    return {"animation": False, "title": _title(title, sub), "tooltip": {"trigger": "item"},
            "legend": {"bottom": 0, "type": "scroll"} if legend else {"show": False},
            "grid": {"left": 70, "right": 70, "top": 40 + 15 * (1 + sub.count("\n")) + 25, "bottom": 70}, "xAxis": x_axis, "yAxis": y_axis,
            "series": series}


def _level_axis(levels: Mapping, unit: str, extra: Sequence[float] = ()) -> tuple[dict, list]:
    """A log2 value axis when every level is a positive number (then the candidate can be drawn where it is),
    else a category axis; and the x of each row."""
    name = f"load level ({unit})"
    if levels["numeric"]:
        xs = [x for x in list(levels["x"]) + [e for e in extra if e] if x]
        lo, hi = 2.0 ** (math.floor(math.log2(min(xs))) - 1), 2.0 ** (math.ceil(math.log2(max(xs))) + 1)
        return ({"type": "log", "logBase": 2, "name": name, "nameLocation": "middle", "nameGap": 28,
                 "min": lo, "max": hi, "axisLabel": {"formatter": "{value}"}},
                list(levels["x"]))
    return ({"type": "category", "name": name, "nameLocation": "middle", "nameGap": 28, "data": levels["labels"]},
            list(range(len(levels["labels"]))))


def _fmt(v: float | None, spec: str = "{:.1f}") -> str:
    return "N/A" if v is None else spec.format(v)


def good_fraction(cid: str, data: Mapping) -> Chart | Missing:
    """Per level the good fraction with its 95% interval, the target line, the memory-only candidate and the
    measured capacity: the central lesson in one picture."""
    lv, marks, target = data["levels"], data["marks"], data["target"]
    title = "Good fraction per level, with its 95% interval, against the target"
    if not lv["labels"]:
        return Missing(cid, title, "no measured level in this file")
    cand, cap = marks["candidate"], marks["measured"]
    axis, xs = _level_axis(lv, marks["unit"], [cand] if cand else [])
    pts, bars = [], []
    for x, g in zip(xs, lv["good"]):
        if g["fraction"] is None:
            continue
        colour = STATE_COLOURS.get(g["state"] or "", "#455a64")
        pts.append({"value": [x, round(g["fraction"], 5)], "itemStyle": {"color": colour},
                    "name": f"{g['state']}: {g['good']}/{g['n']} good"})
        if g["lo"] is not None and g["hi"] is not None:
            bars.append([x, round(g["lo"], 5), round(g["hi"], 5)])
    lines: list[dict] = [{"yAxis": target, "name": "target", "label": {"formatter": f"target {target:.0%}"},
                          "lineStyle": {"color": "#c62828", "type": "dashed"}}]
    sub = []
    if lv["numeric"]:
        if cand is not None:
            lines.append({"xAxis": cand, "label": {"formatter": f"memory-only candidate {cand:g}"},
                          "lineStyle": {"color": "#6a1b9a", "type": "dashed"}})
        if cap is not None:
            lines.append({"xAxis": cap, "label": {"formatter": f"measured capacity {cap:g}"},
                          "lineStyle": {"color": "#2e7d32", "width": 2}})
    sub.append(f"memory-only candidate: {_fmt(cand, '{:g}')}; measured capacity: "
               + ("none (no level PASSes)" if cap is None else f"{cap:g}"))
    sub.append("dot colour: the level's verdict (green PASS, red FAIL, amber UNDECIDED, grey INSUFFICIENT WINDOW)")
    series = [{"type": "scatter", "name": "good fraction", "data": pts, "symbolSize": 12, "z": 3,
               "markLine": {"symbol": "none", "data": lines, "silent": True}},
              {"type": "custom", "name": "95% interval (Wilson, descriptive)", "data": bars,
               "itemStyle": {"color": "#37474f"}, "encode": {"x": 0, "y": [1, 2]}, "z": 1}]
    y = {"type": "value", "name": "good fraction", "min": 0, "max": 1, "axisLabel": {"formatter": "{value}"}}
    return Chart(cid, title, _base(title, "\n".join(sub), axis, y, series))


def percentiles(cid: str, data: Mapping, key: str = "ttft") -> Chart | Missing:
    """P50/P95/P99 of one latency metric per level, against its SLO (hollow markers: too few requests for the
    percentile to be supported)."""
    lv = data["levels"]
    if key == "ttft":
        qs: Mapping[str, Any] = lv["ttft"]
        name, slo = "TTFT (time to first token)", data["slos"]["ttft_ms"]
    else:
        block = lv["latency"].get(key)
        if block is None:
            return Missing(cid, key, "not recorded in this file")
        qs, name, slo = block, str(block["title"]), data["slos"].get(block["slo_key"])
    shown = _shown(qs)
    title = f"{name} {' / '.join(shown)} per level, against the SLO"
    if not any(v is not None for q in shown for v, _ok in qs[q]):
        return Missing(cid, title, "not recorded in this file")
    axis, xs = _level_axis(lv, data["marks"]["unit"], [data["marks"]["candidate"]] if lv["numeric"] else [])
    series: list[dict[str, Any]] = []
    for q in shown:
        pts = [{"value": [x, round(v, 2)], "symbol": "circle" if ok else "emptyCircle"}
               for x, (v, ok) in zip(xs, qs[q]) if v is not None]
        series.append({"type": "line", "name": q, "data": pts, "symbolSize": 8, "itemStyle": {"color": _colour(q)}})
    sub = "hollow marker: too few requests for that percentile (not supported)"
    if slo is not None:
        series[0]["markLine"] = {"symbol": "none", "silent": True, "data": [
            {"yAxis": slo, "label": {"formatter": f"SLO {slo:g} ms"}, "lineStyle": {"color": "#c62828", "type": "dashed"}}]}
    else:
        sub += "; no SLO on this metric"
    y = latency_axis("milliseconds", [v for q in shown for v, _ok in qs[q]]
                     + ([slo] if slo is not None else []))
    return Chart(cid, title, _base(title, sub, axis, y, series))


def throughput(cid: str, data: Mapping) -> Chart | Missing:
    lv = data["levels"]
    title = "Goodput and throughput per level"
    if not lv["labels"]:
        return Missing(cid, title, "no measured level in this file")
    axis = {"type": "category", "name": f"load level ({data['marks']['unit']})", "nameLocation": "middle",
            "nameGap": 28, "data": lv["labels"]}

    def r(v: float | None, d: int = 3) -> float | None:
        return None if v is None else round(v, d)

    series = [
        {"type": "bar", "name": "goodput (good requests/s)", "data": [r(v) for v in lv["goodput_rps"]],
         "itemStyle": {"color": "#2e7d32"}},
        {"type": "bar", "name": "throughput (requests/s)", "data": [r(v) for v in lv["throughput_rps"]],
         "itemStyle": {"color": "#90a4ae"}},
        {"type": "line", "name": "good output tokens/s", "yAxisIndex": 1, "data": [r(v, 1) for v in lv["goodput_tok_s"]],
         "itemStyle": {"color": "#1565c0"}},
        {"type": "line", "name": "output tokens/s", "yAxisIndex": 1, "data": [r(v, 1) for v in lv["output_tok_s"]],
         "itemStyle": {"color": "#90caf9"}, "lineStyle": {"type": "dashed"}},
    ]
    y = [{"type": "value", "name": "requests/s", "min": 0}, {"type": "value", "name": "tokens/s", "min": 0}]
    return Chart(cid, title, _base(title, "bars: requests per second (left); lines: output tokens per second (right)",
                                   axis, y, series))


def _time_axis(name: str = "seconds since the first measured request") -> dict:
    return {"type": "value", "name": name, "nameLocation": "middle", "nameGap": 28}


def judged(cid: str, data: Mapping) -> Chart | Missing:
    js = data.get("judged")
    title = "TTFT of each request over time at the judged level, with the verdict's state"
    if not js or not (js["points"] or js["failures"]):
        return Missing(cid, title, "no measured request at the judged level in this file")
    title = f"TTFT of each request over time at level {js['label']} (judged), with the verdict's state"
    slo = data["slos"]["ttft_ms"]
    good = [[p[0], p[1]] for p in js["points"] if p[2] == "good" and p[1] is not None]
    slow = [[p[0], p[1] if p[1] is not None else 0] for p in js["points"] if p[2] != "good"]
    fails = [[f[0], f[1] if f[1] is not None else 0] for f in js["failures"]]
    areas = [[{"xAxis": b["from"], "name": str(b["state"]).replace("_", " "),
               "itemStyle": {"color": STATE_BANDS.get(b["state"], "rgba(0,0,0,0.05)")}}, {"xAxis": b["to"]}]
             for b in js["bands"]]
    sub = (f"{js['shown']:,} of {js['seen']:,} requests drawn (an evenly spaced sample)" if js["sampled"]
           else f"all {js['seen']:,} measured requests")
    distinct = js.get("distinct")
    if isinstance(distinct, int) and distinct < js["shown"]:
        sub += f" ({distinct:,} distinct points: requests with the same time and TTFT overlap)"
    sub += "; each at its end, when its outcome was known"
    sub += "; band: the verdict's state from its timeline (grey INSUFFICIENT WINDOW, amber UNDECIDED, green PASS, red FAIL)"
    if js["timeline_omitted"]:
        sub += f"; {js['timeline_omitted']} state changes in the middle of the run not kept"
    series: list[dict] = [
        {"type": "scatter", "name": "good", "data": good, "symbolSize": 4, "itemStyle": {"color": "#2e7d32"},
         "markArea": {"silent": True, "label": {"position": "insideTop", "fontSize": 10}, "data": areas}},
        {"type": "scatter", "name": "slow (completed, missed an SLO)", "data": slow, "symbolSize": 5,
         "itemStyle": {"color": "#ef6c00"}},
        {"type": "scatter", "name": "failed (no first token: drawn at 0 ms)", "data": fails, "symbol": "triangle",
         "symbolSize": 9, "itemStyle": {"color": "#c62828"}},
    ]
    if slo is not None:
        series[0]["markLine"] = {"symbol": "none", "silent": True, "data": [
            {"yAxis": slo, "label": {"formatter": f"SLO {slo:g} ms"}, "lineStyle": {"color": "#c62828", "type": "dashed"}}]}
    values = [p[1] for p in good + slow] + [slo] if slo is not None else [p[1] for p in good + slow]
    y = latency_axis("TTFT (ms)", values)
    if y["type"] == "log":  # a failure has no TTFT: drawn at the axis' bottom, not at 0 (no 0 on a log axis)
        floor = y["min"]
        for f in fails:
            f[1] = f[1] if f[1] else floor
        series[2]["name"] = "failed (no first token: drawn at the bottom)"
    xs = ([p[0] for p in js["points"]] + [f[0] for f in js["failures"]] + [b["from"] for b in js["bands"]]
          + [b["to"] for b in js["bands"]])
    axis = _time_axis(f"seconds since level {js['label']}'s first request was sent")
    axis["min"] = math.floor(min(xs))
    axis["max"] = math.ceil(max(xs))  # the verdict's last band (a final FAIL) inside the axis
    return Chart(cid, title, _base(title, sub, axis, y, series))


def latency_axis(name: str, values: Sequence[Any]) -> dict[str, Any]:
    """The y axis of a latency chart: linear from 0, or logarithmic (said in its name) when the positive values span
    more than 10x, so an SLO line and the fast levels are not squeezed into the bottom 5% by the slowest."""
    pos = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
           and math.isfinite(v)]
    if pos and max(pos) > 10.0 * min(pos):
        low = 10.0 ** math.floor(math.log10(min(pos)))
        return {"type": "log", "name": f"{name}, log scale", "min": low, "logBase": 10}
    return {"type": "value", "name": name, "min": 0}


def _step_lines(steps: Sequence[Mapping]) -> dict:
    return {"symbol": "none", "silent": True, "lineStyle": {"color": "#999", "type": "dotted"},
            "label": {"formatter": "{b}", "position": "insideEndTop", "fontSize": 10},
            "data": [{"xAxis": s["t"], "name": f"level {s['label']}"} for s in steps[:60]]}


def queue(cid: str, data: Mapping) -> Chart | Missing:
    qs = data.get("queue")
    title = "Server queue over time"
    if not qs or not (qs["recorded"] or qs["in_flight_recorded"]):
        return Missing(cid, title, "queue depth: not recorded in this file (no server queue samples)")
    series: list[dict[str, Any]] = []
    for key, name, colour in (("waiting", "waiting (server queue)", "#c62828"), ("running", "running", "#1565c0"),
                              ("in_flight", "client requests in flight", "#90a4ae")):
        if any(v is not None for v in qs[key]):
            series.append({"type": "line", "name": name, "showSymbol": False, "itemStyle": {"color": colour},
                           "data": [[t, v] for t, v in zip(qs["t"], qs[key]) if v is not None]})
    series[0]["markLine"] = _step_lines(qs["steps"])
    sub = (f"{len(qs['t']):,} of {qs['seen']:,} samples drawn (evenly spaced)" if qs["sampled"]
           else f"all {qs['seen']:,} queue samples") + "; dotted lines: where each level began"
    return Chart(cid, title, _base(title, sub, _time_axis("seconds since the run's start"),
                                   {"type": "value", "name": "requests", "min": 0}, series))


def memory(cid: str, data: Mapping) -> Chart | Missing:
    ms = data.get("memory")
    title = "GPU memory and engine KV memory over time, against the budget's predicted ceiling"
    if not ms or not (ms["devices"] or ms["kv"]):
        return Missing(cid, title, "GPU memory: not recorded in this file (no NVML samples, no engine KV usage)")
    series: list[dict] = []
    lines: list[dict] = []
    unit = "GiB"
    for d in ms["devices"]:
        series.append({"type": "line", "name": f"GPU{d['device']} {d['name'] or ''} used (NVML)".strip(),
                       "showSymbol": False, "data": [[t, v] for t, v in zip(d["t"], d["used_gib"])]})
        if d["total_gib"]:
            lines.append({"yAxis": d["total_gib"], "label": {"formatter": f"GPU{d['device']} total {d['total_gib']:.1f} GiB"},
                          "lineStyle": {"color": "#555"}})
    kv = ms["kv"]
    if kv:
        if kv["unit"] == "fraction" and not ms["devices"]:
            unit = "fraction of the engine's KV space"
        if kv["unit"] == "GiB" or not ms["devices"]:
            series.append({"type": "line", "name": "engine KV in use" + (" (GiB)" if kv["unit"] == "GiB" else ""),
                           "showSymbol": False, "itemStyle": {"color": "#6a1b9a"},
                           "data": [[t, v] for t, v in zip(kv["t"], kv["used"])]})
    sub = []
    if ms["ceiling_gib"] is not None and ms["devices"]:
        lines.append({"yAxis": round(ms["ceiling_gib"], 3), "label": {"formatter": f"predicted ceiling {ms['ceiling_gib']:.2f} GiB"},
                      "lineStyle": {"color": "#c62828", "type": "dashed"}})
    elif ms["devices"]:
        sub.append("predicted ceiling: unknown (no budget with a GPU size)")
    if kv and kv["unit"] == "GiB" and ms["kv_ceiling_gib"] is not None:
        lines.append({"yAxis": round(ms["kv_ceiling_gib"], 3), "label": {"formatter": f"predicted KV ceiling {ms['kv_ceiling_gib']:.2f} GiB"},
                      "lineStyle": {"color": "#6a1b9a", "type": "dashed"}})
    elif kv:
        sub.append("predicted KV ceiling: unknown" if ms["kv_ceiling_gib"] is None or kv["unit"] != "GiB"
                   else "")
    if ms["sampled"]:
        sub.append("an evenly spaced sample of the samples")
    if not ms["devices"]:
        sub.append("NVML: not recorded")
    if series:
        series[0]["markLine"] = {"symbol": "none", "silent": True, "data": lines}
    return Chart(cid, title, _base(title, "; ".join(s for s in sub if s), _time_axis("seconds since the run's start"),
                                   {"type": "value", "name": unit, "min": 0}, series))


def report_charts(data: Mapping, prefix: str = "c") -> list[Chart | Missing]:
    """The report's and the acceptance page's charts, in reading order."""
    out = [good_fraction(f"{prefix}-good", data), percentiles(f"{prefix}-ttft", data, "ttft")]
    for key in data["levels"]["latency"]:  # the SLO table's kinds after TTFT, in its order (tui.core.chartdata)
            out.append(percentiles(f"{prefix}-{key}", data, key))
    out += [throughput(f"{prefix}-goodput", data), judged(f"{prefix}-judged", data), queue(f"{prefix}-queue", data),
            memory(f"{prefix}-memory", data)]
    return out


# ------------------------------------------------------------------------------------------------ compare

def _pair_axis(cl: Mapping) -> dict:
    return {"type": "category", "name": "load level", "nameLocation": "middle", "nameGap": 28, "data": cl["labels"]}


def compare_good(cid: str, cl: Mapping) -> Chart | Missing:
    title = "Good fraction per matched level, base and candidate, with 95% intervals"
    if not cl["labels"]:
        return Missing(cid, title, "no level matched between the two runs")
    series: list[dict] = []
    for side, name, colour, off in (("base", "base", BASE, -9), ("cand", "candidate", CAND, 9)):
        g = cl[side]["good"]
        series.append({"type": "scatter", "name": name, "itemStyle": {"color": colour}, "symbolSize": 10,
                       "symbolOffset": [off, 0], "z": 3,
                       "data": [[i, round(x["fraction"], 5)] for i, x in enumerate(g) if x["fraction"] is not None]})
        series.append({"type": "custom", "name": f"{name} 95% interval", "itemStyle": {"color": colour},
                       "encode": {"x": 0, "y": [1, 2]},
                       "data": [[i, round(x["lo"], 5), round(x["hi"], 5), off] for i, x in enumerate(g)
                                if x["lo"] is not None and x["hi"] is not None]})
    sub = "per level: " + ", ".join(f"{lab}: {v}" for lab, v in zip(cl["labels"], cl["verdicts"]))
    return Chart(cid, title, _base(title, sub, _pair_axis(cl), {"type": "value", "name": "good fraction", "min": 0,
                                                                 "max": 1}, series))


def compare_ttft(cid: str, cl: Mapping, slo: float | None) -> Chart | Missing:
    shown = _shown(cl["base"]["ttft"]) if cl["labels"] else ["P50", "P95", "P99"]
    title = f"TTFT {' / '.join(shown)} per matched level: base (dashed) and candidate"
    if not cl["labels"]:
        return Missing(cid, title, "no level matched between the two runs")
    series: list[dict] = []
    for side, dash in (("base", "dashed"), ("cand", "solid")):
        for q in shown:
            series.append({"type": "line", "name": f"{'base' if side == 'base' else 'candidate'} {q}",
                           "lineStyle": {"type": dash}, "itemStyle": {"color": _colour(q)},
                           "data": [None if v is None else {"value": round(v, 2), "symbol": "circle" if ok else "emptyCircle"}
                                    for v, ok in cl[side]["ttft"][q]]})
    if slo is not None:
        series[0]["markLine"] = {"symbol": "none", "silent": True, "data": [
            {"yAxis": slo, "label": {"formatter": f"SLO {slo:g} ms"}, "lineStyle": {"color": "#c62828", "type": "dashed"}}]}
    values = [v for side in ("base", "cand") for q in shown for v, _ok in cl[side]["ttft"][q]]
    y = latency_axis("milliseconds", values + ([slo] if slo is not None else []))
    return Chart(cid, title, _base(title, "hollow marker: too few requests for that percentile", _pair_axis(cl),
                                   y, series))


def compare_goodput(cid: str, cl: Mapping) -> Chart | Missing:
    title = "Goodput per matched level: base and candidate"
    if not cl["labels"]:
        return Missing(cid, title, "no level matched between the two runs")
    series = [{"type": "bar", "name": name, "itemStyle": {"color": colour},
               "data": [None if v is None else round(v, 3) for v in cl[side]["goodput_rps"]]}
              for side, name, colour in (("base", "base", BASE), ("cand", "candidate", CAND))]
    return Chart(cid, title, _base(title, "good requests per second", _pair_axis(cl),
                                   {"type": "value", "name": "good requests/s", "min": 0}, series))


def compare_cdf(cid: str, cd: Mapping | None, slo: float | None) -> Chart | Missing:
    title = "TTFT distribution (CDF) at the judged level: base and candidate"
    if not cd or not (cd["base"] or cd["cand"]):
        return Missing(cid, title, "no completed request at a matched level")
    title = f"TTFT distribution (CDF) at level {cd['label']} ({cd['why']}): base and candidate"
    series: list[dict] = [
        {"type": "line", "name": f"base (n={cd['base_n']:,})", "showSymbol": False, "step": "end",
         "itemStyle": {"color": BASE}, "lineStyle": {"type": "dashed"}, "data": cd["base"]},
        {"type": "line", "name": f"candidate (n={cd['cand_n']:,})", "showSymbol": False, "step": "end",
         "itemStyle": {"color": CAND}, "data": cd["cand"]}]
    if slo is not None:
        series[0]["markLine"] = {"symbol": "none", "silent": True, "data": [
            {"xAxis": slo, "label": {"formatter": f"SLO {slo:g} ms"}, "lineStyle": {"color": "#c62828", "type": "dashed"}}]}
    sub = f"completed requests; drawn through at most {defaults.CHART_CDF_POINTS} quantiles per run"
    x = latency_axis("TTFT (ms)", [pt[0] for side in ("base", "cand") for pt in cd[side]]
                     + ([slo] if slo is not None else []))
    x.update(nameLocation="middle", nameGap=28)
    return Chart(cid, title, _base(title, sub, x,
                                   {"type": "value", "name": "fraction of requests <= TTFT", "min": 0, "max": 1}, series))


def compare_charts(cl: Mapping, cd: Mapping | None, slo: float | None) -> list[Chart | Missing]:
    return [compare_good("k-good", cl), compare_ttft("k-ttft", cl, slo), compare_goodput("k-goodput", cl),
            compare_cdf("k-cdf", cd, slo)]
