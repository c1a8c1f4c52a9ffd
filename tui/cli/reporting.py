"""The report of a record file: what `servewatch report FILE` prints (text, JSON, HTML), and what `servewatch run`
prints once its load test is recorded (the same report of the run just appended). Shared by those two commands
(``ReportSettings``, ``run_report``) and `compare` (``html_sampler``).

The file is read by the evidence reader (``tui.sources.evidence_reader``: records, a watch recording, another
tool's export) into the evidence's Monitor (``tui.sources.evidence_monitor``: the snapshot is already limited by
what the file supports); this module reads the settings and prints."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from tui.cli.budgetflags import BudgetFlags
from tui.cli.chainopts import verify_key_flag
from tui.cli.declare import Settings, block, positional, switch
from tui.cli.evidence_files import runs_problem
from tui.cli.options import (
    INPUT,
    Acceptance,
    UsageError,
    details_flag,
    epilog,
    html_flag,
    percentiles_flag,
    required_level_flag,
    run_flag,
    server_log_flag,
    teaching_flag,
)
from tui.core.monitor import MonitorConfig
from tui.core.report import exit_code, format_report, report_at_settings, run_state
from tui.core.textsafe import term
from tui.core.verdict_settings import settings_exit
from tui.sources.evidence_monitor import monitor_of, not_records_problem
from tui.sources.evidence_probe import input_problem
from tui.sources.evidence_reader import WATCH, ReadSettings, open_evidence

__all__ = ["ReportSettings", "html_sampler", "run_report", "write_report_html"]


@dataclass(frozen=True, kw_only=True)
class ReportSettings(Settings):
    """`servewatch report FILE` (and the report `servewatch run` prints of its record file)."""

    DESCRIPTION = "The headless verdict on a record file: measured verdict, budget and quality kept apart."
    EPILOG = epilog("servewatch report run.jsonl --slo-ttft-ms 500 --target 0.99",
                    "servewatch report - --json < run.jsonl")

    file: str = positional("file", role=INPUT, metavar="FILE",
                           help="record file (JSON Lines, record format v1); - reads standard input")
    json: bool = switch("--json", help="print the report as JSON")
    details: bool = details_flag()
    html: str | None = html_flag("the report")
    required_level: float | None = required_level_flag()
    run: int | None = run_flag()
    acceptance: Acceptance = block(Acceptance)
    budget: BudgetFlags = block(BudgetFlags)
    teaching: bool = teaching_flag()
    server_log: str | None = server_log_flag()
    verify_key_env: str | None = verify_key_flag()
    percentiles: tuple[float, ...] | None = percentiles_flag()


def run_report(settings: ReportSettings, budget: Any = None, out: TextIO | None = None,
               default_budget: bool = True) -> int:
    """Print the report of ``settings.file`` and return its exit code (used by `servewatch run` too); bad usage or
    an unusable file raises UsageError.

    The budget shown: ``budget``, else the budget flags, ``--teaching`` or the bundled teaching log (when
    ``default_budget``), else the record file's budget record, else unknown."""
    from tui.cli.budgetflags import budget_from_args, budget_given, budget_source, budget_title, view_budget

    path = settings.file
    out = out or sys.stdout
    try:
        cfg = settings.acceptance.monitor_config()
    except ValueError as exc:
        raise UsageError(exc) from None
    origin = None
    if budget is None:
        try:
            if default_budget:
                budget, origin = view_budget(settings.budget, settings.teaching, [] if path == "-" else [path])
            elif budget_given(settings.budget):
                budget, origin = budget_from_args(settings.budget, settings.teaching), budget_source(settings.budget)
        except (ValueError, OSError) as exc:
            raise UsageError(f"bad budget: {exc}") from None
    from tui.cli.budgetflags import server_log_from_args

    server_log = server_log_from_args(settings.server_log, settings.budget)  # the engine's startup-log figures
    problem = input_problem(path)
    if problem:
        raise UsageError(problem)
    from tui.cli.chainopts import verify_key
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.importing import ImportProblem

    key, key_name = verify_key(settings.verify_key_env)  # a missing key variable: bad usage
    html_out = settings.html
    sampler = html_sampler(html_out, cfg)  # --html FILE: its folder checked before the file is read
    read = ReadSettings(pick_run=settings.run, verify_key=key, key_name=key_name)
    from tui.cli.drilltap import DrillTap

    drill = DrillTap(cfg, None if sampler is None else sampler.add_many)  # a drill file: its own report (issue 39)

    def settled(m: Any) -> None:
        drill.settled(m)
        if sampler is not None:
            sampler.use_slos(m.cfg.slos)

    try:
        with open_evidence(path, read) as ev:
            if ev.kind == WATCH:  # a `servewatch watch --record` file: judged like the watch itself
                if html_out:
                    raise UsageError(f"--html: {path} is a watch recording; its report has no HTML form (a record "
                                     "file's has)")
                from tui.cli.watchfiles import report_watch

                return report_watch(ev, settings.acceptance, settings.json, out)
            mon = monitor_of(ev, cfg, budget, origin, tap=drill,
                             judge_at=settings.acceptance.judge_at(settings.required_level), settled=settled)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (SeveralRuns, RunNotInFile) as exc:
        raise runs_problem(exc) from None
    except ImportProblem as exc:  # another tool's file that cannot be imported (any other ValueError is a bug)
        raise UsageError(str(exc)) from None
    problem = not_records_problem(mon)
    if problem:
        raise UsageError(problem)
    if drill.active:  # `servewatch drill`'s file: the drill's document (text, --json, --html)
        from tui.cli.drillopts import report_drill

        return report_drill(mon, drill.collector, settings.json, html_out, out)
    snap = mon.snapshot()  # the evidence's: no verdict beyond what the file supports (tui.sources.evidence_monitor)
    cfg = mon.cfg  # the settings the file is judged at (issue 35: its run's own, re-judged where a flag differs)
    rep, level_missing = report_at_settings(snap, settings.required_level, server_log=server_log)
    rep_budget = rep["budget"]
    if snap.budget is not None and rep_budget is not None:
        rep_budget["title"] = budget_title(snap.budget)
    if snap.records_integrity is not None:  # the digest chain (tui.core.chain): the JSON's first key (issue 36)
        rep = {"records_integrity": snap.records_integrity.to_dict(), **rep}
    for issue in snap.malformed_examples:
        print(f"servewatch: {term(issue)}", file=sys.stderr)
    hidden = snap.malformed + snap.truncated + snap.unknown_types - len(snap.malformed_examples)
    if hidden > 0:
        print(f"servewatch: ... and {hidden} more problem lines (counted in the report)", file=sys.stderr)
    from tui.core.exitcodes import synthetic_exit

    state = rep["measured"]["verdict"]["state"]
    code, settings_why = settings_exit(exit_code(state), snap.settings)  # re-judged weaker: 3
    if level_missing and code == 0:
        code, settings_why = 3, level_missing
    code, synthetic_why = synthetic_exit(code, snap.synthetic)
    rep["settings"] = settings_dict(cfg)
    if snap.settings is not None:
        rep["verdict_settings"] = snap.settings.to_dict(run_state(snap))
    rep["exit"] = {"code": code, "synthetic": synthetic_why, "settings": settings_why}
    if settings.json:
        out.write(json.dumps(rep, indent=2, default=str) + "\n")
    else:
        from tui.core.importers.limits import describe_source

        line = describe_source(snap.header)
        weak = {**rep["settings"], "not_acceptance_grade": rep["settings"]["not_acceptance_grade"]
                + list((rep.get("identity") or {}).get("not_acceptance_grade") or [])}  # + a model claimed, not served
        if not settings.details:  # the short report (issue 37): the long one is --details
            from tui.core.report_short import format_short

            notes = [f"{synthetic_why}: exit 3"] if synthetic_why else []
            if level_missing:
                notes.append(level_missing)
            out.write(format_short(rep, source_line=line, state_text=verdict_text(state, weak), notes=notes))
            if html_out:
                write_report_html(html_out, rep, snap, sampler, cfg)
            if synthetic_why:
                print(f"servewatch: {synthetic_why}", file=sys.stderr)
            return code
        text = mark_verdict_line(format_report(rep), state, weak, synthetic_why)
        text = text if line is None else f"{term(line)}\n" + text
        if snap.records_integrity is not None:  # the digest chain's verification: the first line (issue 36)
            text = _with_integrity(text, snap.records_integrity)
        text = with_settings_lines(text, list((rep.get("verdict_settings") or {}).get("lines") or ())
                                   + ([f"  {level_missing}"] if level_missing else []))
        out.write(text)
    if html_out:
        write_report_html(html_out, rep, snap, sampler, cfg)
    if synthetic_why:
        print(f"servewatch: {synthetic_why}", file=sys.stderr)
    return code


