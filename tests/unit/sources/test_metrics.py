"""Queue scraping: exposition parsing per engine, the scraper's states, server_info.

The exposition samples below were written for these tests in the shape each engine
documents (HELP/TYPE lines, label sets, counters with ``_total``); they are not
captured output.
"""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tui.core.records import QueueSample, parse_object
from tui.sources.metrics import (
    MetricsScraper,
    detect_engine,
    metrics_url_for,
    parse_queue,
    parse_samples,
    redact_url,
    server_info,
)

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.62
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.18
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.234567e+06
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 52.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 52.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.3
"""

VLLM_OLD = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="mistralai/Mistral-7B-Instruct-v0.2"} 4.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="mistralai/Mistral-7B-Instruct-v0.2"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="mistralai/Mistral-7B-Instruct-v0.2"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="mistralai/Mistral-7B-Instruct-v0.2"} 0.071
# HELP vllm:cpu_cache_usage_perc CPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:cpu_cache_usage_perc gauge
vllm:cpu_cache_usage_perc{model_name="mistralai/Mistral-7B-Instruct-v0.2"} 0.9
"""

SGLANG = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.1e+06
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 31.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 9.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0075
"""

TGI = """\
# TYPE tgi_request_count counter
tgi_request_count 1520
# TYPE tgi_queue_size gauge
tgi_queue_size 6
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 16
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 30210
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 130
tgi_request_duration_bucket{le="+Inf"} 1520
tgi_request_duration_sum 2211.5
tgi_request_duration_count 1520
"""

LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 5120
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 3.91
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 2560
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 1309.5
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 660
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 4
"""

LLAMACPP_OLD = LLAMACPP + """\
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.4375
# HELP llamacpp:kv_cache_tokens KV-cache tokens.
# TYPE llamacpp:kv_cache_tokens gauge
llamacpp:kv_cache_tokens 3584
"""

PROCESS_ONLY = """\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
"""


# ------------------------------------------------------------------ what the parser really returns


def test_parser_strips_total_from_counter_family_but_keeps_sample_name():
    fams = {f.name: f for f in text_string_to_metric_families(LLAMACPP)}
    assert "llamacpp:prompt_tokens" in fams  # family name lost "_total"
    assert "llamacpp:prompt_tokens_total" not in fams
    assert fams["llamacpp:prompt_tokens"].type == "counter"
    assert fams["llamacpp:prompt_tokens"].samples[0].name == "llamacpp:prompt_tokens_total"
    # colons survive; gauges keep their names
    assert fams["llamacpp:requests_deferred"].type == "gauge"
    samples = parse_samples(LLAMACPP)
    assert samples["llamacpp:prompt_tokens_total"] == [5120.0]
    assert samples["llamacpp:requests_deferred"] == [4.0]


# ------------------------------------------------------------------ per engine


@pytest.mark.parametrize(
    "text, engine, waiting, running, kv",
    [
        (VLLM, "vllm", 7.0, 15.0, 0.62),  # summed over models; kv = fullest cache
        (VLLM_OLD, "vllm", 0.0, 4.0, 0.071),  # older gauge name, cpu cache ignored
        (SGLANG, "sglang", 9.0, 31.0, 0.28),
        (TGI, "tgi", 6.0, 16.0, None),
        (LLAMACPP, "llamacpp", 4.0, 4.0, None),  # no KV gauge in current builds
        (LLAMACPP_OLD, "llamacpp", 4.0, 4.0, 0.4375),
    ],
)
def test_parse_queue_per_engine(text, engine, waiting, running, kv):
    rec = parse_queue(text, 1000.5)
    assert rec is not None
    assert rec["type"] == "queue"
    assert rec["t"] == 1000.5
    assert rec["source"] == engine
    assert rec["waiting"] == pytest.approx(waiting)
    assert rec["running"] == pytest.approx(running)
    if kv is None:
        assert rec["kv_cache_usage"] is None
    else:
        assert rec["kv_cache_usage"] == pytest.approx(kv)
    assert detect_engine(text) == engine
    # the dict is a valid v1 record
    q = parse_object(rec)
    assert isinstance(q, QueueSample) and q.source == engine and q.waiting == pytest.approx(waiting)


def test_vllm_prefers_new_kv_name_over_old():
    text = VLLM + "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name=\"x\"} 0.99\n"
    assert parse_queue(text, 0)["kv_cache_usage"] == pytest.approx(0.62)


