"""The load generator against a server that misbehaves on demand (tests/support/fault_server.py).

Each test checks the exact record the generator writes: fields, error class, complete flag,
and the ordering of the timestamps. Server-side logs give ground truth (what was sent, how often).
"""

from __future__ import annotations

import json
import math
import re
import statistics

import httpx
import pytest

from tests.support.fault_server import BlackholeListener, FaultServer, closed_port
from tui.core.records import ERROR_CLASSES, parse_object, parse_request
from tui.sources.load import ConfigError, LoadConfig, LoadGenerator, SetupError, monitor_config, run_load
from tui.sources.load.arrivals import arrival_offsets, gap_sampler

REQUEST_KEYS = {
    "type", "id", "t_intended", "t_sent", "t_first_token", "t_end", "input_tokens", "output_tokens",
    "finish_reason", "http_status", "complete", "error", "error_detail", "phase", "level", "round",
    "input_tokens_asked", "output_tokens_asked",
    "cached_tokens",  # issue 23: always written (null: the server did not say)
}
STREAM_KEYS = {  # issue 21: what the stream showed (tui.sources.load.stream.stream_fields)
    "t_first_answer", "t_first_reasoning", "t_last_token", "output_chunks", "reasoning_chunks",
    "usage_output_tokens", "usage_input_tokens", "usage_reasoning_tokens", "itl_max_ms", "itl_p50_ms", "itl_p95_ms",
    "cached_tokens_source",  # issue 23: with cached_tokens when the server said
}
OPTIONAL_KEYS = {"t_headers", "retried", "usage", "token_offsets"} | STREAM_KEYS


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def cfg(url: str, **kw) -> LoadConfig:
    base = dict(url=url, levels=[1], requests=1, metrics=False, gpu=False, progress_interval=0,
                api_key_env=None, read_timeout=5.0, connect_timeout=2.0, input_tokens=(16, 16),
                output_tokens=(8, 8))
    base.update(kw)
    return LoadConfig(**base)


async def run(url: str, **kw) -> list[dict]:
    out: list[dict] = []
    await run_load(cfg(url, **kw), out.append)
    for d in out:  # every record the generator writes parses with the core reader
        parse_object(json.loads(json.dumps(d)))
    return out


def requests_of(recs: list[dict]) -> list[dict]:
    return [d for d in recs if d["type"] == "request"]


def check_shape(r: dict) -> None:
    assert REQUEST_KEYS <= set(r), REQUEST_KEYS - set(r)
    assert set(r) - REQUEST_KEYS <= OPTIONAL_KEYS, set(r) - REQUEST_KEYS
    assert r["t_intended"] <= r["t_sent"] <= r["t_end"]
    if r["t_first_token"] is not None:
        assert r["t_sent"] <= r["t_first_token"] <= r["t_end"]
    if "t_headers" in r:
        assert r["t_sent"] <= r["t_headers"] <= r["t_end"]
    assert r["complete"] is (r["error"] is None)
    assert r["error"] is None or r["error"] in ERROR_CLASSES
    parse_request(r)


