"""TokenTally: asked vs received token lengths, server vs client counts, the tolerance, bounded memory."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core.records import RequestRecord
from tui.core.token_counts import LengthDist, TokenTally, disagree, tolerance


def _nearest(vals: list[int], q: float) -> int:
    s = sorted(vals)
    return s[max(1, math.ceil(q * len(s) - 1e-12)) - 1]


def test_tolerance_is_max_one_token_or_two_percent():
    assert [tolerance(n) for n in (0, 1, 64, 99, 100, 149, 150, 1000)] == [1, 1, 1, 1, 2, 2, 3, 20]
    assert not disagree(64, 63) and disagree(64, 62)
    assert not disagree(1000, 980) and disagree(1000, 979)


def test_the_issue_example_server_64_chunks_63_is_within_tolerance_and_62_is_not():
    t = TokenTally()
    for chunks in [63] * 200 + [62] * 12:
        t.add({"input_tokens_asked": 128, "usage_input_tokens": 128, "output_tokens_asked": 64,
               "usage_output_tokens": 64, "output_chunks": chunks, "output_tokens": 64})
    s = t.summary()
    assert s["disagree"]["output"] == 12 and s["disagree"]["output_compared"] == 212 and s["disagree"]["of"] == 212
    assert s["disagree"]["input"] == 0
    assert s["output"]["received"] == {"min": 64, "p50": 64, "max": 64, "n": 212}  # the server's count first
    out, inp = t.lines()
    assert out == ("output tokens: asked 64 / 64 / 64, received 64 / 64 / 64 (min / P50 / max); server counted 64, "
                   "62 chunks seen, on 12 of 212 requests (tolerance \u00b1max(1, 2%))")
    assert "agree on all 212 requests" in inp


def test_received_falls_back_to_chunks_then_client_count_and_asked_unknown_is_said():
    t = TokenTally()
    t.add({"output_chunks": 10, "output_tokens": 99})  # no server count: the chunks seen
    t.add({"output_tokens": 8})  # an older record: the client's count
    s = t.summary()
    assert s["output"]["received"]["min"] == 8 and s["output"]["received"]["max"] == 10
    assert s["output"]["asked"]["n"] == 0 and s["output"]["asked"]["p50"] is None
    out, inp = t.lines()
    assert out.startswith("output tokens: asked unknown, received 8 / 8 / 10")  # P50 of (8, 10): nearest rank = 8
    assert "no request carries both a server count and chunk count" in out
    assert "received unknown" in inp and "input tokens: asked unknown" in inp


def test_input_asked_is_the_generators_field_and_input_tokens_is_received():
    t = TokenTally()
    t.add({"input_tokens_asked": 128, "input_tokens": 151, "usage_input_tokens": 151})
    t.add({"input_tokens_asked": 128, "input_tokens": 140})  # no usage field: input_tokens is the server's count
    s = t.summary()
    assert s["input"]["asked"] == {"min": 128, "p50": 128, "max": 128, "n": 2}
    assert s["input"]["received"] == {"min": 140, "p50": 140, "max": 151, "n": 2}
    assert s["disagree"]["input"] == 2 and s["disagree"]["input_compared"] == 2


def test_a_parsed_record_and_its_dict_tally_the_same():
    from tui.core.records import parse_object
    d = {"type": "request", "id": "a", "t_sent": 1.7e9, "t_end": 1.7e9 + 1, "complete": True,
         "t_first_token": 1.7e9 + 0.1, "input_tokens": 140, "output_tokens": 64, "input_tokens_asked": 128,
         "output_tokens_asked": 64, "usage_output_tokens": 64, "usage_input_tokens": 140, "output_chunks": 61}
    a, b = TokenTally(), TokenTally()
    a.add(parse_object(d))
    b.add(d)
    assert a.summary() == b.summary()
    s = a.summary()
    assert s["output"]["asked"]["p50"] == 64 and s["input"]["asked"]["p50"] == 128
    assert s["disagree"]["output"] == 1 and s["disagree"]["input"] == 1


def test_a_session_turn_asked_its_whole_prompt_context_tokens_not_its_user_message():
    from tui.core.monitor import Monitor
    from tui.core.records import parse_object
    d = {"type": "request", "id": "a", "t_sent": 1.7e9, "t_end": 1.7e9 + 1, "complete": True,
         "t_first_token": 1.7e9 + 0.1, "input_tokens": 352, "usage_input_tokens": 352, "output_tokens": 16,
         "input_tokens_asked": 42, "output_tokens_asked": 16, "session": "r-s000001", "turn": 2,
         "context_tokens": 340, "phase": "measure", "level": 2.0, "round": 1}
    a, b = TokenTally(), TokenTally()
    a.add(parse_object(d))
    b.add(d)
    for t in (a, b):
        assert t.summary()["input"]["asked"]["p50"] == 340  # prefix + history + message, not the 42 of the message
    plain = dict(d)
    del plain["session"], plain["turn"], plain["context_tokens"]
    c = TokenTally()
    c.add(parse_object(plain))
    assert c.summary()["input"]["asked"]["p50"] == 42
    mon = Monitor()
    mon.add(parse_object(d))
    st = mon.levels[(2.0, 1)]
    assert st.tokens.summary()["input"]["asked"]["p50"] == 340  # the Monitor's hot path reads the same field


def test_record_objects_work_and_missing_fields_are_read_as_absent():
    r = RequestRecord(id="a", t_sent=1.0, t_end=2.0, complete=True, t_intended=1.0, input_tokens=64, output_tokens=32)
    t = TokenTally()
    t.add(r)  # whatever issue-21 fields the record type has or lacks: no AttributeError
    s = t.summary()
    # input_tokens is the server's count in the load generator's records: received, never "asked"
    assert s["input"]["received"] == {"min": 64, "p50": 64, "max": 64, "n": 1} and s["input"]["asked"]["n"] == 0
    assert s["output"]["received"]["p50"] == (getattr(r, "usage_output_tokens", None) or 32)


def test_bad_values_are_not_counted():
    t = TokenTally()
    t.add({"output_tokens": -1, "input_tokens": True, "usage_output_tokens": float("nan"),
           "output_chunks": 2.5, "output_tokens_asked": float("inf")})
    s = t.summary()
    assert s["output"]["received"]["n"] == 0 and s["input"]["asked"]["n"] == 0 and s["output"]["asked"]["n"] == 0
    assert s["disagree"]["of"] == 1 and s["disagree"]["output_compared"] == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=300))
def test_exact_below_the_cap_matches_the_nearest_rank(vals):
    d = LengthDist(cap=10_000)
    for v in vals:
        d.add(v)
    assert not d.approximate
    assert d.summary() == {"min": min(vals), "p50": _nearest(vals, 0.5), "max": max(vals), "n": len(vals)}
    assert d.quantile(0.95) == _nearest(vals, 0.95)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=200_000), min_size=50, max_size=400))
def test_past_the_cap_memory_is_bounded_and_quantiles_within_half_a_percent(vals):
    d = LengthDist(cap=16)
    for v in vals:
        d.add(v)
    exact = _nearest(vals, 0.5)
    got = d.quantile(0.5)
    assert got is not None
    if len(set(vals)) > 16:
        assert d.approximate and d.summary()["approximate"] is True
        # the nearest-rank value's bucket: within 2**-8 of it (exact below 256)
        assert abs(got - exact) <= max(0, exact) / 256 + 1
    else:
        assert got == exact
    assert d.summary()["min"] == min(vals) and d.summary()["max"] == max(vals)  # the ends stay exact


def test_a_soak_keeps_memory_flat_seeded():
    rng = random.Random(21)
    t = TokenTally(cap=512)
    for _ in range(50_000):
        n_in = rng.randint(1, 100_000)
        served = rng.randint(1, 100_000)
        t.add({"input_tokens": n_in, "usage_input_tokens": n_in + rng.choice((0, 0, 0, 9)),
               "usage_output_tokens": served, "output_chunks": served - rng.choice((0, 0, 0, 0, 1, 5000)),
               "output_tokens_asked": 100_000})
    for d in (t.in_asked, t.in_received, t.out_received, t.out_server_disagreeing, t.out_chunks_disagreeing):
        assert len(d.counts) <= 8 * 256 + 256  # 8 leading binary digits per power of two up to 2**17, plus < 256
    s = t.summary()
    assert s["disagree"]["of"] == 50_000 and s["input"]["received"]["approximate"] is True
    # the seeded shares: 1 in 6 output requests 5000 short (a disagreement at any count <= 250,000); an input +9 is
    # a disagreement only where 9 > max(1, 2% of the count), i.e. counts below 500
    assert 0.15 < s["disagree"]["output"] / 50_000 < 0.18
    assert s["disagree"]["input"] < 0.01 * 50_000


def _rec(i: int, **kw) -> RequestRecord:
    return RequestRecord(id=str(i), t_sent=1.0, t_end=2.0, complete=True, t_intended=1.0, **kw)


def test_parsed_records_are_batched_and_tally_like_dicts_and_merge_adds_up():
    rng = random.Random(7)
    a, b, whole = TokenTally(cap=64), TokenTally(cap=64), TokenTally(cap=64)
    for i in range(3000):
        kw = {"input_tokens_asked": 128, "usage_input_tokens": 128 + rng.randint(0, 30),
              "output_tokens_asked": 64, "usage_output_tokens": rng.randint(1, 64),
              "output_chunks": rng.randint(1, 64), "output_tokens": 64}
        r = _rec(i, **kw)
        (a if i % 2 else b).add(r)
        whole.add({**kw})  # the dict path: tallied at once
        assert len(a.pending) <= 64 and len(b.pending) <= 64  # bounded: flushed past the cap
    a.merge(b)
    assert a.summary() == whole.summary()
    assert a.summary()["disagree"]["of"] == 3000
