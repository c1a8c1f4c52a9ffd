"""Issue 36, "Client-side failures are the client's": the verdict rule of the ``client`` error class.

A request the client could not carry out because its own resources ran out (EMFILE, ENFILE, EADDRNOTAVAIL,
EADDRINUSE on connect, ENOBUFS) is unknown: never shown or counted as good, never counted as the server's failure.
A level with any is client_limited: it cannot PASS, and it FAILs only when the server's failures alone prove FAIL
(the client's requests judged as good, the most favourable case); otherwise UNDECIDED (exit 3) with what ran out
and what to do. Readers derive it from the request records: no edit of the step record hides it.
"""

import json
import random

import pytest

from tui.core import clientlimit
from tui.core.compare import NOT_ENOUGH, NOT_WORSE, WORSE, hold_client_limited
from tui.core.importers.common import classify_error
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.outcomes import CLIENT, EXCLUDED, FAILED
from tui.core.records import ERROR_CLASSES, parse_request, run_header
from tui.core.records.parse import parse_lines
from tui.core.slos import Slos, slo_rule

T0 = 1_767_225_600.0
EMFILE = "EMFILE: [Errno 24] Too many open files"
ADVICE_64 = "the client ran out of file descriptors at 64: raise the limit (ulimit -n) or lower the concurrency"


def header(fd_soft=64, mode="closed"):
    """A header that plans no levels (no step records follow: the rule under test is the client's own failures,
    not a load run's completeness, which tests/unit/core/test_completeness.py holds)."""
    return run_header(target={"url": "http://127.0.0.1:1", "model": "m"}, synthetic=False, started_at=T0, run_id="r1",
                      load={"mode": mode, "fd_limit": {"soft": fd_soft, "hard": fd_soft, "was": fd_soft}})


def good(i, t, ttft=0.2, level=1):
    return {"type": "request", "id": f"g{i}", "t_intended": t, "t_sent": t, "t_first_token": t + ttft,
            "t_end": t + ttft + 0.3, "input_tokens": 16, "output_tokens": 8, "finish_reason": "length",
            "http_status": 200, "complete": True, "error": None, "phase": "measure", "level": level, "round": 1}


def server_failed(i, t, level=1):
    return {"type": "request", "id": f"f{i}", "t_intended": t, "t_sent": t, "t_first_token": None, "t_end": t + 0.5,
            "input_tokens": None, "output_tokens": 0, "finish_reason": None, "http_status": 503, "complete": False,
            "error": "http_5xx", "error_detail": "HTTP 503", "phase": "measure", "level": level, "round": 1}


def client(i, t, detail=EMFILE, level=1, status=None):
    return {"type": "request", "id": f"c{i}", "t_intended": t, "t_sent": t, "t_first_token": None, "t_end": t + 0.05,
            "input_tokens": None, "output_tokens": None, "finish_reason": None, "http_status": status,
            "complete": False, "error": CLIENT, "error_detail": detail, "phase": "measure", "level": level, "round": 1}


def as_good(d):
    """The same request as a fast good one at the same send and end times (what the judge counts it as)."""
    return {**d, "id": "x" + d["id"], "t_first_token": d["t_sent"] + 0.01, "output_tokens": 8, "http_status": 200,
            "finish_reason": "length", "complete": True, "error": None, "error_detail": None}


def step_end(n, failed, errors, **extra):
    return {"type": "step", "t": T0 + 400, "event": "end", "level": 1, "round": 1, "mode": "closed",
            "phase": "measure", "requests": n, "completed": n - failed, "failed": failed, "errors": errors, **extra}


def monitor(lines, cfg=None):
    numbered = [(i + 1, json.dumps(d), True) for i, d in enumerate(lines)]
    m = Monitor(cfg or MonitorConfig(min_window_s=60), source="f.jsonl")
    m.add_many(parse_lines(numbered, "f.jsonl"))
    m.finish()
    return m


def row(m, level=1):
    return next(r for r in m.snapshot().levels if r.level == level and r.round == 1)


def goods(n, start=T0 + 1.0, gap=0.5, first=0):  # one in flight at a time: concurrency 1 delivered
    return [good(first + i, start + gap * i) for i in range(n)]


def clients(n, start=T0 + 1.1, gap=0.5, first=0, detail=EMFILE):
    return [client(first + i, start + gap * i, detail) for i in range(n)]


# ---------------------------------------------------------------- the one rule


