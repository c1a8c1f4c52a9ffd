"""The `servewatch` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from tui import __version__
from tui.core.report import EXIT_CODES_DOC, EXIT_USAGE

DESCRIPTION = (
    "servewatch: is this LLM deployment ready for real traffic? Budget (does it fit?), load (does it finish "
    "in time?) and quality (are answers still usable?) kept apart. With no command: the console replaying the "
    "bundled sample run."
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # exit 2 with one line, never a traceback
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"servewatch: {message}\n")


def _optional(module: str, fn: str):
    """Import a feature module lazily so one missing optional part never breaks the others."""
    import importlib

    try:
        return getattr(importlib.import_module(module), fn)
    except (ImportError, AttributeError):
        return None


def build_parser() -> argparse.ArgumentParser:
    from tui.budget_cli import add_budget_arguments
    from tui.report_cli import add_report_arguments, cmd_report

    p = _Parser(prog="servewatch", description=DESCRIPTION, epilog=EXIT_CODES_DOC)
    p.add_argument("--version", action="version", version=f"servewatch {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    b = sub.add_parser("budget", help="memory budget: a concurrency candidate to test (not a limit)")
    add_budget_arguments(b)
    b.add_argument("--json", action="store_true", help="print the budget as JSON (loadable with --budget FILE)")
    b.add_argument("--out", metavar="FILE", help="also save the budget JSON to FILE")
    b.set_defaults(func=_optional("tui.budget_cli", "cmd_budget"))

    r = sub.add_parser("report", help="headless verdict on a record file", epilog=EXIT_CODES_DOC)
    add_report_arguments(r)
    r.set_defaults(func=cmd_report)

    for name, mod, add, cmd, helptext in (
        ("replay", "tui.replay_cli", "add_replay_arguments", "cmd_replay", "the console replaying a record file"),
        ("run", "tui.run_cli", "add_run_arguments", "cmd_run", "headless load test against a server, recorded"),
        ("live", "tui.run_cli", "add_live_arguments", "cmd_live", "the console watching a live load test"),
        ("sweep", "tui.sweep_cli", "add_sweep_arguments", "cmd_sweep", "capacity sweep: step the load up until it fails"),
        ("quality", "tui.accept_cli", "add_quality_arguments", "cmd_quality", "quality regression: candidate vs baseline"),
        ("accept", "tui.accept_cli", "add_accept_arguments", "cmd_accept", "write the acceptance report"),
    ):
        adder, func = _optional(mod, add), _optional(mod, cmd)
        if adder is None or func is None:
            continue
        sp = sub.add_parser(name, help=helptext, epilog=EXIT_CODES_DOC)
        adder(sp)
        sp.set_defaults(func=func)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        default = _optional("tui.replay_cli", "cmd_console_default")
        if default is not None:
            dp = _Parser(prog="servewatch")
            adder = _optional("tui.replay_cli", "add_console_default_arguments")
            if adder:
                adder(dp)
            return int(default(dp.parse_args(argv)) or 0)
        # no console yet: the headless report on the bundled sample
        from tui.report_cli import cmd_report

        from tui.samples import default_sample

        return cmd_report(parser.parse_args(["report", default_sample()] + argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors: one line on stderr, exit 2 (help/version: 0)
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
