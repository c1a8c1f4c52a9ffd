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
    out = capsys.readouterr().out
    verdict = next(line for line in out.splitlines() if "verdict=" in line)
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
    verdict = next(line for line in capsys.readouterr().out.splitlines() if "verdict=" in line)
    assert "(answer)" in verdict


def test_synthetic_is_said_once_per_place_on_the_page(tmp_path, capsys):
    """issue 37: "SYNTHETIC: SYNTHETIC, written by ..." on the seed's page: the label once per place."""
    page = tmp_path / "seed.html"
    main(["report", str(ROOT / "sample_logs" / "seed.jsonl"), "--html", str(page)])
    capsys.readouterr()
    html = page.read_text()
    assert 'id="synthetic-banner">SYNTHETIC: written by' in html
    assert "SYNTHETIC: SYNTHETIC" not in html and "SYNTHETIC, SYNTHETIC" not in html
