"""`compare`: each latency metric (TTFT, TPOT, inter-token, end-to-end) base vs candidate per level, in JSON
(``{"p50", "p95", "p99", "n"}`` in ms) and in the markdown, computed over built requests with known values."""

from __future__ import annotations

from dataclasses import dataclass

from tui.core import compare as K
from tui.core.records import RequestRecord


@dataclass(slots=True)
class Rec21(RequestRecord):
    """A request record with issue 21's fields (the shared contract's names), for the derivations."""

    t_first_answer: float | None = None
    t_first_reasoning: float | None = None
    t_last_token: float | None = None
    output_chunks: int | None = None
    usage_output_tokens: int | None = None
    itl_max_ms: float | None = None


T0 = 1_780_000_000.0


def reqs(n: int, *, ttft_s: float, tpot_ms: float | None, itl_ms: float | None, level: float = 4.0,
         reasoning_s: float | None = None) -> list[RequestRecord]:
    """n completed requests, one a second; request i: TTFT ttft_s (answer; the first reasoning token at
    reasoning_s when given), 11 tokens at tpot_ms * (1 + i/n) each, largest gap itl_ms * (1 + i/n)."""
    out: list[RequestRecord] = []
    for i in range(n):
        t = T0 + i
        k = 1.0 + i / n
        if tpot_ms is None and itl_ms is None:  # a record from before issue 21
            out.append(RequestRecord(id=f"a{i}", t_sent=t, t_end=t + ttft_s + 1.0, complete=True, t_intended=t,
                                     t_first_token=t + ttft_s, output_tokens=11, level=level))
            continue
        first = t + (reasoning_s if reasoning_s is not None else ttft_s)
        last = first + (10 * tpot_ms * k / 1000.0 if tpot_ms is not None else 0.5)
        out.append(Rec21(id=f"b{i}", t_sent=t, t_end=last + 0.01, complete=True, t_intended=t, t_first_token=first,
                         output_tokens=11, level=level, t_last_token=last if tpot_ms is not None else None,
                         t_first_answer=t + ttft_s if reasoning_s is not None else None,
                         t_first_reasoning=first if reasoning_s is not None else None,
                         usage_output_tokens=11, itl_max_ms=None if itl_ms is None else itl_ms * k))
    return out


def run(rs: list[RequestRecord], label: str) -> dict:
    return {"label": label, "header": {}, "requests": rs, "issues": 0}


def test_each_metric_base_vs_candidate_per_level_in_json():
    base = run(reqs(400, ttft_s=0.2, tpot_ms=10.0, itl_ms=40.0), "base")
    cand = run(reqs(400, ttft_s=0.3, tpot_ms=20.0, itl_ms=80.0, reasoning_s=0.05), "cand")
    c = K.compare(base, cand, slo_ttft_ms=1000)
    (row,) = c["levels"]
    b, d = row["base"]["latency"], row["cand"]["latency"]
    assert set(b) == {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}
    for block in (*b.values(), *d.values()):
        assert {"p50", "p95", "p99", "n"} <= set(block) and block["n"] == 400
    # nearest rank over k = 1 + i/400: P50 is request 199 (k = 1.4975), P95 request 379 (k = 1.9475)
    assert abs(b["tpot_ms"]["p50"] - 10.0 * 1.4975) < 1e-3 and abs(d["tpot_ms"]["p95"] - 20.0 * 1.9475) < 1e-3
    assert abs(b["itl_ms"]["p99"] - 40.0 * (1 + 395 / 400)) < 1e-3
    # the candidate streams reasoning from 50 ms: TTFT is judged at the ANSWER's first token (300 ms)
    assert abs(d["ttft_ms"]["p50"] - 300.0) < 1e-3 and abs(b["ttft_ms"]["p50"] - 200.0) < 1e-3
    # E2E: sent to last token
    assert abs(b["e2e_ms"]["p50"] - (200.0 + 100.0 * 1.4975)) < 1e-3
    ch = row["latency"]
    assert abs(ch["ttft_ms"]["p95"] - 100.0) < 1e-3
    assert abs(ch["tpot_ms"]["p50"] - 10.0 * 1.4975) < 1e-3
    md = K.to_markdown(c)
    assert "| 4 | TPOT | 15.0 / 19.5 / 19.9 (n 400) | " in md and "| +15.0 / +19.5 / +19.9 |" in md
    assert "| 4 | TTFT | 200 / 200 / 200 (n 400) | 300 / 300 / 300 (n 400) | +100.0 / +100.0 / +100.0 |" in md


def test_records_without_the_new_fields_say_na_never_a_number():
    c = K.compare(run(reqs(50, ttft_s=0.2, tpot_ms=None, itl_ms=None), "a"),
                  run(reqs(50, ttft_s=0.2, tpot_ms=None, itl_ms=None), "b"), slo_ttft_ms=1000)
    (row,) = c["levels"]
    lat = row["cand"]["latency"]
    assert lat["tpot_ms"] == {"p50": None, "p95": None, "p99": None, "n": 0}
    assert lat["itl_ms"] == {"p50": None, "p95": None, "p99": None, "n": 0}
    # E2E falls back to t_end; 50 requests support P50 but not P95/P99: null, the raw value kept apart
    assert lat["e2e_ms"]["p50"] is not None and lat["e2e_ms"]["p99"] is None
    assert lat["e2e_ms"]["insufficient_n"]["p99"]["n_needed"] > 50
    assert row["latency"]["tpot_ms"] == {"p50": None, "p95": None, "p99": None}
    md = K.to_markdown(c)
    assert "| 4 | TPOT | N/A | N/A | N/A / N/A / N/A |" in md
    assert "| 4 | E2E | 1200 / 1200* / 1200* (n 50) |" in md


def test_a_level_with_requests_not_judgeable_is_not_enough_evidence():
    """Requests an SLO in force cannot be judged on are unknown: compare neither drops them quietly (that would
    bias either side) nor counts them as misses: the level is NOT ENOUGH EVIDENCE, saying why."""
    from tui.core.slos import Slos

    old = reqs(400, ttft_s=0.2, tpot_ms=None, itl_ms=None)  # no last-token times: TPOT not judgeable
    other = reqs(400, ttft_s=0.21, tpot_ms=None, itl_ms=None)  # another run (one run on both sides is refused)
    c = K.compare(run(old, "a"), run(other, "b"), slo_ttft_ms=1000, slos=Slos(ttft_ms=1000.0, tpot_ms=50.0))
    (row,) = c["levels"]
    assert row["verdict"] == K.NOT_ENOUGH and "not judgeable" in row["reason"]
    assert row["base"]["not_judgeable"] == 400
