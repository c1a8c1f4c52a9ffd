"""`report` of a file that is not a drill's never imports the drill's judgement nor the load generator (issue 38's
hot path: that import was a tenth of a 300k-record report's time); a drill's file still gets the drill's report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import io, sys
from tui.cli import settings_of
from tui.cli.reporting import run_report
rc = run_report(settings_of(["report", sys.argv[1]]), out=io.StringIO())
print(rc, sorted(m for m in ("tui.core.drill", "tui.cli.drillopts", "tui.sources.load", "httpx") if m in sys.modules))
"""


@pytest.mark.slow
def test_report_of_a_plain_file_imports_no_drill_and_no_load_generator() -> None:
    out = subprocess.run([sys.executable, "-c", CODE, str(ROOT / "sample_logs" / "default.jsonl")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out[1:] == ["[]"], out
