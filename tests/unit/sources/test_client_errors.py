"""Issue 36: the load generator tells its own resource failures (the ``client`` error class) from the server's.

The exception chains both HTTP paths raise (httpx -> httpcore -> OSError; the lean path's ConnectError raised from
the OSError, its ReadError chained to the connection's error), the executor's classification, the step end record,
the closed loop's back-off and the open-file limit recorded in the header. The real run under a low limit is
tests/cli/test_client_limits_cli.py.
"""

from __future__ import annotations

import asyncio
import errno
import resource
from time import perf_counter

import httpx
import pytest

import tui.sources.openai_http as oh
from tui.core.redact import Scrubber
from tui.sources import lean_http
from tui.sources.load import sizing, steps
from tui.sources.load.executor import Req, RequestExecutor


def _raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as e:
            raise outer from e
    except BaseException as got:
        return got


def _oserr(code: int) -> OSError:
    return OSError(code, f"[Errno {code}] {errno.errorcode.get(code, '?')}")


@pytest.mark.parametrize(("exc", "connecting", "want"), [
    (_raised_from(httpx.ConnectError("x"), _oserr(errno.EMFILE)), True, "EMFILE"),
    (_raised_from(httpx.ConnectError("x"), _oserr(errno.ENFILE)), True, "ENFILE"),
    (_raised_from(httpx.ConnectError("x"), _oserr(errno.EADDRNOTAVAIL)), True, "EADDRNOTAVAIL"),
    (_raised_from(httpx.ConnectError("x"), _oserr(errno.EADDRINUSE)), True, "EADDRINUSE"),
    (_raised_from(httpx.ReadError("x"), _oserr(errno.EADDRINUSE)), False, None),  # only while connecting
    (_raised_from(httpx.WriteError("x"), _oserr(errno.ENOBUFS)), False, "ENOBUFS"),
    (_raised_from(httpx.ConnectError("x"), ConnectionRefusedError(errno.ECONNREFUSED, "refused")), True, None),
    (_raised_from(httpx.ReadError("x"), ConnectionResetError(errno.ECONNRESET, "reset")), False, None),
    (httpx.ConnectTimeout("timed out"), True, None),
    # asyncio's aggregate when every address of a host failed: the OSError's own words still name the errno
    (_raised_from(httpx.ConnectError("x"), OSError("Multiple exceptions: [Errno 111] Connect call failed, "
                                                   "[Errno 24] Too many open files")), True, "EMFILE"),
    # bytes a server sent are never read for an errno: a hostile status line cannot make its failure the client's
    (httpx.RemoteProtocolError("malformed status line b'HTTP/1.1 [Errno 24] Too many open files'"), False, None),
])
def test_client_errno_reads_the_chain(exc, connecting, want):
    assert oh.client_errno(exc, connecting=connecting) == want
    assert (oh.exception_class(exc) == "client") == (want is not None and (connecting or want != "EADDRINUSE"))


def test_the_lean_paths_read_error_keeps_the_connections_os_error():
    conn = lean_http._Conn(asyncio.new_event_loop())
    try:
        conn.exc = _oserr(errno.ENOBUFS)
        err = conn.read_failure(httpx.Request("GET", "http://127.0.0.1/"))
        assert isinstance(err, httpx.ReadError) and oh.client_errno(err) == "ENOBUFS"
    finally:
        conn.loop.close()


def _executor(handler) -> tuple[RequestExecutor, httpx.AsyncClient]:
    client = oh.make_client(transport=httpx.MockTransport(handler))
    ex = RequestExecutor(client, "http://127.0.0.1:9/v1/chat/completions", "", chat=True, model="m", ignore_eos=False,
                         read_timeout=5.0, token_offsets=False, scrub=Scrubber(), say=lambda _l: None)
    return ex, client


@pytest.mark.parametrize(("raised", "cls", "lead"), [
    (_raised_from(httpx.ConnectError("connect failed"), _oserr(errno.EMFILE)), "client", "EMFILE: "),
    (_raised_from(httpx.WriteError("write failed"), _oserr(errno.ENOBUFS)), "client", "ENOBUFS: "),
    (_raised_from(httpx.ConnectError("connect failed"), ConnectionRefusedError(111, "refused")), "connect", ""),
])
async def test_the_executor_records_the_class_and_the_errno(raised, cls, lead):
    def handler(request):
        raise raised

    ex, client = _executor(handler)
    req = Req("r1", "measure", 1.0, 1, None, 8, 4, "hello", perf_counter())
    req.wrote = True  # the write error is not re-sent
    try:
        await ex.execute(req)
    finally:
        await client.aclose()
    assert req.error == cls and req.detail.startswith(lead)


# ---------------------------------------------------------------- the step, the loop, the header


def test_the_step_end_record_is_client_limited_and_says_so():
    st = steps.Step(4, 1, "measure", "closed")
    for _ in range(3):
        st.add(0.001, None, 0.1, 8)
    st.add(0.001, "client", None, 0)
    st.t1 = st.t0 + 2.0
    end = steps.step_end_record(st, 1.8e9, client_text="client_limited: 1 of 4 requests failed in the client")
    assert end["client_limited"] is True and end["errors"] == {"client": 1}
    assert end["client_limited_note"].startswith("client_limited: 1 of 4")
    assert "CLIENT-LIMITED: 1 requests failed in the client" in steps.describe_step(end)
    st2 = steps.Step(4, 1, "measure", "closed")
    st2.add(0.001, "http_5xx", None, 0)
    st2.t1 = st2.t0 + 1.0
    assert "client_limited" not in steps.step_end_record(st2, 1.8e9)


async def test_a_closed_loop_backs_off_while_its_requests_fail_in_the_client(monkeypatch):
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(s, *a, **k):
        slept.append(s)
        await real_sleep(0)

    monkeypatch.setattr(steps.asyncio, "sleep", fake_sleep)
    results = iter([True] * 9 + [False, True])

    async def unit(_now):
        return next(results)

    st = steps.Step(1, 1, "measure", "closed")
    st.t0 = perf_counter()
    await steps.closed_loops(st, 1, 11, None, lambda: False, unit)
    assert slept[:8] == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0]  # doubling, capped at CLIENT_BACKOFF_MAX_S
    assert slept[8:] == [1.0, 0.01]  # a request that did not fail in the client resets it


def test_the_fd_limit_block_and_the_shortfall_warning():
    block = sizing.raise_fd_limit()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert block["soft"] == (None if soft == resource.RLIM_INFINITY else soft)
    assert block["hard"] == (None if hard == resource.RLIM_INFINITY else hard)
    assert sizing.fd_shortfall({"soft": 64}, 100).startswith("up to 100 connections at once need about 132")
    assert sizing.fd_shortfall({"soft": 65536}, 100) is None
    assert sizing.fd_shortfall({"soft": None}, 100) is None


async def test_a_probe_that_cannot_open_a_connection_says_it_is_this_machine():
    def handler(request):
        raise _raised_from(httpx.ConnectError("connect failed"), _oserr(errno.EMFILE))

    client = oh.make_client(transport=httpx.MockTransport(handler))
    try:
        with pytest.raises(oh.ProbeError) as got:
            await oh.probe(client, "http://127.0.0.1:9/v1", facts=False)
    finally:
        await client.aclose()
    msg = str(got.value)
    assert msg.startswith("could not open a connection to http://127.0.0.1:9/v1: EMFILE") and "ulimit -n" in msg
