"""The quality suite end to end against the real llama-server serving Gemma 3 270M: the starter set (long context
included) candidate vs baseline, secrets kept out of the result, and a perfect saved baseline that the small model
fails with the documented fallback."""

from __future__ import annotations

import json

from tests.unit.core.quality.test_quality import STARTER, _perfect_baseline
from tui.cli import main
from tui.core import quality as Q


def _report(label: str, doc: dict, capsys) -> None:
    """Show the real model's scores (visible with -s; written past pytest's capture)."""
    cats = {k: f"{v['passed']}/{v['n']}" for k, v in doc["candidate"]["categories"].items()}
    with capsys.disabled():
        print(f"\nQUALITY SCORES ({label}): candidate {doc['candidate']['overall']['passed']}/{doc['candidate']['overall']['n']} {cats}; "
              f"verdict {doc['verdict']['state']}: {doc['verdict']['reason']}")


def test_real_server_candidate_equals_baseline_is_not_fail(llama_server, tmp_path, monkeypatch, capsys):  # noqa: F811
    key = "sk-quality-test-key-0123456789"
    hdr = "x-hdr-secret-987654321"
    monkeypatch.setenv("SW_TEST_KEY", key)
    out = tmp_path / "same.json"
    rc = main(["quality", "--set", str(STARTER), "--url", llama_server.openai_url, "--baseline-url", llama_server.base_url,
               "--long-context-tokens", "1500", "--timeout", "60",
               "--api-key-env", "SW_TEST_KEY", "--header", f"X-Team-Token: {hdr}", "--out", str(out)])
    text = out.read_text()
    doc = json.loads(text)
    # 22 identical pairs cannot show a drop below the 5-point margin (59 are needed): never PASS here
    assert rc == 3 and doc["verdict"]["state"] == Q.NO_EVIDENCE
    assert doc["synthetic"] is False
    cand, base = doc["candidate"], doc["baseline"]
    assert cand["overall"]["n"] == base["overall"]["n"] == 22
    assert doc["comparison"]["paired"] == 22
    assert cand["server"].get("engine") == "llamacpp" and cand["target"]["model"]
    assert doc["set"]["starter"] is True and doc["sampling"]["temperature"] == 0
    lc = doc["set"]["long_context"]
    assert "tokenize" in lc["estimate"] and lc["target_tokens"] == [1500]
    lc_rows = [r for r in cand["cases"] if r["category"] == "long_context"]
    assert len(lc_rows) == 3
    for r in lc_rows:  # the generated context really is ~1500 tokens (prompt tokens from the server's usage)
        assert r["error"] is None and 1400 <= r["prompt_tokens"] <= 1800
    assert all(isinstance(r["latency_s"], float) and r["latency_s"] > 0 for r in cand["cases"])
    assert sorted(cand["headers"]) == ["Authorization", "X-Team-Token"]
    assert set(cand["headers"].values()) == {"<redacted>"}
    printed = capsys.readouterr()
    for secret in (key, hdr):
        assert secret not in text and secret not in printed.out and secret not in printed.err
    _report("candidate = baseline", doc, capsys)


def test_real_server_against_a_perfect_saved_baseline_fails_with_the_fallback(llama_server, tmp_path, capsys):  # noqa: F811
    # the starter's key-task cases (the long-context cases ran in the test above): keeps the real-server time short
    short_set = tmp_path / "short.jsonl"
    short_set.write_text("".join(line + "\n" for line in STARTER.read_text().splitlines() if '"generate"' not in line))
    base = tmp_path / "perfect.json"
    _perfect_baseline(base, 1500, short_set)
    out = tmp_path / "r.json"
    rc = main(["quality", "--set", str(STARTER), "--url", llama_server.base_url, "--baseline", str(base), "--set", str(short_set),
               "--timeout", "60", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["candidate"]["overall"]["pass_rate"] <= 0.5  # a 270M model with a ChatML template: real, and poor
    assert rc == 1 and doc["verdict"]["state"] == Q.FAIL
    # a bare saved case list states no configuration: the advice says so, never a generic fallback (issue 24)
    assert "--baseline-setting KEY=VALUE" in doc["verdict"]["fallback"] and doc["verdict"]["advice"]
    assert doc["baseline"]["source"] == f"file: {base}"
    # every case is either a usable pair or a dropped, counted one (a read timeout on a busy machine drops its pair)
    comp = doc["comparison"]
    assert comp["paired"] + sum(comp["dropped"]["pairs"].values()) == 19 and comp["improved"] == 0
    assert comp["paired"] >= 10
    assert "next configuration to try:" in capsys.readouterr().out
    _report("perfect baseline", doc, capsys)


