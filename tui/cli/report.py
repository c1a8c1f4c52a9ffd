"""`servewatch report FILE`: the headless verdict on a record file (no Textual, no httpx).

Also the shared record-file reading (``analyse_file``, ``input_problem``) and ``monitor_config_from_args``
that `run`, `sweep`, `replay`, `live` and `accept` use."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys

from tui.cli.options import (
    UsageError,
    add_acceptance_arguments,
    add_budget_arguments,
    add_required_level_argument,
    add_run_argument,
    add_teaching_argument,
    epilog,
)
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import iter_blocks, not_a_record_file
from tui.core.report import LevelNotInFile, build_report, exit_code, format_report


def monitor_config_from_args(args: argparse.Namespace, **extra) -> MonitorConfig:
    d = MonitorConfig()  # defaults for commands without the acceptance flags (the no-argument console)
    kw = dict(
        slo_ttft_ms=getattr(args, "slo_ttft_ms", d.slo_ttft_ms),
        target=getattr(args, "target", d.target),
        alpha=getattr(args, "alpha", d.alpha),
        min_window_s=getattr(args, "min_window_minutes", d.min_window_s / 60.0) * 60.0,
        min_requests=getattr(args, "min_requests", None),
    )
    if getattr(args, "rolling_seconds", None):
        kw["rolling_s"] = args.rolling_seconds
    if getattr(args, "rolling_requests", None):
        kw["rolling_n"] = args.rolling_requests
    kw.update(extra)
    return MonitorConfig(**kw)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch report`."""
    parser.description = "The headless verdict on a record file: measured verdict, budget and quality kept apart."
    parser.epilog = epilog("servewatch report run.jsonl --slo-ttft-ms 500 --target 0.99",
                           "servewatch report - --json < run.jsonl")
    parser.add_argument("file", metavar="FILE", help="record file (JSON Lines, record format v1); - reads standard input")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_required_level_argument(parser)
    add_run_argument(parser)
    add_acceptance_arguments(parser)
    add_budget_arguments(parser)
    add_teaching_argument(parser)
    from tui.cli.chainopts import add_verify_key_argument

    add_verify_key_argument(parser)


def input_problem(path: str) -> str | None:
    """Why ``path`` cannot be read as a record file before reading it (None: go ahead). '-' is standard input."""
    if path == "-":
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"cannot read {path}: no such file"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    from tui.sources.replay import not_a_plain_file

    return not_a_plain_file(path, st.st_mode)  # regular files and pipes (process substitution) are read


def _is_record_file(path: str) -> bool:
    """A servewatch record file, or nothing another tool wrote (the reader then reports what it is)."""
    from tui.core import importers
    from tui.sources.importing import detect_file

    fmt = detect_file(path)
    return fmt is None or fmt == importers.SERVEWATCH


LAST_RUN = -1  # ``pick_run`` of `run` and `sweep`: the run they have just appended


def analyse_file(path: str, config: MonitorConfig, budget=None, budget_origin: str | None = None,
                 pick_run: int | None = None, verify_key: bytes | None = None,
                 key_name: str = "the key given") -> Monitor:
    """Read a whole record file ('-': standard input) into a Monitor (raises OSError when unreadable).

    The file is read in chunks through the block reader (``tui.core.records.iter_blocks``, the one
    the replay uses) and each chunk's records go to the Monitor as one batch: memory stays bounded.

    Several runs in the file (``run --record`` appends) are never merged (``tui.core.runs.RunSplitter``):
    ``pick_run`` N keeps run N (1-based), ``LAST_RUN`` the last one; None raises ``SeveralRuns`` (with the
    list) when the file holds more than one, ``RunNotInFile`` for an N beyond them.

    The same raw chunks go through the digest chain's verifier (``tui.core.chain``; ``verify_key``: also its
    signature), whose result the Monitor gets at the end (``Monitor.set_records_integrity``); then the Monitor
    holds the file against itself (``Monitor.finish``, tui.core.evidence)."""
    from tui.core.chain import ChainVerifier
    from tui.core.runs import RunSplitter

    if pick_run == LAST_RUN:
        if path == "-":
            raise UsageError("the last run of standard input cannot be picked")
        pick_run = len(_count_runs(path, config))
    splitter = RunSplitter(pick_run)
    verifier = ChainVerifier(verify_key, key_name)
    tap = verifier.feed
    mon = Monitor(config, budget=budget, source="<stdin>" if path == "-" else path, budget_origin=budget_origin)
    mon_add_many = mon.add_many
    feed = splitter.feed

    def add_many(items: list) -> None:
        kept = feed(items)
        if kept:
            mon_add_many(kept)
    # The ingest path makes no reference cycles (tests/test_report_cli.py checks it): reference counting frees
    # every record and memory stays bounded without the cycle collector, whose passes over the young records
    # of each chunk would cost about a tenth of a large report. Paused only here, for this loop.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if path == "-":
            for items in iter_blocks(sys.stdin.buffer, "<stdin>", tap=tap):
                add_many(items)
        elif _is_record_file(path):
            with open(path, "rb") as fh:
                for items in iter_blocks(fh, path, tap=tap):
                    add_many(items)
        else:  # another tool's run, converted on the fly (recognised by content): raises ImportProblem
            from tui.sources.importing import open_run

            batch: list = []
            for item in open_run(path)[0]:
                batch.append(item)
                if len(batch) >= 4096:
                    add_many(batch)
                    batch = []
            add_many(batch)
    finally:
        if collecting:
            gc.enable()
    splitter.check(mon.source)
    mon.set_records_integrity(verifier.finish())  # another tool's file: "unverified (no digest)"
    mon.finish()  # the whole file is read: hold it against itself (tui.core.evidence)
    return mon


