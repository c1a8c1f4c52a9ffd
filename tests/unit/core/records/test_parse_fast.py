"""``parse_request``'s fast path (issue 38's hot path) accepts only records the full validation accepts unchanged,
into the same record: for every edit of a standard record (a field's value of any JSON type, at and past every
bound; a field removed; a field added), the fast path and ``_parse_request`` give equal records or the same refusal.
"""

from __future__ import annotations

import math
import random

import pytest

from tui.core.records import RecordError
from tui.core.records.schema import COUNT_MAX, T_MAX_EPOCH, T_MIN_EPOCH
from tui.core.records.validate import _REQUEST_KEYS, _parse_request, parse_request

T0 = 1_767_225_600.0
STREAM_KEYS = ("t_last_token", "t_first_answer", "t_first_reasoning", "output_chunks", "reasoning_chunks",
               "usage_output_tokens", "usage_input_tokens", "itl_max_ms", "itl_p50_ms", "input_tokens_asked",
               "retried", "token_offsets", "cached_tokens", "session", "turn", "embedding_dim")


def standard(rng: random.Random) -> dict:
    t = T0 + rng.random() * 1000
    fail = rng.random() < 0.2
    tf = None if fail and rng.random() < 0.5 else t + rng.random()
    return {"type": "request", "id": f"r{rng.randrange(10**6)}", "t_intended": t - rng.random() * 0.01, "t_sent": t,
            "t_first_token": tf, "t_end": (tf or t) + rng.random() * 2, "input_tokens": 128,
            "output_tokens": rng.choice((0, 1, 64)), "finish_reason": rng.choice((None, "length", "stop", "abort")),
            "http_status": rng.choice((200, 500, None)), "complete": not fail, "error": "stream_reset" if fail else None,
            "error_detail": None, "phase": rng.choice(("measure", "warmup")), "level": rng.choice((1, 2.5, None)),
            "round": rng.choice((1, 2, None))}


def values(rng: random.Random, d: dict, key: str) -> list:
    """Values of every JSON type for ``key``, at and past the bounds the checks hold."""
    near = d.get(key) if isinstance(d.get(key), (int, float)) and not isinstance(d.get(key), bool) else T0
    return [None, True, False, 0, 1, -1, 99, 100, 599, 600, 2**53, 2**53 + 1, 2**63, 2**64, -(2**53) - 1, 0.0, 1.0,
            64.0, 1.5, -0.5, math.nan, math.inf, -math.inf, T_MIN_EPOCH, T_MIN_EPOCH - 1e-6, T_MAX_EPOCH,
            T_MAX_EPOCH - 1, int(T0), near, near + 1e-9, near - 1e-9, near + rng.random(), float(COUNT_MAX),
            "", "measure", "warmup", "x", "length", "1767225600", [], [1.0], {}, {"a": 1}]


def outcome(f, d: dict):
    try:
        return "record", f(d)
    except RecordError as exc:
        return "refused", str(exc)


@pytest.mark.parametrize("seed", range(12))
def test_the_fast_path_gives_what_every_check_in_turn_gives(seed: int) -> None:
    rng = random.Random(seed)
    fast_taken = 0
    for _ in range(150):
        d = standard(rng)
        if rng.random() < 0.1:
            d.pop(rng.choice(_REQUEST_KEYS))  # a field left out
        if rng.random() < 0.1:
            d[rng.choice(("retried", "token_offsets", "t_last_token", "session", "extra"))] = rng.choice((1, None, [0.1]))
        if rng.random() < 0.5:  # a run's stream fields (issue 21), valid as a run writes them
            tf, te = d.get("t_first_token"), d.get("t_end")
            if isinstance(tf, float) and isinstance(te, float):
                d.update(t_last_token=te, itl_max_ms=12.5, itl_p50_ms=3.0, itl_p95_ms=9.0)
            d.update(output_chunks=d.get("output_tokens"), usage_output_tokens=d.get("output_tokens"),
                     input_tokens_asked=128, output_tokens_asked=64, retried=rng.choice((0, 2)))
        key = rng.choice((*_REQUEST_KEYS, "type", *STREAM_KEYS))
        for v in values(rng, d, key):
            e = dict(d)
            e[key] = v
            got, want = outcome(parse_request, e), outcome(_parse_request, e)
            assert got == want, (e, got, want)
            fast_taken += got[0] == "record"
    assert fast_taken > 500  # the edits keep enough records valid for the comparison to mean something


def test_the_bench_file_shape_takes_the_fast_path() -> None:
    # a record as the load generator writes it is made by the fast path: it must equal the full path's record
    d = standard(random.Random(1))
    d.update(type="request", error=None, complete=True, t_first_token=d["t_sent"] + 0.2, t_end=d["t_sent"] + 1.0,
             finish_reason="length", http_status=200, output_tokens=64, level=1, round=1, phase="measure")
    assert parse_request(d) == _parse_request(d)
