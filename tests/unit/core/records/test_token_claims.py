"""A request record's token fields are claims checked against each other: one that contradicts itself is a bad
line (reported with file and line, counted), never judged. The case that matters most: a file edited to lower
``itl_max_ms`` under an ITL SLO while its first/last token times and chunk count say the gaps were longer."""

from __future__ import annotations

import json

import pytest

from tui.core.records import RecordError, parse_object
from tui.core.records.parse import parse_request

T0 = 1_767_225_600.0


def rec(**kw) -> dict:
    d = {"type": "request", "id": "r1", "t_intended": T0, "t_sent": T0, "t_first_token": T0 + 0.2,
         "t_end": T0 + 1.25, "input_tokens": 8, "output_tokens": 21, "finish_reason": "stop", "http_status": 200,
         "complete": True, "error": None, "error_detail": None, "phase": "measure", "level": 1, "round": 1,
         "t_last_token": T0 + 1.2, "output_chunks": 21, "itl_max_ms": 80.0, "itl_p50_ms": 50.0, "itl_p95_ms": 60.0}
    d.update(kw)
    return d


def test_a_consistent_record_reads():
    r = parse_request(rec())
    assert r.itl_max_ms == 80.0 and r.output_chunks == 21


@pytest.mark.parametrize("change, says", [
    # 20 gaps over 1000 ms: the mean gap is 50 ms, so the largest cannot be 10 ms (edited to meet --slo-itl-ms 20)
    ({"itl_max_ms": 10.0, "itl_p50_ms": 5.0, "itl_p95_ms": 9.0}, "shorter than the mean gap"),
    ({"itl_max_ms": 1500.0}, "longer than the time from the first to the last token"),
    ({"itl_p50_ms": 70.0, "itl_p95_ms": 60.0}, "itl_p50_ms is above itl_p95_ms"),
    ({"itl_p95_ms": 90.0}, "itl_p95_ms is above itl_max_ms"),
    ({"reasoning_chunks": 22}, "reasoning_chunks is more than output_chunks"),
    ({"t_first_reasoning": T0 + 0.2, "t_first_answer": T0 + 1.22, "t_last_token": T0 + 1.2},
     "t_first_answer is after t_last_token"),
])
def test_a_self_contradicting_record_is_a_bad_line(change, says):
    with pytest.raises(RecordError, match=says):
        parse_object(json.loads(json.dumps(rec(**change))))


def test_rounding_of_other_tools_is_not_a_contradiction():
    # the mean gap is 50 ms; a largest gap written 0.4 ms under it (rounding) still reads
    r = parse_request(rec(itl_max_ms=49.6, itl_p50_ms=49.6, itl_p95_ms=49.6))
    assert r.itl_max_ms == 49.6
