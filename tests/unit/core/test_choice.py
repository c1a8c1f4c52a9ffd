"""issue 40: the decision rule of `servewatch select` (``tui.core.choice``) and its comparability check
(``tui.core.select_guard``), on candidates built here: the choice, the near-tie, no ready candidate, costs that
cannot be ranked, SYNTHETIC input, the Pareto front, and the fields that make candidates not comparable."""

from __future__ import annotations

import itertools
import random

import pytest

from tui.core.choice import CandidateInput, Measured, decide
from tui.core.select_guard import comparability, parse_allow, quality_tie_problems, shared_baseline


def cand(name, ready=True, low=2.0, high=4.0, tok=100.0, high_tok=None, price=None, gpus=1, hw="none",
         synthetic=False, reasons=()):
    return CandidateInput(name=name, ready=ready, reasons=tuple(reasons) or (() if ready else ("Quality: FAIL.",)),
                          accept_exit=0 if ready else 1,
                          measured=Measured("concurrency", "closed", low, high, tok, None, high_tok),
                          usd_per_gpu_hour=price, gpus=gpus, hardware=hw, synthetic=synthetic)


def test_the_ready_candidate_with_the_lowest_cost_per_1m_good_tokens_is_chosen():
    doc = decide([cand("a", tok=100.0, price=2.0), cand("b", tok=300.0, price=2.0, high_tok=310.0),
                  cand("c", ready=False, tok=1000.0, price=2.0)])
    assert doc["choice"] == "b" and doc["exit_code"] == 0 and doc["basis"] == "USD"
    rows = {r["name"]: r for r in doc["candidates"]}
    # by hand: $2 per hour / (300 tok/s x 3600 s) x 1e6 = $1.852 per 1M good tokens
    assert rows["b"]["cost_per_1m_good_tokens"] == pytest.approx(2.0 / (300 * 3600) * 1e6)
    assert rows["c"]["ready"] is False and rows["c"]["chosen"] is False  # cheaper, but not ready: never chosen
    assert rows["a"]["capacity"] == {"low": 2.0, "high": 4.0, "unit": "concurrency"}
    assert doc["near_tie"] is None


def test_a_near_tie_within_the_brackets_is_said():
    # a: $1.85 at capacity; b: $2.78 at its capacity, but up to 400 tok/s measured at its bracket's upper end
    doc = decide([cand("a", tok=300.0, high_tok=305.0, price=2.0), cand("b", tok=200.0, high_tok=400.0, price=2.0)])
    assert doc["choice"] == "a" and doc["exit_code"] == 0
    assert doc["near_tie"] and "b ($2.778 at its measured capacity" in doc["near_tie"]
    # an open bracket (nothing above decided) can always flip the order
    doc = decide([cand("a", tok=300.0, high_tok=305.0, price=2.0), cand("b", tok=200.0, high=None, price=2.0)])
    assert "its bracket is open above" in doc["near_tie"]


def test_no_ready_candidate_exits_1_with_what_each_lacks_and_3_below_the_floors():
    doc = decide([cand("a", ready=False, reasons=("Quality: the regression set has not been run.",)),
                  cand("b", ready=False, reasons=("Measured: FAIL.",))])
    assert doc["choice"] is None and doc["exit_code"] == 1
    assert "a (Quality: the regression set has not been run)" in doc["reason"] and "b (Measured: FAIL)" in doc["reason"]
    assert doc["cheapest_measured"].startswith("a: ") and "not a choice: it is not ready" in doc["cheapest_measured"]
    doc = decide([cand("a", ready=False)], not_grade=["window 1 min < 10 min"])
    assert doc["exit_code"] == 3 and "not acceptance-grade" in doc["reason"]


def test_costs_that_cannot_be_set_side_by_side_are_not_ranked():
    doc = decide([cand("a", price=2.0), cand("b")])  # a price for one only
    assert doc["exit_code"] == 3 and doc["choice"] is None and "none for b" in doc["reason"]
    doc = decide([cand("a", hw="NVIDIA L4"), cand("b", hw="NVIDIA H100")])  # GPU-hours of unlike GPUs
    assert doc["exit_code"] == 3 and "not one unit of cost" in doc["reason"]
    doc = decide([cand("a", hw="none", tok=100.0), cand("b", hw="none", tok=200.0)])  # one machine: GPU-hours
    assert doc["exit_code"] == 0 and doc["choice"] == "b" and doc["basis"] == "GPU-hours"
    doc = decide([cand("a", price=1.0, tok=None), cand("b", price=1.0)])
    assert doc["exit_code"] == 3 and "no good output tokens measured at the capacity of a" in doc["reason"]


def test_synthetic_input_never_exits_0():
    doc = decide([cand("a", price=1.0), cand("b", price=1.0, synthetic=True, ready=False)])
    assert doc["choice"] == "a" and doc["exit_code"] == 3 and "SYNTHETIC" in doc["reason"]


def test_refusals_come_first():
    doc = decide([cand("a", price=1.0), cand("b", price=1.0)],
                 {"fields": [], "refused": ["not comparable: the workload differs (x)"], "allowed": [], "unchecked": []})
    assert doc["exit_code"] == 3 and doc["choice"] is None and doc["reason"].startswith("NOT ENOUGH EVIDENCE")


