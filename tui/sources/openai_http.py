"""The OpenAI-compatible HTTP layer shared by the load generator (``run``/``live``/``sweep``) and the
quality runner (``quality``).

One place for:

- the client factory and its TLS policy (:func:`make_client`, :func:`tls_verify`): verification is
  off only with ``--insecure``; ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name extra trusted CAs; no other
  environment setting (proxies, .netrc) is used; no redirects; a fresh connection per request;
- URL splitting (:func:`split_url`): server root, API base ending in ``/v1``, query string; user
  info never stays in a URL (it becomes a Basic header, see :func:`auth_headers`);
- request headers from an API key variable, URL user info and ``--header`` values, with the
  secrets to scrub (:func:`auth_headers`);
- optional request fields a server may reject (:data:`OPTIONAL_FIELDS`, :func:`rejected_fields`);
- error classes: HTTP status (:func:`status_class`) and exceptions (:func:`exception_class`,
  :func:`describe_exception`), with :data:`TRANSPORT_ERRORS`, the classes that mean "no HTTP
  answer at all";
- the server probe (:func:`probe`) run before any load or quality request: ``/v1/models`` must
  answer; unreachable, TLS and HTTP errors become one :class:`ProbeError` line.
"""

from __future__ import annotations

import errno
import http.cookiejar
import json
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from tui.core.clientlimit import CONNECT_ONLY, ERRNOS
from tui.core.redact import Scrubber, redact_url, url_secrets

#: Request fields a server may reject; sent first, then dropped (and noted) after a 400 that names them.
OPTIONAL_FIELDS = ("stream_options", "cache_prompt", "seed")

#: Error classes that mean the request got no HTTP answer (nothing about the model's output). ``client``: the
#: client's own resources ran out (:func:`client_errno`), so the request may never have left this machine.
TRANSPORT_ERRORS = frozenset({"connect", "connect_timeout", "tls", "read_timeout", "stream_reset", "client", "other"})

PROBE_CONNECT_TIMEOUT = 5.0
PROBE_READ_TIMEOUT = 10.0


class ProbeError(RuntimeError):
    """The endpoint cannot be used (unreachable, TLS, HTTP error): one line, already scrubbed."""


# ------------------------------------------------------------------ URLs and headers


def split_url(url: str) -> tuple[str, str, str]:
    """(server root, API base ending in /v1, query string) from a base URL given with or without /v1.

    User info (``user:password@``) is removed from both URLs (:func:`auth_headers` turns it into a
    Basic ``Authorization`` header when no API key is given).
    """
    p = urlsplit(url.strip())
    path = p.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    netloc = p.netloc.rpartition("@")[2]
    root = urlunsplit((p.scheme, netloc, path, "", ""))
    return root, root + "/v1", p.query


def auth_headers(url: str, api_key: str | None = None, extra: Iterable[tuple[str, str]] = (),
                 credentials: str | None = None) -> tuple[dict[str, str], list[str]]:
    """(request headers, secret strings to scrub from anything written).

    ``Authorization: Bearer KEY`` when ``api_key`` is given, else Basic from ``credentials`` (``user:password``, from
    ``--url-credentials-env``) or the URL's user info; ``extra`` headers (name, value) are added last. Secrets: the
    key, the Basic token, header values, the user name and password, URL query values.
    """
    headers: dict[str, str] = {}
    secrets: list[str] = []
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
        secrets.append(api_key)
    p = urlsplit(url.strip())
    if credentials:
        user, _, password = credentials.partition(":")
        secrets += [x for x in (user, password) if len(x) >= 4]
    elif p.username or p.password:
        user, password = unquote(p.username or ""), unquote(p.password or "")
    else:
        user = password = ""
    if (user or password) and "Authorization" not in headers:
        import base64

        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
        secrets.append(token)
    for k, v in extra:
        headers[k] = v
        if len(v) >= 4:
            secrets.append(v)
    secrets += url_secrets(url)
    secrets.sort(key=len, reverse=True)
    return headers, secrets


# ------------------------------------------------------------------ the client


