"""Issue 36, "Bounded reads": the line cap (``tui.core.bounds.MAX_LINE_BYTES``) and the JSON depth bound, in the
core readers.

- ``LineCut`` gives the same lines whatever the chunks a stream is cut into, a line longer than the cap as its
  number and length only (never held: the cut keeps at most the cap's worth of one line), a generated family of
  streams checked against a plain ``split``;
- ``iter_blocks`` (every record reader) reports a line over the cap as one malformed line with its number, and the
  lines after it keep their numbers;
- the digest chain's verifier hashes a long line as it passes (a chained file with one stays intact: it is one of
  the run's lines) and holds at most the cap of it;
- a record the readers keep whole (a header, a step) nested deeper than ``MAX_JSON_DEPTH`` is a malformed line;
  ``json_too_deep`` is iterative (no recursion at any depth).
"""

from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core import records
from tui.core.bounds import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_too_deep
from tui.core.chain import ChainVerifier, ChainWriter, seal_line
from tui.core.records import LineIssue, RecordError, parse_line
from tui.core.records.reader import LineCut, iter_lines

CAP = 16


def _reference(data: bytes, cap: int) -> list[tuple[int, bytes | int, bool]]:
    parts = data.split(b"\n")
    out: list[tuple[int, bytes | int, bool]] = []
    for i, p in enumerate(parts[:-1], 1):
        out.append((i, len(p) if len(p) > cap else p, True))
    if parts[-1]:
        p = parts[-1]
        out.append((len(parts), len(p) if len(p) > cap else p, False))
    return out


line = st.one_of(st.binary(max_size=CAP), st.binary(min_size=CAP + 1, max_size=4 * CAP),
                 st.sampled_from([b"", b"x" * CAP, b"y" * (CAP + 1)]))


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(line.map(lambda b: b.replace(b"\n", b"")), max_size=12), st.booleans(),
       st.lists(st.integers(1, 5 * CAP), min_size=1, max_size=20))
def test_the_line_cut_is_the_same_whatever_the_chunks(lines, terminated, sizes):
    data = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    chunks, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        chunks.append(data[i:i + n])
        i, k = i + n, k + 1
    got = list(iter_lines(chunks, "t", max_line=CAP))
    assert got == _reference(data, CAP)


def test_a_long_line_is_never_held_whole():
    cut = LineCut(max_line=CAP)
    held = 0
    for _ in range(1000):
        cut.feed(b"z" * 7)
        held = max(held, len(cut.partial))
    assert held <= CAP
    assert cut.feed(b"\n{}\n") == [(1, 7000), (2, b"{}")]


def test_iter_blocks_reports_a_line_over_the_cap_and_keeps_the_numbers_after_it():
    req = json.dumps({"type": "request", "id": "a", "t_sent": 1.8e9, "t_end": 1.8e9 + 1, "complete": True})
    data = (req + "\n" + "x" * (MAX_LINE_BYTES + 5) + "\n" + req.replace('"a"', '"b"') + "\n").encode()
    for chunk in (1 << 20, 4096, 333_333):
        items = [it for block in records.iter_blocks(io.BytesIO(data), "f.jsonl", chunk_size=chunk) for it in block]
        assert [type(it).__name__ for it in items] == ["RequestRecord", "LineIssue", "RequestRecord"]
        issue = items[1]
        assert isinstance(issue, LineIssue) and issue.line == 2 and issue.kind == "malformed"
        assert issue.request is None  # it may have been a measured request of any level
        assert f"{MAX_LINE_BYTES + 5:,} bytes" in issue.reason and "1 MiB" in issue.reason


def test_an_unterminated_long_last_line_is_reported():
    data = b'{"type":"seal"}\n' + b"[" * (MAX_LINE_BYTES + 1)
    items = [it for block in records.iter_blocks(io.BytesIO(data), "f") for it in block]
    assert isinstance(items[-1], LineIssue) and items[-1].line == 2 and "unterminated" in items[-1].reason


def test_the_chain_verifier_hashes_a_long_line_as_it_passes():
    w = ChainWriter()
    w.start()
    header = (json.dumps({"type": "run", "schema_version": 1, "chain": w.header_field()}, separators=(",", ":")) + "\n").encode()
    w.add(header)
    long = b"q" * (3 * MAX_LINE_BYTES) + b"\n"
    w.add(long)
    data = header + long + seal_line(w.checkpoint())
    v = ChainVerifier()
    for i in range(0, len(data), 65536):
        v.feed(data[i:i + 65536])
        assert len(v._partial) <= MAX_LINE_BYTES + 65536
    ri = v.finish()
    assert ri.state == "intact", ri.summary
    edited = header + b"r" + long[1:] + seal_line(w.checkpoint())
    v = ChainVerifier()
    for i in range(0, len(edited), 1 << 20):
        v.feed(edited[i:i + (1 << 20)])
    assert v.finish().state == "broken"


def test_json_depth_is_checked_without_recursion():
    deep: object = 1
    for _ in range(100_000):
        deep = [deep]
    assert json_too_deep(deep)
    assert not json_too_deep({"a": [{"b": 1}]}, 3)
    assert json_too_deep({"a": [{"b": 1}]}, 2)
    assert not json_too_deep([[]], 2) and json_too_deep([[]], 1)


def test_a_kept_record_nested_too_deep_is_a_bad_line():
    nested: object = {}
    for _ in range(MAX_JSON_DEPTH + 1):
        nested = {"x": nested}
    for rec in ({"type": "run", "schema_version": 1, "extra": nested},
                {"type": "step", "t": 1.8e9, "event": "end", "extra": nested}):
        try:
            parse_line(json.dumps(rec))
        except RecordError as exc:
            assert "nested deeper" in str(exc)
        else:
            raise AssertionError("a record nested too deep was accepted")
    shallow = {"type": "run", "schema_version": 1, "extra": {"x": {"y": 1}}}
    assert parse_line(json.dumps(shallow)).data["extra"] == {"x": {"y": 1}}


def test_a_header_whose_object_fields_are_not_objects_is_a_bad_line():
    for key in ("target", "load", "environment", "slo", "server_capacity", "headers"):
        for bad in ([1, 2], "x", 3):
            try:
                parse_line(json.dumps({"type": "run", "schema_version": 1, key: bad}))
            except RecordError as exc:
                assert key in str(exc)
            else:
                raise AssertionError(f"header {key}={bad!r} accepted")
        assert parse_line(json.dumps({"type": "run", "schema_version": 1, key: None}))
