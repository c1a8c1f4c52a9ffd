"""Where things are: the repository root and the tests folder (the test files live at different depths)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
