"""One self-contained HTML page: the styles, the tables, the banners and the verdict boxes, the charts' containers
and the inlined chart library (Apache ECharts, ``tui/html/vendor``; its LICENSE and NOTICE beside it).

Nothing on the page is fetched: no external script, stylesheet, font or image (plain links to the docs only); it
opens from ``file://`` and prints to PDF (print styles: charts keep their size, never split across pages; the SVG
renderer prints sharp).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from tui.core.textsafe import script_json, term
from tui.html.charts import Chart, Missing

VENDOR = Path(__file__).resolve().parent / "vendor"
ECHARTS_VERSION = "6.1.0"
WIDE_COLUMNS = 9  # a list of records with more fields than this is shown one row per field

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;max-width:72em;margin:1.5em auto;padding:0 1em;
color:#1a1a1a;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
h3{font-size:1.02em;margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.86em}
th,td{border:1px solid #bbb;padding:.22em .5em;text-align:left;vertical-align:top;overflow-wrap:normal;
word-break:normal;hyphens:none}
.table-wrap{overflow-x:auto;max-width:100%}
details{margin:1.5em 0}details pre{white-space:pre-wrap;font-size:.78em;background:#f7f7f7;padding:.6em}
section.doc p{margin:.4em 0}code{font-size:.92em;background:#f3f3f3;padding:0 .2em}
td code,th code,span.w{white-space:nowrap}
td table{font-size:.95em;margin:.1em 0}
th{background:#eceff1}td.num{text-align:right;font-variant-numeric:tabular-nums}
.banner{border:2px solid #c62828;background:#ffebee;color:#7f0000;padding:.5em .8em;font-weight:bold;margin:.5em 0}
.banner.warn{border-color:#ef6c00;background:#fff3e0;color:#6d3200}
.verdicts{display:flex;gap:.6em;flex-wrap:wrap;margin:.8em 0}
.verdict{flex:1 1 12em;border:2px solid #90a4ae;border-radius:4px;padding:.4em .7em}
.verdict b{display:block;font-size:.8em;text-transform:uppercase;color:#555}
.verdict span{font-size:1.15em;font-weight:bold}
.s-good{border-color:#2e7d32;background:#e8f5e9}.s-bad{border-color:#c62828;background:#ffebee}
.s-warn{border-color:#f9a825;background:#fffde7}.s-na{border-color:#9e9e9e;background:#f5f5f5}
.overall{font-size:1.1em;font-weight:bold;margin:.4em 0}
.chart{width:100%;height:420px;margin:.6em 0 1.4em;break-inside:avoid;page-break-inside:avoid}
.missing{border:1px dashed #9e9e9e;padding:.6em;color:#555;margin:.6em 0 1.4em}
.note{color:#555;font-size:.86em}
ul.plain{margin:.2em 0 .8em}
footer{margin-top:2em;color:#666;font-size:.8em;border-top:1px solid #ddd;padding-top:.5em}
@media print{body{max-width:none;margin:0;font-size:10pt}.chart{width:17cm;height:9.5cm}
h2{break-after:avoid;page-break-after:avoid}table{break-inside:auto}tr{break-inside:avoid}
a{color:inherit;text-decoration:none}}
"""

