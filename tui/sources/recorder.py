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

The digest chain (``tui.core.chain``, docs/record-format.md "Digest chain"): each run header written starts a
chain (its ``chain`` object says how it is kept); every line written after it, the header included, goes into one
SHA-256; each ``step`` record carries the checkpoint of the lines before it, and ``close()`` (also reached on
Ctrl-C / SIGTERM) ends the run with a ``seal`` record (which repeats the header's planned levels and rounds, and
whose MAC, when signed, is in a domain of its own: no step checkpoint can stand in for it). A second header in the same file seals the run before it and
starts its own chain. ``sign_key``: each checkpoint also carries an HMAC with that key (never written anywhere).
"""

from __future__ import annotations

import errno
import os
import stat
import threading

from tui.core.chain import ChainWriter, planned_of, seal_line
from tui.core.records import dumps

#: record types that carry a checkpoint of the chain (besides the final ``seal``)
CHECKPOINT_TYPES = ("step", "watch")


def open_record_file(path: str) -> int:
    """The record file opened for appending (created 0644): never through a symlink (``O_NOFOLLOW``), never a
    FIFO, a device or a folder (``O_NONBLOCK`` for the open, so a FIFO cannot block it; then checked). Raises
    OSError with a one-line ``strerror``."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise OSError(errno.ELOOP, "is a symbolic link: refusing to append through it (servewatch never "
                                       "follows a link to an output file); remove the link, or give the file it "
                                       "points to") from None
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise OSError(errno.ENXIO, "is a named pipe (FIFO), not a regular file: refusing to record into it") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "is not a regular file (a FIFO, a device or a socket): refusing to record into it")
    os.set_blocking(fd, True)
    return fd


class Recorder:
    """Append records (dicts) to ``path``; thread-safe; ``close()`` is idempotent."""

    def __init__(self, path: str, *, ids_unique: bool = False, chain: bool = True,
                 sign_key: bytes | None = None) -> None:
        """``ids_unique``: the caller guarantees request ids unique by construction (the load generator's);
        then no id is remembered and ``duplicates_refused`` stays 0. ``chain``: keep the digest chain (from the
        first run header written on); ``sign_key``: make its checkpoints HMACs with that key too."""
        self.path = path
        self._fd: int | None = open_record_file(path)
        self._lock = threading.Lock()
        self._ids: set[str] | None = None if ids_unique else set()
        self.records_written = 0
        self.requests_written = 0
        self.duplicates_refused = 0
        self._chain: ChainWriter | None = ChainWriter(sign_key) if chain else None
        self._planned: dict | None = None  # the chained run's planned levels and rounds, repeated in its seal
        if chain:
            self._end_cut_line()

    def _end_cut_line(self) -> None:
        """An existing file cut inside a line (a crash, a full disk): end that line, so that this run's first line
        (its header, which starts its chain) is a line of its own and not glued to the cut one."""
        fd = self._fd
        assert fd is not None
        try:
            if os.fstat(fd).st_size == 0:
                return
            with open(self.path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                cut = fh.read(1) != b"\n"
        except OSError:  # not readable or not seekable (a pipe): nothing to fix
            return
        if cut:
            os.write(fd, b"\n")
    def write(self, record: dict) -> bool:
        """Write one record as one line. Returns False when refused (duplicate id or closed)."""
        typ = record.get("type")
        chain = self._chain
        if chain is not None and (typ == "run" or typ in CHECKPOINT_TYPES):
            return self._write_chained(record, typ, chain)
        line = dumps(record).encode("utf-8")
        with self._lock:
            if self._fd is None:
                return False
            if typ == "request":
                ids = self._ids
                if ids is not None:
                    rid = str(record.get("id"))
                    if rid in ids:
                        self.duplicates_refused += 1
                        return False
                    ids.add(rid)
                self.requests_written += 1
            self._write_line(line)
            if chain is not None and chain.active:
                chain.add(line)
            return True

    def _write_line(self, line: bytes) -> None:
        """One whole line with ``os.write`` (under the lock)."""
        view = memoryview(line)
        fd = self._fd
        assert fd is not None
        while view:
            n = os.write(fd, view)
            view = view[n:]
        self.records_written += 1

    def _write_chained(self, record: dict, typ: str, chain: ChainWriter) -> bool:
        """A run header (starts a chain, sealing the one before) or a checkpoint record: serialised under the lock,
        because the checkpoint is the digest of exactly the lines written before this one."""
        with self._lock:
            if self._fd is None:
                return False
            if typ == "run":
                if chain.active:
                    self._seal_locked(chain)
                chain.start()
                self._planned = planned_of(record)
                record = {**record, "chain": chain.header_field()}
            elif chain.active:
                record = {**record, "chain": chain.checkpoint()}
            line = dumps(record).encode("utf-8")
            self._write_line(line)
            if chain.active:
                chain.add(line)
            return True

    def _seal_locked(self, chain: ChainWriter) -> None:
        """The final record of a chained run: the checkpoint of every line of it."""
        line = seal_line(chain.seal_checkpoint(), self._planned)
        self._write_line(line)
        chain.end()

    def seal(self) -> None:
        """End the current run's chain with a ``seal`` record now (``close`` does it too); idempotent."""
        with self._lock:
            chain = self._chain
            if self._fd is not None and chain is not None and chain.active:
                self._seal_locked(chain)

    def has_request(self, rid: str) -> bool:
        """Whether a request record with id ``rid`` was written (only a recorder that keeps ids can tell)."""
        with self._lock:
            if self._ids is None:
                raise RuntimeError("this recorder keeps no ids (ids_unique=True)")
            return rid in self._ids

    def close(self) -> None:
        """Seal the chained run (if any) and close the file; idempotent. A seal that cannot be written (disk full)
        leaves the chain verifiable up to its last checkpoint."""
        with self._lock:
            if self._fd is not None:
                try:
                    chain = self._chain
                    if chain is not None and chain.active:
                        try:
                            self._seal_locked(chain)
                        except OSError:
                            chain.end()
                    os.close(self._fd)
                finally:
                    self._fd = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
