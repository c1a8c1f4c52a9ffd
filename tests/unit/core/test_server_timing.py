"""Server-side percentile brackets of a step (tui.core.server_timing): bucket deltas, nearest rank, the flag."""

from __future__ import annotations

from tui.core.server_timing import bracket, server_brackets, server_json, server_lines

LE = [0.05, 0.1, 0.25, 0.5, 1.0, "+Inf"]


def _h(counts, name="vllm:time_to_first_token_seconds"):
    return {"name": name, "le": LE, "counts": counts, "count": counts[-1], "sum": 0.0}


def _step(start, end, **kw):
    return {"server_histograms": {"engine": "vllm", "t_start": 10.0, "t_end": 70.0, "start": start, "end": end, **kw}}


def test_brackets_from_the_delta_only():
    # 50 observations before the step (all fast) must not count; in the step: 10 at 0.3 s, 90 at 0.7 s
    start = {"ttft": _h([50, 50, 50, 50, 50, 50])}
    end = {"ttft": _h([50, 50, 50, 60, 150, 150])}
    br = server_brackets(_step(start, end))
    m = br["metrics"]["ttft"]
    assert m["n"] == 100
    assert m["P50"] == [500.0, 1000.0]  # rank 50 > 10 in the 0.25..0.5 bucket
    assert br["seconds"] == 60.0 and br["engine"] == "vllm" and br["problems"] == []


def test_nearest_rank_at_a_bucket_edge_and_the_inf_bucket():
    d = ((0.1, 50.0), (0.5, 95.0), (1.0, 99.0), (float("inf"), 100.0))
    assert bracket(d, 0.5) == (0.0, 0.1)  # rank 50 is the 50th, the last in the first bucket
    assert bracket(d, 0.95) == (0.1, 0.5)
    assert bracket(d, 0.99) == (0.5, 1.0)
    assert bracket(d, 0.999) == (1.0, float("inf"))
    assert bracket(((float("inf"), 0.0),), 0.5) is None
    j = server_json(server_brackets(_step({"ttft": _h([0] * 6)}, {"ttft": _h([0, 0, 0, 0, 0, 5])})))
    assert j["metrics"]["ttft"]["P50"]["server_ms"] == [1000.0, None]  # above the last finite bound


def test_restart_and_layout_change_are_problems_not_figures():
    start = {"ttft": _h([5, 5, 5, 5, 5, 5])}
    br = server_brackets(_step(start, {"ttft": _h([1, 1, 1, 1, 1, 1])}))
    assert "ttft" not in br["metrics"] and "went down" in br["problems"][0]
    other = {"name": "x", "le": [0.2, "+Inf"], "counts": [6, 6]}
    br = server_brackets(_step(start, {"ttft": other}))
    assert "layout changed" in br["problems"][0]
    br = server_brackets(_step(start, {"ttft": {"le": "bad"}}))
    assert "unusable" in br["problems"][0]
    assert server_brackets({"event": "end"}) == {}


def test_client_below_the_server_bracket_is_flagged_as_impossible():
    start = {"ttft": _h([0] * 6), "e2e": _h([0] * 6, "vllm:e2e_request_latency_seconds"),
             "itl": _h([0] * 6, "vllm:inter_token_latency_seconds")}
    end = {"ttft": _h([0, 0, 100, 100, 100, 100]), "e2e": _h([0, 0, 0, 0, 100, 100], "e2e"),
           "itl": _h([0, 0, 900, 900, 900, 900], "itl")}
    br = server_brackets(_step(start, end))
    client = {"ttft": {"P50": 80.0, "P95": 120.0, "P99": 300.0},  # P50 below 100..250 ms: impossible
              "e2e": {"P50": 800.0, "P95": 900.0, "P99": 950.0},  # inside 500..1000 ms: fine
              "itl": {"P50": 1.0, "P95": 2.0, "P99": 3.0}}  # below, but gaps are not flagged (network batching)
    j = server_json(br, client, client_n=100)
    assert j["metrics"]["ttft"]["P50"]["below_server_bracket"] is True
    assert j["metrics"]["ttft"]["P95"]["below_server_bracket"] is False
    assert j["metrics"]["ttft"]["P50"]["client_minus_server_ms"] == [80.0 - 250.0, 80.0 - 100.0]
    assert j["metrics"]["e2e"]["P50"]["below_server_bracket"] is False
    assert j["metrics"]["itl"]["P50"]["below_server_bracket"] is None
    assert len(j["flags"]) == 1 and "cannot happen" in j["flags"][0] and "TTFT P50" in j["flags"][0]
    text = "\n".join(server_lines(br, client, client_n=100))
    assert "P50 100..250 ms (client 80 ms BELOW)" in text and "FLAG:" in text
    # more server observations than client requests: other traffic is named as a possible cause
    j2 = server_json(br, client, client_n=40)
    assert "other traffic" in j2["flags"][0]


def test_client_figures_set_beside_only_the_same_measure():
    """The report's client ITL is the largest gap per request, the server's inter-token histogram one observation
    per gap: not set beside it (seen live on vLLM 0.32: server per-gap P50 100..150 ms, client largest-gap P50 769
    ms). TPOT is per request on both sides and is set beside the server's request_time_per_output_token."""
    from tui.core.server_timing import client_from_level

    level = {"ttft_ms": {"P50": {"value": 80.0}}, "itl_ms": {"P50": {"value": 769.0}},
             "tpot_ms": {"P50": {"value": 47.0}}, "e2e_ms": {"P50": {"value": 900.0}}}
    client = client_from_level(level)
    assert set(client) == {"ttft", "tpot", "e2e"} and client["tpot"]["P50"] == 47.0
    start = {"itl": _h([0] * 6, "vllm:inter_token_latency_seconds"),
             "tpot": _h([0] * 6, "vllm:request_time_per_output_token_seconds")}
    end = {"itl": _h([0, 100, 100, 100, 100, 100], "vllm:inter_token_latency_seconds"),
           "tpot": _h([10, 10, 10, 10, 10, 10], "vllm:request_time_per_output_token_seconds")}
    br = server_brackets(_step(start, end))
    j = server_json(br, client, 10)
    assert j["metrics"]["itl"]["P50"]["client_ms"] is None and "largest gap" in j["itl_note"]
    assert j["metrics"]["tpot"]["P50"] == {"server_ms": [0.0, 50.0], "client_ms": 47.0,
                                            "client_minus_server_ms": [-3.0, 47.0], "below_server_bracket": None}
    text = "\n".join(server_lines(br, client, 10))
    assert "TPOT (per request) (server n=10): P50 0..50 ms (client 47 ms)" in text and "largest gap" in text


def test_step_histograms_carry_the_per_request_tpot():
    from tui.sources.metrics import parse_histograms

    page = "".join(f'vllm:request_time_per_output_token_seconds_bucket{{model_name="m",le="{le}"}} 3\n'
                   for le in ("0.05", "+Inf")) + 'vllm:num_requests_running{model_name="m"} 0\n'
    got = parse_histograms(page)
    assert got is not None and got["hists"]["tpot"]["name"] == "vllm:request_time_per_output_token_seconds"
