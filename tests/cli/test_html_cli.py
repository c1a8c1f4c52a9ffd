"""issue 25: the self-contained HTML pages of `report --html`, `compare --html` and `accept` (acceptance.html).

Outside a browser: the page is one file that fetches nothing (no network script, stylesheet, font or image; only
plain links), carries real tables and the verdict of each kind of evidence, the SYNTHETIC / not-acceptance-grade
banners where they apply, one container per chart it configures, and stays under 3 MB for a 10,000-request run.
The browser tests (tests/browser) render the same pages in Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tui.cli import main
from tui.samples import sample_path

SEED = sample_path("seed.jsonl")
DEFAULT = REPO / "tests" / "fixtures" / "gemma_sweep_short.jsonl"  # a short real run (the first bundled sample)
MAX_BYTES = 3 * 1024 * 1024


def specs(text: str) -> list[dict]:
    m = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', text, re.S)
    assert m, "no chart data"
    return json.loads(m.group(1))


def fetches_nothing(text: str) -> None:
    """No element loads anything from outside the file: no src/srcset/poster/data at all except data: URLs, no
    <link> (stylesheet, font, preload), no CSS url() or @import, no fetch/XMLHttpRequest in the page's own script;
    <a href> to the web is allowed (a plain link fetches nothing). The markup is read with the scripts' bodies
    left out (the inlined library's source holds such words as strings; the browser tests watch what it loads)."""
    assert not re.search(r"<script\b[^>]*\bsrc\s*=", text, re.I)
    markup = re.sub(r"(<script\b[^>]*>).*?(</script>)", r"\1\2", text, flags=re.S | re.I)
    for m in re.finditer(r'\s(src|srcset|poster|action|formaction)\s*=\s*["\']?([^"\'\s>]*)', markup, re.I):
        assert m.group(2).startswith("data:"), m.group(0)
    assert not re.search(r"<link\b", markup, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", markup, re.I)
    assert not re.search(r"<(iframe|img|object|embed|video|audio)\b", markup, re.I)
    assert not re.search(r"https?://", re.sub(r'<a\s+href="https?://[^"]*"', "<a", markup))
    from tui.html.page import INIT_JS

    assert "fetch(" not in INIT_JS and "XMLHttpRequest" not in INIT_JS and "import(" not in INIT_JS


def charts_have_containers(text: str) -> list[str]:
    ids = [s["id"] for s in specs(text)]
    for cid in ids:
        assert f'id="{cid}"' in text
    return ids


def _gen(tmp_path: Path, n: int) -> Path:
    out = tmp_path / f"run{n}.jsonl"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "gen_records.py"), str(out), "--requests", str(n),
                        "--stream-fields"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_report_html_is_one_page_with_tables_verdicts_and_charts(tmp_path, capsys):
    out = tmp_path / "report.html"
    rc = main(["report", str(DEFAULT), "--html", str(out)])
    text = out.read_text(encoding="utf-8")
    capsys.readouterr()
    assert rc == 3
    fetches_nothing(text)
    ids = charts_have_containers(text)
    assert {"c-good", "c-ttft", "c-goodput", "c-judged", "c-queue"} <= set(ids), ids
    assert "c-memory-missing" in text and "not recorded in this file" in text  # no NVML: said, not drawn
    assert text.count("<table") >= 2 and "<td>INSUFFICIENT_WINDOW</td>" in text and "|---|" not in text
    for label in ("budget: does it fit?", "load: does it finish in time?", "quality: are answers usable?"):
        assert label in text
    assert "SYNTHETIC" not in text.split("<script")[0]  # a real run carries no synthetic banner
    good = next(s for s in specs(text) if s["id"] == "c-good")["option"]
    marks = good["series"][0]["markLine"]["data"]
    assert any(m.get("yAxis") == 0.95 for m in marks)  # the target drawn in
    assert good["xAxis"]["name"] == "load level (concurrency)" and good["yAxis"]["name"] == "good fraction"
    ttft = next(s for s in specs(text) if s["id"] == "c-ttft")["option"]
    assert ttft["series"][0]["markLine"]["data"][0]["yAxis"] == 1000.0  # the SLO line
    # issue 37: a latency axis is logarithmic (said in its name) when the values span more than 10x
    values = [p["value"][1] for ser in ttft["series"] for p in ser["data"]] + [1000.0]
    log = max(values) > 10 * min(values)
    assert ttft["yAxis"]["name"] == ("milliseconds, log scale" if log else "milliseconds")
    assert ttft["yAxis"]["type"] == ("log" if log else "value")
    judged = next(s for s in specs(text) if s["id"] == "c-judged")["option"]
    assert judged["series"][0]["markArea"]["data"], "the verdict's state band"
    assert "all 9 measured requests" in judged["title"]["subtext"]
    # issue 37: the requests and the verdict's band on one axis (each request at its end): the last band, where
    # the verdict ends, lies inside the x axis
    bands = judged["series"][0]["markArea"]["data"]
    xs = [p[0] for ser in judged["series"] for p in ser["data"]]
    assert judged["xAxis"]["min"] <= min(xs) and max(xs) <= judged["xAxis"]["max"]
    assert bands[-1][1]["xAxis"] <= judged["xAxis"]["max"] and bands[0][0]["xAxis"] >= judged["xAxis"]["min"]
    assert len(out.read_bytes()) < MAX_BYTES


def test_seed_report_html_carries_the_synthetic_banner(tmp_path, capsys):
    out = tmp_path / "seed.html"
    assert main(["report", str(SEED), "--html", str(out)]) == 3
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    assert 'id="synthetic-banner"' in text and "<title>servewatch report (SYNTHETIC)</title>" in text
    # and every chart says it too: a chart copied or printed alone is still labelled
    titles = [s["option"]["title"]["text"] for s in specs(text)]
    assert titles and all(t.startswith("SYNTHETIC: ") for t in titles), titles


def test_weak_settings_get_the_not_acceptance_grade_banner(tmp_path, capsys):
    out = tmp_path / "weak.html"
    main(["report", str(DEFAULT), "--alpha", "0.2", "--html", str(out)])
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    assert 'id="grade-banner"' in text and "not acceptance-grade" in text


def test_compare_html_with_the_same_file_on_both_sides(tmp_path, capsys):
    out = tmp_path / "compare.html"
    rc = main(["compare", str(DEFAULT), str(DEFAULT), "--html", str(out)])
    capsys.readouterr()
    assert rc == 3
    text = out.read_text(encoding="utf-8")
    fetches_nothing(text)
    ids = charts_have_containers(text)
    assert ids == ["k-good", "k-ttft", "k-goodput", "k-cdf"]
    assert "the same file" in text and "<td>NOT ENOUGH EVIDENCE</td>" in text
    cdf = next(s for s in specs(text) if s["id"] == "k-cdf")["option"]
    assert cdf["series"][0]["data"] == cdf["series"][1]["data"] and cdf["series"][0]["data"][-1][1] == 1.0
    assert cdf["series"][0]["markLine"]["data"][0]["xAxis"] == 1000.0


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_accept_html_of_a_10k_request_run_is_under_3_mb_and_fetches_nothing(tmp_path, capsys):
    run = _gen(tmp_path, 10_000)
    rc = main(["accept", "--records", str(run), "--out", str(tmp_path / "acc")])
    capsys.readouterr()
    assert rc == 3  # SYNTHETIC never exits 0
    page = tmp_path / "acc" / "acceptance.html"
    text = page.read_text(encoding="utf-8")
    size = len(page.read_bytes())
    assert size < MAX_BYTES, size
    fetches_nothing(text)
    ids = charts_have_containers(text)
    assert {"a-good", "a-ttft", "a-tpot_ms", "a-itl_ms", "a-e2e_ms", "a-goodput", "a-judged"} <= set(ids), ids
    assert 'id="synthetic-banner"' in text
    judged = next(s for s in specs(text) if s["id"] == "a-judged")["option"]
    assert "an evenly spaced sample" not in judged["title"]["subtext"]  # 2,500 per level: all drawn
    assert "<h2 id=\"sec-4-measured-results\">" in text and "<h2 id=\"sec-8-conclusion\">" in text
    assert "```" not in text and "|---|" not in text


def test_accept_html_renders_a_section_it_does_not_know(tmp_path):
    from tui.html import accept_html

    doc = json.loads((REPO / "tests" / "golden" / "acceptance_seed.json").read_text())
    doc["what_was_measured"] = {"peak GPU memory": "unknown (not recorded)", "queue": [{"level": 1, "peak": 3}]}
    from tui.core.chartdata import report_bundle
    from tui.core.slos import Slos

    text = accept_html(doc, report_bundle(doc["measured"]["levels"], judged=doc["measured"]["judged"],
                                          candidate=15, slos=Slos(), target=0.95))
    assert 'id="sec-what_was_measured"' in text and "unknown (not recorded)" in text
    assert "<th>peak</th>" in text


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("where", ["missing-folder", "folder"])
def test_unwritable_html_path_is_one_line_exit_2(tmp_path, where):
    target = tmp_path / "nope" / "r.html" if where == "missing-folder" else tmp_path
    for argv in (["report", str(DEFAULT), "--html", str(target)],
                 ["compare", str(DEFAULT), str(DEFAULT), "--html", str(target)]):
        r = subprocess.run([sys.executable, "-m", "tui", *argv], capture_output=True, text=True, timeout=120, cwd=REPO)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("servewatch: --html") and "Traceback" not in r.stderr
        assert r.stdout == ""  # refused before the report was printed


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_html_onto_the_input_is_refused(tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_bytes(DEFAULT.read_bytes() if isinstance(DEFAULT, Path) else Path(DEFAULT).read_bytes())
    r = subprocess.run([sys.executable, "-m", "tui", "report", str(run), "--html", str(run)], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2 and "refusing to write onto an input" in r.stderr
    assert run.read_bytes() == Path(DEFAULT).read_bytes()


def test_pages_say_first_when_a_record_file_was_edited(tmp_path, capsys):
    """A record file is a claim: an edited line breaks its digest chain, and every page says so in a banner at the
    top (the text report did; the HTML pages did not)."""
    lines = (REPO / "sample_logs" / "default.jsonl").read_text(encoding="utf-8").splitlines()
    for i, ln in enumerate(lines):
        d = json.loads(ln)
        if d.get("type") == "request" and d.get("phase") == "measure" and d.get("level") == 4.0:
            d["t_first_token"] = d["t_sent"] + 0.1
            lines[i] = json.dumps(d)
            break
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pages = {"report": tmp_path / "r.html", "compare": tmp_path / "c.html", "accept": tmp_path / "acc" / "acceptance.html"}
    main(["report", str(edited), "--html", str(pages["report"])])
    main(["compare", str(edited), str(REPO / "sample_logs" / "default.jsonl"), "--html", str(pages["compare"])])
    main(["accept", "--records", str(edited), "--out", str(tmp_path / "acc")])
    capsys.readouterr()
    for name, page in pages.items():
        top = page.read_text(encoding="utf-8").split("<h2")[0]
        assert 'class="banner warn">' in top and "records integrity FAILED" in top, name


def test_the_judged_chart_of_the_bundled_run_shows_its_final_fail_and_says_points_overlap(tmp_path, capsys):
    """issue 37: at level 32 the points were placed at t_sent and the verdict band at the timeline's t (request end),
    both from an origin at the first queue sample ~4.7 s before the first request: the FAIL part fell past the x axis
    fitted to the send times; "all 96 measured requests" while ~12 dots were visible (identical values overlap,
    unsaid); and the TTFTs of 17-18 s put the 1,000 ms SLO line in the bottom 5% of a linear axis."""
    out = tmp_path / "bundled.html"
    main(["report", str(REPO / "sample_logs" / "default.jsonl"), "--html", str(out)])
    capsys.readouterr()
    judged = next(s for s in specs(out.read_text(encoding="utf-8")) if s["id"] == "c-judged")["option"]
    bands = judged["series"][0]["markArea"]["data"]
    assert bands[-1][0]["name"] == "FAIL" and bands[-1][1]["xAxis"] <= judged["xAxis"]["max"]
    assert bands[-1][1]["xAxis"] - bands[-1][0]["xAxis"] > 1.0  # a visible stretch, not a sliver past the edge
    sub = judged["title"]["subtext"]
    assert "all 96 measured requests" in sub and "distinct points" in sub and "overlap" in sub
    assert judged["yAxis"]["type"] == "log" and "log scale" in judged["yAxis"]["name"]
    slo = judged["series"][0]["markLine"]["data"][0]["yAxis"]
    assert judged["yAxis"]["min"] <= slo  # the SLO line is on the axis
