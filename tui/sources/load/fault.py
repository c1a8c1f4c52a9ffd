"""What a fault drill does beside its load (``servewatch drill --fault-cmd``; issue 39): run the fault command and
record it, and ask the server's ``/health`` until it answers again.

- :func:`run_fault_command`: the command through the shell (``/bin/sh -c``), in a session of its own, its standard
  input closed; its start, end, exit status and first lines of output are returned for the phase records, every
  line scrubbed of secrets (the same scrubber as the requests' error details) and made safe to print. A command
  still running when the drill gives up on it (the end of the recovery phase) is killed with its process group, and
  that is said.
- :class:`HealthProbe`: one ``GET ROOT/health`` before the drill (a server without one, or that does not answer 200
  then, is not probed: said), then every ``interval`` from the fault's start: the first moment it stops answering 200
  (``down_at``) and the first 200 after that (``up_at``), in epoch seconds of the load's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx

from tui.core.redact import Scrubber
from tui.core.textsafe import term

MAX_OUTPUT_LINES = 20  # first lines of the command's output kept
MAX_LINE_CHARS = 300
LINE_KEEP_BYTES = 4 * MAX_LINE_CHARS  # bytes of one line kept before it is decoded, scrubbed and cut
CHUNK_BYTES = 4096  # the output is read in chunks of this (all of it drained; lines beyond the first counted)


async def run_fault_command(command: str, scrub: Scrubber, now: Callable[[], float],
                            timeout_s: float) -> dict[str, Any]:
    """Run ``command``; return ``{"command", "start", "end", "exit_status", "signal", "output",
    "output_lines_dropped", "note"}`` (times from ``now``, epoch seconds)."""
    shown = scrub.text(term(command))
    start = now()
    out: dict[str, Any] = {"command": shown, "start": start, "end": None, "exit_status": None, "signal": None,
                           "output": [], "output_lines_dropped": 0, "note": None}
    try:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        out["end"] = now()
        out["note"] = scrub(f"the command could not be started: {exc.strerror or exc}")
        return out
    lines: list[str] = []
    dropped = 0

    def keep(raw: bytes, cut: bool) -> None:
        nonlocal dropped
        if len(lines) < MAX_OUTPUT_LINES:
            text = scrub.text(term(raw.decode("utf-8", "replace").rstrip("\r")))
            if cut:  # the line's bytes were cut: a secret's first characters may end it
                text = scrub.cut_tail(text)
            lines.append(text[:MAX_LINE_CHARS])
        else:
            dropped += 1

    async def read() -> None:
        """Lines split here from raw chunks (a line longer than the stream's limit is kept, cut, never lost); each
        kept line holds at most ``LINE_KEEP_BYTES`` of its bytes, so memory stays bounded whatever it prints."""
        assert proc.stdout is not None
        cur = bytearray()
        pending = cut = False  # a line begun and not yet ended; its bytes beyond LINE_KEEP_BYTES left out
        while True:
            chunk = await proc.stdout.read(CHUNK_BYTES)
            if not chunk:
                break
            parts = chunk.split(b"\n")
            for k, part in enumerate(parts):
                room = LINE_KEEP_BYTES - len(cur)
                cur += part[:max(0, room)]
                cut = cut or len(part) > room
                pending = pending or bool(part)
                if k < len(parts) - 1:  # the line ends here
                    keep(bytes(cur), cut)
                    cur.clear()
                    pending = cut = False
        if pending:
            keep(bytes(cur), cut)

    reader = asyncio.create_task(read())
    try:
        rc = await asyncio.wait_for(proc.wait(), timeout=timeout_s)
    except TimeoutError:
        _kill_group(proc.pid)
        rc = await proc.wait()
        out["note"] = (f"still running after {timeout_s:g} s (the end of the recovery phase): killed with its "
                       "process group")
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), timeout=2.0)
        reader.cancel()
        raise
    out["end"] = now()
    with contextlib.suppress(TimeoutError, Exception):
        await asyncio.wait_for(reader, timeout=2.0)
    reader.cancel()
    if rc is not None and rc < 0:
        out["signal"] = -rc
    else:
        out["exit_status"] = rc
    out["output"] = lines
    out["output_lines_dropped"] = dropped
    return out


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pid, signal.SIGKILL)


class HealthProbe:
    """``GET ROOT/health`` (see the module doc). ``now``: the load's clock (epoch seconds)."""

    def __init__(self, client: httpx.AsyncClient, root: str, now: Callable[[], float], interval_s: float,
                 scrub: Scrubber) -> None:
        self.client = client
        self.url = root.rstrip("/") + "/health"
        self.now = now
        self.interval_s = interval_s
        self.scrub = scrub
        self.enabled = False
        self.note: str | None = None
        self.down_at: float | None = None
        self.up_at: float | None = None
        self.probes = 0
        self.answers: dict[str, int] = {}

    async def _ask(self) -> str:
        """"200", another status, or the failure's class ("connect", "timeout", ...)."""
        try:
            r = await self.client.get(self.url, timeout=httpx.Timeout(max(1.0, 4 * self.interval_s)))
            return str(r.status_code)
        except httpx.TimeoutException:
            return "timeout"
        except httpx.ConnectError:
            return "connect"
        except httpx.HTTPError as exc:
            return type(exc).__name__

    async def check(self) -> bool:
        """Before the drill: does ``/health`` answer 200? (False: not probed, ``note`` says why.)"""
        got = await self._ask()
        self.enabled = got == "200"
        if not self.enabled:
            self.note = f"{self.url.rsplit('/', 1)[-1]} answered {got} before the drill: not probed"
        return self.enabled

    async def watch(self, done: Callable[[], bool]) -> None:
        """From now until it answers 200 again after failing (or ``done()``), every ``interval_s``."""
        if not self.enabled:
            return
        while not done():
            t0 = time.monotonic()
            got = await self._ask()
            t = self.now()
            self.probes += 1
            self.answers[got] = self.answers.get(got, 0) + 1
            if got != "200" and self.down_at is None:
                self.down_at = t
            elif got == "200" and self.down_at is not None:
                self.up_at = t
                return
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - t0)))

    def block(self) -> dict[str, Any]:
        """The recovery phase end record's ``health`` block."""
        return {"probed": self.enabled, "endpoint": "/health", "interval_s": self.interval_s,
                "down_at": self.down_at, "up_at": self.up_at, "probes": self.probes, "answers": dict(self.answers),
                "note": self.note}
