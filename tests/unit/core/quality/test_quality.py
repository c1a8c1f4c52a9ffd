"""Quality regression: set format, checks, scoring, the paired regression verdict, the runner and the CLI.

The starter set end to end against the real llama-server + Gemma 3 270M: tests/integration/test_quality_llama.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
from pathlib import Path

import httpx
import pytest

from tests.support.paths import REPO
from tui.cli import main
from tui.cli.quality import default_set_path
from tui.core import quality as Q
from tui.core.redact import Scrubber
from tui.sources.quality_runner import QualityRunner

ROOT = REPO
STARTER = ROOT / "quality" / "starter.jsonl"


def _case(checks, cid="c", category="cat", max_tokens=8):
    return Q.parse_case({"id": cid, "category": category, "messages": [{"role": "user", "content": "q"}],
                         "max_tokens": max_tokens, "checks": checks}, "test")


def _rows(outcomes, category="cat", prefix="c"):
    return [{"id": f"{prefix}{i}", "category": category, "passed": bool(p), "fingerprint": f"fp{i}"}
            for i, p in enumerate(outcomes)]


# ------------------------------------------------------------------ the set format


def test_starter_set_is_labelled_and_complete():
    assert default_set_path() == str(STARTER)
    qs = Q.parse_set(STARTER.read_text(), str(STARTER), long_context_tokens=1500)
    assert qs.problems == []
    assert qs.starter is True and "STARTER" in qs.label and "replace" in qs.label
    cats = {c.category for c in qs.cases}
    assert cats == {"arithmetic", "extraction_json", "format", "factual", "long_context"}
    assert len(qs.cases) == 22
    lc = [c for c in qs.cases if c.category == "long_context"]
    assert [c.id for c in lc] == ["long-context-code-d10", "long-context-code-d50", "long-context-code-d90"]
    readme = (ROOT / "quality" / "README.md").read_text()
    assert "starter" in readme.lower() and "--set" in readme


def test_starter_answers_do_not_appear_in_their_own_prompts():
    # a model that only echoes the prompt must not pass number/contains checks by accident
    qs = Q.parse_set(STARTER.read_text(), "s", long_context_tokens=200)
    for c in qs.cases:
        if c.generated:
            continue
        prompt = " ".join(m["content"] for m in c.messages)
        ok, _ = Q.evaluate(c, prompt)
        assert not ok, f"{c.id} passes by echoing its prompt"


@pytest.mark.parametrize("depth", [0.1, 0.5, 0.9])
def test_long_context_fact_is_placed_at_its_depth_and_sized(depth):
    spec = {"generate": "long_context", "id": "lc", "fact": "The access code is 7319.",
            "question": "What is the access code?", "answer": "7319", "depths": [depth], "tokens": 1500}
    (case,) = Q.expand_long_context(spec, "t", chars_per_token=4.0)
    text = case.messages[-1]["content"]
    doc = text.rsplit("\n\n", 1)[0]
    pos = doc.index("The access code is 7319.")
    assert abs(pos / len(doc) - depth) < 0.03
    assert abs(len(doc) - 1500 * 4) < 200  # ~N tokens at 4 chars/token
    assert text.count("7319") == 1 and not any(ch.isdigit() for ch in doc.replace("7319", ""))
    assert case.generated["target_tokens"] == 1500 and case.id == f"lc-d{round(depth * 100):02d}"
    ok, _ = Q.evaluate(case, "The code is 7319.")
    bad, failed = Q.evaluate(case, "The code is 73190.")
    assert ok and not bad and failed["type"] == "regex"


def test_long_context_override_and_fingerprint_track_the_target_not_the_calibration():
    spec = {"generate": "long_context", "id": "lc", "fact": "F is 12.", "question": "F?", "answer": "12"}
    a = Q.expand_long_context(spec, "t", tokens=500, chars_per_token=4.0)
    b = Q.expand_long_context(spec, "t", tokens=500, chars_per_token=5.0)
    c = Q.expand_long_context(spec, "t", tokens=900, chars_per_token=4.0)
    assert len(a) == 3 and [x.generated["depth"] for x in a] == [0.1, 0.5, 0.9]
    assert [x.fingerprint for x in a] == [x.fingerprint for x in b]
    assert a[0].fingerprint != c[0].fingerprint
    assert len(b[0].messages[0]["content"]) > len(a[0].messages[0]["content"])


def test_set_problems_are_reported_with_file_and_line_never_dropped():
    text = "\n".join([
        '{"id": "ok", "messages": [{"role": "user", "content": "x"}], "checks": [{"type": "contains", "value": "y"}]}',
        "not json",
        '{"id": "bad-check", "prompt": "x", "checks": [{"type": "telepathy"}]}',
        '{"id": "bad-re", "prompt": "x", "checks": [{"type": "regex", "pattern": "("}]}',
        '{"id": "both", "prompt": "x", "messages": [{"role": "user", "content": "x"}], "checks": [{"type": "exact", "value": "a"}]}',
        '{"id": "ok", "prompt": "again", "checks": [{"type": "exact", "value": "a"}]}',
        '{"id": "nochecks", "prompt": "x", "checks": []}',
        '{"generate": "haiku", "id": "g"}',
    ])
    qs = Q.parse_set(text, "set.jsonl")
    msgs = "\n".join(qs.problems)
    for frag in ("set.jsonl:2: invalid JSON", "set.jsonl:3", "telepathy", "set.jsonl:4", "does not compile",
                 "set.jsonl:5", "exactly one of", "'ok' appears 2 times", "set.jsonl:7", "set.jsonl:8", "haiku"):
        assert frag in msgs
    assert Q.parse_set("", "empty").problems == ["empty: no cases"]


def test_cli_refuses_a_broken_set_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "prompt": "p", "checks": [{"type": "nope"}]}\n')
    assert main(["quality", "--url", "http://127.0.0.1:9", "--set", str(bad), "--out", str(tmp_path / "o.json")]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
    assert main(["quality", "--url", "ftp://x", "--set", str(bad)]) == 2
    assert main(["quality", "--url", "http://127.0.0.1:9", "--margin", "1.5"]) == 2
    assert main(["quality", "--url", "http://127.0.0.1:9", "--header", "no colon"]) == 2
    assert main(["quality", "--url", "http://127.0.0.1:9", "--baseline", str(tmp_path / "missing.json")]) == 2


# ------------------------------------------------------------------ checks


@pytest.mark.parametrize("check, answer, ok", [
    ({"type": "exact", "value": "YES", "case_sensitive": True}, " YES.\n", True),
    ({"type": "exact", "value": "YES", "case_sensitive": True}, "yes", False),
    ({"type": "exact", "value": "paris"}, "Paris", True),
    ({"type": "exact", "value": ["a", "b"]}, "b", True),
    ({"type": "exact", "value": "YES"}, "YES, sure", False),
    ({"type": "contains", "value": "Paris"}, "It is paris.", True),
    ({"type": "contains", "value": "Paris", "case_sensitive": True}, "It is paris.", False),
    ({"type": "contains", "value": ["red", "blue"], "all": True}, "red and green", False),
    ({"type": "contains", "value": ["red", "blue"]}, "red and green", True),
    ({"type": "not_contains", "value": "sorry"}, "Sorry, I cannot", False),
    ({"type": "regex", "pattern": "^blue$"}, "blue", True),
    ({"type": "regex", "pattern": "^blue$", "flags": "i"}, "Blue", True),
    ({"type": "regex", "pattern": "^blue$"}, "Blue", False),
    ({"type": "json"}, '{"a": 1}', True),
    ({"type": "json"}, "{a: 1}", False),
    ({"type": "json", "required_keys": ["a", "b"]}, '```json\n{"a": 1, "b": 2}\n```', True),
    ({"type": "json", "required_keys": ["a"], "strict": True}, '```json\n{"a": 1}\n```', False),
    ({"type": "json", "required_keys": ["a", "b"]}, '{"a": 1}', False),
    ({"type": "json", "required_keys": ["a"]}, "[1, 2]", False),
    ({"type": "json", "equals": {"name": "Maria Lopez", "age": 34}}, '{"name": "maria lopez", "age": 34.0}', True),
    ({"type": "json", "equals": {"age": 34}}, '{"age": 35}', False),
    ({"type": "number", "value": 42}, "17 + 25 = 42", True),
    ({"type": "number", "value": 42}, "42 is not 17 + 25", False),
    ({"type": "number", "value": 42, "pick": "first"}, "42 is not 17 + 25", True),
    ({"type": "number", "value": 42, "pick": "any"}, "maybe 41 or 42 or 43", True),
    ({"type": "number", "value": 42, "pick": "only"}, "41 or 42", False),
    ({"type": "number", "value": 1234.5}, "The total is 1,234.50 EUR", True),
    ({"type": "number", "value": 3.14, "tolerance": 0.01}, "about 3.141", True),
    ({"type": "number", "value": 100, "rel_tolerance": 0.05}, "104", True),
    ({"type": "number", "value": 100, "rel_tolerance": 0.05}, "106", False),
    ({"type": "number", "value": -5}, "minus: -5", True),
    ({"type": "number", "value": 7}, "seven", False),
    ({"type": "number", "value": 1042}, "Order A-1042", True),
    ({"type": "number", "value": 2}, "5-3 = 2", True),
    ({"type": "number", "value": 0.5, "pick": "only"}, "about .5", True),
    ({"type": "number", "value": 5, "pick": "any"}, "3,4,5", True),
])
def test_checks(check, answer, ok):
    passed, failed = Q.evaluate(_case([check]), answer)
    assert passed is ok
    assert (failed is None) is ok
    if not ok:
        assert failed["type"] == check["type"] and failed["index"] == 0 and failed["detail"]


def test_think_block_is_removed_and_first_failing_check_is_named():
    c = _case([{"type": "contains", "value": "Paris"}, {"type": "exact", "value": "Paris"}])
    assert Q.evaluate(c, "<think>Lyon? no, Paris is...</think>\nParis")[0] is True
    ok, failed = Q.evaluate(c, "<think>Paris</think> I think it is Paris, France")
    assert not ok and failed["index"] == 1 and failed["type"] == "exact"
    assert Q.evaluate(_case([{"type": "contains", "value": "Paris"}]), "<think>Paris</think> Lyon")[0] is False


def test_failed_request_is_a_failed_case_never_skipped():
    c = _case([{"type": "not_contains", "value": "x"}])  # an empty answer would pass this check
    row = Q.case_result(c, None, latency_s=0.3, error="http_5xx", error_detail="HTTP 500")
    assert row["passed"] is False and row["failed_check"]["type"] == "request" and row["error"] == "http_5xx"
    s = Q.summarize([row])
    assert s["overall"]["n"] == 1 and s["overall"]["passed"] == 0 and s["errors_by_class"] == {"http_5xx": 1}


def test_summary_rates_and_wilson_intervals():
    rows = _rows([1, 1, 1, 0], "a") + _rows([0, 0], "b", prefix="d")
    s = Q.summarize(rows)
    assert s["categories"]["a"]["pass_rate"] == 0.75 and s["categories"]["b"]["pass_rate"] == 0.0
    lo, hi = s["categories"]["a"]["wilson_95"]
    # Wilson 95% for 3/4, by hand: centre (0.75 + z^2/8) / (1 + z^2/4), half-width as in the formula
    z = 1.959963984540054
    centre = (0.75 + z * z / 8) / (1 + z * z / 4)
    half = z * math.sqrt(0.75 * 0.25 / 4 + z * z / 64) / (1 + z * z / 4)
    assert lo == pytest.approx(centre - half) and hi == pytest.approx(centre + half)
    assert s["overall"] == {"n": 6, "passed": 3, "pass_rate": 0.5, "wilson_95": s["overall"]["wilson_95"]}


# ------------------------------------------------------------------ statistics of the verdict


def test_mcnemar_exact_by_hand():
    assert Q.mcnemar_one_sided(5, 0) == pytest.approx(1 / 32)
    assert Q.mcnemar_one_sided(0, 0) == 1.0
    # P(X >= 4), X ~ Bin(6, 1/2) = (15 + 6 + 1) / 64
    assert Q.mcnemar_one_sided(4, 2) == pytest.approx(22 / 64)


@pytest.mark.parametrize("n10, n01, n, m", [(3, 1, 40, 0.05), (0, 0, 25, 0.05), (10, 2, 30, 0.1), (1, 6, 50, 0.0),
                                           (5, 5, 12, 0.2)])
def test_restricted_mle_maximises_the_likelihood(n10, n01, n, m):
    nc = n - n10 - n01

    def loglik(q):
        p10, p01 = q + m, q
        pc = 1 - p10 - p01
        if p01 < 0 or p10 <= 0 or pc <= 0 or (p01 == 0 and n01):
            return -math.inf
        return n10 * math.log(p10) + (n01 * math.log(p01) if n01 else 0.0) + nc * math.log(pc)

    q_hat = Q.restricted_p01(n10, n01, n, m)
    grid = [i / 20000 for i in range(0, 20000)]
    best = max(grid, key=loglik)
    assert q_hat == pytest.approx(best, abs=2e-4)


def test_identical_outcomes_pass_only_when_the_noninferiority_test_shows_it():
    # 22 identical pairs (the starter set's size): no test can show a drop below 5 points -> NO_EVIDENCE
    rows = _rows([1] * 15 + [0] * 7)
    comp, v = Q.compare(rows, rows)
    assert comp["regressed"] == comp["improved"] == 0
    assert v["state"] == Q.NO_EVIDENCE and v["exit_code"] == 3 and "59 usable pairs" in v["reason"]
    assert Q.pairs_needed(Q.DEFAULT_MARGIN, Q.DEFAULT_ALPHA) == 59
    # one pair short of the exact guard, then enough
    _, v = Q.compare(_rows([1] * 40 + [0] * 18), _rows([1] * 40 + [0] * 18))
    assert v["state"] == Q.NO_EVIDENCE
    comp, v = Q.compare(_rows([1] * 40 + [0] * 19), _rows([1] * 40 + [0] * 19))
    assert v["state"] == Q.PASS and v["exit_code"] == 0 and comp["p_noninferior"] < 0.05
    assert comp["p_noninferior_exact_guard"] < 0.05 and "with evidence" in v["reason"]
    few = _rows([1] * 8 + [0] * 2)
    _, v = Q.compare(few, few)
    assert v["state"] == Q.NO_EVIDENCE and v["exit_code"] == 3 and "too few" in v["reason"]


def test_noninferiority_with_evidence_passes_despite_a_small_drop():
    base = _rows([1] * 200)
    cand = _rows([0, 0] + [1] * 198)
    comp, v = Q.compare(cand, base)
    assert comp["delta"] == pytest.approx(0.01)
    assert v["state"] == Q.PASS and comp["p_noninferior"] < 0.05 and "with evidence" in v["reason"]


def test_perfect_baseline_vs_poor_candidate_fails_and_names_the_fallback():
    base = _rows([1] * 22)
    cand = _rows([1] + [0] * 21)
    comp, v = Q.compare(cand, base)
    assert v["state"] == Q.FAIL and v["exit_code"] == 1
    assert comp["mcnemar_p_worse"] == pytest.approx(0.5**21)
    # the rows alone state no configuration: the advice says exactly that, never a generic fallback (issue 24)
    assert v["advice"] == [{"category": "cat", "try": "stating what differs between the two configurations",
                            "because": Q.NOTHING_KNOWN}]
    assert "--setting KEY=VALUE" in v["fallback"] and "larger model" not in v["fallback"]


def test_unclear_drop_is_no_evidence_not_fail():
    base = _rows([1] * 30)
    cand = _rows([0, 0, 0] + [1] * 27)  # 3 regressions: exact p = 1/8, not evidence
    comp, v = Q.compare(cand, base)
    assert v["state"] == Q.NO_EVIDENCE and comp["mcnemar_p_worse"] == pytest.approx(0.125)
    assert v["fallback"] is None


def test_worse_but_within_margin_evidence_is_not_fail():
    # clearly worse (McNemar significant) but the drop is well inside a 20-point margin
    base = _rows([1] * 400)
    cand = _rows([0] * 20 + [1] * 380)
    comp, v = Q.compare(cand, base, margin=0.2)
    assert comp["mcnemar_p_worse"] < 1e-5
    assert v["state"] == Q.PASS


def test_no_baseline_is_never_pass():
    comp, v = Q.compare(_rows([1] * 50), None)
    assert comp is None and v["state"] == Q.NO_BASELINE and v["exit_code"] == 3 and "50/50" in v["reason"]


def test_cases_with_different_content_are_not_paired():
    cand = _rows([1] * 25)
    base = [dict(r) for r in _rows([1] * 25)]
    base[0]["fingerprint"] = "other"
    del base[1]["fingerprint"]
    base.append({"id": "extra", "passed": True, "category": "cat"})
    comp, _ = Q.compare(cand, base)
    assert comp["paired"] == 24
    notes = " ".join(comp["notes"])
    assert "differ in content" in notes and "c0" in notes and "paired by id only" in notes and "extra" in notes


def test_category_regression_is_flagged_even_when_overall_passes():
    base = _rows([1] * 200, "general") + _rows([1] * 6, "long_context", prefix="lc")
    cand = _rows([1] * 200, "general") + _rows([0] * 6, "long_context", prefix="lc")
    comp, v = Q.compare(cand, base, margin=0.05)
    assert comp["per_category"]["long_context"]["regressed"] == 6
    assert any("long_context" in n and "lost 6 of 6" in n for n in comp["notes"])


def test_bad_margin_or_alpha_raise():
    with pytest.raises(ValueError):
        Q.compare([], [], margin=1.0)
    with pytest.raises(ValueError):
        Q.compare([], [], alpha=0)


def test_baseline_file_shapes_and_recheck(tmp_path):
    rows = _rows([1] * 60)
    for doc in (rows, {"cases": rows}, {"schema": Q.RESULT_SCHEMA, "candidate": {"cases": rows}}):
        assert len(Q.baseline_from_result(doc)["cases"]) == 60
    for bad in ({}, [], {"cases": [{"id": 1, "passed": True}]}, {"cases": [{"id": "a", "passed": "yes"}]}):
        with pytest.raises(Q.SetError):
            Q.baseline_from_result(bad)
    qs = Q.QualitySet([], [])
    doc = Q.build_result(qset=qs, set_source="s", set_sha256=None, candidate=Q.run_section(rows),
                         baseline=Q.run_section(rows))
    assert doc["verdict"]["state"] == Q.PASS and doc["synthetic"] is False
    doc["verdict"]["state"] = "FAIL"
    assert Q.recheck(doc)[1]["state"] == Q.PASS
    with pytest.raises(Q.SetError):
        Q.recheck({"schema": "other"})


# ------------------------------------------------------------------ the runner (mock transport)


def _mock_handler(log):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        log.append((request.url.path, dict(request.headers), body))
        path = request.url.path
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "mock-model", "owned_by": "vllm"}]})
        if path in ("/props", "/version", "/info"):
            return httpx.Response(404)
        if path == "/tokenize":
            return httpx.Response(200, json={"tokens": list(range(len(body["content"]) // 5))})
        if "cache_prompt" in body:
            return httpx.Response(400, json={"error": "unknown field cache_prompt"})
        content = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        if "boom" in content:
            return httpx.Response(500, text="internal error, Authorization: Bearer sk-leaky-1234567890")
        if "slow down" in content:
            return httpx.Response(429, json={"error": "rate limited"})
        if "garbage" in content:
            return httpx.Response(200, text="<html>not json</html>")
        if "completion" in content:
            return httpx.Response(200, json={"choices": [{"text": " 42", "finish_reason": "stop"}]})
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "Paris"},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 11, "completion_tokens": 1}})
    return handler


def test_runner_sends_deterministic_sampling_and_classifies_failures():
    log: list = []
    cases = [
        _case([{"type": "contains", "value": "Paris"}], "ok"),
        Q.parse_case({"id": "boom", "messages": [{"role": "user", "content": "boom"}],
                      "checks": [{"type": "contains", "value": "x"}]}, "t"),
        Q.parse_case({"id": "429", "messages": [{"role": "user", "content": "slow down"}],
                      "checks": [{"type": "contains", "value": "x"}]}, "t"),
        Q.parse_case({"id": "garbage", "messages": [{"role": "user", "content": "garbage"}],
                      "checks": [{"type": "contains", "value": "x"}]}, "t"),
        Q.parse_case({"id": "compl", "prompt": "completion please", "checks": [{"type": "number", "value": 42}]}, "t"),
    ]
    secret = "sk-test-secret-abcdef123456"
    r = QualityRunner("http://mock.local/v1", headers={"Authorization": f"Bearer {secret}"},
                      transport=httpx.MockTransport(_mock_handler(log)), concurrency=2)

    async def go():
        await r.probe()
        return await r.run(cases)

    rows = asyncio.run(go())
    assert r.model == "mock-model" and r.chars_per_token == pytest.approx(5.0, rel=0.01)
    by = {x["id"]: x for x in rows}
    assert [x["id"] for x in rows] == ["ok", "boom", "429", "garbage", "compl"]
    assert by["ok"]["passed"] and by["ok"]["prompt_tokens"] == 11 and by["ok"]["answer_excerpt"] == "Paris"
    assert by["boom"]["error"] == "http_5xx" and not by["boom"]["passed"]
    assert "sk-leaky" not in by["boom"]["error_detail"] and "<redacted>" in by["boom"]["error_detail"]
    assert by["429"]["error"] == "http_429" and by["garbage"]["error"] == "malformed_response"
    assert by["compl"]["passed"]
    sent = [b for p, _, b in log if p.endswith("/completions")]
    assert all(b["temperature"] == 0 and b["top_p"] == 1 and b["seed"] == Q.DEFAULT_SEED and b["stream"] is False
               for b in sent)
    assert any("cache_prompt" in b for b in sent)  # tried first, then dropped after the 400
    assert "the server rejected 'cache_prompt': sent without it" in r.notes
    assert any(p == "/v1/completions" and b["prompt"] == "completion please" for p, _, b in log)
    assert all(h.get("authorization") == f"Bearer {secret}" for p, h, _ in log if p.endswith("completions"))
    assert secret not in json.dumps(rows)


def test_scrubber_keeps_answers_intact_but_cleans_details():
    s = Scrubber(["supersecretvalue"])
    assert s.redact("basic arithmetic\n  line two") == "basic arithmetic\n  line two"
    assert s("x supersecretvalue y Bearer abc.def-123") == "x <redacted> y Bearer <redacted>"


def _free_port() -> int:
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def _perfect_baseline(path: Path, long_context_tokens: int, set_path: Path = STARTER) -> None:
    qs = Q.parse_set(set_path.read_text(), str(set_path), long_context_tokens=long_context_tokens)
    path.write_text(json.dumps({"cases": [{"id": c.id, "category": c.category, "fingerprint": c.fingerprint,
                                           "passed": True} for c in qs.cases]}))


def test_unreachable_endpoints_are_refused_before_any_case_never_pass(tmp_path, capsys):
    # the measured bug: `quality --url http://127.0.0.1:9 --baseline-url http://127.0.0.1:9` printed
    # "quality verdict: PASS" and exited 0 after 22 connect errors on each side
    url = f"http://127.0.0.1:{_free_port()}"
    out = tmp_path / "r.json"
    rc = main(["quality", "--url", url, "--baseline-url", url, "--out", str(out), "--long-context-tokens", "200"])
    printed = capsys.readouterr()
    assert rc == 2 and not out.exists()
    assert "PASS" not in printed.out and "verdict" not in printed.out
    lines = printed.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servewatch: quality: cannot reach") and "Traceback" not in printed.err
    # a reachable candidate does not hide an unreachable baseline (both are probed first)
    base = tmp_path / "perfect.json"
    _perfect_baseline(base, 200)
    rc = main(["quality", "--set", str(STARTER), "--url", url, "--baseline", str(base), "--out", str(out), "--long-context-tokens", "200"])
    assert rc == 2 and not out.exists() and "cannot reach" in capsys.readouterr().err


def test_transport_errors_drop_the_pair_and_are_counted_not_scored():
    base = _rows([1] * 70)
    cand = [dict(r) for r in _rows([1] * 70)]
    for r in cand[:15]:  # the candidate could not be reached for 15 cases
        r.update(passed=False, error="connect")
    comp, v = Q.compare(cand, base)
    assert comp["paired"] == 55 and comp["regressed"] == 0
    assert comp["dropped"]["pairs"] == {"candidate transport error": 15}
    assert comp["dropped"]["candidate"] == {"connect": 15}
    assert v["state"] == Q.NO_EVIDENCE and "55 usable paired cases" in v["reason"] and "15 pair(s) dropped" in v["reason"]
    # a baseline that gave no answer (any request error) cannot make the candidate look better
    base2 = [dict(r) for r in _rows([1] * 70)]
    for r in base2[:10]:
        r.update(passed=False, error="http_5xx")
    comp, v = Q.compare(_rows([1] * 70), base2)
    assert comp["improved"] == 0 and comp["paired"] == 60 and comp["dropped"]["baseline"] == {"http_5xx": 10}
    # an HTTP error on the candidate is a failed case (the server answered): it counts against the candidate
    cand3 = [dict(r) for r in _rows([1] * 70)]
    for r in cand3[:30]:
        r.update(passed=False, error="http_5xx")
    comp, v = Q.compare(cand3, _rows([1] * 70))
    assert comp["regressed"] == 30 and v["state"] == Q.FAIL


def test_a_candidate_that_hangs_or_resets_on_cases_fails_them_instead_of_losing_them():
    """Dropping a candidate's read timeouts would let a server that hangs on the hard cases PASS on the rest."""
    base = _rows([1] * 200)
    cand = [dict(r) for r in _rows([1] * 200)]
    for r in cand[:12]:
        r.update(passed=False, error="read_timeout")
    for r in cand[12:20]:
        r.update(passed=False, error="stream_reset")
    comp, v = Q.compare(cand, base)
    assert comp["paired"] == 200 and comp["regressed"] == 20 and not comp["dropped"]["candidate"]
    assert v["state"] != Q.PASS
    # the same outcomes with those 20 pairs dropped would have looked perfect: that is what must not happen
    comp2, v2 = Q.compare(_rows([1] * 180), _rows([1] * 180))
    assert v2["state"] == Q.PASS


