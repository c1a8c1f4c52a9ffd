"""Replay a record file at its recorded pace (or faster), optionally following it as it grows.

The record clock
    Each record is placed on the recording's own clock: a request at its ``t_end``
    (the moment it finished, which is when a live run would have learned about it),
    gpu / queue / host / step samples at their ``t``. Run headers, budget records and
    malformed lines have no time and are handed over as soon as they are read.
    Records slightly out of order are delivered as soon as they are due (never held back).

Controls (thread-safe, callable from the UI thread)
    pause() / resume() / toggle_pause()
    step("record")   pause, then hand over the next timed record (and any untimed lines before it)
    step("second")   pause, then hand over everything in the next second of record time
    speed_up() / slow_down()   x2 / /2 (1/16 .. 1024); slow_down also leaves max-speed mode
    jump_to_end()    hand over everything read so far at full speed, then carry on at the chosen pace

Follow mode (``follow=True``)
    Like ``tail -f``: after reaching the end the source waits for the file to grow (polling
    every ``poll_interval`` seconds in its own thread) and hands new records over as soon as
    they are complete lines; a partial last line is kept and finished when the rest arrives.
    Once caught up, new records are delivered as they appear (the writer sets the pace).
    Truncation (the file got shorter) and rotation (the path now names a different file) are
    reported as ``LineIssue(kind="truncated")`` and in ``notices``; reading restarts at the start
    of the new content.

Backpressure
    Records go to the sink in batches of at most ``batch_size``; between batches in max-speed or
    jump mode the thread waits a millisecond so the UI thread always gets the GIL and the sink lock.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tui.core.records import (
    GpuSample,
    HostSample,
    LineIssue,
    QueueSample,
    RequestRecord,
    StepRecord,
    not_a_record_file,
    parse_lines,
    scan_usable,
)
from tui.core.records.reader import LineCut, iter_lines, last_line_items, parse_segments
from tui.core.runs import RunSplitter
from tui.sources.base import ReplayControls, Source, SourceMode
from tui.sources.evidence_probe import not_a_plain_file
from tui.sources.infiles import open_input

Sink = Callable[[Iterable], None]  # where a replay delivers its batches (the Monitor sink of the console)

MIN_SPEED = 1.0 / 16.0
MAX_SPEED = 1024.0
MAX_NOTICES = 50


def record_time(item: object) -> float | None:
    """Where a record sits on the record clock (None: deliver at once)."""
    if isinstance(item, RequestRecord):
        return item.t_end
    if isinstance(item, (GpuSample, QueueSample, HostSample, StepRecord)):
        return item.t
    return None


class _Reader:
    """Reads a file incrementally: complete lines now, a partial last line kept for later."""

    def __init__(self, path: str, label: str, chunk_size: int, line_parser: Callable | None = None,
                 run: int | None = None) -> None:
        self.run = run
        self.splitter: RunSplitter | None = None
        self.path = path
        self.label = label
        self.parse = line_parser or parse_lines  # another tool's line format: converted per line (importing)
        self.chunk_size = chunk_size
        self.fh: BinaryIO | None = None
        self.pos = 0
        self.cut = LineCut()  # whole lines out, a line longer than MAX_LINE_BYTES read past (tui.core.records)
        self.ino: int | None = None
        self.verifier: Any = None  # tui.core.chain.ChainVerifier fed every raw chunk read (not when following)

    @property
    def lineno(self) -> int:
        """The lines completed so far."""
        return self.cut.lineno - 1

    def open(self) -> None:
        self.fh = fh = open_input(self.path, "record file")  # noqa: SIM115 - closed in close(); never a FIFO
        st = os.fstat(fh.fileno())
        self.ino = st.st_ino
        self.pos = 0
        self.cut = LineCut()
        # several runs in the file (run --record appends) are never merged: only run ``run`` (default 1) is
        # replayed; runs after it (a followed file growing) are left out
        self.splitter = RunSplitter(self.run or 1)

    def _keep(self, items: list) -> list:
        return items if self.splitter is None else self.splitter.feed(items)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None

    def read_chunk(self) -> list | None:
        """Parse the next chunk; None at end of file (nothing new)."""
        assert self.fh is not None
        data = self.fh.read(self.chunk_size)
        if not data:
            return None
        self.pos += len(data)
        if self.verifier is not None:
            self.verifier.feed(data)
        segments = self.cut.feed(data)
        if not segments:
            return []
        if self.parse is parse_lines:  # a servewatch record file: the one block reader (report uses it too)
            return self._keep(parse_segments(segments, self.label))
        numbered: list = []  # another tool's line format: converted line by line (importing)
        for first, body in segments:
            if type(body) is int:  # a line longer than the cap: its length, reported by the parser
                numbered.append((first, body, True))
                continue
            numbered.extend((n, line, True) for n, line in enumerate(body.split(b"\n"), first))  # type: ignore[union-attr]
        return self._keep(list(self.parse(numbered, self.label)))

    def flush_partial(self) -> list:
        """The kept partial line as a final (unterminated) line: a record or a truncation issue."""
        last = self.cut.end()
        if last is None:
            return []
        self.cut = LineCut(first_line=last[0] + 1)
        if self.parse is parse_lines:
            return self._keep(last_line_items(last, self.label))
        return self._keep(list(self.parse([(last[0], last[1], False)], self.label)))

    def check_replaced(self) -> tuple[str, list] | None:
        """At end of file: has the file been truncated or replaced?

        Returns None when not, else (what happened, the old partial line as a final line) after
        reopening at the start of the new content.
        """
        assert self.fh is not None
        try:
            size_now = os.fstat(self.fh.fileno()).st_size
        except OSError:
            size_now = self.pos
        if size_now > self.pos:
            return None  # more to read from the current file first
        if size_now < self.pos:
            old = self.pos
            leftover = self.flush_partial()
            self.fh.seek(0)
            self.pos = 0
            self.cut = LineCut()
            return (f"file truncated (was {old} bytes, now {size_now}): reading the new content from its start",
                    leftover)
        try:
            st = os.stat(self.path)
        except OSError:
            return None  # renamed away and not yet recreated: keep waiting on the old file
        if st.st_ino != self.ino:
            leftover = self.flush_partial()
            self.close()
            try:
                self.open()
            except OSError as exc:
                raise OSError(f"file rotated but the new file cannot be opened ({exc.strerror or exc})") from None
            return "file rotated (replaced by a new file): reading the new file from its start", leftover
        return None


class ReplaySource:
    """Plays a record file into a sink at its recorded pace. See the module docstring."""

    mode: SourceMode = "REPLAY"

    def __init__(
        self,
        path: str | os.PathLike,
        speed: float = 1.0,
        max_speed: bool = False,
        follow: bool = False,
        *,
        label: str | None = None,
        batch_size: int = 5000,
        poll_interval: float = 0.2,
        chunk_size: int = 1 << 20,
        clock: Callable[[], float] = time.monotonic,
        line_parser: Callable | None = None,
        run: int | None = None,
        verify_key: bytes | None = None,
        key_name: str = "the key given",
    ) -> None:
        self.path = os.fspath(path)
        self.run = run  # the run replayed (1-based) of a file holding several (default: the first)
        # the digest chain (tui.core.chain): verified on the raw chunks as read; the result goes to the sink's
        # ``set_records_integrity`` at the end of the file (not while following: the file is still growing)
        self.verify_key = verify_key
        self.key_name = key_name
        self.line_parser = line_parser
        self.label = label if label is not None else self.path
        self.follow = bool(follow)
        self.batch_size = max(1, int(batch_size))
        self.poll_interval = max(0.01, float(poll_interval))
        self.chunk_size = max(64, int(chunk_size))
        self._clock = clock
        self._cv = threading.Condition()
        self._speed = min(MAX_SPEED, max(MIN_SPEED, float(speed)))
        self._max_speed = bool(max_speed)
        self._paused = False
        self._step: str | None = None
        self._jump = False
        self._stop = False
        self._finished = False
        self._caught_up = False
        self._thread: threading.Thread | None = None
        # record clock: rt_now = rt_base + (clock() - wall_base) * speed (frozen while paused)
        self._rt_base: float | None = None
        self._wall_base = 0.0
        self.first_record_time: float | None = None
        self.record_time: float | None = None  # time of the last timed record handed over
        self.delivered = 0
        self.issues = 0
        self.batches = 0
        self.loops = 0  # loop iterations of the source thread (lets tests wait for "it had its chance")
        self.notices: list[str] = []
        self.error: str | None = None
        self.waiting_for_file = False  # following a file that does not exist yet

    # ------------------------------------------------------------------ Source protocol
    def start(self, sink: Sink) -> None:
        if self._thread is not None:
            raise RuntimeError("ReplaySource already started")
        self._thread = threading.Thread(target=self._run, args=(sink,), name=f"replay:{self.label}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=timeout)

    @property
    def controls(self) -> ReplaySource:
        """The replay keys act on this source itself."""
        return self

    @property
    def in_flight(self) -> None:
        """A replay has no client in flight."""
        return None

    @property
    def finished(self) -> bool:
        """True once everything in the file has been handed over (never, while following)."""
        return self._finished

    # ------------------------------------------------------------------ state
    @property
    def speed(self) -> float:
        return self._speed

    @property
    def max_speed(self) -> bool:
        return self._max_speed

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def caught_up(self) -> bool:
        """Following and at the current end of the file."""
        return self._caught_up

    @property
    def status(self) -> str:
        """A short badge: 'PAUSED', 'REPLAY x4', 'REPLAY max', with ' · following' / ' · end'."""
        if self._paused:
            base = "PAUSED"
        elif self._max_speed:
            base = "REPLAY max"
        else:
            base = f"REPLAY x{_fmt_speed(self._speed)}"
        if self.waiting_for_file:
            base += " · waiting for the file"
        elif self.follow and self._caught_up:
            base += " · following"
        elif self._finished:
            base += " · end"
        return base

    # ------------------------------------------------------------------ controls
    def pause(self) -> None:
        with self._cv:
            if not self._paused:
                self._rt_base = self._record_now()
                self._paused = True
            self._cv.notify_all()

    def resume(self) -> None:
        with self._cv:
            if self._paused:
                self._wall_base = self._clock()
                self._paused = False
            self._cv.notify_all()

    def toggle_pause(self) -> bool:
        """Pause or resume; returns the new paused state."""
        with self._cv:
            if self._paused:
                self.resume()
            else:
                self.pause()
            return self._paused

    def set_speed(self, speed: float) -> float:
        with self._cv:
            self._rt_base = self._record_now()
            self._wall_base = self._clock()
            self._speed = min(MAX_SPEED, max(MIN_SPEED, float(speed)))
            self._cv.notify_all()
            return self._speed

    def speed_up(self) -> float:
        """x2 (up to 1024x). Returns the new speed."""
        if self._max_speed:
            return self._speed
        return self.set_speed(self._speed * 2.0)

    def slow_down(self) -> float:
        """/2 (down to 1/16x); from max-speed mode back to the last paced speed."""
        with self._cv:
            if self._max_speed:
                self._max_speed = False
                self._rt_base = self.record_time
                self._wall_base = self._clock()
                self._cv.notify_all()
                return self._speed
        return self.set_speed(self._speed / 2.0)

    def set_max_speed(self, on: bool = True) -> None:
        with self._cv:
            self._max_speed = bool(on)
            if not on:
                self._rt_base = self.record_time
                self._wall_base = self._clock()
            self._cv.notify_all()

    def step(self, unit: str = "record") -> None:
        """Pause (if running) and hand over one record, or one second of record time."""
        if unit not in ("record", "second"):
            raise ValueError("step unit must be 'record' or 'second'")
        with self._cv:
            self.pause()
            self._step = unit
            self._cv.notify_all()

    def jump_to_end(self) -> None:
        """Hand over everything up to the current end of the file at once."""
        with self._cv:
            self._jump = True
            self._cv.notify_all()

    # ------------------------------------------------------------------ internals
    def _record_now(self) -> float | None:
        if self._rt_base is None:
            return None
        if self._paused:
            return self._rt_base
        return self._rt_base + (self._clock() - self._wall_base) * self._speed

    def _notice(self, text: str) -> None:
        if len(self.notices) < MAX_NOTICES:
            self.notices.append(text)

    def _deliver(self, sink: Sink, batch: list) -> None:
        if not batch:
            return
        for item in batch:
            t = record_time(item)
            if t is not None:
                if self.first_record_time is None:
                    self.first_record_time = t
                if self.record_time is None or t > self.record_time:
                    self.record_time = t
            elif isinstance(item, LineIssue):
                self.issues += 1
        sink(batch)
        self.delivered += len(batch)
        self.batches += 1

    def _wait_for_file(self) -> bool:
        """Following a file that does not exist yet: wait until it appears (True) or the source stops (False)."""
        if os.path.exists(self.path):
            return True
        self.waiting_for_file = True
        self._notice(f"waiting for {self.label} to appear")
        with self._cv:
            while not self._stop and not os.path.exists(self.path):
                self._cv.wait(self.poll_interval)
        self.waiting_for_file = False
        return not self._stop

    def _run(self, sink: Sink) -> None:
        reader = _Reader(self.path, self.label, self.chunk_size, self.line_parser, self.run)
        if not self.follow:
            from tui.core.chain import ChainVerifier

            reader.verifier = ChainVerifier(self.verify_key, self.key_name)
        if self.follow and not self._wait_for_file():
            self._finished = True
            return
        try:
            reader.open()
        except OSError as exc:
            self.error = f"cannot read {self.label}: {exc.strerror or exc}"
            self._notice(self.error)
            self._deliver(sink, [LineIssue(self.label, 0, f"cannot read file: {exc.strerror or exc}")])
            self._finished = True
            return
        try:
            self._loop(sink, reader)
        except Exception as exc:  # never let a bug in the reader kill the UI silently
            self.error = f"replay stopped: {type(exc).__name__}: {exc}"
            self._notice(self.error)
            try:
                self._deliver(sink, [LineIssue(self.label, reader.lineno, self.error)])
            except Exception:
                pass
        finally:
            if self.follow:
                try:  # a partial line left when following stops is reported, not dropped
                    rest = reader.flush_partial()
                    if rest and not self._finished:
                        self._deliver(sink, rest)
                except Exception:
                    pass
            reader.close()
            self._finished = True

    def _fill(self, reader: _Reader, pending: deque) -> bool:
        """Read more into ``pending``; False when the file has nothing more right now."""
        while True:
            items = reader.read_chunk()
            if items is None:
                return False
            if items:
                for it in items:
                    pending.append((record_time(it), it))
                return True
            # a chunk without a newline: keep reading until a line completes or EOF

    def _at_eof(self, sink: Sink, reader: _Reader, pending: deque) -> bool:
        """Handle end of file. Returns True when the replay is over."""
        if not self.follow:
            for it in reader.flush_partial():
                pending.append((record_time(it), it))
            if pending:
                return False
            if reader.verifier is not None:
                set_integrity = getattr(sink, "set_records_integrity", None)
                if set_integrity is not None:  # the run replayed (issue 36: integrity is per run)
                    from tui.sources.evidence_reader import judged_integrity

                    splitter = reader.splitter
                    set_integrity(reader.verifier.finish() if splitter is None
                                  else judged_integrity(reader.verifier, splitter))
            finish = getattr(sink, "finish", None)  # the whole file is in: the cross-checks (Monitor.finish)
            if finish is not None:
                finish()
            self._finished = True
            return True
        with self._cv:
            if self._jump:
                self._jump = False
                self._rebase_to_last()
            if not self._caught_up:
                self._caught_up = True
                self._rebase_to_last()
        line_before = reader.lineno
        replaced = reader.check_replaced()
        if replaced is not None:
            msg, leftover = replaced
            self._notice(msg)
            self._deliver(sink, leftover + [LineIssue(self.label, line_before, msg, "truncated")])
            return False
        with self._cv:
            if not self._stop and self._step is None:
                self._cv.wait(self.poll_interval)
            self._step = None if self._step is not None and not pending else self._step
        return False

    def _rebase_to_last(self) -> None:
        self._rt_base = self.record_time
        self._wall_base = self._clock()

    def _loop(self, sink: Sink, reader: _Reader) -> None:
        pending: deque = deque()
        while True:
            with self._cv:
                self.loops += 1
                while self._paused and self._step is None and not self._jump and not self._stop:
                    self._cv.wait(self.poll_interval)
                    self.loops += 1
                if self._stop:
                    return
                step, jump, max_speed = self._step, self._jump, self._max_speed
            if not pending and not self._fill(reader, pending):
                if self._at_eof(sink, reader, pending):
                    return
                continue

            if step is not None:
                self._do_step(sink, reader, pending, step)
                continue

            if jump or max_speed or (self.follow and self._caught_up):
                batch = [pending.popleft()[1] for _ in range(min(self.batch_size, len(pending)))]
                self._deliver(sink, batch)
                with self._cv:  # let the UI thread in between batches
                    if not self._stop:
                        self._cv.wait(0.001)
                    if not self._jump and not self._max_speed:
                        self._rebase_to_last()
                continue

            # paced delivery on the record clock
            with self._cv:
                if self._rt_base is None:
                    first_t = next((t for t, _ in pending if t is not None), None)
                    if first_t is not None:
                        self._rt_base = first_t
                        self._wall_base = self._clock()
                now_rt = self._record_now()
            batch = []
            while pending and len(batch) < self.batch_size:
                t, it = pending[0]
                if t is not None and now_rt is not None and t > now_rt:
                    break
                if t is not None and now_rt is None:
                    break
                batch.append(it)
                pending.popleft()
            if batch:
                self._deliver(sink, batch)
                continue
            # wait until the next record is due (bounded, so controls stay responsive)
            next_t = pending[0][0]
            with self._cv:
                now_rt = self._record_now()
                if now_rt is None or next_t is None:
                    continue
                wait = (next_t - now_rt) / self._speed
                if wait > 0 and not self._stop and self._step is None and not self._jump and not self._max_speed:
                    self._cv.wait(min(wait, self.poll_interval))

    def _take_more(self, reader: _Reader, pending: deque) -> bool:
        return bool(pending) or self._fill(reader, pending)

    def _do_step(self, sink: Sink, reader: _Reader, pending: deque, unit: str) -> None:
        batch: list = []
        if unit == "record":
            while self._take_more(reader, pending):
                t, it = pending.popleft()
                batch.append(it)
                if t is not None:
                    break
        else:
            start = self._rt_base if self._rt_base is not None else self.record_time
            if start is None:
                start = next((t for t, _ in pending if t is not None), None)
            while self._take_more(reader, pending):
                t, it = pending[0]
                if start is None and t is not None:
                    start = t
                if t is not None and start is not None and t > start + 1.0:
                    break
                batch.append(it)
                pending.popleft()
                if len(batch) >= self.batch_size:
                    self._deliver(sink, batch)
                    batch = []
        self._deliver(sink, batch)
        with self._cv:
            self._step = None
            if unit == "second" and self.record_time is not None:
                self._rt_base = max(self.record_time, (start or self.record_time) + 1.0)
            else:
                self._rt_base = self.record_time
            self._wall_base = self._clock()


def _fmt_speed(speed: float) -> str:
    if speed >= 1:
        return f"{speed:g}"
    return f"1/{round(1 / speed):d}"


def validate_record_file(path: str | os.PathLike, follow: bool = False) -> str | None:
    """A readable problem when ``path`` cannot be replayed at all (else None).

    Following, a file that does not exist yet (or is still empty) is waited for. A file none of whose lines
    is a usable record (another tool's JSON, binary, empty) is refused: "not a servewatch record file"."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return None if follow else f"{p}: no such file"
    except OSError as exc:
        return f"{p}: cannot read ({exc.strerror or exc})"
    special = not_a_plain_file(p, st.st_mode)
    if special:
        return special
    try:
        with open_input(p, "record file") as fh:  # lines longer than the cap are read past, never held
            numbered = iter_lines(iter(lambda: fh.read(1 << 20), b""), str(p))
            usable, total, first = scan_usable(parse_lines(numbered, str(p)))
    except OSError as exc:
        return f"{p}: cannot read ({exc.strerror or exc})"
    if follow and total == 0:
        return None  # still empty: wait for the writer
    problem = not_a_record_file(usable, total, first)
    return f"{p}: {problem}" if problem else None


if TYPE_CHECKING:  # the checker verifies that a replay is a console Source with replay controls

    def _is_a_source(s: ReplaySource) -> Source:
        return s

    def _has_controls(s: ReplaySource) -> ReplayControls:
        return s
