"""Run a quality regression set against an OpenAI-compatible endpoint (httpx, non-streaming).

Every case is sent once with deterministic sampling (temperature 0, top_p 1, a fixed seed,
``cache_prompt: false``); chat cases go to ``/v1/chat/completions``, prompt cases to
``/v1/completions``. A request that fails becomes a failed case with an error class; nothing is
skipped. Request headers (API keys) are sent, never written anywhere: results carry header
names only, and error details are scrubbed of every secret value.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

import httpx

from tui.core.quality import SAMPLING, Case, case_result, filler_text
from tui.sources.metrics import redact_url, server_info

_OPTIONAL = ("cache_prompt", "seed")  # dropped (once, noted) when a server rejects them
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
_DETAIL_LIMIT = 200
CALIBRATION_CHARS = 4000


def split_url(url: str) -> tuple[str, str]:
    """(server root, API base ending in /v1) from a base URL given with or without /v1."""
    p = urlsplit(url.strip())
    path = p.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    root = urlunsplit((p.scheme, p.netloc, path, p.query, ""))
    return root, urlunsplit((p.scheme, p.netloc, path + "/v1", p.query, ""))


def _with_path(base: str, path: str) -> str:
    p = urlsplit(base)
    return urlunsplit((p.scheme, p.netloc, p.path + path, p.query, ""))


class Scrubber:
    """Removes secret values (and any bearer/basic token) from text we write."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: Any) -> str:
        """The known secret values removed, everything else (whitespace included) kept (for answers)."""
        s = str(text)
        for sec in self.secrets:
            s = s.replace(sec, "<redacted>")
        return s

    def __call__(self, text: Any, limit: int = _DETAIL_LIMIT) -> str:
        """An error detail: secrets and anything that looks like a bearer token removed, one line, capped."""
        s = _BEARER.sub(lambda m: m.group(1) + " <redacted>", self.redact(text))
        s = " ".join(s.split())
        return s if len(s) <= limit else s[: limit - 3] + "..."


def url_secrets(url: str) -> list[str]:
    p = urlsplit(url.strip())
    out = [x for x in (p.password, p.username) if x]
    if p.query:
        out.append(p.query)
        out += [part.partition("=")[2] for part in p.query.split("&")]
    return [x for x in out if x and len(x) >= 4]


def classify(exc: BaseException) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect_timeout"
    if isinstance(exc, httpx.ConnectError):
        return "connect"
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
        return "read_timeout"
    return "other"


class QualityRunner:
    """One endpoint. ``await probe()`` once (model, server facts, tokenizer calibration), then ``await run(cases)``."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        headers: dict[str, str] | None = None,
        concurrency: int = 1,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        seed: int = SAMPLING["seed"],
        transport: httpx.AsyncBaseTransport | None = None,
        extra_secrets: Sequence[str] = (),
    ) -> None:
        self.url = url
        self.root, self.api_base = split_url(url)
        self.label = redact_url(url)
        self.model = model
        self.headers = dict(headers or {})
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.sampling = dict(SAMPLING, seed=int(seed))
        self.transport = transport
        self.scrub = Scrubber(list(self.headers.values()) + url_secrets(url) + list(extra_secrets))
        self.server: dict = {}
        self.notes: list[str] = []
        self.chars_per_token: float | None = None
        self._dropped: set[str] = set()
        self.started_at: float | None = None
        self.seconds: float | None = None

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=self.headers,
            timeout=httpx.Timeout(connect=self.connect_timeout, read=self.timeout, write=self.timeout, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),  # fresh connection per request
            trust_env=False,
            follow_redirects=False,
            transport=self.transport,
        )

    @property
    def target(self) -> dict:
        return {"url": self.label, "model": self.model}

    # -- setup ---------------------------------------------------------------

    async def probe(self, calibrate: bool = True) -> None:
        """Server facts, the model name (first of /v1/models when not given) and chars per token."""
        async with self._client() as client:
            try:
                self.server = await server_info(self.root, headers=self.headers, client=client)
            except Exception:
                self.server = {}
            if not self.model:
                models = self.server.get("models") or []
                if models:
                    self.model = models[0]
                else:
                    self.notes.append("the server lists no model and none was given: requests name no model")
            if calibrate:
                self.chars_per_token = await self._calibrate(client)

    async def _calibrate(self, client: httpx.AsyncClient) -> float | None:
        """Characters per token of the filler text, from the server's /tokenize (llama.cpp), else None."""
        sample = filler_text(CALIBRATION_CHARS, 0)
        try:
            r = await client.post(_with_path(self.root, "/tokenize"), json={"content": sample}, timeout=10.0)
            if r.status_code != 200:
                return None
            toks = r.json().get("tokens")
            if isinstance(toks, list) and len(toks) >= 10:
                return len(sample) / len(toks)
        except Exception:
            return None
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
            except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
                if attempts == 1:
                    continue  # a stale or refused connection: one fresh retry
                return case_result(case, None, latency_s=time.perf_counter() - t0, error=classify(exc),
                                   error_detail=self.scrub(f"{type(exc).__name__}: {exc}"))
            except httpx.HTTPError as exc:
                return case_result(case, None, latency_s=time.perf_counter() - t0, error=classify(exc),
                                   error_detail=self.scrub(f"{type(exc).__name__}: {exc}"))
            if r.status_code == 400 and attempts <= 2:
                text = r.text[:4096]
                bad = [k for k in _OPTIONAL if k in body and k in text]
                if bad:
                    for k in bad:
                        if k not in self._dropped:
                            self._dropped.add(k)
                            self.notes.append(f"the server rejected {k!r}: sent without it")
                    continue
            break
        latency = time.perf_counter() - t0
        if r.status_code != 200:
            cls = "http_429" if r.status_code == 429 else ("http_5xx" if r.status_code >= 500 else "http_4xx")
            return case_result(case, None, latency_s=latency, error=cls,
                               error_detail=self.scrub(f"HTTP {r.status_code}: {r.text[:300]}"))
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
                               error_detail=self.scrub(f"{type(exc).__name__}: {r.text[:200]}"))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return case_result(
            case, self.scrub.redact(answer or ""), latency_s=latency,
            prompt_tokens=pt if isinstance(pt, int) else None,
            completion_tokens=ct if isinstance(ct, int) else None,
            finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        )

    async def run(self, cases: Sequence[Case], progress=None) -> list[dict]:
        """Per-case result rows, in set order."""
        self.started_at = time.time()
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(self.concurrency)
        done = 0

        async with self._client() as client:
            async def go(case: Case) -> dict:
                nonlocal done
                async with sem:
                    row = await self._one(client, case)
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
