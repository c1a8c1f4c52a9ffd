"""Every character servewatch writes to the terminal goes through the one output guard (tui/cli/safeout.py, installed
by ``main()``), which shows control characters and escape sequences visibly (tui.core.textsafe.term): no module may
write around it (issue 36, finding 3). This test fails when one does: ``sys.__stdout__`` / ``sys.__stderr__``,
``sys.stdout.buffer`` / ``sys.stderr.buffer``, ``os.write`` to descriptor 1 or 2, or opening ``/dev/tty``.
(Textual draws the console through its own driver on ``sys.__stderr__``; what it draws is made safe where the console
builds its markup: ``tui.core.textsafe.console``.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

TUI = REPO / "tui"


def _modules() -> list[Path]:
    return sorted(p for p in TUI.rglob("*.py") if "vendor" not in p.parts)


def _around_the_guard(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys" \
                and node.attr in ("__stdout__", "__stderr__"):
            out.append((node.lineno, f"sys.{node.attr}"))
        if isinstance(node, ast.Attribute) and node.attr == "buffer" and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "sys" \
                and node.value.attr in ("stdout", "stderr"):
            out.append((node.lineno, f"sys.{node.value.attr}.buffer"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "write" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "os" and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in (1, 2):
            out.append((node.lineno, f"os.write({node.args[0].value}, ...)"))
        if isinstance(node, ast.Constant) and node.value == "/dev/tty":
            out.append((node.lineno, "/dev/tty"))
    return out


#: uses that write nothing: (module, what) -> why
ALLOWED = {("tui/app.py", "sys.__stdout__"): "terminal_problem(): isatty() only, to say why no console can be drawn"}


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_no_module_writes_to_the_terminal_around_the_output_guard():
    found = []
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        for line, what in _around_the_guard(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, what) not in ALLOWED:
                found.append(f"{rel}:{line}: {what}")
    assert not found, "write through sys.stdout / sys.stderr (tui.cli.safeout guards them):\n" + "\n".join(found)


def test_the_scan_sees_each_kind_of_bypass():
    src = ("import os, sys\nsys.__stdout__.write('x')\nsys.stderr.buffer.write(b'x')\nos.write(1, b'x')\n"
           "open('/dev/tty', 'w')\nos.write(fd, b'x')\nsys.stdout.write('ok')\n")
    assert sorted(w for _, w in _around_the_guard(ast.parse(src))) == sorted(
        ["sys.__stdout__", "sys.stderr.buffer", "os.write(1, ...)", "/dev/tty"])