# ------------------------------------------------------------------ well-behaved streams


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_ok_chat_stream_exact_record_and_request_body(fs):
    recs = await run(fs.url("ok", tokens=5))
    assert recs[0]["type"] == "run" and recs[0]["synthetic"] is False
    (r,) = requests_of(recs)
    check_shape(r)
    entry = [e for e in fs.completions() if e["id"] == r["id"]]
    assert len(entry) == 1
    body = entry[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["cache_prompt"] is False and body["max_tokens"] == 8 and "ignore_eos" not in body
    assert body["model"] == "fault-model"  # default: first id of /v1/models
    assert body["messages"][0]["content"].startswith(f"[{r['id']}] ")
    assert {k: r[k] for k in ("complete", "error", "error_detail", "finish_reason", "http_status", "output_tokens",
                              "phase", "level", "round", "output_tokens_asked", "input_tokens_asked")} == {
        "complete": True, "error": None, "error_detail": None, "finish_reason": "length", "http_status": 200,
        "output_tokens": 5, "phase": "measure", "level": 1.0, "round": 1, "output_tokens_asked": 8,
        "input_tokens_asked": 16,
    }
    assert r["input_tokens"] == len(entry[0]["prompt"].split())  # the server's reported usage
    assert "retried" not in r and "usage" not in r
    assert r["t_headers"] <= r["t_first_token"]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_ttft_is_measured_at_the_first_token_not_the_role_chunk(fs):
    recs = await run(fs.url("ok", tokens=3, first_delay=0.3))
    (r,) = requests_of(recs)
    check_shape(r)
    assert r["complete"] is True
    ttft = r["t_first_token"] - r["t_sent"]
    assert ttft >= 0.3
    # headers (and the role-only chunk) came before the server's 300 ms pause
    assert r["t_headers"] < r["t_first_token"]
    assert r["t_first_token"] - r["t_headers"] >= 0.25
    (entry,) = [e for e in fs.completions() if e["id"] == r["id"]]
    assert r["t_first_token"] >= entry["t_first"] - 0.05  # never before the server wrote it


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_pings_crlf_and_events_split_across_reads(fs):
    recs = await run(fs.url("ok", tokens=4, ping=1, crlf=1, split=1))
    (r,) = requests_of(recs)
    check_shape(r)
    assert (r["complete"], r["error"], r["output_tokens"], r["finish_reason"]) == (True, None, 4, "length")
    assert r["t_first_token"] is not None


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_completions_api_with_usage_in_finish_chunk(fs):
    recs = await run(fs.url("ok", tokens=6), api="completions")
    (r,) = requests_of(recs)
    check_shape(r)
    (entry,) = [e for e in fs.completions() if e["id"] == r["id"]]
    assert "prompt" in entry["body"] and "messages" not in entry["body"]
    assert (r["complete"], r["output_tokens"], r["finish_reason"]) == (True, 6, "length")
    assert r["input_tokens"] == len(entry["prompt"].split())


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_reasoning_content_counts_as_first_token(fs):
    (r,) = requests_of(await run(fs.url("reasoning", tokens=3, first_delay=0.1)))
    check_shape(r)
    assert r["complete"] is True and r["t_first_token"] - r["t_sent"] >= 0.1


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_no_usage_reported_output_tokens_counted_and_marked(fs):
    (r,) = requests_of(await run(fs.url("ok", tokens=7, usage=0)))
    check_shape(r)
    assert (r["complete"], r["output_tokens"], r["usage"], r["input_tokens"]) == (True, 7, "counted", None)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_ignore_eos_sends_ignore_eos_and_max_tokens(fs):
    (r,) = requests_of(await run(fs.url("ok", tokens=2), ignore_eos=True, output_tokens=(3, 3)))
    (entry,) = [e for e in fs.completions() if e["id"] == r["id"]]
    assert entry["body"]["ignore_eos"] is True and entry["body"]["max_tokens"] == 3


# ------------------------------------------------------------------ error classes

ERROR_CASES = [
    # scenario, params, error, http_status, detail must contain, first token seen
    ("status", {"code": 429, "msg": "slow down"}, "http_429", 429, "HTTP 429: slow down", False),
    ("status", {"code": 500, "msg": "boom"}, "http_5xx", 500, "HTTP 500: boom", False),
    ("status", {"code": 503}, "http_5xx", 503, "HTTP 503", False),
    ("status", {"code": 400, "msg": "context too long"}, "http_4xx", 400, "HTTP 400: context too long", False),
    ("status", {"code": 404}, "http_4xx", 404, "HTTP 404", False),
    ("reset", {"tokens": 2}, "stream_reset", 200, "connection dropped mid-stream", True),
    ("cut", {"tokens": 2}, "stream_reset", 200, "incomplete chunked read", True),
    ("close_early", {}, "stream_reset", None, "before the response", False),
    ("no_finish_eof", {"tokens": 2}, "stream_reset", 200, "ended before a finish_reason", True),
    ("malformed", {}, "malformed_stream", 200, "invalid JSON in data line", False),
    ("no_finish", {"tokens": 2}, "malformed_stream", 200, "[DONE] without a finish_reason", True),
    ("json", {}, "malformed_stream", 200, "not an event stream", False),
    ("stream_error", {}, "stream_error", 200, "model crashed mid-stream", True),
    ("ok", {"tokens": 2, "finish": "abort"}, "stream_error", 200, "finish_reason abort", True),
    ("empty", {}, "empty_response", 200, "[DONE] with no generated text", False),
    ("empty_eof", {}, "empty_response", 200, "end of stream with no generated text", False),
    ("stall", {}, "read_timeout", 200, "mid-stream", False),
    ("stall_headers", {}, "read_timeout", None, "no response within", False),
]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("scen,params,error,status,detail,first", ERROR_CASES,
                         ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in ERROR_CASES])