def test_kv_reported_as_percent_is_scaled_and_nonsense_is_na():
    pct = "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\nsglang:token_usage 45\n"
    assert parse_queue(pct, 0)["kv_cache_usage"] == pytest.approx(0.45)
    bad = "sglang:num_running_reqs 1\nsglang:token_usage 4500\n"
    assert parse_queue(bad, 0)["kv_cache_usage"] is None


def test_only_running_gauge_is_enough_and_missing_field_is_none():
    rec = parse_queue("# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 3\n", 5)
    assert rec["source"] == "tgi" and rec["running"] == 3.0 and rec["waiting"] is None


def test_detect_engine_inputs():
    assert detect_engine(["vllm:num_requests_running"]) == "vllm"
    assert detect_engine(parse_samples(SGLANG)) == "sglang"
    assert detect_engine(PROCESS_ONLY) is None
    assert detect_engine([]) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        PROCESS_ONLY,
        "<html><head><title>404 Not Found</title></head><body>Not Found</body></html>",
        '{"error": {"code": 501, "message": "This server does not support metrics endpoint."}}',
        "\x00\xff garbage \ufffd",
        "vllm:num_requests_waiting{model_name=\"a\" 3\n",  # broken label set
    ],
)
def test_unknown_or_garbage_gives_none(text):
    assert parse_queue(text, 0) is None


def test_one_bad_line_does_not_hide_the_rest():
    text = LLAMACPP.replace(
        "llamacpp:n_decode_total 660", "llamacpp:n_decode_total 660 oops {{{"
    )
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(text))  # the parser gives up on the whole text...
    rec = parse_queue(text, 0)  # ...but we still read the gauges around the bad line
    assert rec is not None and rec["waiting"] == 4.0 and rec["running"] == 4.0


def test_non_finite_values_ignored():
    text = "vllm:num_requests_waiting{m=\"a\"} NaN\nvllm:num_requests_waiting{m=\"b\"} 2\nvllm:num_requests_running +Inf\n"
    rec = parse_queue(text, 0)
    assert rec["waiting"] == 2.0
    assert rec["running"] is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parse_queue_never_raises(text):
    rec = parse_queue(text, 0.0)
    assert rec is None or rec["type"] == "queue"


