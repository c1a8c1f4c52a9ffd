"""Durable JSONL record writer.

One ``os.write`` of one whole line per record on a file opened with ``O_APPEND``: no user-space
buffer, so a record is in the kernel (and in the file, for every other reader) when ``write``
returns. A process killed with SIGKILL leaves a file that parses up to its last complete line;
at worst the final line is cut short, and ``tui.core.records.read_file`` reports that line as
truncated instead of failing.

Every request id is written at most once. Records made elsewhere (``Recorder(path)``): a second record
with an id already written is refused (counted in ``duplicates_refused``) rather than double-counted by
readers; that check keeps every id. Records made by servewatch's load generator
(``Recorder(path, ids_unique=True)``: ``run``, ``live``, the watch canary) carry ids unique by construction
(the run id and a sequence number, each request recorded once by ``LoadGenerator._finish``), so no id is
kept and the recorder's memory does not grow with the run.
"""

from __future__ import annotations

import os
import threading

from tui.core.records import dumps


class Recorder:
    """Append records (dicts) to ``path``; thread-safe; ``close()`` is idempotent."""

    def __init__(self, path: str, *, ids_unique: bool = False) -> None:
        """``ids_unique``: the caller guarantees request ids unique by construction (the load generator's);
        then no id is remembered and ``duplicates_refused`` stays 0."""
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._ids: set[str] | None = None if ids_unique else set()
        self.records_written = 0
        self.requests_written = 0
        self.duplicates_refused = 0

    def write(self, record: dict) -> bool:
        """Write one record as one line. Returns False when refused (duplicate id or closed)."""
        line = dumps(record).encode("utf-8")
        with self._lock:
            if self._fd is None:
                return False
            if record.get("type") == "request":
                ids = self._ids
                if ids is not None:
                    rid = str(record.get("id"))
                    if rid in ids:
                        self.duplicates_refused += 1
                        return False
                    ids.add(rid)
                self.requests_written += 1
            view = memoryview(line)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self.records_written += 1
            return True

    def has_request(self, rid: str) -> bool:
        """Whether a request record with id ``rid`` was written (only a recorder that keeps ids can tell)."""
        with self._lock:
            if self._ids is None:
                raise RuntimeError("this recorder keeps no ids (ids_unique=True)")
            return rid in self._ids

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                finally:
                    self._fd = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
