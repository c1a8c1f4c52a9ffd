"""The command line's commands are not each other's libraries (issue 38, "A declared CLI").

A command module is one the command table names (``tui.cli.COMMANDS``, and the no-argument console's
``tui.cli.CONSOLE``). No module of ``tui/cli`` imports a command module: not another command (``report``
importing ``watch``), and not a shared module (``loadtest`` importing ``budget``, which would make every command
that uses it import ``budget`` too). What several commands use lives in shared modules (``tui.cli.options``,
``tui.cli.loadtest``, ``tui.cli.reporting`` ...). Only ``tui/cli/__init__.py`` loads the command modules, and only
through the table (``importlib``, never an ``import`` statement).

An AST scan, as tests/architecture/test_import_cycles.py: imports inside functions count (they run when the
function does), ``import tui.cli.report``, ``from tui.cli.report import x``, ``from tui.cli import report`` and
``importlib.import_module("tui.cli.report")`` alike.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO
from tui.cli import COMMANDS, CONSOLE

CLI = REPO / "tui" / "cli"


def command_modules() -> set[str]:
    return {c.module for c in COMMANDS.values()} | {CONSOLE.module}


def imported_modules(path: Path) -> dict[str, int]:
    """Every ``tui.cli`` module ``path`` imports, at module level or inside a function: {module: first line}."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import report / from .report import x
                base = "tui.cli" + ("." + node.module if node.module else "")
            else:
                base = node.module or ""
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                targets = [node.args[0].value]
        for target in targets:
            if target.startswith("tui.cli"):
                found.setdefault(target, node.lineno)
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cross_imports() -> list[str]:
    commands = command_modules()
    bad = []
    for path in sorted(CLI.rglob("*.py")):
        name = module_name(path)
        if name == "tui.cli":
            continue  # the table's loader
        for target, line in imported_modules(path).items():
            if target in commands and target != name:
                kind = "command" if name in commands else "shared module"
                bad.append(f"{path.relative_to(REPO)}:{line}: {kind} {name} imports command module {target}")
    return bad


def test_no_cli_module_imports_a_command_module():
    bad = cross_imports()
    assert not bad, "\n".join(bad)


def test_the_package_loads_commands_only_through_the_table():
    init = CLI / "__init__.py"
    static = [t for t in imported_modules(init) if t in command_modules()]
    assert static == [], static


def test_the_scan_sees_imports_inside_functions(tmp_path):
    # the scan itself can fail: an import inside a function, a relative one and importlib are all seen
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from tui.cli.report import run\n"
                     "def g():\n    from . import watch\n"
                     "import importlib\nimportlib.import_module('tui.cli.plan')\n", encoding="utf-8")
    seen = imported_modules(probe)
    assert {"tui.cli.report", "tui.cli.watch", "tui.cli.plan"} <= set(seen)
