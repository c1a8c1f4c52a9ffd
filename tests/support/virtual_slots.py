"""A REAL QUEUEING SYSTEM WHOSE CAPACITY IS KNOWN IN ADVANCE, at compressed time: the in-memory twin of
``tests.support.slot_server.SlotServer`` for the virtual-time loop of ``tests.support.virtual_server``.

``VirtualSlotServer(slots, service_s, tokens=4)`` is an ``httpx.MockTransport`` handler (pass it to
``patched_for_virtual_time`` in place of a ``RecordedServer``): each completion request takes one of ``slots``
slots in arrival order (requests beyond them wait FIFO), streams its first token as soon as it holds a slot, its
last ``service_s`` seconds later, and gives the slot up. Its timers are ``asyncio.sleep``: on the virtual-time loop
they take no real time but keep their order and recorded durations.

So, open loop with evenly spaced arrivals (``--arrival constant``): below ``slots / service_s`` req/s no request
waits (TTFT ~ 0), above it the queue and every TTFT grow without bound; the capacity at any TTFT SLO is
``slots / service_s``. Closed loop at concurrency c > slots every request waits ``(c / slots - 1) x service_s`` in
steady state, so at a TTFT SLO of S seconds the capacity is the largest c with ``(c / slots - 1) x service_s <= S``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque

import httpx

MODEL = "virtual-slot-server"


class VirtualSlotServer:
    def __init__(self, slots: int, service_s: float, tokens: int = 4) -> None:
        if slots < 1 or not service_s > 0 or tokens < 2:
            raise ValueError("slots >= 1, service_s > 0 and tokens >= 2")
        self.slots, self.service_s, self.tokens = slots, service_s, tokens
        self.free = slots
        self.waiters: deque[asyncio.Future] = deque()
        self.served = 0
        self.peak_waiting = 0

    @property
    def capacity_rps(self) -> float:
        return self.slots / self.service_s

    def closed_capacity(self, slo_s: float) -> int:
        """The largest concurrency whose steady-state wait ``(c / slots - 1) x service_s`` is within ``slo_s``."""
        c = self.slots
        while ((c + 1) / self.slots - 1) * self.service_s <= slo_s:
            c += 1
        return c

    async def _acquire(self) -> None:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.peak_waiting = max(self.peak_waiting, len(self.waiters))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed the slot just as it was cancelled: pass it on
                self._release()
            raise

    def _release(self) -> None:
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():  # a waiter cancelled meanwhile gives its turn on
                fut.set_result(None)
                return
        self.free += 1

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/v1/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if not path.endswith("/completions"):
            return httpx.Response(404, json={"error": "not found"})
        chat = path.endswith("/chat/completions")
        tokens, service = self.tokens, self.service_s

        def chunk(i: int) -> bytes:
            last = i == tokens - 1
            piece = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
            obj = {"choices": [{"index": 0, **piece, "finish_reason": "length" if last else None}]}
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        held = False

        def done() -> None:  # the slot's time is over (the client may never close the stream after [DONE])
            nonlocal held
            if held:
                held = False
                self._release()

        async def body():
            nonlocal held
            await self._acquire()
            held = True
            try:
                for i in range(tokens - 1):
                    yield chunk(i)
                    await asyncio.sleep(service / (tokens - 1))
                done()
                self.served += 1
                yield chunk(tokens - 1)
                yield (b'data: {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": %d}}\n\n'
                       % tokens)
                yield b"data: [DONE]\n\n"
            finally:
                done()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
