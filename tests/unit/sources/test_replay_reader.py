"""The fast block reader (``parse_block``: replays and reports) must report exactly what the
line-by-line parser reports."""

import io
import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tui.core.records.parse as record_parse
from tui.core import records
from tui.core.records import LineIssue, iter_file, parse_lines, read_file
from tui.sources.replay import _Reader

GOOD = [
    {"type": "request", "id": "a", "t_sent": 1767225601.0, "t_first_token": 1767225601.2, "t_end": 1767225602.0,
     "complete": True, "level": 1},
    {"type": "queue", "t": 1.5, "source": "llamacpp", "waiting": 2, "running": 4},
    {"type": "gpu", "t": 1.6, "device": 0, "name": "X", "memory_used": 1, "memory_total": 2},
    {"type": "step", "t": 1.7, "event": "end", "level": 1},
]
BAD = [b"{not json", b"", b"  ", b'{"type":"request","id":"x"}', b'{"type":"mystery"}', b"[1]", b"\xff\xfe",
       b'{"type":"request","id":"z","t_sent":2,"t_end":1,"complete":true}', b'{"type":"queue","t":1}\r',
       # two objects on one line, and two lines that would join inside a string if a line break were dropped
       b'{"type":"queue","t":1}, {"type":"queue","t":2}', b'{"type":"queue","t":3,"source":"}', b'{"}',
       b'{"type":"queue","t":4,"source":"\xff"}', b'{"type":"request","id":"a","t_sent":1,"t_end":"2","complete":true}',
       b'{"type":"step","t":1,"event":"middle"}', b'{"type":"gpu","t":1}{"type":"gpu","t":2}', b'{"type":"run"}']


def _as_key(item):
    if isinstance(item, LineIssue):
        return ("issue", item.line, item.kind, item.reason)
    return ("record", repr(item))


def _reference(data: bytes, source: str):
    """The line-by-line reader: every line through ``parse_lines`` (an unterminated last line as such)."""
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: empty when the data ends with one
    numbered = [(i, line, True) for i, line in enumerate(lines, 1)]
    if tail:
        numbered.append((len(lines) + 1, tail, False))
    return list(parse_lines(numbered, source))


def _reader_items(path, chunk_size):
    r = _Reader(str(path), str(path), chunk_size)
    r.open()
    out = []
    try:
        while True:
            got = r.read_chunk()
            if got is None:
                break
            out += got
        out += r.flush_partial()
    finally:
        r.close()
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from([json.dumps(g).encode() for g in GOOD]), st.sampled_from(BAD)),
                min_size=1, max_size=60),
       st.sampled_from([7, 64, 1 << 12, 1 << 20]), st.booleans(), st.integers(0, 10**6))
def test_block_reader_matches_line_parser(tmp_path, lines, chunk_size, trailing_newline, salt):
    path = tmp_path / f"r{salt}.jsonl"
    body = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    path.write_bytes(body)
    expected = [_as_key(i) for i in _reference(body, str(path))]
    got = [_as_key(i) for i in _reader_items(path, chunk_size)]
    assert got == expected
    assert [_as_key(i) for i in read_file(str(path))] == expected  # the report reads through the same blocks


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([json.dumps(g).encode() for g in GOOD]), st.sampled_from(BAD)),
                min_size=1, max_size=80),
       st.sampled_from([5, 64, 300]), st.sampled_from([16, 100, 1 << 20]), st.booleans())
def test_block_reader_in_small_blocks_matches_line_parser(lines, block_bytes, chunk_size, trailing_newline):
    # several JSON arrays per chunk, and chunks cut anywhere: still the line parser's answer, line for line
    body = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    old = record_parse.BLOCK_BYTES  # the block parser's own module global (tui.core.records.parse.parse_block reads it)
    record_parse.BLOCK_BYTES = block_bytes
    try:
        got = [_as_key(i) for i in iter_file(io.BytesIO(body), "s", chunk_size)]
    finally:
        record_parse.BLOCK_BYTES = old
    assert got == [_as_key(i) for i in _reference(body, "s")]


def test_bad_record_inside_a_clean_block_keeps_its_line_number():
    lines = [json.dumps(GOOD[0]).encode()] * 5
    lines[2] = b'{"type":"request","id":"x","t_sent":1767225602,"t_end":1767225601,"complete":true}'
    lines[3] = b'{"type":"mystery"}'
    items = records.parse_block(b"\n".join(lines), 10, "f")
    issues = [(i.line, i.kind, str(i)) for i in items if isinstance(i, LineIssue)]
    assert len(items) == 5
    assert issues == [(12, "malformed", "f:12: t_end is before t_sent"),
                      (13, "unknown_type", "f:13: unknown record type 'mystery' skipped")]


def test_clean_file_takes_the_fast_path_and_keeps_line_numbers(tmp_path):
    rng = random.Random(3)
    lines = [json.dumps(rng.choice(GOOD)) for _ in range(2000)] + ["{broken"]
    path = tmp_path / "clean.jsonl"
    path.write_text("\n".join(lines) + "\n")
    items = _reader_items(path, 1 << 16)
    issues = [i for i in items if isinstance(i, LineIssue)]
    assert len(items) == 2001 and [(i.line, i.kind) for i in issues] == [(2001, "malformed")]


def _request_line(rid: str, extra: str = "") -> bytes:
    return (f'{{"type":"request","id":"{rid}","t_sent":1767225601.0,"t_first_token":1767225601.2,'
            f'"t_end":1767225602.0,"complete":true,"level":1{extra}}}').encode()


def _split_objects(rng: random.Random) -> list[bytes]:
    """Lines that are not JSON alone but join, across newlines, into valid records: an object left open inside an
    array (``"x":[{}`` ... ``{}]}``) or inside an object, and a line holding two records to make the count even."""
    a = _request_line("A")[:-1] + b',"x":[{}'
    b = b'{"k":1}]}'
    two = _request_line("C") + b"," + _request_line("D")
    kinds = [[a, b, two], [two, a, b], [a, b, two, _request_line("E")],
             [_request_line("F")[:-1] + b',"o":{"p":{}', b'{"q":1}}}', two],  # open object: ",{" refused
             [_request_line("G")[:-1] + b',"x":[[{}', b'{}]]}', two]]
    lines = list(rng.choice(kinds))
    for _ in range(rng.randrange(4)):
        lines.insert(rng.randrange(len(lines) + 1), _request_line(f"r{rng.randrange(1000)}"))
    return lines


def test_objects_split_across_lines_are_refused_as_the_line_reader_refuses_them():
    # every line of the run starts with "{" and ends with "}", and the array decode would give as many elements as
    # lines: the block reader must still report what the line reader reports (no record made of two lines)
    rng = random.Random(38)
    for _ in range(200):
        lines = _split_objects(rng)
        body = b"\n".join(lines)
        got = [_as_key(i) for i in records.parse_block(body, 1, "f")]
        want = [_as_key(i) for i in _reference(body + b"\n", "f")]
        assert got == want, lines
        made = [i.id for i in records.parse_block(body, 1, "f") if isinstance(i, records.RequestRecord)]
        assert not {"A", "C", "D", "F", "G"} & set(made), made  # no record made of two lines, or two of one line
