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


def raise_fd_limit() -> None:
    """Raise this process's soft open-file limit towards :data:`FD_LIMIT_WANTED` (never above the hard limit);
    where the platform has no such limit or refuses, nothing changes."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else FD_LIMIT_WANTED
        want = min(want, FD_LIMIT_WANTED)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass
