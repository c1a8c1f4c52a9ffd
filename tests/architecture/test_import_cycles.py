"""No import cycle anywhere in tui/, counting every import the interpreter can run.

An AST scan, not an import-time trace, so that it sees what a run may never execute: imports inside functions,
under ``if TYPE_CHECKING:``, in ``try`` blocks. Edges:

- ``import a.b.c`` and ``from a.b.c import name``     -> ``a.b.c`` (and ``a.b.c.name`` when that is a module);
- ``from a.b import c`` where ``c`` is a submodule     -> ``a.b`` (the package ``__init__`` runs) and ``a.b.c``.

Parents of a dotted path are not counted as edges of their own: ``from tui.core.records.model import X`` runs
``tui/core/records/__init__.py`` first, but a package ``__init__`` that re-exports its submodules and submodules
that import each other by module path is the layout the house rules ask for, and counting it would forbid every
package. What this scan forbids is a module importing, by any route, something that imports it back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

PACKAGE = REPO / "tui"


def module_table() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    table: dict[str, tuple[Path, bool]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        table[".".join(parts)] = (path, is_pkg)
    return table


def import_edges(table: dict[str, tuple[Path, bool]]) -> dict[str, dict[str, int]]:
    """module -> {imported module inside tui: first line number}."""
    edges: dict[str, dict[str, int]] = {name: {} for name in table}
    for name, (path, is_pkg) in table.items():
        here = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [source] + [f"{source}.{alias.name}" for alias in node.names]
            for target in targets:
                if target in table and target != name:
                    edges[name].setdefault(target, node.lineno)
    return edges


def find_cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(cycle: list[str], edges: dict[str, dict[str, int]], table: dict[str, tuple[Path, bool]]) -> str:
    members = set(cycle)
    lines = [f"import cycle among {len(cycle)} modules:"]
    for name in cycle:
        for target, lineno in sorted(edges[name].items()):
            if target in members:
                lines.append(f"  {table[name][0].relative_to(REPO)}:{lineno}: {name} -> {target}")
    return "\n".join(lines)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_no_import_cycle_anywhere_in_tui():
    table = module_table()
    edges = import_edges(table)
    cycles = find_cycles(edges)
    assert not cycles, "\n".join(describe(c, edges, table) for c in cycles)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
def test_siblings_import_each_other_by_module_path_not_through_their_package():
    """``from tui.core import evidence`` inside tui/core goes through ``tui/core/__init__.py``; inside a package
    the rule is ``from tui.core.evidence import ...`` or ``import tui.core.evidence as evidence``."""
    table = module_table()
    offenders = []
    for name, (path, is_pkg) in table.items():
        if is_pkg:
            continue
        parent = name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module == parent:
                for alias in node.names:
                    if f"{parent}.{alias.name}" in table:
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: from {parent} import {alias.name}")
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: from . import ...")
    assert not offenders, "\n".join(offenders)


def test_the_scan_finds_a_cycle_when_there_is_one(tmp_path):
    """The scanner itself: a three-module loop closed by a function-level import and a TYPE_CHECKING import."""
    pkg = tmp_path / "tui" / "core"
    pkg.mkdir(parents=True)
    (tmp_path / "tui" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from tui.core.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from tui.core import c\n    return c\nx = 1\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tui.core.a\n")
    (pkg / "d.py").write_text("import tui.core.a\n")
    global PACKAGE, REPO
    saved = PACKAGE, REPO
    PACKAGE, REPO = tmp_path / "tui", tmp_path
    try:
        table = module_table()
        cycles = find_cycles(import_edges(table))
    finally:
        PACKAGE, REPO = saved
    assert cycles == [["tui.core.a", "tui.core.b", "tui.core.c"]]
