"""A whole-file read for a document keeps none of the console's views (``Monitor(views=False)``: the recent rows,
the rolling window, the sparkline series; issue 38's hot path): the report it gives is the one a console's Monitor
gives for the same records, byte for byte, and its snapshot says the rolling window was not kept."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tui.core.monitor import Monitor, MonitorConfig
from tui.core.monitor.view import VIEWS_NOT_KEPT
from tui.core.records import read_file
from tui.core.report import report_at_settings

SAMPLES = Path(__file__).resolve().parents[4] / "sample_logs"
CONSOLE_ONLY = {"rolling", "recent", "good_series", "p95_series"}


@pytest.mark.parametrize("name", ["default.jsonl", "seed.jsonl"])
def test_a_document_read_gives_the_console_monitors_report(name: str) -> None:
    items = list(read_file(str(SAMPLES / name)))
    mons = []
    for views in (True, False):
        m = Monitor(MonitorConfig(), source=name, views=views)
        for i in range(0, len(items), 97):  # batches cut anywhere
            m.add_many(items[i:i + 97])
        mons.append(m)
    full, lean = (m.snapshot() for m in mons)
    for f in dataclasses.fields(full):
        if f.name not in CONSOLE_ONLY:
            assert getattr(full, f.name) == getattr(lean, f.name), f.name
    assert full.recent and full.good_series and full.rolling.good.n > 0  # the console's Monitor keeps them
    assert lean.recent == () and lean.good_series == () and lean.p95_series == ()
    assert lean.rolling.label == VIEWS_NOT_KEPT and lean.rolling.good.n == 0
    docs = [json.dumps(report_at_settings(s, None)[0], sort_keys=True, default=str) for s in (full, lean)]
    assert docs[0] == docs[1]
