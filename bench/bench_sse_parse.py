"""Benchmark: streaming parse cost: how many tokens/s ONE thread can consume through servewatch's SSE path, in memory.

    python bench/bench_sse_parse.py [--tokens 200000] [--stream-len 256] [--repeat 3]

No network: realistic llama-server-style chat chunks (id, created, model, system_fingerprint, object; role chunk with
``"content": null`` first, then one content token per event, a finish chunk, a usage chunk with ``timings``,
``data: [DONE]``) are fed from memory. Measured, best of ``--repeat`` runs, single thread:

1. ``SSEParser.feed`` alone (tui/sources/sse.py);
2. ``SSEParser.feed`` + ``json.loads`` of each event's data (the floor for any JSON-reading client);
3. servewatch's real per-stream loop, ``RequestExecutor.stream`` (tui/sources/load/executor.py around the pure
   interpreter in tui/sources/load/stream.py: SSE framing, JSON, the content/finish/usage checks, the first-token stamp), driven by an in-memory response object whose ``aiter_raw``
   yields the chunks: everything the load generator does per token EXCEPT the httpx/httpcore/h11/anyio network
   read path (which bench_client_timing.py measures end to end);

each with three chunkings: one event per network read (how a paced stream arrives), every event split in two reads
at an arbitrary byte, and 16 events per read (a client that fell behind).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from time import perf_counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

sys.path.insert(0, HERE)

from bench_client_timing import MachineLoad  # noqa: E402

from tui.sources.sse import SSEParser  # noqa: E402


def make_stream(n_tokens: int) -> list[bytes]:
    """The events of one streamed chat answer, each as the bytes of one ``data:`` event."""
    base = {"id": "chatcmpl-1f3Xb2Qk9rT0wPzN8mLcVa", "object": "chat.completion.chunk", "created": 1767225600,
            "model": "gemma-3-270m-q4_k_m.gguf", "system_fingerprint": "b6850-1a2b3c4d"}
    words = "the of and to in is that for it as was with be by on not he this are or".split()

    def ev(obj: object) -> bytes:
        return b"data: " + (obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))).encode() + b"\n\n"

    out = [ev(dict(base, choices=[{"finish_reason": None, "index": 0,
                                   "delta": {"role": "assistant", "content": None}}]))]
    for i in range(n_tokens):
        out.append(ev(dict(base, choices=[{"finish_reason": None, "index": 0,
                                           "delta": {"content": " " + words[i % len(words)]}}])))
    out.append(ev(dict(base, choices=[{"finish_reason": "length", "index": 0, "delta": {}}])))
    out.append(ev(dict(base, choices=[], usage={"completion_tokens": n_tokens, "prompt_tokens": 151,
                                                 "total_tokens": n_tokens + 151},
                       timings={"prompt_n": 151, "prompt_ms": 80.1, "predicted_n": n_tokens,
                                "predicted_ms": 1234.5})))
    out.append(ev("[DONE]"))
    return out


def chunkings(events: list[bytes]) -> dict[str, list[bytes]]:
    split = []
    for i, e in enumerate(events):
        k = 7 + (i * 13) % max(1, len(e) - 8)  # an arbitrary byte inside the event
        split += [e[:k], e[k:]]
    batched = [b"".join(events[i:i + 16]) for i in range(0, len(events), 16)]
    return {"1 event/read": list(events), "event split in 2 reads": split, "16 events/read": batched}


def bench_feed(chunks: list[bytes], streams: int) -> float:
    t = perf_counter()
    for _ in range(streams):
        p = SSEParser()
        for c in chunks:
            p.feed(c)
        p.finish()
    return perf_counter() - t


def bench_feed_json(chunks: list[bytes], streams: int) -> float:
    loads = json.loads
    t = perf_counter()
    for _ in range(streams):
        p = SSEParser()
        feed = p.feed
        for c in chunks:
            for ev in feed(c):
                if ev.data != "[DONE]":
                    loads(ev.data)
        p.finish()
    return perf_counter() - t


class _Resp:
    """Just enough of httpx.Response for RequestExecutor.stream: headers and aiter_raw()."""

    headers = {"content-type": "text/event-stream"}

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def _gen(self):
        for c in self.chunks:
            yield c

    def aiter_raw(self):
        return self._gen()


def bench_loadgen(chunks: list[bytes], streams: int, n_tokens: int) -> float:
    from tui.core.redact import Scrubber
    from tui.sources.load.executor import Req, RequestExecutor
    from tui.sources.load.steps import Step

    ex = RequestExecutor(None, "http://127.0.0.1:9/v1/chat/completions", "", chat=True,  # type: ignore[arg-type]
                         model="m", ignore_eos=False, read_timeout=300.0, token_offsets=False, scrub=Scrubber(),
                         say=lambda line: None)
    step = Step(1.0, 1, "measure", "closed")

    async def run() -> float:
        reqs = [Req(f"r-{i:06d}", "measure", 1.0, 1, step, 128, n_tokens, "", perf_counter()) for i in range(streams)]
        t = perf_counter()
        for req in reqs:
            await ex.stream(req, _Resp(chunks))
        dt = perf_counter() - t
        bad = [r for r in reqs if r.error is not None or r.n_content != n_tokens or r.finish != "length"]
        if bad:
            raise SystemExit(f"loadgen parse check failed: {bad[0].error} {bad[0].detail} n={bad[0].n_content}")
        return dt

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=200_000, help="content tokens per measurement")
    ap.add_argument("--stream-len", type=int, default=256, help="content tokens per stream")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    events = make_stream(a.stream_len)
    streams = max(1, a.tokens // a.stream_len)
    total = streams * a.stream_len
    ev_bytes = sum(len(e) for e in events) / len(events)
    print(f"{streams} streams x {a.stream_len} content tokens = {total} tokens per measurement; mean event "
          f"{ev_bytes:.0f} bytes; best of {a.repeat}; Python {sys.version.split()[0]}, one thread")
    print()
    print("| path | chunking | tokens/s | us per token |")
    print("|---|---|---|---|")
    results = []
    ml = MachineLoad()
    ml.begin(0.0)
    for name, chunks in chunkings(events).items():
        for label, fn in (("SSEParser.feed", lambda c=chunks: bench_feed(c, streams)),
                          ("SSEParser.feed + json.loads", lambda c=chunks: bench_feed_json(c, streams)),
                          ("RequestExecutor.stream (servewatch per-token loop)",
                           lambda c=chunks: bench_loadgen(c, streams, a.stream_len))):
            best = min(fn() for _ in range(a.repeat))
            results.append((label, name, total / best))
            print(f"| {label} | {name} | {total / best:,.0f} | {best / total * 1e6:.2f} |", flush=True)
    load = ml.end(0.0)
    print(f"\nother processes used {load['bg_cores']:.2f} of {os.cpu_count()} cores meanwhile "
          f"(load average {load['loadavg1']})")
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    sys.exit(rc)
