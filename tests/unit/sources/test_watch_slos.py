"""Watch with several SLOs (issue 21): the share meeting all of them from separate server histograms is bracketed
by the Fréchet bound; PASS only when the lower end passes, FAIL only when the upper end fails, UNDECIDED between.
Driven through the in-test exposition server (tests/support/watch_server.py) by exactly known counts."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.watch_server import FAST, SLOW, MetricsServer
from tui.cli.watch import format_state
from tui.core import watch as W
from tui.core.slos import Slos
from tui.core.snapshot import FAIL, PASS, UNDECIDED
from tui.sources.watch import MetricsWatcher, WatchSession, make_client

# every test here starts a process or a listening server (tests/conftest.py checks it)
pytestmark = pytest.mark.slow


class FakeClock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _cfg(**kw):
    limits = {k: kw.pop(f"slo_{k}_ms") for k in ("ttft", "tpot", "itl", "e2e") if f"slo_{k}_ms" in kw}
    base = dict(slos=Slos.of({"ttft": 1000.0, **limits}), target=0.95, alpha=0.05, min_window_s=600.0,
                fail_min_s=60.0)
    base.update(kw)
    return W.WatchConfig(**base)


def _once(engine: str, cfg: W.WatchConfig, move) -> WatchSession:
    """One fixed 10-minute window on a fake clock; ``move(state)`` is what happens in it."""
    with MetricsServer(engine, latency=True) as ms:
        clock = FakeClock()

        async def main():
            client = make_client({})
            s = WatchSession(MetricsWatcher(ms.url, client=client, clock=clock), cfg, clock=clock)

            async def sleep(_s):
                move(ms.state)
                clock.t += 600

            try:
                await s.once(600, sleep=sleep)
            finally:
                await client.aclose()
            return s

        return asyncio.run(main())


def _requests(state, good: int, bad: int, e2e_bad: int = 0, gaps_per_request: int = 9, bad_gaps: int = 0) -> None:
    """``good`` fast and ``bad`` slow TTFTs; end-to-end under 1 s except ``e2e_bad``; inter-token gaps all fast
    except ``bad_gaps`` slow ones (3 s)."""
    state.observe(fast=good, slow=bad)
    n = good + bad
    state.observe_hist("e2e", FAST, n - e2e_bad)
    state.observe_hist("e2e", SLOW, e2e_bad)
    state.observe_hist("itl", FAST, n * gaps_per_request - bad_gaps)
    state.observe_hist("itl", SLOW, bad_gaps)
    state.observe_hist("tpot", FAST, n)


def test_all_slos_met_passes_on_the_lower_end():
    s = _once("vllm", _cfg(slo_e2e_ms=1000.0, slo_itl_ms=1000.0), lambda st: _requests(st, 3000, 0))
    v = s.verdict()
    assert v.state == PASS, v.reason
    rows = {r["slo"]: r for r in v.slos}
    assert rows["all"]["share_lo"] == pytest.approx(1.0) and rows["E2E"]["share_lo"] == pytest.approx(1.0)
    assert W.combine.FRECHET_NOTE in v.notes


def test_lower_end_below_target_is_undecided_where_ttft_alone_passes():
    """TTFT 97% and E2E 97% (both exact: 1000 ms is a bound): alone each PASSes; together the lower end is
    94% (the misses may be on different requests) and the upper 97%: neither PASS nor FAIL."""
    def move(st):
        _requests(st, 2910, 90, e2e_bad=90)

    alone = _once("vllm", _cfg(), move).verdict()
    assert alone.state == PASS, alone.reason
    both = _once("vllm", _cfg(slo_e2e_ms=1000.0), move).verdict()
    assert both.state == UNDECIDED, both.reason
    assert both.lo == pytest.approx(0.94) and both.hi == pytest.approx(0.97)
    assert "Fréchet" in both.reason


def test_upper_end_below_target_fails():
    """E2E met by 90% only: the upper end (min p_i) is 90%, below the 95% target: FAIL."""
    s = _once("sglang", _cfg(slo_e2e_ms=1000.0), lambda st: _requests(st, 3000, 0, e2e_bad=300))
    v = s.verdict()
    assert v.state == FAIL, v.reason
    assert v.hi == pytest.approx(0.90)


def test_itl_from_gaps_bounds_requests_from_below():
    """60 slow gaps among 27,000: at most 60 of 3,000 requests miss ITL, so the lower end is 98%: PASS. 400
    slow gaps: the lower end is 86.7% (not PASS), the upper end knows only one request misses: UNDECIDED."""
    few = _once("vllm", _cfg(slo_itl_ms=1000.0), lambda st: _requests(st, 3000, 0, bad_gaps=60)).verdict()
    assert few.state == PASS, few.reason
    assert {r["slo"]: r for r in few.slos}["ITL"]["share_lo"] == pytest.approx(0.98)
    many = _once("vllm", _cfg(slo_itl_ms=1000.0), lambda st: _requests(st, 3000, 0, bad_gaps=400)).verdict()
    assert many.state == UNDECIDED, many.reason
    assert many.lo == pytest.approx(2600 / 3000) and many.hi == pytest.approx(2999 / 3000)
    assert W.combine.ITL_NOTE in many.notes


def test_slo_the_server_does_not_expose_blocks_pass_and_says_so():
    """TensorRT-LLM exports no inter-token histogram: an ITL SLO is not judgeable; perfect data cannot PASS."""
    s = _once("trtllm", _cfg(slo_itl_ms=50.0), lambda st: _requests(st, 3000, 0))
    v = s.verdict()
    assert v.state == UNDECIDED, v.reason
    assert any("ITL not judgeable" in b for b in v.blocked)
    # its per-request TPOT histogram does judge a TPOT SLO
    t = _once("trtllm", _cfg(slo_tpot_ms=50.0), lambda st: _requests(st, 3000, 0)).verdict()
    assert t.state == PASS, t.reason


def test_output_says_which_end_decides(tmp_path):
    s = _once("vllm", _cfg(slo_e2e_ms=1000.0), lambda st: _requests(st, 2910, 90, e2e_bad=90))
    text = format_state(s)
    assert "all of them: 94.0-97.0%" in text and "PASS judged on the lower end, FAIL on the upper" in text
    doc = json.loads(format_state(s, out_json=True))
    assert doc["verdict"]["pass_judged_on"] == "the lower end of the bracket"
    assert [r["slo"] for r in doc["verdict"]["slos"]] == ["TTFT", "E2E", "all"]
    assert doc["window"]["itl"]["n"] == 27000
