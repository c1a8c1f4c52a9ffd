"""The serving engines servewatch watches, and where each figure lives on their ``/metrics`` page.

Pure data and one detection rule, at the bottom of ``tui.core``: the watch pipeline (``tui.core.watch``) reads
its metric names, and the watch record (``tui.core.records.watch``) accepts only an engine named here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class WatchMetrics:
    """Where each watched figure lives on one engine. Histogram names are base names (the
    exposition adds ``_bucket``/``_count``/``_sum``); counters are sample names as written on
    the wire (with ``_total``). ``failed`` entries are ``(sample name, label, values)``:
    the counter summed over series whose ``label`` is one of ``values`` (``label`` None: all)."""

    engine: str
    ttft: str | None
    e2e: str | None = None
    queue_time: str | None = None
    success: tuple[tuple[str, str | None, tuple[str, ...]], ...] = ()
    failed: tuple[tuple[str, str | None, tuple[str, ...]], ...] = ()
    waiting: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    kv_cache: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()
    metrics_path: str = "/metrics"
    model_labels: tuple[str, ...] = ("model_name", "model")
    detect: tuple[str, ...] = ()  # any of these sample names present -> this engine
    # issue 21: inter-token gaps (one observation per token gap, first name present wins: newer first) and the
    # per-request time per output token (one observation per request); () where the engine exposes none
    itl: tuple[str, ...] = ()
    tpot: tuple[str, ...] = ()


_ABORT_REASONS = ("abort", "error")

ENGINES: dict[str, WatchMetrics] = {
    "vllm": WatchMetrics(
        engine="vllm",
        ttft="vllm:time_to_first_token_seconds",
        e2e="vllm:e2e_request_latency_seconds",
        queue_time="vllm:request_queue_time_seconds",
        # finished_reason on vLLM 0.32's page (checked live): stop, length, abort, error, repetition (a finish the
        # engine calls success: a repetitive token pattern cut off)
        success=(("vllm:request_success_total", "finished_reason", ("stop", "length", "repetition")),),
        failed=(("vllm:request_success_total", "finished_reason", _ABORT_REASONS),),
        waiting=("vllm:num_requests_waiting",),
        running=("vllm:num_requests_running",),
        kv_cache=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        preemptions=("vllm:num_preemptions_total",),
        detect=("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:time_to_first_token_seconds_count"),
        itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        tpot=("vllm:request_time_per_output_token_seconds",),
    ),
    "sglang": WatchMetrics(
        engine="sglang",
        ttft="sglang:time_to_first_token_seconds",
        e2e="sglang:e2e_request_latency_seconds",
        queue_time="sglang:queue_time_seconds",
        success=(("sglang:num_requests_total", None, ()),),
        failed=(("sglang:num_aborted_requests_total", None, ()),),
        waiting=("sglang:num_queue_reqs",),
        running=("sglang:num_running_reqs",),
        kv_cache=("sglang:token_usage",),
        detect=("sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:time_to_first_token_seconds_count"),
        itl=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    ),
    "trtllm": WatchMetrics(
        engine="trtllm",
        ttft="trtllm_time_to_first_token_seconds",
        e2e="trtllm_e2e_request_latency_seconds",
        queue_time="trtllm_request_queue_time_seconds",
        success=(("trtllm_request_success_total", "finished_reason", ("stop", "length")),),
        failed=(("trtllm_request_success_total", "finished_reason", _ABORT_REASONS),
                ("trtllm_request_error_total", None, ())),
        waiting=("trtllm_num_requests_waiting",),
        running=("trtllm_num_requests_running",),
        kv_cache=("trtllm_kv_cache_utilization",),
        metrics_path="/prometheus/metrics",
        detect=("trtllm_time_to_first_token_seconds_count", "trtllm_request_success_total",
                "trtllm_num_requests_waiting"),
        # trtllm-serve observes its time per output token once per request (MetricsCollector): a TPOT, not gaps
        tpot=("trtllm_time_per_output_token_seconds",),
    ),
    "dynamo": WatchMetrics(
        engine="dynamo",
        ttft="dynamo_frontend_time_to_first_token_seconds",
        e2e="dynamo_frontend_request_duration_seconds",
        success=(("dynamo_frontend_requests_total", "status", ("success",)),),
        failed=(("dynamo_frontend_requests_total", "status", ("error",)),),
        waiting=("dynamo_frontend_queued_requests",),
        running=("dynamo_frontend_inflight_requests",),
        model_labels=("model", "model_name"),
        detect=("dynamo_frontend_queued_requests", "dynamo_frontend_inflight_requests",
                "dynamo_frontend_time_to_first_token_seconds_count"),
        itl=("dynamo_frontend_inter_token_latency_seconds",),
    ),
    "llamacpp": WatchMetrics(
        engine="llamacpp",
        ttft=None,
        waiting=("llamacpp:requests_deferred",),
        running=("llamacpp:requests_processing",),
        kv_cache=("llamacpp:kv_cache_usage_ratio",),
        detect=("llamacpp:requests_processing", "llamacpp:requests_deferred"),
    ),
    "tgi": WatchMetrics(
        engine="tgi",
        ttft=None,
        e2e="tgi_request_duration",
        queue_time="tgi_request_queue_duration",
        # the Rust exporter's counter names with and without _total have both been seen; only one exists
        success=(("tgi_request_success", None, ()), ("tgi_request_success_total", None, ())),
        failed=(("tgi_request_failure", None, ()), ("tgi_request_failure_total", None, ())),
        waiting=("tgi_queue_size",),
        running=("tgi_batch_current_size",),
        detect=("tgi_queue_size", "tgi_request_duration_count"),
    ),
}


def detect_engine(names: Iterable[str]) -> str | None:
    """Which engine wrote these sample names (first match in ENGINES order; Dynamo before the
    engines it fronts would be wrong when both are on one page, so a page with a Dynamo
    frontend TTFT histogram is Dynamo)."""
    names = set(names)
    if "dynamo_frontend_time_to_first_token_seconds_count" in names:
        return "dynamo"
    for eng, m in ENGINES.items():
        if any(n in names for n in m.detect):
            return eng
    return None

