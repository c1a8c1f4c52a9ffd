"""`servewatch report` shows both TTFTs whenever both exist (issue 21): on records that carry reasoning, the answer
TTFT and the any-token TTFT percentiles side by side (JSON ``ttft_answer_ms`` / ``ttft_any_ms`` beside ``ttft_ms``,
``ttft_judged`` saying which ``ttft_ms`` is), the text with one line each marked judged / not judged, the verdict line
naming the TTFT judged; records without reasoning show one TTFT, as before. Built files (tests/support/evidence_files).
"""

from __future__ import annotations

import json

import pytest

from tests.support import evidence_files as ef
from tui.cli import main


def _records(reasoning: str = "all") -> list[dict]:
    """honest_closed (TTFT 200 ms, 2 s each, 32 tokens); reasoning from the first token, the answer 1 s later
    (answer TTFT 1200 ms, any TTFT 200 ms): on every request ("all"), on the second half only ("half"), on none
    ("none"), or on every request with no answer token ever ("no_answer")."""
    recs = ef.honest_closed(level=4, seconds=660.0)
    reqs = [r for r in recs if r.get("type") == "request"]
    start = len(reqs) // 2 if reasoning == "half" else (len(reqs) if reasoning == "none" else 0)
    for r in reqs[start:]:
        r["t_first_reasoning"] = r["t_first_token"]
        if reasoning != "no_answer":
            r["t_first_answer"] = r["t_first_token"] + 1.0
    return recs


def _report(tmp_path, capsys, recs: list[dict], *args: str) -> tuple[int, dict, str]:
    f = str(ef.write(tmp_path / "run.jsonl", recs))
    rc = main(["report", "--details", f, "--json", *args])
    rep = json.loads(capsys.readouterr().out)
    assert main(["report", "--details", f, *args]) == rc
    return rc, rep, capsys.readouterr().out


def test_json_and_text_show_both_ttfts_judged_answer_by_default(tmp_path, capsys):
    rc, rep, out = _report(tmp_path, capsys, _records())
    assert rc == 1  # the answer's 1200 ms is over the 1000 ms default SLO
    for w in (rep["measured"]["window"], rep["levels"][0]):
        n = w["n"]
        assert w["ttft_judged"] == "answer"
        assert w["ttft_answer_ms"] == pytest.approx({"p50": 1200.0, "p95": 1200.0, "p99": 1200.0, "n": n})
        assert w["ttft_any_ms"] == pytest.approx({"p50": 200.0, "p95": 200.0, "p99": 200.0, "n": n})
        assert w["ttft_ms"]["p50"] == pytest.approx(1200.0)  # ttft_ms is the one judged
    assert f"TTFT to the first answer token (judged) (n={n}): P50=1200 ms  P95=1200 ms  P99=1200 ms" in out
    assert f"TTFT to the first token of any kind (not judged) (n={n}): P50=200 ms" in out
    assert "(judged on TTFT <= 1000 ms (answer))" in out


def test_ttft_of_any_judges_the_first_token_and_still_shows_the_answer(tmp_path, capsys):
    rc, rep, out = _report(tmp_path, capsys, _records(), "--ttft-of", "any")
    assert rc == 0
    w = rep["measured"]["window"]
    assert w["ttft_judged"] == "any" and w["ttft_ms"]["p50"] == pytest.approx(200.0)
    assert w["ttft_answer_ms"]["p50"] == pytest.approx(1200.0) and w["ttft_any_ms"]["p50"] == pytest.approx(200.0)
    assert "TTFT to the first answer token (not judged)" in out and "first token of any kind (judged)" in out
    assert "(judged on TTFT <= 1000 ms (any))" in out


def test_no_reasoning_one_ttft_as_before(tmp_path, capsys):
    rc, rep, out = _report(tmp_path, capsys, _records("none"))
    assert rc == 0
    for w in (rep["measured"]["window"], rep["levels"][0]):
        assert not {"ttft_answer_ms", "ttft_any_ms", "ttft_judged"} & set(w)
    assert "first answer token" not in out and "any kind" not in out


def test_reasoning_from_mid_level_both_over_every_request(tmp_path, capsys):
    """The any-token TTFT covers the requests before the first one that reasoned too (their only TTFT)."""
    rc, rep, _ = _report(tmp_path, capsys, _records("half"))
    w = rep["measured"]["window"]
    n = w["n"]
    assert w["ttft_any_ms"] == pytest.approx({"p50": 200.0, "p95": 200.0, "p99": 200.0, "n": n})
    assert w["ttft_answer_ms"]["n"] == n and w["ttft_answer_ms"]["p95"] == pytest.approx(1200.0)
    assert w["ttft_answer_ms"]["p50"] == pytest.approx(200.0 if n % 2 == 0 else 1200.0)
    assert w["ttft_answer_ms"] == {k: v for k, v in w["ttft_ms"].items() if k in ("p50", "p95", "p99", "n")}


def test_reasoning_without_an_answer_has_no_answer_ttft(tmp_path, capsys):
    rc, rep, _ = _report(tmp_path, capsys, _records("no_answer"))
    w = rep["measured"]["window"]
    assert rc == 1 and w["misses"] == {"TTFT": w["n"]}  # the user never saw an answer
    assert w["ttft_answer_ms"]["n"] == 0 and w["ttft_any_ms"]["n"] == w["completed"] == w["n"]
