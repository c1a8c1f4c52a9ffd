import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core import records
from tui.core.records import LineIssue, RecordError, RequestRecord, parse_line, read_file

T = 1_767_225_600.0  # record times are wall-clock epoch seconds (2026-01-01); the tests below give offsets from it
TIMES = ("t_sent", "t_first_token", "t_end", "t_intended")


def req(**kw):
    """A request record; numeric times given (and the defaults) are seconds after ``T``."""
    d = {"type": "request", "id": "a", "t_sent": 10.0, "t_first_token": 10.25, "t_end": 11.0, "complete": True,
         "error": None, "phase": "measure", "level": 4, "round": 1}
    d.update(kw)
    for k in TIMES:
        v = d.get(k)
        if type(v) is float and math.isfinite(v):
            d[k] = T + v
    return d


def test_ttft_is_derived_not_trusted():
    r = parse_line(json.dumps(req(ttft_ms=1.0)))
    assert isinstance(r, RequestRecord)
    assert r.ttft == pytest.approx(0.25)


def test_unknown_fields_ignored_and_intended_defaults_to_sent():
    r = parse_line(json.dumps(req(something_new={"x": 1})))
    assert r.t_intended == T + 10.0


@pytest.mark.parametrize("missing", ["id", "t_sent", "t_end", "complete"])
def test_missing_required_field_rejected(missing):
    d = req()
    del d[missing]
    with pytest.raises(RecordError, match=missing):
        parse_line(json.dumps(d))


@pytest.mark.parametrize("bad", [
    req(t_end=9.0), req(t_first_token=9.0), req(t_first_token=12.0), req(complete="yes"), req(phase="later"),
    req(t_sent="x"), req(t_sent=float("nan")),
])
def test_inconsistent_records_rejected(bad):
    with pytest.raises(RecordError):
        parse_line(json.dumps(bad))


@pytest.mark.parametrize("field,value", [
    ("t_sent", 1.0), ("t_sent", -1e308), ("t_end", 1e308), ("t_intended", 5.0), ("t_sent", 4_102_444_800.0),
    ("output_tokens", 10**30), ("output_tokens", -1), ("input_tokens", 2.5), ("round", 0), ("http_status", 42),
    ("http_status", 10**20), ("retried", 10**30),
])
def test_implausible_values_are_bad_lines(field, value):
    d = req()
    d[field] = value  # raw: not shifted by T
    if field == "t_end":
        d["t_first_token"] = None
    with pytest.raises(RecordError, match=field):
        parse_line(json.dumps(d))


def test_plausible_bounds_are_accepted():
    d = req()
    d.update(t_sent=records.T_MIN_EPOCH, t_intended=records.T_MIN_EPOCH, t_first_token=None,
             t_end=records.T_MIN_EPOCH + 1, output_tokens=2**53, http_status=599)
    assert isinstance(parse_line(json.dumps(d)), RequestRecord)


@pytest.mark.parametrize("edit,why", [({"http_status": 500}, "HTTP status 500"), ({"output_tokens": 0}, "0 output"),
                                      ({"finish_reason": "abort"}, "abort"), ({"finish_reason": "error"}, "error")])
def test_complete_records_that_contradict_themselves_are_failed(edit, why):
    r = parse_line(json.dumps(req(**edit)))
    assert r.outcome(1.0) == "failed"
    assert why in records.contradiction(r)
    short = parse_line(json.dumps(req(output_tokens=1, finish_reason="length", http_status=200)))
    assert short.outcome(1.0) == "good" and records.contradiction(short) is None


def test_outcomes():
    slo = 1.0
    assert parse_line(json.dumps(req())).outcome(slo) == "good"
    assert parse_line(json.dumps(req(t_first_token=10.9, t_end=12.0, t_sent=9.5))).outcome(slo) == "slow"
    fast_fail = parse_line(json.dumps(req(t_first_token=10.3, t_end=10.3, complete=False, error="stream_reset")))
    assert fast_fail.outcome(slo) == "failed" and not fast_fail.is_good(slo)
    no_token = parse_line(json.dumps(req(t_first_token=None)))
    assert no_token.outcome(slo) == "failed"


