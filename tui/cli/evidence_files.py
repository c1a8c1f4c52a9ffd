"""The record files a judging command is given (`accept --records`, `plan --records`), read once each as `report`
reads them: a missing or unreadable file, a second standard input, a file of several runs without `--run`, another
tool's file that cannot be imported: one line, exit 2. A file given twice, under the same name or as a copy of the
same run (its run id), is counted once and said (a merged or copied file must not double the evidence)."""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from tui.cli.options import UsageError
from tui.sources.infiles import open_input


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open_input(path, "record file") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def same_file_as(path: str, seen: dict[object, str]) -> str | None:
    """The earlier path that is the same file as ``path`` (same path, same inode or identical content SHA-256),
    or None (``path`` is then remembered in ``seen``). Standard input is never the same as a file. The content is
    hashed only when an earlier file has the same size (identical content needs it): a large file given once is
    not read an extra time."""
    if path == "-":
        return None
    keys: list[object] = [("path", os.path.realpath(path))]
    try:
        st = os.stat(path)
        keys.append(("inode", st.st_dev, st.st_ino))
        if stat.S_ISREG(st.st_mode):
            size_key = ("size", st.st_size)
            earlier = seen.get(size_key)
            if earlier is not None:
                if ("hashed", earlier) not in seen:  # the earlier file of this size: hashed now, once
                    seen[("sha256", _sha256(earlier))] = earlier
                    seen[("hashed", earlier)] = earlier
                keys.append(("sha256", _sha256(path)))
                seen[("hashed", path)] = path
            else:
                seen[size_key] = path
    except OSError:
        pass
    for k in keys:
        if k in seen:
            how = {"path": "same path", "inode": "same file", "sha256": "identical content"}[str(k[0])]  # type: ignore[index]
            return f"{how} as {seen[k]}"
    for k in keys:
        seen[k] = path
    return None


def files_judge_at(args: argparse.Namespace) -> Any:
    """What the record files of ``args.records`` are judged at together (issue 35): each at its run's own settings
    where they agree, at the flags given, and, where the files' settings differ, all at the strictest of them
    (``tui.core.verdict_settings.common_values``, said in each file's re-judgement). The headers are read first
    (up to each run header); standard input is read once, by the judging pass (its settings then judged against
    the others': re-judged weaker is exit 3)."""
    from tui.cli.options import judge_at_from_args
    from tui.core.runs import run_identity, target_of
    from tui.core.verdict_settings import common_values, read_header
    from tui.sources.evidence_reader import run_header_of

    at = judge_at_from_args(args)
    seen: dict[object, str] = {}
    runs: set[str] = set()
    files = []
    model = getattr(args, "model", None)
    for path in args.records:  # the files judged together: those the judging pass keeps (no copy, --model's)
        if path == "-" or same_file_as(path, seen) is not None:
            continue
        header = run_header_of(path, args.run)
        rid = run_identity(header or {})
        if rid is not None and rid in runs:
            continue
        if rid is not None:
            runs.add(rid)
        if model is not None and target_of(header or {})[0] != model:
            continue
        files.append(read_header(header))
    return common_values(files, at)


def judged_monitors(args: argparse.Namespace, cfg: Any, budget: Any, origin: str | None, notes: list[str],
                    tap_for: Callable[[], Any] | None = None, judge_at: Any = None) -> Iterator[tuple[Any, Any]]:
    """(Monitor, tap) of each record file of ``args.records`` not already read; ``tap_for()`` makes the per-file
    consumer of the blocks (the HTML charts' sampler) or None. What was counted once is appended to ``notes``.
    ``judge_at``: what the files are judged at (``files_judge_at``; each Monitor's ``settings`` says what it
    was)."""
    from tui.cli.chainopts import verify_key
    from tui.cli.report import runs_problem
    from tui.core.runs import RunNotInFile, SeveralRuns, run_identity
    from tui.sources.evidence_monitor import monitor_of, not_records_problem
    from tui.sources.evidence_probe import input_problem
    from tui.sources.evidence_reader import ReadSettings, open_evidence
    from tui.sources.importing import ImportProblem

    if args.records.count("-") > 1:
        raise UsageError("standard input (-) can be read once")
    key, key_name = verify_key(args)  # a missing key variable: bad usage
    seen_files: dict[object, str] = {}
    seen_runs: dict[str, str] = {}
    for path in args.records:
        problem = input_problem(path)
        if problem:
            raise UsageError(problem)
        same = same_file_as(path, seen_files)
        if same is not None:
            notes.append(f"{path} given twice ({same}), counted once")
            continue
        settings = ReadSettings(pick_run=args.run, verify_key=key, key_name=key_name, watch=False)
        tap = tap_for() if tap_for is not None else None
        try:
            with open_evidence(path, settings) as ev:
                mon = monitor_of(ev, cfg, budget, origin, tap=None if tap is None else tap.add_many,
                                 judge_at=judge_at,
                                 settled=None if tap is None else (lambda m, t=tap: t.use_slos(m.cfg.slos)))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (SeveralRuns, RunNotInFile) as exc:
            raise runs_problem(exc) from None
        except ImportProblem as exc:  # another tool's file that cannot be imported (other ValueErrors: bugs)
            raise UsageError(str(exc)) from None
        rid = run_identity(mon.header)
        if rid is not None and rid in seen_runs:
            notes.append(f"{path} given twice (the same run as {seen_runs[rid]}: {rid}), counted once")
            continue
        if rid is not None:
            seen_runs[rid] = path
        problem = not_records_problem(mon)
        if problem:
            raise UsageError(problem)
        yield mon, tap
