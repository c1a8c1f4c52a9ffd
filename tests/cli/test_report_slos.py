"""`servewatch report` with the SLOs of issue 21 on files shaped like `servewatch run` writes them: each SLO at its
boundary (exactly at: PASS; 1 us stricter: FAIL), off, older files (not judgeable, said), --ttft-of, the JSON shape
and the text's miss counts."""

from __future__ import annotations

import json

import pytest

from tests.support import evidence_files as ef
from tui.cli import main


def _file(tmp_path, name="run.jsonl", **fields):
    recs = ef.honest_closed(level=4, seconds=660.0)  # TTFT 200 ms, 2 s each, 32 output tokens
    for r in recs:
        if r.get("type") == "request":
            tf = r["t_first_token"]
            for k, v in fields.items():
                r[k] = (tf + v) if k.startswith("t_") else v
    return str(ef.write(tmp_path / name, recs))


NEW = dict(t_last_token=1.55, output_chunks=32, itl_max_ms=80.0)  # TPOT 1550 / 31 = 50 ms; E2E 1750 ms


def _json(args, capsys):
    rc = main(["report", "--details", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_each_slo_at_its_boundary(tmp_path, capsys):
    f = _file(tmp_path, **NEW)
    for flag, at, over in (("--slo-tpot-ms", "50", "49.999"), ("--slo-itl-ms", "80", "79.999"),
                           ("--slo-e2e-ms", "1750", "1749.999"), ("--slo-ttft-ms", "200", "199.999")):
        rc, rep = _json([f, flag, at], capsys)
        assert rc == 0 and rep["measured"]["verdict"]["state"] == "PASS", flag
        rc, rep = _json([f, flag, over], capsys)
        assert rc == 1 and rep["measured"]["verdict"]["state"] == "FAIL", flag
        name = flag.split("-")[3].upper()
        assert rep["measured"]["window"]["misses"] == {name: rep["measured"]["window"]["n"]}


def test_json_shape_per_level(tmp_path, capsys):
    rc, rep = _json([_file(tmp_path, **NEW), "--slo-tpot-ms", "50"], capsys)
    lv = rep["levels"][0]
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert {"p50", "p95", "p99", "n"} <= set(lv[key])
    assert lv["tpot_ms"]["p50"] == pytest.approx(50.0)
    assert lv["e2e_ms"]["p99"] is not None and lv["e2e_ms"]["n"] == lv["n"]
    assert lv["ttft_ms"]["P50"]["value"] == lv["ttft_ms"]["p50"]  # the detailed reading kept beside the flat one
    assert lv["goodput_rps"] == lv["throughput_rps"] and lv["goodput_tok_s"] > 0
    assert rep["slo"]["in_force"] == ["TTFT", "TPOT"]


def test_off_and_old_files_not_judgeable(tmp_path, capsys):
    old = _file(tmp_path, "old.jsonl")
    rc, rep = _json([old, "--slo-ttft-ms", "off", "--slo-e2e-ms", "2000"], capsys)
    assert rc == 0 and rep["slo"]["in_force"] == ["E2E"]  # t_end stands in for the last token
    rc, rep = _json([old, "--slo-tpot-ms", "1000"], capsys)
    assert rc != 0 and rep["measured"]["window"]["unjudgeable"] == {"TPOT": rep["measured"]["window"]["n"]}
    assert any("TPOT not judgeable on" in p and "no last-token times" in p for p in rep["evidence"]["problems"])


def test_ttft_of_answer_and_any_on_reasoning(tmp_path, capsys):
    f = _file(tmp_path, t_first_reasoning=0.0, t_first_answer=1.0, **NEW)  # answer TTFT 1200 ms, any 200 ms
    assert main(["report", "--details", f]) == 1  # default: the answer, over the 1000 ms SLO
    assert main(["report", "--details", f, "--ttft-of", "any"]) == 0
    out = capsys.readouterr().out
    assert "TTFT <= 1000 ms (any)" in out


def test_text_names_the_slos_and_counts_misses(tmp_path, capsys):
    rc = main(["report", "--details", _file(tmp_path, **NEW), "--slo-tpot-ms", "49.999", "--slo-itl-ms", "79.999"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "judged on TTFT <= 1000 ms (answer), TPOT <= 49.999 ms, ITL <= 79.999 ms" in out
    n = int(out.split("measured requests=")[1].split()[0])
    assert f"0 good; missed TPOT {n}, ITL {n}, both {n}" in out
    assert "TPOT over completed requests" in out and "goodput=" in out


def test_bad_slo_is_usage(tmp_path, capsys):
    assert main(["report", "--details", _file(tmp_path), "--slo-tpot-ms", "-3"]) == 2
    assert main(["report", "--details", _file(tmp_path), "--ttft-of", "first"]) == 2