@pytest.mark.parametrize("slos", [Slos(ttft_ms=1000.0), Slos(ttft_ms=1000.0, tpot_ms=50.0, e2e_ms=5000.0)])
def test_the_rule_calls_a_client_failure_unknown_and_a_client_record_with_an_http_status_failed(slos):
    rule = slo_rule(slos)
    r = parse_request(client(1, T0))
    assert rule(r)[0] == EXCLUDED
    assert rule(parse_request(client(2, T0, status=503)))[0] == FAILED  # the server answered: its failure
    late = {**client(3, T0), "t_first_token": T0 + 1.5, "t_end": T0 + 1.6}  # TTFT already missed when it failed
    assert rule(parse_request(late))[0] == FAILED


def test_the_record_format_knows_the_class():
    assert CLIENT in ERROR_CLASSES and "worker_lost" in ERROR_CLASSES
    assert parse_request(client(1, T0)).error == "client"


# ---------------------------------------------------------------- the verdict


def test_good_server_outcomes_with_client_failures_cannot_pass_and_say_what_ran_out():
    base = [header()] + goods(400)
    assert row(monitor(base)).verdict.state == "PASS"  # the control
    m = monitor(base + clients(10))
    r = row(m)
    assert r.verdict.state == "UNDECIDED"
    assert ADVICE_64 in r.verdict.reason and r.verdict.reason.startswith("cannot PASS: client_limited: 10 of 410")
    assert any(ADVICE_64 in p for p in r.problems)
    # never shown as good, never the server's failure: the window is the server's 400 requests
    assert (r.window.good.n, r.window.good.good, r.window.failed) == (400, 400, 0)
    assert r.client_limited == 10 and r.client_limited_kinds == {"EMFILE": 10}
    assert m.snapshot().errors_by_class == {"client": 10}


def test_the_server_saw_none_of_them():
    m = monitor([header()] + clients(500))
    r = row(m)
    assert r.verdict.state == "UNDECIDED" and "the server saw none of them" in r.verdict.reason
    assert ADVICE_64 in r.verdict.reason and r.window.good.n == 0


def test_the_servers_failures_alone_prove_fail():
    srv = [server_failed(i, T0 + 12.0 * i) for i in range(11)]  # 11 failed over 120 s: FAIL
    m = monitor([header()] + srv + clients(30, start=T0 + 2.0, gap=4.0))
    v = row(m).verdict
    assert v.state == "FAIL" and v.reason.startswith("FAIL on the server's failures alone")
    assert "counted good here" in v.reason


def test_client_failures_are_never_the_servers_failures():
    srv = [server_failed(i, T0 + 12.0 * i) for i in range(11)] + goods(11, start=T0 + 6.0, gap=12.0)
    cli = clients(400)
    as_server = [{**d, "error": "http_5xx", "error_detail": "HTTP 503", "http_status": 503} for d in cli]
    assert row(monitor([header()] + srv + as_server)).verdict.state == "FAIL"  # blamed on the server: FAIL
    v = row(monitor([header()] + srv + cli)).verdict
    assert v.state == "UNDECIDED" and "do not show FAIL" in v.reason  # the server's own 11 of 22 do not prove it


def test_open_loop_advice_says_the_rate_and_an_unknown_errno_says_the_resources():
    m = monitor([header(mode="open")] + goods(400) + clients(3, detail="ENOBUFS: [Errno 105] No buffer space"))
    assert "lower the rate" in row(m).verdict.reason and "ENOBUFS" in row(m).verdict.reason
    m = monitor([header()] + goods(400) + clients(3, detail="something went wrong"))
    assert "the client ran out of its own resources" in row(m).verdict.reason


def test_a_client_record_with_an_http_status_is_the_servers_failure():
    m = monitor([header()] + goods(400) + [client(1, T0 + 50.0, status=503)])
    r = row(m)
    assert r.client_limited == 0 and r.window.failed == 1


# ---------------------------------------------------------------- no edit of the step record hides it


def test_a_step_record_that_omits_client_limited_does_not_hide_it():
    lines = [header()] + goods(400) + clients(10)
    for end in (step_end(410, 10, {"client": 10}), step_end(410, 10, {"client": 10}, client_limited=False),
                step_end(410, 10, {"http_5xx": 10})):
        r = row(monitor(lines + [end]))
        assert r.verdict.state != "PASS" and r.client_limited == 10
        assert any("client_limited" in p for p in r.problems)


def test_a_step_record_that_says_client_limited_forbids_pass_on_its_own():
    r = row(monitor([header()] + goods(400) + [step_end(400, 0, {}, client_limited=True)]))
    assert r.verdict.state == "UNDECIDED" and "the step record says" in r.verdict.reason