def test_the_property_the_choice_is_ready_cheapest_and_the_front_is_undominated():
    """Seeded random sets of candidates: the choice is always ready and no ready candidate is cheaper; a Pareto
    candidate is never dominated and every other one is."""
    rng = random.Random(40)
    for _ in range(300):
        cs = [cand(f"c{i}", ready=rng.random() < 0.6, low=float(rng.choice([1, 2, 4, 8])),
                   tok=rng.choice([None, rng.uniform(10, 500)]), price=1.5) for i in range(rng.randint(1, 6))]
        doc = decide(cs)
        rows = {r["name"]: r for r in doc["candidates"]}
        ready = [c for c in cs if c.ready]
        if doc["choice"] is not None:
            chosen = rows[doc["choice"]]
            assert chosen["ready"] and doc["exit_code"] == 0
            if len(ready) > 1:
                assert all(chosen["cost_per_1m_good_tokens"] <= rows[c.name]["cost_per_1m_good_tokens"] for c in ready)
        else:
            assert doc["exit_code"] in (1, 3)
            assert not ready or doc["exit_code"] == 3
        pts = [(n, r["cost_per_1m_good_tokens"], r["capacity"]["low"]) for n, r in rows.items()
               if r["cost_per_1m_good_tokens"] is not None]
        for (n, c1, k1), (m, c2, k2) in itertools.permutations(pts, 2):
            if rows[n]["pareto"]:
                assert not (c2 <= c1 and k2 >= k1 and (c2 < c1 or k2 > k1)), (n, m)
        for n, c1, k1 in pts:
            if not rows[n]["pareto"]:
                assert any(c2 <= c1 and k2 >= k1 and (c2 < c1 or k2 > k1) for m, c2, k2 in pts if m != n)


# ------------------------------------------------------------------ comparability


def header(inp=32, out=64, ttft=2000.0, target=0.95, mode="closed", arrival=None, cache=False, **extra):
    load = {"mode": mode, "arrival": arrival, "input_tokens": {"min": inp, "max": inp, "given": str(inp)},
            "output_tokens": {"min": out, "max": out, "given": str(out)}, "ignore_eos": True,
            "cache_policy": {"cache_prompt": cache}}
    return {"type": "run", "schema": "servewatch.record/1", "load": load,
            "verdict_settings": {"ttft_ms": ttft, "tpot_ms": None, "itl_ms": None, "e2e_ms": None,
                                 "ttft_of": "answer", "target": target}, **extra}


@pytest.mark.parametrize("field, other", [
    ("workload", header(inp=512)),
    ("workload", header(cache=True)),
    ("slos", header(ttft=1000.0)),
    ("target", header(target=0.99)),
    ("arrival", header(mode="open", arrival="poisson")),
    ("tokenizer", header(server_identity={"vocab_size": 32000})),
    ("cache_policy", header(server_capacity={"prefix_caching": False})),
])
def test_each_field_that_differs_is_refused_unless_allowed(field, other):
    base = header(server_identity={"vocab_size": 262144}, server_capacity={"prefix_caching": True})
    if field not in ("tokenizer", "cache_policy"):
        other = {**other, "server_identity": {"vocab_size": 262144}, "server_capacity": {"prefix_caching": True}}
    comp = comparability([("a", [base]), ("b", [other])])
    states = {f["field"]: f["state"] for f in comp["fields"]}
    assert states[field] == "differs" and len(comp["refused"]) == 1
    assert f"--allow-different {field}" in comp["refused"][0]
    assert all(s == "same" for f, s in states.items() if f != field)
    allowed = comparability([("a", [base]), ("b", [other])], parse_allow([field.replace("_", "-")]))
    assert allowed["refused"] == [] and allowed["allowed"] == [field]


def test_a_workload_not_stated_is_refused_and_fields_not_recorded_are_said():
    comp = comparability([("a", [header()]), ("b", [{"type": "run", "source": {"kind": "import"}}])])
    assert any("the workload of b is not stated" in r for r in comp["refused"])
    assert any(u.startswith("tokenizer: not recorded") for u in comp["unchecked"])


def test_an_unknown_allow_field_is_bad_usage():
    with pytest.raises(ValueError, match="unknown field 'model'"):
        parse_allow(["model"])


def _qside(ctx, slots, build="b1"):
    return {"server": {"engine": "llamacpp", "build": build, "model": "/m/gemma.gguf", "n_ctx_per_slot": ctx,
                       "slots": slots}, "server_identity": {}}


def test_quality_files_must_share_one_baseline_and_measure_the_candidates_configuration():
    qa = {"candidate": _qside(2048, 1), "baseline": _qside(4096, 4)}
    qb = {"candidate": _qside(2048, 2), "baseline": _qside(4096, 4)}
    qc = {"candidate": _qside(4096, 2), "baseline": _qside(8192, 4)}
    assert shared_baseline({"a": qa, "b": qb})[1] == []
    problems = shared_baseline({"a": qa, "c": qc})[1]
    assert problems and "context 4096 vs 8192" in problems[0]
    run = {"environment": {"server": {"engine": "llamacpp", "build": "b1", "model": "/m/gemma.gguf",
                                      "n_ctx_per_slot": 2048, "slots": 1}}}
    assert quality_tie_problems(qa, [run]) == []
    tie = quality_tie_problems(qb, [run])
    assert tie and "slots 2 in quality vs 1 under load" in tie[0]
