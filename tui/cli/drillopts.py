"""The drill's flags and settings, shared by `servewatch drill` and `live --drill`, and how every reader turns a drill
file into its document (`report`, `replay`, `accept --drill`, `compare`, and `drill` itself after its run). Not a
command: the command is :mod:`tui.cli.drill`.

- :class:`DrillFlags`: the disturbance (``--spike KxDURATION`` | ``--fault-cmd CMD`` [``--fault-at``] |
  ``--fault-manual``) and the phases and recovery rule (``--baseline-minutes``, ``--recovery-minutes``,
  ``--recovery-window-s``, ``--step-s``, ``--hold-minutes``, ``--rto``, ``--requests-per-month``);
- :func:`plan_from_args`: the :class:`~tui.core.drill.settings.DrillPlan` (UsageError on a flag a drill cannot take);
- :func:`judge_file` / :func:`drill_doc`: a drill file read whole (the evidence reader, the Monitor and the drill's
  collector fed the same blocks) and judged; :func:`print_drill`: its text or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

import tui.core.defaults as D
from tui.cli.declare import CoreDefault, Settings, flag, switch
from tui.cli.drilltap import DrillTap
from tui.core.drill import DrillCollector, DrillPlan, drill_document, format_text, judge
from tui.core.drill.settings import default_plan_durations
from tui.core.exitcodes import UsageError, synthetic_exit
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.phases import DRILL_EXIT, FAULT_CMD, FAULT_MANUAL, SPIKE, parse_duration, parse_spike
from tui.core.textsafe import term
from tui.sources.load.config import LoadConfig


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _spike(text: str) -> tuple[float, float]:
    try:
        return parse_spike(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _minutes(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if not (v == v and 0 < v <= 7 * 24 * 60):
        raise argparse.ArgumentTypeError(f"minutes must be above 0 and at most a week, got {text}")
    return v


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (v == v and 0 < v < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return v


@dataclass(frozen=True, kw_only=True)
class DrillFlags(Settings):
    """The drill's flags: `servewatch drill` (``block(DrillFlags, omit=("drill",))``: a disturbance required) and
    `live --drill` (``block(DrillFlags, optional=("disturbance",))``: ``--drill`` turns them on)."""

    GROUP = "drill (docs/recovery.md)"
    REQUIRED_SETS = ("disturbance",)

    drill: bool = switch("--drill", help="run a drill in the console: baseline, disturbance, recovery at one load "
                                         "(the flags below; `servewatch drill --help`)")
    spike: tuple[float, float] | None = flag(
        "--spike", type=_spike, default=None, metavar="KxDURATION", exclusive="disturbance",
        help="the disturbance: the load times K for DURATION, such as 3x:60s (its own step at its own level; no "
             "default: this, --fault-cmd or --fault-manual)")
    fault_cmd: str | None = flag(
        "--fault-cmd", default=None, metavar="CMD", exclusive="disturbance",
        help="the disturbance: run CMD through the shell at --fault-at, such as 'kill -9 $(pidof llama-server)' with "
             "a supervisor that restarts it; its start, end, exit status and first output lines are recorded, "
             "secrets scrubbed (default: none)")
    fault_manual: bool = flag(
        "--fault-manual", action="store_true", default=False, exclusive="disturbance",
        help="the disturbance: you act after a PASSing baseline and mark the moment (SIGUSR1 to this process, or "
             "the console's m key)")
    fault_at: float | None = flag(
        "--fault-at", type=_duration, default=None, metavar="DURATION",
        help="with --fault-cmd: when it runs, from the baseline's start: 120s, 2m or bare seconds (default: the "
             "baseline's end)")
    manual_wait: float | None = flag(
        "--manual-wait", type=_duration, default=None, metavar="DURATION",
        help=f"with --fault-manual: how long the mark is awaited after the baseline (default "
             f"{D.DRILL_MANUAL_WAIT_S / 60:g} min)")
    baseline_minutes: float | None = flag(
        "--baseline-minutes", type=_minutes, default=None, metavar="MINUTES",
        help="the baseline's length; it must PASS or the drill ends there, INSUFFICIENT (default: the verdict's "
             "window, --min-window-minutes)")
    recovery_minutes: float | None = flag(
        "--recovery-minutes", type=_minutes, default=None, metavar="MINUTES",
        help="the recovery phase's length at the same load (default: twice the window)")
    recovery_window_s: float = flag(
        "--recovery-window-s", type=_positive, default=CoreDefault("DRILL_RECOVERY_WINDOW_S"), metavar="SECONDS",
        help="the rolling window of the recovery rule")
    step_s: float = flag(
        "--step-s", type=_positive, default=CoreDefault("DRILL_STEP_S"), metavar="SECONDS",
        help="the rolling windows' step: the time to recover is given to this resolution")
    hold_minutes: float | None = flag(
        "--hold-minutes", type=_minutes, default=None, metavar="MINUTES",
        help="how long after the recovery point the requests must PASS the usual verdict (default: the window)")
    rto: float | None = flag(
        "--rto", type=_duration, default=None, metavar="DURATION",
        help="the recovery time objective: RECOVERED needs the time to recover within it; 120s, 2m or bare seconds "
             "(default: the window)")
    requests_per_month: float | None = flag(
        "--requests-per-month", type=_positive, default=None, metavar="N",
        help="the monthly traffic the error budget is counted on (default: the baseline's rate for 30 days)")

    def disturbance_given(self) -> bool:
        return self.spike is not None or self.fault_cmd is not None or self.fault_manual


def plan_from_args(settings: Any, cfg: LoadConfig) -> DrillPlan:
    """The drill's settings from the flags (``settings.drill``: :class:`DrillFlags`; ``settings.load`` and
    ``settings.processes``: the load's blocks, ``tui.cli.loadtest``) and the load's settings (UsageError on a flag
    a drill cannot take: its phases set the steps' lengths; one level; the load in this process)."""
    load, procs, d = settings.load, settings.processes, settings.drill
    given = [name for name, value in (("--requests", load.requests), ("--duration", load.duration),
                                      ("--max-step-seconds", load.max_step_seconds), ("--ray", procs.ray))
             if value is not None]
    if load.rounds != 1:
        given.append("--rounds")
    if load.stop_on_fail:
        given.append("--stop-on-fail")
    if procs.workers not in (None, 1):
        given.append("--workers")
    if given:
        raise UsageError(f"a drill's phases set its steps, at one load, sent from this process: {', '.join(given)} "
                         "cannot be given with it")
    if len(cfg.levels) != 1:
        raise UsageError(f"a drill runs at one load: one --rate R or --concurrency C, got "
                         f"{','.join(f'{v:g}' for v in cfg.levels)}")
    if d.fault_at is not None and d.fault_cmd is None:
        raise UsageError("--fault-at needs --fault-cmd (a spike starts at the baseline's end, an operator's act when "
                         "marked)")
    if d.manual_wait is not None and not d.fault_manual:
        raise UsageError("--manual-wait needs --fault-manual")
    if not d.disturbance_given():
        raise UsageError("give the drill's disturbance: --spike KxDURATION, --fault-cmd CMD or --fault-manual")
    window_s = cfg.monitor.min_window_s
    dflt = default_plan_durations(window_s if window_s > 0 else D.MIN_WINDOW_S)
    kind = SPIKE if d.spike is not None else FAULT_CMD if d.fault_cmd is not None else FAULT_MANUAL
    plan = DrillPlan(
        kind=kind, level=float(cfg.levels[0]), mode=cfg.mode,
        baseline_s=dflt["baseline_s"] if d.baseline_minutes is None else d.baseline_minutes * 60.0,
        recovery_s=dflt["recovery_s"] if d.recovery_minutes is None else d.recovery_minutes * 60.0,
        window_s=float(d.recovery_window_s), step_s=float(d.step_s),
        hold_s=dflt["hold_s"] if d.hold_minutes is None else d.hold_minutes * 60.0,
        rto_s=dflt["rto_s"] if d.rto is None else float(d.rto),
        spike_factor=None if d.spike is None else d.spike[0],
        spike_s=None if d.spike is None else d.spike[1],
        fault_cmd=d.fault_cmd, fault_at_s=d.fault_at,
        manual_wait_s=D.DRILL_MANUAL_WAIT_S if d.manual_wait is None else float(d.manual_wait),
        requests_per_month=d.requests_per_month,
    )
    try:
        plan.validate()
    except ValueError as exc:
        raise UsageError(exc) from None
    return plan


# ------------------------------------------------------------------ reading a drill file


def judge_file(mon: Monitor, col: DrillCollector) -> dict[str, Any]:
    """The drill document of a file already read into ``mon`` and ``col`` (``Monitor.finish`` done), judged at the
    settings the Monitor judged at (the run's own; re-judged where a reader's flag differs: a weaker re-judgement
    never exits 0, ``tui.core.verdict_settings.settings_exit``)."""
    from tui.core.verdict_settings import settings_exit

    doc = drill_document(judge(col, mon), verdict_settings(mon.cfg))
    d = doc["drill"]
    code, settings_why = settings_exit(DRILL_EXIT[d["verdict"]], mon.settings)
    code, why = synthetic_exit(code, bool(d["synthetic"]))
    d["exit"] = {"code": code, "synthetic": why, "settings": settings_why}
    if mon.settings is not None:
        d["verdict_settings"] = mon.settings.to_dict()
    if mon.records_integrity is not None:
        d["records_integrity"] = mon.records_integrity.to_dict()
    return doc


def verdict_settings(cfg: MonitorConfig) -> dict[str, Any]:
    """The verdict's settings a drill was judged at (the document's ``settings.verdict``)."""
    return {"slos": cfg.slos.describe(), "target": cfg.target, "alpha": cfg.alpha,
            "min_window_minutes": cfg.min_window_s / 60.0, "min_requests": cfg.min_requests}


def read_drill(path: str, cfg: MonitorConfig, pick_run: int | None = None, verify_key: bytes | None = None,
               key_name: str = "the key given", judge_at: Any = None) -> tuple[Monitor, DrillCollector]:
    """A record file read whole into a Monitor and a drill collector (the same blocks); raises what the evidence
    reader raises (OSError, SeveralRuns, RunNotInFile, ImportProblem)."""
    from tui.sources.evidence_monitor import monitor_of
    from tui.sources.evidence_reader import ReadSettings, open_evidence

    tap = DrillTap(cfg)
    settings = ReadSettings(pick_run=pick_run, verify_key=verify_key, key_name=key_name, watch=False)
    with open_evidence(path, settings) as ev:
        mon = monitor_of(ev, cfg, tap=tap, judge_at=judge_at, settled=tap.settled)
    return mon, tap.collector


def print_drill(doc: dict[str, Any], as_json: bool, out: TextIO | None = None) -> None:
    """The drill document as JSON (only it), or as text with the records' integrity under its first line."""
    out = out or sys.stdout
    if as_json:
        out.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    text = format_text(doc)
    d = doc["drill"]
    head = [str((d.get("records_integrity") or {}).get("summary") or "")]
    head += list((d.get("verdict_settings") or {}).get("lines") or [])
    for why in (d["exit"].get("settings"),):
        if why:
            head.append(f"  {why}")
    head = [h for h in head if h]
    if head:
        first, _, rest = text.partition("\n")
        text = first + "\n" + "\n".join(head) + "\n" + rest
    out.write(term(text, keep_newlines=True))
    why = doc["drill"]["exit"].get("synthetic")
    if why:
        print(f"servewatch: {term(why)}", file=sys.stderr)


def report_drill(mon: Monitor, col: DrillCollector, as_json: bool, html_out: str | None, out: TextIO) -> int:
    """`report` (and `drill` itself) on a drill file: the document as text or JSON, and with ``html_out`` the page
    with the recovery chart; the exit code (0 RECOVERED, 1 NOT RECOVERED, 3 INSUFFICIENT)."""
    doc = judge_file(mon, col)
    print_drill(doc, as_json, out)
    if html_out:
        from tui.html import drill_html
        from tui.sources.outfiles import write_text_atomic

        try:
            write_text_atomic(html_out, drill_html(json.loads(json.dumps(doc, default=str))))
        except OSError as exc:
            raise UsageError(f"cannot write {html_out}: {exc.strerror or exc}") from None
    return int(doc["drill"]["exit"]["code"])
