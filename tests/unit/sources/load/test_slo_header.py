"""The load generator's run header records every SLO in force and which TTFT is judged (not only ttft_ms)."""

from __future__ import annotations

import pytest

from tests.support.fault_server import closed_port
from tui.core.slos import Slos, from_header_block
from tui.sources.load.config import LoadConfig, monitor_config
from tui.sources.load.generator import LoadGenerator

# every test here starts a process or a listening server (tests/conftest.py checks it)
pytestmark = pytest.mark.slow


def _header(slos: Slos | None) -> dict:
    cfg = LoadConfig(url=f"http://127.0.0.1:{closed_port()}", levels=[1], requests=1, metrics=False, gpu=False,
                     progress_interval=0, api_key_env=None, model="m", monitor=monitor_config(slos=slos))
    return LoadGenerator(cfg, lambda d: None).header(None)


def test_the_run_header_slo_block_names_every_slo_in_force():
    s = Slos(ttft_ms=800, tpot_ms=50, itl_ms=300, ttft_of="any")
    blk = _header(s)["slo"]
    assert blk["in_force"] == ["TTFT", "TPOT", "ITL"] and blk["ttft_of"] == "any"
    assert (blk["ttft_ms"], blk["tpot_ms"], blk["itl_ms"], blk["e2e_ms"], blk["target"]) == (800, 50, 300, None, 0.95)
    assert blk["text"] == "TTFT <= 800 ms (any), TPOT <= 50 ms, ITL <= 300 ms"
    assert from_header_block(blk) == s


def test_the_default_header_keeps_ttft_ms_for_older_readers():
    blk = _header(None)["slo"]
    assert blk["ttft_ms"] == 1000.0 and blk["in_force"] == ["TTFT"] and blk["ttft_of"] == "answer"