# ---------------------------------------------------------------- the property, over a family of runs


def _run(rng):
    lines = [header(fd_soft=rng.choice([64, 256, 1024]))]
    n = rng.randint(40, 800)
    span = rng.uniform(30.0, 400.0)
    p_fail, p_slow, p_client = rng.random() ** 3 * 0.3, rng.random() ** 3 * 0.1, rng.random() * 0.5
    if rng.random() < 0.35:  # a server that never fails: the best case PASSes, the client-limited run must not
        p_fail = p_slow = 0.0
        span = rng.uniform(120.0, 400.0)
    for i in range(n):
        t = T0 + span * i / n
        u = rng.random()
        if u < p_client:
            lines.append(client(i, t, rng.choice([EMFILE, "EADDRNOTAVAIL: [Errno 99] x", "ENFILE: y"])))
        elif u < p_client + p_fail:
            lines.append(server_failed(i, t))
        elif u < p_client + p_fail + p_slow:
            lines.append(good(i, t, ttft=1.5))
        else:
            lines.append(good(i, t))
    return lines


@pytest.mark.parametrize("seed", range(40))
def test_client_limited_never_passes_and_fails_exactly_when_the_servers_failures_prove_it(seed):
    rng = random.Random(seed)
    lines = _run(rng)
    n_client = sum(1 for d in lines if d.get("error") == CLIENT)
    m = monitor(lines)
    if n_client == 0:
        return
    r = row(m)
    best_case = row(monitor([as_good(d) if d.get("error") == CLIENT else d for d in lines]))
    assert r.verdict.state != "PASS"
    assert (r.verdict.state == "FAIL") == (best_case.verdict.state == "FAIL")
    if r.verdict.state != "FAIL":
        assert "client_limited" in r.verdict.reason
    server = [d for d in lines[1:] if d.get("error") != CLIENT]
    assert r.window.good.n == len(server) and r.client_limited == n_client
    assert r.window.failed == sum(1 for d in server if d["error"] is not None)


# ---------------------------------------------------------------- compare, imports, the vocabulary


def _side(good, n, client=0):
    return {"n": n, "good": good, "vif": 1.0, "client_limited": client}


def test_compare_never_says_not_worse_on_client_limited_runs_and_worse_only_when_it_holds():
    from tui.core.compare import judge

    base, cand = _side(9_900, 10_000), _side(9_890, 10_000, client=500)
    j = judge(base, cand, 0.02, 0.05)
    assert j["verdict"] == NOT_WORSE
    held = hold_client_limited(j, base, cand, 0.02, 0.05)
    assert held["verdict"] == NOT_ENOUGH and "client_limited" in held["reason"]
    worse = _side(8_000, 10_000, client=50)
    j = judge(base, worse, 0.02, 0.05)
    assert j["verdict"] == WORSE and hold_client_limited(j, base, worse, 0.02, 0.05)["verdict"] == WORSE
    borderline = _side(9_500, 10_000, client=9_000)
    j = judge(base, borderline, 0.02, 0.05)
    assert j["verdict"] == WORSE and hold_client_limited(j, base, borderline, 0.02, 0.05)["verdict"] == NOT_ENOUGH


@pytest.mark.parametrize(("message", "cls"), [
    ("OSError: [Errno 24] Too many open files", "client"),
    ("ClientConnectorError: Cannot connect to host h:80 ssl:default [Too many open files]", "client"),
    ("OSError: [Errno 99] Cannot assign requested address", "client"),
    ("No buffer space available", "client"),
    ("Cannot connect to host h:80 ssl:default [Connection refused]", "connect"),
])
def test_another_tools_client_failures_import_as_the_client_class(message, cls):
    assert classify_error(message=message) == cls


def test_kind_and_advice():
    assert clientlimit.kind_of(EMFILE) == "EMFILE"
    assert clientlimit.kind_of("aiohttp: [Too many open files]") == "EMFILE"
    assert clientlimit.kind_of("Too many open files in system") == "ENFILE"
    assert clientlimit.kind_of(None) == clientlimit.UNKNOWN
    assert clientlimit.advice({"EMFILE": 3}, 64, "closed") == ADVICE_64
    assert "(EMFILE)" in clientlimit.advice({"EMFILE": 3}, None, "closed")
    workers = {"load": {"fd_limit": {"soft": 1024}, "workers": {"workers": [{"fd_limit": {"soft": 256}}]}}}
    assert clientlimit.fd_limit_of(workers) == 256