def with_settings_lines(text: str, lines: list[str]) -> str:
    """The report text with what it was judged at (``tui.core.verdict_settings.Resolution.lines``) in its header
    block: after the ``data from:`` line and the records-integrity lines (else after the first line)."""
    if not lines:
        return text
    rows = text.split("\n")
    at = next((i for i, row in enumerate(rows) if row.startswith("data from:")), 0)
    while at + 1 < len(rows) and (rows[at + 1].startswith(("records ", "  ")) and rows[at + 1].strip()):
        at += 1
    rows[at + 1:at + 1] = lines
    return "\n".join(rows)


def html_sampler(path: str | None, cfg: MonitorConfig | None = None) -> Any:
    """None without --html; else the charts' bounded sampler (``tui.core.chartdata.RunSampler``), once the path
    is known to be writable (UsageError: one line, exit 2, before the input is read)."""
    if not path:
        return None
    from tui.sources.outfiles import output_file_problem

    problem = output_file_problem(path)
    if problem:
        raise UsageError(f"--html {path}: {problem}")
    from tui.core.chartdata import RunSampler

    return RunSampler(None if cfg is None else cfg.slos)


def write_html(path: str, text: str) -> None:
    from tui.sources.outfiles import write_text_atomic

    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_report_html(path: str, rep: Any, snap: Any, sampler: Any, cfg: MonitorConfig) -> None:
    """The report's HTML page (``tui.html.report_html``) from its JSON document and the chart data."""
    from tui.core.chartdata import report_bundle
    from tui.html import report_html

    judged = dict(rep.get("judged") or {})
    judged["round"] = (rep.get("measured") or {}).get("round", 1)
    data = report_bundle(rep.get("levels") or [], judged=judged,
                         candidate=(rep.get("budget_view") or {}).get("memory_only_candidate"), slos=cfg.slos,
                         target=cfg.target, timeline=rep.get("timeline") or [],
                         timeline_omitted=rep.get("timeline_omitted") or 0, sampler=sampler,
                         gpu_ceiling_gib=snap.gpu.ceiling_gib, kv_allocated_gib=snap.gpu.engine_kv_allocated_gib,
                         kv_ceiling_gib=snap.gpu.kv_ceiling_gib)
    write_html(path, report_html(json.loads(json.dumps(rep, default=str)), data))


