"""A lean HTTP/1.1 path under httpx for the load generator's streamed requests (standard library asyncio).

Why: profiled against a local streaming server at 64 and 256 streams (``bench/profile_client.py``, figures in
``bench/profiles/``), about three quarters of the load generator's CPU per request went to the layers under httpx:
httpcore's connection pool (which scans every open connection for each new request, so its cost grows with the
number of streams), anyio cancel scopes around every read, and h11's per-event state machine. httpx's own API
(``build_request``, ``send``, ``Response``, ``aiter_raw``) costs about 0.1 ms per request and stays.

What: :class:`LeanTransport` is an ``httpx.AsyncBaseTransport``. A request that carries the extension :data:`LEAN`
(set by ``tui.sources.load.executor`` on its completion requests) goes over a fresh connection of its own
(``asyncio.Protocol``; TLS with the same ``verify`` policy as the client; the connection is closed when the response
is closed, never reused: servers such as llama-server close after every stream). Every other request (the probe,
``/tokenize``, metrics, the quality runner) goes to the standard httpx transport it wraps, unchanged.

The contract servewatch relies on, kept from httpcore:

- trace events (``request.extensions["trace"]``, awaited): ``connection.connect_tcp.started/complete/failed``,
  ``http11.send_request_headers.started`` right before the request (headers and body, one write) is handed to the
  socket, ``.complete`` once it was (or ``.failed`` when the connection was already gone: nothing was written),
  ``http11.receive_response_headers.started/complete/failed`` and ``http11.response_closed.started/complete``;
- exceptions: ``httpx.ConnectTimeout`` / ``httpx.ConnectError`` (TLS failures included, chained to the
  ``ssl.SSLError``; an ``OSError`` such as EMFILE chained too, so the client's own failures are told apart) while
  connecting; ``httpx.ReadTimeout`` when no byte arrives within the read timeout (per wait,
  like httpcore); ``httpx.ReadError`` when the connection is reset; ``httpx.RemoteProtocolError`` when the server
  closes before a response ("Server disconnected without sending a response."), mid-body ("peer closed connection
  without sending complete message body ...", h11's wording) or sends a malformed response;
  ``httpx.WriteTimeout`` when a large request cannot be handed to the socket in time;
- framing: chunked, ``Content-Length`` and close-delimited bodies; no body for HEAD, 204 and 304; interim 1xx
  answers are skipped. Each item the response stream yields is the body bytes decoded from what arrived by the time
  the reader woke up (one network read, or several that arrived together).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

#: Request extension that sends a request over the lean path (any true value).
LEAN = "servewatch.lean_http1"

MAX_HEAD = 100 * 1024  # response status line + headers (h11's default limit for one incomplete event)
MAX_LINE = 64 * 1024  # one chunk-size or trailer line
READ_HIGH = 1 << 20  # unread bytes above which the socket stops being read until the reader catches up

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")
_NO_BODY_STATUS = frozenset({204, 304})

Trace = Callable[[str, dict], Awaitable[Any]]


class _Conn(asyncio.Protocol):
    """One connection's receive side: bytes land in ``buf``; a reader waits with :meth:`wait`."""

    __slots__ = ("buf", "deadline", "drain", "eof", "exc", "loop", "paused", "timer", "transport", "waiter",
                 "write_paused")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buf = b""  # received, not yet decoded (bytes: a read that is decoded at once is never copied)
        self.eof = False  # no more bytes will come (FIN, reset or closed)
        self.exc: BaseException | None = None  # why the connection was lost, when it was an error
        self.waiter: asyncio.Future | None = None
        self.deadline = 0.0  # loop time at which the current wait times out
        self.timer: asyncio.TimerHandle | None = None  # one watchdog per connection, not one timer per read
        self.paused = False
        self.write_paused = False
        self.drain: asyncio.Future | None = None

    # -- asyncio.Protocol ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        self.buf = buf + data if buf else data
        if not self.paused and len(self.buf) > READ_HIGH and self.transport is not None:
            try:
                self.transport.pause_reading()
                self.paused = True
            except (AttributeError, RuntimeError, NotImplementedError):
                pass
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(True)

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None and self.exc is None:
            self.exc = exc
        self._wake()
        self._stop_timer()
        d = self.drain
        if d is not None and not d.done():
            d.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        d = self.drain
        if d is not None and not d.done():
            d.set_result(None)

    # -- the reader's side --------------------------------------------------

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(True)

    async def wait(self, timeout: float | None) -> bool:
        """Wait for more bytes, the end of the stream or an error; False when ``timeout`` s passed first
        (each wait has its own ``timeout``, as httpcore's reads do)."""
        loop = self.loop
        fut = loop.create_future()
        self.waiter = fut
        if timeout is not None:
            deadline = self.deadline = loop.time() + timeout
            timer = self.timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self.timer = loop.call_at(deadline, self._watchdog)
        try:
            return await fut
        finally:
            self.waiter = None

    def _watchdog(self) -> None:
        """Fires at the earliest deadline it was armed for: expire the wait that is still pending past its own
        deadline, or re-arm for the current wait's (a later wait moved it); with no wait pending, stop (the next
        wait re-arms)."""
        self.timer = None
        w = self.waiter
        if w is None or w.done():
            return
        if self.loop.time() >= self.deadline:
            w.set_result(False)
        else:
            self.timer = self.loop.call_at(self.deadline, self._watchdog)

    def _stop_timer(self) -> None:
        timer = self.timer
        if timer is not None:
            self.timer = None
            timer.cancel()

    def consumed(self) -> None:
        """The reader took bytes out of ``buf``: read the socket again once it is drained enough."""
        if self.paused and len(self.buf) < READ_HIGH // 2 and self.transport is not None:
            self.paused = False
            try:
                self.transport.resume_reading()
            except (AttributeError, RuntimeError, NotImplementedError):
                pass

    async def drained(self, timeout: float | None) -> bool:
        """Wait until the transport takes writes again (only while it is paused); False on timeout."""
        while self.write_paused and not self.eof:
            fut = self.loop.create_future()
            self.drain = fut
            handle = self.loop.call_later(timeout, _expire, fut) if timeout is not None else None
            try:
                if await fut is False:
                    return False
            finally:
                self.drain = None
                if handle is not None:
                    handle.cancel()
        return True

    def read_failure(self, request: httpx.Request) -> httpx.TransportError | None:
        """The exception for a reader that needs more bytes and will get none (None: it may still get some)."""
        if self.exc is not None:
            exc = self.exc
            err = httpx.ReadError(str(exc) or type(exc).__name__, request=request)
            err.__cause__ = exc  # the OSError behind it (ENOBUFS is the client's own: openai_http.client_errno)
            return err
        return None

    def close(self) -> None:
        self._stop_timer()
        tr = self.transport
        if tr is not None and not tr.is_closing():
            tr.close()


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None, float | None]:
    t = request.extensions.get("timeout") or {}
    return t.get("connect"), t.get("read"), t.get("write")


