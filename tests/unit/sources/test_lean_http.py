"""The lean HTTP/1.1 path under httpx (tui/sources/lean_http.py) gives what httpx's standard transport gives.

Every scripted answer below is fetched twice through the same client (``make_client``): once marked
``LEAN`` (the lean path), once not (httpx's standard transport, httpcore + h11), and the outcomes must match:
status, body bytes, exception class. The decoder is also checked alone on arbitrary splits of a body
(hypothesis), and the request body template of the executor against the plain ``json.dumps`` it replaces.
All traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from types import SimpleNamespace

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fault_server import closed_port
from tests.unit.sources.test_openai_http import cert  # noqa: F401 (a fixture: a throw-away certificate for 127.0.0.1)
from tui.core.redact import Scrubber
from tui.sources import openai_http as oh
from tui.sources.lean_http import LEAN, LeanTransport, _Body, body_framing, parse_head, request_bytes
from tui.sources.load.executor import Req, RequestExecutor

# ------------------------------------------------------------------ a scripted server

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes, ext: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n" % (len(data), ext, data)


RESET = object()  # close with SO_LINGER 0: the client sees a connection reset
STALL = object()  # write nothing more; wait until the client goes away
CLOSE = object()


class Scripted:
    """Answers every request with the same script: bytes to write, then CLOSE / RESET / STALL."""

    def __init__(self, script: list) -> None:
        self.script = script
        self.requests: list[bytes] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            n = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":", 1)[1])
            body = await reader.readexactly(n) if n else b""
            self.requests.append(head + body)
            for step in self.script:
                if step is CLOSE:
                    break
                if step is RESET:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if step is STALL:
                    await reader.read()  # until the client closes
                    break
                writer.write(step)
                await writer.drain()
                await asyncio.sleep(0)  # let the client run between pieces (not synchronisation: any split is valid)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"


async def fetch(client: httpx.AsyncClient, url: str, lean: bool, method: str = "POST") -> tuple:
    """(status, body, exception class name, exception text) of one request, read to its end."""
    ext = {LEAN: True} if lean else {}
    req = client.build_request(method, url, content=b'{"x":1}' if method == "POST" else None,
                               headers={"Accept": "text/event-stream"}, extensions=ext)
    status, body = None, b""
    try:
        resp = await client.send(req, stream=True)
        try:
            status = resp.status_code
            async for part in resp.aiter_raw():
                body += part
        finally:
            await resp.aclose()
    except httpx.HTTPError as exc:
        return status, body, type(exc).__name__, str(exc)
    return status, body, None, None


SSE = [b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n', b"data: [DONE]\n\n"]
LONG = bytes(range(256)) * 8

SCENARIOS = {
    "chunked": [CHUNKED_HEAD, chunk(SSE[0]), chunk(SSE[1]), b"0\r\n\r\n", CLOSE],
    "chunked_one_write": [CHUNKED_HEAD + chunk(SSE[0]) + chunk(SSE[1]) + b"0\r\n\r\n", CLOSE],
    "chunked_split_everywhere": [bytes([b]) for b in CHUNKED_HEAD + chunk(SSE[0]) + b"0\r\n\r\n"] + [CLOSE],
    "chunked_ext_and_trailer": [CHUNKED_HEAD, chunk(b"hello", b";name=v"), b"0\r\nX-Trailer: 1\r\n\r\n", CLOSE],
    "chunked_big": [CHUNKED_HEAD, chunk(LONG), chunk(LONG[:1000]), b"0\r\n\r\n", CLOSE],
    "length": [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", b"lo", CLOSE],
    "length_then_junk": [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhello", CLOSE],
    "length_zero": [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", STALL],
    "close_delimited": [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil", b" the end", CLOSE],
    "http10": [b"HTTP/1.0 200 OK\r\n\r\nold server", CLOSE],
    "lf_only_head": [b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", CLOSE],
    "no_content": [b"HTTP/1.1 204 No Content\r\n\r\n", STALL],
    "interim_100": [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", CLOSE],
    "status_404": [b'HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\n\r\n{"error":"x"}', CLOSE],
    "status_500_chunked": [b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(b"boom") + b"0\r\n\r\n",
                           CLOSE],
    "eof_before_response": [CLOSE],
    "eof_in_head": [b"HTTP/1.1 200 OK\r\nContent-Le", CLOSE],
    "reset_before_response": [RESET],
    "cut_chunked": [CHUNKED_HEAD, chunk(SSE[0]), CLOSE],
    "cut_in_chunk": [CHUNKED_HEAD, chunk(SSE[0])[:20], CLOSE],
    "cut_length": [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", CLOSE],
    "reset_mid_body": [CHUNKED_HEAD, chunk(SSE[0]), RESET],
    "bad_status_line": [b"HTTP/1.1 OK\r\n\r\n", CLOSE],
    "not_http": [b"SSH-2.0-OpenSSH\r\n\r\n", CLOSE],
    "bad_chunk_size": [CHUNKED_HEAD, b"zz\r\nhello\r\n0\r\n\r\n", CLOSE],
    "bad_content_length": [b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\nabc", CLOSE],
    "stall_before_head": [STALL],
    "stall_mid_body": [CHUNKED_HEAD, chunk(SSE[0]), STALL],
}


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_lean_path_matches_httpx_standard_transport(name):
    async with Scripted(SCENARIOS[name]) as srv:
        async with oh.make_client(read_timeout=0.3, connect_timeout=2.0) as client:
            want = await fetch(client, srv.url, lean=False)
            got = await fetch(client, srv.url, lean=True)
        assert srv.requests[0] == srv.requests[1]  # the same bytes on the wire
    assert got[:3] == want[:3], (got, want)
    if want[2] == "RemoteProtocolError" and ("disconnected" in want[3] or "incomplete chunked" in want[3]):
        assert got[3] == want[3]  # the wording the load generator's error details quote


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_head_request_has_no_body():
    async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", STALL]) as srv:
        async with oh.make_client(read_timeout=2.0) as client:
            assert await fetch(client, srv.url, lean=True, method="HEAD") == (200, b"", None, None)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_connect_refused_and_unmarked_requests_use_the_standard_transport():
    url = f"http://127.0.0.1:{closed_port()}/v1/chat/completions"
    async with oh.make_client(connect_timeout=2.0) as client:
        assert isinstance(client._transport, LeanTransport)
        got = await fetch(client, url, lean=True)
        want = await fetch(client, url, lean=False)
    assert got[2] == want[2] == "ConnectError"


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_trace_events_carry_what_the_executor_stamps():
    seen: list[str] = []

    async def trace(name: str, info: dict) -> None:
        seen.append(name)

    async with Scripted(SCENARIOS["chunked"]) as srv:
        async with oh.make_client(read_timeout=2.0) as client:
            req = client.build_request("POST", srv.url, content=b"{}", extensions={LEAN: True, "trace": trace})
            resp = await client.send(req, stream=True)
            await resp.aread()
            await resp.aclose()
    order = ["connection.connect_tcp.started", "connection.connect_tcp.complete", "http11.send_request_headers.started",
             "http11.send_request_headers.complete", "http11.receive_response_headers.started",
             "http11.receive_response_headers.complete", "http11.response_closed.started",
             "http11.response_closed.complete"]
    assert seen == order


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_nothing_written_to_a_connection_already_gone_is_reported_as_not_written():
    """The server accepts and closes at once: headers 'failed', never 'complete' (the executor then may re-send)."""
    seen: list[str] = []

    async def trace(name: str, info: dict) -> None:
        seen.append(name)

    async def slam(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(slam, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with oh.make_client(read_timeout=2.0) as client:
            transport = client._transport
            assert isinstance(transport, LeanTransport)
            # the first read of the fresh connection sees the close before anything is written: drive the
            # transport directly and let the loop deliver the server's FIN first
            req = client.build_request("POST", f"http://127.0.0.1:{port}/x", content=b"{}",
                                       extensions={LEAN: True, "trace": trace})
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await transport.handle_async_request(req)
    finally:
        server.close()
    assert "http11.send_request_headers.started" in seen
    # whether the FIN arrived before the write is up to the kernel; either way it is said exactly once
    assert seen.count("http11.send_request_headers.complete") + seen.count("http11.send_request_headers.failed") == 1


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_tls_follows_the_clients_verify_policy(cert):  # noqa: F811
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*cert)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=ctx)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/x"
    try:
        async with oh.make_client(read_timeout=5.0) as client:
            req = client.build_request("POST", url, content=b"{}", extensions={LEAN: True})
            with pytest.raises(httpx.ConnectError) as ei:
                await client.send(req)
            assert oh.exception_class(ei.value) == "tls"
        async with oh.make_client(read_timeout=5.0, insecure=True) as client:
            assert await fetch(client, url, lean=True) == (200, b"ok", None, None)
    finally:
        server.close()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_large_body_is_read_whole_with_the_socket_paused_and_resumed():
    big = bytes(range(256)) * 12000  # ~3 MB: more than the lean path buffers before it stops reading
    script = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big), big, CLOSE]
    async with Scripted(script) as srv:
        async with oh.make_client(read_timeout=5.0) as client:
            status, body, err, _ = await fetch(client, srv.url, lean=True)
    assert (status, err, len(body), body == big) == (200, None, len(big), True)


# ------------------------------------------------------------------ the pieces alone


def _encode_chunked(parts: list[bytes], ext: bool, trailer: bool) -> bytes:
    out = b"".join(chunk(p, b";k=v" if ext else b"") for p in parts if p)
    return out + b"0\r\n" + (b"X-T: 1\r\n" if trailer else b"") + b"\r\n"


def _decode(mode: str, length: int, wire: bytes, cuts: list[int]) -> tuple[bytes, bool]:
    conn = SimpleNamespace(buf=b"", paused=False, consumed=lambda: None)
    body = _Body(conn, mode, length, None, httpx.Request("GET", "http://127.0.0.1/"), None)  # type: ignore[arg-type]
    out = b""
    prev = 0
    for c in sorted(set(cuts)) + [len(wire)]:
        conn.buf += wire[prev:c]
        prev = c
        out += body._take()
    return out, body.state == 4


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.binary(max_size=40), max_size=8), ext=st.booleans(), trailer=st.booleans(),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_chunked_decoding_is_independent_of_how_the_bytes_are_split(parts, ext, trailer, cuts):
    wire = _encode_chunked(parts, ext, trailer)
    out, done = _decode("chunked", 0, wire, [c for c in cuts if c <= len(wire)])
    assert out == b"".join(parts) and done


@settings(max_examples=100, deadline=None)
@given(payload=st.binary(max_size=300), cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=8))
def test_length_decoding_stops_at_the_length(payload, cuts):
    out, done = _decode("length", len(payload), payload + b"extra", [c for c in cuts if c <= len(payload)])
    assert out == payload and done


def test_request_bytes_and_illegal_headers():
    req = httpx.Request("POST", "http://127.0.0.1:8/v1/x?a=1", content=b"{}", headers={"X-A": "b"})
    data = request_bytes(req, b"{}")
    assert data.startswith(b"POST /v1/x?a=1 HTTP/1.1\r\n") and data.endswith(b"\r\n\r\n{}")
    assert b"\r\nX-A: b\r\n" in data and b"\r\nContent-Length: 2\r\n" in data and b"\r\nHost: 127.0.0.1:8\r\n" in data
    with pytest.raises(httpx.LocalProtocolError):
        request_bytes(httpx.Request("GET", "http://h/", headers={"X-A": "b\r\nInjected: 1"}), b"")


def test_head_parsing_and_framing():
    r = httpx.Request("GET", "http://h/")
    v, status, reason, headers = parse_head(b"HTTP/1.1 200 OK\r\nA: 1\r\nB:  two  ", r)
    assert (v, status, reason, headers) == (b"HTTP/1.1", 200, b"OK", [(b"A", b"1"), (b"B", b"two")])
    assert body_framing("GET", 200, [(b"Transfer-Encoding", b"gzip, chunked")], r) == ("chunked", 0)
    assert body_framing("GET", 200, [(b"Transfer-Encoding", b"gzip")], r) == ("close", 0)
    assert body_framing("GET", 200, [(b"Content-Length", b"7"), (b"content-length", b"7")], r) == ("length", 7)
    assert body_framing("HEAD", 200, [(b"Content-Length", b"7")], r) == ("length", 0)
    assert body_framing("GET", 304, [], r) == ("length", 0)
    for bad in (b"HTTP/1.1 2000 OK", b"HTTP/2 200", b"200 OK"):
        with pytest.raises(httpx.RemoteProtocolError):
            parse_head(bad, r)
    with pytest.raises(httpx.RemoteProtocolError):
        parse_head(b"HTTP/1.1 200 OK\r\nA: 1\r\n folded", r)
    with pytest.raises(httpx.RemoteProtocolError):
        body_framing("GET", 200, [(b"Content-Length", b"7"), (b"Content-Length", b"8")], r)


# ------------------------------------------------------------------ the executor's request body


@settings(max_examples=200, deadline=None)
@given(prompt=st.text(max_size=80), model=st.one_of(st.none(), st.text(max_size=20)), chat=st.booleans(),
       ignore_eos=st.booleans(), out=st.integers(min_value=0, max_value=1 << 40),
       dropped=st.sets(st.sampled_from(["stream_options", "cache_prompt"])))
@pytest.mark.slow
def test_body_template_gives_exactly_the_json_it_replaces(prompt, model, chat, ignore_eos, out, dropped):
    ex = RequestExecutor(httpx.AsyncClient(), "http://127.0.0.1:9/v1/x", "", chat=chat, model=model,
                         ignore_eos=ignore_eos, read_timeout=1.0, token_offsets=False, scrub=Scrubber([]),
                         say=lambda s: None)
    ex.dropped.update(dropped)
    req = Req("r-1", "measure", 1.0, 1, None, 4, out, prompt, 0.0)
    assert ex.body(req) == ex.body_reference(req)
    assert json.loads(ex.body(req))["max_tokens"] == out
    ex.dropped.clear()  # the template follows a change of the dropped fields and of the model
    ex.model = "other-model"
    assert ex.body(req) == ex.body_reference(req)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_large_request_body_goes_out_whole():
    """A long prompt is more than the socket takes at once: the rest follows while the answer is awaited."""
    async with Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", CLOSE]) as srv:
        async with oh.make_client(read_timeout=5.0) as client:
            body = b'{"p":"' + b"x" * 3_000_000 + b'"}'
            req = client.build_request("POST", srv.url, content=body, extensions={LEAN: True})
            resp = await client.send(req)
            assert (resp.status_code, resp.content) == (200, b"ok")
    assert srv.requests[0].endswith(body)