async def test_error_class_exact_record(fs, scen, params, error, status, detail, first):
    before = len(fs.completions())
    recs = await run(fs.url(scen, **params), read_timeout=0.5)
    (r,) = requests_of(recs)
    check_shape(r)
    assert (r["complete"], r["error"], r["http_status"]) == (False, error, status)
    assert detail in r["error_detail"], r["error_detail"]
    assert len(r["error_detail"]) <= 200
    assert (r["t_first_token"] is not None) is first
    assert "retried" not in r  # nothing here failed before the request was written
    assert len(fs.completions()) == before + 1  # sent exactly once
    step_end = [d for d in recs if d["type"] == "step" and d["event"] == "end"][0]
    assert step_end["errors"] == {error: 1} and step_end["failed"] == 1 and step_end["completed"] == 0


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_connect_refused_is_a_setup_error_with_a_clear_message():
    port = closed_port()
    with pytest.raises(SetupError, match=f"cannot reach http://127.0.0.1:{port}"):
        await run(f"http://user:pw@127.0.0.1:{port}/v1?key=abcd")


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_connect_refused_per_request_record():
    gen = LoadGenerator(cfg(f"http://127.0.0.1:{closed_port()}", model="m"), lambda d: None)
    r = await gen.request_once()
    check_shape(r)
    assert (r["complete"], r["error"], r["http_status"], r["t_first_token"]) == (False, "connect", None, None)
    assert r["error_detail"]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_connect_timeout_per_request_record():
    hole = BlackholeListener()
    try:
        gen = LoadGenerator(cfg(f"http://127.0.0.1:{hole.port}", model="m", connect_timeout=0.3), lambda d: None)
        r = await gen.request_once()
    finally:
        hole.close()
    check_shape(r)
    assert (r["complete"], r["error"], r["http_status"]) == (False, "connect_timeout", None)
    assert r["t_end"] - r["t_sent"] >= 0.3


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_error_detail_never_repeats_credentials(fs, monkeypatch):
    monkeypatch.setenv("SW_FAULT_KEY", "sk-fault-secret-123456")
    recs = await run(fs.url("echo_auth"), api_key_env="SW_FAULT_KEY", headers=[("X-Team-Token", "hdr-secret-987")])
    (r,) = requests_of(recs)
    (entry,) = [e for e in fs.completions() if e["id"] == r["id"]]
    assert entry["headers"]["authorization"] == "Bearer sk-fault-secret-123456"  # it was sent
    assert r["error"] == "http_4xx" and "<redacted>" in r["error_detail"]
    blob = json.dumps(recs)
    assert "sk-fault-secret-123456" not in blob and "hdr-secret-987" not in blob
    assert recs[0]["headers"] == {"Authorization": "<redacted>", "X-Team-Token": "<redacted>"}


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_rejected_stream_options_retried_once_then_remembered(fs):
    before = len(fs.completions())
    recs = await run(fs.url("reject_field", field="stream_options", tokens=3), requests=3)
    reqs = requests_of(recs)
    assert len(reqs) == 3
    for r in reqs:
        check_shape(r)
        assert r["complete"] is True and r["output_tokens"] == 3 and r["usage"] == "counted"
    assert [r.get("retried", 0) for r in reqs] == [1, 0, 0]
    sent = fs.completions()[before:]
    assert len(sent) == 4  # one rejected attempt + three requests
    assert sent[0].get("rejected") == "stream_options" and sent[0]["id"] == sent[1]["id"] == reqs[0]["id"]
    assert all("stream_options" not in e["body"] for e in sent[1:])


def _sse_body(n: int) -> bytes:
    out = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}\n\n'
    for _ in range(n):
        out += b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    out += b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    return out


async def test_failure_before_any_byte_is_retried_and_counted():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:  # no trace events: nothing was written on this attempt
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(_sse_body(3)))

    gen = LoadGenerator(cfg("http://127.0.0.1:9/v1", model="m"), lambda d: None, transport=httpx.MockTransport(handler))
    r = await gen.request_once()
    check_shape(r)
    assert (r["complete"], r["retried"], r["output_tokens"], r["finish_reason"]) == (True, 1, 3, "stop")
    assert len(calls) == 2


