"""Sizing the load processes: how many workers ``--workers auto`` means, and the open-file limit a run needs.

Pure arithmetic plus one call to the operating system (:func:`raise_fd_limit`); no other module of
``tui.sources.load`` is imported here, so both the configuration and the worker process may use it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

MAX_WORKERS = 1024  # --workers N: at most this many
AUTO_STREAMS_PER_WORKER = 64  # --workers auto, closed loop: one worker per this many streams
AUTO_RATE_PER_WORKER = 250.0  # --workers auto, open loop: one worker per this many req/s
FD_LIMIT_WANTED = 65536  # each request opens a connection: the soft open-file limit is raised to this (or the hard one)


def auto_workers(mode: str, levels: Sequence[float], cpus: int | None = None) -> int:
    """``--workers auto``: enough worker processes for the heaviest level (one per
    :data:`AUTO_STREAMS_PER_WORKER` streams or :data:`AUTO_RATE_PER_WORKER` req/s), at most the
    machine's cores; 1 means the load runs in the coordinator itself."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    top = max(levels) if levels else 1.0
    per = AUTO_STREAMS_PER_WORKER if mode == "closed" else AUTO_RATE_PER_WORKER
    need = -(-int(top) // int(per)) if mode == "closed" else int(-(-top // per))
    return max(1, min(cpus, need))


def raise_fd_limit() -> dict:
    """Raise this process's soft open-file limit towards :data:`FD_LIMIT_WANTED` (never above the hard limit);
    where the platform has no such limit or refuses, nothing changes. Returns the run header's ``load.fd_limit``
    block: ``{"soft": the limit the process now runs under, "hard": its ceiling, "was": the soft limit before}``
    (None for a value that is unlimited or unknown; ``note`` says why nothing was raised)."""
    try:
        import resource
    except ImportError:
        return {"soft": None, "hard": None, "was": None, "note": "no open-file limit on this platform"}
    inf = resource.RLIM_INFINITY

    def num(v: int) -> int | None:
        return None if v == inf or v < 0 else int(v)

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ValueError, OSError) as exc:
        return {"soft": None, "hard": None, "was": None, "note": f"open-file limit unknown: {exc}"}
    was = soft
    want = hard if hard != inf else FD_LIMIT_WANTED
    want = min(want, FD_LIMIT_WANTED)
    note = None
    if soft != inf and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError) as exc:
            note = f"could not raise the soft limit: {exc}"
    block: dict = {"soft": num(soft), "hard": num(hard), "was": num(was)}
    if note is None and soft != inf and hard != inf and soft >= hard and soft < FD_LIMIT_WANTED:
        note = "the soft limit is at the hard limit: only a higher hard limit (ulimit -Hn, as root) allows more"
    if note:
        block["note"] = note
    return block


#: open files a load process needs beside its connections (standard streams, the event loop, the record file,
#: the metrics scraper, imports): the margin :func:`fd_shortfall` allows for
FD_RESERVE = 32


def fd_shortfall(block: dict, connections: int) -> str | None:
    """A warning when ``connections`` concurrent connections (the heaviest closed-loop level, or an open loop's
    in-flight cap) do not fit the open-file limit of ``block`` (:func:`raise_fd_limit`), else None."""
    soft = block.get("soft")
    if not isinstance(soft, int) or connections + FD_RESERVE <= soft:
        return None
    return (f"up to {connections} connections at once need about {connections + FD_RESERVE} open files, and this "
            f"process may open {soft} (ulimit -n): requests beyond that fail in the client (error class client), "
            "the steps are client_limited and cannot PASS; raise the limit or lower the load")
