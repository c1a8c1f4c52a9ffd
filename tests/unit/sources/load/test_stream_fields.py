"""The request-record fields the stream interpreter derives (issue 21): reasoning vs answer, chunk counts, the
server's usage, the last token, and the gaps between tokens (tui/sources/load/stream.py, pure, no network).

Times are the stamps the caller passes with each read (here: made-up numbers), so every assertion is exact.
Property tests: content cut into chunks anywhere gives the reasoning/answer split a whole-text reference gives;
the bytes of a stream cut into reads anywhere give the same fields.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.sources.load.stream import StreamInterpreter, interpret


def ev(obj) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def delta(**d) -> bytes:
    return ev({"choices": [{"index": 0, "delta": d, "finish_reason": None}]})


def text(t: str) -> bytes:
    return ev({"choices": [{"index": 0, "text": t, "finish_reason": None}]})


def finish(fr: str = "stop") -> bytes:
    return ev({"choices": [{"index": 0, "delta": {}, "finish_reason": fr}]})


def usage(**u) -> bytes:
    return ev({"choices": [], "usage": u})


DONE = b"data: [DONE]\n\n"
ROLE = delta(role="assistant", content=None)


# ------------------------------------------------------------------ reasoning fields, answer fields


def test_reasoning_content_deltas_first_reasoning_then_first_answer_and_counts():
    reads = [ROLE, delta(reasoning_content="hm"), delta(reasoning_content="so"), delta(content="A"),
             delta(content="B"), finish(), DONE]
    f = interpret(reads, times=[0.0, 1.0, 2.0, 5.0, 6.0, 7.0, 7.0]).fields
    assert f["t_first_reasoning"] == 1.0 and f["t_first_answer"] == 5.0 and f["t_last_token"] == 6.0
    assert (f["output_chunks"], f["reasoning_chunks"]) == (4, 2)


def test_the_reasoning_field_counts_like_reasoning_content():
    f = interpret([delta(reasoning="x"), delta(content="y"), finish(), DONE], times=[3.0, 4.0, 4.0, 4.0]).fields
    assert (f["t_first_reasoning"], f["t_first_answer"], f["reasoning_chunks"]) == (3.0, 4.0, 1)


def test_no_reasoning_no_first_answer_field_the_first_token_is_the_answer():
    f = interpret([delta(content="a"), delta(content="b"), finish(), DONE], times=[1.0, 2.0, 2.0, 2.0]).fields
    assert "t_first_reasoning" not in f and "t_first_answer" not in f
    assert (f["output_chunks"], f["reasoning_chunks"], f["t_last_token"]) == (2, 0, 2.0)


def test_reasoning_and_no_answer_ever_first_answer_absent():
    r = interpret([delta(reasoning_content="a"), delta(reasoning_content="b"), finish("length"), DONE])
    assert r.fields["t_first_reasoning"] == 0.0 and "t_first_answer" not in r.fields
    assert r.fields["reasoning_chunks"] == 2 and r.outcome is None


def test_think_block_in_content_is_reasoning_the_tags_too():
    reads = [delta(content="<think>"), delta(content="plan"), delta(content="</think>"), delta(content="Hi"),
             finish(), DONE]
    f = interpret(reads, times=[1.0, 2.0, 3.0, 4.0, 4.0, 4.0]).fields
    assert (f["t_first_reasoning"], f["t_first_answer"], f["output_chunks"], f["reasoning_chunks"]) == (1.0, 4.0, 4, 3)


def test_a_think_tag_split_across_chunks_is_decided_by_the_next_chunk_and_keeps_its_arrival_time():
    reads = [delta(content="<"), delta(content="thi"), delta(content="nk>r"), delta(content="</th"),
             delta(content="ink>ok"), finish(), DONE]
    f = interpret(reads, times=[10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 15.0]).fields
    assert f["t_first_reasoning"] == 10.0 and f["t_first_answer"] == 14.0
    assert (f["output_chunks"], f["reasoning_chunks"]) == (5, 4)


def test_something_that_looked_like_a_tag_start_is_answer_text_at_its_own_time():
    reads = [delta(content="<"), delta(content="b>bold"), finish(), DONE]
    it = StreamInterpreter()
    for t, c in zip([1.0, 2.0, 3.0, 3.0], reads):
        it.feed(c, t)
    it.settle()
    assert (it.t_first_answer, it.t_first_reasoning, it.reasoning) == (1.0, None, 0)
    # a possible tag start left at the very end of the stream is answer text too
    it = StreamInterpreter()
    it.feed(delta(content="a<th"), 1.0)
    it.feed(delta(content="<thin"), 2.0)
    it.feed(finish() + DONE, 3.0)
    it.settle()
    assert (it.t_first_answer, it.t_first_reasoning, it.reasoning, it.tokens) == (1.0, None, 0, 2)


def test_think_in_completions_text():
    r = interpret([text("<think>x</think>"), text("y"), ev({"choices": [{"index": 0, "text": "",
                                                                            "finish_reason": "stop"}]}), DONE],
                  chat=False, times=[1.0, 2.0, 2.0, 2.0])
    assert (r.fields["t_first_reasoning"], r.fields["t_first_answer"], r.fields["reasoning_chunks"]) == (1.0, 2.0, 1)


def test_a_chunk_with_reasoning_and_answer_text_is_an_answer_chunk():
    f = interpret([delta(content="<think>a</think>b"), finish(), DONE], times=[1.0, 1.0, 1.0]).fields
    assert (f["t_first_reasoning"], f["t_first_answer"], f["reasoning_chunks"], f["output_chunks"]) == (1.0, 1.0, 0, 1)


# ------------------------------------------------------------------ usage


def test_usage_chunk_present_with_reasoning_tokens():
    r = interpret([delta(content="a"), finish(), usage(prompt_tokens=9, completion_tokens=4,
                                                       completion_tokens_details={"reasoning_tokens": 3}), DONE])
    assert (r.fields["usage_output_tokens"], r.fields["usage_input_tokens"], r.fields["usage_reasoning_tokens"]) == (
        4, 9, 3)
    assert r.fields["output_chunks"] == 1  # the chunks seen stay beside the server's count


def test_usage_absent_no_usage_fields():
    f = interpret([delta(content="a"), finish(), DONE]).fields
    assert not {"usage_output_tokens", "usage_input_tokens", "usage_reasoning_tokens"} & set(f)


def test_usage_details_of_the_wrong_shape_are_ignored_not_fatal():
    r = interpret([delta(content="a"), finish(), usage(prompt_tokens=1, completion_tokens=1,
                                                       completion_tokens_details=[3]), DONE])
    assert r.outcome is None and "usage_reasoning_tokens" not in r.fields and r.fields["usage_output_tokens"] == 1


# ------------------------------------------------------------------ gaps between tokens


def test_gap_statistics_nearest_rank_tokens_in_one_read_have_gap_zero():
    # reads at 0, 1, 1.5 (two tokens), 4.5: gaps 1.0, 0.5, 0.0, 3.0
    reads = [delta(content="a"), delta(content="b"), delta(content="c") + delta(content="d"), delta(content="e"),
             finish() + DONE]
    f = interpret(reads, times=[0.0, 1.0, 1.5, 4.5, 4.5]).fields
    assert f["itl_max_ms"] == 3000.0 and f["itl_p50_ms"] == 500.0 and f["itl_p95_ms"] == 3000.0
    assert f["t_last_token"] == 4.5


def test_fewer_than_two_tokens_no_gap_fields():
    f = interpret([delta(content="a"), finish(), DONE], times=[1.0, 2.0, 2.0]).fields
    assert not {"itl_max_ms", "itl_p50_ms", "itl_p95_ms"} & set(f) and f["t_last_token"] == 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 5000)), min_size=1, max_size=40))
def test_gap_statistics_equal_the_nearest_rank_of_every_token_gap(per_read):
    """Reads with k tokens each, ``ms`` after the previous read: the fields equal the nearest-rank quantiles of
    the full list of per-token gaps (what a client keeping every token time would compute)."""
    reads, times, stamps, t = [], [], [], 0.0
    for k, ms in per_read:
        t += ms / 1000
        reads.append(b"".join(delta(content="x") for _ in range(k)))
        times.append(t)
        stamps += [t] * k
    f = interpret([*reads, finish() + DONE], times=[*times, t]).fields
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    if not gaps:
        assert "itl_max_ms" not in f
        return

    def nr(q):
        return gaps[max(1, math.ceil(q * len(gaps) - 1e-12)) - 1] * 1000

    assert math.isclose(f["itl_max_ms"], gaps[-1] * 1000, abs_tol=1e-3)
    assert math.isclose(f["itl_p50_ms"], nr(0.5), abs_tol=1e-3)
    assert math.isclose(f["itl_p95_ms"], nr(0.95), abs_tol=1e-3)
    assert f["output_chunks"] == len(stamps) and f["t_last_token"] == stamps[-1]


# ------------------------------------------------------------------ property: any chunking of the content


_PARTS = ["a", "bc ", "<think>", "</think>", "<", "<th", "</", "<b>", ">", "r", "think", "\n"]


def reference(chunks: list[str]) -> tuple[int | None, int | None, int]:
    """Label every character of the whole text (answer / reasoning / tag), then each chunk: (first chunk with
    reasoning or a tag, first chunk with answer text, chunks with reasoning and no answer text)."""
    s = "".join(chunks)
    labels = [""] * len(s)
    pos, think = 0, False
    while pos < len(s):
        tag = "</think>" if think else "<think>"
        i = s.find(tag, pos)
        end = len(s) if i < 0 else i
        for j in range(pos, end):
            labels[j] = "R" if think else "A"
        if i < 0:
            break
        for j in range(i, i + len(tag)):
            labels[j] = "T"
        pos, think = i + len(tag), not think
    first_r = first_a = None
    n_r, at = 0, 0
    for idx, c in enumerate(chunks):
        lab = labels[at:at + len(c)]
        at += len(c)
        has_a, has_r = "A" in lab, ("R" in lab or "T" in lab)
        if has_r and first_r is None:
            first_r = idx
        if has_a and first_a is None:
            first_a = idx
        if has_r and not has_a:
            n_r += 1
    return first_r, first_a, n_r


@st.composite
def chunked_texts(draw):
    s = "".join(draw(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=16)))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(s) - 1)), max_size=12))))
    bounds = [0, *[c for c in cuts if 0 < c < len(s)], len(s)]
    return [s[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=400, deadline=None)
@given(chunked_texts())
def test_any_chunking_of_the_content_gives_the_whole_text_reading_of_think_blocks(chunks):
    it = StreamInterpreter()
    for i, c in enumerate(chunks):
        it.feed(delta(content=c), float(i))
    it.feed(finish() + DONE, float(len(chunks)))
    it.settle()
    first_r, first_a, n_r = reference(chunks)
    got_r = None if it.t_first_reasoning is None else int(it.t_first_reasoning)
    got_a = None if it.t_first_answer is None else int(it.t_first_answer)
    assert (got_r, got_a, it.reasoning, it.tokens) == (first_r, first_a, n_r, len(chunks))


# ------------------------------------------------------------------ property: any split of the bytes


_EVENTS = [ROLE, delta(reasoning_content="r"), delta(reasoning="q"), delta(content="<think>x"), delta(content="</th"),
           delta(content="ink>"), delta(content="ans"), delta(content="é✓"), b": ping\n\n",
           usage(prompt_tokens=5, completion_tokens=7, completion_tokens_details={"reasoning_tokens": 2})]


@st.composite
def timed_streams(draw):
    evs = draw(st.lists(st.sampled_from(_EVENTS), max_size=14)) + [finish(), DONE]
    times = sorted(draw(st.lists(st.integers(0, 1000), min_size=len(evs), max_size=len(evs))))
    # each event's bytes cut anywhere into reads; every read of event j arrives at times[j]
    reads, stamps = [], []
    for e, t in zip(evs, times):
        cuts = sorted(set(draw(st.lists(st.integers(1, len(e) - 1), max_size=3))))
        for a, b in zip([0, *cuts], [*cuts, len(e)]):
            reads.append(e[a:b])
            stamps.append(t / 100)
    return evs, [t / 100 for t in times], reads, stamps


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=300, deadline=None)
@given(timed_streams())
def test_any_split_of_the_bytes_gives_the_same_fields(case):
    evs, times, reads, stamps = case
    whole = interpret(evs, times=times)  # one read per event
    split = interpret(reads, times=stamps)
    assert split.fields == whole.fields and split.outcome == whole.outcome
    # and the whole body in arbitrary reads at one instant: the counts and the usage do not depend on the framing
    body = b"".join(evs)
    third = len(body) // 3
    lumped = interpret([body[:third], body[third:2 * third], body[2 * third:]], times=[1.0, 1.0, 1.0])
    for k in ("output_chunks", "reasoning_chunks", "usage_output_tokens", "usage_input_tokens",
              "usage_reasoning_tokens"):
        assert lumped.fields.get(k) == whole.fields.get(k), k