async def test_retries_are_bounded():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    gen = LoadGenerator(cfg("http://127.0.0.1:9/v1", model="m"), lambda d: None, transport=httpx.MockTransport(handler))
    r = await gen.request_once()
    assert (r["complete"], r["error"], r["retried"]) == (False, "stream_reset", 2)
    assert len(calls) == 3


# ------------------------------------------------------------------ load shapes


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_closed_loop_keeps_exactly_c_in_flight_and_counts(fs):
    recs = await run(fs.url("ok", tokens=4, delay=0.01), levels=[3], requests=9)
    reqs = requests_of(recs)
    assert len(reqs) == 9 and len({r["id"] for r in reqs}) == 9
    for r in reqs:
        check_shape(r)
    edges = sorted([(r["t_sent"], 1) for r in reqs] + [(r["t_end"], -1) for r in reqs], key=lambda x: (x[0], x[1]))
    depth = peak = 0
    for _, d in edges:
        depth += d
        peak = max(peak, depth)
    assert peak == 3
    steps = [d for d in recs if d["type"] == "step"]
    assert [(s["event"], s["level"], s["mode"]) for s in steps] == [("start", 3, "closed"), ("end", 3, "closed")]
    end = steps[1]
    assert (end["requests"], end["completed"], end["failed"]) == (9, 9, 0)
    assert end["client_cpu_s"] > 0 and "send_overhead_p99_ms" in end and "saturated" not in end


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_warmup_then_ramp_and_rounds(fs):
    recs = await run(fs.url("ok", tokens=2), levels=[1, 2], requests=2, warmup=2, rounds=2)
    reqs = requests_of(recs)
    assert [r["phase"] for r in reqs[:2]] == ["warmup", "warmup"]
    assert len(reqs) == 2 + 2 * 2 * 2
    ends = [(d["level"], d["round"]) for d in recs if d["type"] == "step" and d["event"] == "end"]
    assert ends == [(1, 1), (2, 1), (1, 2), (2, 2)]
    assert all(d.get("phase") == "measure" for d in recs if d["type"] == "step")


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_open_loop_schedule_lateness_and_step_record(fs):
    recs = await run(fs.url("ok", tokens=2), mode="open", levels=[20.0], arrival="constant", requests=10)
    reqs = requests_of(recs)
    assert len(reqs) == 10
    ti = [r["t_intended"] for r in sorted(reqs, key=lambda r: r["t_intended"])]
    assert all(abs((b - a) - 0.05) < 1e-6 for a, b in zip(ti, ti[1:]))  # scheduled, not response-driven
    for r in reqs:
        check_shape(r)
    end = [d for d in recs if d["type"] == "step" and d["event"] == "end"][0]
    assert end["mode"] == "open" and isinstance(end["saturated"], bool)
    late = sorted(r["t_sent"] - r["t_intended"] for r in reqs)
    assert end["lateness_p99_ms"] == pytest.approx(late[-1] * 1000, abs=0.01)
    # saturated by the delivered-load bounds the verdict uses (tui.core.evidence): p99 over the SLO (default 1000 ms),
    # or p99 - p50 over one arrival gap (50 ms at 20 req/s); never by a fixed 10 ms
    p50 = late[max(1, math.ceil(0.5 * len(late))) - 1] * 1000
    assert end["saturated"] is (end["lateness_p99_ms"] > 1000.0 or end["lateness_p99_ms"] - p50 > 50.0)
    if end["saturated"]:
        assert "client saturated, results not valid" in end["note"]


