"""Each not-good request says which SLO(s) it missed (the console's recent-requests rows): the one rule, with the
SLOs it could not be judged on marked "?"; good and failed requests carry nothing."""

from __future__ import annotations

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import parse_object
from tui.core.slos import Slos

T0 = 1_767_225_600.0


_TIMES = ("t_intended", "t_sent", "t_first_token", "t_end", "t_last_token")


def req(rid: str, **kw) -> dict:
    """A request record; each id sent at its own moment (two requests with identical times would be copies)."""
    d = {"type": "request", "id": rid, "t_intended": T0, "t_sent": T0, "t_first_token": T0 + 0.2, "t_end": T0 + 2.0,
         "input_tokens": 8, "output_tokens": 11, "finish_reason": "stop", "http_status": 200, "complete": True,
         "error": None, "error_detail": None, "phase": "measure", "level": 1, "round": 1,
         "t_last_token": T0 + 1.2, "output_chunks": 11, "itl_max_ms": 150.0, "itl_p50_ms": 100.0,
         "itl_p95_ms": 140.0}
    d.update(kw)
    offset = sum(map(ord, rid)) * 1e-3
    return {k: (v + offset if k in _TIMES and isinstance(v, float) else v) for k, v in d.items()}


def rows(slos: Slos, *records: dict) -> dict[str, tuple[str, str]]:
    m = Monitor(MonitorConfig(slos=slos))
    for d in records:
        m.add(parse_object(d))
    return {r.id: (r.outcome, r.missed) for r in m.snapshot().recent}


def test_a_slow_request_names_the_slos_it_missed():
    out = rows(Slos(ttft_ms=100.0, tpot_ms=200.0, itl_ms=100.0),
               req("good", t_first_token=T0 + 0.05, t_last_token=T0 + 1.0, itl_max_ms=100.0, itl_p95_ms=100.0),
               req("ttft+itl"),
               req("failed", complete=False, error="stream_reset"))
    assert out["good"] == ("good", "")
    assert out["ttft+itl"] == ("slow", "TTFT+ITL")
    assert out["failed"][1] == ""


def test_an_slo_the_record_cannot_be_judged_on_is_marked():
    old = req("old")
    for k in ("t_last_token", "output_chunks", "itl_max_ms", "itl_p50_ms", "itl_p95_ms"):
        del old[k]
    assert rows(Slos(ttft_ms=1000.0, tpot_ms=50.0), old)["old"] == ("excluded", "TPOT?")  # unknown, not a miss


def test_requests_nobody_saw_miss_never_make_a_fail():
    """An old file (no last-token times) judged with a TPOT SLO: every request is unknown for TPOT. They are never
    good (PASS blocked, said), but they do not count as misses either: without them a level that meets its TTFT
    SLO must not FAIL (the judge counts them good for the FAIL side only)."""
    m = Monitor(MonitorConfig(slos=Slos(ttft_ms=1000.0, tpot_ms=50.0), min_window_s=0.0, min_requests=20))
    for i in range(200):
        d = req(f"r{i}", t_intended=T0 + i, t_sent=T0 + i, t_first_token=T0 + i + 0.2, t_end=T0 + i + 0.9)
        for k in ("t_last_token", "output_chunks", "itl_max_ms", "itl_p50_ms", "itl_p95_ms"):
            del d[k]
        m.add(parse_object(d))
    (row,) = m.snapshot().levels
    assert row.verdict.state != "FAIL" and row.verdict.state != "PASS"
    assert row.window.good.good == 0 and row.window.unjudgeable == {"TPOT": 200}
    assert any("TPOT not judgeable on 200 of 200" in p for p in row.problems)
