"""The stream interpreter: the bytes of one streamed OpenAI-style answer in, token events out.

Pure: no I/O, no clock. The caller reads the network, feeds each read to :meth:`StreamInterpreter.feed`
(which returns how many generated-text events that read completed; the caller stamps them with
its own clock), calls :meth:`StreamInterpreter.end` at end of stream, and asks
:meth:`StreamInterpreter.outcome` how the stream ended.

What counts (``tui.sources.sse.SSEParser`` does the framing):

- a *token event* is a chunk carrying non-empty generated text: chat ``delta.content`` or
  ``delta.reasoning_content``, completions ``text``; role-only chunks, ``null`` content, comments
  and usage-only chunks are not tokens;
- ``usage`` (``prompt_tokens``, ``completion_tokens``) is taken from whichever chunk carries it;
- the last non-empty ``finish_reason`` wins;
- ``data: [DONE]`` ends the stream (events after it are ignored);
- an error object (``{"error": ...}``) or an ``event: error`` ends it as ``stream_error``; a data
  line that is not a JSON object ends it as ``malformed_stream``;
- at the end: no token -> ``empty_response``; ``stop``/``length`` -> complete; no finish reason
  -> ``malformed_stream`` after ``[DONE]``, ``stream_reset`` at a bare end of stream; any other
  finish reason -> ``stream_error``.

A chunk whose fields have the wrong type (``usage`` or ``delta`` not an object) raises
``AttributeError``/``TypeError``; the load generator records such a request as error ``other``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tui.sources.sse import SSEParser

COMPLETE_FINISH = ("stop", "length")


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


class StreamInterpreter:
    """One stream's state. ``feed(bytes) -> tokens in this read``; ``end()``; ``outcome()``."""

    __slots__ = ("chat", "done", "eof", "error", "finish", "in_tok", "out_tok", "parser", "tokens", "usage_server")

    def __init__(self, chat: bool = True) -> None:
        self.chat = chat
        self.parser = SSEParser()
        self.tokens = 0  # token events so far
        self.finish: str | None = None
        self.done = False  # [DONE] seen
        self.eof = False  # end() called
        self.error: tuple[str, str] | None = None  # (error class, detail) of an error seen in the stream
        self.in_tok: int | None = None  # usage.prompt_tokens
        self.out_tok: int | None = None  # usage.completion_tokens
        self.usage_server = False  # the server sent a usage object

    @property
    def stopped(self) -> bool:
        """Nothing more to read: [DONE], an error, or the end of the stream."""
        return self.done or self.error is not None or self.eof

    def feed(self, chunk: bytes) -> int:
        """Interpret one network read; returns the number of token events it completed."""
        if self.done or self.error is not None:
            return 0
        return self._events(self.parser.feed(chunk))

    def end(self) -> int:
        """End of stream (the connection closed): interpret what the framing still holds."""
        if self.eof:
            return 0
        self.eof = True
        if self.done or self.error is not None:
            return 0
        return self._events(self.parser.finish())

    def _events(self, events: Any) -> int:
        n = 0
        loads = json.loads
        chat = self.chat
        finish = self.finish
        try:
            for ev in events:
                data = ev.data
                if data == "[DONE]":
                    self.done = True
                    break
                try:
                    obj = loads(data)
                except ValueError:
                    if ev.event == "error":
                        self.error = ("stream_error", f"error event in stream: {data}")
                    else:
                        self.error = ("malformed_stream", f"invalid JSON in data line: {data[:60]}")
                    break
                if type(obj) is not dict:
                    self.error = ("malformed_stream", f"data line is not a JSON object: {data[:60]}")
                    break
                err = obj.get("error")
                if err is not None or ev.event == "error":
                    if isinstance(err, dict):
                        err = err.get("message") or err
                    self.error = ("stream_error", f"error in stream: {err if err is not None else data}")
                    break
                choices = obj.get("choices")
                if choices:
                    c0 = choices[0]
                    if chat:
                        delta = c0.get("delta")
                        text = (delta.get("content") or delta.get("reasoning_content")) if delta else None
                    else:
                        text = c0.get("text")
                    if text:
                        n += 1
                    fr = c0.get("finish_reason")
                    if fr:
                        finish = fr
                usage = obj.get("usage")
                if usage:
                    self.in_tok = _int_or_none(usage.get("prompt_tokens"))
                    self.out_tok = _int_or_none(usage.get("completion_tokens"))
                    self.usage_server = True
        finally:
            self.tokens += n
            self.finish = finish
        return n

    def outcome(self) -> tuple[str, str] | None:
        """How the stream ended: None when complete, else (error class, detail)."""
        if self.error is not None:
            return self.error
        n, finish = self.tokens, self.finish
        if n == 0:
            what = "[DONE]" if self.done else "end of stream"
            fr = f", finish_reason {finish}" if finish else ""
            return ("empty_response", f"{what} with no generated text{fr}")
        if finish in COMPLETE_FINISH:
            return None
        if finish is None:
            if self.done:
                return ("malformed_stream", "[DONE] without a finish_reason")
            return ("stream_reset", "stream ended before a finish_reason")
        return ("stream_error", f"finish_reason {finish}")


@dataclass(frozen=True)
class Interpretation:
    """A whole stream interpreted at once (tests, replaying a captured body)."""

    token_events: list[int]  # token events completed by each read (the last entry: end of stream)
    tokens: int
    finish: str | None
    done: bool
    usage: tuple[int | None, int | None] | None  # (prompt_tokens, completion_tokens) when the server sent usage
    outcome: tuple[str, str] | None


def interpret(chunks: Iterable[bytes], chat: bool = True) -> Interpretation:
    """Feed every read, stopping where a reader would ([DONE] or an error), then end the stream."""
    it = StreamInterpreter(chat)
    per: list[int] = []
    for c in chunks:
        per.append(it.feed(c))
        if it.stopped:
            break
    per.append(it.end())
    usage = (it.in_tok, it.out_tok) if it.usage_server else None
    return Interpretation(per, it.tokens, it.finish, it.done, usage, it.outcome())