def test_arrivals_are_seeded_and_have_the_documented_shape():
    assert arrival_offsets("poisson", 2.0, 1.0, 7, 50) == arrival_offsets("poisson", 2.0, 1.0, 7, 50)
    assert arrival_offsets("poisson", 2.0, 1.0, 7, 50) != arrival_offsets("poisson", 2.0, 1.0, 8, 50)
    import random

    for arrival, burst, cv in (("poisson", 1.0, 1.0), ("gamma", 2.0, 2.0), ("gamma", 0.5, 0.5)):
        g = gap_sampler(arrival, 4.0, burst, random.Random(1))
        xs = [g() for _ in range(40000)]
        m = statistics.fmean(xs)
        assert m == pytest.approx(0.25, rel=0.05)
        assert statistics.pstdev(xs) / m == pytest.approx(cv, rel=0.08)
    assert set(arrival_offsets("constant", 4.0, 1.0, 0, 5)) == {0.0, 0.25, 0.5, 0.75, 1.0}


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_lengths_from_tokenize_are_exact_and_seeded(fs):
    recs = await run(fs.url("ok", tokens=1, tokenize=1), requests=12, input_tokens=(10, 40), seed=5)
    hdr = recs[0]
    assert hdr["load"]["prompt_builder"]["method"] == "tokenize"
    assert hdr["load"]["prompt_builder"]["check"] == {"asked": 40, "got": 40}
    reqs = requests_of(recs)
    asked = [r["input_tokens_asked"] for r in reqs]
    assert all(10 <= a <= 40 for a in asked) and len(set(asked)) > 3
    assert [r["input_tokens"] for r in reqs] == asked  # the fault server's tokenizer: one token per word
    prompts = [e["prompt"] for e in fs.completions() if e["id"] in {r["id"] for r in reqs}]
    assert len({p.split(" ", 1)[0] for p in prompts}) == 12  # unique from the first token on
    again = requests_of(await run(fs.url("ok", tokens=1, tokenize=1), requests=12, input_tokens=(10, 40), seed=5))
    assert [r["input_tokens_asked"] for r in again] == asked


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_without_tokenize_lengths_are_estimated_and_said_so(fs):
    recs = await run(fs.url("ok", tokens=1), requests=1, input_tokens=(100, 100))
    pb = recs[0]["load"]["prompt_builder"]
    assert pb["method"] == "estimate" and pb["chars_per_token"] == 4.0
    assert pb["note"].startswith("ESTIMATED lengths: ~4 characters per token")  # labelled wherever it shows
    (entry,) = [e for e in fs.completions() if e["id"] == requests_of(recs)[0]["id"]]
    assert 350 <= len(entry["prompt"]) <= 450  # ~4 chars per token


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_stop_on_fail_ends_the_ramp_at_the_failing_step(fs):
    out: list[dict] = []
    c = cfg(fs.url("ok", tokens=1, first_delay=0.02), levels=[1, 2], rounds=2, requests=40, stop_on_fail=True,
            monitor=monitor_config(slo_ttft_ms=5.0, min_window_minutes=0))
    summary = await run_load(c, out.append)
    ends = [d for d in out if d["type"] == "step" and d["event"] == "end"]
    assert [e["level"] for e in ends] == [1]
    assert ends[0]["verdict"] == "FAIL"
    assert summary.stopped_early and "FAILED" in summary.stopped_early


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_run_header_contents(fs):
    recs = await run(fs.url("ok", tokens=1), insecure=True, levels=[2, 4], seed=3, warmup=1, requests=1)
    h = recs[0]
    assert h["type"] == "run" and h["synthetic"] is False and h["insecure"] is True
    assert h["target"] == {"url": fs.url("ok", tokens=1), "model": "fault-model", "api": "chat",
                           "endpoint": fs.url("ok", tokens=1) + "/chat/completions"}
    load = h["load"]
    for k in ("mode", "levels", "arrival", "burstiness", "input_tokens", "output_tokens", "warmup", "requests",
              "duration", "rounds", "seed", "prompt_builder"):
        assert k in load
    assert (load["mode"], load["levels"], load["seed"], load["warmup"]) == ("closed", [2, 4], 3, 1)
    env = h["environment"]
    for k in ("python", "os", "machine", "httpx", "servewatch", "server", "gpu"):
        assert k in env
    assert env["server"]["models"] == ["fault-model"]


def test_bad_configs_are_refused():
    for kw in (dict(url="ftp://x"), dict(url="http://h", levels=[]), dict(url="http://h", levels=[1.5]),
               dict(url="http://h", input_tokens=(5, 2)), dict(url="http://h", arrival="gamma", burstiness=0,
                                                               mode="open")):
        with pytest.raises(ConfigError):
            LoadConfig(**kw).validate()


def test_request_ids_are_unique_and_readable():
    gen = LoadGenerator(cfg("http://127.0.0.1:9/v1", model="m"), lambda d: None)
    assert re.fullmatch(r"[0-9a-f]{8}", gen.run_id)
