"""The shared OpenAI-HTTP layer (tui/sources/openai_http.py): URL split, headers, TLS policy, error
classes, the probe, and `servewatch quality` refusing endpoints it cannot use (exit 2, one line).

The servers here are small in-test servers on 127.0.0.1 (plain HTTP and TLS with a throw-away
self-signed certificate made by the `openssl` command; those tests skip without it).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.fault_server import closed_port
from tui.cli import main
from tui.core.redact import Scrubber
from tui.sources import openai_http as oh
from tui.sources import quality_runner
from tui.sources.load import generator as loadgen


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_GET(self):
        srv = self.server
        srv.log.append(("GET", self.path, dict(self.headers)))
        if self.path.startswith("/v1/models"):
            code = srv.models_status
            if code == 200:
                return self._send(200, {"object": "list", "data": [{"id": "tiny-model", "object": "model"}]})
            return self._send(code, {"error": {"message": f"models says {code}", "code": code}})
        return self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        srv = self.server
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        srv.log.append(("POST", self.path, dict(self.headers)))
        if self.path.startswith("/v1/chat/completions"):
            return self._send(200, {"choices": [{"message": {"role": "assistant", "content": "42"},
                                                 "finish_reason": "stop"}], "usage": {"prompt_tokens": 3}})
        if self.path.startswith("/v1/completions"):
            return self._send(200, {"choices": [{"text": "42", "finish_reason": "stop"}]})
        del body
        return self._send(404, {"error": {"message": "not found"}})


class TinyServer:
    """An OpenAI-shaped server in a thread; ``models_status`` sets the answer of GET /v1/models."""

    def __init__(self, models_status: int = 200, tls: tuple[str, str] | None = None) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.models_status = models_status
        self.httpd.log = []
        self.scheme = "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def log(self) -> list:
        return self.httpd.log

    def __enter__(self) -> TinyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[str, str]:
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.skip("no openssl command to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    crt, key = d / "cert.pem", d / "key.pem"
    r = subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {r.stderr[-200:]!r}")
    return str(crt), str(key)


# ------------------------------------------------------------------ pure pieces


def test_split_url_and_auth_headers():
    assert oh.split_url("http://h:8000/v1/") == ("http://h:8000", "http://h:8000/v1", "")
    assert oh.split_url("https://u:pw@h/api/v1?k=secretvalue") == ("https://h/api", "https://h/api/v1", "k=secretvalue")
    headers, secrets = oh.auth_headers("https://user:passw0rd@h/v1?key=qsecret1", None, [("X-Token", "hdrsecret")])
    assert headers["Authorization"].startswith("Basic ") and headers["X-Token"] == "hdrsecret"
    for s in ("passw0rd", "qsecret1", "hdrsecret", headers["Authorization"][6:]):
        assert s in secrets
    headers, secrets = oh.auth_headers("http://h/v1", "sk-abc123456789", [])
    assert headers == {"Authorization": "Bearer sk-abc123456789"} and "sk-abc123456789" in secrets
    # the load generator and the quality runner split URLs with the same function
    url = "https://u:pw@h/api/v1?k=secretvalue"
    gen = loadgen.LoadGenerator(loadgen.LoadConfig(url=url, api_key_env=None), emit=lambda d: None)
    assert (gen.root, gen.api_base, gen._query) == oh.split_url(url) and quality_runner.split_url is oh.split_url


def test_status_classes_and_rejected_fields():
    assert [oh.status_class(c) for c in (400, 401, 404, 429, 500, 503, 302)] == [
        "http_4xx", "http_4xx", "http_4xx", "http_429", "http_5xx", "http_5xx", "other"]
    msg = oh.error_message('{"error": {"message": "unknown field: stream_options"}}')
    assert msg == "unknown field: stream_options"
    assert oh.rejected_fields(msg, ["stream_options", "cache_prompt"]) == ["stream_options"]
    assert oh.rejected_fields(msg, ["cache_prompt"]) == []  # not sent: nothing to drop
    assert oh.rejected_fields(msg, ["stream_options"], dropped=["stream_options"]) == []
    # judged on the message, not an echoed request body
    echoed = oh.error_message('{"error": {"message": "bad max_tokens"}, "request": {"seed": 1}}')
    assert oh.rejected_fields(echoed, ["seed"]) == []


def test_tls_verify_policy(tmp_path):
    assert oh.tls_verify(True, {"SSL_CERT_FILE": "/nonexistent"}) is False
    assert oh.tls_verify(False, {}) is True
    assert oh.tls_verify(False, {"SSL_CERT_FILE": str(tmp_path / "missing.pem")}) is True


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_tls_verify_uses_ssl_cert_file(cert):
    ctx = oh.tls_verify(False, {"SSL_CERT_FILE": cert[0]})
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED


def test_both_clients_come_from_the_one_factory(monkeypatch):
    made = []
    real = oh.make_client

    def spy(**kw):
        made.append(kw)
        return real(**kw)

    monkeypatch.setattr(oh, "make_client", spy)
    gen = loadgen.LoadGenerator(loadgen.LoadConfig(url="https://h/v1", insecure=True, api_key_env=None),
                                emit=lambda d: None)
    asyncio.run(gen._make_client().aclose())
    runner = quality_runner.QualityRunner("https://h/v1", insecure=True)
    asyncio.run(runner._client().aclose())
    assert [m["insecure"] for m in made] == [True, True]


# ------------------------------------------------------------------ the probe


def _probe(url: str, **kw) -> oh.ProbeResult:
    async def go():
        async with oh.make_client(**kw) as client:
            return await oh.probe(client, url, scrub=Scrubber(["sk-probe-secret-123"]))
    return asyncio.run(go())


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_probe_refuses_unreachable_http_errors_and_tls_in_one_line():
    with pytest.raises(oh.ProbeError, match="cannot reach http://127.0.0.1:"):
        _probe(f"http://127.0.0.1:{closed_port()}/v1")
    for code, words in ((500, "answered HTTP 500"), (503, "answered HTTP 503"), (401, "refused the request"),
                        (403, "refused the request"), (429, "answered HTTP 429")):
        with TinyServer(models_status=code) as srv:
            with pytest.raises(oh.ProbeError) as ei:
                _probe(srv.url)
            assert words in str(ei.value) and "\n" not in str(ei.value)
    with TinyServer(models_status=200) as srv:
        res = _probe(srv.url)
        assert res.models == ["tiny-model"] and res.listing
        # TLS spoken to a plain-HTTP server: a TLS failure, named as such
        with pytest.raises(oh.ProbeError, match="TLS") as ei:
            _probe(srv.url.replace("http://", "https://"))
        assert "--insecure" in str(ei.value)
    with TinyServer(models_status=404) as srv:
        assert _probe(srv.url).listing is False  # no listing is not an error (a --model is then needed)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_probe_tls_self_signed_is_refused_unless_insecure_or_trusted(cert):
    with TinyServer(tls=cert) as srv:
        with pytest.raises(oh.ProbeError, match="TLS"):
            _probe(srv.url)
        assert _probe(srv.url, insecure=True).models == ["tiny-model"]


# ------------------------------------------------------------------ `servewatch quality`


def _quality(tmp_path, *argv) -> tuple[int, Path]:
    out = tmp_path / "q.json"
    if out.exists():
        out.unlink()
    from tui.cli.quality import default_set_path

    # the small bundled starter set (the HTTP behaviour is under test, not the suite)
    return main(["quality", *argv, "--set", str(default_set_path()), "--out", str(out),
                 "--long-context-tokens", "200"]), out


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_quality_refuses_endpoints_it_cannot_use(tmp_path, capsys):
    dead = f"http://127.0.0.1:{closed_port()}"
    with TinyServer(models_status=500) as bad500, TinyServer(models_status=401) as bad401, TinyServer() as good:
        for argv, words in (
            (["--url", dead, "--baseline-url", dead], "cannot reach"),
            (["--url", good.url, "--baseline-url", dead], "cannot reach"),
            (["--url", bad500.url, "--baseline-url", good.url], "HTTP 500"),
            (["--url", good.url, "--baseline-url", bad401.url], "refused the request (HTTP 401"),
            (["--url", good.url.replace("http://", "https://"), "--baseline-url", good.url], "TLS"),
        ):
            rc, out = _quality(tmp_path, *argv)
            printed = capsys.readouterr()
            err = printed.err.strip().splitlines()
            assert rc == 2 and not out.exists(), argv
            assert len(err) == 1 and words in err[0] and "Traceback" not in printed.err, (argv, printed.err)
            assert "verdict" not in printed.out
        # no completion request was sent anywhere: the probe came first
        assert not [e for s in (bad500, bad401, good) for e in s.log if e[0] == "POST" and "completions" in e[1]]


@pytest.mark.slow
def test_quality_honours_insecure_and_ssl_cert_file_like_run(tmp_path, capsys, monkeypatch, cert):
    with TinyServer(tls=cert) as srv:
        rc, out = _quality(tmp_path, "--url", srv.url, "--baseline-url", srv.url)
        assert rc == 2 and "TLS" in capsys.readouterr().err and not out.exists()
        rc, out = _quality(tmp_path, "--url", srv.url, "--baseline-url", srv.url, "--insecure")
        doc = json.loads(out.read_text())
        # the same server on both sides, 22 identical pairs: answered, compared, and (honestly) no evidence
        assert rc == 3 and doc["verdict"]["state"] == "NO_EVIDENCE" and doc["comparison"]["paired"] == 22
        assert doc["candidate"]["errors_by_class"] == {}
        assert doc["insecure"] is True
        capsys.readouterr()
        monkeypatch.setenv("SSL_CERT_FILE", cert[0])
        rc, out = _quality(tmp_path, "--url", srv.url, "--baseline-url", srv.url)
        doc = json.loads(out.read_text())
        assert rc == 3 and doc["comparison"]["paired"] == 22 and doc["insecure"] is False


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_quality_sends_query_and_basic_auth_from_the_url_and_never_writes_them(tmp_path, capsys):
    with TinyServer() as srv:
        url = srv.url.replace("http://", "http://alice:pw-secret-77@") + "?api-version=qsecret-88"
        rc, out = _quality(tmp_path, "--url", url, "--baseline-url", url, "--api-key-env", "SW_NO_SUCH_VAR")
        text = out.read_text()
        printed = capsys.readouterr()
        assert rc == 3
        posts = [e for e in srv.log if e[0] == "POST"]
        assert posts and all("api-version=qsecret-88" in p for _, p, _ in posts)
        assert all(h.get("Authorization", "").startswith("Basic ") for _, _, h in posts)
        for secret in ("pw-secret-77", "qsecret-88"):
            assert secret not in text and secret not in printed.out and secret not in printed.err


# ------------------------------------------------------------------ `servewatch run` probes first


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_run_refuses_an_endpoint_the_probe_refuses(tmp_path, capsys):
    """`run` checks the server with the shared probe: 401/403/5xx on /v1/models, or no server at all, is one
    line and exit 2 before any load request (it used to ignore the answer and load a server that refuses)."""
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    with TinyServer(models_status=401) as bad401, TinyServer(models_status=503) as bad503:
        for url, words in ((bad401.url, "refused the request (HTTP 401"), (bad503.url, "answered HTTP 503"),
                           (dead, "cannot reach")):
            rec = tmp_path / "run.jsonl"
            rc = main(["run", "--url", url, "--model", "m", "--concurrency", "1", "--requests", "1", "--no-gpu",
                       "--record", str(rec)])
            printed = capsys.readouterr()
            err = printed.err.strip().splitlines()
            assert rc == 2, (url, printed.err)
            assert len(err) == 1 and words in err[0] and "Traceback" not in printed.err, (url, printed.err)
            assert not rec.exists()  # no empty record file left behind
        assert not [e for s in (bad401, bad503) for e in s.log if e[0] == "POST"]


async def test_the_client_keeps_no_cookie_a_server_sets():
    """A sticky-session cookie must not follow later requests (it would pin the load to one backend)."""
    import httpx

    from tui.sources import openai_http as ohttp

    seen = []

    def handler(req):
        seen.append(req.headers.get("cookie"))
        return httpx.Response(200, headers={"set-cookie": "SERVERID=backend-1; Path=/"}, text="ok", request=req)

    client = ohttp.make_client(transport=httpx.MockTransport(handler))
    for _ in range(3):
        await client.get("http://127.0.0.1:1/v1/models")
    await client.aclose()
    assert seen == [None, None, None] and not dict(client.cookies)
