"""The workload a servewatch recording replays beyond arrivals and lengths (issue 23): sessions, turns, shared
prefixes and dataset rows.

A record file holds no prompt text. What it holds is enough to ask the same again: per request its lengths asked,
and for a shaped workload its ``session``/``turn``, ``think_s``, ``prefix_group`` and ``dataset_row``; the run
header's ``load.sessions``, ``load.shared_prefix`` and ``load.dataset`` (name, sha256, format). The replay
regenerates the prompts: a shared prefix is the group's deterministic system prompt
(:meth:`tui.sources.load.workload.Workload.system_prompt`), a dataset turn is that row's turn of the same file
(``--dataset`` with the recorded SHA-256), any other text is the prompt builder's at the recorded length.

:class:`Collector` gathers these fields while :mod:`tui.sources.load.trace` reads the file, and
:meth:`Collector.build` turns the records into :class:`ReplayItem` s, one per session (or per request of a
single-request shaped workload), in order of the first turn's ``t_intended``: those starts are the trace's
arrivals, so ``--trace-window`` and ``--trace-speed`` apply to session starts; the recorded think times are
divided by the speed too.

A session whose records are incomplete is replayed as sent and reported ``FILE:LINE: reason`` (counted in
``anomalies``): a turn missing (a gap, or no turn 1: the first recorded turn starts the session), a second record
of one (session, turn) (not replayed), a turn that failed with turns of its session not sent (the session is
replayed to that turn), turns of one session with different prefix groups or dataset rows (the first turn's
used). Standard library only.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tui.sources.infiles import open_input
from tui.sources.load.errors import ConfigError, SetupError

MAX_LISTED = 20  # anomalies listed one by one (all are counted)
_KEYS = ("session", "turn", "prefix_group", "dataset_row")


@dataclass(frozen=True)
class ReplayTurn:
    """One recorded turn: its index in the recording, its lengths asked, the think time before it (0 for the first
    replayed turn; already divided by the speed)."""

    turn: int
    input_tokens: int
    output_tokens: int
    think_s: float


@dataclass(frozen=True)
class ReplayItem:
    """One recorded session (or single request): its start offset (s, raw trace time), its turns in order, its
    prefix group and dataset row (None: none)."""

    session: str | None
    start: float
    turns: tuple[ReplayTurn, ...]
    turns_planned: int
    prefix_group: int | None
    dataset_row: int | None


@dataclass
class ReplayWorkload:
    """What a shaped recording replays (see the module docstring): items in start order (after window and speed)."""

    items: tuple[ReplayItem, ...]
    sessions_mode: bool  # the recording was a session workload: every item runs as a session
    sessions_block: dict | None  # the recording's header ``load.sessions``
    shared_prefix: dict | None  # its ``load.shared_prefix`` ({"tokens", "groups"})
    dataset: dict | None  # its ``load.dataset`` (name, sha256, format, ...)
    anomalies: list[str] = field(default_factory=list)  # FILE:LINE: reason (the first MAX_LISTED)
    anomaly_count: int = 0
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def prefix_tokens(self) -> int | None:
        return int(self.shared_prefix["tokens"]) if self.shared_prefix else None

    @property
    def prefix_groups(self) -> int:
        return int(self.shared_prefix.get("groups") or 1) if self.shared_prefix else 1

    @property
    def turns_total(self) -> int:
        return sum(len(it.turns) for it in self.items)

    def length_range(self, which: str) -> tuple[int, int]:
        """(min, max) of every turn's ``input_tokens`` or ``output_tokens``."""
        vals = [getattr(t, which) for it in self.items for t in it.turns]
        return min(vals), max(vals)

    def header_block(self) -> dict:
        """The ``replay`` object of the header's ``load.trace``: what was replayed."""
        groups = sorted({it.prefix_group for it in self.items if it.prefix_group is not None})
        rows = {it.dataset_row for it in self.items if it.dataset_row is not None}
        return {"sessions": len(self.items) if self.sessions_mode else None, "requests": len(self.items),
                "turns": self.turns_total, "prefix_groups": groups, "dataset_rows": len(rows),
                "dataset": {k: self.dataset.get(k) for k in ("name", "sha256", "format")} if self.dataset else None,
                "anomalies": self.anomaly_count, "anomaly_list": list(self.anomalies), "notes": list(self.notes)}

    def describe(self) -> str:
        what = f"{len(self.items):,} sessions, {self.turns_total:,} turns" if self.sessions_mode else (
            f"{len(self.items):,} requests")
        if self.shared_prefix:
            what += f", {self.prefix_groups} shared {self.prefix_tokens:,}-token prefix(es)"
        if self.dataset:
            what += f", dataset {self.dataset.get('name')}"
        return what

    # -- the dataset of the replay ----------------------------------------

    def check_dataset_file(self, path: str, trace_name: str) -> None:
        """``--dataset FILE`` of a replay: its SHA-256 must be the recorded one (ConfigError naming both)."""
        want = str((self.dataset or {}).get("sha256") or "")
        digest = hashlib.sha256()
        try:
            with open_input(path, "dataset") as f:  # a regular file: never waits on a FIFO
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            raise ConfigError(f"--dataset {path}: cannot read it: {exc.strerror or exc}") from None
        got = digest.hexdigest()
        if got != want:
            raise ConfigError(f"--dataset {path} has sha256 {got}, but trace {trace_name} was recorded with "
                              f"{(self.dataset or {}).get('name')} sha256 {want}: give the file the recording used")

    def use_dataset(self, read: Callable[..., Any], path: str, max_bad_share: float) -> Any:
        """Read ``path`` with ``read`` (``tui.sources.load.dataset.read_dataset``) for the replay: its SHA-256 the
        recorded one, every recorded (row, turn) in it; no token count and no context skip (the recorded lengths
        asked are replayed). SetupError (one line) otherwise."""
        try:
            ds = read(path, max_bad_share=max_bad_share)
        except ConfigError as exc:
            raise SetupError(str(exc)) from None
        want = (self.dataset or {}).get("sha256")
        if ds.sha256 != want:
            raise SetupError(f"--dataset {path} has sha256 {ds.sha256}, the recording used sha256 {want}")
        for it in self.items:
            if it.dataset_row is None:
                continue
            conv = ds.by_row(it.dataset_row)
            if conv is None or any(t.turn > len(conv.turns) for t in it.turns):
                raise SetupError(f"--dataset {path}: row {it.dataset_row} of the recording is not a usable "
                                 "conversation of that many turns in this file")
        return ds.with_(note="trace replay: the recorded rows and lengths asked are replayed (tokens not counted "
                              "again, nothing skipped)")


