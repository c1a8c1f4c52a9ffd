"""No command writes onto one of its own inputs: the outputs and inputs of a parsed command line, checked once
(``tui.cli.main`` calls :func:`own_input_refusal` after parsing, before the command runs; the comparison by
path or inode is ``tui.sources.outfiles.own_input_problem``).

What is an input and what an output is not listed here: every path flag is declared with its role
(``tui.cli.options.path_arg``: input, output, appended to, a folder written into, a folder read), and this module
reads the roles from the parsed command's own parser. A new path flag is therefore checked as soon as it is
declared, and one declared without a role fails tests/cli/test_outputs.py. Outputs: the ``output`` and ``append``
flags (a record file appended to is written), the files an ``output-dir`` flag names inside its folder (accept's
acceptance.md, .json, .html), and a derived default (import's ``FILE.servewatch.jsonl``). Inputs: every ``input``
flag, positional or not.
"""

from __future__ import annotations

import argparse
import os

from tui.cli.options import APPEND, INPUT, OUTPUT, OUTPUT_DIR


def _paths(value: object) -> list[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if isinstance(value, (list, tuple)):
        return [os.fspath(v) for v in value if isinstance(v, (str, os.PathLike))]
    return []


def command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser that declared the command's flags (the top-level one for the no-argument console)."""
    command = getattr(args, "command", None)
    if command is None:
        return parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(command)
            if isinstance(sub, argparse.ArgumentParser):
                return sub
    return parser


def path_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The path flags of one parser, each with its ``path_role`` (``tui.cli.options.path_arg``)."""
    return [a for a in parser._actions if getattr(a, "path_role", None) is not None]


def _flag(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest.upper()


def outputs_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    outs: list[tuple[str, str]] = []
    for action in path_actions(command_parser(parser, args)):
        role = getattr(action, "path_role", None)
        value = getattr(args, action.dest, None)
        derive = getattr(action, "path_default", None)
        if value is None and derive is not None:
            value = derive(args)
        if role in (OUTPUT, APPEND):
            outs += [(_flag(action), p) for p in _paths(value)]
        elif role == OUTPUT_DIR:
            for folder in _paths(value):
                outs += [(_flag(action), os.path.join(folder, name)) for name in getattr(action, "path_files", ())]
    return outs


def inputs_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    ins: list[tuple[str, str]] = []
    for action in path_actions(command_parser(parser, args)):
        if getattr(action, "path_role", None) == INPUT:
            ins += [(_flag(action), p) for p in _paths(getattr(args, action.dest, None))]
    return ins


def theme_refusal(args: argparse.Namespace) -> str | None:
    """The one line (exit 2, before the UI starts) for a ``--theme`` no theme answers to, else None."""
    name = getattr(args, "theme", None)
    if not isinstance(name, str):
        return None
    from tui.theming import unknown_theme_problem

    return unknown_theme_problem(name, getattr(args, "themes_dir", None))


def own_input_refusal(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """The one line (exit 2) when an output of this command line is one of its inputs, else None."""
    from tui.sources.outfiles import own_input_problem

    return own_input_problem(outputs_of(args, parser), inputs_of(args, parser))
