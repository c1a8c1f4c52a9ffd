"""A local streaming OpenAI-style chat server with exact, logged timing: the ground truth for TTFT benchmarks.

    python bench/delay_server.py --log /tmp/delay.jsonl [--port 0] [--delay-ms 100] [--tokens 8] [--interval-ms 25]

Plain asyncio (``asyncio.Protocol``, standard library only), 127.0.0.1 only, meant to run as its OWN process
beside the client under test. Per completion request (``POST /v1/chat/completions`` or ``/v1/completions``):

1. the whole request is read (headers and ``Content-Length`` body); that moment is ``t_arrival``;
2. the response headers go out at once (``200``, ``text/event-stream``, chunked, ``Connection: keep-alive``
   advertised like llama-server does);
3. exactly ``--delay-ms`` after ``t_arrival`` the role chunk (``"content": null``) and the first content token go out
   in ONE write (llama-server often delivers them in one network read); right after that write returns the server
   stamps ``t_first_write``;
4. ``--tokens`` more content tokens follow, ``--interval-ms`` apart;
5. a finish chunk (empty delta, ``finish_reason: "length"``), a usage chunk (``"choices": []``, ``usage`` and a
   ``timings`` object), ``data: [DONE]``, the end of the chunked body, and the connection is CLOSED (llama-server
   closes after every streamed response although it advertises keep-alive).

Every completion request is logged (JSONL, one line per request, written on ``POST /_flush`` and at exit) with:
``id`` (from the ``X-Request-Id`` header, else the JSON body's ``user`` field, else the ``[id]`` prefix of the prompt,
which is what servewatch's load generator sends: ``[<run>-<seq>] Repeat these words: ...``), ``t_arrival``,
``t_first_write``, ``t_end`` (all ``time.perf_counter()`` seconds: CLOCK_MONOTONIC on Linux, so comparable with the
perf_counter stamps of other processes on the same machine), ``truth_ttft_s = t_first_write - t_arrival``,
``tokens`` (content tokens written) and ``closed_early`` (the client went away mid-stream).

Other endpoints: ``GET /v1/models`` (one model, ``delay-model``), ``POST /_flush`` (writes the pending log lines and
answers ``{"logged": N, "cpu_s": ...}`` with the server's own CPU time), anything else 404 (so a client's ``/tokenize``
probe falls back to its estimate). SIGTERM/SIGINT flush the log and stop the server.

On start it prints one JSON line to stdout: ``{"port": P, "pid": PID}``. Benchmarks start it with
``DelayServerProcess`` (below).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import sys
import time
from time import perf_counter

_ID = re.compile(r"^\[([^\]]{1,200})\]")
MODEL = "delay-model"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object) -> bytes:
    payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return _chunk(b"data: " + payload.encode() + b"\n\n")


class Frames:
    """Pre-encoded response pieces (identical for every request, so the server's own work per token is one write)."""

    def __init__(self, tokens: int, chat: bool) -> None:
        created = int(time.time())
        base = {"id": "chatcmpl-delay", "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": MODEL, "system_fingerprint": "b0000-delay"}

        def tok(i: int) -> bytes:
            if chat:
                return _event(dict(base, choices=[{"index": 0, "delta": {"content": f" tok{i}"}, "finish_reason": None}]))
            return _event(dict(base, choices=[{"index": 0, "text": f" tok{i}", "finish_reason": None}]))

        n = tokens + 1
        self.n = n
        self.head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Server: delay-server\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n"
                     b"Access-Control-Allow-Origin: *\r\n\r\n")
        role = _event(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": None},
                                           "finish_reason": None}])) if chat else b""
        self.tokens = [tok(i) for i in range(n)]
        self.first = role + self.tokens[0]
        usage = {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}
        timings = {"prompt_n": 0, "prompt_ms": 0.0, "predicted_n": n, "predicted_ms": 0.0}
        if chat:
            fin = _event(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "length"}]))
            tail = _event(dict(base, choices=[], usage=usage, timings=timings))
        else:  # /v1/completions: usage in the finish chunk, no role chunk
            fin = _event(dict(base, choices=[{"index": 0, "text": "", "finish_reason": "length"}], usage=usage))
            tail = b""
        self.end = fin + tail + _event("[DONE]") + b"0\r\n\r\n"