def _int(v: Any, name: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be a whole number >= {lo}, got {str(v)[:40]!r}")
    return v


@dataclass
class _Info:
    lineno: int
    session: str | None
    turn: int
    group: int | None
    row: int | None
    think: float | None
    not_sent: int
    planned: int | None


class Collector:
    """The shaped-workload fields of a servewatch recording, gathered while its records are read."""

    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.load: dict = {}
        self.infos: dict[int, _Info] = {}  # position of the record in the rows' arrays -> its fields

    def header(self, load: Mapping) -> None:
        self.load = dict(load)

    @property
    def announced(self) -> bool:
        return any(isinstance(self.load.get(k), dict) for k in ("sessions", "shared_prefix", "dataset"))

    def parse(self, lineno: int, d: Mapping) -> _Info | None:
        """A request record's fields (None: it carries none); ValueError for a bad value (a bad row)."""
        if not any(k in d for k in _KEYS) and not self.announced:
            return None
        sid = d.get("session")
        if sid is not None and not (isinstance(sid, str) and sid):
            raise ValueError(f"session must be a non-empty string, got {str(sid)[:40]!r}")
        turn = _int(d.get("turn", 1), "turn", 1)
        group = None if d.get("prefix_group") is None else _int(d.get("prefix_group"), "prefix_group", 0)
        sp = self.load.get("shared_prefix")
        if group is not None and isinstance(sp, dict) and isinstance(sp.get("groups"), int) and group >= sp["groups"]:
            raise ValueError(f"prefix_group {group} is not one of the header's {sp['groups']} groups")
        row = None if d.get("dataset_row") is None else _int(d.get("dataset_row"), "dataset_row", 1)
        think = d.get("think_s")
        if think is not None:
            if isinstance(think, bool) or not isinstance(think, (int, float)) or not math.isfinite(think) or think < 0:
                raise ValueError(f"think_s must be a number of seconds >= 0, got {str(think)[:40]!r}")
            think = float(think)
        not_sent = 0 if d.get("turns_not_sent") is None else _int(d.get("turns_not_sent"), "turns_not_sent", 0)
        planned = None if d.get("turns_planned") is None else _int(d.get("turns_planned"), "turns_planned", 1)
        return _Info(lineno, sid, turn, group, row, think, not_sent, planned)

    def keep(self, pos: int, info: _Info | None) -> None:
        if info is not None:
            self.infos[pos] = info

    @property
    def active(self) -> bool:
        return self.announced or bool(self.infos)

    def build(self, t: array, ins: array, outs: array) -> tuple[ReplayWorkload, array, array, array]:
        """The items in start order and their (start, first input, first output) arrays (replacing the records')."""
        load = self.load
        sessions_block = load.get("sessions") if isinstance(load.get("sessions"), dict) else None
        sp = load.get("shared_prefix") if isinstance(load.get("shared_prefix"), dict) else None
        ds = load.get("dataset") if isinstance(load.get("dataset"), dict) else None
        sessions_mode = sessions_block is not None or any(i.session is not None for i in self.infos.values())
        if any(i.group is not None for i in self.infos.values()) and not (sp and isinstance(sp.get("tokens"), int)):
            raise ConfigError(f"trace {self.shown}: its requests carry prefix_group but its run header has no "
                              "load.shared_prefix tokens: the shared prefix cannot be regenerated")
        if any(i.row is not None for i in self.infos.values()) and not (ds and ds.get("sha256")):
            raise ConfigError(f"trace {self.shown}: its requests carry dataset_row but its run header names no "
                              "dataset (load.dataset sha256): the user texts cannot be regenerated")
        out = ReplayWorkload((), sessions_mode, sessions_block, sp, ds)
        items: list[tuple[float, int, ReplayItem]] = []
        by_session: dict[str, list[int]] = {}  # session -> the positions of its records
        cut = 0
        for pos in range(len(t)):
            info = self.infos.get(pos)
            if info is not None and info.session is not None:
                by_session.setdefault(info.session, []).append(pos)
                continue
            if sessions_mode:
                self._anomaly(out, info.lineno if info else None, "a request of a session recording without a "
                              "session: replayed as a one-turn session")
            turn = ReplayTurn(1, ins[pos], outs[pos], 0.0)
            items.append((t[pos], pos, ReplayItem(None, t[pos], (turn,), 1, info.group if info else None,
                                                  info.row if info else None)))
        for sid, members in by_session.items():
            item, was_cut = self._session(out, sid, members, t, ins, outs)
            cut += was_cut
            items.append((item.start, members[0], item))
        items.sort(key=lambda x: (x[0], x[1]))
        out.items = tuple(x[2] for x in items)
        if cut:
            out.notes.append(f"{cut:,} sessions have fewer turns recorded than planned (cut at the recording's step "
                             "end): their recorded turns replayed")
        if out.anomaly_count:
            out.notes.append(f"{out.anomaly_count:,} session anomalies (incomplete or repeated records; the first "
                             f"{min(out.anomaly_count, MAX_LISTED)} listed): replayed as sent")
        starts = array("d", (it.start for it in out.items))
        first_in = array("i", (it.turns[0].input_tokens for it in out.items))
        first_out = array("i", (it.turns[0].output_tokens for it in out.items))
        return out, starts, first_in, first_out

    def _session(self, out: ReplayWorkload, sid: str, members: list[int], t: array, ins: array,
                 outs: array) -> tuple[ReplayItem, bool]:
        infos = sorted(((self.infos[p], p) for p in members), key=lambda x: (x[0].turn, x[0].lineno))
        kept: list[tuple[_Info, int]] = []
        seen: set[int] = set()
        ended = False
        for info, pos in infos:
            if info.turn in seen:
                self._anomaly(out, info.lineno, f"session {sid} turn {info.turn} recorded twice: the second not "
                                                "replayed")
                continue
            if ended:
                self._anomaly(out, info.lineno, f"session {sid} turn {info.turn} recorded after a failed turn that "
                                                "ended the session: not replayed")
                continue
            expected = kept[-1][0].turn + 1 if kept else 1
            if info.turn != expected:
                gap = f"turn {expected}" if info.turn == expected + 1 else f"turns {expected}-{info.turn - 1}"
                self._anomaly(out, info.lineno, f"session {sid}: {gap} missing from the recording (turn "
                                                f"{info.turn} replayed after the turns recorded before it)")
            seen.add(info.turn)
            kept.append((info, pos))
            if info.not_sent > 0:
                ended = True
                self._anomaly(out, info.lineno, f"session {sid} turn {info.turn} failed in the recording "
                                                f"({info.not_sent} turns not sent): replayed to that turn")
        first = kept[0][0]
        for info, _pos in kept[1:]:
            if info.group != first.group or info.row != first.row:
                self._anomaly(out, info.lineno, f"session {sid} turn {info.turn}: prefix_group/dataset_row differ "
                                                "from its first turn's: the first turn's used")
        turns = []
        for n, (info, pos) in enumerate(kept):
            think = 0.0 if n == 0 else (info.think if info.think is not None else 0.0)
            turns.append(ReplayTurn(info.turn, ins[pos], outs[pos], think))
        planned = first.planned or len(kept)
        was_cut = not ended and planned > kept[-1][0].turn
        return ReplayItem(sid, t[kept[0][1]], tuple(turns), planned, first.group, first.row), was_cut

    def _anomaly(self, out: ReplayWorkload, lineno: int | None, reason: str) -> None:
        out.anomaly_count += 1
        if len(out.anomalies) < MAX_LISTED:
            out.anomalies.append(f"{self.shown}:{lineno}: {reason}" if lineno else f"{self.shown}: {reason}")


def window_replay(replay: ReplayWorkload, lo: int, hi: int, base: float, speed: float) -> ReplayWorkload:
    """The items ``lo:hi`` (the window), starts re-based to ``base`` and starts and think times divided by ``speed``."""
    items = tuple(replace(it, start=(it.start - base) / speed,
                          turns=tuple(replace(tn, think_s=tn.think_s / speed) for tn in it.turns))
                  for it in replay.items[lo:hi])
    return replace(replay, items=items, anomalies=list(replay.anomalies), notes=list(replay.notes))

