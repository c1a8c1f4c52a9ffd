"""A large record file read in two processes (issue 38's hot path): a forked reader runs the one reading path
(``EvidenceRun.blocks``: the digest chain fed every byte, the run picked, every line parsed and validated) and hands
each block to the judging process through a pipe; the judging process rebuilds each block, in order, and ingests it
while the reader parses the next. The items, the runs, the integrity and any exception are the one path's own, in the
same order: only the transport is new (tests/unit/sources/test_parallel_read.py holds the two equal, item by item).

The transport: a request record as the tuple of its fields (``marshal``, in C): a standard record is made as that
tuple in the reader (``tui.core.records.validate.standard_as_arguments``: the record's arguments, counted as a
request by the run splitter) and as the record here; anything else pickled (a few per block, with their places). Frames: one byte of kind, eight
of length, the payload. A reader that dies without its last frame is an internal error, never a short file.

Used only where it pays (``parallel_worth_it``): a regular file of at least ``PARALLEL_MIN_BYTES`` (records, not an
import or a watch recording) whose request records are mostly standard ones (``_mostly_standard``), on a machine
that gives this process two CPUs or more, from a process with one thread (the commands that judge a file; never the
console or a live run's threads). Wall time falls (the two
halves overlap), CPU time rises a little (the transport): bench/bench_report.py shows both."""

from __future__ import annotations

import dataclasses
import gc
import marshal
import operator
import os
import pickle
import stat
import struct
import threading
from collections.abc import Callable, Iterator
from itertools import compress, repeat, starmap
from operator import is_
from typing import Any, BinaryIO

try:
    import fcntl
except ImportError:  # not on this platform: the default pipe
    fcntl = None  # type: ignore[assignment]

from tui.core.records import RequestRecord
from tui.core.records.validate import STANDARD_KEYS, standard_as_arguments

#: the smallest file read in two processes (below it, starting the reader costs more than the overlap wins)
PARALLEL_MIN_BYTES = 32 << 20
#: the pipe between them, asked for (the reader runs up to about this many bytes of blocks ahead)
PIPE_BYTES = 8 << 20
#: the start of the file looked at to decide (``_mostly_standard``)
SAMPLE_BYTES = 256 << 10

_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
_FIELDS_OF = operator.attrgetter(*_FIELDS)
_REQUEST_KINDS = frozenset((RequestRecord, tuple))  # a record, or a standard record's arguments
_HEAD = struct.Struct("<cQ")
_BLOCK, _END, _ERROR = b"B", b"E", b"X"