def test_read_file_reports_each_bad_line_with_number_and_tolerates_truncated_tail(tmp_path):
    p = tmp_path / "r.jsonl"
    good = json.dumps(req())
    p.write_text(
        good + "\n"
        + "{not json\n"
        + json.dumps({"type": "mystery", "x": 1}) + "\n"
        + json.dumps(req(id="b")) + "\n"
        + "\n"
        + '{"type": "request", "id": "c", "t_se'  # file still being written
    )
    items = list(read_file(str(p)))
    recs = [i for i in items if isinstance(i, RequestRecord)]
    issues = [i for i in items if isinstance(i, LineIssue)]
    assert [r.id for r in recs] == ["a", "b"]
    assert [(i.line, i.kind) for i in issues] == [(2, "malformed"), (3, "unknown_type"), (6, "truncated")]
    assert all(i.source == str(p) for i in issues)
    assert str(issues[0]).startswith(f"{p}:2: invalid JSON")


def test_round_trip_request_to_dict():
    r = parse_line(json.dumps(req(token_offsets=[0.25, 0.5], retried=1)))
    again = parse_line(records.dumps(records.request_to_dict(r)))
    assert again == r


def test_run_header_requires_synthetic_flag_and_schema():
    h = records.run_header(synthetic=True)
    assert h["synthetic"] is True and h["schema_version"] == 1
    assert parse_line(records.dumps(h)).synthetic is True
    with pytest.raises(RecordError, match="schema_version"):
        parse_line(json.dumps({"type": "run", "schema_version": 99}))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data):
    items = list(records.parse_lines(records.iter_lines([data], "fuzz"), "fuzz"))
    n_lines = len([ln for ln in data.split(b"\n") if ln.strip(b" \t\r\n")])  # JSON whitespace only
    assert len(items) == n_lines  # every non-blank line is either a record or a reported issue


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["type", "id", "t_sent", "t_end", "t_first_token", "complete", "phase",
                                        "level", "round", "error", "token_offsets", "schema_version", "t", "event"]),
                       json_values, max_size=10),
       st.sampled_from(["request", "gpu", "queue", "run", "step", "host", "budget", "zzz"]))
def test_arbitrary_records_never_raise_unexpected(d, typ):
    d["type"] = typ
    line = json.dumps(d).encode()
    items = list(records.parse_lines([(1, line, True)], "fuzz"))
    assert len(items) == 1


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.integers(100, 599)), st.one_of(st.none(), st.integers(0, 5)),
       st.one_of(st.none(), st.sampled_from(["stop", "length", "abort", "aborted", "error", "cancelled", "tool_calls"])))
def test_the_outcome_rule_and_contradiction_agree(status, tokens, finish):
    """The hot path checks inline what ``contradiction`` says in words: a complete record is good or slow exactly
    when nothing in it contradicts it."""
    r = RequestRecord("a", T, T + 1.0, True, T, T + 0.1, http_status=status, output_tokens=tokens, finish_reason=finish)
    assert (records.outcome_rule(1000.0)(r)[0] == "failed") is (records.contradiction(r) is not None)


def test_asked_lengths_round_trip_and_older_records_read_them_as_none():
    """The load generator's ``input_tokens_asked`` / ``output_tokens_asked`` survive parse -> write -> parse (the
    parser used to drop them); a record without them reads None; a bad count is a bad line."""
    from tui.core.records import parse_object
    from tui.core.records.write import request_to_dict
    d = {"type": "request", "id": "a", "t_sent": 1.7e9, "t_end": 1.7e9 + 1, "complete": True,
         "t_first_token": 1.7e9 + 0.1, "input_tokens": 151, "output_tokens": 64, "input_tokens_asked": 128,
         "output_tokens_asked": 64}
    r = parse_object(d)
    assert (r.input_tokens_asked, r.output_tokens_asked, r.input_tokens) == (128, 64, 151)
    w = request_to_dict(r)
    assert (w["input_tokens_asked"], w["output_tokens_asked"]) == (128, 64)
    assert parse_object(w) == r
    old = parse_object({k: v for k, v in d.items() if not k.endswith("_asked")})
    assert old.input_tokens_asked is None and old.output_tokens_asked is None
    assert "input_tokens_asked" not in request_to_dict(old)
    with pytest.raises(RecordError):
        parse_object({**d, "output_tokens_asked": -3})