def tls_verify(insecure: bool, environ: Mapping[str, str] | None = None) -> Any:
    """httpx ``verify``: False only with --insecure; an SSL context with SSL_CERT_FILE / SSL_CERT_DIR
    when either names an existing file / directory; else True (the default trust store)."""
    if insecure:
        return False
    env = os.environ if environ is None else environ
    cafile, capath = env.get("SSL_CERT_FILE"), env.get("SSL_CERT_DIR")
    cafile = cafile if cafile and os.path.isfile(cafile) else None
    capath = capath if capath and os.path.isdir(capath) else None
    if cafile or capath:
        try:
            return ssl.create_default_context(cafile=cafile, capath=capath)
        except (OSError, ssl.SSLError):
            return True
    return True


def make_client(
    *,
    headers: Mapping[str, str] | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float = 300.0,
    insecure: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
    params: str | None = None,
) -> httpx.AsyncClient:
    """The one way servewatch builds its HTTP client (see the module docstring for the policy).

    Without ``transport``: httpx's standard transport, wrapped in :class:`tui.sources.lean_http.LeanTransport`,
    which sends only the requests marked :data:`tui.sources.lean_http.LEAN` (the load generator's streamed
    completions) over its own lean HTTP/1.1 path and everything else through the standard one.
    """
    kw: dict[str, Any] = {}
    if params:
        kw["params"] = params
    verify = tls_verify(insecure)
    # fresh connection per request: no keep-alive pool to go stale (llama-server closes after each stream)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    if transport is None:
        from tui.sources.lean_http import LeanTransport

        transport = LeanTransport(httpx.AsyncHTTPTransport(verify=verify, limits=limits, trust_env=False),
                                  verify=verify)
    return httpx.AsyncClient(
        headers=dict(headers or {}),
        timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None),
        limits=limits,
        verify=verify,
        trust_env=False,
        follow_redirects=False,
        transport=transport,
        # no cookie jar: a cookie a server (or a load balancer's sticky session) sets must not follow later
        # requests, which would pin the whole load to one backend; it also costs CPU per request
        cookies=http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
        **kw,
    )


# ------------------------------------------------------------------ errors


def status_class(code: int) -> str:
    """Error class of a non-2xx HTTP status."""
    if code == 429:
        return "http_429"
    if 400 <= code < 500:
        return "http_4xx"
    if code >= 500:
        return "http_5xx"
    return "other"


def _is_tls(exc: BaseException) -> bool:
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 8:
        if isinstance(e, ssl.SSLError):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    text = str(exc)
    return any(k in text for k in ("SSL", "CERTIFICATE_VERIFY", "certificate verify", "TLS"))


#: errno number -> name of the client's own resources (tui.core.clientlimit.ERRNOS) on this platform
_CLIENT_ERRNOS = {getattr(errno, name): name for name in ERRNOS if hasattr(errno, name)}
_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\]")


def client_errno(exc: BaseException, *, connecting: bool = False) -> str | None:
    """The errno name when ``exc`` (or what it was raised from) is the client running out of its own resources:
    file descriptors (EMFILE, ENFILE), network buffers (ENOBUFS), and while ``connecting`` local ports
    (EADDRNOTAVAIL, and EADDRINUSE); else None (ECONNREFUSED, ECONNRESET, timeouts and the rest are the server's or
    the network's). Reads the exception chain (httpx -> httpcore -> OSError; the lean path's ConnectError is raised
    from the OSError), and the ``[Errno N]`` an aggregated OSError's message still names (asyncio's "Multiple
    exceptions" when every address of a host failed): one of them the client's own is enough, the server was then
    not asked. Messages of other exceptions (which may carry bytes the server sent) are never read for it."""
    seen = 0
    e: BaseException | None = exc
    texts: list[str] = []
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno in _CLIENT_ERRNOS:
            name = _CLIENT_ERRNOS[e.errno]
            if connecting or name not in CONNECT_ONLY:
                return name
        if isinstance(e, OSError):  # only the operating system's words: never a message carrying server bytes
            texts.append(str(e))
        e = e.__cause__ or e.__context__
        seen += 1
    for text in texts:
        for m in _ERRNO_TEXT.finditer(text):
            found = _CLIENT_ERRNOS.get(int(m.group(1)))
            if found is not None and (connecting or found not in CONNECT_ONLY):
                return found
    return None


