"""Counted tokens end to end in the core: the Monitor keeps one TokenTally per level (LevelRow.tokens) and the
run-wide one (Snapshot.tokens); the run header's ``slo`` block records every SLO in force and old blocks still read."""

from __future__ import annotations

import tests.support.token_files as tf
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import parse_object
from tui.core.slos import Slos, from_header_block, header_block


def _snapshot(records: list[dict]):
    m = Monitor(MonitorConfig())
    m.add_many(parse_object(d) for d in records)
    return m.snapshot()


def test_each_level_tallies_its_own_measured_requests_and_the_run_wide_one_adds_them_up():
    snap = _snapshot(tf.two_levels())
    rows = {r.level: r for r in snap.levels}
    two, four = rows[2].tokens, rows[4].tokens
    assert two is not None and four is not None
    assert two["input"]["asked"] == {"min": 128, "p50": 128, "max": 128, "n": rows[2].window.good.n}
    assert four["input"]["asked"]["p50"] == 256 and four["input"]["received"]["p50"] == 270
    assert two["output"]["asked"]["p50"] == 64 and two["output"]["received"]["p50"] == 64  # the server's count
    # every 10th request saw 61 chunks against the server's 64: beyond +-1, a disagreement; 63 is within it
    n2, n4 = rows[2].window.good.n, rows[4].window.good.n
    assert two["disagree"]["output"] == (n2 + 9) // 10 and two["disagree"]["output_compared"] == n2
    assert two["disagree"]["input"] == n2  # 140 counted against 128 asked (a chat template): counted, shown
    assert "server counted 64, 61 chunks seen, on 12 of 119 requests" in two["lines"][0]
    assert snap.tokens is not None
    assert snap.tokens["disagree"]["of"] == n2 + n4
    assert snap.tokens["input"]["asked"] == {"min": 128, "p50": 256, "max": 256, "n": n2 + n4}


def test_records_without_token_fields_leave_asked_unknown_never_guessed():
    import tests.support.evidence_files as ef
    snap = _snapshot(ef.honest_closed(seconds=60))
    tk = snap.levels[0].tokens
    assert tk is not None and tk["input"]["asked"]["n"] == 0 and tk["output"]["asked"]["n"] == 0
    assert tk["input"]["received"]["p50"] == 100  # input_tokens: the server's count, received
    assert tk["lines"][0].startswith("output tokens: asked unknown, received 32 / 32 / 32")


def test_the_header_slo_block_names_every_slo_and_reads_back():
    s = Slos(ttft_ms=800, tpot_ms=50, e2e_ms=9000, ttft_of="any")
    b = header_block(s, 0.95)
    assert b["in_force"] == ["TTFT", "TPOT", "E2E"] and b["text"] == "TTFT <= 800 ms (any), TPOT <= 50 ms, E2E <= 9000 ms"
    assert (b["ttft_of"], b["itl_ms"], b["target"]) == ("any", None, 0.95)
    assert from_header_block(b) == s
    assert from_header_block(header_block(Slos(ttft_ms=None, itl_ms=200), 0.9)) == Slos(ttft_ms=None, itl_ms=200)


def test_an_old_header_slo_block_reads_as_the_ttft_slo_alone():
    assert from_header_block({"ttft_ms": 1000.0, "target": 0.95}) == Slos(ttft_ms=1000.0)
    assert from_header_block({"ttft_ms": 1000.0, "ttft_of": "bogus", "tpot_ms": "x"}) == Slos(ttft_ms=1000.0)
    assert from_header_block(None) is None and from_header_block({"target": 0.95}) is None
