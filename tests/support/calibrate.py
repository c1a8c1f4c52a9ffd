"""Tests that depend on the machine's speed calibrate to it first: the one helper.

``measure_peer(url)`` sends a few requests one at a time (concurrency 1, streaming, 127.0.0.1 only, bounded in
count and time) to an OpenAI-compatible server (the real llama-server, or the in-test FaultServer) and returns
what THIS machine does right now: TTFT and end-to-end time of each request. A test then derives its SLO or its
bounds from those figures (``slo_between``, ``bound_s``) instead of a constant tuned on an idle machine, so a slow
or busy CI box moves the SLO with the server instead of failing the test.

It measures with the same kind of client the load generator uses (httpx, one connection per request is not
needed: one client, sequential requests), after one warm-up request that is not counted.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field

import httpx

CALIBRATION_REQUESTS = 5  # an odd count: the medians are measured requests
CALIBRATION_TIMEOUT_S = 120.0  # one request; a failing server fails the calibration, not the test's assertion


@dataclass
class PeerSpeed:
    """Concurrency-1 figures of a server on this machine, now (seconds)."""

    ttft_s: list[float] = field(default_factory=list)
    e2e_s: list[float] = field(default_factory=list)

    @property
    def ttft_max_s(self) -> float:
        return max(self.ttft_s)

    @property
    def e2e_min_s(self) -> float:
        return min(self.e2e_s)

    @property
    def ttft_median_s(self) -> float:
        return statistics.median(self.ttft_s)

    @property
    def e2e_median_s(self) -> float:
        return statistics.median(self.e2e_s)

    def __str__(self) -> str:
        return (f"concurrency-1 TTFT {', '.join(f'{t * 1e3:.0f}' for t in self.ttft_s)} ms, end-to-end "
                f"{', '.join(f'{t * 1e3:.0f}' for t in self.e2e_s)} ms")


def _one(client: httpx.Client, endpoint: str, body: dict) -> tuple[float, float]:
    t0 = time.monotonic()
    first = None
    with client.stream("POST", endpoint, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            if first is None:
                try:
                    delta = json.loads(data)["choices"][0].get("delta") or {}
                except (ValueError, KeyError, IndexError, TypeError):
                    delta = {}
                if delta.get("content"):
                    first = time.monotonic()
    end = time.monotonic()
    return (first if first is not None else end) - t0, end - t0


def measure_peer(openai_url: str, *, prompt_words: int = 16, output_tokens: int = 32, n: int = CALIBRATION_REQUESTS,
                 model: str = "test-model") -> PeerSpeed:
    """TTFT and end-to-end time of ``n`` sequential streamed chat requests (after one warm-up) to
    ``openai_url`` (``http://127.0.0.1:PORT/v1`` or a FaultServer URL ending in ``/v1``)."""
    assert openai_url.startswith("http://127.0.0.1:"), "calibration traffic goes to 127.0.0.1 only"
    endpoint = openai_url.rstrip("/") + "/chat/completions"
    body = {"model": model, "stream": True, "max_tokens": output_tokens, "ignore_eos": True, "temperature": 0,
            "messages": [{"role": "user", "content": " ".join(["word"] * prompt_words)}]}
    speed = PeerSpeed()
    with httpx.Client(timeout=CALIBRATION_TIMEOUT_S) as client:
        _one(client, endpoint, body)  # warm-up: connection, prompt cache, first-use costs
        for _ in range(n):
            ttft, e2e = _one(client, endpoint, body)
            speed.ttft_s.append(ttft)
            speed.e2e_s.append(e2e)
    return speed


def slo_between(speed: PeerSpeed, *, above_ttft: float = 3.0, floor_ms: float = 100.0) -> float:
    """An SLO (ms) that a request served at once meets with room to spare, and a request queued behind a full
    batch misses: 0.6 of the median concurrency-1 end-to-end time (a queued request waits at least about one whole
    request), and at least the geometric mean of that and ``above_ttft`` x the median concurrency-1 TTFT (on a busy
    box the TTFT of a request served at once swings more than its whole time does), never under
    ``floor_ms``. Medians: one request delayed by a burst of load elsewhere does not move the SLO. When the two
    figures are too close to separate, the lower bound wins (the PASS side is kept)."""
    low = max(floor_ms, above_ttft * speed.ttft_median_s * 1e3)
    high = speed.e2e_median_s * 1e3
    if high <= low:
        return low
    # as high as a queued request still misses: 0.6 of a whole request (a request queued behind a full batch waits
    # at least about one whole request), never below the geometric mean of the two
    return max(math.sqrt(low * high), 0.6 * high)


def bound_s(speed: PeerSpeed, requests: int, *, factor: float = 20.0, floor_s: float = 30.0) -> float:
    """A generous time bound (s) for ``requests`` sequential requests at this machine's measured speed."""
    return max(floor_s, factor * requests * max(speed.e2e_s))


def pass_slo_ms(openai_url: str, *, floor_ms: float = 1000.0, factor: float = 20.0, **kw) -> float:
    """For a test whose server should PASS an SLO: the SLO (ms) a request at concurrency 1 meets ``factor`` times
    over on this machine now, never under ``floor_ms`` (the constant the test used before calibrating)."""
    speed = measure_peer(openai_url, **kw)
    return max(floor_ms, factor * speed.ttft_max_s * 1e3)
