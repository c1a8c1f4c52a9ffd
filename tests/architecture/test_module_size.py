"""No module in tui/ over 700 lines, except tui/core/monitor.py (its hot path is measured as one piece: see
bench/bench_report.py). A module that grows past the limit is split along the seams its docstring names."""

from __future__ import annotations

from tests.support.paths import REPO

LIMIT = 700
EXEMPT: set[str] = set()


def test_no_module_in_tui_is_over_700_lines():
    too_big = []
    for path in sorted((REPO / "tui").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > LIMIT and rel not in EXEMPT:
            too_big.append(f"{rel}: {n} lines (limit {LIMIT})")
    assert not too_big, "\n".join(too_big)


def test_the_exemption_names_a_file_that_exists():
    for rel in EXEMPT:
        assert (REPO / rel).is_file(), f"{rel} is exempt from the size limit but does not exist"
