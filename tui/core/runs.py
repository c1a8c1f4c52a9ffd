"""Runs in one record file, and several record files for one verdict (standard library only).

``run --record`` appends: one file may hold several runs, each starting at its ``run`` header. They are never
merged. :class:`RunSplitter` is a filter over the parsed item stream (the blocks ``records.iter_blocks`` yields):
it keeps the one run asked for (``--run N``, 1-based) and counts every run, so a command without ``--run`` can
list them and refuse (exit 2) when there is more than one. Line numbers stay the file's own: the items kept are
the parsed items themselves (a bad line keeps its number).

Records before the first header (a header-less prefix): when the prefix holds at least one request record it is
a run of its own (run 1, "no header": its provenance is unknown), so a file with such a prefix and one header
holds two runs; a prefix without request records (a budget record, bad lines, samples) belongs to the first run.

Several files: :func:`run_identity` is the run id (header ``run_id``, else started_at + target url + model) that
``accept`` uses to count a run given twice once; :func:`target_of` the (model, url) pair whose mixing is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import attrgetter, is_, itemgetter
from typing import Any

from tui.core.records.model import Record, RunHeader, StepRecord
from tui.core.records.request import RequestRecord
from tui.core.records.schema import LineIssue

Item = Record | LineIssue
_LEVEL = attrgetter("level")
_IS_REQUEST = partial(is_, RequestRecord)
_ARG_LEVEL = itemgetter(13)  # ``level`` among RequestRecord's arguments
_IS_ARGUMENTS = partial(is_, tuple)


@dataclass(slots=True)
class RunInfo:
    """One run of a file: its 1-based index, its header (empty: none), request records and levels seen."""

    index: int
    header: dict
    requests: int = 0
    levels: set = field(default_factory=set)
    first_line: int | None = 1  # the run's first line in the file (None: not known, e.g. an import)
    header_line: int | None = None  # its header's line (None: no header, or not known)
    last_line: int | None = None  # its last line (None: to the end of the file)

    def describe(self) -> str:
        h = self.header
        model, url = target_of(h)
        started = h.get("started_at") if h else None
        lv = sorted(x for x in self.levels if isinstance(x, (int, float)))
        lv_text = ",".join(f"{x:g}" for x in lv) or "none"
        when = "no header" if not h else (f"started_at {started:.3f}" if isinstance(started, (int, float))
                                         and not isinstance(started, bool) else "started_at unknown")
        return (f"run {self.index}: {when}, model {model or 'unknown'}, url {url or 'unknown'}, levels {lv_text}, "
                f"{self.requests} request records")


class SeveralRuns(ValueError):
    """A file holds several runs and none was picked (exit 2, with the list)."""

    def __init__(self, source: str, runs: Sequence[RunInfo]) -> None:
        self.source = source
        self.runs = list(runs)
        super().__init__(f"{source} holds {len(runs)} runs (run --record appends); they are never merged: "
                         f"pick one with --run N")

    def __reduce__(self) -> tuple:  # it travels whole from a forked reader (tui.sources.parallel_read)
        return (SeveralRuns, (self.source, self.runs))

    def listing(self) -> list[str]:
        return [r.describe() for r in self.runs]


class RunNotInFile(ValueError):
    """``--run N`` beyond the runs the file holds."""


class RunSplitter:
    """Keep one run of an item stream; count them all.

    ``pick`` None: every item passes until a second run starts; from then on nothing passes (the command is
    going to refuse the file) and the runs are only counted. ``pick`` N: only run N's items pass. Items before
    the first header are run 1's either way (a prefix with requests is run 1; one without belongs to the run
    the first header starts, run 1): nothing is held back, memory stays bounded."""

    __slots__ = ("pick", "runs", "_cur", "_seen_header")

    def __init__(self, pick: int | None = None) -> None:
        if pick is not None and pick < 1:
            raise ValueError("--run must be >= 1")
        self.pick = pick
        self.runs: list[RunInfo] = [RunInfo(1, {})]
        self._cur = 1  # index of the run the next item belongs to
        self._seen_header = False

    def feed(self, items: list[Item]) -> list[Item]:
        """The items of this block that belong to the run kept (the block itself when all of it does)."""
        keep = self.pick or 1
        types = list(map(type, items))
        if RunHeader not in types:  # the common case: no header in this block
            self._count(items, self.runs[-1], types)
            return items if self._cur == keep else []
        out: list[Item] = []
        start = 0
        for i, x in enumerate(items):
            if type(x) is not RunHeader:
                continue
            seg = items[start:i]
            self._count(seg, self.runs[-1])
            if self._cur == keep:
                out += seg
            self._new_run(x)
            if self._cur == keep:
                out.append(x)
            start = i + 1
        seg = items[start:]
        self._count(seg, self.runs[-1])
        if self._cur == keep:
            out += seg
        return out

    @staticmethod
    def _count(items: Sequence[Item], cur: RunInfo, types: list[type] | None = None) -> None:
        """Count the request records of ``items`` and note their levels (and step records'), in C-level passes
        (``types``: the type of each item, when already known)."""
        if types is None:
            types = list(map(type, items))
        n = types.count(RequestRecord)
        levels = cur.levels
        if n:
            if n == len(types):  # a block of requests only (the common case)
                levels.update(map(_LEVEL, items))
            else:
                levels.update(map(_LEVEL, compress(items, map(_IS_REQUEST, types))))
            levels.discard(None)
        a = types.count(tuple)  # standard records as their arguments: a forked reader's (validate.standard_as_arguments)
        if a:
            levels.update(map(_ARG_LEVEL, compress(items, map(_IS_ARGUMENTS, types))))  # type: ignore[arg-type]
            levels.discard(None)
            n += a
        if StepRecord in types:
            levels.update(x.level for x in items if type(x) is StepRecord and x.level is not None)
        cur.requests += n

    def _new_run(self, h: RunHeader) -> None:
        line = h.line
        if not self._seen_header:
            self._seen_header = True
            if self.runs[0].requests == 0:  # a prefix without requests belongs to the first header's run
                self.runs[0].header = h.data
                self.runs[0].header_line = line
                if line is None:
                    self.runs[0].first_line = None
                return
        prev = self.runs[-1]
        prev.last_line = None if line is None or prev.first_line is None else line - 1
        self._cur += 1
        self.runs.append(RunInfo(self._cur, h.data, first_line=line, header_line=line))

    def check(self, source: str) -> None:
        """Raise SeveralRuns (no --run, several runs) or RunNotInFile (--run N beyond them)."""
        n = len(self.runs)
        if self.pick is None and n > 1:
            raise SeveralRuns(source, self.runs)
        if self.pick is not None and self.pick > n:
            raise RunNotInFile(f"{source}: --run {self.pick}: the file holds {n} run{'s' if n != 1 else ''}")

    def kept(self) -> RunInfo:
        return self.runs[(self.pick or 1) - 1]

    def kept_span(self) -> tuple[int, int | None, int | None] | None:
        """(first line, last line or None: to the end, header line or None) of the run kept; None when the
        lines are not known (records made elsewhere than from a file's lines: an import)."""
        r = self.kept()
        if r.first_line is None or (r.header and r.header_line is None):
            return None
        return r.first_line, r.last_line, r.header_line


def target_of(header: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(model, url) a run header names (None where it does not)."""
    tgt = header.get("target") if header else None
    if not isinstance(tgt, Mapping):
        return None, None
    model, url = tgt.get("model"), tgt.get("url")
    return (str(model)[:200] if model else None), (str(url)[:300] if url else None)


def run_identity(header: Mapping[str, Any]) -> str | None:
    """The id of a run: header ``run_id``, else started_at + target url + model (None: no header to tell)."""
    if not header:
        return None
    rid = header.get("run_id")
    if isinstance(rid, str) and rid:
        return f"run_id {rid}"
    model, url = target_of(header)
    started = header.get("started_at")
    if started is None and model is None and url is None:
        return None
    return f"started_at {started} url {url} model {model}"
