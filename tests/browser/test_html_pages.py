"""issue 25: every HTML page servewatch writes, rendered in headless Chromium with the network blocked.

For each page (built here from small runs: the bundled sample run, the SYNTHETIC seed, a generated run with the
stream fields, the sample run with GPU and engine-KV samples added): every chart container holds a non-empty SVG
(ECharts' SVG renderer: path elements drawn), the browser logged no console error, every request the page made
was file: or data: (the DevTools performance log), and a PNG of the whole page is kept under
``.artifacts/browser/<page>.png`` (gitignored) with the page's load time in ``.artifacts/browser/timings.json``.
A negative control shows that the request check sees a page that does reach for the network.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tui.cli import main
from tui.samples import sample_path

ARTIFACTS = REPO / ".artifacts" / "browser"
DEFAULT = Path(sample_path("default.jsonl"))
SEED = Path(sample_path("seed.jsonl"))


def _with_memory_samples(src: Path, out: Path) -> Path:
    """The sample run with a GPU sample (NVML-like) and the engine's KV usage beside each queue sample."""
    lines = []
    for ln in src.read_text(encoding="utf-8").splitlines():
        d = json.loads(ln)
        if d.get("type") == "queue":
            running = d.get("running") or 0.0
            d["kv_cache_usage"] = min(1.0, running / 4)
            lines.append(json.dumps(d))
            lines.append(json.dumps({"type": "gpu", "t": d["t"], "device": 0, "name": "NVIDIA A10",
                                     "memory_used": int((14 + 2 * running) * 2 ** 30), "memory_total": 24 * 2 ** 30}))
        else:
            lines.append(ln)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """name -> an HTML file servewatch wrote (report, compare, accept)."""
    tmp = tmp_path_factory.mktemp("pages")
    gen = tmp / "gen.jsonl"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "gen_records.py"), str(gen), "--requests", "4000",
                        "--stream-fields"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mem = _with_memory_samples(DEFAULT, tmp / "memory.jsonl")
    out = {"report-sample": tmp / "report-sample.html", "report-seed": tmp / "report-seed.html",
           "report-memory": tmp / "report-memory.html", "compare-same-file": tmp / "compare-same-file.html",
           "compare-seed-vs-sample": tmp / "compare-seed-vs-sample.html"}
    assert main(["report", str(DEFAULT), "--html", str(out["report-sample"])]) == 1  # the bundled run FAILs at 32
    assert main(["report", str(SEED), "--html", str(out["report-seed"])]) == 3
    assert main(["report", str(mem), "--params", "7B", "--gpu-gib", "24", "--html", str(out["report-memory"])]) == 1
    assert main(["compare", str(DEFAULT), str(DEFAULT), "--html", str(out["compare-same-file"])]) == 3
    main(["compare", str(SEED), str(DEFAULT), "--html", str(out["compare-seed-vs-sample"])])
    assert main(["accept", "--records", str(gen), "--out", str(tmp / "acc")]) == 3
    out["accept-generated"] = tmp / "acc" / "acceptance.html"
    assert main(["accept", "--records", str(SEED), "--out", str(tmp / "acc-seed")]) == 3
    out["accept-seed"] = tmp / "acc-seed" / "acceptance.html"
    return out


def _chart_ids(path: Path) -> list[str]:
    m = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', path.read_text("utf-8"), re.S)
    assert m
    return [s["id"] for s in json.loads(m.group(1))]


NAMES = ["report-sample", "report-seed", "report-memory", "compare-same-file", "compare-seed-vs-sample",
         "accept-generated", "accept-seed"]


@pytest.mark.parametrize("name", NAMES)
def test_page_renders_every_chart_offline_without_errors(browser, pages, name):
    path = pages[name]
    ids = _chart_ids(path)
    assert ids, "every page draws charts"
    seen = browser.open(path)
    d = browser.driver
    for cid in ids:
        info = d.execute_script(
            "var el=document.getElementById(arguments[0]); if(!el) return null;"
            "var svg=el.querySelector('svg'); return {rendered: el.getAttribute('data-rendered'),"
            "svg: !!svg, paths: svg ? svg.querySelectorAll('path').length : 0,"
            "texts: svg ? svg.querySelectorAll('text').length : 0, w: el.clientWidth, h: el.clientHeight};", cid)
        assert info is not None, f"{name}: no container #{cid}"
        assert info["rendered"] == "1" and info["svg"], (name, cid, info)
        assert info["paths"] > 3 and info["texts"] > 3, (name, cid, info)  # axes, series and labels drawn
        assert info["w"] > 300 and info["h"] > 200, (name, cid, info)
    assert d.execute_script("return document.body.getAttribute('data-charts-ready')") == str(len(ids))
    errors = [e for e in seen["console"] if e.get("level") in ("SEVERE", "ERROR")]
    assert not errors, errors
    left = [u for u in seen["requests"] if not (u.startswith("file:") or u.startswith("data:"))]
    assert not left, f"{name}: requests left the file: {left}"
    assert any(u.startswith("file:") for u in seen["requests"])  # the log did see the page itself
    browser.screenshot(ARTIFACTS / f"{name}.png")
    assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000
    timings = ARTIFACTS / "timings.json"
    known = json.loads(timings.read_text()) if timings.exists() else {}
    known[name] = {"load_ms": seen["render_ms"], "bytes": path.stat().st_size, "charts": len(ids)}
    timings.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n")