def request_bytes(request: httpx.Request, body: bytes) -> bytes:
    """The request as it goes on the wire: request line, headers (httpx's, in its order and case), body.

    Raises ``httpx.LocalProtocolError`` for a header that cannot be sent (bad name, CR/LF/NUL in a value)."""
    target = request.url.raw_path or b"/"
    parts = [request.method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    token, bad = _TOKEN.fullmatch, _BAD_VALUE.search
    for k, v in request.headers.raw:
        if token(k) is None or bad(v) is not None:
            raise httpx.LocalProtocolError(f"illegal header {k[:40]!r}", request=request)
        parts += (k, b": ", v, b"\r\n")
    parts.append(b"\r\n")
    parts.append(body)
    return b"".join(parts)


def parse_head(head: bytes, request: httpx.Request) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """(http version, status, reason phrase, headers) of a response head (without its blank line)."""
    lines = head.split(b"\n")
    status_line = lines[0].rstrip(b"\r")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {status_line[:60]!r}", request=request)
    version, status = parts[0], int(parts[1])
    reason = parts[2] if len(parts) > 2 else b""
    headers: list[tuple[bytes, bytes]] = []
    for raw in lines[1:]:
        line = raw.rstrip(b"\r")
        if not line:
            continue
        if line[0] in (32, 9):  # obsolete line folding
            raise httpx.RemoteProtocolError("obsolete header line folding in the response", request=request)
        name, sep, value = line.partition(b":")
        if not sep or _TOKEN.fullmatch(name) is None:
            raise httpx.RemoteProtocolError(f"malformed response header {line[:60]!r}", request=request)
        headers.append((name, value.strip(b" \t")))
    return version, status, reason, headers


def body_framing(method: str, status: int, headers: list[tuple[bytes, bytes]],
                 request: httpx.Request) -> tuple[str, int]:
    """("length", n) | ("chunked", 0) | ("close", 0): how the response body ends (RFC 9112 section 6.3)."""
    if method == "HEAD" or status in _NO_BODY_STATUS or 100 <= status < 200:
        return "length", 0
    te = None
    lengths = []
    for k, v in headers:
        lk = k.lower()
        if lk == b"transfer-encoding":
            te = v if te is None else te + b"," + v
        elif lk == b"content-length":
            lengths.append(v)
    if te is not None:
        last = te.split(b",")[-1].strip().lower()
        return ("chunked", 0) if last == b"chunked" else ("close", 0)
    if lengths:
        vals = {x.strip() for v in lengths for x in v.split(b",")}
        if len(vals) != 1:
            raise httpx.RemoteProtocolError("conflicting Content-Length headers", request=request)
        (val,) = vals
        if not val.isdigit() or len(val) > 18:
            raise httpx.RemoteProtocolError(f"malformed Content-Length {val[:30]!r}", request=request)
        return "length", int(val)
    return "close", 0


_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class _Body(httpx.AsyncByteStream):
    """The response body of one lean exchange; closing it closes the connection."""

    def __init__(self, conn: _Conn, mode: str, length: int, read_timeout: float | None, request: httpx.Request,
                 trace: Trace | None) -> None:
        self.conn = conn
        self.mode = mode
        self.expected = length  # "length": the Content-Length
        self.left = length  # "length": body bytes still to come
        self.chunk_left = 0  # "chunked": bytes left in the current chunk
        self.state = _SIZE if mode == "chunked" else (_DONE if mode == "length" and length == 0 else _DATA)
        self.read_timeout = read_timeout
        self.request = request
        self.trace = trace

    def _take(self) -> bytes:
        """Decode what is buffered; returns the body bytes it held (maybe b"")."""
        conn = self.conn
        buf = conn.buf
        if not buf or self.state == _DONE:
            return b""
        mode = self.mode
        if mode == "chunked":
            out, pos = self._take_chunked(buf)
            conn.buf = buf[pos:] if pos < len(buf) else b""
        elif mode == "length":
            n = self.left
            if n >= len(buf):
                out, conn.buf = buf, b""
            else:
                out, conn.buf = buf[:n], buf[n:]
            self.left -= len(out)
            if self.left == 0:
                self.state = _DONE
        else:
            out, conn.buf = buf, b""
        if conn.paused:
            conn.consumed()
        return out

    def _take_chunked(self, buf: bytes) -> tuple[bytes, int]:
        """(body bytes of the complete chunks in ``buf``, how many bytes of ``buf`` were decoded)."""
        parts: list[bytes] = []
        pos = 0
        end = len(buf)
        state = self.state
        while pos < end:
            if state == _SIZE:
                i = buf.find(b"\n", pos)
                if i < 0:
                    if end - pos > MAX_LINE:
                        raise self._malformed("chunk header line too long")
                    break
                line = buf[pos:i]
                size = line.split(b";", 1)[0].strip(b" \t\r")
                if _HEX.fullmatch(size) is None:
                    raise self._malformed(f"bad chunk size line {line[:40]!r}")
                n = int(size, 16)
                pos = i + 1
                if n == 0:
                    state = _TRAILER
                    continue
                j = pos + n
                if j + 2 <= end and buf[j] == 13 and buf[j + 1] == 10:  # the whole chunk is here: the usual case
                    parts.append(buf[pos:j])
                    pos = j + 2
                    continue
                self.chunk_left = n
                state = _DATA
            elif state == _DATA:
                n = min(self.chunk_left, end - pos)
                parts.append(buf[pos:pos + n])
                pos += n
                self.chunk_left -= n
                if self.chunk_left:
                    break
                state = _DATA_END
            elif state == _DATA_END:
                if buf[pos] == 10:  # a bare LF after the chunk data (lenient)
                    pos += 1
                elif buf[pos] == 13:
                    if end - pos < 2:
                        break
                    if buf[pos + 1] != 10:
                        raise self._malformed("chunk data not followed by CRLF")
                    pos += 2
                else:
                    raise self._malformed("chunk data not followed by CRLF")
                state = _SIZE
            elif state == _TRAILER:
                i = buf.find(b"\n", pos)
                if i < 0:
                    if end - pos > MAX_LINE:
                        raise self._malformed("trailer line too long")
                    break
                line = buf[pos:i].rstrip(b"\r")
                pos = i + 1
                if not line:
                    state = _DONE
                    break
                # trailer fields are not used
            else:
                break
        self.state = state
        if not parts:
            return b"", pos
        return (parts[0] if len(parts) == 1 else b"".join(parts)), pos

    def _malformed(self, what: str) -> httpx.RemoteProtocolError:
        return httpx.RemoteProtocolError(f"malformed chunked body: {what}", request=self.request)

    def _incomplete(self) -> httpx.RemoteProtocolError:
        if self.mode == "chunked":
            msg = "peer closed connection without sending complete message body (incomplete chunked read)"
        else:
            msg = (f"peer closed connection without sending complete message body (received "
                   f"{self.expected - self.left} bytes, expected {self.expected})")
        return httpx.RemoteProtocolError(msg, request=self.request)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self.conn
        take = self._take
        while True:
            out = take()  # every complete frame; what stays in conn.buf is a partial one
            if out:
                left = len(conn.buf)
                yield out
                if len(conn.buf) != left:
                    continue  # bytes arrived while the consumer ran: decode them before waiting
            if self.state == _DONE:
                return
            if conn.eof:
                err = conn.read_failure(self.request)
                if err is not None:
                    raise err
                if self.mode == "close":
                    self.state = _DONE
                    return
                raise self._incomplete()
            if not await conn.wait(self.read_timeout):
                raise httpx.ReadTimeout("timed out", request=self.request)

    async def aclose(self) -> None:
        conn = self.conn
        if conn.transport is None or conn.transport.is_closing():
            conn.close()
            return
        trace = self.trace
        if trace is not None:
            await trace("http11.response_closed.started", {})
        conn.close()
        if trace is not None:
            await trace("http11.response_closed.complete", {"return_value": None})


class LeanTransport(httpx.AsyncBaseTransport):
    """Lean path for requests marked :data:`LEAN`; everything else through ``fallback`` (see the module docstring)."""

    def __init__(self, fallback: httpx.AsyncBaseTransport, verify: Any = True) -> None:
        self.fallback = fallback
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            ctx = httpx.create_ssl_context(verify=self._verify, trust_env=False)
            try:
                ctx.set_alpn_protocols(["http/1.1"])
            except (NotImplementedError, ssl.SSLError):
                pass
            self._ssl = ctx
        return self._ssl

    async def aclose(self) -> None:
        await self.fallback.aclose()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        ext = request.extensions
        if not ext.get(LEAN) or request.url.scheme not in ("http", "https") or "transfer-encoding" in request.headers:
            return await self.fallback.handle_async_request(request)
        return await self._lean(request, ext.get("trace"))

    async def _lean(self, request: httpx.Request, trace: Trace | None) -> httpx.Response:
        connect_timeout, read_timeout, write_timeout = _timeouts(request)
        body = request.content if isinstance(request.stream, httpx.ByteStream) else await request.aread()
        data = request_bytes(request, body)
        url = request.url
        tls = url.scheme == "https"
        host = url.host
        port = url.port or (443 if tls else 80)
        loop = asyncio.get_running_loop()
        conn = _Conn(loop)
        # -- connect
        if trace is not None:
            await trace("connection.connect_tcp.started", {"host": host, "port": port, "timeout": connect_timeout})
        try:
            async with asyncio.timeout(connect_timeout):
                if tls:
                    await loop.create_connection(lambda: conn, host, port, ssl=self._ssl_context(),
                                                 server_hostname=host)
                else:
                    await loop.create_connection(lambda: conn, host, port)
        except BaseException as exc:
            conn.close()
            if trace is not None and isinstance(exc, Exception):
                await trace("connection.connect_tcp.failed", {"exception": exc})
            if isinstance(exc, TimeoutError):
                raise httpx.ConnectTimeout("timed out", request=request) from exc
            if isinstance(exc, OSError):
                raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
            raise
        try:
            if trace is not None:
                await trace("connection.connect_tcp.complete", {"return_value": None})
                await trace("http11.send_request_headers.started", {"request": request})
            # -- send: one write (headers and body); like httpcore, a failed write is not raised here: the
            #    response read that follows reports the connection's state
            tr = conn.transport
            assert tr is not None
            if tr.is_closing() or conn.exc is not None:
                if trace is not None:
                    await trace("http11.send_request_headers.failed", {"exception": conn.exc})
            else:
                tr.write(data)
                if trace is not None:
                    await trace("http11.send_request_headers.complete", {"return_value": None})
                if conn.write_paused and not await conn.drained(write_timeout):
                    raise httpx.WriteTimeout("timed out", request=request)
            # -- receive the response head
            if trace is not None:
                await trace("http11.receive_response_headers.started", {"request": request})
            try:
                version, status, reason, headers = await self._head(conn, read_timeout, request)
            except Exception as exc:
                if trace is not None:
                    await trace("http11.receive_response_headers.failed", {"exception": exc})
                raise
            if trace is not None:
                await trace("http11.receive_response_headers.complete",
                            {"return_value": (version, status, reason, headers)})
            mode, length = body_framing(request.method, status, headers, request)
            stream = _Body(conn, mode, length, read_timeout, request, trace)
        except BaseException:
            conn.close()
            raise
        return httpx.Response(status, headers=headers, stream=stream,
                              extensions={"http_version": version, "reason_phrase": reason})

    async def _head(self, conn: _Conn, timeout: float | None,
                    request: httpx.Request) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
        scanned = 0
        while True:
            buf = conn.buf
            m = _HEAD_END.search(buf, max(0, scanned - 3))
            if m is not None:
                head = buf[:m.start()]
                conn.buf = buf[m.end():]
                conn.consumed()
                parsed = parse_head(head, request)
                if 100 <= parsed[1] < 200 and parsed[1] != 101:
                    scanned = 0  # an interim answer (100 Continue, 103 Early Hints): the real one follows
                    continue
                return parsed
            scanned = len(buf)
            if scanned > MAX_HEAD:
                raise httpx.RemoteProtocolError("response headers too large", request=request)
            if conn.eof:
                err = conn.read_failure(request)
                if err is not None:
                    raise err
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
            if not await conn.wait(timeout):
                raise httpx.ReadTimeout("timed out", request=request)
