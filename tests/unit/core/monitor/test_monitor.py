import random

import pytest

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import LineIssue, QueueSample, RequestRecord, StepRecord


def mk(i, t, ttft, ok=True, level=4, phase="measure", error=None, out=32):
    return RequestRecord(id=f"r{i}", t_sent=t, t_end=t + ttft + 1.0, complete=ok, t_intended=t,
                         t_first_token=None if ttft is None else t + ttft, error=None if ok else (error or "http_5xx"),
                         phase=phase, level=level, output_tokens=out)


def feed(mon, n, p_good, rate=1.0, seed=0, start=0.0, level=4, first_id=0):
    rng = random.Random(seed)
    for i in range(n):
        t = start + i / rate
        ttft = 0.2 if rng.random() < p_good else 1.5
        mon.add(mk(first_id + i, t, ttft, level=level))


def test_seed_like_log_insufficient_window_with_what_is_missing():
    m = Monitor(MonitorConfig())
    for i, (ttft, ok) in enumerate([(0.4, True), (0.8, True), (1.2, True), (0.3, False)]):
        m.add(mk(i, 2.0 * i, ttft, ok=ok, level=1))
    s = m.snapshot()
    assert s.cumulative.good.fraction == 0.5
    assert s.verdict.state == "INSUFFICIENT_WINDOW"
    assert s.verdict.missing == f"need {m.min_requests - 4} more requests, 10 min more"


def test_warmup_excluded_and_failures_count_in_the_denominator():
    m = Monitor(MonitorConfig(min_window_s=0))
    m.add(mk(0, 0.0, 5.0, phase="warmup"))
    m.add(mk(1, 1.0, 0.1))
    m.add(mk(2, 2.0, 0.1, ok=False))
    s = m.snapshot()
    assert s.warmup_total == 1 and s.cumulative.good.n == 2 and s.cumulative.good.good == 1


def test_pass_needs_the_time_window_too():
    m = Monitor(MonitorConfig(min_window_s=600))
    feed(m, 400, 1.0, rate=2.0)  # 200 s of perfect requests
    s = m.snapshot()
    assert s.verdict.state == "INSUFFICIENT_WINDOW"
    assert "min more" in s.verdict.missing and "Evidence so far favours PASS" in s.verdict.reason
    feed(m, 1300, 1.0, rate=2.0, start=200.0, seed=2, first_id=400)  # new ids: a repeated id forbids PASS
    assert m.snapshot().verdict.state == "PASS"


def test_clear_fail_is_never_hidden_behind_the_window():
    m = Monitor(MonitorConfig(min_window_s=3600))
    feed(m, 150, 0.5)
    v = m.snapshot().verdict
    assert v.state == "FAIL" and v.decided_at_n is not None


def test_undecided_when_close_to_target():
    m = Monitor(MonitorConfig(min_window_s=60))
    feed(m, 300, 0.95, seed=3)
    assert m.snapshot().verdict.state in ("UNDECIDED",)


def test_bursty_outcomes_use_effective_sample_size():
    cfg = MonitorConfig(min_window_s=0, batch_s=10.0)
    m = Monitor(cfg)
    rng = random.Random(5)
    i = 0
    for b in range(120):  # 120 batches of 10 s, each batch all-good or all-slow
        good = rng.random() < 0.97
        for k in range(10):
            m.add(mk(i, b * 10.0 + k, 0.2 if good else 1.5))
            i += 1
    v = m.snapshot().verdict
    assert v.bursty and v.vif > 2 and v.n_eff < v.n / 2
    assert "bursty" in v.reason
    assert "outages, the longest" in v.reason  # issue 37: what it saw, named (the all-slow batches)


def test_levels_rolling_queue_issues_and_recent_cap():
    m = Monitor(MonitorConfig(rolling_s=10.0, recent_rows=50))
    m.add(StepRecord(t=0.0, event="start", level=1, mode="closed"))
    feed(m, 100, 1.0, level=1)
    m.add(StepRecord(t=100.0, event="end", level=1, mode="closed", info={"lateness_p99_ms": 3.0}))
    feed(m, 100, 0.0, level=8, start=200.0, first_id=100)  # request ids are unique within a run
    m.add(QueueSample(t=250.0, source="llamacpp", waiting=4, running=4, client_in_flight=8))
    m.add(LineIssue("f.jsonl", 7, "invalid JSON"))
    s = m.snapshot()
    assert [r.level for r in s.levels] == [1, 8]
    assert s.levels[0].lateness_p99_ms == 3.0 and s.levels[1].max_waiting == 4
    assert s.current_level == 8 and s.cumulative.good.fraction == 0.0
    assert s.rolling.good.n <= 11  # 10 s window at 1 req/s
    assert s.queue.waiting == 4 and s.queue.client_in_flight == 8
    assert s.malformed == 1 and s.malformed_examples == ("f.jsonl:7: invalid JSON",)
    assert len(s.recent) == 50 and s.recent[-1].id == "r199"


def test_gpu_state_without_telemetry_and_with_budget():
    from tui.core.budget import teaching_case
    from tui.core.records import GpuSample

    m = Monitor(budget=teaching_case())
    m.add(mk(0, 0.0, 0.2, level=4))
    g = m.snapshot().gpu
    assert not g.available and g.note == "no GPU telemetry"
    assert g.predicted_gib == pytest.approx(13.0385 + 3 + 4 * 0.5, abs=1e-3)
    m.add(GpuSample(t=1.0, device=0, name="X", memory_used=20 * 2**30, memory_total=24 * 2**30))
    g = m.snapshot().gpu
    assert g.available and g.devices[0].used_gib == 20 and g.devices[0].severity == "warn"


def test_cumulative_percentiles_switch_to_sketch_beyond_cap(monkeypatch):
    import tui.core.monitor.level as mm

    monkeypatch.setattr(mm, "EXACT_CAP", 100)
    m = Monitor()
    for i in range(1000):
        m.add(mk(i, float(i), 0.001 * (i + 1)))
    p50, p95, p99 = m.snapshot().cumulative.ttft
    assert p50.approximate and p50.value_ms == pytest.approx(500, rel=0.011)
    assert p99.value_ms == pytest.approx(990, rel=0.011) and p99.supported