def parallel_worth_it(handle: BinaryIO, cpus: int | None = None) -> bool:
    """Whether reading ``handle`` in two processes pays: a regular file of at least ``PARALLEL_MIN_BYTES`` of mostly
    standard request records (``_mostly_standard``) on a machine that gives this process two CPUs or more, from a
    process with no other thread (a fork copies one thread: a lock another thread held would stay held)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    try:
        st = os.fstat(handle.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size < PARALLEL_MIN_BYTES:
        return False
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus >= 2 and _mostly_standard(handle.fileno())


def _mostly_standard(fd: int) -> bool:
    """Whether most request lines of the file's first ``SAMPLE_BYTES`` have no more fields than a standard record
    (a count of ``":``, read with ``pread``: the handle's position untouched). Records with more fields (a run's
    stream fields) make the reader the slower half by far: the judging process would wait, and two processes would
    spend half as much CPU again for no time won (bench_report.py --stream-fields); such a file is read in one."""
    try:
        sample = os.pread(fd, SAMPLE_BYTES, 0)
    except OSError:
        return False
    lines = [x for x in sample.split(b"\n")[:-1] if x.startswith(b'{"type":"request"')]
    standard = sum(1 for x in lines if x.count(b'":') <= STANDARD_KEYS)
    return bool(lines) and standard * 2 >= len(lines)


def _pack(items: list) -> bytes:
    """One block: the request records as the tuples of their fields (a standard record already is one: the fast
    path's arguments; any other record, its fields in one C call), marshalled; the few other items pickled with
    their places."""
    kinds = list(map(type, items))
    n_args = kinds.count(tuple)
    if n_args == len(items):  # the usual block: standard records only
        return marshal.dumps((items, None))
    others = [(i, items[i]) for i, k in enumerate(kinds) if k not in _REQUEST_KINDS]  # a handful, with places
    if n_args + len(others) == len(items):  # standard records and a few others
        reqs = list(compress(items, map(is_, kinds, repeat(tuple))))
    else:
        reqs = [it if type(it) is tuple else _FIELDS_OF(it) for it in items if type(it) in _REQUEST_KINDS]
    return marshal.dumps((reqs, pickle.dumps(others, pickle.HIGHEST_PROTOCOL) if others else None))


def _unpack(payload: bytes) -> list:
    reqs, others = marshal.loads(payload)
    items: list = list(starmap(RequestRecord, reqs))
    if others is not None:
        for i, it in pickle.loads(others):  # in order: each goes back to its place
            items.insert(i, it)
    return items


def _frame(out: BinaryIO, kind: bytes, payload: bytes) -> None:
    out.write(_HEAD.pack(kind, len(payload)) + payload)
    out.flush()  # each block on its way at once: the judging process never waits on a block made already


def _widen(fd: int) -> None:
    """A pipe that holds several blocks (Linux: up to fs.pipe-max-size), so the reader runs ahead of the judging
    process instead of waiting on it block by block; elsewhere, the default."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setsize is None:
        return
    for size in (PIPE_BYTES, 1 << 20):
        try:
            fcntl.fcntl(fd, setsize, size)
            return
        except OSError:
            continue


def _reader(blocks: Callable[[], Iterator[list]], result: Callable[[], Any], fd: int) -> None:
    """The forked reader: the one reading path, each block framed; at the end its result, or its exception."""
    gc.disable()  # the records it makes are freed by reference counting (as in monitor_of)
    standard_as_arguments()  # standard records as their arguments: carried as they are, made where they are judged
    out = os.fdopen(fd, "wb", buffering=1 << 20)
    try:
        for items in blocks():
            _frame(out, _BLOCK, _pack(items))
        _frame(out, _END, pickle.dumps(result(), pickle.HIGHEST_PROTOCOL))
    except BaseException as exc:  # handed over whole: the judging process raises it where the one path would
        try:
            payload = pickle.dumps(exc, pickle.HIGHEST_PROTOCOL)
            pickle.loads(payload)
        except Exception:  # an exception that does not travel: an internal error with its words
            payload = pickle.dumps(RuntimeError(f"the record reader failed: {type(exc).__name__}: {exc}"))
        _frame(out, _ERROR, payload)
    out.flush()


def _read_exact(fh: BinaryIO, n: int) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise RuntimeError("the record reader process ended before its last frame (an internal error)")
    return data


def read_in_parallel(blocks: Callable[[], Iterator[list]], result: Callable[[], Any],
                     done: Callable[[Any], None]) -> Iterator[list]:
    """The blocks of ``blocks()`` made in a forked reader and rebuilt here, in order; at the end ``done`` gets
    ``result()`` as the reader computed it, or the reader's exception is raised here."""
    r, w = os.pipe()
    _widen(w)
    pid = os.fork()
    if pid == 0:  # the reader: never returns into the caller's code
        code = 0
        try:
            os.close(r)
            _reader(blocks, result, w)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    fin = os.fdopen(r, "rb", buffering=1 << 20)
    finished = False
    try:
        while True:
            kind, n = _HEAD.unpack(_read_exact(fin, _HEAD.size))
            payload = _read_exact(fin, n)
            if kind == _BLOCK:
                yield _unpack(payload)
            elif kind == _END:
                finished = True
                done(pickle.loads(payload))
                return
            elif kind == _ERROR:
                finished = True
                raise pickle.loads(payload)
            else:
                raise RuntimeError(f"the record reader sent an unknown frame {kind!r} (an internal error)")
    finally:
        fin.close()
        if not finished:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
