"""A minimal stdlib asyncio raw-socket streaming client: the yardstick servewatch's load generator is measured against.

    python bench/raw_client.py --port P --concurrency 64 --requests 640 --out /tmp/raw.jsonl      # closed loop
    python bench/raw_client.py --port P --rate 200 --arrival poisson --requests 2000 --out ...     # open loop

Standard library only (no httpx, no h11). Per request: a NEW TCP connection (``TCP_NODELAY``), one hand-written
HTTP/1.1 ``POST /v1/chat/completions`` (same body shape and prompt size as servewatch sends: ``[id] Repeat these
words: ...``, ``stream: true``, ``stream_options.include_usage``), then the response is read with plain
``StreamReader.read``: headers, chunked transfer decoding, SSE framing (blank-line separated ``data:`` events) and one
``json.loads`` per event to find the first event with non-empty ``delta.content`` (or completions ``text``).

Stamps (``time.perf_counter()``, CLOCK_MONOTONIC on Linux, comparable with the delay server's own stamps):
``t_intended`` (closed loop: when the worker became free; open loop: the scheduled arrival), ``t_sent`` (right
before the request bytes are written, after the connection is up), ``t_first`` (right after the read that delivered
the first content token returned), ``t_end`` (``[DONE]`` or end of stream).

Writes one JSONL line per request to ``--out`` and prints one JSON summary line on stdout: requests, complete,
errors, content tokens, ``cpu_s`` (this process's CPU time over the traffic window), ``wall_s``, ``rss_mb`` (peak).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import socket
import sys
import time
from time import perf_counter

_FILLER = " ".join(("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
                    "sigma tau upsilon phi chi psi omega").split() * 8)


class Target:
    def __init__(self, host: str, port: int, path: str, model: str, prompt_chars: int, max_tokens: int) -> None:
        self.host = host
        self.port = port
        self.path = path
        self.model = model
        self.filler = (_FILLER * (1 + prompt_chars // len(_FILLER)))[:prompt_chars]
        self.max_tokens = max_tokens
        self.chat = path.endswith("chat/completions")

    def request_bytes(self, rid: str) -> bytes:
        prompt = f"[{rid}] Repeat these words: {self.filler}"
        body: dict = {"model": self.model}
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body.update(max_tokens=self.max_tokens, stream=True, stream_options={"include_usage": True},
                    cache_prompt=False)
        data = json.dumps(body, separators=(",", ":")).encode()
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Accept: text/event-stream\r\nAccept-Encoding: identity\r\nX-Request-Id: {rid}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n")
        return head.encode("latin-1") + data


def _dechunk(buf: bytearray, out: list) -> bool:
    """Move complete chunk payloads from ``buf`` to ``out``; True at the terminating 0-size chunk."""
    while True:
        i = buf.find(b"\r\n")
        if i < 0:
            return False
        size = int(bytes(buf[:i]).split(b";", 1)[0], 16)
        if size == 0:
            return True
        if len(buf) < i + 4 + size:
            return False
        out.append(bytes(buf[i + 2: i + 2 + size]))
        del buf[: i + 4 + size]


async def one_request(t: Target, rid: str, t_intended: float) -> dict:
    pc = perf_counter
    rec: dict = {"id": rid, "t_intended": t_intended, "t_sent": None, "t_first": None, "t_end": None,
                 "tokens": 0, "finish": None, "error": None}
    writer = None
    try:
        reader, writer = await asyncio.open_connection(t.host, t.port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = t.request_bytes(rid)
        rec["t_sent"] = pc()
        writer.write(data)
        await writer.drain()
        # response headers
        buf = b""
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                rec["error"] = "closed before headers"
                return rec
            buf += chunk
            h = buf.find(b"\r\n\r\n")
            if h >= 0:
                break
        t_read = pc()
        head = buf[:h].decode("latin-1").lower()
        status = int(head.split(" ", 2)[1])
        if status != 200:
            rec["error"] = f"http {status}"
            return rec
        chunked = "transfer-encoding: chunked" in head
        raw = bytearray(buf[h + 4:])
        sse = b""
        n = 0
        t_first = None
        finish = None
        done = False
        ended = False
        loads = json.loads
        while True:
            if chunked:
                pieces: list = []
                ended = _dechunk(raw, pieces)
                payload = b"".join(pieces)
            else:
                payload = bytes(raw)
                raw.clear()
            if payload:
                sse = sse + payload if sse else payload
                if b"\r" in sse:
                    sse = sse.replace(b"\r\n", b"\n")
                *events, sse = sse.split(b"\n\n")
                for ev in events:
                    for line in ev.split(b"\n"):
                        if not line.startswith(b"data:"):
                            continue
                        d = line[5:].strip()
                        if d == b"[DONE]":
                            done = True
                            break
                        obj = loads(d)
                        ch = obj.get("choices")
                        if ch:
                            c0 = ch[0]
                            delta = c0.get("delta")
                            text = delta.get("content") if delta is not None else c0.get("text")
                            if text:
                                n += 1
                                if t_first is None:
                                    t_first = t_read
                            if c0.get("finish_reason"):
                                finish = c0["finish_reason"]
                    if done:
                        break
            if done or ended:
                break
            chunk = await reader.read(65536)
            t_read = pc()
            if not chunk:
                break
            raw += chunk
        rec["t_end"] = pc()
        rec["t_first"] = t_first
        rec["tokens"] = n
        rec["finish"] = finish
        if not done:
            rec["error"] = "no [DONE]"
        elif n == 0:
            rec["error"] = "no content"
        return rec
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"[:200]
        return rec
    finally:
        if rec["t_end"] is None:
            rec["t_end"] = perf_counter()
        if writer is not None:
            writer.close()


async def run_closed(t: Target, concurrency: int, n_requests: int, tag: str) -> list[dict]:
    out: list[dict] = []
    issued = 0

    async def worker() -> None:
        nonlocal issued
        while issued < n_requests:
            issued += 1
            out.append(await one_request(t, f"{tag}-{issued:06d}", perf_counter()))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def run_open(t: Target, rate: float, arrival: str, n_requests: int, tag: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out: list[dict] = []
    tasks = []

    async def one(rid: str, t_int: float) -> None:
        out.append(await one_request(t, rid, t_int))

    t0 = perf_counter()
    offset = 0.0
    for i in range(n_requests):
        t_int = t0 + offset
        delay = t_int - perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(f"{tag}-{i + 1:06d}", t_int)))
        offset += (1.0 / rate) if arrival == "constant" else rng.expovariate(rate)
    await asyncio.gather(*tasks)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/v1/chat/completions")
    ap.add_argument("--model", default="delay-model")
    ap.add_argument("--concurrency", type=int, help="closed loop: number of workers")
    ap.add_argument("--rate", type=float, help="open loop: requests per second")
    ap.add_argument("--arrival", choices=("poisson", "constant"), default="poisson")
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--prompt-chars", type=int, default=512, help="~128 tokens, like servewatch's default")
    ap.add_argument("--max-tokens", type=int, default=9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="per-request JSONL")
    a = ap.parse_args(argv)
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("benchmarks talk to 127.0.0.1 only")
    if (a.concurrency is None) == (a.rate is None):
        ap.error("give exactly one of --concurrency (closed loop) or --rate (open loop)")
    try:
        import resource as _r

        soft, hard = _r.getrlimit(_r.RLIMIT_NOFILE)
        _r.setrlimit(_r.RLIMIT_NOFILE, (min(hard, 65536) if hard != _r.RLIM_INFINITY else 65536, hard))
    except (ValueError, OSError):
        pass
    t = Target(a.host, a.port, a.path, a.model, a.prompt_chars, a.max_tokens)
    tag = "raw" + os.urandom(3).hex()
    cpu0, w0 = time.process_time(), perf_counter()
    if a.concurrency is not None:
        recs = asyncio.run(run_closed(t, a.concurrency, a.requests, tag))
    else:
        recs = asyncio.run(run_open(t, a.rate, a.arrival, a.requests, tag, a.seed))
    cpu, wall = time.process_time() - cpu0, perf_counter() - w0
    with open(a.out, "w", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
    errors: dict = {}
    for r in recs:
        if r["error"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    summary = {"client": "raw", "requests": len(recs), "complete": sum(1 for r in recs if not r["error"]),
               "errors": errors, "tokens": sum(r["tokens"] for r in recs), "cpu_s": round(cpu, 4),
               "wall_s": round(wall, 4), "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    sys.stdout.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
