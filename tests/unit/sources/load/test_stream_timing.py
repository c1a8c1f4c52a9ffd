"""The per-request timing and token fields the load generator writes (issue 21), against the in-test fault server.

Each scenario sets what the server does (a known TTFT, a decode pace, one stall, reasoning deltas, ``<think>`` in
the content, a usage chunk present / absent / disagreeing); each test checks the fields of the record:

- exactly where the client's own figures decide (counts, usage, and the gap statistics against the per-token
  ``token_offsets`` the same record carries);
- by causality against the server's log (``writes``: when each token chunk was written; both processes stamp the
  same machine's clock): the client cannot see a token before the server wrote it, nor before the delays the
  scenario sets have passed since the request was sent;
- above, within a margin calibrated on this machine (tests/support/calibrate.py), never a fixed wall-clock bound.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.support.calibrate import measure_peer
from tests.support.fault_server import FaultServer
from tests.unit.sources.load.test_loadgen_faults import check_shape, requests_of, run

# every test here starts a process or a listening server (tests/conftest.py checks it)
pytestmark = pytest.mark.slow

EPS = 0.002  # s: the client's epoch stamps come from perf_counter through an anchor; the server stamps time.time()


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


@pytest.fixture(scope="module")
def margin(fs) -> float:
    """How late this machine may deliver a token the server wrote, now: 10 x the slowest whole 32-token request
    at concurrency 1, at least 50 ms."""
    speed = measure_peer(fs.url("ok", tokens=32), n=3)
    return max(0.05, 10 * max(speed.e2e_s))


def entry_of(fs, r: dict) -> dict:
    (e,) = [e for e in fs.completions() if e["id"] == r["id"]]
    return e


def offset_gaps_ms(r: dict) -> list[float]:
    off = r["token_offsets"]
    return sorted((b - a) * 1000 for a, b in zip(off, off[1:]))


def nearest_rank(sorted_values: list[float], q: float) -> float:
    return sorted_values[max(1, math.ceil(q * len(sorted_values) - 1e-12)) - 1]


def check_gaps_match_offsets(r: dict) -> None:
    """The gap statistics are what the record's own per-token times give (offsets are rounded to 1 us)."""
    gaps = offset_gaps_ms(r)
    assert math.isclose(r["itl_max_ms"], gaps[-1], abs_tol=0.01)
    assert math.isclose(r["itl_p50_ms"], nearest_rank(gaps, 0.5), abs_tol=0.01)
    assert math.isclose(r["itl_p95_ms"], nearest_rank(gaps, 0.95), abs_tol=0.01)
    assert math.isclose(r["t_last_token"] - r["t_first_token"], r["token_offsets"][-1], abs_tol=2e-6)


# ------------------------------------------------------------------ known TTFT, decode pace, a stall


async def test_known_ttft_plain_stream_fields(fs, margin):
    (r,) = requests_of(await run(fs.url("ok", tokens=4, first_delay=0.15), token_offsets=True))
    check_shape(r)
    e = entry_of(fs, r)
    assert r["complete"] is True
    assert r["t_first_token"] - r["t_sent"] >= 0.15
    assert r["t_first_token"] >= e["writes"][0][1] - EPS
    assert r["t_first_token"] - e["writes"][0][1] <= margin
    assert "t_first_answer" not in r and "t_first_reasoning" not in r  # no reasoning: the first token is the answer
    assert (r["output_chunks"], r["reasoning_chunks"], r["usage_output_tokens"], r["output_tokens"]) == (4, 0, 4, 4)
    assert r["usage_input_tokens"] == len(e["prompt"].split()) == r["input_tokens"]
    assert "usage_reasoning_tokens" not in r
    assert r["t_first_token"] <= r["t_last_token"] <= r["t_end"]
    check_gaps_match_offsets(r)


async def test_decode_pace_last_token_and_tpot(fs, margin):
    delay, n = 0.04, 6
    (r,) = requests_of(await run(fs.url("ok", tokens=n, delay=delay), token_offsets=True))
    check_shape(r)
    writes = [t for _, t in entry_of(fs, r)["writes"]]
    assert r["t_last_token"] - r["t_sent"] >= (n - 1) * delay
    assert r["t_last_token"] >= writes[-1] - EPS and r["t_last_token"] - writes[-1] <= margin
    server_tpot = (writes[-1] - writes[0]) / (n - 1)
    client_tpot = (r["t_last_token"] - r["t_first_token"]) / (n - 1)
    assert server_tpot >= delay
    assert abs(client_tpot - server_tpot) <= 2 * margin / (n - 1)
    check_gaps_match_offsets(r)


async def test_one_stall_mid_stream_is_the_largest_gap(fs, margin):
    stall = max(0.3, 3 * margin)
    n, at = 21, 10
    (r,) = requests_of(await run(fs.url("ok", tokens=n, stall_at=at, stall=stall), token_offsets=True))
    check_shape(r)
    assert r["complete"] is True
    writes = [t for _, t in entry_of(fs, r)["writes"]]
    assert writes[at] - writes[at - 1] >= stall  # the server's truth
    check_gaps_match_offsets(r)
    off = r["token_offsets"]
    gaps = [b - a for a, b in zip(off, off[1:])]
    assert gaps.index(max(gaps)) == at - 1  # the gap before token `at`
    assert stall * 1000 - margin * 1000 <= r["itl_max_ms"] <= (stall + margin) * 1000
    assert r["itl_p95_ms"] < r["itl_max_ms"] and r["itl_p50_ms"] <= margin * 1000  # one stall: not the typical gap
    assert r["t_last_token"] - r["t_sent"] >= stall