# The page's one piece of drawing code: ECharts' custom series hands each [x, lo, hi] to this renderItem, which
# returns three line elements (the whisker and its caps) for ECharts to draw; an optional 4th value shifts it by that
# many pixels (base and candidate side by side at one level). A series with ``errorAxis: 'x'`` hands [y, lo, hi]
# instead: a horizontal bar (`select`'s capacity brackets on the capacity axis).
INIT_JS = """
(function(){
function errorBars(params, api){
  var x=api.value(0), a=api.coord([x, api.value(1)]), b=api.coord([x, api.value(2)]), w=5, dx=api.value(3)||0;
  a[0]+=dx; b[0]+=dx;
  var st={stroke: api.visual('color'), lineWidth: 1.5};
  return {type:'group', children:[
    {type:'line', shape:{x1:a[0], y1:a[1], x2:b[0], y2:b[1]}, style:st},
    {type:'line', shape:{x1:a[0]-w, y1:a[1], x2:a[0]+w, y2:a[1]}, style:st},
    {type:'line', shape:{x1:b[0]-w, y1:b[1], x2:b[0]+w, y2:b[1]}, style:st}]};
}
function errorBarsX(params, api){
  var y=api.value(0), a=api.coord([api.value(1), y]), b=api.coord([api.value(2), y]), h=5;
  var st={stroke: api.visual('color'), lineWidth: 1.5};
  return {type:'group', children:[
    {type:'line', shape:{x1:a[0], y1:a[1], x2:b[0], y2:b[1]}, style:st},
    {type:'line', shape:{x1:a[0], y1:a[1]-h, x2:a[0], y2:a[1]+h}, style:st},
    {type:'line', shape:{x1:b[0], y1:b[1]-h, x2:b[0], y2:b[1]+h}, style:st}]};
}
var specs=JSON.parse(document.getElementById('chart-data').textContent), charts=[];
specs.forEach(function(s){
  var el=document.getElementById(s.id);
  (s.option.series||[]).forEach(function(se){ if(se.type==='custom'){ se.renderItem=se.errorAxis==='x'?errorBarsX:errorBars; } });
  var c=echarts.init(el, null, {renderer:'svg'});
  c.setOption(s.option);
  el.setAttribute('data-rendered', '1');
  charts.push(c);
});
function resize(){ charts.forEach(function(c){ c.resize(); }); }
window.addEventListener('resize', resize);
window.addEventListener('beforeprint', resize);
window.addEventListener('afterprint', resize);
document.body.setAttribute('data-charts-ready', String(charts.length));
})();
"""


@lru_cache(maxsize=1)
def echarts_js() -> str:
    """The vendored ECharts (dist/echarts.min.js), made safe to inline in a <script> element."""
    return (VENDOR / "echarts.min.js").read_text(encoding="utf-8").replace("</script", "<\\/script")


def esc(v: Any) -> str:
    """HTML text of an outside value: escaped, its control and format characters (bidi overrides) shown visibly."""
    return html.escape("" if v is None else term(v, keep_newlines=True))


