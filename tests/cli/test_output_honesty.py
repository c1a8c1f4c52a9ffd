"""Issue 37: numbers and labels a reviewer can believe (the report, its JSON and the acceptance report)."""

from __future__ import annotations

import json
from pathlib import Path

from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]
VLLM_BENCH = ROOT / "tests" / "fixtures" / "imports" / "vllm" / "vllm_bench_c2_from_source.json"


def test_an_imported_vllm_bench_ttft_is_labelled_as_vllm_bench_measures_it(tmp_path, capsys):
    """`vllm bench serve` takes TTFT at its first chunk with non-empty choices (a role-only chunk on llama.cpp):
    never judged as "(answer)" in the verdict line, ``ttft_of`` in the JSON, nor the acceptance report."""
    assert main(["report", str(VLLM_BENCH)]) == 3
    out = " ".join(capsys.readouterr().out.split())  # the short report wraps at 120 characters
    verdict = out[out.index("verdict: "):out.index("level round")]
    assert "(first chunk, as vllm bench measures)" in verdict and "(answer)" not in verdict
    assert main(["report", str(VLLM_BENCH), "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["slo"]["slos"]["ttft_of"] == "first chunk, as vllm bench measures"
    assert "(answer)" not in json.dumps(doc["slo"]) and "(answer)" not in json.dumps(doc["levels"])
    assert main(["accept", "--records", str(VLLM_BENCH), "--out", str(tmp_path), "--no-html"]) == 3
    md = (tmp_path / "acceptance.md").read_text()
    assert "first chunk, as vllm bench measures" in md and "(answer)" not in md


def test_servewatch_files_still_say_answer(capsys):
    assert main(["report", str(ROOT / "sample_logs" / "default.jsonl")]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "(answer)" in out[out.index("verdict: "):out.index("level round")]


def test_synthetic_is_said_once_per_place_on_the_page(tmp_path, capsys):
    """issue 37: "SYNTHETIC: SYNTHETIC, written by ..." on the seed's page: the label once per place."""
    page = tmp_path / "seed.html"
    main(["report", str(ROOT / "sample_logs" / "seed.jsonl"), "--html", str(page)])
    capsys.readouterr()
    html = page.read_text()
    assert 'id="synthetic-banner">SYNTHETIC: written by' in html
    assert "SYNTHETIC: SYNTHETIC" not in html and "SYNTHETIC, SYNTHETIC" not in html


def test_the_default_report_is_short_and_the_long_one_is_details(capsys):
    """issue 37: the text report ran to lines of hundreds of characters and repeated token accounting per level.
    The default: the header block (what and from where, integrity, settings, identity), the verdict line, the level
    table, at most three lines of reasons, the problems; for the bundled run at most 60 lines of at most 120
    characters. --details is the long report, --json has all of it."""
    bundled = str(ROOT / "sample_logs" / "default.jsonl")
    assert main(["report", bundled]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 60 and max(len(x) for x in lines) <= 120, (len(lines), max(len(x) for x in lines))
    text = "\n".join(lines)
    order = [text.index(x) for x in ("digest chain intact", "servewatch report:", "data from:", "settings:",
                                     "identity:", "budget:", "verdict: FAIL", "level round", "why:", "conclusion:")]
    assert order == sorted(order)
    assert "counted tokens" not in text and "Assumptions" not in text and "assumptions (not measured)" not in text
    why = [x for x in lines if x.startswith("  why:")]
    assert len(why) == 1 and len(lines[lines.index(why[0]):lines.index(why[0]) + 4]) <= 4
    assert main(["report", bundled, "--details"]) == 1
    details = capsys.readouterr().out
    assert "counted tokens" in details and "assumptions (not measured)" in details and len(details.splitlines()) > 60
