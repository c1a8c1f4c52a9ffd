"""A watch recording (`servewatch watch --record`) read once: its windows judged like the live watch
(``tui.core.watch.WatchJudgement``) and its digest chain verified from the same bytes, in the same pass."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tui.core.bounds import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_too_deep, size_text
from tui.core.chain import ChainVerifier, RecordsIntegrity
from tui.core.defaults import READ_CHUNK_BYTES
from tui.core.records import RecordError
from tui.core.records.reader import LineCut
from tui.core.snapshot import PASS, UNDECIDED
from tui.core.watch import WatchConfig, WatchJudgement, WatchVerdict, window_from_record
from tui.sources.evidence_reader import EvidenceRun
from tui.sources.watch import CANARY_DROP, CANARY_KEEP

__all__ = ["WatchRead", "read_watch", "verdict_with_integrity", "watch_lines"]


@dataclass
class WatchRead:
    """The judged windows, the engine of the last usable one (None: no usable window), the run header and the
    problem lines (``file:line: reason``)."""

    judgement: WatchJudgement
    engine: str | None = None
    header: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    integrity: RecordsIntegrity | None = None
    #: the canary's request records (``watch --probe-rate``), kept as the live watch keeps them (the newest
    #: CANARY_KEEP): a server without a TTFT histogram is judged on them, exactly as the watch did
    canary: list[dict] = field(default_factory=list)



def watch_lines(run: EvidenceRun, tap: Callable[[bytes], None] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, the line's JSON object, or the ValueError it raised) for each non-blank line of a
    recording; ``tap`` gets every raw chunk as read (the digest chain's verifier). A line longer than
    ``MAX_LINE_BYTES`` is read past (a ValueError naming its length); a value nested deeper than
    ``MAX_JSON_DEPTH`` is a ValueError too."""
    cut = LineCut()
    read = run.handle.read
    while True:
        data = read(READ_CHUNK_BYTES)
        if not data:
            break
        if tap is not None:
            tap(data)
        yield from _decoded(cut.feed(data))
    last = cut.end()
    if last is not None:
        yield from _decoded([last])


class NotRead(ValueError):
    """A line not decoded: longer than ``MAX_LINE_BYTES``, or nested deeper than ``MAX_JSON_DEPTH`` (its words)."""


def _decoded(segments: list[tuple[int, bytes | int]]) -> Iterator[tuple[int, Any]]:
    for first, body in segments:
        if isinstance(body, int):
            yield first, NotRead(f"line longer than the {size_text(MAX_LINE_BYTES)} limit ({body:,} bytes): "
                                 "skipped unread")
            continue
        for n, raw in enumerate(body.split(b"\n"), first):
            line = raw.decode("utf-8", errors="surrogateescape")
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except RecursionError:
                yield n, NotRead("JSON nested too deep to decode")
                continue
            except ValueError as exc:
                yield n, exc
                continue
            yield n, (NotRead(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") if json_too_deep(d) else d)


def read_watch(run: EvidenceRun, cfg: WatchConfig) -> WatchRead:
    """Judge every watch window of the recording; never raises on content (OSError when unreadable)."""
    s = run.settings
    verifier = ChainVerifier(s.verify_key, s.key_name)
    out = WatchRead(WatchJudgement(cfg))
    path = run.name
    for n, d in watch_lines(run, verifier.feed):
        if isinstance(d, ValueError):
            out.problems.append(f"{path}:{n}: {d}" if isinstance(d, NotRead) else f"{path}:{n}: invalid JSON: {str(d)[:60]}")
            continue
        if not isinstance(d, dict):
            out.problems.append(f"{path}:{n}: line is not a JSON object")
            continue
        if d.get("type") == "run" and not out.header:
            out.header = d
        elif d.get("type") == "request":
            out.canary.append(d)
            if len(out.canary) > CANARY_KEEP:
                del out.canary[:CANARY_DROP]
        elif d.get("type") == "watch":
            try:
                w = window_from_record(d)
            except (ValueError, RecordError) as exc:
                out.problems.append(f"{path}:{n}: {exc}")
                continue
            out.engine = w.engine
            out.judgement.add(w)
    out.integrity = verifier.finish()
    return out


def verdict_with_integrity(v: WatchVerdict, integrity: RecordsIntegrity) -> WatchVerdict:
    """Each problem of the digest chain blocks PASS (a PASS becomes UNDECIDED, with the reason)."""
    if not integrity.problems:
        return v
    blocked = v.blocked + tuple(f"records integrity: {p}" for p in integrity.problems)
    if v.state == PASS:
        return dataclasses.replace(v, state=UNDECIDED, reason=f"cannot PASS: {blocked[-len(integrity.problems)]}",
                                   blocked=blocked)
    return dataclasses.replace(v, blocked=blocked)
