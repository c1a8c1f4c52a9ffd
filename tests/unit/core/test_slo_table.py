"""Issue 38: one SLO table (``tui.core.slos.SLO_TABLE``). Everything about an SLO kind is one row of it; the bits,
the names, the Monitor's stores, the rule, the report's keys and the console's words are generated from it.

The proof: a fifth kind, declared here in a test-only table (no other module touched), is judged by the one rule,
stored per level by the Monitor, and shows in the report's JSON, the report's text and the console."""

from __future__ import annotations

import json

import pytest

from tests.console.test_app import screen_text, settled
from tests.support import evidence_files as E
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import parse_line
from tui.core.report import build_report, format_report
from tui.core.slos import (
    LATENCY_KEYS,
    MISS_BITS,
    NEEDS,
    NOJUDGE_SHIFT,
    SLO_JSON_KEYS,
    SLO_NAMES,
    SLO_TABLE,
    SloKind,
    Slos,
    header_block,
    metric_values,
    slo_rule,
)


def _gen_ms(r, answer: bool) -> float | None:
    """Generation time: first token to the end of the request (ms); None without a first token."""
    tf = r.t_first_token
    return None if tf is None else (r.t_end - tf) * 1000.0


GEN = SloKind("GEN", "gen", "gen_ms", "--slo-gen-ms", "ms", _gen_ms, "first-token times",
              title="generation time (first token to end)")
TABLE5 = (*SLO_TABLE, GEN)


def test_everything_about_the_four_kinds_is_generated_from_the_table():
    assert SLO_NAMES == ("TTFT", "TPOT", "ITL", "E2E") == tuple(k.name for k in SLO_TABLE)
    assert LATENCY_KEYS == ("ttft", "tpot", "itl", "e2e")
    assert SLO_JSON_KEYS == ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
    assert MISS_BITS == (1, 2, 4, 8) and NOJUDGE_SHIFT >= len(SLO_TABLE)
    assert tuple(k.flag for k in SLO_TABLE) == ("--slo-ttft-ms", "--slo-tpot-ms", "--slo-itl-ms", "--slo-e2e-ms")
    assert NEEDS["TPOT"] == "last-token times"
    # the run header's block keeps its keys and their order (the record format is unchanged)
    assert list(header_block(Slos(), 0.95)) == ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "ttft_of", "in_force",
                                                "text", "target"]


def test_slos_of_a_table_and_its_words():
    s = Slos.of({"ttft": None, "e2e": 5000.0})
    assert s == Slos(ttft_ms=None, e2e_ms=5000.0) and s.describe() == "E2E <= 5000 ms" and s.in_force() == ("E2E",)
    with pytest.raises(ValueError):
        Slos.of({"nope": 1.0})
    with pytest.raises(ValueError):
        Slos.of({"gen": -1.0}, TABLE5)  # every kind's limit is checked like the four
    five = Slos.of({"ttft": 1000.0, "gen": 500.0}, TABLE5)
    assert five.describe() == "TTFT <= 1000 ms (answer), GEN <= 500 ms" and five.in_force() == ("TTFT", "GEN")
    assert five.limit("gen") == 500.0 and five != Slos()


def _dicts() -> list[dict]:
    """A closed-loop run (1.8 s from first token to end); every third request's first token 150 ms earlier (1.95 s)."""
    out = E.honest_closed(level=4, seconds=660.0)
    k = 0
    for d in out:
        if d.get("type") == "request":
            if k % 3 == 0:
                d["t_first_token"] = d["t_sent"] + 0.05
            k += 1
    return out


def _records() -> list:
    return [parse_line(json.dumps(d)) for d in _dicts()]


def _requests(recs):
    return [r for r in recs if type(r).__name__ == "RequestRecord"]


def test_a_fifth_kind_is_judged_by_the_one_rule():
    reqs = _requests(_records())
    gens = sorted(_gen_ms(r, True) for r in reqs)
    limit = 1900.0  # a third of the requests miss it
    rule = slo_rule(Slos.of({"ttft": 1000.0, "gen": limit}, TABLE5))
    outcomes = [rule(r) for r in reqs]
    slow = [o for o in outcomes if o[0] == "slow"]
    assert slow and all(o[2] == 1 << 4 for o in slow)  # GEN's miss bit: 1 << its index in the table
    assert len(slow) == sum(1 for g in gens if round(g * 1000) > round(limit * 1000)) == (len(reqs) + 2) // 3
    assert metric_values(reqs[0]) == tuple(k.derive(reqs[0], True) for k in SLO_TABLE)


def _fifth_monitor() -> tuple[Monitor, float]:
    recs = _records()
    limit = 1900.0
    mon = Monitor(MonitorConfig(slos=Slos.of({"ttft": 1000.0, "gen": limit}, TABLE5), min_window_s=0.0))
    mon.add_many(recs)
    return mon, limit


def test_a_fifth_kind_flows_to_the_monitor_the_report_json_and_text():
    mon, limit = _fifth_monitor()
    snap = mon.snapshot()
    w = snap.levels[0].window
    assert "gen" in w.latency and w.latency["gen"][0].n == w.completed  # the Monitor's store of the new kind
    missed = w.misses.get("GEN", 0)
    assert missed > 0 and w.slow == missed and set(w.misses) == {"GEN"}
    rep = build_report(snap)
    assert rep["slo"]["slos"]["gen_ms"] == limit and rep["slo"]["in_force"] == ["TTFT", "GEN"]
    assert f"GEN <= {limit:g} ms" in rep["slo"]["text"]
    win = rep["measured"]["window"]
    assert win["gen_ms"]["n"] == w.completed and win["misses"] == {"GEN": missed}
    json.dumps(rep)  # JSON-serialisable, like every report
    text = format_report(rep)
    assert f"GEN <= {limit:g} ms" in text and "GEN over completed requests" in text


async def test_a_fifth_kind_flows_to_the_console(tmp_path):
    from tui.app import build_app
    from tui.sources.base import MonitorSink
    from tui.sources.replay import ReplaySource

    path = E.write(tmp_path / "run.jsonl", _dicts())
    src = ReplaySource(str(path), max_speed=True, poll_interval=0.02)
    mon = Monitor(MonitorConfig(slos=Slos.of({"ttft": None, "gen": 1900.0}, TABLE5), min_window_s=0.0),
                  source=src.label)
    sink = MonitorSink(mon)
    app = build_app(src, sink, None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settled(pilot, app, src, sink)
        pane = str(app.screen.query_one("#good-text").render())
        assert "good: GEN <= 1900 ms" in pane
        await pilot.press("question_mark")
        await pilot.pause()
        assert "met every SLO in force: GEN <= 1900 ms" in screen_text(app)
