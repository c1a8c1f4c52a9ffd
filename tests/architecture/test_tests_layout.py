"""tests/unit mirrors the package's folders (issue 38): each folder under tests/unit is a package folder under tui/
(``tests/unit/core/importers`` tests ``tui/core/importers``), and a test module named after a subpackage
(``test_quality_suite.py``, ``test_records.py``) lives in that subpackage's folder, so the tests of one part are
found in one place."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import REPO

UNIT = REPO / "tests" / "unit"
TUI = REPO / "tui"


def _test_folders() -> list[Path]:
    return sorted({p.parent for p in UNIT.rglob("test_*.py")})


def misplaced(files: list[Path]) -> list[str]:
    """Test modules (paths relative to tests/unit) whose folder is not a tui package, or that are named after a
    subpackage of their folder's package without living in it."""
    out = []
    for rel in files:
        pkg = TUI / rel.parent
        if not (pkg / "__init__.py").is_file():
            out.append(f"tests/unit/{rel}: tui/{rel.parent} is not a package")
            continue
        stem = rel.stem.removeprefix("test_")
        for sub in sorted(p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()):
            if stem == sub or stem.startswith(sub + "_"):
                out.append(f"tests/unit/{rel}: tests tui/{rel.parent}/{sub}, belongs in tests/unit/{rel.parent}/{sub}/")
    return out


def test_every_unit_test_folder_is_a_package_folder_and_has_its_init():
    folders = _test_folders()
    assert {f.relative_to(UNIT).as_posix() for f in folders} >= {"core", "sources", "core/importers", "sources/load"}
    for folder in folders:
        assert (folder / "__init__.py").is_file(), folder
    assert misplaced([p.relative_to(UNIT) for p in UNIT.rglob("test_*.py")]) == []


def test_a_misplaced_test_module_is_caught():
    assert misplaced([Path("core/test_quality_new.py"), Path("core/nowhere/test_x.py"),
                      Path("core/quality/test_quality_new.py"), Path("sources/test_load_x.py")]) == [
        "tests/unit/core/test_quality_new.py: tests tui/core/quality, belongs in tests/unit/core/quality/",
        "tests/unit/core/nowhere/test_x.py: tui/core/nowhere is not a package",
        "tests/unit/sources/test_load_x.py: tests tui/sources/load, belongs in tests/unit/sources/load/",
    ]