def cell(v: Any) -> str:
    """A table cell: numbers right-aligned (floats to 4 significant digits), None as N/A, lists joined."""
    if v is None:
        return '<td class="na">N/A</td>'
    if isinstance(v, bool):
        return f"<td>{'yes' if v else 'no'}</td>"
    if isinstance(v, int):
        return f'<td class="num">{v:,}</td>'
    if isinstance(v, float):
        return f'<td class="num">{v:.4g}</td>'
    if isinstance(v, (list, tuple)):
        if all(not isinstance(x, (dict, list, tuple)) for x in v):
            return f"<td>{esc(', '.join('N/A' if x is None else (f'{x:.4g}' if isinstance(x, float) else str(x)) for x in v))}</td>"
        return f"<td>{render_value(v)}</td>"
    if isinstance(v, Mapping):
        return f"<td>{render_value(v)}</td>"
    return f"<td>{esc(v)}</td>"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], raw_cells: bool = False) -> str:
    """An HTML table; ``raw_cells``: the cells are already <td> markup."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(c if raw_cells else cell(c) for c in r) + "</tr>" for r in rows)
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def human(key: str) -> str:
    return str(key).replace("_", " ")


def render_value(v: Any, depth: int = 0) -> str:
    """Any JSON value as HTML: a dict as a two-column table, a list of dicts as a table with their keys as
    columns, a list of scalars as a list, a scalar as text (so a section this page has no layout for still reads)."""
    if isinstance(v, Mapping):
        if not v:
            return '<span class="na">none</span>'
        rows = "".join(f"<tr><th>{esc(human(k))}</th>{cell(x) if depth < 3 else '<td>' + esc(x) + '</td>'}</tr>"
                       for k, x in v.items())
        return f"<table><tbody>{rows}</tbody></table>"
    if isinstance(v, (list, tuple)):
        if not v:
            return '<span class="na">none</span>'
        if all(isinstance(x, Mapping) for x in v):
            keys: list[str] = []
            for x in v:
                keys += [k for k in x if k not in keys]
            if len(keys) > WIDE_COLUMNS:  # many fields, few items (a run's load configuration): one row per field
                head = [""] + [str(x.get("source") or x.get("name") or i + 1) for i, x in enumerate(v)]
                body = "".join(f"<tr><th>{esc(human(k))}</th>" + "".join(cell(x.get(k)) for x in v) + "</tr>"
                               for k in keys)
                return ("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"
                        + body + "</tbody></table>")
            return table([human(k) for k in keys], [[x.get(k) for k in keys] for x in v])
        return '<ul class="plain">' + "".join(f"<li>{render_value(x, depth + 1)}</li>" for x in v) + "</ul>"
    if v is None:
        return '<span class="na">N/A</span>'
    if isinstance(v, float):
        return esc(f"{v:.4g}")
    return esc(v)


def severity_class(state: Any) -> str:
    s = str(state or "").upper()
    if s in ("PASS", "FEASIBLE", "FITS", "READY", "NOT WORSE") or s.startswith("READY"):
        return "s-good"
    if s in ("FAIL", "INFEASIBLE", "DOES NOT FIT", "WORSE") or s.startswith("NOT READY") or "FAIL" in s:
        return "s-bad"
    if s in ("UNDECIDED", "INSUFFICIENT_WINDOW", "NOT ENOUGH EVIDENCE") or "INSUFFICIENT" in s:
        return "s-warn"
    return "s-na"


def verdict_boxes(items: Sequence[tuple[str, Any]]) -> str:
    """The verdict state of each kind of evidence, side by side (never merged)."""
    out = []
    for label, state in items:
        text = "unknown" if state in (None, "") else str(state).replace("_", " ")
        out.append(f'<div class="verdict {severity_class(state)}"><b>{esc(label)}</b><span>{esc(text)}</span></div>')
    return '<div class="verdicts">' + "".join(out) + "</div>"


def banners(synthetic: str | None = None, weak: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
    out = []
    if synthetic:
        text = str(synthetic)
        if text[:9].upper() == "SYNTHETIC":  # the label once per place: never "SYNTHETIC: SYNTHETIC, ..."
            text = text[9:].lstrip(" :,.-") or "input labelled synthetic"
        out.append(f'<p class="banner" id="synthetic-banner">SYNTHETIC: {esc(text)}</p>')
    if weak:
        out.append('<p class="banner warn" id="grade-banner">not acceptance-grade: settings below a floor: '
                   f"{esc(', '.join(weak))}</p>")
    out += [f'<p class="banner warn">{esc(x)}</p>' for x in extra if x]
    return "".join(out)


def chart_block(c: Chart | Missing) -> str:
    if isinstance(c, Missing):
        return (f'<h3>{esc(c.title)}</h3><p class="missing" id="{esc(c.id)}-missing">{esc(c.why)}</p>')
    note = f'<p class="note">{esc(c.note)}</p>' if c.note else ""
    return f'<div class="chart" id="{esc(c.id)}" role="img" aria-label="{esc(c.title)}"></div>{note}'


def _labelled(option: dict[str, Any]) -> dict[str, Any]:
    """``option`` with "SYNTHETIC: " before its title (a copy: the chart objects are not changed)."""
    out = dict(option)
    t = out.get("title")
    if isinstance(t, dict):
        out["title"] = {**t, "text": "SYNTHETIC: " + str(t.get("text") or "")}
    return out


def _json_for_script(obj: Any) -> str:
    """The chart data inside its <script> element: still valid JSON (``JSON.parse`` reads it) whatever a GPU name
    or a model id holds (``<!--``, ``</script>``: ``<`` ``>`` ``&`` as ``\\u`` escapes; tui.core.textsafe)."""
    return script_json(obj, separators=(",", ":"), allow_nan=False, default=str)  # ASCII: no raw C1 or bidi in the file


def page(title: str, body: str, charts: Sequence[Chart | Missing], synthetic: bool = False) -> str:
    """The whole page: ``body`` (already HTML) with the charts' data, the library and the start-up script.
    ``synthetic``: every chart's title says SYNTHETIC too (a chart copied or printed alone still says it)."""
    specs = [{"id": c.id, "option": _labelled(c.option) if synthetic else c.option}
             for c in charts if isinstance(c, Chart)]
    footer = (f'<footer>Charts drawn by Apache ECharts {ECHARTS_VERSION} (Apache License 2.0; its LICENSE and NOTICE '
              'ship in the servewatch package, tui/html/vendor), inlined in this file: the page fetches nothing. '
              'How to read it: docs/acceptance.md and docs/statistics.md in the servewatch source.</footer>')
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head><body>",
        body, footer,
        f'<script type="application/json" id="chart-data">{_json_for_script(specs)}</script>',
        f"<script>{echarts_js()}</script>", f"<script>{INIT_JS}</script>",
        "</body></html>", ""])
