"""A large record file read by a forked reader (``tui.sources.parallel_read``) gives what the one reading path gives:
the same items in the same order (every record and line problem, each field), the same runs, the same integrity,
the same exception; a reader that dies is an internal error, never a shorter file; a judging process that stops
early leaves no reader behind. Forks: marked slow."""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path

import pytest

import tui.sources.parallel_read as P
from tui.cli import settings_of
from tui.cli.reporting import run_report
from tui.core.runs import RunNotInFile, SeveralRuns
from tui.sources.evidence_reader import LAST_RUN, ReadSettings, open_evidence

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "sample_logs" / "default.jsonl"


def _key(item: object) -> tuple:
    return type(item).__name__, repr(item)


def _read(path: Path, settings: ReadSettings, parallel: bool) -> tuple:
    with open_evidence(str(path), settings) as ev:
        try:
            items = [_key(x) for b in (ev.blocks(parallel=True) if parallel else ev._blocks()) for x in b]
        except (SeveralRuns, RunNotInFile) as exc:
            return ("raised", type(exc).__name__, str(exc), getattr(exc, "listing", lambda: None)())
        return items, ev.runs, ev.integrity


def _files(tmp: Path) -> list[tuple[Path, ReadSettings]]:
    data = DEFAULT.read_bytes()
    lines = data.split(b"\n")
    rng = random.Random(38)
    out = [(DEFAULT, ReadSettings()), (ROOT / "sample_logs" / "seed.jsonl", ReadSettings())]
    two = tmp / "two-runs.jsonl"
    two.write_bytes(data + data)
    out += [(two, ReadSettings()), (two, ReadSettings(pick_run=2)), (two, ReadSettings(pick_run=3)),
            (two, ReadSettings(pick_run=LAST_RUN)), (DEFAULT, ReadSettings(verify_key=b"k" * 32, key_name="$K"))]
    bad = list(lines)
    for _ in range(30):  # malformed, truncated, edited, reordered and doubled lines; a request edited in place
        i = rng.randrange(1, len(bad) - 1)
        bad[i] = rng.choice([b"{not json", b"", bad[i][: len(bad[i]) // 2], bad[i].replace(b"true", b"false"),
                             bad[i] + b"," + bad[i], b"[1, 2]", b'{"type":"mystery"}', bad[i - 1]])
    edited = tmp / "edited.jsonl"
    edited.write_bytes(b"\n".join(bad))  # no newline at its end: the last line unterminated
    out.append((edited, ReadSettings()))
    offsets = tmp / "offsets.jsonl"
    rows = [json.loads(x) for x in lines if x.startswith(b'{"type":"request"')][:300]
    with offsets.open("w") as fh:
        for r in rows:
            r["token_offsets"] = [0.0, 0.01, 0.02]
            r["t_last_token"] = r["t_end"]
            fh.write(json.dumps(r) + "\n")
    out.append((offsets, ReadSettings()))
    return out


def _counting(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every file read in two processes from now on, and a count of the readers forked (the test is not vacuous)."""
    import tui.sources.evidence_reader as R

    monkeypatch.setattr(P, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(P, "_mostly_standard", lambda fd: True)
    # threads other tests of this process left idle (an executor's) hold no lock the reader needs: fork anyway
    monkeypatch.setattr(P.threading, "active_count", lambda: 1)
    forked: list = []

    def counted(*a, **kw):
        forked.append(1)
        return P.read_in_parallel(*a, **kw)

    monkeypatch.setattr(R, "read_in_parallel", counted)
    return forked


def test_a_forked_reader_gives_what_the_one_path_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forked = _counting(monkeypatch)
    files = _files(tmp_path)
    for path, settings in files:
        serial = _read(path, settings, parallel=False)
        assert _read(path, settings, parallel=True) == serial, path
    assert len(forked) == len(files)
    assert _read(tmp_path / "two-runs.jsonl", ReadSettings(), parallel=True)[1] == "SeveralRuns"


def test_the_report_of_a_large_file_is_the_one_path_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outs = []
    for flags in ([], ["--json"]):  # the one path
        out = io.StringIO()
        rc = run_report(settings_of(["report", str(DEFAULT), *flags]), out=out)
        outs.append((rc, out.getvalue()))
    forked = _counting(monkeypatch)  # then the forked reader
    for flags in ([], ["--json"]):
        out = io.StringIO()
        rc = run_report(settings_of(["report", str(DEFAULT), *flags]), out=out)
        outs.append((rc, out.getvalue()))
    assert outs[:2] == outs[2:] and len(forked) == 2


def test_only_a_large_regular_file_on_two_cpus_is_read_in_two_processes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P.threading, "active_count", lambda: 1)  # this process's other tests' threads aside
    with DEFAULT.open("rb") as fh:
        assert not P.parallel_worth_it(fh, cpus=4)  # far below PARALLEL_MIN_BYTES
    std = {"type": "request", "id": "b0", "t_intended": 1767225600.0, "t_sent": 1767225600.0,
           "t_first_token": 1767225600.2, "t_end": 1767225601.0, "input_tokens": 128, "output_tokens": 64,
           "finish_reason": "length", "http_status": 200, "complete": True, "error": None, "error_detail": None,
           "phase": "measure", "level": 1, "round": 1}  # the fields request_to_dict always writes, no more
    line = json.dumps(std, separators=(",", ":")).encode()
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        fh.write((line + b"\n") * 2000)
        fh.truncate(P.PARALLEL_MIN_BYTES)
    with big.open("rb") as fh:
        assert P.parallel_worth_it(fh, cpus=2) and not P.parallel_worth_it(fh, cpus=1)
        assert fh.tell() == 0  # looked at without moving
    rec = json.loads(line)
    rec.update(t_last_token=rec["t_end"], output_chunks=rec["output_tokens"], itl_max_ms=1.0)
    streamed = tmp_path / "streamed.jsonl"
    with streamed.open("wb") as fh:
        fh.write((json.dumps(rec, separators=(",", ":")).encode() + b"\n") * 2000)
        fh.truncate(P.PARALLEL_MIN_BYTES)
    with streamed.open("rb") as fh:  # a run's stream fields: the reader would be the slower half, one process
        assert not P.parallel_worth_it(fh, cpus=2)
    monkeypatch.setattr(P.threading, "active_count", lambda: 2)  # another thread: a fork would copy only this one
    with big.open("rb") as fh:
        assert not P.parallel_worth_it(fh, cpus=2)
    assert not P.parallel_worth_it(io.BytesIO(b"x" * 10))  # not a file


def _gen(n: int, then: str):
    def blocks():
        for i in range(n):
            yield [i]  # not a record: pickled with its place
        if then == "die":
            os._exit(3)
        if then == "unpicklable":
            raise ValueError(lambda: None)  # its argument does not pickle
    return blocks


def test_a_reader_that_dies_is_an_internal_error_not_a_short_file() -> None:
    got = []
    with pytest.raises(RuntimeError, match="ended before its last frame"):
        for b in P.read_in_parallel(_gen(3, "die"), lambda: None, lambda r: None):
            got += b
    assert got == [0, 1, 2]
    with pytest.raises(RuntimeError, match="the record reader failed: ValueError"):
        list(P.read_in_parallel(_gen(1, "unpicklable"), lambda: None, lambda r: None))


def test_stopping_early_leaves_no_reader_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    pids: list[int] = []
    fork = os.fork

    def recorded() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(P.os, "fork", recorded)
    gen = P.read_in_parallel(_gen(10_000, "end"), lambda: "done", lambda r: None)
    assert next(gen) == [0]
    gen.close()
    assert len(pids) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)  # the reader is gone and reaped, not even a zombie
