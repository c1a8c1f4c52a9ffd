"""The record files a judging command is given (`accept --records`, `plan --records`), read once each as `report`
reads them: a missing or unreadable file, a second standard input, a file of several runs without `--run`, another
tool's file that cannot be imported: one line, exit 2. A file given twice, under the same name or as a copy of the
same run (its run id), is counted once and said (a merged or copied file must not double the evidence).

Also what every judging command shares: a record file read whole into a Monitor (``analyse_file``: `sweep`), the
one line for a file of several runs (``runs_problem``) and what several files were judged at together
(``judged_settings``: `accept`, `plan`)."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tui.cli.options import UsageError
from tui.core.textsafe import term
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


def runs_problem(exc: Exception) -> UsageError:
    """A file with several runs and no --run (the list on stderr, then the one line), or --run N beyond them."""
    from tui.core.runs import SeveralRuns

    if isinstance(exc, SeveralRuns):
        for line in exc.listing():
            print(f"servewatch:   {term(line)}", file=sys.stderr)
    return UsageError(str(exc))


def analyse_file(path: str, config: Any, budget: Any = None, budget_origin: str | None = None,
                 pick_run: int | None = None, verify_key: bytes | None = None,
                 key_name: str = "the key given", judge_at: Any = None) -> Any:
    """Read a whole record file ('-': standard input) into a Monitor (raises OSError when unreadable): the
    evidence reader (``tui.sources.evidence_reader``, a watch recording read as records) and its Monitor
    (``tui.sources.evidence_monitor.monitor_of``). ``pick_run``: run N (1-based), ``LAST_RUN``, None (a file
    of several runs raises ``SeveralRuns``)."""
    from tui.sources.evidence_monitor import monitor_of
    from tui.sources.evidence_reader import ReadSettings, open_evidence

    settings = ReadSettings(pick_run=pick_run, verify_key=verify_key, key_name=key_name, watch=False)
    with open_evidence(path, settings) as ev:
        return monitor_of(ev, config, budget, budget_origin, judge_at=judge_at)


def files_judge_at(records: Sequence[str], pick_run: int | None, at: Any, model: str | None = None) -> Any:
    """What the record files ``records`` are judged at together (issue 35): each at its run's own settings where
    they agree, at the flags given (``at``: what the flags ask, ``Acceptance.judge_at``), and, where the files'
    settings differ, all at the strictest of them (``tui.core.verdict_settings.common_values``, said in each
    file's re-judgement). The headers are read first (up to each run header); standard input is read once, by the
    judging pass (its settings then judged against the others': re-judged weaker is exit 3). ``model``: only the
    files of that model are judged (accept's ``--model``)."""
    from tui.core.runs import run_identity, target_of
    from tui.core.verdict_settings import common_values, read_header
    from tui.sources.evidence_reader import run_header_of

    seen: dict[object, str] = {}
    runs: set[str] = set()
    files = []
    for path in records:  # the files judged together: those the judging pass keeps (no copy, --model's)
        if path == "-" or same_file_as(path, seen) is not None:
            continue
        header = run_header_of(path, pick_run)
        rid = run_identity(header or {})
        if rid is not None and rid in runs:
            continue
        if rid is not None:
            runs.add(rid)
        if model is not None and target_of(header or {})[0] != model:
            continue
        files.append(read_header(header))
    return common_values(files, at)


def judged_monitors(records: Sequence[str], pick_run: int | None, verify_key_env: str | None, cfg: Any,
                    budget: Any, origin: str | None, notes: list[str], tap_for: Callable[[], Any] | None = None,
                    judge_at: Any = None) -> Iterator[tuple[Any, Any]]:
    """(Monitor, tap) of each record file of ``records`` not already read; ``tap_for()`` makes the per-file
    consumer of the blocks (the HTML charts' sampler) or None. What was counted once is appended to ``notes``.
    ``judge_at``: what the files are judged at (``files_judge_at``; each Monitor's ``settings`` says what it
    was). Each Monitor's snapshot is limited by what its file supports (``tui.sources.evidence_monitor``)."""
    from tui.cli.chainopts import verify_key
    from tui.core.runs import RunNotInFile, SeveralRuns, run_identity
    from tui.sources.evidence_monitor import monitor_of, not_records_problem
    from tui.sources.evidence_probe import input_problem
    from tui.sources.evidence_reader import ReadSettings, open_evidence
    from tui.sources.importing import ImportProblem

    if list(records).count("-") > 1:
        raise UsageError("standard input (-) can be read once")
    key, key_name = verify_key(verify_key_env)  # a missing key variable: bad usage
    seen_files: dict[object, str] = {}
    seen_runs: dict[str, str] = {}
    for path in records:
        problem = input_problem(path)
        if problem:
            raise UsageError(problem)
        same = same_file_as(path, seen_files)
        if same is not None:
            notes.append(f"{path} given twice ({same}), counted once")
            continue
        settings = ReadSettings(pick_run=pick_run, verify_key=key, key_name=key_name, watch=False)
        tap = tap_for() if tap_for is not None else None
        settled = None if tap is None else (lambda m, t=tap: t.use_slos(m.cfg.slos))
        try:
            with open_evidence(path, settings) as ev:
                mon = monitor_of(ev, cfg, budget, origin, tap=None if tap is None else tap.add_many,
                                 judge_at=judge_at, settled=settled)
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


def judged_settings(runs: list, cfg: Any, flag_level: float | None) -> tuple:
    """What the record files were judged at together (issue 35): (the Monitor settings, the required level, per
    file its ``verdict_settings`` document, the files re-judged weaker than their runs' with the reason). Files
    judged at different settings (standard input, whose header is read once, by the judging pass, stating others)
    are refused: one verdict is judged at one setting. `accept`'s and `plan`'s."""
    from tui.core.monitor import config_at
    from tui.core.report import run_state
    from tui.core.verdict_settings import settings_exit

    docs, weaker, effective = [], [], []
    for r in runs:
        src, snap = (r.source, r.snapshot) if hasattr(r, "snapshot") else r
        res = snap.settings
        if res is None:
            continue
        docs.append({"source": src, **res.to_dict(run_state(snap))})
        _code, why = settings_exit(0, res)
        if why:
            weaker.append(f"{src}: {why}")
        effective.append(res.effective)
    if not effective:
        return cfg, flag_level, docs, weaker
    if any(e != effective[0] for e in effective[1:]):
        raise UsageError("the record files are judged at different settings ("
                         + "; ".join(f"{d['source']}: " + next(x for x in d["lines"] if x.startswith("settings:"))
                                     for d in docs)
                         + "): give the settings to judge all of them at as flags")
    return config_at(cfg, effective[0]), effective[0].required_level, docs, weaker
