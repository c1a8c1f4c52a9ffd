"""The stream interpreter: the bytes of one streamed OpenAI-style answer in, token events out.

Pure: no I/O, no clock. The caller reads the network, feeds each read to :meth:`StreamInterpreter.feed`
with the time the read returned (its own clock; the interpreter only compares and subtracts them), which
returns how many generated-text events that read completed, calls :meth:`StreamInterpreter.end` at end of
stream, and asks :meth:`StreamInterpreter.outcome` how the stream ended and :meth:`StreamInterpreter.gaps_ms`
for the gaps between tokens. Every token event a read completes arrived at that read's time: the first one's
gap is from the previous token's read, the others' gaps are 0 (the client saw them together). Per request
the interpreter keeps one float per read that carried tokens (no per-token times).

What counts (``tui.sources.sse.SSEParser`` does the framing):

- a *token event* (a chunk) is a chunk carrying non-empty generated text: chat ``delta.content``,
  ``delta.reasoning_content`` or ``delta.reasoning``, completions ``text``; role-only chunks, ``null``
  content, comments and usage-only chunks are not tokens;
- *reasoning*: a chunk's ``reasoning_content`` / ``reasoning`` text (vLLM's reasoning parsers, llama.cpp,
  SGLang), and content (or completions text) inside ``<think>...</think>`` (a tag may be split across
  chunks: a chunk holding only the start of a possible tag is decided when the next text settles it, and
  carries the time it arrived). The tags themselves are reasoning. A chunk carrying any answer text
  (content outside the block) is an *answer* chunk, else a chunk with reasoning text or a tag is a
  *reasoning* chunk. Content before a ``</think>`` with no opening tag is answer (the interpreter does not
  look ahead);
- ``usage`` (``prompt_tokens``, ``completion_tokens``, ``completion_tokens_details.reasoning_tokens``) is
  taken from whichever chunk carries it (the last one wins);
- *cached prompt tokens* (what the server says it served from its prefix cache): llama.cpp's ``timings.cache_n``
  (llama-server puts a ``timings`` object in its usage chunk, or in the finish chunk when no usage is asked for), else
  ``usage.prompt_tokens_details.cached_tokens`` (OpenAI; vLLM with ``--enable-prompt-tokens-details``; SGLang;
  llama-server sends it too, the same figure). Read only from a chunk carrying ``usage`` or a ``finish_reason``
  (once per stream, never per token); the last chunk saying wins; a value that is not a whole number >= 0, or a
  field of the wrong type, says nothing (never an error);
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tui.sources.sse import SSEParser

COMPLETE_FINISH = ("stop", "length")


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


#: ``cached_tokens_source`` values (docs/record-format.md)
CACHED_USAGE = "usage.prompt_tokens_details"
CACHED_LLAMA = "llama.cpp timings.cache_n"


def _count_or_none(v: Any) -> int | None:
    """A whole number >= 0 (an int, or a float with no fraction), else None: never raises."""
    t = type(v)
    if t is int:
        return v if v >= 0 else None
    if t is float and math.isfinite(v) and v >= 0 and v == int(v):
        return int(v)
    return None


def cached_from(obj: dict, usage: Any) -> tuple[int, str] | None:
    """(cached prompt tokens, source) that one chunk states, or None (see the module docstring). Never raises."""
    tm = obj.get("timings")
    if type(tm) is dict:
        n = _count_or_none(tm.get("cache_n"))
        if n is not None:
            return n, CACHED_LLAMA
    if type(usage) is dict:
        det = usage.get("prompt_tokens_details")
        if type(det) is dict:
            n = _count_or_none(det.get("cached_tokens"))
            if n is not None:
                return n, CACHED_USAGE
    return None


_OPEN, _CLOSE = "<think>", "</think>"
ANSWER, REASONING, UNDECIDED = 1, 2, 4  # what one chunk's text was (bits)


def _partial(s: str, tag: str, start: int) -> int:
    """Length of the longest suffix of ``s[start:]`` that is a proper prefix of ``tag`` (which has one ``<``)."""
    j = s.rfind("<", start)
    if j < 0 or len(s) - j >= len(tag):
        return 0
    return len(s) - j if tag.startswith(s[j:]) else 0


class StreamInterpreter:
    """One stream's state. ``feed(bytes, t) -> tokens in this read``; ``end(t)``; ``outcome()``."""

    __slots__ = ("cached", "chat", "done", "eof", "error", "finish", "gaps", "in_tok", "out_tok", "parser",
                 "reason_tok", "reasoning", "rtexts", "t_first", "t_first_answer", "texts", "t_first_reasoning", "t_last",
                 "tail",
                 "tail_t",
                 "tail_owner", "think", "tokens", "undecided", "usage_server", "zero_gaps")

    def __init__(self, chat: bool = True, keep_text: bool = False) -> None:
        self.chat = chat
        self.texts: list[str] | None = [] if keep_text else None  # keep_text: the content pieces, in order (sessions)
        self.rtexts: list[str] | None = [] if keep_text else None  # ... and the reasoning pieces (--tokenizer counts)
        self.parser = SSEParser()
        self.tokens = 0  # token events (chunks) so far
        self.reasoning = 0  # of which reasoning chunks (no answer text)
        self.finish: str | None = None
        self.done = False  # [DONE] seen
        self.eof = False  # end() called
        self.error: tuple[str, str] | None = None  # (error class, detail) of an error seen in the stream
        self.in_tok: int | None = None  # usage.prompt_tokens
        self.out_tok: int | None = None  # usage.completion_tokens
        self.reason_tok: int | None = None  # usage.completion_tokens_details.reasoning_tokens
        self.usage_server = False  # the server sent a usage object
        self.cached: tuple[int, str] | None = None  # (cached prompt tokens, source) when the server said
        self.t_first: float | None = None  # the read that completed the first token event (any kind)
        self.t_last: float | None = None  # ... the last one
        self.t_first_answer: float | None = None
        self.t_first_reasoning: float | None = None
        self.gaps: list[float] = []  # per read with tokens after the first: the gap to the previous token
        self.zero_gaps = 0  # the other tokens of those reads (gap 0)
        self.think = False  # inside <think>...</think>
        self.tail = ""  # text that may be the start of the tag looked for (held until the next text settles it)
        self.tail_t = 0.0  # when the chunk holding the tail's first character arrived
        self.tail_owner = 0  # what the rest of the chunk holding the tail's first character was (kind bits)
        self.undecided = 0  # later chunks whose only text is the tail (outside a block: answer or tag, not known yet)

    @property
    def text(self) -> str | None:
        """The answer text as the server sent it (content, or completions text; None unless ``keep_text``)."""
        return None if self.texts is None else "".join(self.texts)

    @property
    def stopped(self) -> bool:
        """Nothing more to read: [DONE], an error, or the end of the stream."""
        return self.done or self.error is not None or self.eof

    def feed(self, chunk: bytes, t: float = 0.0) -> int:
        """Interpret one network read (returned at ``t``); returns the number of token events it completed."""
        if self.done or self.error is not None:
            return 0
        return self._events(self.parser.feed(chunk), t)

    def end(self, t: float = 0.0) -> int:
        """End of stream (the connection closed at ``t``): interpret what the framing still holds."""
        if self.eof:
            return 0
        self.eof = True
        if self.done or self.error is not None:
            return 0
        return self._events(self.parser.finish(), t)

    def settle(self) -> None:
        """No more text will come: a held tail outside a block was answer text."""
        if self.tail and not self.think:
            self._tail_was_text()
        self.tail = ""

    def _tail_was_text(self) -> None:
        """A held tail outside a block turned out to be answer text: its chunks are answer chunks."""
        if self.tail_owner == REASONING:
            self.reasoning -= 1  # it had been counted as a reasoning chunk
        if self.t_first_answer is None:
            self.t_first_answer = self.tail_t
        self.undecided = 0

    def gaps_ms(self) -> tuple[float, float, float] | None:
        """(largest, P50, P95) of the gaps between consecutive tokens (ms, nearest rank), None with < 2 tokens."""
        z = self.zero_gaps
        n = len(self.gaps) + z
        if n == 0:
            return None
        g = sorted(self.gaps)

        def rank(q: float) -> float:
            k = max(1, math.ceil(q * n - 1e-12))
            return 0.0 if k <= z else g[k - z - 1]

        top = g[-1] if g else 0.0
        return round(top * 1e3, 3), round(rank(0.5) * 1e3, 3), round(rank(0.95) * 1e3, 3)

    def _content(self, text: str, t: float, kind: int) -> int:
        """Classify one chunk's content (or completions text) against ``<think>`` blocks: ANSWER / REASONING bits
        (added to ``kind``, what the chunk's other fields were), or UNDECIDED when all of it is held as a possible
        tag start."""
        tail = self.tail
        lt = len(tail)
        s = tail + text if lt else text
        outside0 = not self.think
        think = self.think
        pos = 0
        tail_tag: bool | None = None  # how a held tail was settled: True a tag, False literal text, None not yet
        while True:
            tag = _CLOSE if think else _OPEN
            i = s.find(tag, pos)
            if i < 0:
                k = _partial(s, tag, pos)
                lit_end = len(s) - k
                if lit_end > pos:  # literal text on the current side
                    if lit_end > lt:
                        kind |= REASONING if think else ANSWER
                    if pos < lt:
                        tail_tag = False
                if k and think:
                    kind |= REASONING  # inside a block a held "</th" is reasoning either way
                tail_start = lit_end
                break
            if i > pos:  # literal text before the tag
                if i > lt:
                    kind |= REASONING if think else ANSWER
                if pos < lt:
                    tail_tag = False
            elif i < lt:  # the tag starts in the held tail
                tail_tag = True
            if i + len(tag) > lt:
                kind |= REASONING  # the tag's characters in this chunk
            pos = i + len(tag)
            think = not think
        if lt and outside0 and tail_tag is not None:
            if tail_tag:
                self.reasoning += self.undecided
                if self.t_first_reasoning is None:
                    self.t_first_reasoning = self.tail_t
                self.undecided = 0
            else:
                self._tail_was_text()
        new_tail = s[tail_start:]
        if not kind and not think and new_tail:
            kind = UNDECIDED
        if new_tail and tail_start >= lt:  # a new tail starts in this chunk (else it still holds the old one whole)
            self.tail_t = t
            self.tail_owner = kind & (ANSWER | REASONING)
        self.tail = new_tail
        self.think = think
        return kind

    def _events(self, events: Any, t: float) -> int:
        n = 0
        loads = json.loads
        chat = self.chat
        finish = self.finish
        texts = self.texts
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
                        if delta:
                            text = delta.get("content")
                            rtext = delta.get("reasoning_content") or delta.get("reasoning")
                        else:
                            text = rtext = None
                    else:
                        text = c0.get("text")
                        rtext = None
                    if text or rtext:
                        n += 1
                        if texts is not None:
                            if type(text) is str:
                                texts.append(text)
                            if type(rtext) is str and self.rtexts is not None:
                                self.rtexts.append(rtext)
                        if not text:
                            kind = REASONING
                        elif type(text) is str and (self.tail or "<" in text):
                            kind = self._content(text, t, REASONING if rtext else 0)
                        else:
                            kind = REASONING if self.think else ANSWER
                            if rtext:
                                kind |= REASONING
                        if kind & ANSWER:
                            if self.t_first_answer is None:
                                self.t_first_answer = t
                        elif kind & REASONING:
                            self.reasoning += 1
                        else:  # UNDECIDED
                            self.undecided += 1
                        if kind & REASONING and self.t_first_reasoning is None:
                            self.t_first_reasoning = t
                    fr = c0.get("finish_reason")
                    if fr:
                        finish = fr
                        if "timings" in obj:  # llama-server without a usage chunk: its timings ride here
                            self.cached = cached_from(obj, None) or self.cached
                usage = obj.get("usage")
                if usage:
                    self.in_tok = _int_or_none(usage.get("prompt_tokens"))
                    self.out_tok = _int_or_none(usage.get("completion_tokens"))
                    det = usage.get("completion_tokens_details")
                    self.reason_tok = _int_or_none(det.get("reasoning_tokens")) if isinstance(det, dict) else None
                    self.usage_server = True
                    self.cached = cached_from(obj, usage) or self.cached
        finally:
            if n:
                last = self.t_last
                if last is None:
                    self.t_first = t
                else:
                    self.gaps.append(t - last)
                self.zero_gaps += n - 1
                self.t_last = t
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


