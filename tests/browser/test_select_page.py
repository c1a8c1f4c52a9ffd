"""issue 40: `servewatch select --html` rendered in headless Chromium with the network blocked (as every other page,
tests/browser/test_html_pages.py): the decision table's chart of cost per 1M good output tokens against measured
capacity draws its points, each candidate's bracket as a horizontal error bar and the Pareto front, offline, with no
console error. The candidates are the real llama-server runs recorded in tests/fixtures/select."""

from __future__ import annotations

import contextlib
import io

from tests.support.paths import REPO
from tui.cli import main

FIX = REPO / "tests" / "fixtures" / "select"
ARTIFACTS = REPO / ".artifacts" / "browser"


def test_the_select_page_draws_its_chart_offline(browser, tmp_path):
    page = tmp_path / "select.html"
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["select", "--candidate", f"one-slot={FIX / 'slots1-ctx2048.jsonl'}",
                   "--candidate", f"two-slots={FIX / 'slots2-ctx2048.jsonl'}",
                   "--candidate", f"two-slots-4k={FIX / 'slots2-ctx4096.jsonl'}",
                   "--gpu-hour-usd", "0.05", "--html", str(page)])
    assert rc == 1  # no quality file: nobody is ready; the costs and brackets are still drawn
    seen = browser.open(page)
    d = browser.driver
    info = d.execute_script(
        "var el=document.getElementById('select-cost'); var svg=el && el.querySelector('svg');"
        "return {rendered: el && el.getAttribute('data-rendered'), paths: svg ? svg.querySelectorAll('path').length : 0,"
        "texts: svg ? Array.from(svg.querySelectorAll('text')).map(function(t){return t.textContent;}) : []};")
    assert info["rendered"] == "1" and info["paths"] > 10, info
    for name in ("one-slot", "two-slots", "two-slots-4k"):
        assert name in info["texts"], info["texts"]  # each candidate labelled at its point
    assert any("Pareto front" in t for t in info["texts"])
    assert d.execute_script("return document.body.getAttribute('data-charts-ready')") == "1"
    errors = [e for e in seen["console"] if e.get("level") in ("SEVERE", "ERROR")]
    assert not errors, errors
    left = [u for u in seen["requests"] if not (u.startswith("file:") or u.startswith("data:"))]
    assert not left, left
    browser.screenshot(ARTIFACTS / "select.png")
    assert (ARTIFACTS / "select.png").stat().st_size > 10_000
