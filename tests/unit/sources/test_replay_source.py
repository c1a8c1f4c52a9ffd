"""ReplaySource: pacing on the record clock, controls, follow mode, bad input.

Pacing is tested with a hand-driven clock: the source thread only ever compares record
time against ``clock()``, so advancing the fake clock is what releases the next record.
Waiting is always on a condition with a bounded deadline.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from tui.core.records import LineIssue, RequestRecord, RunHeader, dumps, request_to_dict, run_header
from tui.sources.replay import ReplaySource, record_time, validate_record_file

DEADLINE_S = 10.0


class Collector:
    """A sink that records what it gets and lets a test wait for a condition."""

    def __init__(self) -> None:
        self.items: list = []
        self.batches: list[int] = []
        self.cv = threading.Condition()

    def __call__(self, items) -> None:
        items = list(items)
        with self.cv:
            self.items.extend(items)
            self.batches.append(len(items))
            self.cv.notify_all()

    def wait_for(self, pred, what: str = "condition") -> None:
        deadline = time.monotonic() + DEADLINE_S
        with self.cv:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}; got {len(self.items)} items")
                self.cv.wait(min(left, 0.05))

    @property
    def requests(self) -> list[RequestRecord]:
        return [i for i in self.items if isinstance(i, RequestRecord)]

    @property
    def issues(self) -> list[LineIssue]:
        return [i for i in self.items if isinstance(i, LineIssue)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wait_until(pred, what: str = "condition") -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        threading.Event().wait(0.005)  # yield to the source thread; the condition is what we wait on


def wait_loops(src: ReplaySource, n: int = 5) -> None:
    """Let the source thread go round its loop n more times (it had its chance to deliver)."""
    start = src.loops
    wait_until(lambda: src.loops >= start + n, "source loop iterations")


T0 = 1_767_225_600.0  # record times are wall-clock epoch seconds: the t_end values below are offsets from T0


def req(i: int, t_end: float, ok: bool = True) -> str:
    t_end += T0
    t_sent = t_end - 1.0
    r = RequestRecord(
        id=f"r{i}", t_sent=t_sent, t_end=t_end, complete=ok, t_intended=t_sent,
        t_first_token=t_sent + 0.2, output_tokens=10, error=None if ok else "http_5xx",
    )
    return dumps(request_to_dict(r))


def header() -> str:
    return dumps(run_header(synthetic=True, started_at=0.0))


def write(path, lines) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("".join(lines))


@pytest.fixture
def timeline(tmp_path):
    """A header and requests finishing at record times 100, 110, 120, 130, 140."""
    p = tmp_path / "run.jsonl"
    write(p, [header()] + [req(i, 100.0 + 10 * i) for i in range(5)])
    return p


def started(path, sink, **kw) -> ReplaySource:
    kw.setdefault("poll_interval", 0.01)
    src = ReplaySource(path, **kw)
    src.start(sink)
    return src


def test_record_time_uses_t_end_for_requests():
    r = RequestRecord(id="a", t_sent=1.0, t_end=3.0, complete=True, t_intended=1.0)
    assert record_time(r) == 3.0
    assert record_time(RunHeader({})) is None


def test_max_speed_delivers_everything_in_bounded_batches(tmp_path):
    p = tmp_path / "big.jsonl"
    write(p, [header()] + [req(i, 10.0 + i) for i in range(23)])
    sink = Collector()
    src = started(p, sink, max_speed=True, batch_size=5)
    try:
        wait_until(lambda: src.finished, "replay to finish")
        assert [r.id for r in sink.requests] == [f"r{i}" for i in range(23)]
        assert isinstance(sink.items[0], RunHeader)
        assert max(sink.batches) <= 5
        assert len(sink.batches) >= 5
        assert src.record_time == T0 + 32.0 and src.first_record_time == T0 + 10.0
        assert "end" in src.status
    finally:
        src.stop()


def test_paced_replay_follows_the_record_clock(timeline):
    clock, sink = FakeClock(), Collector()
    src = started(timeline, sink, clock=clock)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1, "first request (due at once)")
        wait_loops(src)
        assert len(sink.requests) == 1, "the next record is 10 s of record time away"
        clock.now += 9.0
        wait_loops(src)
        assert len(sink.requests) == 1
        clock.now += 1.0
        sink.wait_for(lambda: len(sink.requests) == 2, "second request after 10 s")
        assert src.status == "REPLAY x1"
    finally:
        src.stop()


def test_speed_up_and_slow_down_scale_the_clock(timeline):
    clock, sink = FakeClock(), Collector()
    src = started(timeline, sink, clock=clock)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1)
        assert src.speed_up() == 2.0 and src.speed_up() == 4.0
        assert src.status == "REPLAY x4"
        clock.now += 2.5  # 10 s of record time at x4
        sink.wait_for(lambda: len(sink.requests) == 2, "second request at x4")
        assert src.slow_down() == 2.0
        clock.now += 4.0  # 8 s of record time: not yet
        wait_loops(src)
        assert len(sink.requests) == 2
        clock.now += 1.0
        sink.wait_for(lambda: len(sink.requests) == 3, "third request at x2")
    finally:
        src.stop()


def test_pause_freezes_record_time_and_resume_continues(timeline):
    clock, sink = FakeClock(), Collector()
    src = started(timeline, sink, clock=clock)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1)
        assert src.toggle_pause() is True
        assert src.status == "PAUSED"
        clock.now += 1000.0  # wall time passing while paused does not count
        wait_loops(src)
        assert len(sink.requests) == 1
        assert src.toggle_pause() is False
        wait_loops(src)
        assert len(sink.requests) == 1
        clock.now += 10.0
        sink.wait_for(lambda: len(sink.requests) == 2)
    finally:
        src.stop()


def test_step_one_record_and_one_second(tmp_path):
    p = tmp_path / "steps.jsonl"
    # record times 100, 100.4, 100.8, 101.6, 105
    write(p, [header()] + [req(i, t) for i, t in enumerate((100.0, 100.4, 100.8, 101.6, 105.0))])
    clock, sink = FakeClock(), Collector()
    src = started(p, sink, clock=clock)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1)
        src.step("record")
        sink.wait_for(lambda: len(sink.requests) == 2, "one stepped record")
        assert src.paused
        wait_loops(src)
        assert len(sink.requests) == 2, "stepping pauses: nothing else arrives"
        src.step("second")  # from 100.4: everything up to 101.4
        sink.wait_for(lambda: len(sink.requests) == 3, "one second of records")
        wait_loops(src)
        assert [r.id for r in sink.requests] == ["r0", "r1", "r2"]
        src.step("second")  # 101.4 .. 102.4
        sink.wait_for(lambda: len(sink.requests) == 4)
        with pytest.raises(ValueError):
            src.step("minute")
    finally:
        src.stop()


def test_jump_to_end_delivers_the_rest_at_once(timeline):
    clock, sink = FakeClock(), Collector()
    src = started(timeline, sink, clock=clock)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1)
        src.jump_to_end()
        sink.wait_for(lambda: len(sink.requests) == 5, "all requests after jump")
        wait_until(lambda: src.finished)
    finally:
        src.stop()


def test_malformed_lines_become_line_issues_with_numbers(tmp_path):
    p = tmp_path / "bad.jsonl"
    write(p, [header(), "not json\n", req(1, 5.0), '{"type":"request","id":"x"}\n', '{"type":"alien"}\n', req(2, 6.0)])
    sink = Collector()
    src = started(p, sink, max_speed=True, label="bad.jsonl")
    try:
        wait_until(lambda: src.finished)
        assert [r.id for r in sink.requests] == ["r1", "r2"]
        lines = sorted((i.line, i.kind) for i in sink.issues)
        assert lines == [(2, "malformed"), (4, "malformed"), (5, "unknown_type")]
        assert all(str(i).startswith("bad.jsonl:") for i in sink.issues)
        assert src.issues == 3
    finally:
        src.stop()


def test_final_line_without_newline(tmp_path):
    p = tmp_path / "cut.jsonl"
    write(p, [header(), req(1, 5.0), req(2, 6.0).rstrip("\n")])
    sink = Collector()
    src = started(p, sink, max_speed=True)
    wait_until(lambda: src.finished)
    assert [r.id for r in sink.requests] == ["r1", "r2"]

    p2 = tmp_path / "cut2.jsonl"
    write(p2, [header(), req(1, 5.0), req(2, 6.0)[:40]])
    sink2 = Collector()
    src2 = started(p2, sink2, max_speed=True)
    wait_until(lambda: src2.finished)
    assert [r.id for r in sink2.requests] == ["r1"]
    assert [(i.line, i.kind) for i in sink2.issues] == [(3, "truncated")]


def test_missing_file_is_reported_not_raised(tmp_path):
    sink = Collector()
    src = started(tmp_path / "nope.jsonl", sink)
    wait_until(lambda: src.finished)
    assert len(sink.issues) == 1 and "cannot read" in sink.issues[0].reason
    assert src.error and "nope.jsonl" in src.error
    assert validate_record_file(tmp_path / "nope.jsonl").endswith("no such file")
    assert "is a directory, not a record file" in validate_record_file(tmp_path)


def test_follow_picks_up_appended_records_and_partial_lines(tmp_path):
    p = tmp_path / "live.jsonl"
    write(p, [header(), req(0, 10.0)])
    sink = Collector()
    src = started(p, sink, follow=True)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1)
        wait_until(lambda: src.caught_up, "caught up")
        line = req(1, 11.0)
        with open(p, "a", encoding="utf-8") as fh:
            fh.write(line[:30])  # a writer caught mid-line
        wait_loops(src)
        assert len(sink.requests) == 1 and not sink.issues, "a partial line waits for the rest"
        with open(p, "a", encoding="utf-8") as fh:
            fh.write(line[30:] + req(2, 12.0))
        sink.wait_for(lambda: len(sink.requests) == 3, "appended records")
        assert [r.id for r in sink.requests] == ["r0", "r1", "r2"], "no re-reading from the start"
        assert not sink.issues
        assert not src.finished and "following" in src.status
    finally:
        src.stop()


def test_follow_reports_truncation_and_reads_new_content(tmp_path):
    p = tmp_path / "trunc.jsonl"
    write(p, [header(), req(0, 10.0), req(1, 11.0)])
    sink = Collector()
    src = started(p, sink, follow=True)
    try:
        sink.wait_for(lambda: len(sink.requests) == 2)
        wait_until(lambda: src.caught_up)
        write(p, [req(7, 20.0)])  # shorter than before: truncated and rewritten
        sink.wait_for(lambda: any(r.id == "r7" for r in sink.requests), "record after truncation")
        assert [i.kind for i in sink.issues] == ["truncated"]
        assert "truncated" in sink.issues[0].reason
        assert any("truncated" in n for n in src.notices)
    finally:
        src.stop()


def test_follow_reports_rotation(tmp_path):
    p = tmp_path / "rot.jsonl"
    write(p, [header(), req(0, 10.0)])
    sink = Collector()
    src = started(p, sink, follow=True)
    try:
        sink.wait_for(lambda: len(sink.requests) == 1)
        wait_until(lambda: src.caught_up)
        newp = tmp_path / "rot.jsonl.new"
        write(newp, [header(), req(1, 30.0), req(2, 31.0), req(3, 32.0)])
        os.replace(newp, p)
        sink.wait_for(lambda: len(sink.requests) == 4, "records of the rotated file")
        assert any("rotated" in i.reason for i in sink.issues)
    finally:
        src.stop()


def test_stop_is_prompt_and_idempotent(timeline):
    src = started(timeline, Collector(), clock=FakeClock())
    src.stop()
    src.stop()
    assert src.finished