def test_page_prints_to_pdf(browser, pages):
    browser.open(pages["accept-generated"])
    pdf = base64.b64decode(browser.driver.print_page())
    assert pdf.startswith(b"%PDF") and len(pdf) > 50_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "accept-generated.pdf").write_bytes(pdf)


def test_the_request_check_sees_a_page_that_reaches_for_the_network(browser, tmp_path):
    """Negative control: a page with a remote image and a remote script and a console error: the performance log
    shows both requests (refused by the block), the browser log the error, so the assertions above can fail."""
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://203.0.113.9/x.png">'
                    '<script src="https://203.0.113.9/lib.js"></script>'
                    "<script>console.error('boom'); document.body.setAttribute('data-charts-ready','0')</script>"
                    "</body></html>")
    seen = browser.open(page)
    left = [u for u in seen["requests"] if not (u.startswith("file:") or u.startswith("data:"))]
    assert "http://203.0.113.9/x.png" in left and "https://203.0.113.9/lib.js" in left
    assert set(left) <= set(seen["blocked"])  # the network block refused them: nothing left the machine
    assert any(e.get("level") == "SEVERE" and "boom" in e.get("message", "") for e in seen["console"])


# ------------------------------------------------------------------ issue 37: a page a reviewer reads

#: every word in every table cell (text nodes split on white space): the word's rectangles, one per line it occupies
_BROKEN_WORDS_JS = """
var out = [];
document.querySelectorAll('td, th').forEach(function(cell){
  var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  var node;
  while ((node = walker.nextNode())) {
    var text = node.textContent, re = /\\S+/g, m;
    while ((m = re.exec(text))) {
      var r = document.createRange();
      r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
      var tops = {};
      Array.prototype.forEach.call(r.getClientRects(), function(rc){ if (rc.width > 0) tops[Math.round(rc.top)] = 1; });
      if (Object.keys(tops).length > 1) out.push(m[0]);
    }
  }
});
return out;
"""


@pytest.mark.parametrize("name", ["accept-generated", "accept-seed", "report-sample"])
@pytest.mark.parametrize("width", [1024, 1400])
def test_no_word_is_broken_inside_a_table_cell(browser, pages, name, width):
    """issue 37: the report's table cells broke words ("le vel", "requ ests", "go od") at 1,400 px."""
    d = browser.driver
    d.set_window_size(width, 900)
    try:
        browser.open(pages[name])
        broken = d.execute_script(_BROKEN_WORDS_JS)
        assert broken == [], f"{name} at {width} px breaks words inside table cells: {broken[:10]}"
        assert d.execute_script("return document.querySelectorAll('td').length") > 10  # the check saw tables
        browser.screenshot(ARTIFACTS / f"{name}-{width}px.png")
    finally:
        d.set_window_size(1200, 900)


def test_the_acceptance_page_follows_acceptance_md(browser, pages):
    """issue 37: the same sections and order as acceptance.md, words for every key, the raw JSON document only in
    a collapsed block at the end."""
    path = pages["accept-generated"]
    md = (path.parent / "acceptance.md").read_text(encoding="utf-8")
    md_sections = [ln[3:].strip() for ln in md.splitlines() if ln.startswith("## ")]
    browser.open(path)
    d = browser.driver
    page_sections = d.execute_script("return Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
    assert page_sections == md_sections
    raw = d.execute_script("var el=document.getElementById('raw-json'); return el && {open: el.open, "
                           "last: el === document.querySelectorAll('details')[document.querySelectorAll('details').length-1],"
                           "visible: el.querySelector('pre').checkVisibility()}")
    assert raw == {"open": False, "last": True, "visible": False}
    body = d.execute_script("return document.body.innerText")
    # words, not JSON keys: none of the document's own keys shows as a key/value dump outside the raw block
    for key in ("has_measured_capacity", "has measured capacity", "nvml available", "budget_feasible", "sha256 N/A"):
        assert key not in body, key
