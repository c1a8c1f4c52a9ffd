"""SVG snapshot tests of the console (pytest-textual-snapshot).

The run is generated here from a fixed seed, so the baselines depend on neither the
bundled sample logs nor the wall clock: the replay goes at max speed to the end, and the
screenshot is taken once the panes show the final snapshot (elapsed comes from record time).

Regenerate after an intended UI change with:
    PYTHONPATH=$PWD python3 -m pytest tests/console/test_snapshots.py --snapshot-update
and look at the SVGs under tests/console/__snapshots__/ before committing them.
"""

from __future__ import annotations

import random
import time

import pytest

from tests.console.test_app import write_sweep_run
from tui.app import build_app
from tui.core.budget import teaching_case
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord, dumps, request_to_dict, run_header
from tui.sources.base import MonitorSink
from tui.sources.replay import ReplaySource
from tui.theming import BUNDLED_THEMES

GIB = 2**30
DEADLINE_S = 20.0


def demo_lines(n: int = 600, seed: int = 7, level: int = 8, t0: float = 1_767_225_600.0) -> list[str]:
    """A synthetic closed-loop run at one level: warmup, drift to slower TTFT, some failures,
    queue and GPU samples, and two malformed lines."""
    rng = random.Random(seed)
    out = [dumps(run_header(synthetic=True, started_at=t0, target={"url": "http://127.0.0.1:8080", "model": "demo"},
                            load={"mode": "closed", "levels": [level]}, tool_version="0.1.0"))]
    out.append(dumps({"type": "step", "t": t0, "event": "start", "level": level, "round": 1, "mode": "closed"}))
    t = t0
    for i in range(n):
        t += rng.uniform(0.2, 0.8)
        ttft = rng.lognormvariate(-0.9, 0.45) * (1.6 if i > n * 0.6 else 1.0)
        fail = rng.random() < 0.02
        no_token = fail and rng.random() < 0.5
        dur = ttft + rng.uniform(0.5, 2.0)
        t_first = None if no_token else round(t + ttft, 3)
        t_end = round(t + dur, 3)
        rec = RequestRecord(
            id=f"req-{i:05d}", t_sent=round(t, 3), t_end=t_end, complete=not fail, t_intended=round(t, 3),
            t_first_token=t_first, output_tokens=rng.randint(20, 200),
            finish_reason=None if fail else "stop", http_status=200,
            error=rng.choice(["read_timeout", "http_5xx", "stream_reset"]) if fail else None,
            phase="warmup" if i < 10 else "measure", level=level, round=1,
        )
        out.append(dumps(request_to_dict(rec)))
        if i % 3 == 0:
            out.append(dumps({"type": "queue", "t": round(t, 3), "source": "prometheus",
                              "waiting": rng.randint(0, 6) + (4 if i > n * 0.6 else 0), "running": rng.randint(6, 8),
                              "kv_cache_usage": round(0.3 + 0.4 * i / n, 3), "client_in_flight": level}))
            out.append(dumps({"type": "gpu", "t": round(t, 3), "device": 0, "name": "NVIDIA L4 (synthetic)",
                              "memory_used": int((15.2 + 1.5 * i / n) * GIB), "memory_total": 24 * GIB,
                              "utilization": round(60 + 30 * i / n, 1)}))
        if i == 40:
            out.append("{not json at all\n")
        if i == 90:
            out.append('{"type":"request","id":"broken"}\n')
    return out


@pytest.fixture
def demo_file(tmp_path):
    p = tmp_path / "demo-run.jsonl"
    p.write_text("".join(demo_lines()))
    return p


def demo_app(path, theme: str = "dark", label: str = "demo-run.jsonl", cfg: MonitorConfig | None = None):
    src = ReplaySource(path, max_speed=True, label=label, poll_interval=0.02)
    budget = teaching_case()
    sink = MonitorSink(Monitor(cfg or MonitorConfig(), budget=budget, source=src.label))
    app = build_app(src, sink, budget, theme=theme)
    return app, src, sink


def until_final(src, sink):
    async def run_before(pilot) -> None:
        app = pilot.app
        deadline = time.monotonic() + DEADLINE_S
        while not (src.finished and app.console_screen.last_seq == sink.snapshot().seq):
            if time.monotonic() > deadline:
                raise AssertionError("replay did not finish in time")
            await pilot.pause(0.02)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("theme", BUNDLED_THEMES)
def test_main_screen(snap_compare, demo_file, theme):
    app, src, sink = demo_app(demo_file, theme)
    assert snap_compare(app, terminal_size=(120, 40), run_before=until_final(src, sink))


def test_help_screen(snap_compare, demo_file):
    app, src, sink = demo_app(demo_file)
    assert snap_compare(app, press=["question_mark"], terminal_size=(120, 40), run_before=until_final(src, sink))


def test_small_terminal(snap_compare, demo_file):
    """80x24: two columns that scroll; the verdict with its reason, budget, quality and every key stay."""
    app, src, sink = demo_app(demo_file)
    assert snap_compare(app, terminal_size=(80, 24), run_before=until_final(src, sink))


def test_small_terminal_insufficient_window(snap_compare, tmp_path):
    """80x24 with what is missing: the statuses take a line of their own rather than falling off."""
    p = tmp_path / "short-run.jsonl"
    p.write_text("".join(demo_lines(n=60)))
    app, src, sink = demo_app(p, label="short-run.jsonl")
    assert snap_compare(app, terminal_size=(80, 24), run_before=until_final(src, sink))


def test_large_terminal(snap_compare, demo_file):
    """200x60: the budget over the whole height (no scrolling), the request list beside it."""
    app, src, sink = demo_app(demo_file)
    assert snap_compare(app, terminal_size=(200, 60), run_before=until_final(src, sink))


def test_large_terminal_sweep(snap_compare, tmp_path):
    """200x60 with a ramp: the sweep pane under the budget's two rows."""
    path = write_sweep_run(tmp_path / "ramp.jsonl")
    app, src, sink = demo_app(path, label="ramp.jsonl", cfg=MonitorConfig(min_window_s=0.0))
    assert snap_compare(app, terminal_size=(200, 60), run_before=until_final(src, sink))


def test_sweep_maximised(snap_compare, tmp_path):
    """7 at 120x40 on a ramp still inside its window: every verdict spelled out in full."""
    path = write_sweep_run(tmp_path / "ramp.jsonl")
    app, src, sink = demo_app(path, label="ramp.jsonl")
    assert snap_compare(app, press=["7"], terminal_size=(120, 40), run_before=until_final(src, sink))


def test_live_footer(snap_compare, tmp_path):
    """A live source: the footer has no replay keys."""
    from tests.console.test_app import _FixedSink, _StaticSource, _verdict_snapshot

    app = build_app(_StaticSource(), _FixedSink(_verdict_snapshot()), teaching_case())
    assert snap_compare(app, terminal_size=(120, 40))


def test_sweep_view(snap_compare, tmp_path):
    """A ramp over levels 1, 2, 4, 8: the Sweep pane (7) under the budget, with the target line, the
    measured capacity (4) and the memory-only candidate (15, beyond the levels tested)."""
    path = write_sweep_run(tmp_path / "ramp.jsonl")
    app, src, sink = demo_app(path, label="ramp.jsonl", cfg=MonitorConfig(min_window_s=0.0))
    assert snap_compare(app, terminal_size=(120, 40), run_before=until_final(src, sink))
