"""One request, start to end: the HTTP side of the load generator (through ``tui.sources.openai_http``).

:class:`RequestExecutor` holds what sending needs and nothing of a run's bookkeeping (no step, no
monitor, no record file): the client, the endpoint, the optional fields still sent, the scrubber.
It fills a :class:`Req` (perf_counter stamps, status, error class, tokens) and never emits; the
caller turns a finished ``Req`` into a record (:func:`request_record`). This is the piece a worker
process can run with its own event loop and client.

Timing: ``t_sent`` is when the request headers started to be written (the
``http11.send_request_headers.started`` trace event; connection setup is before it); a failure
before any request byte was written is retried (at most :data:`MAX_RETRIES`) and counted in
``retried``; from ``http11.send_request_headers.complete`` on a request is never re-sent.

Requests are marked :data:`tui.sources.lean_http.LEAN`: with the client from
``tui.sources.openai_http.make_client`` they go over the lean HTTP/1.1 path (same trace events,
exceptions and framing as httpx's standard transport, a fraction of its CPU per request); with any
other transport (tests' mocks) the mark is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from time import perf_counter
from typing import Any

import httpx

import tui.sources.openai_http as oh
from tui.core.redact import Scrubber
from tui.sources.lean_http import LEAN
from tui.sources.load.stream import StreamInterpreter, stream_fields

_json_str = json.encoder.encode_basestring_ascii  # what json.dumps uses for a str (ensure_ascii)

MAX_RETRIES = 2  # re-sends of a request that failed before any byte was written
OPTIONAL_FIELDS = ("stream_options", "cache_prompt")  # dropped (and remembered) when a server rejects them
ERROR_BODY_LIMIT = 4096


class TurnInfo:
    """What a request of a shaped workload (issue 23) sends beside its own prompt and adds to its record: the
    system prompt (a shared prefix, a dataset's system message), the conversation so far (sessions: each earlier
    user message with the answer the server returned), and the record fields (``session``, ``turn``,
    ``turns_planned``, ``context_tokens``, ``think_s``, ``prefix_group``, ``dataset_row``). ``keep``: keep the
    answer text (a session's next turn needs it). A plain request has none (``Req.turn is None``)."""

    __slots__ = ("fields", "history", "keep", "system", "turns_left")

    def __init__(self, system: str | None, history: list[tuple[str, str]] | None, fields: dict[str, Any],
                 keep: bool = False, turns_left: int = 0) -> None:
        self.system = system
        self.history = history
        self.fields = fields
        self.keep = keep
        self.turns_left = turns_left  # turns of its session after this one (dropped when this one fails)


class Req:
    """One request's state (times: perf_counter seconds)."""

    __slots__ = (
        "answer",
        "detail",
        "done",
        "error",
        "fields",
        "finish",
        "id",
        "in_asked",
        "in_tok",
        "level",
        "n_content",
        "offsets",
        "out_asked",
        "out_tok",
        "phase",
        "prompt",
        "retried",
        "round",
        "status",
        "step",
        "t_dispatch",
        "t_end",
        "t_first",
        "t_headers",
        "t_intended",
        "t_sent",
        "turn",
        "usage_server",
        "wrote",
    )

    def __init__(self, rid: str, phase: str, level: float, rnd: int, step: Any, in_asked: int,
                 out_asked: int, prompt: str, t_intended: float) -> None:
        self.id = rid
        self.phase = phase
        self.level = level
        self.round = rnd
        self.step = step
        self.in_asked = in_asked
        self.out_asked = out_asked
        self.prompt = prompt
        self.t_intended = t_intended  # perf_counter
        self.t_dispatch = t_intended
        self.t_sent: float | None = None
        self.t_headers: float | None = None
        self.t_first: float | None = None
        self.t_end: float | None = None
        self.status: int | None = None
        self.error: str | None = None
        self.detail: str | None = None
        self.finish: str | None = None
        self.in_tok: int | None = None
        self.out_tok: int | None = None
        self.n_content = 0
        self.retried = 0
        self.done = False
        self.wrote = False
        self.offsets: list[float] | None = None
        self.usage_server = False
        self.fields: dict[str, Any] | None = None  # tui.sources.load.stream.stream_fields of its stream, once read
        self.turn: TurnInfo | None = None  # a shaped workload's system prompt, history and record fields
        self.answer: str | None = None  # the answer text, kept when turn.keep


_STREAM_TIMES = ("t_first_reasoning", "t_first_answer", "t_last_token")


def request_record(req: Req, epoch: Callable[[float], float]) -> tuple[dict, float, float | None, int]:
    """The ``request`` record of a finished request, and for the step: (record, lateness s, TTFT s or
    None, output tokens). ``epoch`` turns a perf_counter stamp into epoch seconds."""
    assert req.t_end is not None and req.t_sent is not None
    t_end = max(req.t_end, req.t_sent)
    t_first = req.t_first
    if t_first is not None and not (req.t_sent <= t_first <= t_end):
        t_first = None
    ep = epoch
    complete = req.error is None
    out_tok = req.out_tok
    counted = False
    if (out_tok is None or not req.usage_server) and req.n_content:
        out_tok = req.n_content
        counted = True
    d: dict[str, Any] = {
        "type": "request",
        "id": req.id,
        "t_intended": ep(req.t_intended),
        "t_sent": ep(req.t_sent),
        "t_first_token": ep(t_first) if t_first is not None else None,
        "t_end": ep(t_end),
        "input_tokens": req.in_tok,
        "output_tokens": out_tok,
        "finish_reason": req.finish,
        "http_status": req.status,
        "complete": complete,
        "error": req.error,
        "error_detail": req.detail,
        "phase": req.phase,
        "level": req.level,
        "round": req.round,
        "input_tokens_asked": req.in_asked,
        "output_tokens_asked": req.out_asked,
        "cached_tokens": None,  # the server's prefix-cache count (stream_fields replaces it when the server said)
    }
    if req.t_headers is not None and req.t_sent <= req.t_headers <= t_end:
        d["t_headers"] = ep(req.t_headers)  # response headers received (queueing shows here, not as TTFT)
    if req.retried:
        d["retried"] = req.retried
    if counted:
        d["usage"] = "counted"  # the server reported no usage: content events were counted
    fields = req.fields
    if fields:
        for k, v in fields.items():
            if k in _STREAM_TIMES:
                if req.t_sent <= v <= t_end:
                    d[k] = ep(v)
            else:
                d[k] = v
    turn = req.turn
    if turn is not None:
        d.update(turn.fields)
        if not complete:
            d["turns_not_sent"] = turn.turns_left
    if req.offsets is not None and t_first is not None:
        d["token_offsets"] = [round(x - t_first, 6) for x in req.offsets]
    ttft = t_first - req.t_sent if t_first is not None else None
    return d, req.t_sent - req.t_intended, ttft, out_tok or 0


def chat_messages(turn: TurnInfo, user: str) -> list[dict[str, str]]:
    """A turn's chat messages: the system prompt, each earlier user message and the answer the server gave, then
    this turn's user message."""
    msgs = [{"role": "system", "content": turn.system}] if turn.system is not None else []
    for u, a in turn.history or ():
        msgs.append({"role": "user", "content": u})
        msgs.append({"role": "assistant", "content": a})
    msgs.append({"role": "user", "content": user})
    return msgs


def completion_text(turn: TurnInfo, user: str) -> str:
    """A turn's completions prompt: the same parts as :func:`chat_messages`, joined by blank lines."""
    parts = [turn.system] if turn.system is not None else []
    for u, a in turn.history or ():
        parts += [u, a]
    parts.append(user)
    return "\n\n".join(parts)


class RequestExecutor:
    """Sends requests on one client and interprets their streams."""

    def __init__(self, client: httpx.AsyncClient, endpoint: str, query: str, *, chat: bool, model: str | None,
                 ignore_eos: bool, read_timeout: float, token_offsets: bool, scrub: Scrubber,
                 say: Callable[[str], Any], cache_prompt: bool = False) -> None:
        self.client = client
        self.endpoint = endpoint
        self.query = query
        self.chat = chat
        self.model = model
        self.ignore_eos = ignore_eos
        self.read_timeout = read_timeout
        self.token_offsets = token_offsets
        self.scrub = scrub
        self.say = say
        self.cache_prompt = cache_prompt  # the value sent (true: shared prefixes or sessions), until rejected
        self.dropped: set[str] = set()  # optional fields the server rejected
        self._url = httpx.URL(endpoint)  # parsed once (httpx re-parses a str URL on every request)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                         "Accept-Encoding": "identity"}
        self._tpl_key: tuple | None = None
        self._tpl: tuple[str, str, str] = ("", "", "")

    def body(self, req: Req) -> bytes:
        """The request body: byte for byte what :meth:`body_reference` gives, from a template of the parts that
        do not change between requests (rebuilt when the model or the dropped fields change)."""
        if req.turn is not None:
            return self.body_reference(req)
        key = (self.model, self.chat, self.ignore_eos, "stream_options" in self.dropped, "cache_prompt" in self.dropped,
               self.cache_prompt)
        if key != self._tpl_key:
            self._tpl = self._template()
            self._tpl_key = key
        pre, mid, post = self._tpl
        n = req.out_asked
        return (pre + _json_str(req.prompt) + mid + (str(n) if type(n) is int else json.dumps(n)) + post).encode()

    def _template(self) -> tuple[str, str, str]:
        marker_p, marker_n = "\x00prompt\x00", "\x00max\x00"
        probe = Req("", "measure", 0.0, 0, None, 0, 0, marker_p, 0.0)
        probe.out_asked = marker_n  # type: ignore[assignment]
        text = self.body_reference(probe).decode()
        jp, jn = json.dumps(marker_p), json.dumps(marker_n)
        i = text.index(jp)
        j = text.index(jn, i + len(jp))
        return text[:i], text[i + len(jp):j], text[j + len(jn):]

    def body_reference(self, req: Req) -> bytes:
        body: dict[str, Any] = {}
        if self.model:
            body["model"] = self.model
        turn = req.turn
        if turn is None:
            if self.chat:
                body["messages"] = [{"role": "user", "content": req.prompt}]
            else:
                body["prompt"] = req.prompt
        elif self.chat:
            body["messages"] = chat_messages(turn, req.prompt)
        else:
            body["prompt"] = completion_text(turn, req.prompt)
        body["max_tokens"] = req.out_asked
        body["stream"] = True
        if "stream_options" not in self.dropped:
            body["stream_options"] = {"include_usage": True}
        if "cache_prompt" not in self.dropped:
            body["cache_prompt"] = self.cache_prompt
        if self.ignore_eos:
            body["ignore_eos"] = True
        return json.dumps(body, separators=(",", ":")).encode()

    async def execute(self, req: Req) -> None:
        """Send ``req`` (re-sending only while no byte was written) and read its stream to the end."""
        client = self.client
        pc = perf_counter
        params = self.query or None
        while True:
            req.t_dispatch = pc()
            req.t_sent = None
            req.t_headers = None
            req.wrote = False

            async def trace(name: str, info: dict, _r: Req = req) -> None:
                if name == "http11.send_request_headers.started":
                    _r.t_sent = pc()
                elif name == "http11.send_request_headers.complete":
                    _r.wrote = True  # the request is on the wire: from here on never re-send
                elif name == "http11.receive_response_headers.complete":
                    _r.t_headers = pc()

            request = client.build_request(
                "POST", self._url, content=self.body(req), headers=self._headers,
                extensions={"trace": trace, LEAN: True}, params=params,
            )
            try:
                resp = await client.send(request, stream=True)
            except httpx.ConnectTimeout:
                return self.fail(req, "connect_timeout", "connect timed out")
            except httpx.ConnectError as exc:
                return self.fail(req, "connect", self._exc_detail(exc), exc, connecting=True)
            except httpx.ReadTimeout:
                return self.fail(req, "read_timeout", f"no response within {self.read_timeout:g} s")
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                if not req.wrote and req.retried < MAX_RETRIES:
                    req.retried += 1
                    continue
                return self.fail(req, "stream_reset", "connection dropped before the response: " + self._exc_detail(exc),
                                 exc)
            except httpx.HTTPError as exc:
                return self.fail(req, "other", self._exc_detail(exc), exc)
            if req.t_sent is None:  # transport without trace events: best available stamp
                req.t_sent = req.t_dispatch
            try:
                req.status = resp.status_code
                if resp.status_code >= 300 or resp.status_code < 200:
                    if await self._http_error(req, resp):
                        req.retried += 1
                        continue  # retry without a field the server rejected
                    return None
                await self.stream(req, resp)
                return None
            finally:
                await resp.aclose()

    def _exc_detail(self, exc: BaseException) -> str:
        msg = str(exc) or type(exc).__name__
        return self.scrub(msg)

    def fail(self, req: Req, error: str, detail: str, exc: BaseException | None = None, *,
             connecting: bool = False, cut: bool = False) -> None:
        """Record the failure. With the exception that caused it: the class ``client`` when the client's own resources
        ran out (EMFILE, ENFILE, ENOBUFS; EADDRNOTAVAIL / EADDRINUSE while connecting: ``oh.client_errno``), the
        detail then starting with the errno name (``tui.core.clientlimit``): not the server's failure. ``cut``: the
        detail holds a body read only up to a limit (a secret cut there is removed too: ``Scrubber.cut_tail``)."""
        if exc is not None:
            name = oh.client_errno(exc, connecting=connecting)
            if name is not None:
                error, detail = "client", f"{name}: {self._exc_detail(exc)}"
        req.error = error
        req.detail = self.scrub(detail, cut=cut)
        if req.t_sent is None:
            req.t_sent = req.t_dispatch

    async def _http_error(self, req: Req, resp: httpx.Response) -> bool:
        """Classify a non-2xx answer. True when the request should be re-sent without an optional field."""
        body = b""
        try:
            async for chunk in resp.aiter_raw():
                body += chunk
                if len(body) >= ERROR_BODY_LIMIT:
                    break
        except httpx.HTTPError:
            pass
        text = body[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        code = resp.status_code
        msg = oh.error_message(text)
        if code == 400:
            # judged on the error message, not the whole body (some servers echo the request back)
            for fld in oh.rejected_fields(msg, OPTIONAL_FIELDS, self.dropped)[:1]:
                self.dropped.add(fld)
                self.say(f"note: server rejected {fld}; sending requests without it from now on")
                return True
        cls = oh.status_class(code)
        self.fail(req, cls, f"HTTP {code}: {msg}" if msg else f"HTTP {code}", cut=len(body) >= ERROR_BODY_LIMIT)
        return False

    async def stream(self, req: Req, resp: Any) -> None:
        """Read a 2xx answer's event stream (``resp``: headers and ``aiter_raw()``) into ``req``."""
        pc = perf_counter
        ctype = resp.headers.get("content-type", "")
        if "json" in ctype and "event-stream" not in ctype:
            return self.fail(req, "malformed_stream", f"server answered {ctype.split(';')[0]}, not an event stream")
        interp = StreamInterpreter(self.chat, keep_text=req.turn is not None and req.turn.keep)
        feed = interp.feed
        offsets: list[float] | None = [] if self.token_offsets else None
        t_first = None
        it = resp.aiter_raw()
        try:
            while True:
                try:
                    chunk = await it.__anext__()
                except StopAsyncIteration:
                    t = pc()
                    k = interp.end(t)
                else:
                    t = pc()  # when the read returned: the token events it completes arrived then
                    k = feed(chunk, t)
                if k:
                    if t_first is None:
                        t_first = t
                        req.t_first = t
                    if offsets is not None:
                        offsets.extend([t] * k)
                if interp.stopped:
                    break
        except httpx.ReadTimeout:
            return self.fail(req, "read_timeout", f"no data for {self.read_timeout:g} s mid-stream")
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            return self.fail(req, "stream_reset", "connection dropped mid-stream: " + self._exc_detail(exc), exc)
        finally:
            req.n_content = interp.tokens
            req.finish = interp.finish
            req.in_tok = interp.in_tok
            req.out_tok = interp.out_tok
            req.usage_server = interp.usage_server
            interp.settle()
            req.fields = stream_fields(interp)
            if interp.texts is not None:
                req.answer = interp.text
            if offsets is not None:
                req.offsets = offsets
            await it.aclose()
        if interp.error is not None:
            return self.fail(req, *interp.error)
        req.t_end = pc()
        out = interp.outcome()
        if out is not None:
            return self.fail(req, *out)
        return None
