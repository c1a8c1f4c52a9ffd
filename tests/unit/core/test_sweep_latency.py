"""`sweep`: the summary and its text show, per level, goodput and the P95 of TTFT, TPOT, ITL and E2E (from the
snapshot's WindowStat.latency; N/A where the records do not carry a metric)."""

from __future__ import annotations

from dataclasses import replace

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.snapshot import LevelRow, Percentile
from tui.core.sweep import format_sweep, sweep_summary


def _ps(vals, n, supported=True):
    return tuple(Percentile(q, v, n, supported, 299) for q, v in zip((0.5, 0.95, 0.99), vals, strict=True))


def _snap():
    base = Monitor(MonitorConfig()).snapshot()
    rows = []
    for level, scale in ((1.0, 1.0), (4.0, 2.0)):
        w = replace(base.cumulative, ttft=_ps((100.0 * scale, 300.0 * scale, 400.0 * scale), 500),
                    latency={"tpot": _ps((10.0 * scale, 20.0 * scale, 30.0 * scale), 500),
                             "e2e": _ps((900.0 * scale, 1500.0 * scale, 2000.0 * scale), 120, supported=False)},
                    goodput_per_s=2.5 * scale, good_output_tok_per_s=80.0 * scale, misses={"TPOT": int(3 * scale)})
        rows.append(LevelRow(level=level, round=1, mode="closed", window=w, verdict=base.verdict))
    return replace(base, levels=tuple(rows), header={"load": {"mode": "closed"}})


def test_sweep_summary_and_text_carry_p95_of_each_metric_and_goodput():
    s = sweep_summary(_snap())
    lv = {r["level"]: r for r in s["levels"]}
    assert lv[4.0]["latency"]["tpot_ms"]["p95"] == 40.0 and lv[4.0]["goodput_tok_s"] == 160.0
    assert lv[1.0]["latency"]["itl_ms"] == {"p50": None, "p95": None, "p99": None, "n": 0}
    out = format_sweep(s)
    lines = out.splitlines()
    head = lines.index("Latency P95 (ms) and goodput per level")
    row1, row4 = lines[head + 2].split(), lines[head + 3].split()
    # level, round, TTFT, TPOT, ITL, E2E (unsupported: raw value with *), goodput/s, good tok/s, missed
    assert row1 == ["1", "1", "300", "20.0", "N/A", "1500*", "2.50", "80.0", "TPOT", "3"]
    assert row4 == ["4", "1", "600", "40.0", "N/A", "3000*", "5.00", "160.0", "TPOT", "6"]
