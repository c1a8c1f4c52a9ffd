"""The one way in for evidence: ``open_evidence(path, settings)`` opens a path (or standard input, ``-``) once,
decides what it holds (``tui.sources.evidence_probe``) and hands back an :class:`EvidenceRun`:

- servewatch records: ``run.blocks()`` yields the parsed records (``tui.core.records``) and line problems (with
  file and line) chunk by chunk, memory bounded, only those of the run picked (``--run N``; several runs are
  never merged: ``tui.core.runs``); the same raw bytes go through the digest chain's verifier, whose result is
  ``run.integrity`` once the blocks are read;
- another tool's export: the same blocks, converted on the fly (``tui.sources.importing``), the file read once;
- a watch recording: ``tui.sources.evidence_watch.read_watch(run, cfg)`` judges its windows.

What each command does with the records (the Monitor of report and accept, the requests of compare) is
``tui.sources.evidence_monitor``. Raises OSError (unreadable), ``ImportProblem`` (another tool's file that
cannot be imported), ``UsageError`` (the last run of standard input), ``SeveralRuns`` / ``RunNotInFile``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from tui.core.bounds import size_text
from tui.core.chain import ChainVerifier, RecordsIntegrity
from tui.core.exitcodes import UsageError
from tui.core.records import iter_blocks
from tui.core.runs import Item, RunInfo, RunSplitter
from tui.sources.evidence_probe import IMPORT, MAX_DOCUMENT_BYTES, RECORDS, STDIN, STDIN_NAME, WATCH, Kind, open_probed
from tui.sources.importing import ImportProblem, import_file, records_of
from tui.sources.parallel_read import parallel_worth_it, read_in_parallel

__all__ = ["IMPORT", "LAST_RUN", "RECORDS", "WATCH", "EvidenceRun", "ReadSettings", "ReplayPlan", "check_runs",
           "judged_integrity", "open_evidence", "plan_replay", "replay_check", "run_header_of"]

LAST_RUN = -1  # ``pick_run`` of `run` and `sweep`: the run they have just appended
IMPORT_BATCH = 4096  # converted records handed on in blocks of this many


@dataclass(frozen=True)
class ReadSettings:
    """How to read: which run (``pick_run`` N 1-based, ``LAST_RUN``, None: the only one), the key that checks a
    signed digest chain, whether a watch recording is told apart (report, replay) or read as records (accept,
    compare), and whether another tool's bytes go through the chain verifier too (compare shows the result)."""

    pick_run: int | None = None
    verify_key: bytes | None = None
    key_name: str = "the key given"
    watch: bool = True
    verify_imported: bool = False