def exception_class(exc: BaseException) -> str:
    """Error class of an httpx exception (all of them are :data:`TRANSPORT_ERRORS`); ``client`` when the client's own
    resources ran out (:func:`client_errno`)."""
    if client_errno(exc, connecting=isinstance(exc, httpx.ConnectError)) is not None:
        return "client"
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect_timeout"
    if isinstance(exc, httpx.ConnectError):
        return "tls" if _is_tls(exc) else "connect"
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
        return "read_timeout"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return "stream_reset"
    return "other"


def describe_exception(exc: BaseException) -> str:
    """A short human description of a transport failure (not yet scrubbed)."""
    cls = exception_class(exc)
    msg = str(exc) or type(exc).__name__
    if cls == "connect_timeout":
        return "connect timed out"
    if cls == "tls":
        return f"TLS failed ({msg}); pass --insecure to skip verification, or SSL_CERT_FILE=CA.pem to trust a CA"
    if cls == "read_timeout":
        return "no answer in time"
    if cls == "client":
        name = client_errno(exc, connecting=isinstance(exc, httpx.ConnectError))
        return f"{name}: {msg} (the client's own limit, not the server)"
    return msg


def error_message(body: str) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}`` and variants), else the text."""
    try:
        obj = json.loads(body)
    except ValueError:
        return body
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            m = err.get("message") or err.get("msg") or err.get("detail")
            return m if isinstance(m, str) else json.dumps(m if m is not None else err)[:200]
        if isinstance(err, str):
            return err
    return body


def rejected_fields(message: str, sent: Iterable[str], dropped: Iterable[str] = ()) -> list[str]:
    """Optional fields named in a 400's error message that were sent and not yet dropped.

    Judge the error *message* (:func:`error_message`), not the whole body: some servers echo the request.
    """
    gone = set(dropped)
    return [f for f in OPTIONAL_FIELDS if f in set(sent) and f not in gone and f in message]


# ------------------------------------------------------------------ the probe


@dataclass
class ProbeResult:
    models: list[str] = field(default_factory=list)  # ids from /v1/models ([] when it lists none)
    listing: bool = True  # False: the server has no /v1/models (404/405)
    server: dict = field(default_factory=dict)  # facts from tui.sources.metrics.server_info


async def probe(client: httpx.AsyncClient, url: str, *, scrub: Scrubber | None = None,
                connect_timeout: float = PROBE_CONNECT_TIMEOUT, read_timeout: float = PROBE_READ_TIMEOUT,
                facts: bool = True) -> ProbeResult:
    """Check that ``url`` answers as an OpenAI-compatible server before any real request.

    GET ``/v1/models``: a transport error (refused, timeout, TLS) or an HTTP error (401/403, 5xx, other
    4xx except 404/405) raises :class:`ProbeError` with one scrubbed line. Then, with ``facts``, the
    server facts (engine, build, context) from :func:`tui.sources.metrics.server_info`.
    """
    from tui.sources.metrics import server_info

    scrub = scrub or Scrubber(url_secrets(url))
    label = redact_url(url)
    root, api_base, _query = split_url(url)
    timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=read_timeout, pool=None)
    try:
        r = await client.get(api_base + "/models", timeout=timeout)
    except httpx.HTTPError as exc:
        if exception_class(exc) == "client":  # this machine's limit, not the server: say so (issue 36)
            raise ProbeError(f"could not open a connection to {label}: {scrub(describe_exception(exc))}: raise the "
                             "open-file limit (ulimit -n) or free local ports") from None
        raise ProbeError(f"cannot reach {label}: {scrub(describe_exception(exc))}") from None
    out = ProbeResult()
    code = r.status_code
    if code in (404, 405):
        out.listing = False
    elif code in (401, 403):
        raise ProbeError(f"{label} refused the request (HTTP {code} on /v1/models): check the API key "
                         f"(--api-key-env) and --header values")
    elif not 200 <= code < 300:
        msg = scrub(error_message(r.text[:2000]), 120, cut=len(r.text) > 2000)
        raise ProbeError(f"{label} answered HTTP {code} on /v1/models" + (f": {msg}" if msg else ""))
    else:
        try:
            data = r.json().get("data")
            out.models = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except Exception:
            raise ProbeError(f"{label} answered /v1/models with something that is not an OpenAI model list") from None
    if facts:
        try:
            out.server = await server_info(root, client=client)
        except Exception:
            out.server = {}
    return out
