"""Multi-turn sessions against the real peer (llama-server + Gemma 3 270M, issue 23): each later turn carries the
earlier answers exactly as the server returned them.

A recording transport (the real HTTP transport underneath) keeps every request body and every response's bytes.
Two sessions of three turns at concurrency 1 (max_tokens 12): for each turn k >= 2 the body's messages are the
earlier turns' user messages as sent and, between them, the answer text parsed here from the server's own stream.
The server's prompt count (``input_tokens``) grows turn by turn by at least the previous answer's output tokens, and
the recorded ``context_tokens`` grows with it. No timing assertion.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tui.core.lengths import parse_lengths
from tui.sources.load import LoadConfig, run_load
from tui.sources.sse import SSEParser


class Recording(httpx.AsyncBaseTransport):
    """The real transport, keeping (request body, response bytes) per chat request."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.seen: list[tuple[dict, bytearray]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if not request.url.path.endswith("/chat/completions"):
            return resp
        buf = bytearray()
        self.seen.append((json.loads(request.content), buf))
        inner = resp.stream

        class Tee(httpx.AsyncByteStream):
            async def __aiter__(self):
                async for chunk in inner:  # type: ignore[union-attr]
                    buf.extend(chunk)
                    yield chunk

            async def aclose(self) -> None:
                await inner.aclose()  # type: ignore[union-attr]

        return httpx.Response(resp.status_code, headers=resp.headers, stream=Tee(), extensions=resp.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


def answer_text(raw: bytes) -> str:
    """The content text of a chat stream, parsed here (not by servewatch's interpreter)."""
    out = []
    for ev in SSEParser().feed(bytes(raw)):
        if ev.data == "[DONE]":
            break
        obj = json.loads(ev.data)
        for c in obj.get("choices") or ():
            piece = (c.get("delta") or {}).get("content")
            if piece:
                out.append(piece)
    return "".join(out)


async def test_later_turns_carry_the_answers_the_server_gave(llama_server, tmp_path: Path):
    cfg = LoadConfig(url=llama_server.base_url, levels=[1], requests=2, warmup=0, input_tokens=(16, 16),
                     output_tokens=(12, 12), turns=parse_lengths("3"), metrics=False, gpu=False, progress_interval=0,
                     api_key_env=None, read_timeout=120.0)
    tr = Recording()
    recs: list[dict] = []
    await run_load(cfg, recs.append, transport=tr)
    reqs = [d for d in recs if d.get("type") == "request"]
    assert len(reqs) == 6 and len(tr.seen) == 6
    assert all(r["complete"] for r in reqs), [r.get("error_detail") for r in reqs]
    answers = [answer_text(raw) for _body, raw in tr.seen]
    assert all(answers), answers  # every answer had text to carry
    for i, (r, (body, _raw)) in enumerate(zip(reqs, tr.seen, strict=True)):  # concurrency 1: in order
        k = r["turn"]
        msgs = body["messages"]
        assert body["cache_prompt"] is True
        assert [m["role"] for m in msgs] == ["user", "assistant"] * (k - 1) + ["user"]
        first = i - (k - 1)
        for j in range(k - 1):
            assert msgs[2 * j]["content"] == tr.seen[first + j][0]["messages"][-1]["content"]
            assert msgs[2 * j + 1]["content"] == answers[first + j]  # exactly what the server streamed
        if k > 1:
            prev = reqs[i - 1]
            assert r["session"] == prev["session"]
            assert r["input_tokens"] >= prev["input_tokens"] + prev["output_tokens"]
            assert r["context_tokens"] > prev["context_tokens"]
    assert [r["turn"] for r in reqs] == [1, 2, 3, 1, 2, 3]
    end = [d for d in recs if d.get("type") == "step" and d.get("event") == "end"][0]
    assert end["sessions"] == {"started": 2, "completed": 2, "ended_by_failure": 0, "cut_at_step_end": 0, "cancelled": 0}
