"""The server's prefix-cache use (issue 23, tui/core/prefix_cache.py): the counters' deltas per step (reset,
missing families, no queries), and the figures per level in the Monitor's rows, the report, compare and the
console's line, from hand-written records (tests/support/evidence_files.py shapes plus the issue 23 fields)."""

from __future__ import annotations

import tests.support.evidence_files as ef
from tui.core.compare import compare, to_markdown
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.prefix_cache import UNKNOWN, PrefixTally, counters, level_summary, step_block
from tui.core.records import RequestRecord, parse_object
from tui.core.report import build_report, format_report

Q, H = "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"
SRC = "vllm:prefix_cache_hits_total/queries_total"


# ------------------------------------------------------------------ counters and their deltas


def test_counters_sum_the_series_and_prefer_the_model_asked():
    s = [(Q, {"model_name": "a"}, 100.0), (H, {"model_name": "a"}, 40.0),
         (Q, {"model_name": "b"}, 10.0), (H, {"model_name": "b"}, 1.0), ("other", {}, 5.0)]
    assert counters(s) == {"source": SRC, "queries": 110.0, "hits": 41.0}
    assert counters(s, "b") == {"source": SRC, "queries": 10.0, "hits": 1.0}
    assert counters(s, "not-served") == {"source": SRC, "queries": 110.0, "hits": 41.0}  # no such label: all


def test_counters_absent_or_half_there_or_not_finite():
    assert counters([("vllm:num_requests_running", {}, 1.0)]) is None
    half = counters([(Q, {}, 5.0)])
    assert half is not None and "hits_total missing" in half["problem"] and "queries" not in half
    assert "not a finite" in counters([(Q, {}, float("nan")), (H, {}, 1.0)])["problem"]  # type: ignore[index]
    old = counters([("vllm:gpu_prefix_cache_queries_total", {}, 8.0), ("vllm:gpu_prefix_cache_hits_total", {}, 2.0)])
    assert old == {"source": "vllm:gpu_prefix_cache_hits_total/queries_total", "queries": 8.0, "hits": 2.0}


def c(q: float, h: float) -> dict:
    return {"source": SRC, "queries": q, "hits": h}


def test_step_block_is_the_delta_with_its_rate():
    assert step_block(c(1000, 100), c(1800, 580)) == {"source": SRC, "queries": 800, "hits": 480, "hit_rate": 0.6}
    b = step_block(c(50, 5), c(50, 5))
    assert b == {"source": SRC, "queries": 0, "hits": 0, "hit_rate": None}  # no query: no rate, never 0 or 1


def test_a_reset_or_a_missing_end_says_so_and_gives_no_number():
    for start, end, words in ((c(1000, 500), c(20, 10), "went down"), (c(10, 5), None, "step's end"),
                              (None, c(10, 5), "step's start"), (c(10, 5), {"source": SRC, "problem": "x missing"},
                                                                   "x missing"), (c(0, 0), c(10, 20), "more hits")):
        b = step_block(start, end)
        assert b is not None and words in b["problem"], (start, end, b)
        assert b["queries"] is None and b["hits"] is None and b["hit_rate"] is None
    assert step_block(None, None) is None


# ------------------------------------------------------------------ per request


def test_tally_token_rate_over_requests_where_both_are_known():
    t = PrefixTally()
    t.add(200, 300, "usage.prompt_tokens_details")
    t.add(0, 300, "usage.prompt_tokens_details")
    t.add(50, None, "usage.prompt_tokens_details")  # no prompt count: counted known, not in the rate
    t.add(None, 300)
    t.add(400, 300, "usage.prompt_tokens_details")  # more cached than prompt: inconsistent, left out
    s = level_summary(t)
    assert (s["requests"], s["cached_known"], s["rate_requests"], s["inconsistent"]) == (5, 4, 2, 1)
    assert s["token_hit_rate"] == 200 / 600
    assert s["server"] is None
    assert "4/5 requests" in s["text"] and "33.3%" in s["text"] and "1 claim more cached" in s["text"]
    assert level_summary(PrefixTally())["text"] == UNKNOWN


# ------------------------------------------------------------------ Monitor, report, compare, console


def _records(cached=None, src="llama.cpp timings.cache_n", step_pc=None, level=2, seconds=120.0) -> list[dict]:
    reqs = ef.closed_step(level, ef.T0 + 1.0, seconds)
    for i, r in enumerate(reqs):
        r["cached_tokens"] = None if cached is None else cached(i)
        if r["cached_tokens"] is not None:
            r["cached_tokens_source"] = src
    start, end = ef.step_records(reqs, level, "closed")
    if step_pc is not None:
        end["prefix_cache"] = step_pc
    return ef.assemble(ef.header("closed", (level,)), [(start, reqs, end)])


def _monitor(records: list[dict]) -> Monitor:
    m = Monitor(MonitorConfig())
    m.add_many(parse_object(d) for d in records)
    return m


