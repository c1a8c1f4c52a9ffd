"""Capacity sweep: the table, measured capacity vs the memory-only candidate, and what limits."""

import random

from tui.core.budget import teaching_case
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import QueueSample, RequestRecord, StepRecord
from tui.core.sweep import default_ladder, format_sweep, measured_capacity, sweep_summary


def test_default_ladder_goes_to_twice_the_candidate():
    assert default_ladder(15) == [1, 2, 4, 8, 16, 30]
    assert default_ladder(0) == [1]
    assert default_ladder(15, limit=8) == [1, 2, 4, 8]


def _level(mon, level, n, p_good, tpot_s, waiting=0, t0=0.0, seed=0):
    rng = random.Random(seed)
    mon.add(StepRecord(t=t0, event="start", level=level, mode="closed"))
    if waiting:
        mon.add(QueueSample(t=t0 + 1, source="llamacpp", waiting=waiting, running=4))
    # ``level`` slots, each sending its next request 1 ms after the previous one ended: ``level`` requests in flight
    # (the load the label claims, and no more: a closed loop)
    slots = [t0 + k * 0.001 for k in range(level)]
    recs = []
    for i in range(n):
        t = slots[i % level]
        ttft = 0.2 if rng.random() < p_good else 2.5
        last = t + ttft + 31 * tpot_s  # a run records its last token (TPOT is last - first over tokens - 1)
        recs.append(RequestRecord(id=f"{level}-{i}", t_sent=t, t_end=last, complete=True, t_intended=t,
                                  t_first_token=t + ttft, level=level, output_tokens=32, t_last_token=last,
                                  output_chunks=32))
        slots[i % level] = last + 0.001
    for r in sorted(recs, key=lambda r: r.t_end):  # written as they end
        mon.add(r)
    mon.add(StepRecord(t=max(slots) + 5, event="end", level=level, mode="closed"))


def test_capacity_below_candidate_names_queueing_tpot_and_falling_goodput():
    mon = Monitor(MonitorConfig(min_window_s=0), budget=teaching_case())
    _level(mon, 1, 200, 1.0, 0.015, t0=0)
    _level(mon, 2, 200, 1.0, 0.016, t0=1000)
    _level(mon, 4, 1200, 0.99, 0.018, t0=2000)  # 10 min: enough batches for the dependence correction
    _level(mon, 8, 120, 0.3, 0.040, waiting=4, t0=3000)
    snap = mon.snapshot()
    assert measured_capacity(snap.levels) == 4
    s = sweep_summary(snap, teaching_case())
    assert s["measured_capacity"] == 4 and s["memory_only_candidate"] == 15 and s["exit_code"] == 0
    text = " ".join(s["limits"])
    assert "below the memory-only candidate (15): latency limits the deployment before memory does" in text
    assert "At concurrency 8:" in text and "up to 4 waiting requests at concurrency 8" in text
    assert "TPOT: the median time per output token grew" in text
    assert "Goodput fell" in text
    out = format_sweep(s)
    assert "measured capacity: 4" in out and "memory-only candidate: 15" in out


def test_nothing_passes_is_exit_1_and_undecided_is_exit_3():
    mon = Monitor(MonitorConfig(min_window_s=0))
    _level(mon, 1, 100, 0.2, 0.015)
    assert sweep_summary(mon.snapshot())["exit_code"] == 1
    mon = Monitor(MonitorConfig(min_window_s=0))
    _level(mon, 1, 20, 1.0, 0.015)
    s = sweep_summary(mon.snapshot())
    assert s["measured_capacity"] is None and s["exit_code"] == 3


def test_capacity_at_the_candidate_says_memory_binds_and_untested_levels_are_named():
    class B:  # a budget whose candidate is small
        candidate = 2

    mon = Monitor(MonitorConfig(min_window_s=0))
    _level(mon, 1, 200, 1.0, 0.015)
    _level(mon, 2, 200, 1.0, 0.015, t0=1000)
    s = sweep_summary(mon.snapshot(), B())
    assert "equals the memory-only candidate (2): memory is the binding limit" in s["limits"][0]
    B.candidate = 15
    s = sweep_summary(mon.snapshot(), B())
    assert "the highest level tested" in s["limits"][0] and "were not tested" in s["limits"][0]