# ------------------------------------------------------------------ reasoning


@pytest.mark.parametrize("rkey", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_first_reasoning_and_first_answer_apart(fs, margin, rkey):
    (r,) = requests_of(await run(fs.url("ok", reasoning=3, rkey=rkey, tokens=4, first_delay=0.05,
                                        answer_delay=0.2)))
    check_shape(r)
    writes = entry_of(fs, r)["writes"]
    first_answer_write = next(t for kind, t in writes if kind == "answer")
    assert r["complete"] is True
    assert r["t_first_reasoning"] == r["t_first_token"] and r["t_first_token"] - r["t_sent"] >= 0.05
    assert r["t_first_answer"] - r["t_sent"] >= 0.25  # first_delay + answer_delay
    assert first_answer_write - EPS <= r["t_first_answer"] <= first_answer_write + margin
    assert (r["output_chunks"], r["reasoning_chunks"], r["usage_output_tokens"]) == (7, 3, 7)


@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_think_block_in_content_with_tags_split_across_chunks(fs, margin, api):
    (r,) = requests_of(await run(fs.url("ok", reasoning=3, rkey="think", tag_split=2, tokens=4,
                                        answer_delay=0.2), api=api))
    check_shape(r)
    writes = entry_of(fs, r)["writes"]
    first_answer_write = next(t for kind, t in writes if kind == "answer")
    # "<think>" as 4 chunks, 3 reasoning words, "</think>" as 4 chunks, then 4 answer tokens
    assert (r["output_chunks"], r["reasoning_chunks"]) == (15, 11)
    assert r["t_first_reasoning"] == r["t_first_token"]
    assert first_answer_write - EPS <= r["t_first_answer"] <= first_answer_write + margin
    assert r["t_first_answer"] - r["t_first_reasoning"] >= 0.2 - EPS


async def test_reasoning_only_no_first_answer(fs):
    (r,) = requests_of(await run(fs.url("ok", reasoning=3, tokens=0)))
    check_shape(r)
    assert r["complete"] is True and "t_first_answer" not in r and r["t_first_reasoning"] == r["t_first_token"]
    assert (r["output_chunks"], r["reasoning_chunks"]) == (3, 3)


# ------------------------------------------------------------------ usage present / absent / disagreeing


async def test_usage_absent_fields_absent_chunks_counted(fs):
    (r,) = requests_of(await run(fs.url("ok", tokens=7, usage=0)))
    check_shape(r)
    assert not {"usage_output_tokens", "usage_input_tokens", "usage_reasoning_tokens"} & set(r)
    assert (r["output_chunks"], r["output_tokens"], r["usage"]) == (7, 7, "counted")


async def test_usage_that_disagrees_with_the_chunks_is_kept_beside_them(fs):
    (r,) = requests_of(await run(fs.url("ok", reasoning=2, tokens=7, usage_out=12, usage_in=40, usage_reasoning=5)))
    check_shape(r)
    assert (r["usage_output_tokens"], r["usage_input_tokens"], r["usage_reasoning_tokens"]) == (12, 40, 5)
    assert (r["output_chunks"], r["reasoning_chunks"]) == (9, 2)
    assert r["output_tokens"] == 12 and r["input_tokens"] == 40  # output_tokens keeps its meaning (server's usage)


async def test_completions_usage_in_the_finish_chunk(fs):
    (r,) = requests_of(await run(fs.url("ok", tokens=5, usage_out=6), api="completions"))
    check_shape(r)
    assert (r["usage_output_tokens"], r["output_chunks"]) == (6, 5)


async def test_a_server_refusing_stream_options_gives_counted_chunks_and_no_usage_fields(fs):
    reqs = requests_of(await run(fs.url("reject_field", field="stream_options", tokens=3), requests=2))
    for r in reqs:
        check_shape(r)
        assert r["complete"] is True and r["output_chunks"] == 3 and "usage_output_tokens" not in r


async def test_failed_before_the_stream_no_stream_fields(fs):
    (r,) = requests_of(await run(fs.url("status", code=503)))
    check_shape(r)
    assert not {"output_chunks", "t_last_token", "itl_max_ms"} & set(r)


# ------------------------------------------------------------------ secrets


async def test_secrets_never_in_the_records_of_a_reasoning_stream(fs, monkeypatch):
    monkeypatch.setenv("SW_FAULT_KEY", "sk-stream-secret-424242")
    recs = await run(fs.url("ok", reasoning=2, rkey="think", tokens=3, stall_at=2, stall=0.05),
                     api_key_env="SW_FAULT_KEY", headers=[("X-Team-Token", "hdr-secret-31337")])
    (r,) = requests_of(recs)
    assert entry_of(fs, r)["headers"]["authorization"] == "Bearer sk-stream-secret-424242"  # it was sent
    assert r["output_chunks"] == 5 and "itl_max_ms" in r
    blob = json.dumps(recs)
    assert "sk-stream-secret-424242" not in blob and "hdr-secret-31337" not in blob
