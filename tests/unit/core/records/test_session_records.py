"""The session fields of a request record (issue 23): read and validated when ``session`` is present, written back
by ``request_to_dict``; a bad value makes the line malformed (RecordError), never a crash."""

from __future__ import annotations

import pytest

import tests.support.evidence_files as ef
from tui.core.records import RecordError, parse_request
from tui.core.records.write import request_to_dict


def rec(**extra) -> dict:
    return ef.request(1, ef.T0 + 1, 0.2, 1.0, level=4, **extra)


def test_session_fields_are_read_and_written_back():
    r = parse_request(rec(session="run-s3", turn=2, context_tokens=812, turns_planned=4, think_s=1.5))
    assert (r.session, r.turn, r.context_tokens) == ("run-s3", 2, 812)
    d = request_to_dict(r)
    assert (d["session"], d["turn"], d["context_tokens"]) == ("run-s3", 2, 812)
    plain = parse_request(rec())
    assert plain.session is None and plain.turn is None and "session" not in request_to_dict(plain)


@pytest.mark.parametrize("bad", [{"session": 5}, {"session": ""}, {"session": "s", "turn": 0},
                                 {"session": "s", "turn": 1.5}, {"session": "s", "context_tokens": -1}])
def test_bad_session_fields_are_refused(bad):
    with pytest.raises(RecordError):
        parse_request(rec(**bad))