def settings_dict(cfg: MonitorConfig) -> dict:
    """The acceptance settings that differ from their defaults, and those below a floor (``tui.core.grade``)."""
    from tui.core.grade import acceptance_grade, changed_settings

    return {"changed_from_default": changed_settings(cfg), "not_acceptance_grade": acceptance_grade(cfg)}


def verdict_text(state: str, settings: dict) -> str:
    """"PASS (not acceptance-grade: window 1 min < 10 min) [settings not default: window 1 min]", or the state."""
    weak = settings["not_acceptance_grade"]
    text = f"{state} (not acceptance-grade: {', '.join(weak)})" if weak and state == "PASS" else state
    if settings["changed_from_default"]:
        text += f" [settings not default: {', '.join(settings['changed_from_default'])}]"
    return text


def mark_verdict_line(text: str, state: str, settings: dict, synthetic_why: str | None) -> str:
    """The report's verdict line names every setting that differs from its default, marks a PASS on settings
    below a floor "PASS (not acceptance-grade: ...)" and says why SYNTHETIC input does not exit 0."""
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        if not ln.startswith("  verdict="):
            continue
        weak = settings["not_acceptance_grade"]
        if weak and state == "PASS":
            ln = ln.replace("verdict=PASS", f"verdict=PASS (not acceptance-grade: {', '.join(weak)})", 1)
        if settings["changed_from_default"]:
            ln += f"  [settings not default: {', '.join(settings['changed_from_default'])}]"
        lines[i] = ln
        if synthetic_why:
            lines.insert(i + 1, f"    {synthetic_why}: exit 3")
        break
    return "\n".join(lines)


def _with_integrity(text: str, integrity: Any) -> str:
    """The report text with the records-integrity line first (what was verified, in the threat model's words:
    issue 36), its details and problems under it; only a SYNTHETIC banner comes before it."""
    rows = text.split("\n")
    at = next((i for i, row in enumerate(rows) if row.startswith("servewatch report")), 0)
    add = [term(integrity.summary)] + [f"  {term(d)}" for d in integrity.details]
    add += [f"  integrity problem: {term(p)}" for p in integrity.problems[1:]]
    rows[at:at] = add
    return "\n".join(rows)


