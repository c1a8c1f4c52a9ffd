"""The cases-needed tables in quality/README.md and docs/acceptance.md are the code's (tui.core.quality.sizing),
and the all-concordant figure is the verdict's own pairs_needed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tui.core import quality as Q
from tui.core.quality.sizing import cases_needed, cases_needed_table

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("update_quality_docs", ROOT / "tools" / "update_quality_docs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_carry_the_computed_table():
    tool, table = _tool(), cases_needed_table()
    for f in tool.FILES:
        text = f.read_text(encoding="utf-8")
        assert tool.rendered(text, table) == text, f"{f}: run python3 tools/update_quality_docs.py"


def test_sizing_agrees_with_the_verdict():
    assert cases_needed(0.05) == Q.pairs_needed(0.05, 0.05) == 59
    assert cases_needed(0.05, discordance=0.10) > cases_needed(0.05, discordance=0.05) > 59
    assert cases_needed(0.10) < 59