def test_level_row_report_and_console_from_request_figures():
    recs = _records(cached=lambda i: 75 if i % 2 else 0)  # input_tokens 100 each: half the requests hit 75
    n = sum(1 for r in recs if r["type"] == "request")
    snap = _monitor(recs).snapshot()
    pc = snap.levels[0].prefix_cache
    assert pc is not None and pc["cached_known"] == n and pc["requests"] == n
    assert pc["token_hit_rate"] == (75 * (n // 2)) / (100 * n)
    assert pc["sources"] == {"llama.cpp timings.cache_n": n}
    rate = pc["token_hit_rate"]
    assert snap.prefix_cache_text == f"{100 * rate:.0f}% of prompt tokens ({n}/{n} req said)"
    rep = build_report(snap)
    assert rep["levels"][0]["prefix_cache"]["token_hit_rate"] == pc["token_hit_rate"]
    assert rep["measured"]["prefix_cache"] is pc
    text = format_report(rep)
    assert "Prefix cache (what the server says" in text
    assert (f"level 2 round 1: cached tokens said by {n}/{n} requests (llama.cpp timings.cache_n): token hit rate "
            f"{100 * rate:.1f}% ({75 * (n // 2):,} of {100 * n:,} prompt tokens)") in text


def test_server_counters_from_the_step_record_reach_the_row_and_the_report():
    recs = _records(step_pc={"source": SRC, "queries": 4000, "hits": 3000, "hit_rate": 0.75})
    snap = _monitor(recs).snapshot()
    pc = snap.levels[0].prefix_cache
    assert pc["cached_known"] == 0 and pc["server"]["hit_rate"] == 0.75 and pc["server"]["steps"] == 1
    assert snap.prefix_cache_text == "server 75%"
    text = format_report(build_report(snap))
    assert "requests: unknown (the server does not say) (0/" in text
    assert "server counters: 75.0% (3,000 of 4,000 tokens, vllm:prefix_cache_hits_total/queries_total)" in text


def test_a_step_block_with_a_problem_is_said_never_a_number():
    recs = _records(step_pc={"source": SRC, "queries": None, "hits": None, "hit_rate": None,
                             "problem": "a counter went down during the step (the server restarted?): no delta"})
    pc = _monitor(recs).snapshot().levels[0].prefix_cache
    assert pc["server"]["hit_rate"] is None and pc["server"]["queries"] is None
    assert "went down" in pc["text"]
    bogus = _records(step_pc={"queries": "lots", "hits": -1})  # a hand-edited block: unreadable, said
    pc = _monitor(bogus).snapshot().levels[0].prefix_cache
    assert pc["server"]["hit_rate"] is None and "not readable" in pc["text"]


def test_nothing_known_reads_unknown_in_the_report_and_no_console_line():
    snap = _monitor(_records()).snapshot()
    assert snap.prefix_cache_text is None
    text = format_report(build_report(snap))
    assert "Prefix cache" in text and UNKNOWN + ": no request said cached tokens" in text


def _cmp_run(recs: list[dict], label: str) -> dict:
    m = _monitor(recs)
    m.finish()
    reqs = [parse_object(d) for d in recs if d["type"] == "request"]
    assert all(type(r) is RequestRecord for r in reqs)
    return {"label": label, "header": recs[0], "requests": reqs, "issues": 0,
            "prefix_cache": m.prefix_cache_by_level()}


def test_compare_puts_the_hit_rates_side_by_side():
    base = _cmp_run(_records(cached=lambda i: 0), "base.jsonl")
    cand = _cmp_run(_records(cached=lambda i: 80, step_pc={"source": SRC, "queries": 100, "hits": 80,
                                                            "hit_rate": 0.8}), "cand.jsonl")
    res = compare(base, cand, slo_ttft_ms=1000.0)
    row = res["levels"][0]["prefix_cache"]
    assert row["base"]["token_hit_rate"] == 0.0 and row["cand"]["token_hit_rate"] == 0.8
    assert row["token_hit_rate_change"] == 0.8 and row["server_hit_rate_change"] is None
    md = to_markdown(res)
    assert "Prefix cache (descriptive" in md
    assert "| 2 | base |" in md and "| 0.0% | unknown (the server does not say) |" in md
    assert "| 2 | cand |" in md and "| 80.0% | 80.0% |" in md


def test_compare_of_runs_that_say_nothing_says_unknown():
    res = compare(_cmp_run(_records(), "a"), _cmp_run(_records(), "b"), slo_ttft_ms=1000.0)
    assert "Prefix cache: unknown (the server does not say)" in to_markdown(res)
    old = {k: v for k, v in _cmp_run(_records(), "a").items() if k != "prefix_cache"}  # a caller without it
    assert "Prefix cache" not in to_markdown(compare(old, old, slo_ttft_ms=1000.0))
