"""What the commands make of an :class:`~tui.sources.evidence_reader.EvidenceRun` of records: the Monitor that
report, accept, plan and sweep judge (``monitor_of``), the requests that compare and the replay's baseline compare
(``compare_run``). Reading is ``tui.sources.evidence_reader``; the judgement is ``tui.core``.

The rule "evidence gets no more verdict than it can support" is applied here, once: every Monitor that judges
evidence is a :class:`JudgedMonitor` (``monitor_of``, and the console's for a replay or a live run), whose every
snapshot is limited by what its source supports (``tui.core.importers.limits.limit_snapshot``: an imported file
without a time axis has no observation window, INSUFFICIENT_WINDOW; a sampled per-request list, UNDECIDED). No
command applies it: `report`, `accept`, `plan` and the console read the same limited snapshot."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tui.core.evidence import Duplicates
from tui.core.importers.limits import limit_snapshot
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.provenance import source_block
from tui.core.records import LineIssue, RequestRecord, RunHeader, not_a_record_file
from tui.core.slos import Slos
from tui.core.snapshot import Snapshot
from tui.core.verdict_settings import JudgeAt
from tui.sources.evidence_reader import EvidenceRun, ReadSettings, open_evidence

__all__ = ["JudgedMonitor", "NoRequests", "compare_run", "load_run", "monitor_of", "not_records_problem"]


class NoRequests(ValueError):
    """A readable file without one usable request record (bad input, exit 2)."""


class JudgedMonitor(Monitor):
    """The Monitor of evidence: every snapshot limited by what its source supports (the one place the rule is
    applied: no time axis, or a sample, gives no verdict; ``tui.core.importers.limits``). A servewatch record file
    or a live run carries a time axis: its snapshot is the Monitor's, unchanged."""

    def snapshot(self) -> Snapshot:
        return limit_snapshot(super().snapshot())


def monitor_of(run: EvidenceRun, config: MonitorConfig, budget: Any = None,
               budget_origin: str | None = None, tap: Callable[[Sequence], None] | None = None,
               judge_at: JudgeAt | None = None, settled: Callable[[Monitor], None] | None = None) -> JudgedMonitor:
    """Read the whole run into a Monitor, each chunk's records as one batch (memory bounded); then the Monitor
    gets the digest chain's result (``Monitor.set_records_integrity``) and holds the file against itself
    (``Monitor.finish``, tui.core.evidence). ``tap``: also given each block (the HTML charts' bounded sampler,
    ``tui.core.chartdata.RunSampler.add_many``). ``judge_at``: the reader's flags (issue 35: the file is judged
    at its run header's settings, re-judged where a flag given differs); ``settled``: called with the Monitor once
    it knows the settings it judges at, before ``tap`` sees a block. Raises what ``EvidenceRun.blocks`` raises."""
    mon = JudgedMonitor(config, budget=budget, source=run.name, budget_origin=budget_origin, judge_at=judge_at,
                        views=False)  # a document: none of the console's views (recent rows, rolling, sparklines)
    add_many = mon.add_many
    # The ingest path makes no reference cycles (tests/test_report_cli.py checks it): reference counting frees
    # every record and memory stays bounded without the cycle collector, whose passes over the young records
    # of each chunk would cost about a tenth of a large report. Paused only here, for this loop.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for items in run.blocks(parallel=True):  # a large file: read by a forked reader meanwhile
            add_many(items)
            if settled is not None and (mon.settings is not None or judge_at is None):
                settled(mon)
                settled = None
            if tap is not None:
                tap(items)
    finally:
        if collecting:
            gc.enable()
    mon.set_records_integrity(run.integrity)
    mon.finish()  # the whole file is read: hold it against itself (tui.core.evidence)
    return mon


def not_records_problem(mon: Monitor) -> str | None:
    """The refusal when nothing in the file was a usable record (another tool's JSON, binary, empty)."""
    problem = not_a_record_file(mon.usable_lines(), mon.seq_no, mon.examples[0] if mon.examples else None)
    return None if problem is None else f"{mon.source}: {problem}"