def test_every_pair_dropped_or_a_side_without_a_successful_case_is_no_evidence():
    dead = [dict(r, passed=False, error="connect") for r in _rows([0] * 22)]
    comp, v = Q.compare(dead, dead)
    assert comp["paired"] == 0 and v["state"] == Q.NO_EVIDENCE and v["exit_code"] == 3
    assert "no usable paired cases" in v["reason"]
    # the candidate answered nothing (every request an HTTP error): not measured, neither PASS nor FAIL
    broken = [dict(r, passed=False, error="http_5xx") for r in _rows([0] * 80)]
    comp, v = Q.compare(broken, _rows([1] * 80))
    assert v["state"] == Q.NO_EVIDENCE and "answered none" in v["reason"] and "http_5xx=80" in v["reason"]
    # both sides answer and both score 0/22 (or 0/200): the baseline passed nothing, so nothing could regress
    for n in (22, 200):
        zero = _rows([0] * n)
        comp, v = Q.compare(zero, zero)
        assert comp["paired"] == n and v["state"] == Q.NO_EVIDENCE and "baseline passed none" in v["reason"]
    # a candidate that answers everything wrongly against a good baseline is still a FAIL
    comp, v = Q.compare(_rows([0] * 60), _rows([1] * 60))
    assert v["state"] == Q.FAIL and comp["regressed"] == 60


