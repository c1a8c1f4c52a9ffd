"""``--dataset`` against the real peer (llama-server + Gemma 3 270M, the shared session fixture: 4 slots of 2,048
tokens): the dataset's token counts are the server's own ``/tokenize`` counts, exactly, and the server's context
(``/props`` n_ctx of a slot, read through the probe's facts) skips the conversations too long for it.

Traffic: one probe, the /tokenize calls of a few texts (and of the 60-conversation example), one /tokenize check
and one completion of 1 token. No timing assertion.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

import tui.sources.openai_http as oh
from tui.core.datasets import COUNTS_TOKENIZE
from tui.sources.load.dataset import EXAMPLE_DIR, prepare_dataset, read_dataset

LONG = ("The river bends twice before the old mill, where the water slows and the herons wait on the stones. " * 160)


def rows() -> list[dict]:
    return [
        {"messages": [{"role": "system", "content": "You answer in one short sentence."},
                      {"role": "user", "content": "Why is the sky blue on a clear afternoon?"},
                      {"role": "assistant", "content": "Air scatters blue light more than red light."},
                      {"role": "user", "content": "And why are sunsets red?"}]},
        {"messages": [{"role": "user", "content": LONG + "Summarise this."}]},  # ~3,000 tokens: over 2,048
        {"messages": [{"role": "user", "content": "Name a fruit that is yellow. ✓ café"},
                      {"role": "assistant", "content": "A banana."}]},
        {"messages": [{"role": "system", "content": LONG}, {"role": "user", "content": "What bends?"}]},  # too long
    ]


async def test_tokenize_counts_are_the_servers_and_its_context_skips_the_long_rows(llama_server, tmp_path: Path):
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows()), encoding="utf-8")
    ds = read_dataset(str(path), max_bad_share=0.0)
    said: list[str] = []
    async with httpx.AsyncClient() as client:
        found = await oh.probe(client, llama_server.base_url)
        assert found.server.get("n_ctx_per_slot") == 2048, found.server  # the fixture's -c 8192 over 4 slots
        out = await prepare_dataset(ds, client, llama_server.base_url, tokenize_form=None, max_context=None,
                                    server=found.server, output_tokens_default=16, say=said.append)
        first = out.conversations[0]
        text = first.turns[1].user
        r = await client.post(llama_server.base_url + "/tokenize", json={"content": text})
        server_count = len(r.json()["tokens"])
        # the same text through the completions API: its prompt count is the text's (+ a BOS token at most)
        c = await client.post(llama_server.openai_url + "/completions",
                              json={"prompt": text, "max_tokens": 1, "temperature": 0})
        prompt_tokens = c.json()["usage"]["prompt_tokens"]
    assert out.token_counts == COUNTS_TOKENIZE
    assert first.turns[1].user_tokens == server_count > 3
    assert server_count <= prompt_tokens <= server_count + 1
    assert first.system_tokens is not None and first.turns[0].answer_tokens is not None
    assert out.context_tokens == 2048 and out.context_source == "server /props"
    assert out.skipped_too_long == 2 and [c.row for c in out.conversations] == [1, 3]
    assert "rows 2, 4" in out.note
    block = out.header_block()
    assert block["rows"] == 4 and block["usable"] == 2 and block["bad_rows"] == 0 and block["example"] is False


async def test_the_example_dataset_is_counted_by_the_server(llama_server):
    ds = read_dataset(str(EXAMPLE_DIR / "example-chat.jsonl"), max_bad_share=0.0)
    async with httpx.AsyncClient() as client:
        out = await prepare_dataset(ds, client, llama_server.base_url, tokenize_form="content", max_context=None,
                                    server={}, output_tokens_default=16, say=lambda s: None)
    assert out.token_counts == COUNTS_TOKENIZE and out.example and "SYNTHETIC" in out.note
    assert out.context_source == "server /props"  # asked, as the probe's facts were not given
    assert out.bad_rows == 0 and out.rows == 60 and len(out) + out.skipped_too_long == 60
    assert all(t.user_tokens and t.answer_tokens for c in out.conversations for t in c.turns)
