"""The stream interpreter on vLLM 0.32's own bytes (captured from the real server, SmolLM2-135M, CPU build).

vLLM's chat stream opens with a role-only chunk whose content is the empty string (not null), carries extra keys
(``prompt_token_ids``, ``token_ids``: null), and, asked for usage, ends with a chunk whose ``choices`` is an empty
list; its completions stream carries ``choices[0].text``. Each read below is one captured event (as the server
sent them, one per read, times 0, 1, 2, ...): the role chunk is no token and sets no first-token time, the usage
comes from the empty-choices chunk, and the stream is complete.
"""

from __future__ import annotations

from tui.sources.load.stream import interpret

_HEAD = '"id":"chatcmpl-a7e5deb76596319d","object":"chat.completion.chunk","created":1796177518,"model":"smollm2-135m"'
CHAT = [
    'data: {' + _HEAD + ',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
    '"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}\n\n',
    'data: {' + _HEAD + ',"choices":[{"index":0,"delta":{"content":"m"},"logprobs":null,"finish_reason":null,'
    '"token_ids":null}]}\n\n',
    'data: {' + _HEAD + ',"choices":[{"index":0,"delta":{"content":"akes"},"logprobs":null,"finish_reason":null,'
    '"token_ids":null}]}\n\n',
    'data: {' + _HEAD + ',"choices":[{"index":0,"delta":{"content":" everything"},"logprobs":null,'
    '"finish_reason":null,"token_ids":null}]}\n\n',
    'data: {' + _HEAD + ',"choices":[{"index":0,"delta":{"content":" from"},"logprobs":null,"finish_reason":"length",'
    '"stop_reason":null,"token_ids":null}]}\n\n',
    'data: {' + _HEAD + ',"choices":[],"usage":{"prompt_tokens":31,"total_tokens":35,"completion_tokens":4},'
    '"system_fingerprint":"vllm-0.32.0-862fa768"}\n\n',
    'data: [DONE]\n\n',
]

_CHEAD = '"id":"cmpl-b36e6b05037ae0f5","object":"text_completion","created":1796177518,"model":"smollm2-135m"'
COMPLETIONS = [
    'data: {' + _CHEAD + ',"choices":[{"index":0,"text":" of","logprobs":null,"finish_reason":null,'
    '"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n',
    'data: {' + _CHEAD + ',"choices":[{"index":0,"text":" $","logprobs":null,"finish_reason":null,'
    '"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n',
    'data: {' + _CHEAD + ',"choices":[{"index":0,"text":"eq","logprobs":null,"finish_reason":"length",'
    '"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n',
    'data: {' + _CHEAD + ',"choices":[],"usage":{"prompt_tokens":1,"total_tokens":4,"completion_tokens":3},'
    '"system_fingerprint":"vllm-0.32.0-862fa768"}\n\n',
    'data: [DONE]\n\n',
]


def test_vllm_chat_stream_role_chunk_is_no_token_and_usage_comes_from_the_empty_choices_chunk():
    it = interpret([c.encode() for c in CHAT], chat=True)
    assert it.token_events == [0, 1, 1, 1, 1, 0, 0, 0]  # the role chunk (content "") and the usage chunk: none
    assert it.tokens == 4 and it.finish == "length" and it.done and it.outcome is None
    assert it.usage == (31, 4)
    f = it.fields
    assert f["usage_output_tokens"] == 4 and f["usage_input_tokens"] == 31 and f["output_chunks"] == 4
    assert f["t_last_token"] == 4.0 and f["reasoning_chunks"] == 0  # the last content chunk, not the usage one
    assert f["itl_max_ms"] == 1000.0  # gaps between the content chunks only (reads 1..4, 1 s apart)


def test_vllm_completions_stream_text_tokens_and_usage():
    it = interpret([c.encode() for c in COMPLETIONS], chat=False)
    assert it.token_events == [1, 1, 1, 0, 0, 0]
    assert it.tokens == 3 and it.finish == "length" and it.outcome is None and it.usage == (1, 3)
    assert it.fields["t_last_token"] == 2.0


def test_vllm_chat_stream_read_as_completions_finds_no_text():
    """The endpoint decides the field read: a chat stream interpreted as completions has no ``text``, so it is
    an empty response (never tokens counted from the wrong field)."""
    it = interpret([c.encode() for c in CHAT], chat=False)
    assert it.tokens == 0 and it.outcome is not None and it.outcome[0] == "empty_response"
