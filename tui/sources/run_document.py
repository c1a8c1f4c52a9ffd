"""One run of a file of evidence, judged as `servewatch report` judges it, into the report's JSON document:
``judge_run(path, ...)`` (`export` and `index` read files this way; the report command prints the same
document). The file is read once by the evidence reader (``tui.sources.evidence_reader``) into a Monitor
(``tui.sources.evidence_monitor.monitor_of``; ``tap`` sees every block after the Monitor has taken it); the
verdict is limited by what the source supports (an import without a time axis: no verdict,
``tui.core.importers.limits``), and the exit code is the report's (settings judged weaker: 3; SYNTHETIC: never 0).

Raises OSError (unreadable), ``ImportProblem`` (another tool's file that cannot be imported), ``SeveralRuns`` /
``RunNotInFile``, :class:`NotARun` (a watch recording, or a file with no usable request record).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.chain import RecordsIntegrity
from tui.core.exitcodes import synthetic_exit
from tui.core.importers.limits import limit_snapshot
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.report import exit_code, report_at_settings, run_state
from tui.core.report_doc import ReportDoc
from tui.core.verdict_settings import JudgeAt, settings_exit
from tui.sources.evidence_monitor import monitor_of, not_records_problem
from tui.sources.evidence_reader import WATCH, ReadSettings, open_evidence

__all__ = ["JudgedRun", "NotARun", "judge_run"]


class NotARun(ValueError):
    """A readable file that holds no run to judge: a watch recording, or no usable request record (bad input)."""


@dataclass
class JudgedRun:
    """A run judged: its report document (``report``, the JSON of `report --json` without the budget), the run
    header, the digest chain's verification, the exit code `report` gives, the Monitor that judged it."""

    path: str
    header: dict
    report: ReportDoc
    integrity: RecordsIntegrity | None
    exit_code: int
    synthetic: bool
    monitor: Monitor
    format: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def first_t(self) -> float | None:
        return self.monitor.first_t

    @property
    def last_t(self) -> float | None:
        return self.monitor.last_t


def judge_run(path: str, *, pick_run: int | None = None, judge_at: JudgeAt | None = None,
              tap: Callable[[Monitor, Sequence[Any]], None] | None = None, verify_key: bytes | None = None,
              key_name: str = "the key given", required_level: float | None = None) -> JudgedRun:
    """Read and judge one run of ``path`` (see the module's docstring). ``judge_at``: what the reader's flags ask
    (None: the file's own settings); ``tap(monitor, items)``: called with each block after the Monitor took it."""
    settings = ReadSettings(pick_run=pick_run, verify_key=verify_key, key_name=key_name, watch=True)
    at = judge_at if judge_at is not None else JudgeAt()
    with open_evidence(path, settings) as ev:
        if ev.kind == WATCH:
            raise NotARun(f"{path}: a watch recording (`servewatch watch --record`), not a load run")
        holder: list[Monitor] = []

        def settled(m: Monitor) -> None:
            holder.append(m)

        def each(items: Sequence[Any]) -> None:
            if tap is not None and holder:
                tap(holder[0], items)

        mon = monitor_of(ev, MonitorConfig(), judge_at=at, tap=each, settled=settled)
        fmt = ev.format
        notes = list(ev.notes)
    problem = not_records_problem(mon)
    if problem:
        raise NotARun(problem)
    snap = limit_snapshot(mon.snapshot())  # imported data without a time axis, or a sample: no verdict
    rep, level_missing = report_at_settings(snap, required_level)
    if snap.records_integrity is not None:
        rep = {"records_integrity": snap.records_integrity.to_dict(), **rep}
    if snap.settings is not None:
        rep["verdict_settings"] = snap.settings.to_dict(run_state(snap))
    state = rep["measured"]["verdict"]["state"]
    code, _why = settings_exit(exit_code(state), snap.settings)
    if level_missing and code == 0:
        code = 3
    code, _synthetic_why = synthetic_exit(code, snap.synthetic)
    return JudgedRun(path=path, header=dict(mon.header or {}), report=rep, integrity=snap.records_integrity,
                     exit_code=code, synthetic=bool(snap.synthetic), monitor=mon, format=fmt, notes=notes)
