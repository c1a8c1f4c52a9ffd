"""Run as ``python -m tests.support.fd_paths URL N`` under a low open-file limit: N concurrent streamed requests to
URL through the load generator's executor on each HTTP path -- the lean HTTP/1.1 path (``make_client``: requests
marked LEAN) and httpx's standard transport (``httpx.AsyncHTTPTransport``, what every unmarked request and a
client without the lean transport use) -- and print, per path, the error classes and errno names the records got
(one JSON line). The test that runs it (tests/cli/test_client_limits_cli.py) sets the limit in the child only."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from time import perf_counter

import httpx

import tui.sources.openai_http as oh
from tui.core.clientlimit import kind_of
from tui.core.redact import Scrubber
from tui.sources.load.executor import Req, RequestExecutor


async def _path(url: str, n: int, lean: bool) -> dict:
    root, api, query = oh.split_url(url)
    if lean:
        client = oh.make_client(connect_timeout=5.0, read_timeout=10.0)
    else:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        client = oh.make_client(connect_timeout=5.0, read_timeout=10.0,
                                transport=httpx.AsyncHTTPTransport(limits=limits, trust_env=False))
    ex = RequestExecutor(client, api + "/chat/completions", query, chat=True, model="fault-model", ignore_eos=False,
                         read_timeout=10.0, token_offsets=False, scrub=Scrubber(), say=lambda _l: None)
    reqs = [Req(f"[r{i}]", "measure", 1.0, 1, None, 8, 4, f"[r{i}] hello", perf_counter()) for i in range(n)]
    try:
        await asyncio.gather(*(ex.execute(r) for r in reqs))
    finally:
        await client.aclose()
    return {"errors": dict(Counter(str(r.error) for r in reqs)),
            "kinds": dict(Counter(kind_of(r.detail) for r in reqs if r.error == "client"))}


async def _main(url: str, n: int) -> dict:
    return {"lean": await _path(url, n, True), "httpx": await _path(url, n, False)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(sys.argv[1], int(sys.argv[2])))))
