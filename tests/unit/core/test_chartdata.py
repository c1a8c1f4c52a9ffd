"""tui.core.chartdata: the HTML charts' data (issue 25): bounded samples, the level rows of report and accept, the
verdict's state band over time, the TTFT distribution."""

from __future__ import annotations

import json

from tests.support.paths import REPO
from tui.core import chartdata as CD
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import GpuSample, QueueSample, RequestRecord, StepRecord
from tui.core.slos import Slos


def _req(i: int, t: float, ttft: float, level: float = 1, ok: bool = True) -> RequestRecord:
    return RequestRecord(id=f"r{i}", t_sent=t, t_end=t + ttft + 0.5, complete=ok, t_intended=t,
                         t_first_token=t + ttft if ok else None, output_tokens=64 if ok else 0,
                         error=None if ok else "http_error", level=level)


def test_thinned_keeps_everything_below_its_cap_and_an_even_sample_above():
    small = CD.Thinned(100)
    for i in range(99):
        small.add(i)
    assert small.items == list(range(99)) and not small.sampled
    big = CD.Thinned(100)
    for i in range(100_000):
        big.add(i)
    assert big.sampled and big.seen == 100_000
    assert 50 <= len(big.items) < 100
    gaps = {b - a for a, b in zip(big.items, big.items[1:])}
    assert gaps == {big.stride}  # evenly spaced over the whole stream
    assert big.items[0] == 0 and big.items[-1] >= 100_000 - 2 * big.stride


def test_sampler_bounds_requests_per_level_and_keeps_failures_apart():
    s = CD.RunSampler(requests_cap=50, points_cap=20)
    items = [StepRecord(t=0.0, event="start", level=1)]
    items += [_req(i, i * 0.1, 0.2, ok=(i % 100 != 7)) for i in range(5000)]
    items += [QueueSample(t=i * 1.0, source="metrics", waiting=float(i % 3), running=2.0) for i in range(500)]
    items += [GpuSample(t=i * 1.0, device=0, name="A10", memory_used=(10 + i % 2) * CD.GIB,
                        memory_total=24 * CD.GIB) for i in range(300)]
    s.add_many(items)
    assert len(s.requests[(1, 1)].items) < 50 and s.requests[(1, 1)].seen == 4950
    assert s.failures[(1, 1)].seen == 50 and len(s.failures[(1, 1)].items) < 50  # sampled apart, bounded too
    q = CD.queue_series(s)
    assert q["recorded"] and q["sampled"] and len(q["t"]) < 20 and q["seen"] == 500
    assert q["steps"] == [{"t": 0.0, "label": "1"}]
    m = CD.memory_series(s, ceiling_gib=20.0)
    assert m["devices"][0]["total_gib"] == 24.0 and set(m["devices"][0]["used_gib"]) <= {10.0, 11.0}
    assert m["kv"] is None and m["ceiling_gib"] == 20.0


def test_no_samples_says_not_recorded_rather_than_a_series():
    s = CD.RunSampler()
    s.add_many([_req(i, float(i), 0.2) for i in range(10)])
    q = CD.queue_series(s)
    assert not q["recorded"] and not q["in_flight_recorded"]
    m = CD.memory_series(s)
    assert m["devices"] == [] and m["kv"] is None


def test_judged_series_band_follows_the_verdict_timeline_to_pass():
    """700 s of good requests at one level: the band runs INSUFFICIENT_WINDOW then PASS, contiguous, and every
    request is drawn (below the cap), with none marked failed."""
    cfg = MonitorConfig()
    mon = Monitor(cfg)
    s = CD.RunSampler(cfg.slos)
    items = [StepRecord(t=0.0, event="start", level=2, mode="closed")]
    items += [_req(i, i * 0.35, 0.3, level=2) for i in range(2000)]
    mon.add_many(items)
    s.add_many(items)
    snap = mon.snapshot()
    js = CD.judged_series(s, CD.timeline_rows(snap.timeline), 2, 1)
    states = [b["state"] for b in js["bands"]]
    assert states[0] == "INSUFFICIENT_WINDOW" and states[-1] == "PASS", states
    for a, b in zip(js["bands"], js["bands"][1:]):
        assert a["to"] == b["from"]
    assert js["seen"] == 2000 and js["shown"] == 2000 and not js["sampled"] and js["failures"] == []
    assert all(p[2] == "good" and abs(p[1] - 300.0) < 1 for p in js["points"])


