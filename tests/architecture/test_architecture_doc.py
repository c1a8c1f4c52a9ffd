"""docs/architecture.md tells the data flow and three recipes by naming files: every path it names exists (a file, a
package folder, or a module given without its ``.py``, so ``tui/core/monitor`` holds whether the Monitor is one
module or a package), and each recipe is there. A rename that forgets the page fails here."""

from __future__ import annotations

import re

from tests.support.paths import REPO

DOC = REPO / "docs" / "architecture.md"
RECIPES = ("## Recipe: add an SLO kind", "## Recipe: add an importer", "## Recipe: add a console pane")


def named_paths(text: str) -> list[str]:
    """The repository paths in backticks: ``tui/...``, ``tests/...``, ``docs/...`` and the top-level files; a
    placeholder (``<tool>``) is a pattern, not a path."""
    out = []
    for token in re.findall(r"`([^`\s]+)`", text):
        if "<" in token or "*" in token:
            continue
        if token.startswith(("tui/", "tests/", "docs/", "bench/")) or token in ("README.md", "pyproject.toml"):
            out.append(token.rstrip("/"))
    return out


def missing(paths: list[str]) -> list[str]:
    return [p for p in paths if not ((REPO / p).exists() or (REPO / f"{p}.py").is_file())]


def test_every_file_the_architecture_page_names_exists():
    paths = named_paths(DOC.read_text(encoding="utf-8"))
    assert len(paths) >= 40  # the story and the recipes name files, not only ideas
    assert missing(paths) == []


def test_the_page_has_the_story_and_the_three_recipes_each_naming_files():
    text = DOC.read_text(encoding="utf-8")
    assert "## The story of one record" in text
    for i, heading in enumerate(RECIPES):
        start = text.index(heading)
        end = text.index(RECIPES[i + 1]) if i + 1 < len(RECIPES) else len(text)
        assert len(named_paths(text[start:end])) >= 5, heading


def test_a_renamed_file_is_caught():
    assert missing(["tui/core/snapshot.py", "tui/core/monitor", "tui/core/no_such_module.py", "docs/nope.md"]) == [
        "tui/core/no_such_module.py", "docs/nope.md"]
