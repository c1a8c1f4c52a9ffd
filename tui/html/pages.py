"""The three pages: `report --html`, `accept` (acceptance.html) and `compare --html`, each from the JSON document
its command already built (``build_report``, ``build_acceptance``, ``tui.core.compare.compare``) and the chart data
``tui.core.chartdata`` computed. Tables are the documents' own data, not their markdown."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import tui.html.charts as C
from tui.core.acceptance.document import AcceptanceDoc
from tui.core.chartdata import ChartBundle, CompareCdf, CompareLevels
from tui.core.compare_doc import CompareDoc
from tui.core.report_doc import ReportDoc
from tui.core.stats import INSUFFICIENT_MARK, insufficient_legend, labels
from tui.html.markdown import md_to_html
from tui.html.page import banners, chart_block, esc, human, page, render_value, table, verdict_boxes


def _pct(v: Any) -> str:
    return "N/A" if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.1%}"


def _ms(p: Any) -> str:
    if not isinstance(p, Mapping):
        return "N/A"
    v = p.get("value", p.get("value_ms"))
    if not isinstance(v, (int, float)):
        return "N/A"
    return f"{v:.0f}" + ("" if p.get("supported") else INSUFFICIENT_MARK)  # the one mark (tui.core.stats)


def _interval(row: Mapping) -> str:
    iv = row.get("wilson_95", row.get("wilson_95_descriptive"))
    if not iv or iv[0] is None:
        return "N/A"
    return f"{iv[0]:.1%} to {iv[1]:.1%}"


def _rate(v: Any) -> str:
    return "N/A" if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.3g}"


def levels_table(rows: Sequence[Mapping], with_source: bool = False) -> str:
    header = (["source"] if with_source else []) + [
        "level", "round", "mode", "verdict", "requests", "good", "good fraction", "95% interval", *(f"TTFT {q} ms" for q in labels()),
        "goodput req/s", "throughput req/s", "failed", "slow", "peak waiting",
        "delivered"]
    out = []
    for r in rows:
        tt = r.get("ttft_ms")
        tt = tt if isinstance(tt, Mapping) else {}
        out.append(([r.get("source")] if with_source else []) + [
            r.get("level"), r.get("round"), r.get("mode"), r.get("verdict"), r.get("n"), r.get("good"),
            _pct(r.get("good_fraction")), _interval(r), *(_ms(tt.get(q)) for q in labels()),
            _rate(r.get("goodput_rps", r.get("goodput_per_s"))), _rate(r.get("throughput_rps", r.get("req_per_s"))),
            r.get("failed"), r.get("slow"), r.get("max_waiting"), r.get("delivered")])
    return table(header, out) + f'<p class="note">{esc(insufficient_legend())}</p>'


def _charts_html(charts: Sequence[C.Chart | C.Missing]) -> str:
    return "".join(chart_block(c) for c in charts)


def _list(items: Sequence[Any]) -> str:
    items = [x for x in items or () if x]
    return "" if not items else '<ul class="plain">' + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>"


# ------------------------------------------------------------------------------------------------ report

def integrity_lines(items: Any) -> list[str]:
    """One banner line per record file whose digest chain or signature does not hold (``records_integrity`` of
    `report` (one block), `accept` (a list with ``source``) or `compare` ({"base": ..., "candidate": ...})):
    a record file is a claim, and a reviewer reads that first."""
    if isinstance(items, Mapping) and "state" in items:
        items = [items]
    elif isinstance(items, Mapping):
        items = [{"source": k, **v} for k, v in items.items() if isinstance(v, Mapping)]
    out = []
    for it in items or ():
        if isinstance(it, Mapping) and (it.get("state") in ("broken", "partial") or it.get("signature") == "failed"):
            who = f"{it['source']}: " if it.get("source") else ""
            out.append(f"{who}{it.get('summary') or 'records integrity ' + str(it.get('state'))}")
    return out


def report_html(rep: ReportDoc, data: ChartBundle) -> str:
    """`servewatch report FILE --html OUT`: ``rep`` is the report's JSON document (``--json``), ``data`` the
    ``tui.core.chartdata.report_bundle``."""
    conc = rep.get("conclusion") or {}
    judged: Mapping[str, Any] = rep.get("judged") or {}
    settings = rep.get("settings") or {}
    ex: Mapping[str, Any] = rep.get("exit") or {}
    prov = (rep.get("provenance") or {}).get("text")
    synthetic = (prov or "input labelled synthetic") if rep.get("synthetic") else None
    state = (rep.get("measured") or {}).get("verdict", {}).get("state") if isinstance(
        (rep.get("measured") or {}).get("verdict"), Mapping) else judged.get("state")
    weak = settings.get("not_acceptance_grade") or []
    budget = conc.get("budget") or (rep.get("budget_view") or {}).get("state")
    charts = C.report_charts(data)
    body = [f"<h1>servewatch report: {esc(rep.get('source'))}</h1>",
            f'<p class="note">data from: {esc(prov)}</p>',
            banners(synthetic, weak, integrity_lines(rep.get("records_integrity"))
                    + ([str(ex["synthetic"])] if ex.get("synthetic") else [])
                    + _settings_lines(rep.get("verdict_settings"))),
            verdict_boxes([("budget: does it fit?", budget), ("load: does it finish in time?", state),
                           ("quality: are answers usable?", conc.get("quality"))]),
            f'<p class="overall">{esc(judged.get("text"))}</p>',
            f'<p>SLO: {esc((rep.get("slo") or {}).get("text"))}; target {_pct((rep.get("slo") or {}).get("target"))} '
            f'good; exit code {esc(ex.get("code", rep.get("exit_code")))}</p>',
            _list(conc.get("missing_or_failed") or []),
            "<h2>Measured, per level</h2>", levels_table(rep.get("levels") or []),
            "<h2>Charts</h2>", _charts_html(charts)]
    mem = rep.get("memory")
    if mem:
        body += ["<h2>Memory</h2>", render_value(mem)]
    bv = rep.get("budget")
    if bv:
        body += ["<h2>Budget (memory only: a number to load-test, not a limit)</h2>", render_value(bv)]
    if rep.get("notes"):
        body += ["<h2>Notes</h2>", _list(rep["notes"])]
    if rep.get("input_problems"):
        body += ["<h2>Input problems</h2>", render_value(rep["input_problems"])]
    title = "servewatch report" + (" (SYNTHETIC)" if synthetic else "")
    return page(title, "\n".join(body), charts, synthetic=bool(synthetic))


# ------------------------------------------------------------------------------------------------ accept

def _settings_lines(vs: Any) -> list[str]:
    """Issue 35: a re-judgement (or a settings problem) in the page's banners, in the report's words."""
    if not isinstance(vs, Mapping) or not (vs.get("rejudged") or vs.get("problems")):
        return []
    return [str(line).strip() for line in vs.get("lines") or () if not str(line).startswith("settings: judged")]


def accept_html(doc: AcceptanceDoc, data: ChartBundle) -> str:
    """acceptance.html from the acceptance document (the same dict as acceptance.json) and the chart data: the
    sections of acceptance.md, in its order and its words (``tui.core.acceptance.render.MD_SECTIONS`` through
    ``tui.html.markdown``), the banners and the three verdicts at the top, the charts in section 4, a section the
    markdown does not know under its own name, and the raw JSON document only in a collapsed block at the end."""
    from tui.core.acceptance.recovery import md_recovery
    from tui.core.acceptance.render import MD_SECTIONS, md_measured, md_title
    from tui.html.drill import recovery_chart

    c = doc.get("conclusion") or {}
    weak = c.get("not_acceptance_grade") or []
    if isinstance(weak, str):
        weak = [weak]
    synthetic = doc.get("banner") if doc.get("synthetic") else None  # banners() says SYNTHETIC once
    banner = doc.get("banner")
    extra = [] if doc.get("synthetic") or not banner else [banner]
    charts = C.report_charts(data, "a")
    drills = (doc.get("recovery") or {}).get("drills") or []  # issue 39: a recovery chart per drill given
    rcharts = [recovery_chart(f"a-recovery-{i}", x, str(x.get("source") or "")) for i, x in enumerate(drills)]
    body = [banners(synthetic, [str(w) for w in weak], integrity_lines(doc.get("records_integrity")) + extra)]
    for section in MD_SECTIONS:
        lines = section(doc)
        if section is md_title:  # its quoted banner is the styled banner above
            lines = [ln for ln in lines if not ln.startswith("> ")]
        body.append(f'<section class="doc">{md_to_html(chr(10).join(lines))}</section>')
        if section is md_title:
            body.append(verdict_boxes([("budget: does it fit?", c.get("budget")),
                                       ("load: does it finish in time?", c.get("measured")),
                                       ("quality: are answers usable?", c.get("quality"))]))
        elif section is md_measured:
            body += ['<h3 id="sec-charts">Charts</h3>', _charts_html(charts)]
        elif section is md_recovery and rcharts:
            body += ['<h3 id="sec-recovery-charts">Recovery charts</h3>', _charts_html(rcharts)]
    raw: Mapping[str, Any] = doc  # read by name: the keys not in KNOWN_KEYS are not in AcceptanceDoc either
    for key in raw:  # a section the markdown renderer does not know yet: shown, under its own name
        if key not in KNOWN_KEYS and raw.get(key) not in (None, {}, []):
            body += [f'<h2 id="sec-{esc(key)}">{esc(human(key)).capitalize()}</h2>', render_value(raw[key])]
    body.append('<details id="raw-json"><summary>The acceptance document as JSON (the same as acceptance.json)'
                f"</summary><pre>{esc(json.dumps(doc, indent=2, default=str))}</pre></details>")
    title = "Acceptance report" + (" (SYNTHETIC)" if synthetic else "")
    return page(title, "\n".join(body), [*charts, *rcharts], synthetic=bool(synthetic))


#: the document keys acceptance.md renders (its sections) or that only describe the document itself
KNOWN_KEYS = frozenset({"schema", "generated_at", "generator", "synthetic", "banner", "exit_code", "slo", "provenance",
                        "inputs", "budget", "environment", "load_configuration", "measured", "records_integrity",
                        "quality", "cost", "rollback", "recovery", "conclusion", "exit",
                        "verdict_settings", "identity"})


# ------------------------------------------------------------------------------------------------ compare

def compare_html(result: CompareDoc, levels: CompareLevels, cdf: CompareCdf | None, slo_ttft_ms: float | None) -> str:
    """`servewatch compare BASE CAND --html OUT` from the comparison (``--json``) and its chart data."""
    b, k = result.get("base") or {}, result.get("candidate") or {}
    charts = C.compare_charts(levels, cdf, slo_ttft_ms)
    rows = []
    for p in result.get("levels") or []:
        pb, pc = p.get("base") or {}, p.get("cand") or {}
        iv = p.get("interval") or (None, None)
        rows.append([p.get("level_base"), p.get("level_cand"), pb.get("n"), _pct(pb.get("good_fraction")),
                     pc.get("n"), _pct(pc.get("good_fraction")),
                     None if p.get("difference") is None else f"{p['difference'] * 100:+.1f} points",
                     "N/A" if iv[0] is None or iv[1] is None else f"{iv[0] * 100:+.1f} to {iv[1] * 100:+.1f}",
                     _ms((pb.get("ttft_ms") or {}).get("P95")), _ms((pc.get("ttft_ms") or {}).get("P95")),
                     _rate(pb.get("goodput_per_s")), _rate(pc.get("goodput_per_s")), p.get("verdict"), p.get("reason")])
    synthetic = "one of the runs is labelled synthetic" if result.get("synthetic") else None
    same = b.get("file") is not None and b.get("file") == k.get("file")
    same_run = result.get("same_run")
    ident = result.get("identity") or {}
    same_lines = ([f"{same_run}: the comparison can only show no difference (NOT ENOUGH EVIDENCE)"] if same_run else
                  ["base and candidate are the same file: the comparison can only show no difference"] if same else [])
    refused = [str(x) for x in result.get("refusals") or [] if x != same_run]
    body = [f"<h1>servewatch compare{' (SYNTHETIC)' if synthetic else ''}</h1>",
            f"<p>base: {esc(b.get('file'))}<br>candidate: {esc(k.get('file'))}</p>",
            f"<p>base measured: {esc((ident.get('base') or {}).get('line') or 'unknown')}<br>"
            f"candidate measured: {esc((ident.get('candidate') or {}).get('line') or 'unknown')}</p>",
            banners(synthetic, (), integrity_lines(result.get("records_integrity")) + same_lines + refused),
            verdict_boxes([("candidate vs base (good fraction)", result.get("verdict"))]),
            f'<p class="note" id="verdict-note">{esc(result["verdict_note"])}</p>' if result.get("verdict_note") else "",
            f'<p class="overall">{esc(result.get("reason"))}</p>',
            f'<p>SLOs: {esc(result.get("slos"))}; margin {_pct(result.get("margin"))}; one-sided error level '
            f'{esc(result.get("alpha"))}; exit code {esc(result.get("exit_code"))}</p>',
            _list(result.get("warnings") or []),
            "<h2>Per matched level</h2>",
            table(["base level", "candidate level", "base n", "base good", "cand n", "cand good", "difference",
                   "interval (points)", "base TTFT P95 ms", "cand TTFT P95 ms", "base goodput/s", "cand goodput/s",
                   "verdict", "reason"], rows),
            "<h2>Charts</h2>", _charts_html(charts),
            "<h2>Workload</h2>", render_value(result.get("workload") or {}),
            "<h2>Unmatched levels</h2>", render_value(result.get("unmatched") or {})]
    if result.get("records_integrity"):
        body += ["<h2>Records integrity</h2>", render_value(result["records_integrity"])]
    return page("servewatch compare" + (" (SYNTHETIC)" if synthetic else ""), "\n".join(body), charts,
                synthetic=bool(synthetic))
