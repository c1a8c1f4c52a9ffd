"""The rolling window follows the current level; per-level queue depth (peak, time-averaged) and KV peaks; the
acceptance report's memory/queue section and its cost sanity check (issue 25)."""

from tui.core.acceptance.cost import cost_section
from tui.core.acceptance.inputs import CostInputs
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import QueueSample, RequestRecord, StepRecord


def mk(i, t, ttft, level, ok=True):
    return RequestRecord(id=f"r{i}", t_sent=t, t_end=t + ttft + 1.0, complete=ok, t_intended=t,
                         t_first_token=t + ttft, error=None if ok else "http_5xx", phase="measure", level=level,
                         output_tokens=32)


def test_rolling_window_holds_only_the_current_level():
    m = Monitor(MonitorConfig(rolling_s=60.0))
    for i in range(30):  # level 1: all good, ending at t=30..
        m.add(mk(i, float(i), 0.2, level=1))
    m.add(mk(30, 30.0, 2.0, level=2))  # the first request of level 2: slow, inside the 60 s horizon of level 1's
    s = m.snapshot()
    assert s.rolling.good.n == 1 and s.rolling.good.good == 0  # level 1's 30 good requests are not mixed in
    assert "level 2" in s.rolling.label
    m.add(mk(31, 29.5, 0.2, level=1))  # a straggler of level 1 ends later: counted in level 1, not in the window
    s = m.snapshot()
    assert s.rolling.good.n == 1
    assert {r.level: r.window.good.n for r in s.levels} == {1: 31, 2: 1}


def test_queue_depth_per_level_peak_and_mean_and_kv_peak():
    m = Monitor(MonitorConfig())
    m.add(StepRecord(t=0.0, event="start", level=1, mode="closed"))
    for k, w in enumerate((0, 0, 0, 0)):
        m.add(QueueSample(t=float(k), source="llamacpp", waiting=w, running=1, kv_cache_usage=0.1))
    m.add(mk(0, 0.0, 0.2, level=1))
    m.add(StepRecord(t=10.0, event="start", level=8, mode="closed"))
    for k, w in enumerate((2, 4, 4, 6)):
        m.add(QueueSample(t=10.0 + k, source="llamacpp", waiting=w, running=4, kv_cache_usage=0.2 + 0.1 * k))
    m.add(mk(1, 10.0, 3.0, level=8))
    rows = {r.level: r for r in m.snapshot().levels}
    assert rows[1].max_waiting == 0 and rows[1].mean_waiting == 0 and rows[1].queue_samples == 4
    assert rows[8].max_waiting == 6 and rows[8].mean_waiting == 4.0 and rows[8].queue_samples == 4
    assert abs(rows[8].peak_kv_usage - 0.5) < 1e-9 and abs(rows[1].peak_kv_usage - 0.1) < 1e-9


def _measured(rows, state="PASS", level=1):
    return {"levels": rows, "primary_mode": "closed", "unit": "concurrency", "measured_capacity": level,
            "has_measured_capacity": state == "PASS", "judged": {"level": level, "state": state}}


def _row(n=600, rps=1.0, minutes=10.0, tok=64.0, top=64, problems=()):
    return {"source": "f.jsonl", "round": 1, "mode": "closed", "level": 1, "n": n, "req_per_s": rps,
            "window": {"minutes": minutes}, "output_tok_per_s": tok, "goodput_per_s": rps,
            "output_tokens_received_max": top, "evidence_problems": list(problems)}


def test_cost_from_a_sound_window_uses_the_gpus_of_tp():
    cs = cost_section(CostInputs(gpu_hour_usd=2.0), _measured([_row()]), tp=4)
    assert cs["gpus"] == 4 and cs["usd_per_hour"] == 8.0 and not cs["gpus_assumed"]
    assert abs(cs["usd_per_1m_output_tokens"] - 8.0 / (64 * 3600) * 1e6) < 1e-6
    assert cs["basis_level"] == 1 and cs["status"] == "computed"


def test_cost_refused_from_a_broken_window():
    # throughput that disagrees with the request count and the window's duration (an edited file)
    cs = cost_section(CostInputs(gpu_hour_usd=2.0), _measured([_row(rps=0.0001)]))
    assert cs["usd_per_1m_output_tokens"] is None and cs["status"].startswith("refused")
    assert cs["gpus_assumed"] and cs["gpus"] == 1
    # more output tokens per request than any record received
    cs = cost_section(CostInputs(gpu_hour_usd=2.0), _measured([_row(tok=64_000.0)]))
    assert cs["usd_per_1m_output_tokens"] is None and "output tokens per request" in cs["status"]
    # the level's own evidence problems
    cs = cost_section(CostInputs(gpu_hour_usd=2.0), _measured([_row(problems=("load not delivered",))]))
    assert cs["usd_per_1m_output_tokens"] is None and "load not delivered" in cs["status"]


def test_no_cost_without_a_passing_level():
    cs = cost_section(CostInputs(gpu_hour_usd=2.0), _measured([_row()], state="FAIL"))
    assert cs["usd_per_1m_output_tokens"] is None and "no level PASSes" in cs["status"]
