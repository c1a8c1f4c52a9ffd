"""Noticing that the console's driver has gone away: SIGTERM, SIGHUP (a closed terminal) or standard input
closed (as under ``textual serve`` when its parent goes). No Textual here: ``tui.app`` hands over what to
call (``on_gone(reason, exit_code)``, run on the event loop) and stops the watch on unmount.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import threading
from collections.abc import Callable

#: Exit codes when the driver goes away: 128 + the signal, as a shell reports it; closed input as a hangup.
STDIN_CLOSED_EXIT = 128 + signal.SIGHUP
STOP_TIMEOUT_S = 0.6  # how long stopping the source may take when the driver is gone
EXIT_BACKSTOP_S = 0.9  # after this the process ends even if Textual's shutdown hangs on a dead terminal

OnGone = Callable[[str, int], None]


class DriverWatch:
    """Signal handlers on the running loop and a thread that polls standard input for a hang-up."""

    def __init__(self, on_gone: OnGone) -> None:
        self.on_gone = on_gone
        self._watching = threading.Event()  # set while the stdin thread should run

    def start(self) -> None:
        """Install the handlers (call from inside the running event loop)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_IGN:  # nohup: whoever started us asked for it to be ignored
                continue
            try:  # replaces the web driver's own SIGTERM handler, which would not stop the source first
                loop.add_signal_handler(sig, self.on_gone, f"signal {sig.name}", 128 + int(sig))
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            fd = sys.__stdin__.fileno()  # type: ignore[union-attr]  # (None: AttributeError, handled below)
        except (AttributeError, ValueError, OSError):
            return
        self._watching.set()
        threading.Thread(target=self._watch_stdin, args=(fd, loop), name="servewatch-stdin-watch",
                         daemon=True).start()

    def stop(self) -> None:
        self._watching.clear()

    def _watch_stdin(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for a hang-up on standard input without reading it (Textual's driver reads it).

        POLLHUP is a state, not data: a pipe whose writer closed (``textual serve`` gone) or a
        terminal that hung up reports it on every poll, while keys typed by a user never do."""
        poller = select.poll()
        poller.register(fd, select.POLLHUP | select.POLLERR)
        gone = select.POLLHUP | select.POLLERR | select.POLLNVAL
        while self._watching.is_set():
            try:
                events = poller.poll(250)
            except OSError:
                return
            if any(ev & gone for _fd, ev in events):
                try:
                    loop.call_soon_threadsafe(self.on_gone, "standard input closed", STDIN_CLOSED_EXIT)
                except RuntimeError:  # the loop has closed: the app is already gone
                    pass
                return


def start_backstop(code: int) -> None:
    """End the process with ``code`` after ``EXIT_BACKSTOP_S`` even if Textual's shutdown hangs."""
    backstop = threading.Timer(EXIT_BACKSTOP_S, os._exit, (code,))
    backstop.daemon = True
    backstop.start()