def test_urls():
    assert metrics_url_for("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/metrics"
    assert metrics_url_for("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/metrics"
    assert metrics_url_for("http://h:1/") == "http://h:1/metrics"
    assert metrics_url_for("https://h/prefix/v1") == "https://h/prefix/metrics"
    r = redact_url("https://user:hunter2@h:8443/metrics?api_key=SECRET")
    assert "hunter2" not in r and "SECRET" not in r and r == "https://h:8443/metrics"


# ------------------------------------------------------------------ scraper with a mock transport

SECRET = "sk-very-secret-123"


class Collector:
    """emit target: collects dicts and sets an event once ``want`` arrived."""

    def __init__(self, want: int, stop: asyncio.Event):
        self.recs: list[dict] = []
        self.want = want
        self.stop = stop

    def __call__(self, rec: dict) -> None:
        self.recs.append(rec)
        if len(self.recs) >= self.want:
            self.stop.set()


async def _run(scraper: MetricsScraper, want: int, timeout: float = 10.0) -> list[dict]:
    stop = asyncio.Event()
    col = Collector(want, stop)
    await asyncio.wait_for(scraper.run(col, stop), timeout)
    return col.recs


def _client(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_scraper_emits_engine_samples_with_client_in_flight_and_sends_headers():
    seen_auth = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen_auth.append(req.headers.get("authorization"))
        assert req.url.path == "/metrics"
        return httpx.Response(200, text=VLLM)

    async with _client(handler) as c:
        s = MetricsScraper(
            "http://127.0.0.1:9/v1", interval=0.01, headers={"Authorization": f"Bearer {SECRET}"},
            in_flight=lambda: 11, client=c,
        )
        recs = await _run(s, 3)
    assert len(recs) == 3
    assert all(r["source"] == "vllm" and r["waiting"] == 7.0 and r["client_in_flight"] == 11 for r in recs)
    assert seen_auth and all(a == f"Bearer {SECRET}" for a in seen_auth)
    assert s.state == "scraping" and s.engine == "vllm"
    assert SECRET not in repr(s) and SECRET not in json.dumps(recs)


@pytest.mark.parametrize(
    "handler, why",
    [
        (lambda req: httpx.Response(404, text="Not Found"), "HTTP 404"),
        (lambda req: httpx.Response(200, text="<html>welcome</html>"), "no known queue metrics"),
        (lambda req: httpx.Response(200, text=PROCESS_ONLY), "no known queue metrics"),
    ],
)
async def test_no_metrics_one_none_record_then_client_only(handler, why):
    async with _client(handler) as c:
        s = MetricsScraper("http://127.0.0.1:9", interval=0.01, in_flight=lambda: 2, client=c,
                           headers={"X-Api-Key": SECRET})
        recs = await _run(s, 6)
    assert recs[0]["source"] == "none"
    assert why in recs[0]["note"]
    assert recs[0]["client_in_flight"] == 2
    assert [r["source"] for r in recs[1:]] == ["client"] * 5
    assert all(r["client_in_flight"] == 2 and r["waiting"] is None for r in recs[1:])
    assert SECRET not in json.dumps(recs)
    for r in recs:  # all are valid v1 records
        assert isinstance(parse_object(r), QueueSample)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_connection_refused_real_socket_never_raises():
    port = _closed_port()  # bound then closed: nothing listens there
    s = MetricsScraper(f"http://user:{SECRET}@127.0.0.1:{port}/v1", interval=0.01, in_flight=lambda: 0, timeout=2.0)
    recs = await _run(s, 3)
    assert recs[0]["source"] == "none"
    assert "connection refused" in recs[0]["note"]
    assert SECRET not in recs[0]["note"]
    assert recs[1]["source"] == "client"


async def test_without_in_flight_no_metrics_emits_exactly_one_record():
    calls = 0
    retried = asyncio.Event()

    def handler(req):
        nonlocal calls
        calls += 1
        if calls >= 3:
            retried.set()
        return httpx.Response(404)

    stop = asyncio.Event()
    recs: list[dict] = []
    async with _client(handler) as c:
        s = MetricsScraper("http://127.0.0.1:9", interval=0.01, client=c, retry_s=0.05)
        task = asyncio.create_task(s.run(recs.append, stop))
        await asyncio.wait_for(retried.wait(), 10)  # it keeps retrying in the background
        stop.set()
        await asyncio.wait_for(task, 5)
    assert calls >= 3
    assert len(recs) == 1 and recs[0]["source"] == "none"


async def test_recovers_when_metrics_appear_later():
    state = {"n": 0}

    def handler(req):
        state["n"] += 1
        if state["n"] <= 2:
            return httpx.Response(503)
        return httpx.Response(200, text=SGLANG)

    async with _client(handler) as c:
        s = MetricsScraper("http://127.0.0.1:9", interval=0.01, retry_s=0.02, in_flight=lambda: 1, client=c)
        stop = asyncio.Event()
        recs: list[dict] = []

        def emit(r):
            recs.append(r)
            if r["source"] == "sglang":
                stop.set()

        await asyncio.wait_for(s.run(emit, stop), 10)
    assert recs[0]["source"] == "none" and "HTTP 503" in recs[0]["note"]
    assert recs[-1]["source"] == "sglang" and recs[-1]["running"] == 31.0
    assert s.state == "scraping"


async def test_transient_failure_after_working_is_not_declared_none():
    state = {"n": 0}

    def handler(req):
        state["n"] += 1
        if state["n"] == 2:
            raise httpx.ReadTimeout("slow")
        return httpx.Response(200, text=TGI)

    async with _client(handler) as c:
        s = MetricsScraper("http://127.0.0.1:9", interval=0.01, in_flight=lambda: 5, client=c)
        recs = await _run(s, 4)
    assert [r["source"] for r in recs] == ["tgi", "client", "tgi", "tgi"]
    assert s.scrapes_failed == 1


async def test_persistent_failure_after_working_is_declared_none_once():
    state = {"n": 0}

    def handler(req):
        state["n"] += 1
        if state["n"] == 1:
            return httpx.Response(200, text=TGI)
        return httpx.Response(500)

    async with _client(handler) as c:
        s = MetricsScraper("http://127.0.0.1:9", interval=0.01, in_flight=lambda: 5, client=c, max_failures=3,
                           retry_s=60)
        recs = await _run(s, 6)
    assert [r["source"] for r in recs] == ["tgi", "client", "client", "none", "client", "client"]


async def test_llamacpp_slots_busy_and_disabled_slots_endpoint():
    slots = [{"id": i, "is_processing": i < 3} for i in range(4)]

    def handler(req):
        if req.url.path == "/metrics":
            return httpx.Response(200, text=LLAMACPP)
        if req.url.path == "/slots":
            return httpx.Response(200, json=slots)
        return httpx.Response(404)

    async with _client(handler) as c:
        recs = await _run(MetricsScraper("http://127.0.0.1:9/v1", interval=0.01, client=c), 2)
    assert recs[0]["slots_busy"] == 3 and recs[0]["slots_total"] == 4
    assert recs[0]["waiting"] == 4.0

    slot_calls = 0

    def handler_off(req):
        nonlocal slot_calls
        if req.url.path == "/slots":
            slot_calls += 1
            return httpx.Response(501, json={"error": {"message": "This server does not support slots endpoint."}})
        return httpx.Response(200, text=LLAMACPP)

    async with _client(handler_off) as c:
        recs = await _run(MetricsScraper("http://127.0.0.1:9", interval=0.01, client=c), 4)
    assert all("slots_busy" not in r and r["source"] == "llamacpp" for r in recs)
    assert slot_calls == 1  # asked once, then left alone


async def test_broken_emit_and_async_emit():
    async with _client(lambda req: httpx.Response(200, text=LLAMACPP)) as c:
        s = MetricsScraper("http://127.0.0.1:9", interval=0.01, client=c, slots=False)
        stop = asyncio.Event()
        got: list[dict] = []
        calls = 0

        async def emit(rec):
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("consumer bug")
            got.append(rec)
            if len(got) == 2:
                stop.set()

        await asyncio.wait_for(s.run(emit, stop), 10)
    assert len(got) == 2 and got[0]["source"] == "llamacpp"


async def test_in_flight_callable_that_raises_gives_none():
    def bad():
        raise RuntimeError("boom")

    async with _client(lambda req: httpx.Response(200, text=VLLM)) as c:
        recs = await _run(MetricsScraper("http://127.0.0.1:9", interval=0.01, client=c, in_flight=bad), 1)
    assert recs[0]["source"] == "vllm" and recs[0]["client_in_flight"] is None


async def test_stop_before_start_returns_immediately():
    stop = asyncio.Event()
    stop.set()
    recs: list[dict] = []
    async with _client(lambda req: httpx.Response(200, text=VLLM)) as c:
        await asyncio.wait_for(MetricsScraper("http://x", client=c).run(recs.append, stop), 5)
    assert recs == []


# ------------------------------------------------------------------ server_info


async def test_server_info_llamacpp_shape():
    def handler(req):
        p = req.url.path
        if p == "/props":
            return httpx.Response(200, json={
                "default_generation_settings": {"n_ctx": 2048, "params": {}},
                "total_slots": 4,
                "model_path": "/tmp/m/gemma-3-270m-q4_k_m.gguf",
                "build_info": "b7000-abcdef12",
            })
        if p == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": "/tmp/m/gemma-3-270m-q4_k_m.gguf", "object": "model", "owned_by": "llamacpp"}]})
        return httpx.Response(404)

    async with _client(handler) as c:
        info = await server_info("http://127.0.0.1:9/v1", headers={"Authorization": SECRET}, client=c)
    assert info["engine"] == "llamacpp"
    assert info["build"] == "b7000-abcdef12"
    assert info["model"].endswith("gemma-3-270m-q4_k_m.gguf")
    assert info["slots"] == 4 and info["n_ctx_per_slot"] == 2048
    assert SECRET not in json.dumps(info)


async def test_server_info_vllm_shape():
    def handler(req):
        if req.url.path == "/version":
            return httpx.Response(200, json={"version": "0.9.1"})
        if req.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [
                {"id": "meta-llama/Llama-3.1-8B-Instruct", "owned_by": "vllm", "max_model_len": 8192}]})
        return httpx.Response(404)

    async with _client(handler) as c:
        info = await server_info("http://127.0.0.1:9", client=c)
    assert info == {"engine": "vllm", "build": "0.9.1", "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "models": ["meta-llama/Llama-3.1-8B-Instruct"], "max_model_len": 8192}


async def test_server_info_never_raises():
    assert await server_info(f"http://127.0.0.1:{_closed_port()}", timeout=2.0) == {}

    def garbage(req):
        return httpx.Response(200, content=b"\xff\xfe not json")

    async with _client(garbage) as c:
        assert await server_info("http://127.0.0.1:9", client=c) == {}