class Server:
    def __init__(self, delay: float, tokens: int, interval: float, log_path: str) -> None:
        self.delay = delay
        self.interval = interval
        self.frames = {True: Frames(tokens, True), False: Frames(tokens, False)}
        self.log_path = log_path
        self.pending: list[dict] = []
        self.logged = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop = asyncio.Event()
        self.open_streams = 0
        self.max_open_streams = 0

    def flush(self) -> int:
        if self.pending:
            lines = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in self.pending)
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(lines)
            self.logged += len(self.pending)
            self.pending = []
        return self.logged


def _json_response(code: int, obj: object) -> bytes:
    data = json.dumps(obj).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(code, "Status")
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n").encode() + data


class Conn(asyncio.Protocol):
    __slots__ = ("srv", "tr", "buf", "busy", "entry", "frames", "i", "handle", "done")

    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.tr: asyncio.Transport | None = None
        self.buf = b""
        self.busy = False  # a request was read: ignore further bytes
        self.entry: dict | None = None
        self.frames: Frames | None = None
        self.i = 0
        self.handle: asyncio.TimerHandle | None = None
        self.done = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        e = self.entry
        if e is not None and not self.done:
            e["closed_early"] = True
            e["t_end"] = perf_counter()
            self._finish_entry()

    def data_received(self, data: bytes) -> None:
        if self.busy:
            return
        buf = self.buf + data if self.buf else data
        hend = buf.find(b"\r\n\r\n")
        if hend < 0:
            if len(buf) > 65536:
                self._reply(_json_response(400, {"error": {"message": "headers too large", "code": 400}}))
                return
            self.buf = buf
            return
        head = buf[:hend].decode("latin-1")
        lines = head.split("\r\n")
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            if sep:
                headers[k.strip().lower()] = v.strip()
        try:
            n = int(headers.get("content-length", "0") or 0)
        except ValueError:
            n = 0
        if len(buf) - hend - 4 < n:
            self.buf = buf
            return
        t_arrival = perf_counter()  # the whole request is in
        self.busy = True
        self.buf = b""
        body = buf[hend + 4: hend + 4 + n]
        parts = lines[0].split(" ")
        method = parts[0]
        path = parts[1].split("?", 1)[0] if len(parts) > 1 else "/"
        srv = self.srv
        if path in ("/v1/chat/completions", "/v1/completions") and method == "POST":
            self._stream(path.endswith("chat/completions"), headers, body, t_arrival)
        elif path == "/v1/models":
            self._reply(_json_response(200, {"object": "list", "data": [{"id": MODEL, "object": "model",
                                                                           "owned_by": "delay-server"}]}))
        elif path == "/_flush" and method == "POST":
            logged = srv.flush()
            self._reply(_json_response(200, {"logged": logged, "cpu_s": time.process_time(),
                                             "max_open_streams": srv.max_open_streams}))
            srv.max_open_streams = srv.open_streams
        else:
            self._reply(_json_response(404, {"error": {"message": "not found", "code": 404}}))

    def _reply(self, data: bytes) -> None:
        self.busy = True
        assert self.tr is not None
        self.tr.write(data)
        self.tr.close()

    def _stream(self, chat: bool, headers: dict, body: bytes, t_arrival: float) -> None:
        rid = headers.get("x-request-id")
        try:
            req = json.loads(body)
        except ValueError:
            req = None
        if not isinstance(req, dict):
            self._reply(_json_response(400, {"error": {"message": "body is not a JSON object", "code": 400}}))
            return
        if not rid and isinstance(req.get("user"), str):
            rid = req["user"]
        if not rid:
            prompt = ""
            if chat:
                msgs = req.get("messages")
                if isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict):
                    prompt = str(msgs[-1].get("content", ""))
            else:
                prompt = str(req.get("prompt", ""))
            m = _ID.match(prompt)
            rid = m.group(1) if m else None
        srv = self.srv
        self.entry = {"id": rid, "api": "chat" if chat else "completions", "t_arrival": t_arrival,
                      "t_first_write": None, "t_end": None, "tokens": 0}
        self.frames = srv.frames[chat]
        srv.open_streams += 1
        if srv.open_streams > srv.max_open_streams:
            srv.max_open_streams = srv.open_streams
        assert self.tr is not None
        self.tr.write(self.frames.head)
        loop = srv.loop
        assert loop is not None
        # exactly `delay` after arrival (asyncio runs timers on CLOCK_MONOTONIC, the same clock as perf_counter)
        self.handle = loop.call_at(loop.time() + srv.delay - (perf_counter() - t_arrival), self._first)

    def _first(self) -> None:
        tr, e, f = self.tr, self.entry, self.frames
        assert tr is not None and e is not None and f is not None
        tr.write(f.first)
        e["t_first_write"] = perf_counter()
        self.i = 1
        self._schedule_next()

    def _schedule_next(self) -> None:
        srv = self.srv
        assert srv.loop is not None
        f = self.frames
        assert f is not None
        if self.i >= f.n:
            self.handle = None
            self._end()
        else:
            self.handle = srv.loop.call_later(srv.interval, self._next)

    def _next(self) -> None:
        tr, f = self.tr, self.frames
        assert tr is not None and f is not None
        tr.write(f.tokens[self.i])
        self.i += 1
        self._schedule_next()

    def _end(self) -> None:
        tr, e, f = self.tr, self.entry, self.frames
        assert tr is not None and e is not None and f is not None
        tr.write(f.end)
        e["t_end"] = perf_counter()
        self.done = True
        self._finish_entry()
        tr.close()  # like llama-server: no connection reuse after a stream

    def _finish_entry(self) -> None:
        e = self.entry
        if e is None:
            return
        self.entry = None
        e["tokens"] = self.i
        if e["t_first_write"] is not None:
            e["truth_ttft_s"] = e["t_first_write"] - e["t_arrival"]
        self.srv.open_streams -= 1
        self.srv.pending.append(e)


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    srv = Server(args.delay_ms / 1e3, args.tokens, args.interval_ms / 1e3, args.log)
    srv.loop = loop
    server = await loop.create_server(lambda: Conn(srv), "127.0.0.1", args.port, backlog=args.backlog,
                                      reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, srv.stop.set)
    sys.stdout.write(json.dumps({"port": port, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    try:
        await srv.stop.wait()
    finally:
        server.close()
        srv.flush()


class DelayServerProcess:
    """Run this server as a separate process (``with DelayServerProcess(log, ...) as ds:``): ``ds.port``,
    ``ds.flush()`` (pending log lines to disk; returns the server's answer incl. its CPU seconds),
    ``ds.entries()`` (all logged requests by id). Stopped with SIGTERM on exit."""

    def __init__(self, log_path: str, delay_ms: float = 100.0, tokens: int = 8, interval_ms: float = 25.0,
                 python: str | None = None) -> None:
        self.log_path = log_path
        self.args = ["--log", log_path, "--delay-ms", str(delay_ms), "--tokens", str(tokens),
                     "--interval-ms", str(interval_ms)]
        self.python = python or sys.executable
        self.proc = None
        self.port: int | None = None
        self.pid: int | None = None

    def __enter__(self) -> DelayServerProcess:
        import subprocess

        self.proc = subprocess.Popen([self.python, os.path.abspath(__file__), *self.args],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.proc.wait(5)
            raise RuntimeError("delay server did not start")
        info = json.loads(line)
        self.port, self.pid = info["port"], info["pid"]
        return self

    def flush(self) -> dict:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/_flush", body=b"")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def entries(self) -> dict:
        out: dict = {}
        try:
            with open(self.log_path, encoding="utf-8") as fh:
                for line in fh:
                    e = json.loads(line)
                    if e.get("id") is not None:
                        out[e["id"]] = e
        except FileNotFoundError:
            pass
        return out

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: any free port (printed on stdout)")
    ap.add_argument("--delay-ms", type=float, default=100.0, help="arrival -> first content token (D)")
    ap.add_argument("--tokens", type=int, default=8, help="content tokens AFTER the first one (K)")
    ap.add_argument("--interval-ms", type=float, default=25.0, help="gap between content tokens")
    ap.add_argument("--log", required=True, help="JSONL file for per-request server truth (appended)")
    ap.add_argument("--backlog", type=int, default=4096)
    args = ap.parse_args(argv)
    if args.delay_ms < 0 or args.tokens < 0 or args.interval_ms < 0:
        ap.error("--delay-ms, --tokens and --interval-ms must be >= 0")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
