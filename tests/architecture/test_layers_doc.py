"""docs/layers.md draws the same layers as the exhaustive import-linter contracts in pyproject.toml: the table of
``tui.core``'s rows and the rows of each core package. lint-imports checks the code against pyproject; this checks
the page a reader trusts against pyproject, so a module moved in one and not the other fails here."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.support.paths import REPO

DOC = REPO / "docs" / "layers.md"


def _contracts() -> dict[str, list[frozenset[str]]]:
    """container -> its layers, top to bottom, each a set of module names."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    out: dict[str, list[frozenset[str]]] = {}
    for c in cfg["tool"]["importlinter"]["contracts"]:
        if c.get("type") == "layers" and len(c.get("containers", ())) == 1:
            out[c["containers"][0]] = [frozenset(m.strip() for m in layer.split("|")) for layer in c["layers"]]
    return out


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:] if end < 0 else text[start:end]


def _names(cell: str) -> frozenset[str]:
    """The backticked module names of a cell; a parenthesis is a remark about them (``(the list of tools,
    `IMPORTERS`)``), not a module."""
    return frozenset(n.rstrip("/") for n in re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", cell)))


def _core_rows() -> list[frozenset[str]]:
    rows = []
    for line in _section("## Inside `tui.core`").splitlines():
        m = re.match(r"\|\s*\d+\s*\|([^|]*)\|", line)
        if m:
            rows.append(_names(m.group(1)))
    return rows


def _package_rows() -> dict[str, list[frozenset[str]]]:
    out = {}
    for line in _section("## Inside `tui.core`").splitlines():
        m = re.match(r"\|\s*`(tui\.core\.\w+)`\s*\|(.*)\|\s*$", line)
        if m:
            out[m.group(1)] = [_names(part) for part in m.group(2).split(">")]
    return out


def test_the_core_table_is_the_core_layers_contract() -> None:
    want = _contracts()["tui.core"]
    got = _core_rows()
    assert got, "docs/layers.md has no row table under 'Inside `tui.core`'"
    assert got == want, "\n".join(
        f"row {len(want) - i - 1}: docs {sorted(g)} != pyproject {sorted(w)}"
        for i, (g, w) in enumerate(zip(got, want)) if g != w) or f"{len(got)} rows in docs, {len(want)} in pyproject"


@pytest.mark.parametrize("package", ["tui.core.records", "tui.core.watch", "tui.core.importers", "tui.core.quality",
                                     "tui.core.budget", "tui.core.acceptance"])
def test_each_core_package_row_is_its_layers_contract(package: str) -> None:
    rows = _package_rows()
    assert package in rows, f"docs/layers.md does not draw {package}"
    assert rows[package] == _contracts()[package]
