"""SSE framing: line endings, splits at any byte, comments, multi-line data, BOM, end of stream."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.sources.sse import SSEEvent, SSEParser, parse_all

CHAT_STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}\n\n'
    b": ping\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"lo \xc3\xa9\xe2\x82\xac"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def test_whole_stream_in_one_read():
    evs = parse_all([CHAT_STREAM])
    assert [e.event for e in evs] == ["message"] * 6
    assert evs[-1].data == "[DONE]"
    assert json.loads(evs[2].data)["choices"][0]["delta"]["content"] == "lo é€"
    assert json.loads(evs[0].data)["choices"][0]["delta"]["content"] is None


def test_comments_are_counted_not_returned():
    p = SSEParser()
    evs = list(p.feed(b": ping\n\n: another\ndata: x\n\n"))
    assert evs == [SSEEvent("message", "x")]
    assert p.comments == 2


def test_crlf_and_lone_cr_line_endings():
    crlf = CHAT_STREAM.replace(b"\n", b"\r\n")
    cr = CHAT_STREAM.replace(b"\n", b"\r")
    assert parse_all([crlf]) == parse_all([CHAT_STREAM])
    assert parse_all([cr]) == parse_all([CHAT_STREAM])


def test_crlf_split_between_cr_and_lf_is_one_line_break():
    p = SSEParser()
    assert list(p.feed(b"data: a\r")) == []
    assert list(p.feed(b"\n\r")) == [SSEEvent("message", "a")]
    # the CR above ended the blank line; this LF belongs to it and must not start a new one
    assert list(p.feed(b"\ndata: b\r\n\r\n")) == [SSEEvent("message", "b")]


def test_multiline_data_joined_with_newline_and_space_rules():
    evs = parse_all([b"data: line one\ndata:line two\ndata:  two spaces\ndata\n\n"])
    assert evs == [SSEEvent("message", "line one\nline two\n two spaces\n")]


def test_event_field_id_retry_and_unknown_fields():
    evs = parse_all([b"event: error\nid: 7\nretry: 100\nfoo: bar\ndata: {\"error\": {\"message\": \"x\"}}\n\n"
                     b"data: after\n\n"])
    assert evs == [SSEEvent("error", '{"error": {"message": "x"}}'), SSEEvent("message", "after")]


def test_blank_lines_without_data_dispatch_nothing():
    assert parse_all([b"\n\n\nevent: x\n\n\n"]) == []


def test_several_events_in_one_read_and_one_event_over_many_reads():
    p = SSEParser()
    assert list(p.feed(b"data: 1\n\ndata: 2\n\ndata: 3")) == [SSEEvent("message", "1"), SSEEvent("message", "2")]
    assert list(p.feed(b"\n")) == []
    assert list(p.feed(b"\n")) == [SSEEvent("message", "3")]
    q = SSEParser()
    out = []
    for b in b'data: {"a": 1}\n\n':
        out.extend(q.feed(bytes([b])))
    assert out == [SSEEvent("message", '{"a": 1}')]


def test_bom_at_start_is_dropped_even_when_split():
    assert parse_all([b"\xef\xbb", b"\xbfdata: x\n\n"]) == [SSEEvent("message", "x")]
    assert parse_all([b"\xef\xbb\xbfdata: y\n\n"]) == [SSEEvent("message", "y")]


def test_finish_completes_a_stream_without_final_blank_line():
    p = SSEParser()
    assert list(p.feed(b"data: [DONE]")) == []
    assert list(p.finish()) == [SSEEvent("message", "[DONE]")]
    p2 = SSEParser()
    assert list(p2.feed(b"data: x\n")) == []
    assert list(p2.finish()) == [SSEEvent("message", "x")]
    assert list(SSEParser().finish()) == []


def test_invalid_utf8_never_raises():
    evs = parse_all([b"data: \xff\xfe ok\n\n"])
    assert len(evs) == 1 and evs[0].data.endswith(" ok")


# ---------------------------------------------------------------- property: any split, same events

_payload = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30
)
_event = st.tuples(
    st.one_of(st.none(), st.sampled_from(["message", "error", "ping"])),
    st.lists(_payload, min_size=1, max_size=3),
    st.booleans(),  # a comment before it
)


def _encode(events, eol: bytes) -> bytes:
    out = b""
    for name, lines, comment in events:
        if comment:
            out += b": keep-alive" + eol
        if name is not None:
            out += b"event: " + name.encode() + eol
        for ln in lines:
            out += b"data: " + ln.encode() + eol
        out += eol
    return out


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(_event, min_size=1, max_size=6),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_split_yields_the_same_events(events, eol, cuts):
    raw = _encode(events, eol)
    whole = parse_all([raw])
    positions = sorted({c % (len(raw) + 1) for c in cuts})
    chunks, prev = [], 0
    for pos in positions + [len(raw)]:
        chunks.append(raw[prev:pos])
        prev = pos
    assert parse_all(chunks) == whole
    expected = [SSEEvent(name or "message", "\n".join(lines)) for name, lines, _ in events]
    assert whole == expected
