"""Run a quality regression set against an OpenAI-compatible endpoint (httpx, non-streaming).

Every case is sent once with deterministic sampling (temperature 0, top_p 1, a fixed seed,
``cache_prompt: false``); chat cases go to ``/v1/chat/completions``, prompt cases to
``/v1/completions``. A request that fails becomes a failed case with an error class (a transport
error: no HTTP answer, see ``tui.sources.openai_http.TRANSPORT_ERRORS``; the comparison drops such
pairs and counts them); nothing is skipped. The HTTP layer (client, TLS policy, URL split, error
classes, the probe) is ``tui.sources.openai_http``, shared with the load generator. Request headers (API keys) are sent, never written anywhere: results carry header
names only, and error details are scrubbed of every secret value.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

import tui.sources.openai_http as oh
from tui.core.quality import DEFAULT_SEED, SAMPLING, Case, case_result, filler_text, majority_row
from tui.core.redact import Scrubber, redact_url, url_secrets
from tui.sources.openai_http import ProbeError, split_url  # noqa: F401  (re-exported for callers)

CALIBRATION_CHARS = 4000


def _with_path(base: str, path: str) -> str:
    return base.rstrip("/") + path


class QualityRunner:
    """One endpoint. ``await probe()`` once (reachability, model, server facts, tokenizer calibration;
    raises :class:`ProbeError`), then ``await run(cases)``."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        headers: dict[str, str] | None = None,
        concurrency: int = 1,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        seed: int = DEFAULT_SEED,
        transport: httpx.AsyncBaseTransport | None = None,
        extra_secrets: Sequence[str] = (),
        insecure: bool = False,
    ) -> None:
        self.url = url
        self.root, self.api_base, self.query = split_url(url)
        self.label = redact_url(url)
        self.model = model
        self.headers = dict(headers or {})
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.sampling = dict(SAMPLING, seed=int(seed))
        self.transport = transport
        self.insecure = bool(insecure)
        self.scrub = Scrubber(list(self.headers.values()) + url_secrets(url) + list(extra_secrets))
        self.server: dict = {}
        self.identity: dict | None = None  # the model the server says it serves (tui.sources.server_info)
        self.notes: list[str] = []
        self.chars_per_token: float | None = None
        self._dropped: set[str] = set()
        self.started_at: float | None = None
        self.seconds: float | None = None

    def _client(self) -> httpx.AsyncClient:
        return oh.make_client(headers=self.headers, connect_timeout=self.connect_timeout, read_timeout=self.timeout,
                              insecure=self.insecure, transport=self.transport, params=self.query or None)

    @property
    def target(self) -> dict:
        return {"url": self.label, "model": self.model}

    # -- setup ---------------------------------------------------------------

    async def probe(self, calibrate: bool = True) -> None:
        """Reachability (:func:`tui.sources.openai_http.probe`: raises ProbeError), server facts, the model
        name (first of /v1/models when not given) and chars per token."""
        async with self._client() as client:
            res = await oh.probe(client, self.url, scrub=self.scrub,
                                 connect_timeout=min(self.connect_timeout, oh.PROBE_CONNECT_TIMEOUT))
            self.server = res.server
            if not self.model:
                models = res.models or self.server.get("models") or []
                if models:
                    self.model = models[0]
                else:
                    self.notes.append("the server lists no model and none was given: requests name no model")
            from tui.sources.server_info import server_identity

            self.identity = await server_identity(self.root, client, claimed=self.model, api_base=self.api_base)
            if calibrate:
                self.chars_per_token = await self._calibrate(client)

    async def _calibrate(self, client: httpx.AsyncClient) -> float | None:
        """Characters per token of the filler text, from the server's /tokenize (llama.cpp ``{"content"}``, vLLM
        ``{"model", "prompt"}``), else None."""
        sample = filler_text(CALIBRATION_CHARS, 0)
        bodies: list[dict[str, Any]] = [{"content": sample}]
        if self.model:
            bodies.append({"model": self.model, "prompt": sample, "add_special_tokens": False})
        for body in bodies:
            try:
                r = await client.post(_with_path(self.root, "/tokenize"), json=body, timeout=10.0)
                if r.status_code != 200:
                    continue
                data = r.json()
                toks = data.get("tokens")
                n = len(toks) if isinstance(toks, list) else data.get("count")
                if isinstance(n, int) and not isinstance(n, bool) and n >= 10:
                    return len(sample) / n
            except Exception:
                continue
        return None

    # -- requests ------------------------------------------------------------

    def _body(self, case: Case) -> dict:
        body: dict[str, Any] = {}
        if self.model:
            body["model"] = self.model
        if case.messages is not None:
            body["messages"] = [dict(m) for m in case.messages]
        else:
            body["prompt"] = case.prompt
        body["max_tokens"] = case.max_tokens
        body["stream"] = False
        for k, v in self.sampling.items():
            if k not in self._dropped:
                body[k] = v
        return body

    async def _one(self, client: httpx.AsyncClient, case: Case) -> dict:
        path = "/chat/completions" if case.messages is not None else "/completions"
        url = _with_path(self.api_base, path)
        t0 = time.perf_counter()
        attempts = 0
        while True:
            attempts += 1
            body = self._body(case)
            try:
                r = await client.post(url, json=body)
            except httpx.HTTPError as exc:
                cls = oh.exception_class(exc)
                if attempts == 1 and cls in ("connect", "stream_reset"):
                    continue  # a stale or refused connection: one fresh retry
                return case_result(case, None, latency_s=time.perf_counter() - t0, error=cls,
                                   error_detail=self.scrub(f"{type(exc).__name__}: {oh.describe_exception(exc)}"))
            if r.status_code == 400 and attempts <= len(oh.OPTIONAL_FIELDS):
                bad = oh.rejected_fields(oh.error_message(r.text[:4096]), body, self._dropped)
                if bad:
                    for k in bad:
                        self._dropped.add(k)
                        self.notes.append(f"the server rejected {k!r}: sent without it")
                    continue
            break
        latency = time.perf_counter() - t0
        if r.status_code != 200:
            return case_result(case, None, latency_s=latency, error=oh.status_class(r.status_code),
                               error_detail=self.scrub(f"HTTP {r.status_code}: {r.text[:4096]}", cut=len(r.text) > 4096))
        try:
            data = r.json()
            choice = data["choices"][0]
            if case.messages is not None:
                answer = (choice.get("message") or {}).get("content")
            else:
                answer = choice.get("text")
            if answer is not None and not isinstance(answer, str):
                raise TypeError("answer is not text")
        except Exception as exc:
            return case_result(case, None, latency_s=latency, error="malformed_response",
                               error_detail=self.scrub(f"{type(exc).__name__}: {r.text[:4096]}", cut=len(r.text) > 4096))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return case_result(
            case, self.scrub.text(answer or ""), latency_s=latency,
            prompt_tokens=pt if isinstance(pt, int) else None,
            completion_tokens=ct if isinstance(ct, int) else None,
            finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        )

    async def run(self, cases: Sequence[Case],
                  progress: Callable[[int, int, dict], Any] | None = None, repeat: int = 1) -> list[dict]:
        """Per-case result rows, in set order. ``repeat`` > 1: each case is sent that many times (one after the
        other) and its row is the majority (:func:`tui.core.quality.majority_row`), with every attempt counted."""
        repeat = max(1, int(repeat))
        self.started_at = time.time()
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(self.concurrency)
        done = 0

        async with self._client() as client:
            async def go(case: Case) -> dict:
                nonlocal done
                async with sem:
                    attempts = [await self._one(client, case) for _ in range(repeat)]
                row = majority_row(case, attempts)
                done += 1
                if progress is not None:
                    try:
                        progress(done, len(cases), row)
                    except Exception:
                        pass
                return row

            rows = await asyncio.gather(*(go(c) for c in cases))
        self.seconds = time.perf_counter() - t0
        return list(rows)
