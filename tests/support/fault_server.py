"""A small plain-asyncio HTTP/1.1 server on 127.0.0.1 that misbehaves on demand.

The real test peer (llama-server) cannot be made to reset a stream, stall, or send malformed
JSON when a test wants it; this server can. The behaviour is chosen by the first path segment
of the base URL, with optional ``,key=value`` parameters::

    fs.url("ok", tokens=5, first_delay=0.3)  ->  http://127.0.0.1:PORT/ok,tokens=5,first_delay=0.3/v1

It answers ``/v1/chat/completions`` and ``/v1/completions`` (streamed, chunked, and it closes the
connection after every response like llama-server), ``/v1/models`` (with ``engine=``: that engine's own
self-description too, ``tests.support.engine_pages``), and ``/tokenize`` when the
scenario has ``tokenize=1`` (one token per whitespace-separated word). It logs every completion
request it receives (``fs.log``) with its arrival time, the request id found in the prompt
(``[id]`` prefix written by the load generator), the headers and the JSON body, so tests can
check client stamps against server truth and count requests.

Scenarios (``ok`` parameters apply to all that stream):
  ok              role chunk (chat), ``tokens`` tokens ``delay`` s apart, finish, usage, [DONE]
                  params: tokens, delay, first_delay (after the role chunk), header_delay,
                  role=0/1, ping=0/1, crlf=0/1, split=0/1, usage=0/1, done=0/1, finish=length
  status          HTTP ``code`` (default 500) with a JSON error body; ``msg`` for its message
  echo_auth       HTTP 400 whose message repeats the request's Authorization and X-* headers
  echo_forms      HTTP 400, a text/plain body repeating the Authorization value, its credential (after the scheme) and
                  every X-* header value in one encoded form: ``form`` = url (percent-encoded), b64 (base64 of the
                  value), b64line (base64 of the whole "Name: value" line), json (JSON-escaped), json2 (escaped twice),
                  or cycle (the next of these on each request, the default); the bodies sent are logged (``echoed``)
  reject_field    HTTP 400 naming ``field`` while the request carries it, else like ok
  stall           headers + role chunk, then nothing until the client goes away
  stall_headers   nothing at all (no headers) until the client goes away
  reset           ``tokens`` tokens, then a TCP reset
  cut             ``tokens`` tokens, then close without ending the chunked body
  close_early     read the request, close without answering
  malformed       role chunk, then a data line with broken JSON
  stream_error    one token, then ``{"error": {...}}`` inside the stream
  empty           headers, then only ``data: [DONE]``
  empty_eof       headers, then a clean end of the body with no events
  no_finish       tokens, then [DONE] without any finish_reason
  no_finish_eof   tokens, then a clean end of the body without finish_reason or [DONE]
  json            HTTP 200 with a plain JSON completion (stream ignored)
  reasoning       first content arrives as ``delta.reasoning_content``

Timing and content parameters of every streaming scenario (issue 21), on top of ``tokens``/``delay``/``first_delay``:
  reasoning=N     N reasoning chunks before the ``tokens`` answer chunks, as ``delta.<rkey>`` (rkey=reasoning_content,
                  the default, or rkey=reasoning), or rkey=think: inside ``<think>...</think>`` in the content (the
                  open tag on the first reasoning chunk, the close tag on the last one; tag_split=K sends each tag
                  as separate chunks of K characters instead)
  answer_delay=S  an extra S seconds before the first answer chunk (a known answer TTFT after the reasoning)
  stall_at=I, stall=S   an extra S seconds before token chunk I (0-based, all kinds): one long gap mid-stream
  usage_out=N, usage_in=N, usage_reasoning=N   what the usage chunk says (default: the chunks sent, the prompt's
                  words, no details) -- a usage that disagrees with the chunks
The log entry's ``writes`` lists (kind, epoch s) after each token chunk was written: the server's truth.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
import time
from typing import Any
from urllib.parse import unquote

_ID = re.compile(r"^\[([^\]]+)\]")


def _parse_scenario(seg: str) -> tuple[str, dict[str, str]]:
    name, *rest = unquote(seg).split(",")
    params = {}
    for item in rest:
        k, _, v = item.partition("=")
        params[k] = v
    return name, params


def _described(path: str, params: dict[str, str]) -> dict | None:
    """With ``engine=llamacpp|vllm|sglang|tgi`` (and ``served=NAME``, ``params=N``, ``ctx=N``): that engine's
    ``/v1/models`` and own pages (tests.support.engine_pages), else None."""
    if not params.get("engine"):
        return None
    from tests.support.engine_pages import pages

    n = params.get("params")
    return pages(params["engine"], params.get("served") or "fault-model", params=int(n) if n else None,
                 ctx=int(params.get("ctx") or 2048)).get(path)


ECHO_FORMS = ("url", "b64", "b64line", "json", "json2")


def _echo_values(name: str, value: str) -> list[tuple[str, str]]:
    """The header values echo_forms repeats: the Authorization value and its credential alone, every X-* value."""
    if name == "authorization":
        out = [(name, value)]
        scheme, _, cred = value.partition(" ")
        return out + ([(name, cred)] if cred else [])
    return [(name, value)] if name.startswith("x-") else []


def echo_form(form: str, name: str, value: str) -> str:
    """``value`` as echo_forms sends it in ``form`` (what a careless server does with a key in an error body)."""
    import base64
    from urllib.parse import quote

    if form == "url":
        return quote(value, safe="")
    if form == "b64":
        return base64.b64encode(value.encode()).decode()
    if form == "b64line":
        return base64.b64encode(f"{name}: {value}".encode()).decode()
    if form == "json":
        return json.dumps(value)[1:-1]
    if form == "json2":
        return json.dumps(json.dumps(value)[1:-1])[1:-1]
    raise ValueError(form)


class FaultServer:
    """Start with ``with FaultServer() as fs:`` (runs in its own thread and event loop)."""

    def __init__(self) -> None:
        self.port: int | None = None
        self.log: list[dict] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self.connections = 0
        self._echo_n = 0  # echo_forms, form=cycle: the next form

    # ----------------------------------------------------------- lifecycle

    def __enter__(self) -> FaultServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="fault-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault server did not start")

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopped.wait()
        self._server.close()
        for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            task.cancel()

    def url(self, scenario: str = "ok", **params: Any) -> str:
        seg = scenario + "".join(f",{k}={v}" for k, v in params.items())
        return f"http://127.0.0.1:{self.port}/{seg}/v1"

    def completions(self) -> list[dict]:
        with self._lock:
            return [e for e in self.log if e["kind"] == "completion"]

    # ----------------------------------------------------------- HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = (lines[0].split(" ") + ["", ""])[:3]
        headers = {}
        for ln in lines[1:]:
            if ":" in ln:
                k, _, v = ln.partition(":")
                headers[k.strip().lower()] = v.strip()
        body = b""
        n = int(headers.get("content-length", "0") or 0)
        if n:
            body = await reader.readexactly(n)
        t_arrival = time.time()
        path = target.split("?", 1)[0]
        parts = path.strip("/").split("/")
        scen, params = _parse_scenario(parts[0]) if parts and parts[0] else ("ok", {})
        rest = "/" + "/".join(parts[1:])
        try:
            described = _described(rest, params)  # engine=..., served=...: the engine's self-description
            if described is not None:
                await self._json(writer, 200, described)
            elif rest == "/v1/models":
                await self._json(writer, 200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})
            elif rest == "/tokenize" and params.get("tokenize") == "1":
                try:
                    text = json.loads(body).get("content", "")
                except ValueError:
                    text = ""
                await self._json(writer, 200, {"tokens": list(range(len(text.split())))})
            elif rest in ("/v1/chat/completions", "/v1/completions") and method == "POST":
                try:
                    req = json.loads(body)
                except ValueError:
                    req = {}
                chat = rest.endswith("chat/completions")
                prompt = ""
                if chat:
                    msgs = req.get("messages") or [{}]
                    prompt = str(msgs[-1].get("content", ""))
                else:
                    prompt = str(req.get("prompt", ""))
                m = _ID.match(prompt)
                entry = {"kind": "completion", "scenario": scen, "params": params, "t_arrival": t_arrival,
                         "prompt": prompt,
                         "id": m.group(1) if m else None, "headers": headers, "body": req, "t_first": None}
                with self._lock:
                    self.log.append(entry)
                await self._completion(scen, params, chat, req, entry, reader, writer)
            else:
                await self._json(writer, 404, {"error": {"message": "not found", "code": 404}})
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def _json(self, writer: asyncio.StreamWriter, code: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
                  500: "Internal Server Error", 503: "Service Unavailable"}.get(code, "Status")
        writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _start_stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")
        await writer.drain()

    @staticmethod
    async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()

    @staticmethod
    async def _end(writer: asyncio.StreamWriter) -> None:
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _completion(self, scen: str, p: dict, chat: bool, req: dict, entry: dict,
                          reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tokens = int(p.get("tokens", "5"))
        delay = float(p.get("delay", "0"))
        first_delay = float(p.get("first_delay", "0"))
        header_delay = float(p.get("header_delay", "0"))
        eol = "\r\n" if p.get("crlf") == "1" else "\n"
        ping = p.get("ping") == "1"
        split = p.get("split") == "1"
        finish = p.get("finish", "length")
        send_role = chat and p.get("role", "1") == "1"
        n_prompt = len(entry.get("prompt", "").split())

        async def event(obj: Any) -> None:
            payload = obj if isinstance(obj, str) else json.dumps(obj)
            data = f"data: {payload}{eol}{eol}".encode()
            if ping:
                await self._chunk(writer, f": ping{eol}{eol}".encode())
            if split and len(data) > 6:
                a, b = len(data) // 3, 2 * len(data) // 3
                for piece in (data[:a], data[a:b], data[b:]):
                    await self._chunk(writer, piece)
                    await asyncio.sleep(0.02)  # separate network reads at the client
            else:
                await self._chunk(writer, data)

        def tok(text: str, key: str = "content") -> dict:
            if chat:
                return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {key: text},
                                                                        "finish_reason": None}]}
            return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": None}]}

        n_reason = int(p.get("reasoning", "0"))
        rkey = p.get("rkey", "reasoning_content")
        answer_delay = float(p.get("answer_delay", "0"))
        stall_at = int(p.get("stall_at", "-1"))
        stall = float(p.get("stall", "0"))
        tag_split = int(p.get("tag_split", "0"))

        def plan(count: int) -> list[tuple[str, str, str]]:
            """(kind, delta key, text) of every token chunk: reasoning first, then ``count`` answer tokens."""
            out: list[tuple[str, str, str]] = []
            if n_reason and rkey == "think":  # reasoning inside <think>...</think> in the content
                words = [f"r{i} " for i in range(n_reason)]
                if tag_split:
                    for tag in ("<think>", None, "</think>"):
                        if tag is None:
                            out += [("reasoning", "content", w) for w in words]
                        else:
                            out += [("reasoning", "content", tag[j:j + tag_split])
                                    for j in range(0, len(tag), tag_split)]
                else:
                    words[0] = "<think>" + words[0]
                    words[-1] += "</think>"
                    out += [("reasoning", "content", w) for w in words]
            elif n_reason:
                out += [("reasoning", rkey, f"r{i} ") for i in range(n_reason)]
            out += [("answer", "content", f"t{i} ") for i in range(count)]
            return out

        async def tokens_out(count: int, key: str = "content") -> int:
            chunks = plan(count)
            if key != "content" and chunks:  # the old ``reasoning`` scenario: the first token as reasoning
                chunks[0] = ("reasoning", key, chunks[0][2])
            writes: list[tuple[str, float]] = []
            # (kind, epoch s) just before each token chunk was written: a client may read a chunk before a stamp
            # taken after its write (the write yields to the loop), never before this one
            entry["writes"] = writes
            for i, (kind, k, text) in enumerate(chunks):
                if i == 0 and first_delay:
                    await asyncio.sleep(first_delay)
                elif i and delay:
                    await asyncio.sleep(delay)
                if kind == "answer" and answer_delay and (i == 0 or chunks[i - 1][0] != "answer"):
                    await asyncio.sleep(answer_delay)
                if i == stall_at and stall:
                    await asyncio.sleep(stall)
                t_write = time.time()
                await event(tok(text, k))
                writes.append((kind, t_write))
                if i == 0:
                    entry["t_first"] = time.time()
            return len(chunks)

        async def finish_and_usage(count: int, done: bool = True, fr: str | None = finish) -> None:
            n_out = int(p.get("usage_out", count))
            usage: dict[str, Any] = {"prompt_tokens": int(p.get("usage_in", n_prompt)), "completion_tokens": n_out,
                                     "total_tokens": n_prompt + n_out}
            if "usage_reasoning" in p:
                usage["completion_tokens_details"] = {"reasoning_tokens": int(p["usage_reasoning"])}
            want_usage = p.get("usage", "1") == "1" and (req.get("stream_options") or {}).get("include_usage")
            if chat:
                if fr is not None:
                    await event({"choices": [{"index": 0, "delta": {}, "finish_reason": fr}]})
                if want_usage:
                    await event({"choices": [], "usage": usage})
            elif fr is not None:
                obj: dict = {"choices": [{"index": 0, "text": "", "finish_reason": fr}]}
                if want_usage:
                    obj["usage"] = usage
                await event(obj)
            if done and p.get("done", "1") == "1":
                await event("[DONE]")

        if header_delay:
            await asyncio.sleep(header_delay)
        if scen == "status":
            code = int(p.get("code", "500"))
            await self._json(writer, code, {"error": {"message": p.get("msg", f"status {code}"), "code": code}})
            return
        if scen == "echo_forms":
            form = p.get("form", "cycle")
            if form == "cycle":
                form = ECHO_FORMS[self._echo_n % len(ECHO_FORMS)]
                self._echo_n += 1
            body = "denied: " + " ".join(echo_form(form, k, v) for k, v in entry["headers"].items()
                                         for k, v in _echo_values(k, v))
            entry["echoed"] = body
            data = body.encode()
            writer.write(f"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + data)
            await writer.drain()
            return
        if scen == "echo_auth":
            echoed = {k: v for k, v in entry["headers"].items() if k == "authorization" or k.startswith("x-")}
            await self._json(writer, 400, {"error": {"message": f"bad request with headers {echoed}", "code": 400}})
            return
        if scen == "reject_field":
            field = p.get("field", "stream_options")
            if field in req:
                entry["rejected"] = field
                await self._json(writer, 400, {"error": {"message": f"unknown field '{field}'", "code": 400}})
                return
            scen = "ok"
        if scen == "close_early":
            writer.transport.abort()
            return
        if scen == "stall_headers":
            await reader.read(1)  # until the client goes away
            return
        if scen == "json":
            await self._json(writer, 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                                        "finish_reason": "stop"}]})
            return
        await self._start_stream(writer)
        if send_role:
            await event({"object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": None},
                                      "finish_reason": None}]})
        if scen == "ok":
            await finish_and_usage(await tokens_out(tokens))
        elif scen == "reasoning":
            await finish_and_usage(await tokens_out(tokens, key="reasoning_content"))
        elif scen == "stall":
            await reader.read(1)
            return
        elif scen in ("reset", "cut"):
            await tokens_out(tokens)
            if scen == "reset":
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        elif scen == "malformed":
            await event('{"choices": [{"delta": {"content": "x"')
            await finish_and_usage(0)
        elif scen == "stream_error":
            await tokens_out(1)
            await event({"error": {"message": "model crashed mid-stream", "type": "server_error", "code": 500}})
        elif scen == "empty":
            await event("[DONE]")
        elif scen == "empty_eof":
            pass
        elif scen == "no_finish":
            await tokens_out(tokens)
            await finish_and_usage(tokens, fr=None)
        elif scen == "no_finish_eof":
            await tokens_out(tokens)
        await self._end(writer)


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class BlackholeListener:
    """A listening socket whose accept queue is full, so new connects hang (connect timeout).

    Linux drops SYNs to a listener whose accept queue is full; the client's connect then waits.
    """

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers: list[socket.socket] = []
        for _ in range(4):  # fill the accept queue (backlog 0 admits one or two)
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            self.fillers.append(c)

    def close(self) -> None:
        for c in self.fillers:
            c.close()
        self.sock.close()
