"""Failures of the load generator's own resources (issue 36): the ``client`` error class and what to say about it.

A request the CLIENT could not carry out because it ran out of something of its own says nothing about the
server: file descriptors (``EMFILE``: this process's limit, ``ulimit -n``; ``ENFILE``: the machine's table), local
ports (``EADDRNOTAVAIL``, ``EADDRINUSE`` while connecting) or network buffers (``ENOBUFS``). The load generator
records it with ``error: "client"`` and an ``error_detail`` that starts with the errno name
(``"EMFILE: [Errno 24] Too many open files"``); ``ECONNREFUSED``, ``ECONNRESET``, timeouts and HTTP errors stay the
server's (``connect``, ``stream_reset``, ``read_timeout``, ``http_*``).

How a verdict treats them (``tui.core.slos.slo_rule``, ``tui.core.monitor``): a client-class request whose outcome
was still open when the client failed is **unknown**: never shown or counted as good, never counted as the
server's failure; the judge counts it good (the most favourable case) so that a FAIL is one the server's failures
alone prove. A level with any is ``client_limited``: it cannot PASS; not proven FAIL, it is UNDECIDED (exit 3)
with the advice of :func:`advice` ("the client ran out of file descriptors at 64: raise the limit (ulimit -n) or
lower the concurrency"). A record that says ``client`` but carries an HTTP status contradicts itself (the server
answered): it is the server's failure.

Standard library only; imports nothing from the project.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

#: the errno names of the client's own resources, in the order the advice names them
ERRNOS: Final = ("EMFILE", "ENFILE", "EADDRNOTAVAIL", "EADDRINUSE", "ENOBUFS")
#: the errnos that are the client's only while connecting (binding a local port)
CONNECT_ONLY: Final = frozenset({"EADDRINUSE"})
UNKNOWN: Final = "unknown"  # a client-class record whose detail names no errno (another tool's, an edited file)

_LEAD = re.compile(r"\s*(" + "|".join(ERRNOS) + r")\b")
#: the operating system's words for each (strerror), as other tools' exports carry them
PHRASES: Final = (("too many open files in system", "ENFILE"), ("file table overflow", "ENFILE"),
                  ("too many open files", "EMFILE"), ("cannot assign requested address", "EADDRNOTAVAIL"),
                  ("can't assign requested address", "EADDRNOTAVAIL"), ("address already in use", "EADDRINUSE"),
                  ("no buffer space available", "ENOBUFS"))


def kind_of(detail: Any) -> str:
    """The errno name an ``error_detail`` starts with (one of :data:`ERRNOS`), else the one its words name
    (:data:`PHRASES`), else :data:`UNKNOWN`."""
    if not isinstance(detail, str):
        return UNKNOWN
    m = _LEAD.match(detail)
    return m.group(1) if m else (phrase_kind(detail) or UNKNOWN)


def phrase_kind(text: str) -> str | None:
    """The errno name whose operating-system message ``text`` contains ("Too many open files" -> EMFILE), or None:
    how another tool's error message says the client ran out of its own resources."""
    low = text.lower()
    for phrase, name in PHRASES:
        if phrase in low:
            return name
    return None


def fd_limit_of(header: Mapping | None) -> int | None:
    """The open-file limit the load generator ran under (``load.fd_limit.soft`` of the run header; the smallest of
    the workers' when they recorded their own), or None when the header does not say."""
    if not isinstance(header, Mapping):
        return None
    load = header.get("load")
    if not isinstance(load, Mapping):
        return None
    found: list[int] = []

    def take(block: Any) -> None:
        if isinstance(block, Mapping):
            v = block.get("soft")
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                found.append(v)

    take(load.get("fd_limit"))
    workers = load.get("workers")
    if isinstance(workers, Mapping) and isinstance(workers.get("workers"), list):
        for w in workers["workers"]:
            if isinstance(w, Mapping):
                take(w.get("fd_limit"))
    return min(found) if found else None


def _lower(mode: str | None) -> str:
    return "the rate" if mode == "open" else "the concurrency"


def advice(kinds: Mapping[str, int], fd_limit: int | None = None, mode: str | None = None) -> str:
    """What ran out and what to do, one clause per resource (``kinds``: errno name -> requests), such as "the client
    ran out of file descriptors at 64: raise the limit (ulimit -n) or lower the concurrency"."""
    lower = _lower(mode)
    parts: list[str] = []
    if kinds.get("EMFILE"):
        at = f" at {fd_limit}" if fd_limit is not None else " (EMFILE)"
        parts.append(f"the client ran out of file descriptors{at}: raise the limit (ulimit -n) or lower {lower}")
    if kinds.get("ENFILE"):
        parts.append("the client machine ran out of file descriptors (ENFILE: the system-wide table is full): raise "
                     f"fs.file-max or lower {lower}")
    ports = [k for k in ("EADDRNOTAVAIL", "EADDRINUSE") if kinds.get(k)]
    if ports:
        parts.append(f"the client ran out of local ports ({', '.join(ports)}; one connection per request): widen "
                     f"net.ipv4.ip_local_port_range, spread the load over more client machines or lower {lower}")
    if kinds.get("ENOBUFS"):
        parts.append(f"the client ran out of network buffer space (ENOBUFS): lower {lower}")
    if kinds.get(UNKNOWN) or not parts:
        parts.append(f"the client ran out of its own resources: raise its limits or lower {lower}")
    return "; ".join(parts)


def describe(count: int, kinds: Mapping[str, int], fd_limit: int | None = None, mode: str | None = None,
             of: int | None = None) -> str:
    """One sentence for a client-limited level: "client_limited: 900 of 1,000 requests failed in the client (EMFILE
    900): the client ran out of file descriptors at 64: raise the limit (ulimit -n) or lower the concurrency"."""
    how = ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])) if v)
    total = f" of {of:,}" if of is not None else ""
    noun = "request" if count == 1 else "requests"
    return (f"client_limited: {count:,}{total} {noun} failed in the client" + (f" ({how})" if how else "")
            + f": {advice(kinds, fd_limit, mode)}")