def stream_fields(it: StreamInterpreter) -> dict[str, Any]:
    """The request record's fields from one interpreted stream (times in the caller's clock; a key only where the
    value is known): ``t_first_reasoning``, ``t_first_answer`` (only when reasoning was seen: without reasoning the
    first answer token is ``t_first_token``), ``t_last_token``, ``output_chunks``, ``reasoning_chunks``,
    ``usage_output_tokens`` / ``usage_input_tokens`` / ``usage_reasoning_tokens`` (the server's usage, when
    sent), ``cached_tokens`` / ``cached_tokens_source`` (prompt tokens the server says it served from its prefix
    cache, when it said), ``itl_max_ms`` / ``itl_p50_ms`` / ``itl_p95_ms`` (with 2 tokens or more). Call after
    :meth:`StreamInterpreter.settle`."""
    d: dict[str, Any] = {"output_chunks": it.tokens, "reasoning_chunks": it.reasoning}
    if it.t_first_reasoning is not None:
        d["t_first_reasoning"] = it.t_first_reasoning
        if it.t_first_answer is not None:
            d["t_first_answer"] = it.t_first_answer
    if it.t_last is not None:
        d["t_last_token"] = it.t_last
    if it.usage_server:
        if it.out_tok is not None:
            d["usage_output_tokens"] = it.out_tok
        if it.in_tok is not None:
            d["usage_input_tokens"] = it.in_tok
        if it.reason_tok is not None:
            d["usage_reasoning_tokens"] = it.reason_tok
    if it.cached is not None:
        d["cached_tokens"], d["cached_tokens_source"] = it.cached
    g = it.gaps_ms()
    if g is not None:
        d["itl_max_ms"], d["itl_p50_ms"], d["itl_p95_ms"] = g
    return d


@dataclass(frozen=True)
class Interpretation:
    """A whole stream interpreted at once (tests, replaying a captured body)."""

    token_events: list[int]  # token events completed by each read (the last entry: end of stream)
    tokens: int
    finish: str | None
    done: bool
    usage: tuple[int | None, int | None] | None  # (prompt_tokens, completion_tokens) when the server sent usage
    outcome: tuple[str, str] | None
    fields: dict[str, Any]  # :func:`stream_fields`


def interpret(chunks: Iterable[bytes], chat: bool = True, times: Sequence[float] | None = None) -> Interpretation:
    """Feed every read, stopping where a reader would ([DONE] or an error), then end the stream. ``times``: when
    each read returned (default: the read's index); the end of stream comes at the last read's time."""
    it = StreamInterpreter(chat)
    per: list[int] = []
    t = 0.0
    for i, c in enumerate(chunks):
        t = float(times[i]) if times is not None else float(i)
        per.append(it.feed(c, t))
        if it.stopped:
            break
    per.append(it.end(t))
    it.settle()
    usage = (it.in_tok, it.out_tok) if it.usage_server else None
    return Interpretation(per, it.tokens, it.finish, it.done, usage, it.outcome(), stream_fields(it))