def test_a_saved_baseline_without_a_successful_case_is_refused(tmp_path, capsys):
    for rows in (_rows([0] * 22), [dict(r, error="connect") for r in _rows([0] * 22)]):
        with pytest.raises(Q.SetError, match="no successful case"):
            Q.baseline_from_result({"cases": rows})
        f = tmp_path / "dead.json"
        f.write_text(json.dumps({"cases": rows}))
        out = tmp_path / "r.json"
        rc = main(["quality", "--url", f"http://127.0.0.1:{_free_port()}", "--baseline", str(f), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and not out.exists() and len(err) == 1 and "no successful case" in err[0] and str(f) in err[0]
    # a saved result (accept's recheck) may hold such a side: it is judged NO_EVIDENCE, not refused
    doc = Q.build_result(qset=Q.QualitySet([], []), set_source="s", set_sha256=None,
                         candidate=Q.run_section(_rows([0] * 22)), baseline=Q.run_section(_rows([0] * 22)))
    assert Q.recheck(doc)[1]["state"] == Q.NO_EVIDENCE


def _boundary_pass_rate(n: int, p01: float, margin: float, reps: int, seed: int) -> float:
    """Share of PASS verdicts when the candidate's true drop equals the margin (p10 = margin + p01)."""
    import random

    rng = random.Random(seed)
    passes = 0
    for _ in range(reps):
        n10 = n01 = 0
        for _ in range(n):
            u = rng.random()
            if u < margin + p01:
                n10 += 1
            elif u < margin + 2 * p01:
                n01 += 1
        rows_c = _rows([0] * n10 + [1] * (n - n10 - n01) + [1] * n01)
        rows_b = _rows([1] * n10 + [1] * (n - n10 - n01) + [0] * n01)
        passes += Q.compare(rows_c, rows_b, margin=margin)[1]["state"] == Q.PASS
    return passes / reps


@pytest.mark.parametrize("n,p01", [(59, 0.0), (80, 0.02), (150, 0.1)])
def test_pass_when_the_drop_equals_the_margin_is_rare(n, p01):
    """Seeded simulation: at the boundary of the null hypothesis (true drop = margin) PASS comes at most
    alpha of the time (plus Monte Carlo slack): PASS is evidence, not the absence of regressions."""
    rate = _boundary_pass_rate(n, p01, 0.05, reps=600, seed=n)
    se = math.sqrt(0.05 * 0.95 / 600)
    assert rate <= 0.05 + 3 * se


def test_pass_on_uniformly_poor_outcomes_warns_about_absolute_quality():
    rows = _rows([1] * 40 + [0] * 80)
    comp, v = Q.compare(rows, rows)
    assert v["state"] == Q.PASS and "nothing about absolute quality" in v["reason"]
    assert any("nothing about absolute quality" in n for n in comp["notes"])