def test_judged_series_marks_failures_and_says_when_it_is_a_sample():
    s = CD.RunSampler(Slos(ttft_ms=1000), requests_cap=100)
    s.add_many([_req(i, i * 0.1, 1.5 if i % 2 else 0.2, ok=(i % 50 != 0)) for i in range(3000)])
    js = CD.judged_series(s, [], 1, 1)
    assert js["sampled"] and js["seen"] == 3000 and js["shown"] < 200
    assert {p[2] for p in js["points"]} == {"good", "slow"}
    assert js["failures"] and all(f[2] == "http_error" for f in js["failures"])
    assert js["bands"] == []  # no timeline given: no band, never an invented one


def test_level_rows_read_the_report_and_the_acceptance_shapes():
    doc = json.loads((REPO / "tests" / "golden" / "acceptance_seed.json").read_text())
    acc = CD.level_rows(doc["measured"]["levels"])
    assert acc["labels"] == ["1"] and acc["good"][0]["fraction"] == 0.5
    assert acc["good"][0]["lo"] < 0.5 < acc["good"][0]["hi"]
    assert acc["ttft"]["P95"][0] == (1200.0000476837158, False)  # unsupported: drawn, marked so
    assert "e2e_ms" in acc["latency"] and "tpot_ms" not in acc["latency"]
    report_row = {"level": 4.0, "round": 2, "verdict": "FAIL", "n": 10, "good": 5, "good_fraction": 0.5,
                  "wilson_95_descriptive": [0.2, 0.8],
                  "ttft_ms": {"P50": {"value": 100.0, "supported": True}, "P95": {"value": 900.0, "supported": False}},
                  "tpot_ms": {"p50": 20.0, "p95": None, "p99": None, "n": 10}, "goodput_rps": 1.5,
                  "throughput_rps": 3.0}
    rep = CD.level_rows([report_row])
    assert rep["labels"] == ["4 r2"] and rep["numeric"] and rep["good"][0]["state"] == "FAIL"
    assert rep["ttft"]["P50"] == [(100.0, True)] and rep["ttft"]["P99"] == [(None, False)]
    assert rep["latency"]["tpot_ms"]["P50"] == [(20.0, True)] and rep["goodput_rps"] == [1.5]
    assert not CD.level_rows([{"level": None}])["numeric"]


def test_cdf_is_bounded_monotone_and_ends_at_one():
    pts = CD.cdf([float(i) for i in range(10_000)], points=200)
    assert len(pts) == 200
    assert all(a[0] <= b[0] and a[1] < b[1] for a, b in zip(pts, pts[1:]))
    assert pts[-1] == [9999.0, 1.0]
    assert CD.cdf([]) == [] and len(CD.cdf([5.0, 1.0])) == 2


def test_compare_data_pairs_levels_and_draws_the_highest_matched_level():
    reqs = [_req(i, i * 0.1, 0.1 * (1 + i % 5), level=lv) for i, lv in enumerate([1, 2] * 200)]
    row = {"n": 200, "good": 200, "good_fraction": 1.0, "wilson_95": [0.98, 1.0], "goodput_per_s": 2.0}
    result = {"levels": [{"level_base": 1.0, "level_cand": 1.0, "base": {**row, "level": 1.0},
                          "cand": {**row, "level": 1.0}, "verdict": "NOT WORSE", "difference": 0.0},
                         {"level_base": 2.0, "level_cand": 2.0, "base": {**row, "level": 2.0},
                          "cand": {**row, "level": 2.0}, "verdict": "NOT WORSE", "difference": 0.0}]}
    cl = CD.compare_levels(result)
    assert cl["labels"] == ["1", "2"] and cl["verdicts"] == ["NOT WORSE", "NOT WORSE"]
    cd = CD.compare_cdf(result, reqs, reqs)
    assert cd is not None and cd["label"] == "2" and cd["base_n"] == 200 and cd["base"] == cd["cand"]
    assert CD.compare_cdf({"levels": []}, reqs, reqs) is None


def test_report_bundle_without_a_sampler_has_no_time_charts():
    b = CD.report_bundle([], judged={"level": 1, "unit": "concurrency", "measured_capacity": 2}, candidate=15,
                         slos=Slos(), target=0.95)
    assert b["judged"] is None and b["queue"] is None and b["memory"] is None
    assert b["marks"] == {"candidate": 15.0, "measured": 2.0, "unit": "concurrency"}
