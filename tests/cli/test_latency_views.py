"""Issue 21's views through the command line and the acceptance sections: `compare --json` carries each latency
metric per level and side in the shared shape; `accept` shows the four percentiles and goodput per level and the
asked vs received lengths in the load configuration."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import replace

import tui.core.acceptance as A
from tests.unit.core.test_compare import run_records, write_run
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.snapshot import LevelRow, Percentile


def _cli(*argv: str) -> tuple[int, str]:
    from tui.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["compare", *argv])
    return code, buf.getvalue()


def test_compare_json_has_each_metric_per_level_and_side(tmp_path):
    base = write_run(tmp_path / "base.jsonl", run_records(0.98, 400, seed=1), synthetic=False)
    cand = write_run(tmp_path / "cand.jsonl", run_records(0.98, 400, seed=2), synthetic=False)
    code, out = _cli(str(base), str(cand), "--json")
    doc = json.loads(out)
    (row,) = doc["levels"]
    for side in ("base", "cand"):
        lat = row[side]["latency"]
        assert list(lat) == ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"]
        for key, block in lat.items():
            assert {"p50", "p95", "p99", "n"} <= set(block), key
        # the records of tests/unit/core/test_compare.py: TTFT 200 ms, E2E = 1 s (level 4 at 4 req/s), each within
        # 0.2 ms (two runs never share one request's times); no last-token times or gaps (TPOT and ITL: null, n 0)
        assert abs(lat["ttft_ms"]["p95"] - 200.0) < 0.5 and abs(lat["e2e_ms"]["p50"] - 1000.0) < 0.5
        assert lat["tpot_ms"] == {"p50": None, "p95": None, "p99": None, "n": 0} == lat["itl_ms"]
    assert set(row["latency"]) == {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}
    assert abs(row["latency"]["e2e_ms"]["p95"]) < 0.5 and row["latency"]["tpot_ms"]["p95"] is None
    code2, md = _cli(str(base), str(cand))
    assert code2 == code and "| 4 | TPOT | N/A | N/A | N/A / N/A / N/A |" in md


def _ps(vals, n):
    return tuple(Percentile(q, v, n, True, 10) for q, v in zip((0.5, 0.95, 0.99), vals, strict=True))


def _doc(received=None) -> dict:
    base = Monitor(MonitorConfig()).snapshot()
    w = replace(base.cumulative, ttft=_ps((400.0, 800.0, 950.0), 600), completed=600, req_per_s=3.25,
                output_tok_per_s=121.0, goodput_per_s=3.01, good_output_tok_per_s=110.5,
                latency={"tpot": _ps((12.3, 27.5, 44.4), 590), "itl": _ps((61.0, 240.0, 777.0), 580),
                         "e2e": _ps((2210.0, 4400.0, 6130.0), 600)},
                misses={"TTFT": 20, "TPOT": 41}, miss_combos={"TTFT+TPOT": 7}, unjudgeable={"ITL": 12})
    row = LevelRow(level=8.0, round=1, mode="closed", window=w, verdict=base.verdict)
    snap = replace(base, levels=(row,), header={"load": {"mode": "closed", "input_tokens": 128,
                                                          "output_tokens": 64, "levels": [8]}})
    return A.build_acceptance(runs=[A.RunInput(source="r.jsonl", snapshot=snap, received=received)])


def test_accept_load_section_shows_percentiles_and_goodput_per_level():
    doc = _doc()
    (r,) = doc["measured"]["levels"]
    assert r["latency"]["ttft_ms"] == {"p50": 400.0, "p95": 800.0, "p99": 950.0, "n": 600}
    assert r["latency"]["tpot_ms"]["p95"] == 27.5 and r["latency"]["e2e_ms"]["p99"] == 6130.0
    assert (r["throughput_rps"], r["goodput_rps"], r["goodput_tok_s"]) == (3.25, 3.01, 110.5)
    assert r["misses"] == {"TTFT": 20, "TPOT": 41} and r["unjudgeable"] == {"ITL": 12}
    md = A.render_markdown(doc)
    assert ("| `r.jsonl` | 8 | 1 | 400 / 800 / 950 (n 600) | 12.3 / 27.5 / 44.4 (n 590) | 61.0 / 240 / 777 (n 580) "
            "| 2210 / 4400 / 6130 (n 600) | 3.25 | 3.01 | 110.5 | TTFT 20, TPOT 41; TTFT+TPOT 7 |") in md
    assert "level 8: ITL not judgeable on 12 requests" in md


def test_accept_load_configuration_shows_asked_beside_received():
    doc = _doc({"input_tokens": {"min": 120, "p50": 128, "max": 131, "n": 600},
                "output_tokens": {"min": 8, "p50": 60, "max": 64, "n": 600}})
    (x,) = doc["load_configuration"]
    assert x["input_tokens"] == "128" and x["input_tokens_received"] == {"min": 120, "p50": 128, "max": 131, "n": 600}
    assert x["output_tokens_received"]["p50"] == 60
    md = A.render_markdown(doc)
    assert "| 128 | 120 / 128 / 131 | 64 | 8 / 60 / 64 |" in md
    # before the token tally is computed (or without it): said, never made up
    md0 = A.render_markdown(_doc(None))
    assert "| 128 | not computed | 64 | not computed |" in md0
    md1 = A.render_markdown(_doc({"output_tokens": {"min": 8, "p50": 60, "max": 64}}))
    assert "| 128 | not in the records | 64 | 8 / 60 / 64 |" in md1
