"""The pure stream interpreter (tui/sources/load/stream.py): bytes of one streamed answer in, token events out.

Every case the load generator depends on is fed here without a network: role-only chunks, null content,
usage-only chunks, error objects and error events, [DONE], finish reasons, malformed data lines, and the
same stream cut into reads at arbitrary bytes (property test: any split gives the same events).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.sources.load.stream import StreamInterpreter, interpret


def ev(obj, event: str | None = None) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj)
    head = f"event: {event}\n" if event else ""
    return (head + f"data: {data}\n\n").encode()


def chat(content=None, finish=None, role=None, reasoning=None, usage=None, choices=True) -> bytes:
    delta: dict = {}
    if role:
        delta["role"] = role
    if content is not None or role is None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    obj: dict = {"id": "x", "object": "chat.completion.chunk"}
    obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return ev(obj)


def completion(text, finish=None) -> bytes:
    return ev({"choices": [{"index": 0, "text": text, "finish_reason": finish}]})


DONE = b"data: [DONE]\n\n"
USAGE = {"prompt_tokens": 12, "completion_tokens": 3}

GOOD = [chat(role="assistant", content=None), chat("Hel"), chat("lo"), chat("!"), chat(finish="stop"),
        chat(usage=USAGE, choices=False), DONE]


def test_a_well_formed_chat_stream_is_complete_with_server_usage():
    r = interpret(GOOD)
    assert r.tokens == 3 and r.finish == "stop" and r.done and r.outcome is None
    assert r.usage == (12, 3)
    assert r.token_events == [0, 1, 1, 1, 0, 0, 0, 0]  # one entry per read, the last one for the end of stream


def test_role_only_null_content_empty_text_and_usage_only_chunks_are_not_tokens():
    r = interpret([chat(role="assistant", content=None), chat(""), chat(None), chat(usage=USAGE, choices=False),
                   b": ping\n\n", chat("a"), chat(finish="length"), DONE])
    assert r.tokens == 1 and r.finish == "length" and r.outcome is None


def test_reasoning_content_counts_as_generated_text():
    r = interpret([chat(reasoning="think"), chat("x", finish="stop"), DONE])
    assert r.tokens == 2 and r.outcome is None


def test_completions_api_reads_text_not_delta():
    r = interpret([completion("a"), completion("b", finish="stop"), DONE], chat=False)
    assert r.tokens == 2 and r.outcome is None
    assert interpret([chat("a"), chat(finish="stop"), DONE], chat=False).tokens == 0  # no "text" field


def test_the_last_non_empty_finish_reason_wins():
    r = interpret([chat("a", finish="length"), chat(finish=None), DONE])
    assert r.finish == "length" and r.outcome is None


@pytest.mark.parametrize(("reads", "outcome"), [
    ([chat(role="assistant", content=None), DONE], ("empty_response", "[DONE] with no generated text")),
    ([chat(finish="stop")], ("empty_response", "end of stream with no generated text, finish_reason stop")),
    ([chat("a"), DONE], ("malformed_stream", "[DONE] without a finish_reason")),
    ([chat("a")], ("stream_reset", "stream ended before a finish_reason")),
    ([chat("a", finish="content_filter"), DONE], ("stream_error", "finish_reason content_filter")),
    ([chat("a", finish="stop")], None),  # a bare end of stream after a finish reason is complete
])
def test_how_the_stream_ended(reads, outcome):
    assert interpret(reads).outcome == outcome


def test_error_objects_and_error_events_end_the_stream():
    r = interpret([chat("a"), ev({"error": {"message": "out of memory", "code": 500}}), chat("b", finish="stop"), DONE])
    assert r.outcome == ("stream_error", "error in stream: out of memory") and r.tokens == 1 and not r.done
    assert r.token_events == [1, 0, 0]  # reading stopped at the error
    r = interpret([ev({"error": "overloaded"})])
    assert r.outcome == ("stream_error", "error in stream: overloaded")
    r = interpret([ev("engine died", event="error")])
    assert r.outcome == ("stream_error", "error event in stream: engine died")
    r = interpret([ev({"detail": "x"}, event="error")])
    assert r.outcome[0] == "stream_error"


def test_malformed_data_lines():
    assert interpret([ev("{not json")]).outcome == ("malformed_stream", "invalid JSON in data line: {not json")
    assert interpret([ev("[1, 2]")]).outcome == ("malformed_stream", "data line is not a JSON object: [1, 2]")


def test_events_after_done_are_ignored():
    it = StreamInterpreter()
    assert it.feed(chat("a", finish="stop") + DONE + chat("b")) == 1
    assert it.done and it.stopped and it.feed(chat("c")) == 0 and it.tokens == 1
    assert it.end() == 0 and it.outcome() is None


def test_usage_values_that_are_not_numbers_are_dropped():
    r = interpret([chat("a", finish="stop"), chat(usage={"prompt_tokens": "many", "completion_tokens": True},
                                                  choices=False), DONE])
    assert r.usage == (None, None)


def test_a_final_event_without_its_blank_line_counts_at_end_of_stream():
    it = StreamInterpreter()
    assert it.feed(b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}') == 0
    assert it.end() == 1 and it.eof and it.outcome() is None


# ------------------------------------------------------------------ any split of the bytes gives the same events

_PIECES = [chat(role="assistant", content=None), chat("tok"), chat("é✓"), chat(""), chat(reasoning="r"),
           b": keep-alive\n\n", chat(finish="length"), chat(usage=USAGE, choices=False),
           ev({"error": {"message": "boom"}}), ev("oops", event="error"), ev("{bad")]
_ENDINGS = [DONE, b"", DONE + chat("after")]


@st.composite
def streams_and_cuts(draw):
    body = b"".join(draw(st.lists(st.sampled_from(_PIECES), max_size=12))) + draw(st.sampled_from(_ENDINGS))
    if draw(st.booleans()):
        body = body.replace(b"\n", b"\r\n")
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=20)))
    return body, cuts


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=300, deadline=None)
@given(streams_and_cuts())
def test_any_split_of_the_byte_stream_gives_the_same_events(case):
    body, cuts = case
    whole = interpret([body])
    reads = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    split = interpret(reads)
    assert (split.tokens, split.finish, split.done, split.usage, split.outcome) == (
        whole.tokens, whole.finish, whole.done, whole.usage, whole.outcome)
    assert sum(split.token_events) == whole.tokens
    # one byte at a time: every token event is completed by exactly one read
    single = interpret([body[i:i + 1] for i in range(len(body))])
    assert single.tokens == whole.tokens and all(k in (0, 1) for k in single.token_events)


# ------------------------------------------------------------------ arrival schedules (pure, from the seed)


def test_open_schedule_is_the_seeded_process_and_worker_shares_partition_it():
    import itertools

    from tui.sources.load.arrivals import open_schedule, share

    first = list(itertools.islice(open_schedule("poisson", 50.0, 1.0, 7, 1), 200))
    assert first == list(itertools.islice(open_schedule("poisson", 50.0, 1.0, 7, 1), 200))  # same seed, same times
    assert first != list(itertools.islice(open_schedule("poisson", 50.0, 1.0, 7, 2), 200))  # another round
    assert first[0] == 0.0 and all(b >= a for a, b in zip(first, first[1:]))
    shares = [list(itertools.islice(share(open_schedule("poisson", 50.0, 1.0, 7, 1), w, 3), 70)) for w in range(3)]
    union = sorted((i, t) for s in shares for i, t in s)
    assert [i for i, _ in union[:200]] == list(range(200)) and [t for _, t in union[:200]] == first
    with pytest.raises(ValueError):
        share(iter(first), 3, 3)
