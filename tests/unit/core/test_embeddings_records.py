"""``--api embeddings`` (issue 41): an embeddings answer streams no token, so its record has no first-token time and
carries ``embedding_dim``; it is judged on E2E alone (TTFT, TPOT and ITL not judgeable: an SLO on them in force
makes it excluded with the NOJUDGE bit, never good), the record round-trips, and a record that claims both an
embedding and a token stream is a bad line. The answer reader classifies every malformed answer."""

from __future__ import annotations

import json

import pytest

from tui.core.records import RequestRecord, parse_request, request_to_dict
from tui.core.records.parse import RecordError
from tui.core.slos import MISS_E2E, NOJUDGE_TTFT, Slos, slo_rule
from tui.sources.load.embeddings import read_answer, request_body

T0 = 1_767_225_600.0


def emb(e2e_s: float = 0.3, **kw) -> RequestRecord:
    return RequestRecord(id="e1", t_sent=T0, t_end=T0 + e2e_s, complete=True, t_intended=T0, t_first_token=None,
                         input_tokens=12, level=1.0, embedding_dim=640, **kw)


def test_an_embedding_is_judged_on_e2e_only():
    assert slo_rule(Slos(ttft_ms=None, e2e_ms=1000.0))(emb())[0] == "good"
    outcome, _, misses = slo_rule(Slos(ttft_ms=None, e2e_ms=1000.0))(emb(1.5))
    assert outcome == "slow" and misses & MISS_E2E
    # a TTFT SLO in force can never be met by an answer without tokens: not judgeable, never good
    for slos in (Slos(ttft_ms=500.0), Slos(ttft_ms=500.0, e2e_ms=1000.0)):
        outcome, _, misses = slo_rule(slos)(emb())
        assert outcome != "good" and misses & NOJUDGE_TTFT, slos
    # without the embedding mark, a record without a first token is still a failure (the old rule holds)
    no_mark = emb()
    no_mark.embedding_dim = None
    assert slo_rule(Slos(ttft_ms=None, e2e_ms=1000.0))(no_mark)[0] == "failed"


def test_the_record_round_trips_and_a_token_beside_an_embedding_is_a_bad_line():
    d = request_to_dict(emb())
    assert d["embedding_dim"] == 640
    assert parse_request(json.loads(json.dumps(d))).embedding_dim == 640
    for bad in ({"embedding_dim": 0}, {"embedding_dim": "640"}, {"embedding_dim": 640, "t_first_token": T0 + 0.1},
                {"embedding_dim": 640, "output_tokens": 3}):
        with pytest.raises(RecordError):
            parse_request({**d, **bad})


@pytest.mark.parametrize("raw, cls", [
    (b"not json", "malformed_stream"), (b"[1,2]", "malformed_stream"), (b'{"data": 3}', "malformed_stream"),
    (b'{"data": []}', "empty_response"), (b'{"data": [{"embedding": []}]}', "empty_response"),
    (b'{"data": [{"embedding": [1, "x"]}]}', "malformed_stream"), (b'{"data": [{"x": 1}]}', "malformed_stream"),
    (b'{"error": {"message": "boom"}}', "stream_error")])
def test_every_malformed_answer_has_its_class(raw, cls):
    fields, err = read_answer(raw)
    assert fields is None and err is not None and err[0] == cls


def test_a_good_answer_gives_the_dimension_and_the_servers_count():
    fields, err = read_answer(b'{"data": [{"embedding": [0.1, -0.2, 0.3]}], "usage": {"prompt_tokens": 7}}')
    assert err is None and fields == {"embedding_dim": 3, "usage_input_tokens": 7}
    assert request_body("m", "hi") == {"model": "m", "input": "hi", "encoding_format": "float"}


def test_the_short_reports_level_table_shows_e2e_for_an_embeddings_run():
    from tui.core.report_short import level_table

    row = {"level": 2.0, "round": 1, "n": 30, "good_fraction": 1.0, "req_per_s": 3.0, "goodput_per_s": 3.0,
           "verdict": "FAIL", "ttft_ms": {"p50": None, "n": 0}, "e2e_ms": {"p50": 120.0, "p95": None, "p99": None,
                                                                          "n": 30}}
    e2e = level_table([row], "e2e_ms")
    assert "E2E P50" in e2e[0] and "120" in e2e[1]
    assert "TTFT P50" in level_table([row])[0]  # the default table is unchanged
