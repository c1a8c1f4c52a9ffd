"""No command writes onto one of its own inputs: the outputs and inputs of a parsed command line, checked once
(``tui.cli.main`` calls :func:`own_input_refusal` on the command's settings after parsing, before the command
runs; the comparison by path or inode is ``tui.sources.outfiles.own_input_problem``).

What is an input and what an output is not listed here: every path setting is declared with its role
(``tui.cli.declare.path(..., role=...)``: input, output, appended to, a folder written into, a folder read), and
this module reads the roles from the declarations of the command's settings (``tui.cli.declare.path_values``).
A new path flag is therefore checked as soon as it is declared, and one declared without a role fails
tests/cli/test_outputs.py. Outputs: the ``output`` and ``append`` settings (a record file appended to is written),
the files an ``output-dir`` setting names inside its folder (accept's acceptance.md, .json, .html), and a derived
default (import's ``FILE.servewatch.jsonl``). Inputs: every ``input`` setting, positional or not.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from tui.cli.declare import blocks_of, path_values
from tui.cli.options import APPEND, INPUT, OUTPUT, OUTPUT_DIR


def _paths(value: object) -> list[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, (list, tuple)):
        return [os.fspath(v) for v in value if isinstance(v, (str, os.PathLike))]
    return []


def command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser that declared a parsed command's flags (the top-level one for the no-argument console)."""
    command = vars(args).get("command")
    for action in parser._actions:
        if command is not None and isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(command)
            if isinstance(sub, argparse.ArgumentParser):
                return sub
    return parser


def path_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The path flags of one parser (each carries its declared ``path_role``: ``tui.cli.declare``)."""
    return [a for a in parser._actions if getattr(a, "path_role", None) is not None]


def outputs_of(settings: Any) -> list[tuple[str, str]]:
    """(flag, path) of every file the command line writes (appends to), from the declared roles."""
    outs: list[tuple[str, str]] = []
    for arg, value, holder in path_values(settings):
        if value is None and arg.default_from is not None:
            value = arg.default_from(holder)
        if arg.role in (OUTPUT, APPEND):
            outs += [(arg.shown, p) for p in _paths(value)]
        elif arg.role == OUTPUT_DIR:
            for folder in _paths(value):
                outs += [(arg.shown, os.path.join(folder, name)) for name in arg.files]
    return outs


def inputs_of(settings: Any) -> list[tuple[str, str]]:
    """(flag, path) of every file the command line reads, from the declared roles."""
    ins: list[tuple[str, str]] = []
    for arg, value, _holder in path_values(settings):
        if arg.role == INPUT:
            ins += [(arg.shown, p) for p in _paths(value)]
    return ins


def theme_refusal(settings: Any) -> str | None:
    """The one line (exit 2, before the UI starts) for a ``--theme`` no theme answers to, else None."""
    from tui.cli.console import ConsoleFlags

    for console in blocks_of(settings, ConsoleFlags):
        if isinstance(console.theme, str):
            from tui.theming import unknown_theme_problem

            return unknown_theme_problem(console.theme, console.themes_dir)
    return None


def own_input_refusal(settings: Any) -> str | None:
    """The one line (exit 2) when an output of this command line is one of its inputs, else None."""
    from tui.sources.outfiles import own_input_problem

    return own_input_problem(outputs_of(settings), inputs_of(settings))
