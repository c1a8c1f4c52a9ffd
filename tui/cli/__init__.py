"""The `servewatch` command line: one module per command, shared modules for what several commands use, one
boundary.

Layout (every command module exports a settings dataclass and ``run(settings) -> int``)::

    tui/cli/__init__.py   the command table, the top-level parser and ``main()`` (the one boundary)
    tui/cli/declare.py    declared settings: each flag a field (flag, placeholder, help, type, path role)
    tui/cli/options.py    shared vocabulary: value types, path roles, the acceptance (SLO) and HTTP blocks
    tui/cli/budgetflags.py, loadtest.py, console.py, reporting.py, evidence_files.py, watchfiles.py,
    quality_files.py, chainopts.py, guard.py   shared modules (no command module imports another)
    tui/cli/budget.py     budget                       tui/cli/run.py      run
    tui/cli/live.py       live                         tui/cli/sweep.py    sweep
    tui/cli/report.py     report                       tui/cli/replay.py   replay, the no-argument console
    tui/cli/quality.py    quality                      tui/cli/accept.py   accept
    tui/cli/watch.py      watch                        tui/cli/compare.py  compare
    tui/cli/importfile.py import                       tui/cli/plan.py     plan
    tui/cli/select.py     select                       tui/cli/measure.py  measure
    tui/cli/export.py     export                       tui/cli/index.py    index
    tui/cli/history.py    history                      tui/cli/drill.py    drill
    tui/cli/drillopts.py  the drill's flags (DrillFlags: drill, live --drill) and drill files (report, accept, compare)
    tui/cli/budget_grid.py, runref.py, acceptance_doc.py   budget's screening table, run:ID (the catalogue's runs as
                          inputs), the acceptance document (accept's and select's)

Each flag is declared once, as a field of a settings dataclass (``tui.cli.declare``: its flag names, placeholder,
help, type, default and, for a path, its role); the argparse parser of a command is built from its settings class,
and the parsed namespace becomes a settings object (``tui.cli.declare.settings_from``) before anything runs: the
command gets the object, never the namespace. The own-input guard (``tui.cli.guard``) reads the path roles from
the same declarations.

Evidence (a record file, a watch recording, another tool's export) is read by ``tui.sources.evidence_reader``
for report, replay, accept and compare alike: the command modules read their settings, call it and print.

Lazy loading: a command's module is imported only when that command runs (or its ``--help`` is asked for), so
``servewatch budget`` never imports httpx or Textual.  ``servewatch --help`` lists every command from
:data:`COMMANDS` without importing any of them.  A command module that fails to import raises: no command is
ever hidden by an ImportError.  No command module imports another (tests/architecture/test_cli_commands.py):
what several commands use lives in a shared module.

The boundary: a command raises :class:`~tui.core.exitcodes.UsageError` ("one line") for bad usage or unreadable
input; ``main()`` prints ``servewatch: <line>`` on stderr and returns 2.  Ctrl-C returns 130 quietly; a closed
standard output (``servewatch budget --json | head -1``) returns 141 quietly.  Any other exception is a bug:
70 and one line naming the failing place and the log file with the traceback (``--debug`` prints it instead),
``tui.cli.crash``.  Exit codes: ``tui.core.exitcodes``.

Adding a command (e.g. ``watch``) is one module plus one table entry:

1. ``tui/cli/watch.py`` with a frozen settings dataclass (``WatchSettings(tui.cli.declare.Settings)``: each flag a
   field declared with ``tui.cli.declare.flag`` / ``switch`` / ``path``, shared blocks with ``block``; its
   ``EPILOG`` is ``options.epilog("servewatch watch ...")`` for the example and exit codes; the module imports
   nothing heavy at module level) and ``run(settings: WatchSettings) -> int`` (imports what it needs inside;
   raises ``UsageError`` for bad usage);
2. ``"watch": Command("tui.cli.watch", "one-line help", "WatchSettings"),`` in :data:`COMMANDS`.

tests/cli/test_cli.py then checks its help (an example, every default), its placeholder names and its lazy import.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tui import __version__
from tui.cli.console import ConsoleSettings
from tui.cli.declare import build, settings_from
from tui.cli.options import HelpFormatter
from tui.core.exitcodes import EXIT_CODES_DOC, ExitCode, UsageError

__all__ = ["COMMANDS", "CONSOLE", "Command", "ExitCode", "UsageError", "build_parser", "main", "settings_of"]

DESCRIPTION = (
    "servewatch: is this LLM deployment ready for real traffic? Budget (does it fit?), load (does it finish "
    "in time?) and quality (are answers still usable?) kept apart. With no command: the console replaying the "
    "bundled sample run (its flags below)."
)

EPILOG = ("examples:\n  servewatch --speed 16\n  servewatch budget --params 8B --gpu-gib 80\n"
          "  servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4\n"
          "  servewatch report run.jsonl\n\n"
          "`servewatch COMMAND --help` shows a command's flags.\n\n" + EXIT_CODES_DOC)


@dataclass(frozen=True)
class Command:
    """One row of the command table: where the command lives, its one-line help, its settings class (its flags:
    ``tui.cli.declare``) and the function that runs it with a settings object."""

    module: str
    help: str
    settings: str
    run: str = "run"

    def load(self) -> tuple[type, Callable[[Any], int]]:
        mod = importlib.import_module(self.module)  # an ImportError surfaces: no command is hidden
        return getattr(mod, self.settings), getattr(mod, self.run)


COMMANDS: dict[str, Command] = {
    "budget": Command("tui.cli.budget", "memory budget: a concurrency candidate to test (not a limit)",
                      "BudgetSettings"),
    "report": Command("tui.cli.report", "headless verdict on a record file", "ReportSettings"),
    "replay": Command("tui.cli.replay", "the console replaying a record file", "ReplaySettings"),
    "run": Command("tui.cli.run", "headless load test against a server, recorded", "RunSettings"),
    "measure": Command("tui.cli.measure", "a short measurement, no verdict: throughput, goodput, percentiles, "
                       "errors (the record file is judged by `report`)", "MeasureSettings"),
    "live": Command("tui.cli.live", "the console watching a live load test", "LiveSettings"),
    "sweep": Command("tui.cli.sweep", "capacity sweep: step the load up until it fails", "SweepSettings"),
    "drill": Command("tui.cli.drill", "recovery drill: baseline, disturbance (spike, fault command, your act), "
                     "recovery; time to recover and impact", "DrillSettings"),
    "quality": Command("tui.cli.quality", "quality regression: candidate vs baseline", "QualitySettings"),
    "accept": Command("tui.cli.accept", "write the acceptance report", "AcceptSettings"),
    "watch": Command("tui.cli.watch", "on-call spot check: judge a running service from its own metrics (sends it "
                     "nothing)", "WatchSettings"),
    "import": Command("tui.cli.importfile", "convert another load tool's run to a record file (the tools: "
                      "servewatch import --help)", "ImportSettings"),
    "compare": Command("tui.cli.compare", "compare two runs level by level: NOT WORSE / WORSE / NOT ENOUGH EVIDENCE",
                       "CompareSettings"),
    "plan": Command("tui.cli.plan", "plan a fleet from one replica's sweep: replicas, spares, GPUs, cost",
                    "PlanSettings"),
    "select": Command("tui.cli.select", "choose among measured candidates: the decision table, cost per 1M good "
                      "tokens at capacity", "SelectSettings"),
    "export": Command("tui.cli.export", "one run's per-request records as a CSV or Parquet table, or an llm-d "
                      "benchmark report", "ExportSettings"),
    "index": Command("tui.cli.index", "catalogue every run found in folders in a SQLite file (for history and run:ID)",
                     "IndexSettings"),
    "history": Command("tui.cli.history", "the catalogued runs over time: verdict, capacity, goodput (--html: trends)",
                       "HistorySettings"),
}

@dataclass(frozen=True)
class Runner:
    """A command's ``run`` as the parser's ``func`` default: called with the settings object (``main``), or with
    the parsed namespace (``args.func(args)``), which it first makes the settings object of."""

    settings: type
    run: Callable[[Any], int]

    def __call__(self, given: Any) -> int:
        if isinstance(given, argparse.Namespace):
            given = settings_from(self.settings, given)
        return self.run(given)


CONSOLE = Command("tui.cli.replay", "the console on the bundled sample run", "ConsoleSettings", run="run_default")


class _Parser(argparse.ArgumentParser):
    def __init__(self, *a, **kw) -> None:
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message: str):  # exit 2 with one line, never a traceback
        self.exit(ExitCode.USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(only: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser.  ``only``: the commands whose flags are declared (their modules imported);
    None: all of them.  The others are listed (name and help) but take no flags."""
    p = _Parser(prog="servewatch", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--version", action="version", version=f"servewatch {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="on an internal error (exit 70), print the traceback instead of writing it to a log file "
                        "(allowed anywhere on the command line)")
    build(p, ConsoleSettings)  # the no-argument console's flags
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, command in COMMANDS.items():
        sp = sub.add_parser(name, help=command.help, description=command.help, epilog=EXIT_CODES_DOC)
        if only is None or name in only:
            settings, run = command.load()
            build(sp, settings)
            sp.set_defaults(settings_class=settings, func=Runner(settings, run))
    return p


#: the reading and load commands that take ``--percentiles`` (issue 41): each declares ``percentiles_flag()``
#: (``tui.cli.options``) as its last field
PERCENTILE_COMMANDS = frozenset({"report", "replay", "run", "live", "sweep", "accept", "watch", "compare", "measure"})


def _settings(args: argparse.Namespace) -> Any:
    """The settings object of a parsed command line (the command's settings class, or the console's)."""
    return settings_from(vars(args).get("settings_class", ConsoleSettings), args)


def settings_of(argv: Sequence[str]) -> Any:
    """The settings object ``argv`` (a command and its flags) parses to, as ``main`` hands it to the command
    (without the own-input guard and without running anything)."""
    argv = list(argv)
    named = argv[0] if argv and argv[0] in COMMANDS else None
    return _settings(build_parser(only=[named] if named else []).parse_args(argv))


def _quiet_closed_stdout() -> None:
    """After a BrokenPipeError: point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests capture it)
        pass


#: how long a command whose output sits unread in a pipe waits, at its end, for the reader to take it or go away
PIPE_DRAIN_WAIT_S = 5.0


def _reader_went_away(wait_s: float = PIPE_DRAIN_WAIT_S) -> bool:
    """True when standard output is a pipe whose reader closed it before reading everything written
    (``servewatch report x --json | head -1``). A small output fits in the pipe's buffer, so no write fails: at
    the end the command waits (at most ``wait_s``) until the reader has taken it all (False) or has closed its end
    with bytes unread (True: the same answer as a failed write, 141)."""
    try:
        import fcntl
        import select
        import stat
        import struct
        import termios

        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLERR)
        end = _monotonic() + wait_s
        while True:
            if any(ev & select.POLLERR for _fd, ev in poller.poll(0)):
                return True  # no reader left
            unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            left = end - _monotonic()
            if unread == 0 or left <= 0:
                return False  # the reader took everything (or is still reading: its business)
            poller.poll(min(50, int(left * 1000) + 1))  # wakes at once when the reader closes its end
    except (OSError, ValueError, AttributeError, ImportError):  # not a real file descriptor (tests capture stdout)
        return False


def _monotonic() -> float:
    import time

    return time.monotonic()


def _dispatch(argv: list[str]) -> int:
    command = argv[0] if argv and argv[0] in COMMANDS else None
    # console flags before a command (`servewatch --theme light replay f`) are refused below, after parsing
    named = command or next((a for a in argv if a in COMMANDS), None)
    parser = build_parser(only=[named] if named else [])
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors: one line on stderr, exit 2 (help/version: 0)
        return int(exc.code or 0) if isinstance(exc.code, int) else ExitCode.USAGE
    if args.command is not None and command is None:  # console flags before a command: `--theme light replay f`
        raise UsageError(f"flags go after the command: servewatch {args.command} ... (see servewatch --help)")
    settings = _settings(args)  # the command sees its settings object, never the namespace
    from tui.cli.guard import own_input_refusal, theme_refusal

    refusal = theme_refusal(settings) or own_input_refusal(settings)  # an unknown theme; writing onto an input
    if refusal:
        raise UsageError(refusal)
    if args.command is None:
        _cls, run = CONSOLE.load()
        return int(run(settings) or 0)
    qs = getattr(settings, "percentiles", None)  # --percentiles (PERCENTILE_COMMANDS)
    if qs is None:
        return int(args.func(settings) or 0)
    from tui.core import stats

    prev = stats.set_selected(qs)  # one choice for the whole command (tui.core.stats.selected)
    try:
        return int(args.func(settings) or 0)
    finally:
        stats.set_selected(prev)


def main(argv: Sequence[str] | None = None) -> int:
    """The `servewatch` entry point: the one place that turns errors into exit codes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
    if debug:  # a global flag, accepted before or after the command
        cut = argv.index("--") if "--" in argv else len(argv)
        argv = [a for a in argv[:cut] if a != "--debug"] + argv[cut:]
    from tui.cli.safeout import guarded_output  # every character written goes through tui.core.textsafe.term

    with guarded_output():
        return _main(argv, debug)


def _main(argv: list[str], debug: bool) -> int:
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the boundary, not at interpreter exit
        if _reader_went_away():  # the reader closed the pipe with output unread: as if a write had failed
            _quiet_closed_stdout()
            return ExitCode.BROKEN_PIPE
        return code
    except UsageError as exc:
        from tui.cli.crash import scrub_line
        from tui.core.textsafe import term

        # one line, whatever a server's answer in it holds; no secret, no URL user info / query
        print(f"servewatch: {term(scrub_line(str(exc), argv))}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        _quiet_closed_stdout()
        return ExitCode.BROKEN_PIPE
    except Exception as exc:  # a bug: its own exit code and one line, never disguised as FAIL or bad input
        from tui.cli.crash import report_internal_error

        return report_internal_error(exc, debug, argv)


if __name__ == "__main__":
    raise SystemExit(main())
