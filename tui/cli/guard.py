"""No command writes onto one of its own inputs: the outputs and inputs of a parsed command line, checked once
(``tui.cli.main`` calls :func:`own_input_refusal` after parsing, before the command runs; the comparison by
path or inode is ``tui.sources.outfiles.own_input_problem``).

Outputs: ``--out`` (import: its default ``FILE.servewatch.jsonl`` too; accept: the report files inside the
``--out`` folder), ``--record`` (run, live, sweep, watch: appended to, so reading it as the trace would read its
own output), ``--sweep-json``, ``--html`` (report, compare).  Inputs: the record/run files, ``--quality``, ``--rollback``, ``--config``,
``--budget``, ``--trace``, ``--baseline``, ``--set``.
"""

from __future__ import annotations

import argparse
import os

_INPUTS = (("file", "FILE"), ("base", "BASE"), ("cand", "CAND"), ("records", "--records"), ("rollback", "--rollback"),
           ("config", "--config"), ("budget", "--budget"), ("trace", "--trace"), ("baseline", "--baseline"),
           ("set_path", "--set"))


def _paths(value: object) -> list[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, (list, tuple)):
        return [os.fspath(v) for v in value if isinstance(v, (str, os.PathLike))]
    return []


def outputs_of(args: argparse.Namespace) -> list[tuple[str, str]]:
    command = getattr(args, "command", None)
    outs: list[tuple[str, str]] = []
    out = getattr(args, "out", None)
    if command == "accept":
        folder = out or "."
        names = ["acceptance.md", "acceptance.json"] + ([] if getattr(args, "no_html", False) else ["acceptance.html"])
        outs += [("--out", os.path.join(folder, n)) for n in names]
    elif command == "import":
        file = getattr(args, "file", None)
        target = out or (file + ".servewatch.jsonl" if isinstance(file, str) else None)
        if target:
            outs.append(("--out", target))
    elif isinstance(out, str):
        outs.append(("--out", out))
    for attr, flag in (("record", "--record"), ("sweep_json", "--sweep-json"), ("html", "--html")):
        outs += [(flag, p) for p in _paths(getattr(args, attr, None))]
    return outs


def inputs_of(args: argparse.Namespace) -> list[tuple[str, str]]:
    ins: list[tuple[str, str]] = []
    for attr, flag in _INPUTS:
        ins += [(flag, p) for p in _paths(getattr(args, attr, None))]
    if getattr(args, "command", None) == "accept":
        ins += [("--quality", p) for p in _paths(getattr(args, "quality", None))]
    return ins


def theme_refusal(args: argparse.Namespace) -> str | None:
    """The one line (exit 2, before the UI starts) for a ``--theme`` no theme answers to, else None."""
    name = getattr(args, "theme", None)
    if not isinstance(name, str):
        return None
    from tui.theming import unknown_theme_problem

    return unknown_theme_problem(name, getattr(args, "themes_dir", None))


def own_input_refusal(args: argparse.Namespace) -> str | None:
    """The one line (exit 2) when an output of this command line is one of its inputs, else None."""
    from tui.sources.outfiles import own_input_problem

    return own_input_problem(outputs_of(args), inputs_of(args))