def compare_run(run: EvidenceRun, slo_ttft_ms: float, slos: Slos | None = None,
                judge_at: JudgeAt | None = None) -> dict:
    """{"label", "header", "requests", "issues", "problems", "unreadable", "prefix_cache", "duplicates"} of a run
    (``requests``: each counted once, the one duplicate rule; ``duplicates``: the copies left out and
    ``duplicates_problem`` the sentence naming them, which forbids NOT WORSE; ``problems``:
    per level, the evidence problems that forbid judging it: the file held against itself; ``prefix_cache``: per
    level, ``tui.core.prefix_cache.level_summary``); raises NoRequests, and what
    ``EvidenceRun.blocks`` raises."""
    header: dict = {}
    reqs: list = []
    issues = 0
    cfg = MonitorConfig(slos=Slos(ttft_ms=slo_ttft_ms) if slos is None else slos)
    # the cross-checks of the file, on the requests as counted: the one duplicate rule applied here, once (its
    # problem goes with the run: ``duplicates_problem``), so the Monitor keeps no second set of ids
    mon = Monitor(replace(cfg, check_duplicate_ids=False), source=run.path, judge_at=judge_at)  # at its run's settings
    dups = Duplicates()
    for block in run.blocks():
        kept = []
        for it in block:
            if type(it) is RequestRecord:
                if dups.check(it.id, it.t_sent, it.t_first_token, it.t_end):
                    continue  # a copy: counted, never judged twice
                reqs.append(it)
            elif isinstance(it, RunHeader):
                if not header:
                    header = it.data
                    dups.times = (source_block(header) or {}).get("time_axis") != "none"  # as the Monitor's rule
            elif isinstance(it, LineIssue):
                issues += 1
            kept.append(it)
        mon.add_many(kept)
    # a level beyond MAX_LEVELS is counted by the Monitor (it forbids NOT WORSE), never compared
    reqs = [r for r in reqs if r.phase != "measure" or (r.level, r.round) in mon.levels]
    if not reqs:
        raise NoRequests(f"{run.path}: no usable request records ({issues} problem lines)")
    if run.integrity is not None:  # the run's digest chain: its problems, and a load run's seal (issue 35)
        mon.set_records_integrity(run.integrity)
    mon.finish()
    problems: dict = {}
    for (level, rnd), _st in mon.levels.items():
        found = mon.pass_blocks((level, rnd))
        if found:
            problems.setdefault(level, []).extend(p for p in found if p not in problems.get(level, []))
    # refused lines that may have been measured requests, per level (those naming no level count at every level)
    unreadable: dict = {}
    for (level, _rnd) in mon.levels:
        unreadable[level] = mon.unreadable.get(None, 0)
    for key, k in mon.unreadable.items():
        if key is not None and key[0] in unreadable:
            unreadable[key[0]] += k
    return {"label": run.path, "header": header, "requests": reqs, "issues": issues, "problems": problems,
            "duplicates": dups.copies, "duplicates_problem": dups.problem(),
            "unreadable": {lv: k for lv, k in unreadable.items() if k},
            "prefix_cache": mon.prefix_cache_by_level()}  # issue 23: per level, rounds merged


def load_run(path: str, pick_run: int | None = None, slo_ttft_ms: float | None = None,
             slos: Slos | None = None) -> dict:
    """``compare_run`` of any readable file (records or another tool's export), read whole by the evidence reader
    (the replay's ``--baseline``); raises OSError, ImportProblem, NoRequests, SeveralRuns."""
    import tui.core.defaults as defaults

    with open_evidence(path, ReadSettings(pick_run=pick_run, watch=False)) as ev:
        return compare_run(ev, defaults.SLO_TTFT_MS if slo_ttft_ms is None else slo_ttft_ms, slos)
