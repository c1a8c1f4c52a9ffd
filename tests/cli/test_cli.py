"""The command line as a package: lazy command modules, one exit-code enum, one usage boundary, honest --help."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import pytest

import tui.cli as cli
from tests.support.paths import REPO
from tui.cli import COMMANDS, Command, build_parser, main
from tui.cli import options as O
from tui.core.exitcodes import ExitCode

ROOT = REPO
SEED = str(ROOT / "sample_logs" / "seed.jsonl")
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

# the least each command needs to parse (nothing here is ever run: parsing fails first, or only parsing is tested)
MINIMAL = {
    "budget": [],
    "report": [SEED],
    "replay": [SEED],
    "run": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
    "measure": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
    "live": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
    "sweep": ["--url", "http://127.0.0.1:9"],
    "drill": ["--url", "http://127.0.0.1:9", "--rate", "1", "--spike", "3x:10s"],
    "quality": ["--url", "http://127.0.0.1:9"],
    "accept": ["--records", SEED],
    "watch": ["--metrics-url", "http://127.0.0.1:9/metrics", "--once"],
    "import": [SEED],
    "compare": [SEED, SEED],
    "plan": ["--records", SEED, "--peak-rate", "1"],
    "select": ["--candidate", f"a={SEED}"],
    "export": [SEED],
    "index": [str(ROOT / "sample_logs")],
    "history": [],
}
FLOAT_TYPES = (O.positive_float, O.non_negative_float, O.fraction, O.margin_fraction)
METAVARS = {"FILE", "DIR", "DATE", "URL", "NAME", "NAME=FILE", "MS", "SECONDS", "MINUTES", "FRACTION", "N", "LIST", "GIB", "TOKENS",
            "FACTOR", "USD", "VAR", "FORMAT", "DTYPE", "LEVEL", "N|MIN-MAX", "'NAME: VALUE'", "LABELS", "RATE",
            "N|auto", "auto|ADDRESS", "START-END", "EPOCH", "DIST", "KEY=VALUE", "NAME=VAR",
            "DURATION", "KxDURATION", "CMD"}  # EPOCH: a Unix time in seconds (watch --window-end); DIST: a length distribution; DURATION: 120s, 2m or bare seconds (drill); CMD: a shell command


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, (argparse._HelpAction,
                                                                                  argparse._VersionAction))]


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- lazy modules, no hidden command


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_budget_imports_neither_httpx_nor_textual_nor_other_commands():
    r = python("import sys, io, contextlib\n"
               "from tui.cli import COMMANDS, main\n"
               "with contextlib.redirect_stdout(io.StringIO()):\n"
               "    rc = main(['budget', '--json'])\n"
               "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'textual', 'rich'))\n"
               "cmds = sorted(m for m in sys.modules if m in {c.module for c in COMMANDS.values()})\n"  # shared modules load
               "print(rc, heavy, cmds)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "[]", "['tui.cli.budget']"]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_top_level_help_imports_no_command_module_and_lists_every_command():
    r = python("import sys, io, contextlib\n"
               "from tui.cli import COMMANDS, main\n"
               "buf = io.StringIO()\n"
               "with contextlib.redirect_stdout(buf):\n"
               "    rc = main(['--help'])\n"
               "cmds = sorted(m for m in sys.modules if m in {c.module for c in COMMANDS.values()})\n"  # shared load
               "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'textual'))\n"
               "print(repr(buf.getvalue()))\n"
               "print(rc, cmds, heavy)")
    assert r.returncode == 0, r.stderr
    help_text, tail = r.stdout.strip().rsplit("\n", 1)
    assert tail.split() == ["0", "[]", "[]"]
    for name in COMMANDS:
        assert f"    {name} " in eval(help_text)


def test_a_broken_command_module_is_an_error_not_a_hidden_command(monkeypatch, capsys):
    monkeypatch.setitem(COMMANDS, "report", Command("tui.cli.no_such_module", "headless verdict on a record file",
                                                      "ReportSettings"))
    assert main(["report", SEED]) == ExitCode.INTERNAL  # an internal error says so (issue 18): never hidden
    assert "internal error" in capsys.readouterr().err
    with pytest.raises(ModuleNotFoundError):
        build_parser()  # every command declared: the broken one raises, it is not skipped
    assert main(["--help"]) == 0
    assert re.search(r"^\s+report\s+headless verdict", capsys.readouterr().out, re.M)  # still listed


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_python_dash_m_tui_and_tui_cli_run():
    for mod in ("tui", "tui.cli"):
        r = subprocess.run([sys.executable, "-m", mod, "--version"], cwd=ROOT, env=ENV, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("servewatch "), (mod, r.stderr)


# ---------------------------------------------------------------- exit codes and the one boundary


def test_one_exit_code_enum_and_no_hand_written_usage_blocks():
    assert [int(c) for c in (ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INSUFFICIENT)] == [0, 1, 2, 3]
    from tui.core.report import exit_code

    assert (exit_code("PASS"), exit_code("FAIL"), exit_code("UNDECIDED")) == (0, 1, 3)
    for path in (ROOT / "tui").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "EXIT_USAGE" not in text, path
        assert not re.search(r"^\s*return 2\s*$", text, re.M), path


def test_usage_error_is_one_line_on_stderr_and_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("servewatch: ") and "no such file" in err
    assert main(["budget", "--gpu-gib", "nan"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "finite" in err


@pytest.mark.parametrize("argv, words", [
    (["replay", SEED, "--speed", "4", "--max-speed"], "not allowed with"),
    (["--speed", "4", "--max-speed"], "not allowed with"),
    (["replay", SEED, "--rolling-seconds", "30", "--rolling-requests", "10"], "not allowed with"),
    (["live", *MINIMAL["live"], "--rolling-seconds", "30", "--rolling-requests", "10"], "not allowed with"),
    (["report", SEED, "--min-window-minutes", "nan"], "finite"),
    (["report", SEED, "--slo-ttft-ms", "inf"], "finite"),
    (["report", SEED, "--min-window-minutes", "-1"], ">= 0"),
    (["quality", *MINIMAL["quality"], "--margin", "1.5"], "< 1"),
    (["--theme", "light", "replay", SEED], "flags go after the command"),
])
def test_contradictory_or_impossible_flags_are_refused_with_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("servewatch") and words in err, err


def test_every_float_flag_refuses_nan_inf_and_negative():
    seen = 0
    for name, sp in subparsers(build_parser()).items():
        for action in options(sp):
            if action.type not in FLOAT_TYPES:
                continue
            for bad in ("nan", "inf", "-inf", "-1"):
                with pytest.raises(SystemExit) as exc:
                    sp.parse_args([*MINIMAL[name], action.option_strings[0], bad])
                assert exc.value.code == 2, (name, action.option_strings, bad)
                seen += 1
    assert seen > 40  # the SLO flags in six commands, the load flags in three, quality's own ...


def test_keyboard_interrupt_is_130_quietly(monkeypatch, capsys):
    import tui.cli.budget as B

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(B, "run", interrupted)
    assert main(["budget"]) == ExitCode.INTERRUPTED == 130
    assert capsys.readouterr().err == ""


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_a_closed_pipe_exits_quietly_deterministic():
    """The reader is gone before the first byte is written: 141 (128 + SIGPIPE), nothing on stderr."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "tui.cli", "budget", "--json"], cwd=ROOT, env=ENV, stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.stderr == "" and p.returncode == ExitCode.BROKEN_PIPE == 141


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_a_closed_pipe_exits_quietly_with_head(tmp_path):
    """`servewatch report FILE --json | head -1` through a real pipe: the first line arrives, nothing on stderr,
    and the servewatch side ends 0 (it finished first) or 141 (the pipe closed first), never with a traceback."""
    err, status = tmp_path / "err", tmp_path / "status"
    script = (f"({sys.executable} -m tui.cli report {SEED} --json 2>{err}; echo $? >{status}) | head -1")
    p = subprocess.run(["sh", "-c", script], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert p.stdout == "{\n"
    assert err.read_text() == ""
    assert int(status.read_text()) in (3, 141)  # the report's own code (INSUFFICIENT for the seed log) or 141


# ---------------------------------------------------------------- --help: examples, defaults, placeholders


def test_every_command_help_has_an_example_and_states_every_default():
    for name, sp in subparsers(build_parser()).items():
        text = sp.format_help()
        assert "example" in text and f"servewatch {name}" in text, name
        formatter = sp._get_formatter()
        for action in options(sp):
            if action.nargs == 0:  # a switch: off unless given
                continue
            help_text = formatter._get_help_string(action).lower()
            assert "default" in help_text, (name, action.option_strings, help_text)


def test_top_level_help_lists_the_console_flags(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--speed FACTOR", "--max-speed", "--theme NAME", "--themes-dir DIR", "--export-dir DIR", "--teaching"):
        assert flag in out
    assert "example" in out


def test_placeholder_names_are_one_vocabulary_and_the_same_across_commands():
    by_flag: dict[str, set] = {}
    for name, sp in subparsers(build_parser()).items():
        for action in options(sp):
            if action.nargs == 0 or action.choices:
                continue
            assert action.metavar in METAVARS, (name, action.option_strings, action.metavar)
            by_flag.setdefault(action.option_strings[0], set()).add(action.metavar)
    mixed = {flag: m for flag, m in by_flag.items() if len(m) > 1}
    # the same flag name meaning a different kind of value: a ramp (run) vs one number (quality); a report
    # directory (accept) vs a result file (budget, quality)
    # and select's per-candidate files (NAME=FILE) vs accept's one file
    assert mixed == {"--concurrency": {"LIST", "N"}, "--out": {"FILE", "DIR"}, "--quality": {"FILE", "NAME=FILE"},
                     "--budget": {"FILE", "NAME=FILE"}}


def test_live_takes_every_console_flag_replay_takes():
    parsers = subparsers(build_parser())
    flags = lambda p: {s for a in options(p) for s in a.option_strings}  # noqa: E731
    console = {"--theme", "--themes-dir", "--export-dir", "--rolling-seconds", "--rolling-requests"}
    assert console <= flags(parsers["replay"]) and console <= flags(parsers["live"])


def test_budget_with_tp_2_does_not_say_one_gpu(capsys):
    assert main(["budget", "--tp", "2", "--gpu-gib", "24"]) == 0
    out = capsys.readouterr().out
    assert "one GPU" not in out and "each of the 2 GPUs" in out
    assert main(["budget", "--json", "--tp", "2", "--gpu-gib", "24"]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"]["tp"] == 2


def test_the_command_table_is_the_only_registry():
    # every command module named in the table exists and has the settings class and the function the table names
    import importlib

    for name, command in COMMANDS.items():
        mod = importlib.import_module(command.module)
        assert isinstance(getattr(mod, command.settings), type) and callable(getattr(mod, command.run)), name
    assert not hasattr(cli, "_optional")


def test_every_command_module_has_the_one_interface():
    # a settings dataclass (its fields declare the flags: tui.cli.declare) and `run(settings) -> int` in every
    # command module (issue 38)
    import dataclasses
    import inspect

    from tui.cli.declare import Settings

    for name, command in COMMANDS.items():
        settings, run = command.load()
        assert command.run == "run" and dataclasses.is_dataclass(settings) and issubclass(settings, Settings), name
        assert list(inspect.signature(run).parameters) == ["settings"], name
