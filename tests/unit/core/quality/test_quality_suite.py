"""The generated standard suite: deterministic from its spec, sized per category, every case's reference answer
passing its own check (and a wrong answer failing), long-context prompts at the lengths asked, the spec recorded and
rebuilt, the team's set merged."""

from __future__ import annotations

import pytest

from tui.core import quality as Q


def _suite(**kw) -> Q.QualitySet:
    return Q.build_suite(Q.SuiteSpec(**{"context_tokens": 2048, **kw}))


def test_default_suite_has_200_cases_80_long_context():
    qs = _suite()
    counts: dict[str, int] = {}
    for c in qs.cases:
        counts[c.category] = counts.get(c.category, 0) + 1
    assert counts == {"arithmetic": 30, "extraction": 30, "format": 30, "transform": 30, "long_context": 80}
    assert qs.suite is not None and qs.suite["name"] == "standard" and qs.suite["seed"] == Q.SuiteSpec().seed
    assert qs.suite["counts"] == counts and len({c.id for c in qs.cases}) == 200


@pytest.mark.parametrize("n", [10, 11, 57, 100, 333])
def test_category_counts_sum_to_n(n):
    counts = Q.category_counts(n)
    assert sum(counts.values()) == n and set(counts) == set(Q.CATEGORIES)
    assert counts["long_context"] == round(0.4 * n)


def test_same_spec_same_cases_other_seed_other_cases():
    a, b, c = _suite(), _suite(), _suite(seed=7)
    assert [x.fingerprint for x in a.cases] == [x.fingerprint for x in b.cases]
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert _suite(level="hard").fingerprint != a.fingerprint


@pytest.mark.parametrize("level", Q.LEVELS)
def test_every_reference_answer_passes_and_a_wrong_one_fails(level):
    qs = _suite(level=level)
    refs = Q.reference_answers(qs)
    assert set(refs) == {c.id for c in qs.cases}
    for case in qs.cases:
        assert Q.evaluate(case, refs[case.id])[0], (case.id, refs[case.id])
        assert not Q.evaluate(case, "I do not know")[0], case.id


def test_long_context_lengths_depths_and_needles():
    qs = _suite(chars_per_token=4.0)
    lc = [c for c in qs.cases if c.category == "long_context"]
    cells = {(c.generated["length_fraction"], c.generated["depth"], c.generated["needles"]) for c in lc}
    assert {f for f, _, _ in cells} == {0.25, 0.5, 0.9} and {d for _, d, _ in cells} == {0.1, 0.5, 0.9}
    assert {n for _, _, n in cells} == {1, 3} and len(cells) == 18  # every length x depth with one and three needles
    for c in lc:
        target = c.generated["target_tokens"]
        assert target == round(c.generated["length_fraction"] * 2048)
        est = sum(len(m["content"]) for m in c.messages) / 4.0
        assert abs(est - target) <= 0.1 * target, (c.id, est, target)
    hard = [c for c in _suite(level="hard").cases if c.category == "long_context"]
    assert {c.generated["needles"] for c in hard} == {1, 5}


def test_spec_round_trip_and_bad_records():
    spec = Q.SuiteSpec(context_tokens=4096, cases=120, seed=9, level="hard", chars_per_token=3.7)
    assert Q.SuiteSpec.from_dict(spec.to_dict()) == spec
    assert Q.build_suite(Q.SuiteSpec.from_dict(spec.to_dict())).fingerprint == Q.build_suite(spec).fingerprint
    for bad in ({"name": "other"}, {"version": 99}, {"cases": 3}, {"level": "easy"}, {"context_tokens": 100},
                {"fractions": [0.5, 0.5]}, {"chars_per_token": 0}, "x", {"seed": "1"}):
        with pytest.raises(Q.SetError):
            Q.SuiteSpec.from_dict(bad) if not isinstance(bad, dict) else Q.SuiteSpec.from_dict({**spec.to_dict(), **bad})


def test_no_context_asks_for_max_context():
    with pytest.raises(Q.SetError, match="--max-context"):
        Q.build_suite(Q.SuiteSpec())


def test_team_set_merged_required_categories_and_duplicates():
    team = Q.parse_set('{"required_categories": ["billing"]}\n'
                       '{"id": "bill-1", "category": "billing", "messages": [{"role": "user", "content": "Total?"}],'
                       ' "max_tokens": 8, "checks": [{"type": "number", "value": 3}]}\n', "team.jsonl")
    assert team.required == ("billing",) and not team.problems
    merged = Q.merge_sets(_suite(cases=20), team)
    assert len(merged.cases) == 21 and merged.required == ("long_context", "billing") and merged.suite and not merged.problems
    dup = Q.parse_set('{"id": "std1-ar-001", "category": "x", "prompt": "p", "max_tokens": 4,'
                      ' "checks": [{"type": "exact", "value": "a"}]}\n', "dup.jsonl")
    assert any("std1-ar-001" in p for p in Q.merge_sets(_suite(cases=20), dup).problems)
    missing = Q.parse_set('{"required_categories": ["nope"]}\n{"id": "a", "category": "x", "prompt": "p",'
                          ' "max_tokens": 4, "checks": [{"type": "exact", "value": "a"}]}\n', "m.jsonl")
    assert any("nope" in p for p in missing.problems)