@dataclass
class EvidenceRun:
    """One file of evidence, open. ``name``: as shown (the path, ``<stdin>``); ``format``: another tool's format
    (None for servewatch records and watch recordings). Use as a context manager (the handle is closed)."""

    kind: Kind
    path: str
    name: str
    format: str | None
    settings: ReadSettings
    handle: BinaryIO
    document: bytes | None = None
    integrity: RecordsIntegrity | None = None
    runs: list[RunInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __enter__(self) -> EvidenceRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.path != STDIN:
            self.handle.close()

    def blocks(self, parallel: bool = False) -> Iterator[list[Item]]:
        """The records and line problems of the run picked, chunk by chunk; when exhausted, ``runs`` lists the
        file's runs, ``integrity`` holds the digest chain's verification, and a file of several runs without
        ``pick_run`` (or a run beyond them) has raised ``SeveralRuns`` / ``RunNotInFile``. ``parallel``: a large
        record file may be read by a forked reader while the caller ingests (``tui.sources.parallel_read``: the same
        blocks, runs, integrity and exceptions)."""
        if parallel and self.kind == RECORDS and self.path != STDIN and parallel_worth_it(self.handle):
            def done(result: tuple[list[RunInfo], RecordsIntegrity | None]) -> None:
                self.runs, self.integrity = result

            yield from read_in_parallel(self._blocks, lambda: (self.runs, self.integrity), done)
            return
        yield from self._blocks()

    def _blocks(self) -> Iterator[list[Item]]:
        s = self.settings
        pick = s.pick_run
        if pick == LAST_RUN:
            if self.path == STDIN:
                raise UsageError("the last run of standard input cannot be picked")
            pick = len(self._count_runs())
        splitter = RunSplitter(pick)
        verifier = ChainVerifier(s.verify_key, s.key_name)
        feed = splitter.feed
        if self.kind == IMPORT:
            source = self._imported(verifier)
        else:
            source = iter_blocks(self.handle, self.name, tap=verifier.feed)
        for items in source:
            kept = feed(items)
            if kept:
                yield kept
        splitter.check(self.name)
        self.runs = splitter.runs
        self.integrity = judged_integrity(verifier, splitter)  # another tool's file: "unverified (no digest)"

    def _imported(self, verifier: ChainVerifier) -> Iterator[list[Item]]:
        data = self.document
        if data is None:
            size = os.fstat(self.handle.fileno()).st_size
            data = self.handle.read(MAX_DOCUMENT_BYTES + 1) if size <= MAX_DOCUMENT_BYTES else b""
            if size > MAX_DOCUMENT_BYTES or len(data) > MAX_DOCUMENT_BYTES:
                raise ImportProblem(f"{self.path}: larger than {size_text(MAX_DOCUMENT_BYTES)}, the most servewatch "
                                    "imports (an import is read whole; README.md, \"Limits on input\")")
        if self.settings.verify_imported:
            for i in range(0, len(data), 1 << 20):
                verifier.feed(data[i:i + (1 << 20)])
        res = import_file(self.path, self.format, data=data)
        self.notes = list(res.notes)
        batch: list[Item] = []
        for item in records_of(res):
            batch.append(item)
            if len(batch) >= IMPORT_BATCH:
                yield batch
                batch = []
        yield batch

    def _count_runs(self) -> list[RunInfo]:
        """The runs of a record file (one pass, nothing judged), the handle then back at the start."""
        splitter = RunSplitter(None)
        if self.kind == RECORDS:
            for items in iter_blocks(self.handle, self.name):
                splitter.feed(items)
            self.handle.seek(0)
        return splitter.runs


def judged_integrity(verifier: ChainVerifier, splitter: RunSplitter) -> RecordsIntegrity:
    """The digest chain's verdict on the run judged (issue 36: a signature verifies a run, or nothing): the lines
    of the run ``splitter`` kept, from its first line to the next run's header; the whole file when those lines are
    not known (an import: its records were made, not read from lines)."""
    span = splitter.kept_span()
    if span is None:
        return verifier.finish()
    first, last, header_line = span
    return verifier.run_result(first, last, header_line)


def open_evidence(path: str, settings: ReadSettings | None = None) -> EvidenceRun:
    """Open ``path`` ('-': standard input) once and decide what it holds. Raises OSError when unreadable and
    ``ImportProblem`` for another tool's summary file (no per-request data in it)."""
    import tui.core.importers as I

    s = settings or ReadSettings()
    probe, fh = open_probed(path, watch=s.watch)
    why = I.unusable_reason(probe.format)
    if why:  # another tool's summary: say where its per-request data is
        fh.close()
        raise ImportProblem(f"{path}: {why}")
    return EvidenceRun(kind=probe.kind, path=path, name=STDIN_NAME if path == STDIN else path, format=probe.format,
                       settings=s, handle=fh, document=probe.document)


def run_header_of(path: str, pick_run: int | None = None) -> dict | None:
    """The run header of a servewatch record file's run (``pick_run`` as ``ReadSettings``: None the first), read
    up to that header only; None for standard input (read once, by the judging pass), another tool's file, a
    watch recording, a run without a header, or a file that cannot be read (the judging pass says why)."""
    from tui.core.records import RequestRecord, RunHeader

    if path == STDIN:
        return None
    try:
        with open_evidence(path, ReadSettings(pick_run=pick_run, watch=False)) as ev:
            if ev.kind != RECORDS:
                return None
            for items in ev.blocks():
                for it in items:
                    if isinstance(it, RunHeader):
                        return it.data
                    if type(it) is RequestRecord:
                        return None
    except (OSError, ValueError):
        return None
    return None


def check_runs(path: str, pick_run: int | None) -> None:
    """Raise ``SeveralRuns`` (with the list) for a record file of several runs without ``pick_run``, or
    ``RunNotInFile`` for a run beyond them (one pass of the block reader, nothing judged)."""
    with open_evidence(path, ReadSettings(pick_run=pick_run, watch=False)) as ev:
        for _items in ev.blocks():
            pass


def replay_check(path: str, pick_run: int | None) -> str | None:
    """Before a record file is replayed (not followed), in one pass: ``path: not a servewatch record file (...)``
    when no line is a usable record (the words of ``tui.sources.replay.validate_record_file``), else None; raises
    ``SeveralRuns`` / ``RunNotInFile`` as ``check_runs`` does."""
    from pathlib import Path

    from tui.core.records import LineIssue, not_a_record_file

    shown = str(Path(path))
    splitter = RunSplitter(pick_run)
    usable = total = 0
    first: LineIssue | None = None
    with open_evidence(path, ReadSettings(watch=False)) as ev:
        for items in iter_blocks(ev.handle, shown):
            if not usable:
                for it in items:
                    total += 1
                    if not isinstance(it, LineIssue):
                        usable = 1
                        break
                    if first is None:
                        first = it
            splitter.feed(items)
    problem = not_a_record_file(usable, total, first)
    if problem:
        return f"{shown}: {problem}"
    splitter.check(path)
    return None


@dataclass(frozen=True)
class ReplayPlan:
    """What the console replays: a watch recording (``kind`` WATCH), or ``play`` (the file itself, or another
    tool's document converted into a temporary record file) read with ``line_parser`` (None: servewatch
    records); ``refusal``: why it cannot be replayed so (a document with ``--follow``); ``error``: why it cannot
    be read or imported (one line, bad input)."""

    kind: Kind | None
    play: str
    line_parser: Callable[..., Any] | None = None
    refusal: str | None = None
    error: str | None = None


def plan_replay(path: str, follow: bool = False) -> ReplayPlan:
    """Decide, from one probe, how the console replays ``path``. A path that is not a regular file (not there
    yet with ``--follow``, a pipe) is handed to the replay as records, which says what it finds."""
    from tui.sources.importing import prepare_replay_as

    if not os.path.isfile(path):
        return ReplayPlan(None, path)
    try:
        with open_evidence(path) as ev:
            if ev.kind == WATCH:
                return ReplayPlan(WATCH, path)
            fmt, data = (ev.format, ev.document) if ev.kind == IMPORT else (None, None)
        play, parser, refusal = prepare_replay_as(path, fmt, follow, data=data)
    except (OSError, ImportProblem) as exc:  # any other ValueError is a bug, not bad input
        return ReplayPlan(None, path, error=str(exc))
    return ReplayPlan(ev.kind, play, parser, refusal)
