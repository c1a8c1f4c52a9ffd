"""The prompt builder's /tokenize calibration speaks both servers' bodies (tui/sources/load/prompts.py).

llama.cpp takes ``{"content": text}``; vLLM 0.32 answers that with HTTP 400 (it wants ``{"prompt": text}``), which
left prompt lengths estimated at ~4 characters per token against a vLLM that can count them. In-test servers
(httpx.MockTransport) with each behaviour: the builder measures with whichever body the server answers, keeps it
for the later calls, and says which it used; a server answering neither keeps the estimate, saying so.
"""

from __future__ import annotations

import json

import httpx

from tui.sources.load.prompts import PromptBuilder, prompt_prefix


def _server(accepts: set[str], seen: list[dict]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        key = "content" if "content" in body else "prompt"
        if request.url.path != "/tokenize" or key not in accepts:
            return httpx.Response(400, json={"error": {"message": "Field required: prompt"}})
        if key == "prompt":
            assert body["add_special_tokens"] is False  # the prompt text's own tokens, as llama.cpp counts them
        return httpx.Response(200, json={"tokens": list(range(len(body[key].split())))})  # one token per word

    return httpx.MockTransport(handler)


async def _calibrated(accepts: set[str]) -> tuple[PromptBuilder, list[dict]]:
    seen: list[dict] = []
    b = PromptBuilder()
    async with httpx.AsyncClient(transport=_server(accepts, seen), base_url="http://127.0.0.1:1") as client:
        await b.calibrate(client, "http://127.0.0.1:1", prompt_prefix("00000000-000000"), [16, 64])
    return b, seen


async def test_vllm_body_used_when_the_llama_body_is_refused():
    b, seen = await _calibrated({"prompt"})
    assert b.method == "tokenize" and b.tokenize_form == "prompt"
    assert b.tokens_per_word == 1.0 and b.check == {"asked": 64, "got": 64}
    # refused once, then the vLLM body only: 3 counts, 4 calls
    assert ["content" in s for s in seen] == [True, False, False, False]
    assert b.describe()["tokenize_body"] == "prompt"


async def test_llama_body_kept_when_answered():
    b, seen = await _calibrated({"content"})
    assert b.method == "tokenize" and b.tokenize_form == "content"
    assert len(seen) == 3 and all("content" in s for s in seen)


async def test_neither_body_keeps_the_estimate():
    b, seen = await _calibrated(set())
    assert b.method == "estimate" and b.tokenize_form is None and "no usable /tokenize" in b.note
    assert len(seen) == 2  # each body tried once
