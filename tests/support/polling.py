"""Waiting on an outside process's state (a server, Prometheus): poll a condition with a bound.

The condition is the synchronisation; the interval only paces the polling. A condition that raises one of the
transient errors (a connection refused, a series not there yet) counts as not met yet."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

TRANSIENT = (httpx.HTTPError, KeyError, ValueError, IndexError)


def wait_until(cond: Callable[[], Any], what: str, deadline_s: float, interval_s: float = 0.2) -> Any:
    """The first true value of ``cond()`` within ``deadline_s``; AssertionError naming ``what`` and the last value
    seen otherwise."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            last = cond()
            if last:
                return last
        except TRANSIENT:
            pass
        time.sleep(interval_s)  # pacing between polls of another process, not synchronisation
    raise AssertionError(f"never saw {what} within {deadline_s:.0f} s (last: {last!r})")
