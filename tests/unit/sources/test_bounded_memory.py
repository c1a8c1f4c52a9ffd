"""Memory that does not grow with the run: the bounded structures keep their answers.

Step percentiles are exact up to ``STEP_EXACT_VALUES`` values and within ``PCT_REL_ERR`` beyond; the generator's
recorder keeps no ids and still writes every record once; the stores and windows stay bounded. Seeded data only,
no network, no wall clock.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from tui.core import stats
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord, parse_object
from tui.core.verdict import LevelJudge, MixtureTest, chi2_lower_quantile
from tui.sources.load import steps
from tui.sources.load.steps import PCT_REL_ERR, Step, StepQuantiles, pct, step_end_record
from tui.sources.recorder import Recorder


def _values(rng: random.Random, n: int) -> list[float]:
    """Lateness-like seconds: mostly lognormal, some negative (a timer that fired early), zeros and +inf."""
    out = []
    for _ in range(n):
        u = rng.random()
        if u < 0.03:
            out.append(-rng.lognormvariate(-9, 1.5))
        elif u < 0.04:
            out.append(0.0)
        elif u < 0.045:
            out.append(math.inf)
        else:
            out.append(rng.lognormvariate(-5, 2.0))
    return out


QS = (0.001, 0.01, 0.03, 0.035, 0.04, 0.05, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def _close(got: float | None, want: float, rel: float) -> bool:
    if got is None:
        return False
    if math.isinf(want) or want == 0.0:
        return got == want
    return abs(got - want) <= rel * abs(want) * (1 + 1e-9) and (got > 0) == (want > 0)


def test_step_quantiles_are_exact_up_to_the_cap():
    rng = random.Random(11)
    xs = _values(rng, 5000)
    sq = StepQuantiles(cap=5000)
    for x in xs:
        sq.add(x)
    assert not sq.approximate and len(sq) == 5000
    srt = sorted(xs)
    assert sq.quantiles(QS) == [pct(srt, q) for q in QS]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_step_quantiles_beyond_the_cap_are_within_the_stated_relative_error(seed):
    rng = random.Random(seed)
    xs = _values(rng, 30_000)
    sq = StepQuantiles(cap=1000)
    for x in xs:
        sq.add(x)
    assert sq.approximate and len(sq) == 30_000
    srt = sorted(xs)
    for q, got in zip(QS, sq.quantiles(QS), strict=True):
        want = pct(srt, q)
        assert want is not None and _close(got, want, PCT_REL_ERR), (q, got, want)
    # bounded: one counter per bucket in use, whatever the count
    assert len(sq._pos) + len(sq._neg) < 2000 and sq._exact is None


def test_step_quantiles_empty_and_one_value():
    sq = StepQuantiles(cap=0)  # straight to the histogram
    assert sq.quantiles((0.5, 0.99)) == [None, None]
    sq.add(0.25)
    assert sq.approximate
    (v,) = sq.quantiles((0.5,))
    assert v is not None and abs(v - 0.25) <= PCT_REL_ERR * 0.25


def _old_step_end_fields(late: list[float], ttfts: list[float]) -> tuple:
    """What the step end record held before the bounded structure: percentiles of the sorted lists."""
    ls, ts = sorted(late), sorted(ttfts)
    p50 = pct(ts, 0.5)
    return (round(pct(ls, 0.5) * 1e3, 3), round(pct(ls, 0.99) * 1e3, 3),
            None if p50 is None or math.isinf(p50) else round(p50 * 1e3, 2))


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_step_end_record_of_a_small_step_is_unchanged(mode):
    rng = random.Random(7)
    step = Step(4.0, 1, "measure", mode)
    late, ttfts = [], []
    for i in range(3000):
        lt = abs(rng.gauss(0.002, 0.004))
        err = "http_5xx" if i % 97 == 0 else None
        ttft = None if i % 500 == 1 else rng.lognormvariate(-2, 0.5)
        step.add(lt, err, ttft, 10)
        late.append(lt)
        if err is None:
            ttfts.append(ttft if ttft is not None else math.inf)
    step.t1 = step.t0 + 60.0
    d = step_end_record(step, 1.0)
    lk = "lateness" if mode == "open" else "send_overhead"
    assert (d[lk + "_p50_ms"], d[lk + "_p99_ms"], d["ttft_p50_ms"]) == _old_step_end_fields(late, ttfts)
    assert d["requests"] == 3000 and d["failed"] == 31 and d["errors"] == {"http_5xx": 31}
    assert "percentiles_rel_error" not in d


def test_step_end_record_of_a_long_step_says_its_percentiles_are_approximate(monkeypatch):
    import tui.core.stepstats as stepstats  # the algorithm's home (the readers recompute with it: issue 35)

    monkeypatch.setattr(stepstats, "STEP_EXACT_VALUES", 500)
    rng = random.Random(5)
    step = Step(50.0, 1, "measure", "open")
    late, ttfts = [], []
    for _ in range(20_000):
        lt, ttft = rng.lognormvariate(-6, 1.0), rng.lognormvariate(-2, 0.3)
        step.add(lt, None, ttft, 5)
        late.append(lt)
        ttfts.append(ttft)
    step.t1 = step.t0 + 400.0
    d = step_end_record(step, 1.0)
    assert d["percentiles_rel_error"] == PCT_REL_ERR
    old = _old_step_end_fields(late, ttfts)
    for got, want in zip((d["lateness_p50_ms"], d["lateness_p99_ms"], d["ttft_p50_ms"]), old, strict=True):
        assert abs(got - want) <= PCT_REL_ERR * want + 0.01  # + the rounding of the record's figures
    assert d["saturated"] is (d["lateness_p99_ms"] > steps.SATURATION_LATENESS_MS)


# ---------------------------------------------------------------- the recorder


def _req(rid: str, t: float = 1.0) -> dict:
    return {"type": "request", "id": rid, "t_sent": t, "t_end": t + 0.5, "complete": True}


def test_recorder_without_the_id_set_writes_every_record_once(tmp_path):
    p = tmp_path / "r.jsonl"
    with Recorder(str(p), ids_unique=True) as rec:
        assert rec._ids is None  # nothing per request is kept
        rec.write({"type": "run", "schema_version": 1, "synthetic": False})
        for i in range(1, 2001):
            assert rec.write(_req(f"abcd1234-{i:06d}", float(i)))
        assert (rec.requests_written, rec.records_written, rec.duplicates_refused) == (2000, 2001, 0)
        with pytest.raises(RuntimeError):
            rec.has_request("abcd1234-000001")
    lines = p.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "seal"  # the digest chain's last record (tui.core.chain)
    ids = [json.loads(line)["id"] for line in lines[1:-1]]
    assert ids == [f"abcd1234-{i:06d}" for i in range(1, 2001)]


def test_recorder_for_records_made_elsewhere_still_refuses_a_repeated_id(tmp_path):
    with Recorder(str(tmp_path / "r.jsonl")) as rec:
        assert rec.write(_req("x")) and not rec.write(_req("x"))
        assert rec.has_request("x") and rec.duplicates_refused == 1


# ---------------------------------------------------------------- monitor stores and windows


def test_quantile_store_is_compact_and_empties_its_exact_values_when_the_sketch_takes_over():
    rng = random.Random(3)
    xs = [rng.lognormvariate(5, 1) for _ in range(3000)]
    s = stats.QuantileStore(cap=1000)
    s.extend(xs[:999])
    assert not s.approximate and s.exact.itemsize == 8 and list(s.exact) == xs[:999]
    assert s.quantile(0.5) == stats.nearest_rank(sorted(xs[:999]), 0.5)
    s.extend(xs[999:])
    assert s.approximate and len(s.exact) == 0 and s.n == 3000
    want = stats.nearest_rank(sorted(xs), 0.99)
    got = s.quantile(0.99)
    assert want is not None and got is not None and abs(got - want) <= 0.01 * want * (1 + 1e-9)


T0 = 1_767_225_600.0  # record times are wall-clock epoch seconds


def _record(i: int, t: float, ttft: float | None = 0.2) -> RequestRecord:
    t = T0 + t
    r = parse_object({"type": "request", "id": f"r-{i}", "level": 1.0, "round": 1, "phase": "measure",
                      "t_sent": t, "t_first_token": None if ttft is None else t + ttft, "t_end": t + 0.5,
                      "complete": ttft is not None, "output_tokens": 4,
                      "error": None if ttft is not None else "http_5xx"})
    assert isinstance(r, RequestRecord)
    return r


def test_rolling_window_by_count_holds_exactly_the_last_n():
    mon = Monitor(MonitorConfig(rolling_n=50, min_window_s=0.0, check_duplicate_ids=False))
    assert mon._roll.maxlen == 50
    mon.add_many(_record(i, float(i), None if i % 10 == 0 else 0.2) for i in range(1, 1001))
    w = mon.snapshot().rolling
    assert w.good.n == 50 and w.failed == 5 and w.good.good == 45 and len(mon._roll) == 50


def test_rolling_window_by_time_holds_only_its_seconds():
    mon = Monitor(MonitorConfig(rolling_s=60.0, min_window_s=0.0, check_duplicate_ids=False))
    mon.add_many(_record(i, i * 0.02) for i in range(1, 20_001))  # 50 req/s for 400 s
    assert len(mon._roll) <= 60 * 50 + 1
    assert mon.snapshot().rolling.good.n == len(mon._roll)


def test_level_judge_chi2_cache_is_bounded_and_the_decisions_do_not_change():
    class Uncached(LevelJudge):
        __slots__ = ()

        def _quantile(self, df: int) -> float:
            return chi2_lower_quantile(df)

    test = MixtureTest(0.95, 0.05)
    a = LevelJudge(test, min_window_s=60.0, min_requests=100)
    b = Uncached(test, min_window_s=60.0, min_requests=100)
    rng = random.Random(9)
    for i in range(40_000):  # one outcome a second: ~2,700 closed 15-s batches
        good = rng.random() < (0.9 if (i // 600) % 2 else 0.99)
        a.add(float(i), good)
        b.add(float(i), good)
        if i % 997 == 0:
            assert (a.state, a.vif) == (b.state, b.vif)
    assert (a.state, a.vif, a.log_e_pass, a.log_e_fail) == (b.state, b.vif, b.log_e_pass, b.log_e_fail)
    assert a._disp[0][0] > 1000 and len(a._q) <= 64  # over a thousand batch counts seen, 64 kept at most