def _count_runs(path: str, config: MonitorConfig) -> list:
    """The runs of a record file (one pass of the block reader, nothing judged)."""
    from tui.core.runs import RunSplitter

    splitter = RunSplitter(None)
    if _is_record_file(path):
        with open(path, "rb") as fh:
            for items in iter_blocks(fh, path):
                splitter.feed(items)
    return splitter.runs


def runs_problem(exc: Exception) -> UsageError:
    """A file with several runs and no --run (the list on stderr, then the one line), or --run N beyond them."""
    from tui.core.runs import SeveralRuns

    if isinstance(exc, SeveralRuns):
        for line in exc.listing():
            print(f"servewatch:   {line}", file=sys.stderr)
    return UsageError(str(exc))


def not_record_file_problem(mon: Monitor) -> str | None:
    """The refusal when nothing in the file was a usable record (another tool's JSON, binary, empty)."""
    problem = not_a_record_file(mon.usable_lines(), mon.seq_no, mon.examples[0] if mon.examples else None)
    return None if problem is None else f"{mon.source}: {problem}"


def run_report(path: str, args: argparse.Namespace, budget=None, out=None, default_budget: bool = True) -> int:
    """Print the report of ``path`` and return its exit code (used by `servewatch run` too); bad usage or an
    unusable file raises UsageError.

    The budget shown: ``budget``, else the budget flags, ``--teaching`` or the bundled teaching log (when
    ``default_budget``), else the record file's budget record, else unknown."""
    out = out or sys.stdout
    try:
        cfg = monitor_config_from_args(args)
    except ValueError as exc:
        raise UsageError(exc) from None
    from tui.cli.budget import (
        budget_from_args,
        budget_given,
        budget_source,
        budget_title,
        view_budget,
    )

    origin = None
    if budget is None:
        try:
            if default_budget:
                budget, origin = view_budget(args, [] if path == "-" else [path])
            elif budget_given(args):
                budget, origin = budget_from_args(args), budget_source(args)
        except (ValueError, OSError) as exc:
            raise UsageError(f"bad budget: {exc}") from None
    problem = input_problem(path)
    if problem:
        raise UsageError(problem)
    from tui.cli.watch import is_watch_file

    if is_watch_file(path):  # a `servewatch watch --record` file: judged like the watch itself
        from tui.cli.watch import report_watch_file

        return report_watch_file(path, args, out)
    from tui.cli.chainopts import verify_key
    from tui.core.runs import RunNotInFile, SeveralRuns

    key, key_name = verify_key(args)  # a missing key variable: bad usage
    from tui.sources.importing import ImportProblem

    try:
        mon = analyse_file(path, cfg, budget, origin, pick_run=getattr(args, "run", None), verify_key=key,
                           key_name=key_name)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (SeveralRuns, RunNotInFile) as exc:
        raise runs_problem(exc) from None
    except ImportProblem as exc:  # another tool's file that cannot be imported (any other ValueError is a bug)
        raise UsageError(str(exc)) from None
    problem = not_record_file_problem(mon)
    if problem:
        raise UsageError(problem)
    from tui.core.importers.limits import limit_snapshot

    snap = limit_snapshot(mon.snapshot())  # imported data without a time axis, or a sample: no verdict
    try:
        rep = build_report(snap, level=getattr(args, "required_level", None))
    except LevelNotInFile as exc:
        raise UsageError(exc) from None
    if snap.budget is not None:
        rep["budget"]["title"] = budget_title(snap.budget)
    if snap.records_integrity is not None:  # the digest chain (tui.core.chain)
        rep["records_integrity"] = snap.records_integrity.to_dict()
    for issue in snap.malformed_examples:
        print(f"servewatch: {issue}", file=sys.stderr)
    hidden = snap.malformed + snap.truncated + snap.unknown_types - len(snap.malformed_examples)
    if hidden > 0:
        print(f"servewatch: ... and {hidden} more problem lines (counted in the report)", file=sys.stderr)
    from tui.core.exitcodes import synthetic_exit

    state = rep["measured"]["verdict"]["state"]
    code, synthetic_why = synthetic_exit(exit_code(state), snap.synthetic)
    rep["settings"] = settings_dict(cfg)
    rep["exit"] = {"code": code, "synthetic": synthetic_why}
    if getattr(args, "json", False):
        out.write(json.dumps(rep, indent=2, default=str) + "\n")
    else:
        from tui.core.importers.limits import describe_source

        line = describe_source(snap.header)
        text = mark_verdict_line(format_report(rep), state, rep["settings"], synthetic_why)
        text = text if line is None else f"{line}\n" + text
        if snap.records_integrity is not None:  # the digest chain's verification, right under the first line
            text = _with_integrity(text, snap.records_integrity)
        out.write(text)
    if synthetic_why:
        print(f"servewatch: {synthetic_why}", file=sys.stderr)
    return code


def settings_dict(cfg: MonitorConfig) -> dict:
    """The acceptance settings that differ from their defaults, and those below a floor (``tui.core.grade``)."""
    from tui.core.grade import acceptance_grade, changed_settings

    return {"changed_from_default": changed_settings(cfg), "not_acceptance_grade": acceptance_grade(cfg)}


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


def _with_integrity(text: str, integrity) -> str:
    """The report text with the records-integrity line (and its details) after its ``data from:`` line (else
    after its first line)."""
    rows = text.split("\n")
    at = next((i for i, row in enumerate(rows) if row.startswith("data from:")), 0)
    rows[at + 1:at + 1] = [integrity.summary] + [f"  {d}" for d in integrity.details]
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    """`servewatch report FILE`."""
    return run_report(args.file, args)
