"""A REAL QUEUEING SYSTEM WHOSE CAPACITY IS KNOWN IN ADVANCE: an OpenAI-compatible streaming server on
127.0.0.1 with a fixed number of slots and a fixed service time per request (not a model, not an engine).

``SlotServer(slots, service_s, tokens=4)``: each request to ``/v1/chat/completions`` or ``/v1/completions``
takes a slot, first come first served (requests beyond the slots wait in arrival order), holds it for
``service_s`` seconds while it streams ``tokens`` tokens (the first at once, the last at ``service_s``), and then
gives it up. ``/v1/models`` names one model. So the server serves at most ``slots / service_s`` requests per
second; below that rate with evenly spaced arrivals no request waits, above it the queue (and the time to first
token) grows without bound. The fleet test (tests/integration/test_fleet_haproxy.py) and the plan's CLI tests use
it: a capacity they can check a measurement against.

``.url`` (``http://127.0.0.1:PORT``), ``.served`` (requests completed), ``.peak_waiting`` (most requests seen
waiting for a slot), ``.close()``; also a context manager. ``degrade_flag``: a path; while a file exists there, every
completion request is answered 503 at once (a server that stays degraded after a fault; the drill tests create it
with ``--fault-cmd 'touch FILE'``).

``python -m tests.support.slot_server --slots N --service-s S`` runs one in its own process (printing its URL on the
first line of its output) until it is killed: a replica a test can kill with SIGKILL (the drill's HAProxy test).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.json_reply import send_json

MODEL = "slot-server"


class _Slots:
    """``n`` slots handed out in arrival order (a waiting request gets the slot a finishing one gives up)."""

    def __init__(self, n: int) -> None:
        self.free = n
        self.lock = threading.Lock()
        self.waiters: deque[threading.Event] = deque()
        self.peak_waiting = 0

    def acquire(self) -> None:
        with self.lock:
            if self.free > 0 and not self.waiters:
                self.free -= 1
                return
            ev = threading.Event()
            self.waiters.append(ev)
            self.peak_waiting = max(self.peak_waiting, len(self.waiters))
        ev.wait()

    def release(self) -> None:
        with self.lock:
            if self.waiters:
                self.waiters.popleft().set()  # the slot passes to the first waiting request
            else:
                self.free += 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:  # a client that went away: not the server's error
        pass


class SlotServer:
    def __init__(self, slots: int, service_s: float, tokens: int = 4, degrade_flag: str | None = None) -> None:
        if slots < 1 or not service_s > 0 or tokens < 1:
            raise ValueError("slots >= 1, service_s > 0 and tokens >= 1")
        self.degrade_flag = degrade_flag
        self.slots, self.service_s, self.tokens = slots, service_s, tokens
        self._slots = _Slots(slots)
        self._count_lock = threading.Lock()
        self.served = 0
        me = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:  # quiet
                pass

            def setup(self) -> None:  # each small write (a token) goes out at once: no Nagle delay on the stream
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _json(self, code: int, obj: dict) -> None:
                send_json(self, code, obj)

            def do_GET(self) -> None:
                if self.path.startswith("/v1/models"):
                    self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                else:
                    self._json(404, {"error": "not found"})

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    req = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    self._json(400, {"error": "bad json"})
                    return
                chat = self.path.startswith("/v1/chat/completions")
                if not (chat or self.path.startswith("/v1/completions")):
                    self._json(404, {"error": "not found"})
                    return
                tokens = me.tokens
                if me.degrade_flag is not None and os.path.exists(me.degrade_flag):
                    self._json(503, {"error": {"message": "degraded"}})
                    return
                me._slots.acquire()
                try:
                    t0 = time.monotonic()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i in range(tokens):
                        due = t0 + me.service_s * i / max(1, tokens - 1) if tokens > 1 else t0
                        wait = due - time.monotonic()
                        if wait > 0:
                            time.sleep(wait)
                        piece = {"delta": {"content": f"t{i} "}} if chat else {"text": f"t{i} "}
                        last = i == tokens - 1
                        obj: dict = {"object": "chat.completion.chunk" if chat else "text_completion",
                                     "model": MODEL, "choices": [{"index": 0, **piece,
                                                                  "finish_reason": "length" if last else None}]}
                        if last and (req.get("stream_options") or {}).get("include_usage"):
                            obj["usage"] = {"prompt_tokens": 8, "completion_tokens": tokens,
                                            "total_tokens": 8 + tokens}
                        self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")
                    rest = t0 + me.service_s - time.monotonic()
                    if rest > 0:
                        time.sleep(rest)
                    self._chunk(b"data: [DONE]\n\n")
                    self._chunk(b"")
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    me._slots.release()
                with me._count_lock:
                    me.served += 1

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"slot-server-{self.port}", daemon=True)
        self._thread.start()

    @property
    def capacity_rps(self) -> float:
        """slots / service_s: the most requests per second this server can serve."""
        return self.slots / self.service_s

    @property
    def peak_waiting(self) -> int:
        return self._slots.peak_waiting

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> SlotServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main() -> None:
    ap = argparse.ArgumentParser(description="a slot server in its own process (tests only, 127.0.0.1)")
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--service-s", type=float, default=0.1)
    args = ap.parse_args()
    server = SlotServer(args.slots, args.service_s)
    print(server.url, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT}) if hasattr(signal, "sigwait") else sys.stdin.read()
    server.close()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
