"""A small in-test metrics server on 127.0.0.1 whose series move like a serving engine's would.

It serves Prometheus exposition text (the names vLLM, SGLang, TensorRT-LLM and the Dynamo
frontend use; see docs/telemetry.md for where each was checked) from a state the test drives:
``observe(fast=..., slow=..., aborted=...)`` adds requests, ``restart()`` zeroes every counter
(a counter reset), ``drop_ttft = True`` removes the TTFT series, ``fail = 500`` makes the page
fail. Every GET is counted per path (``hits``) so tests can prove what was (not) asked.

The bucket bounds are a subset of the engines' own TTFT buckets; an SLO of 750 ms falls between
the 0.5 and 1.0 bounds (the bracket case), 1000 ms is a bound (the exact case).

With ``latency=True`` the page also carries the end-to-end, inter-token (per gap) and per-request
time-per-output-token histograms each engine exports (issue 21), moved by ``observe_hist(key, value, n)``
(keys ``ttft``, ``qt``, ``e2e``, ``itl``, ``tpot``) by exactly known counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
FAST, MEDIUM, SLOW = 0.04, 0.7, 3.0  # seconds: under every bound / between 0.5 and 1.0 / over 2.5

# issue 21: the inter-token (per gap) and per-request TPOT histograms, where the engine has one
LATENCY_NAMES = {
    "vllm": dict(itl="vllm:inter_token_latency_seconds", tpot="vllm:request_time_per_output_token_seconds"),
    "sglang": dict(itl="sglang:inter_token_latency_seconds", tpot=None),
    "trtllm": dict(itl=None, tpot="trtllm_time_per_output_token_seconds"),
    "dynamo": dict(itl="dynamo_frontend_inter_token_latency_seconds", tpot=None),
}

NAMES = {
    "vllm": dict(ttft="vllm:time_to_first_token_seconds", qt="vllm:request_queue_time_seconds",
                 e2e="vllm:e2e_request_latency_seconds", waiting="vllm:num_requests_waiting",
                 running="vllm:num_requests_running", kv="vllm:kv_cache_usage_perc", path="/metrics",
                 model_label="model_name"),
    "sglang": dict(ttft="sglang:time_to_first_token_seconds", qt="sglang:queue_time_seconds",
                   e2e="sglang:e2e_request_latency_seconds", waiting="sglang:num_queue_reqs",
                   running="sglang:num_running_reqs", kv="sglang:token_usage", path="/metrics",
                   model_label="model_name"),
    "trtllm": dict(ttft="trtllm_time_to_first_token_seconds", qt="trtllm_request_queue_time_seconds",
                   e2e="trtllm_e2e_request_latency_seconds", waiting="trtllm_num_requests_waiting",
                   running="trtllm_num_requests_running", kv="trtllm_kv_cache_utilization",
                   path="/prometheus/metrics", model_label="model_name"),
    "dynamo": dict(ttft="dynamo_frontend_time_to_first_token_seconds", qt=None,
                   e2e="dynamo_frontend_request_duration_seconds", waiting="dynamo_frontend_queued_requests",
                   running="dynamo_frontend_inflight_requests", kv=None, path="/metrics", model_label="model"),
}


class EngineState:
    def __init__(self, engine: str, models=("m",), latency: bool = False) -> None:
        self.engine = engine
        self.models = tuple(models)
        self.latency = latency
        self.lock = threading.Lock()
        self.fail: int | None = None
        self.drop_ttft = False
        self.prefix_cache: list[float] | None = None  # [queries, hits] (vLLM's prefix-cache counters) when exported
        self.restart()

    def restart(self) -> None:
        with self.lock:
            self.ttft = {b: 0 for b in BOUNDS}
            self.ttft_inf = 0
            self.ttft_sum = 0.0
            self.qt = {b: 0 for b in BOUNDS}
            self.qt_inf = 0
            self.success = 0
            self.aborted = 0
            self.waiting = 0
            self.running = 0
            self.kv = 0.1
            self.extra = {k: ({b: 0 for b in BOUNDS}, [0, 0.0]) for k in ("e2e", "itl", "tpot")}
            if self.prefix_cache is not None:
                self.prefix_cache = [0.0, 0.0]

    def _obs(self, hist: dict, value: float, n: int) -> int:
        for b in BOUNDS:
            if value <= b:
                hist[b] += n
        return n

    def observe(self, fast: int = 0, slow: int = 0, medium: int = 0, aborted: int = 0, queued_slow: int = 0) -> None:
        with self.lock:
            for value, n in ((FAST, fast), (MEDIUM, medium), (SLOW, slow)):
                self._obs(self.ttft, value, n)
                self.ttft_inf += n
                self.ttft_sum += value * n
                self.success += n
            self._obs(self.qt, 0.01, fast + medium + slow - queued_slow)
            self._obs(self.qt, SLOW, queued_slow)
            self.qt_inf += fast + medium + slow
            self.aborted += aborted

    def observe_hist(self, key: str, value: float, n: int = 1) -> None:
        """``n`` observations of ``value`` seconds in one histogram only (``ttft`` does not count a success)."""
        with self.lock:
            if key == "ttft":
                self._obs(self.ttft, value, n)
                self.ttft_inf += n
                self.ttft_sum += value * n
            elif key == "qt":
                self._obs(self.qt, value, n)
                self.qt_inf += n
            else:
                b, tail = self.extra[key]
                self._obs(b, value, n)
                tail[0] += n
                tail[1] += value * n

    def _extra_lines(self, lab: str) -> list[str]:
        names = dict(LATENCY_NAMES[self.engine], e2e=NAMES[self.engine]["e2e"])
        lines = []
        for key in ("e2e", "itl", "tpot"):
            name = names.get(key)
            if not name:
                continue
            b, (cnt, tot) = self.extra[key]
            lines.append(f"# TYPE {name} histogram")
            for bound in BOUNDS:
                lines.append(f'{name}_bucket{{{lab},le="{bound}"}} {b[bound]}')
            lines.append(f'{name}_bucket{{{lab},le="+Inf"}} {cnt}')
            lines.append(f'{name}_count{{{lab}}} {cnt}')
            lines.append(f'{name}_sum{{{lab}}} {tot}')
        return lines

    def text(self) -> str:
        n = NAMES[self.engine]
        lines = []
        with self.lock:
            for model in self.models:
                lab = f'{n["model_label"]}="{model}"'
                if not self.drop_ttft:
                    lines.append(f"# TYPE {n['ttft']} histogram")
                    for b in BOUNDS:
                        lines.append(f'{n["ttft"]}_bucket{{{lab},le="{b}"}} {self.ttft[b]}')
                    lines.append(f'{n["ttft"]}_bucket{{{lab},le="+Inf"}} {self.ttft_inf}')
                    lines.append(f'{n["ttft"]}_count{{{lab}}} {self.ttft_inf}')
                    lines.append(f'{n["ttft"]}_sum{{{lab}}} {self.ttft_sum}')
                if n["qt"]:
                    lines.append(f"# TYPE {n['qt']} histogram")
                    for b in BOUNDS:
                        lines.append(f'{n["qt"]}_bucket{{{lab},le="{b}"}} {self.qt[b]}')
                    lines.append(f'{n["qt"]}_bucket{{{lab},le="+Inf"}} {self.qt_inf}')
                    lines.append(f'{n["qt"]}_count{{{lab}}} {self.qt_inf}')
                    lines.append(f'{n["qt"]}_sum{{{lab}}} 0.0')
                if self.latency:
                    lines.extend(self._extra_lines(lab))
                lines.append(f"# TYPE {n['waiting']} gauge")
                lines.append(f'{n["waiting"]}{{{lab}}} {self.waiting}')
                lines.append(f"# TYPE {n['running']} gauge")
                lines.append(f'{n["running"]}{{{lab}}} {self.running}')
                if n["kv"]:
                    lines.append(f"# TYPE {n['kv']} gauge")
                    lines.append(f'{n["kv"]}{{{lab}}} {self.kv}')
                if self.engine == "vllm" and self.prefix_cache is not None:
                    for fam, v in (("queries", self.prefix_cache[0]), ("hits", self.prefix_cache[1])):
                        lines.append(f"# TYPE vllm:prefix_cache_{fam} counter")
                        lines.append(f"vllm:prefix_cache_{fam}_total{{{lab}}} {v}")
                if self.engine in ("vllm", "trtllm"):
                    name = "vllm:request_success" if self.engine == "vllm" else "trtllm_request_success"
                    lines.append(f"# TYPE {name} counter")
                    for reason, v in (("stop", self.success), ("length", 0), ("abort", self.aborted)):
                        lines.append(f'{name}_total{{{lab},finished_reason="{reason}"}} {v}')
                elif self.engine == "sglang":
                    lines.append("# TYPE sglang:num_requests counter")
                    lines.append(f"sglang:num_requests_total{{{lab}}} {self.success + self.aborted}")
                    if self.aborted:  # created on the first abort, like a lazily labelled counter
                        lines.append("# TYPE sglang:num_aborted_requests counter")
                        lines.append(f"sglang:num_aborted_requests_total{{{lab}}} {self.aborted}")
                else:  # dynamo
                    lines.append("# TYPE dynamo_frontend_requests counter")
                    lines.append(f'dynamo_frontend_requests_total{{{lab},status="success"}} {self.success}')
                    lines.append(f'dynamo_frontend_requests_total{{{lab},status="error"}} {self.aborted}')
        return "\n".join(lines) + "\n"


class MetricsServer:
    """``with MetricsServer("vllm") as ms: ms.url`` -> the metrics page URL."""

    def __init__(self, engine: str = "vllm", models=("m",), latency: bool = False) -> None:
        self.state = EngineState(engine, models, latency)
        self.path = NAMES[engine]["path"]
        self.hits: Counter = Counter()
        self.fail: int | None = None
        state, hits, outer = self.state, self.hits, self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                hits[self.path.split("?")[0]] += 1
                if self.path.split("?")[0] != outer.path:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if outer.fail:
                    body = b"boom"
                    self.send_response(outer.fail)
                else:
                    body = state.text().encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                hits["POST " + self.path] += 1
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{self.path}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> MetricsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
