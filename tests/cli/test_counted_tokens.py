"""Counted tokens and the full SLO in the CLI: `report` text and JSON per level, `accept`'s load configuration
(asked beside received, the disagreements) and its SLO sentence naming every SLO in force."""

from __future__ import annotations

import json

import tests.support.evidence_files as ef
import tests.support.token_files as tf
from tui.cli import main


def test_report_json_and_text_show_the_counted_tokens_per_level(tmp_path, capsys):
    path = ef.write(tmp_path / "tok.jsonl", tf.two_levels())
    main(["report", "--details", str(path), "--json"])
    rep = json.loads(capsys.readouterr().out)
    by_level = {lv["level"]: lv for lv in rep["levels"]}
    assert by_level[2]["tokens"]["input"]["asked"]["p50"] == 128
    assert by_level[4]["tokens"]["input"]["asked"]["p50"] == 256
    assert by_level[4]["tokens"]["disagree"]["output"] == 24 and by_level[4]["tokens"]["disagree"]["output_compared"] == 237
    assert rep["measured"]["tokens"] == by_level[4]["tokens"]  # the judged level (the highest)
    assert rep["tokens"]["disagree"]["of"] == 119 + 237  # run-wide
    main(["report", "--details", str(path)])
    text = capsys.readouterr().out
    assert "counted tokens (measured requests" in text
    assert ("level 4 round 1: output tokens: asked 64 / 64 / 64, received 64 / 64 / 64 (min / P50 / max); "
            "server counted 64, 61 chunks seen, on 24 of 237 requests") in text
    assert "input tokens: asked 256 / 256 / 256, received 270 / 270 / 270" in text


def _accept(tmp_path, path, *extra):
    out = tmp_path / "acc"
    rc = main(["accept", "--records", str(path), "--out", str(out), *extra])
    return rc, json.loads((out / "acceptance.json").read_text()), (out / "acceptance.md").read_text()


def test_accept_shows_asked_beside_received_and_the_disagreements(tmp_path, capsys):
    rc, doc, md = _accept(tmp_path, ef.write(tmp_path / "tok.jsonl", tf.two_levels()))
    assert rc in (1, 3)
    (ld,) = doc["load_configuration"]
    assert ld["input_tokens"] == "128"  # the header's setting
    assert ld["input_tokens_asked_seen"] == {"min": 128.0, "p50": 256.0, "max": 256.0, "n": 356}  # the records'
    assert ld["input_tokens_received"] == {"min": 140.0, "p50": 270.0, "max": 270.0, "n": 356}
    assert ld["output_tokens_received"]["p50"] == 64.0
    assert ld["token_disagreements"] == {"output": 36, "output_compared": 356, "input": 356, "input_compared": 356}
    row = next(line for line in md.splitlines() if line.startswith("| `"))
    assert "| 128 (records: 128 / 256 / 256) | 140 / 270 / 270 | 64 (records: 64 / 64 / 64) | 64 / 64 / 64 |" in row
    assert "| output 36 of 356, input 356 of 356 |" in row
    assert "more than max(1, 2% of the server's count) apart" in md


def test_accept_slo_sentence_names_tpot_when_given(tmp_path, capsys):
    path = ef.write(tmp_path / "tok.jsonl", tf.two_levels())
    _, doc, md = _accept(tmp_path, path)
    assert doc["slo"]["good"] == "completed AND client TTFT <= 1000 ms, over all measured requests"
    assert doc["slo"]["in_force"] == ["TTFT"]
    _, doc, md = _accept(tmp_path, path, "--slo-tpot-ms", "50", "--ttft-of", "any")
    assert doc["slo"]["in_force"] == ["TTFT", "TPOT"] and doc["slo"]["tpot_ms"] == 50
    assert doc["slo"]["good"] == "completed AND TTFT <= 1000 ms (any), TPOT <= 50 ms, over all measured requests"
    assert "- SLO: good = completed AND TTFT <= 1000 ms (any), TPOT <= 50 ms, over all measured requests" in md
