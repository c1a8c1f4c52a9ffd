"""Pilot tests of the console: what it shows, every key, the replay controls, follow mode.

Waiting is always "poll a condition with a bounded deadline" through ``pilot.pause``.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.paths import REPO
from tui.app import ServewatchApp, build_app
from tui.core.budget import teaching_case
from tui.core.budgetview import ORIGIN_TEACHING
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord, dumps, request_to_dict, run_header
from tui.screens.help import HelpScreen
from tui.sources.base import MonitorSink
from tui.sources.replay import ReplaySource
from tui.widgets import fmt
from tui.widgets.bars import HeaderBar, VerdictBar
from tui.widgets.requests import RequestList

REPO = REPO
SEED = REPO / "sample_logs" / "seed.jsonl"
SIZE = (120, 40)
DEADLINE_S = 15.0

SEED_TEXT = (
    '{"type":"run","schema":"servewatch.record/1","schema_version":1,"synthetic":true,"started_at":0}\n'
    '{"type":"request","id":"seed-1","t_sent":1767225600.0,"t_first_token":1767225600.4,"t_end":1767225601.4,"complete":true,"output_tokens":64}\n'
    '{"type":"request","id":"seed-2","t_sent":1767225602.0,"t_first_token":1767225602.8,"t_end":1767225603.8,"complete":true,"output_tokens":64}\n'
    '{"type":"request","id":"seed-3","t_sent":1767225604.0,"t_first_token":1767225605.2,"t_end":1767225606.2,"complete":true,"output_tokens":64}\n'
    '{"type":"request","id":"seed-4","t_sent":1767225606.0,"t_first_token":1767225606.3,"t_end":1767225606.3,"complete":false,'
    '"error":"stream_reset","output_tokens":1}\n'
)


@pytest.fixture
def seed_path(tmp_path) -> Path:
    """The bundled seed log; the same content in a tmp file if it is not there."""
    if SEED.is_file():
        return SEED
    p = tmp_path / "seed.jsonl"
    p.write_text(SEED_TEXT)
    return p


def make_app(path, *, tmp_path=None, budget="teaching", cfg=None, **src_kw) -> tuple[ServewatchApp, ReplaySource, MonitorSink]:
    src_kw.setdefault("poll_interval", 0.02)
    src = ReplaySource(path, **src_kw)
    b = teaching_case() if budget == "teaching" else budget
    sink = MonitorSink(Monitor(cfg or MonitorConfig(), budget=b, source=src.label))
    app = build_app(src, sink, b, export_dir=(tmp_path / "exports") if tmp_path else "exports")
    return app, src, sink


async def wait_for(pilot, pred, what: str = "condition", timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def settled(pilot, app: ServewatchApp, src: ReplaySource, sink: MonitorSink) -> None:
    """Wait until the replay finished and the panes show the final snapshot."""
    await wait_for(pilot, lambda: src.finished and app.console_screen.last_seq == sink.snapshot().seq, "replay to finish and render")


def screen_text(app) -> str:
    """The screen as plain text (what a user would read)."""
    console = Console(width=app.size.width, file=io.StringIO(), record=True, force_terminal=True, color_system=None)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


T0 = 1_767_225_600.0  # record times are wall-clock epoch seconds: req_line's t_end is an offset from T0


def req_line(i: int, t_end: float, ttft: float = 0.3, ok: bool = True, **kw) -> str:
    t_end += T0
    t_sent = t_end - 1.0
    r = RequestRecord(id=f"r{i}", t_sent=t_sent, t_end=t_end, complete=ok, t_intended=t_sent,
                      t_first_token=t_sent + ttft, output_tokens=10, error=None if ok else "http_5xx", **kw)
    return dumps(request_to_dict(r))


def write_run(path: Path, times, synthetic: bool = True, extra: list[str] | None = None) -> Path:
    lines = [dumps(run_header(synthetic=synthetic, started_at=0.0))]
    lines += [req_line(i, t) for i, t in enumerate(times)]
    lines += extra or []
    path.write_text("".join(lines))
    return path


# ----------------------------------------------------------------------------- what it shows


async def test_seed_replay_shows_half_good_insufficient_window_and_synthetic(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        text = screen_text(app)
        assert "50.0%" in text
        assert "INSUFFICIENT WINDOW" in text
        assert "SYNTHETIC" in text
        assert "need " in text and "more requests" in text  # what is missing
        assert "budget: feasible (teaching case)" in text  # the teaching case is labelled (issue 9)
        assert "quality: not run" in text
        assert "The candidate is a number to test," in text and "not a limit." in text
        assert "The candidate is a number to test, not a limit." in app.query_one("#budget-text").visual.plain.replace("\n", " ")
        assert "no GPU telemetry" in text
        assert "N/A" in text  # queue pane without a server metrics source
        assert "stream_reset" in text  # failed request with its error class
        assert "REPLAY max" in text and "elapsed 0:00:06" in text  # record time, not wall clock
        assert app.query_one(RequestList).row_count == 4


async def test_budget_pane_lists_variants_and_assumptions(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        budget_text = app.query_one("#budget-text").visual.plain
        for needle in ("weights", "runtime margin", "KV per sequence", "cache budget", "memory-only candidate",
                       "context x2", "4-bit weights", "fp8 KV cache", "Not measured", "activation peak not measured"):
            assert needle in budget_text, needle


async def test_budget_that_does_not_fit_and_no_budget(seed_path):
    from tui.core.budget import BudgetInputs, compute_budget

    too_small = compute_budget(BudgetInputs(gpu_gib=12.0))
    assert not too_small.fits
    app, src, sink = make_app(seed_path, max_speed=True, budget=too_small)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        assert "budget: does not fit" in app.query_one(VerdictBar).visual.plain
        assert "does not fit" in app.query_one("#budget-text").visual.plain
    app, src, sink = make_app(seed_path, max_speed=True, budget=None)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        assert "budget: unknown" in app.query_one(VerdictBar).visual.plain
        assert "budget unknown" in app.query_one("#budget-text").visual.plain
        assert "--config" in app.query_one("#budget-text").visual.plain  # the flags that would give one
        assert "N/A" in app.query_one("#gpu-text").visual.plain  # no predicted figures without a budget


async def test_malformed_lines_are_counted_with_file_and_line(tmp_path):
    p = write_run(tmp_path / "bad.jsonl", [1.0, 2.0], extra=["garbage line\n", '{"type":"request"}\n'])
    app, src, sink = make_app(p, max_speed=True, label="bad.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        bar = app.query_one(VerdictBar).visual.plain
        assert "2 malformed" in bar
        assert "bad.jsonl:4:" in bar and "bad.jsonl:5:" in bar


async def test_gpu_and_queue_panes_show_telemetry_when_present(tmp_path):
    extra = [
        dumps({"type": "gpu", "t": 2.0, "device": 0, "name": "TestGPU", "memory_used": 18 * 2**30,
               "memory_total": 24 * 2**30, "utilization": 50}),
        dumps({"type": "queue", "t": 2.0, "source": "prometheus", "waiting": 3, "running": 7,
               "kv_cache_usage": 0.42, "client_in_flight": 8}),
    ]
    p = write_run(tmp_path / "tele.jsonl", [1.0, 2.0], extra=extra)
    app, src, sink = make_app(p, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        gpu = app.query_one("#gpu-text").visual.plain
        assert "GPU0 TestGPU" in gpu and "18.0 GiB / 24.0 GiB" in gpu
        assert "ceiling" in gpu and "24.0 GiB" in gpu
        queue = app.query_one("#queue-text").visual.plain
        assert "waiting" in queue and "3" in queue and "42%" in queue and "in-flight" in queue


async def test_queue_pane_shows_the_prefix_cache_line_the_monitor_computed(tmp_path):
    """Issue 23: records saying cached tokens give the queue pane a prefix-cache line (the Monitor's text); records
    that say nothing give none (the report says "unknown")."""
    lines = [dumps(run_header(synthetic=True, started_at=0.0))]
    lines += [req_line(i, float(i + 1), input_tokens=200, cached_tokens=150 if i else 0,
                       cached_tokens_source="llama.cpp timings.cache_n") for i in range(4)]
    p = tmp_path / "cache.jsonl"
    p.write_text("".join(lines))
    app, src, sink = make_app(p, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        queue = app.query_one("#queue-text").visual.plain
        assert "prefix cache 56% of prompt tokens (4/4 req said)" in queue, queue  # 450 of 800
    app, src, sink = make_app(write_run(tmp_path / "plain.jsonl", [1.0, 2.0]), max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        assert "prefix cache" not in app.query_one("#queue-text").visual.plain


async def test_updates_only_when_the_snapshot_changes(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        before = app.console_screen.pane_updates
        app.console_screen.tick()
        app.console_screen.tick()
        assert app.console_screen.pane_updates == before
        app.console_screen.tick(force=True)
        assert app.console_screen.pane_updates == before + 1


class _FixedSink:
    """Hands out one hand-made Snapshot (no Monitor involved)."""

    def __init__(self, snap) -> None:
        self.snap = snap

    def snapshot(self):
        return self.snap


def _hand_made_snapshot():
    from dataclasses import replace

    from tui.core.snapshot import GpuDevice, GpuState, Percentile, QueueState

    base = Monitor(MonitorConfig()).snapshot()
    approx = tuple(Percentile(q, v, 5000, True, 10, approximate=True) for q, v in ((0.5, 310.0), (0.95, 870.0), (0.99, float("inf"))))
    cumulative = replace(base.cumulative, ttft=approx, completed=5000)
    gpu = GpuState(
        available=True,
        devices=(
            GpuDevice(0, "GPU-A", 20.5, 24.0, 97.0, 21.0, (18.0, 19.0, 20.5), "warn"),
            GpuDevice(1, None, None, None, None, None, (), "na"),
        ),
        predicted_gib=19.0, ceiling_gib=24.0, gpu_gib=24.0,
    )
    queue = QueueState(source="http://127.0.0.1:8080/metrics", waiting=None, running=4.0, kv_cache_usage=None,
                       client_in_flight=None, running_series=(1.0, 2.0, 4.0))
    return replace(base, seq=7, synthetic=False, cumulative=cumulative, gpu=gpu, queue=queue, malformed=1,
                   malformed_examples=("x.jsonl:3: invalid JSON [bold]not markup[/]",))


async def test_hand_made_snapshot_edge_cases_render(tmp_path):
    snap = _hand_made_snapshot()
    app = ServewatchApp(_StaticSource(), _FixedSink(snap), None, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        gpu = app.query_one("#gpu-text").visual.plain
        assert "GPU0 GPU-A" in gpu and "20.5 GiB / 24.0 GiB" in gpu and "util 97%" in gpu
        assert "GPU1" in gpu and "used N/A" in gpu
        ttft = app.query_one("#ttft-text").visual.plain
        assert "≈310 ms" in ttft and "inf" in ttft and "streaming sketch" in ttft
        queue = app.query_one("#queue-text").visual.plain
        assert "running" in queue and "KV cache N/A" in queue and "client in-flight N/A" in queue
        bar = app.query_one(VerdictBar).visual.plain
        assert "[bold]not markup[/]" in bar, "outside text is escaped, never interpreted as markup"
        assert "SYNTHETIC" not in app.query_one(HeaderBar).visual.plain
        svg, js = app.console_screen.export()
        doc = json.loads(js.read_text())
        assert doc["snapshot"]["cumulative"]["ttft"][2]["value_ms"] == "inf"


# ----------------------------------------------------------------------------- keys


async def test_q_quits_with_the_verdict_exit_code(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_value is not None, "exit")
    assert app.return_value == 3  # INSUFFICIENT_WINDOW
    assert not src._thread.is_alive()


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_help_opens_and_closes(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        for open_key, close_key in (("question_mark", "question_mark"), ("f1", "f1"), ("question_mark", "escape")):
            await pilot.press(open_key)
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), f"help screen via {open_key}")
            text = app.screen.query_one("#help-text").visual.plain
            assert "INSUFFICIENT WINDOW" in text and "UNDECIDED" in text and "PASS" in text and "FAIL" in text
            assert "green" in text and "yellow" in text and "red" in text
            assert "Insufficient window, in two sentences" in text
            assert "1-7 maximise a pane" in text and "7 Sweep" in text and "◆ the memory-only candidate" in text
            await pilot.press(close_key)
            await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), f"help closed by {close_key}")


@pytest.mark.parametrize("key", ["p", "space"])
async def test_pause_key_pauses_and_resumes_the_replay(tmp_path, key):
    p = write_run(tmp_path / "slow.jsonl", [10.0, 3610.0, 7210.0])  # an hour of record time apart
    app, src, sink = make_app(p)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.console_screen.snapshot is not None and app.console_screen.snapshot.requests_total == 1)
        await pilot.press(key)
        assert src.paused
        assert "PAUSED" in app.query_one(HeaderBar).visual.plain
        await pilot.press(key)
        assert not src.paused
        assert "REPLAY x1" in app.query_one(HeaderBar).visual.plain


async def test_plus_and_minus_change_replay_speed(tmp_path):
    p = write_run(tmp_path / "slow.jsonl", [10.0, 3610.0])
    app, src, sink = make_app(p)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        await pilot.press("plus")
        assert src.speed == 4.0
        assert "REPLAY x4" in app.query_one(HeaderBar).visual.plain
        await pilot.press("minus")
        assert src.speed == 2.0
        assert "REPLAY x2" in app.query_one(HeaderBar).visual.plain


async def test_step_keys_and_jump_to_end(tmp_path):
    # requests at 10, 3610, 3610.5, 7210, 7211: an hour apart, so nothing arrives by itself
    p = write_run(tmp_path / "steps.jsonl", [10.0, 3610.0, 3610.5, 7210.0, 7211.0])
    app, src, sink = make_app(p)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.console_screen.snapshot is not None and app.console_screen.snapshot.requests_total == 1)
        await pilot.press("s")
        await wait_for(pilot, lambda: app.console_screen.snapshot.requests_total == 2, "one stepped record")
        assert src.paused and "PAUSED" in app.query_one(HeaderBar).visual.plain
        await pilot.press("S")  # one second of record time from 3610: brings 3610.5
        await wait_for(pilot, lambda: app.console_screen.snapshot.requests_total == 3, "one second of records")
        await pilot.press("e")
        await wait_for(pilot, lambda: app.console_screen.snapshot.requests_total == 5 and src.finished, "jump to end")


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@pytest.mark.parametrize("size", [SIZE, (200, 60)])
async def test_number_keys_maximise_and_restore_each_pane(seed_path, size):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=size) as pilot:
        await settled(pilot, app, src, sink)
        for number, pane_id in [(1, "budget"), (2, "requests"), (3, "good"), (4, "ttft"), (5, "queue"), (6, "gpu")]:
            await pilot.press(str(number))
            await pilot.pause()
            visible = [p.id for p in app.console_screen.panes if p.display and p.region.area > 0]
            assert visible == [pane_id]
            pane, verdict = app.query_one(f"#{pane_id}"), app.query_one(VerdictBar)
            assert app.screen.maximized is pane
            assert pane.region.width == size[0], "the full width"
            assert pane.region.y == app.query_one(HeaderBar).region.bottom and pane.region.bottom == verdict.region.y, \
                "all the height between the header and the verdict bar"
            assert verdict.region.height >= 2, "the verdict bar stays visible"
            await pilot.press(str(number))
            await pilot.pause()
            assert len([p for p in app.console_screen.panes if p.region.area > 0]) == 6
            assert app.screen.maximized is None
        # another number while one pane is maximised switches straight to that pane
        await pilot.press("1")
        await pilot.press("4")
        await pilot.pause()
        assert [p.id for p in app.console_screen.panes if p.display and p.region.area > 0] == ["ttft"]
        # the maximised TTFT pane is wide enough to spell "insufficient n" beside the value
        assert "insufficient n" in app.query_one("#ttft-text").visual.plain


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_t_cycles_themes(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "dark"
        seen = []
        for _ in range(3):
            await pilot.press("t")
            seen.append(app.theme)
        assert seen == ["light", "high-contrast", "dark"]
        await pilot.press("t")
        await pilot.pause()
        # the request list re-resolves its colours from the new theme's variables
        from textual.color import Color

        good = app.query_one(RequestList)._resolve_styles()["sw-good"].color
        assert Color.from_rich_color(good) == Color.parse(app.theme_variables["sw-good"])


async def test_ctrl_s_exports_svg_and_json(seed_path, tmp_path):
    app, src, sink = make_app(seed_path, max_speed=True, tmp_path=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(app.console_screen.exports) == 1, "export")
        svg, js = app.console_screen.exports[0]
        assert svg.parent == tmp_path / "exports" and svg.suffix == ".svg"
        assert "<svg" in svg.read_text()[:500]
        doc = json.loads(js.read_text())
        assert doc["synthetic"] is True
        snap = doc["snapshot"]
        assert snap["requests_total"] == 4 and snap["rolling"]["good"]["fraction"] == 0.5
        assert snap["verdict"]["state"] == "INSUFFICIENT_WINDOW"
        assert doc["budget"]["results"]["candidate"] == 15
        messages = [n.message for n in app._notifications]
        assert any(svg.name in m and js.name in m for m in messages), messages


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_command_palette_runs_our_commands(tmp_path):
    p = write_run(tmp_path / "slow.jsonl", [10.0, 3610.0, 7210.0])
    app, src, sink = make_app(p)
    async with app.run_test(size=SIZE) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for t in ("Pause / resume", "Replay faster", "Replay slower", "Step one record", "Jump to end",
                  "Next theme", "Export", "Help", "Maximise Budget", "Maximise GPU memory", "Maximise Sweep"):
            assert t in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Jump to end")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.console_screen.snapshot is not None and app.console_screen.snapshot.requests_total == 3, "jump via palette")


# ----------------------------------------------------------------------------- requests pane


class _StaticSource:
    """A live-like source that produces nothing by itself (the test feeds the monitor)."""

    label = "test://live"
    mode = "LIVE"
    status = ""  # the header shows the mode
    finished = False
    in_flight: int | None = None
    controls = None  # live: no replay keys

    def __init__(self) -> None:
        self.notices: list[str] = []

    def start(self, sink) -> None:
        pass

    def stop(self, timeout: float = 1.0) -> None:
        pass


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_requests_pane_caps_rows_and_keeps_the_readers_place():
    monitor = Monitor(MonitorConfig(recent_rows=500))
    sink = MonitorSink(monitor)
    app = ServewatchApp(_StaticSource(), sink, None)
    from tui.core.records import parse_line

    def feed(start: int, n: int) -> None:
        sink([parse_line(req_line(i, 10.0 + i)) for i in range(start, start + n)])

    def ids(lst: RequestList) -> list[str]:
        return [r.id for r in lst.rows]

    async with app.run_test(size=SIZE) as pilot:
        lst = app.query_one(RequestList)
        feed(0, 100)
        app.console_screen.tick()
        await pilot.pause()
        assert lst.row_count == 100 and lst.at_end()
        lst.scroll_to(y=20, animate=False, immediate=True)
        await pilot.pause()
        assert not lst.at_end()
        first_visible = ids(lst)[int(lst.scroll_y)]
        feed(100, 50)
        app.console_screen.tick()
        await pilot.pause()
        assert lst.row_count == 150
        assert lst.scroll_y == 20, "scrolled back: the stream must not yank the view"
        assert ids(lst)[int(lst.scroll_y)] == first_visible
        feed(150, 100)  # 250 rows, still below the cap
        app.console_screen.tick()
        await pilot.pause()
        assert ids(lst)[int(lst.scroll_y)] == first_visible
        lst.scroll_to(y=200, animate=False, immediate=True)
        await pilot.pause()
        first_visible = ids(lst)[int(lst.scroll_y)]  # r200
        feed(250, 300)  # 550 rows: the 50 oldest are trimmed, the view moves up with its rows
        app.console_screen.tick()
        await pilot.pause()
        assert lst.row_count == 500
        assert ids(lst)[0] == "r50" and ids(lst)[-1] == "r549"
        assert ids(lst)[int(lst.scroll_y)] == first_visible == "r200"
        lst.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        feed(550, 10)
        app.console_screen.tick()
        await pilot.pause()
        assert lst.at_end(), "at the end: new rows keep the view at the end"
        assert ids(lst)[-1] == "r559"
        # what is drawn is the newest rows
        visible = screen_text(app)
        assert "r559" in visible


async def test_live_source_pause_freezes_the_display_and_speed_keys_explain():
    monitor = Monitor()
    sink = MonitorSink(monitor)
    app = ServewatchApp(_StaticSource(), sink, None)
    from tui.core.records import parse_line

    async with app.run_test(size=SIZE) as pilot:
        assert "LIVE" in app.query_one(HeaderBar).visual.plain
        await pilot.press("p")
        assert app.console_screen.display_paused and "PAUSED" in app.query_one(HeaderBar).visual.plain
        sink([parse_line(req_line(1, 5.0))])
        app.console_screen.tick()
        assert app.console_screen.snapshot.requests_total == 0, "display frozen while paused"
        await pilot.press("p")
        assert app.console_screen.snapshot.requests_total == 1
        await pilot.press("plus")
        await pilot.pause()
        assert any("replays only" in n.message for n in app._notifications)


# ----------------------------------------------------------------------------- the sweep view (pane 7)

#: (level, measured requests, good fraction): level 4 at 97% needs ~800 requests before the sequential
#: test can PASS it against the 95% target, so it gets 900; the others get 160 each.
# (level, requests, good fraction[, seconds between requests]): level 4 spans 7.5 minutes, long enough for the
# dependence check (issue 8) to see 30 batches of 15 s and let a 98% level PASS the 95% target.
SWEEP_LEVELS = ((1, 160, 1.0), (2, 160, 1.0), (4, 900, 0.98, 0.5), (8, 160, 0.3))


def write_sweep_run(path: Path, levels=SWEEP_LEVELS, t0: float = 1_767_225_600.0, mode: str = "closed") -> Path:
    """A synthetic closed-loop ramp: a step record per level, requests spread evenly, the slow ones
    (TTFT 2 s against the 1 s SLO) interleaved so every level's good fraction is exactly as given."""
    lines = [dumps(run_header(synthetic=True, started_at=t0,
                              load={"mode": mode, "levels": [lv[0] for lv in levels]}))]
    t = t0
    for lvl, n, frac, *gap in levels:
        # the load each level claims is delivered, and no more: open loop, one request every 1/rate s; closed loop,
        # ``lvl`` slots each sending its next request 1 ms after the previous one ended, a request lasting at least
        # ``lvl`` send gaps (tui.core.evidence)
        gap_s = gap[0] if gap else (1.0 / lvl if mode == "open" else 0.05)
        lines.append(dumps({"type": "step", "t": round(t, 3), "event": "start", "level": lvl, "round": 1,
                            "mode": mode}))
        bad = 1.0 - frac
        slots = [t + (k + 1) * 0.001 for k in range(lvl)]
        recs = []
        for i in range(n):
            slow = int((i + 1) * bad + 1e-9) > int(i * bad + 1e-9)
            ttft = 2.0 if slow else 0.2
            if mode == "closed":
                k = min(range(lvl), key=lambda j: slots[j])  # the slot free first
                t_sent = slots[k]
                dur = max(ttft + 0.3, lvl * gap_s)
                slots[k] = round(t_sent + dur, 3) + 0.001
            else:
                t += gap_s
                t_sent, dur = t, ttft + 0.3
            r = RequestRecord(id=f"c{lvl}-{i:04d}", t_sent=round(t_sent, 3), t_end=round(t_sent + dur, 3),
                              complete=True, t_intended=round(t_sent, 3), t_first_token=round(t_sent + ttft, 3),
                              output_tokens=16, finish_reason="length", level=lvl, round=1, phase="measure")
            recs.append(r)
        if mode == "closed":
            recs.sort(key=lambda r: r.t_end)  # written as they end
            t = max(r.t_end for r in recs)
        lines.extend(dumps(request_to_dict(r)) for r in recs)
        lines.append(dumps({"type": "step", "t": round(t + 2.5, 3), "event": "end", "level": lvl, "round": 1,
                            "mode": mode, "lateness_p99_ms" if mode == "open" else "send_overhead_p99_ms": 0.0}))
    path.write_text("".join(lines))
    return path


def sweep_lines(app) -> list[str]:
    return app.query_one("#sweep-text").visual.plain.splitlines()


def row_of(lines: list[str], level: int) -> str:
    (row,) = [ln for ln in lines if ln.split()[:1] == [str(level)] and "┊" in ln]
    return row


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_sweep_view_shows_levels_target_candidate_and_measured_capacity(tmp_path):
    p = write_sweep_run(tmp_path / "ramp.jsonl")
    app, src, sink = make_app(p, max_speed=True, cfg=MonitorConfig(min_window_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        snap = app.console_screen.snapshot
        states = {r.level: (r.window.good.n, r.verdict.state) for r in snap.levels}
        assert states == {1.0: (160, "PASS"), 2.0: (160, "PASS"), 4.0: (900, "PASS"), 8.0: (160, "FAIL")}
        # the sweep pane is in the grid, under the budget, and the footer offers it
        sweep, budget = app.query_one("#sweep"), app.query_one("#budget")
        assert app.console_screen.sweep_active
        await wait_for(pilot, lambda: sweep.region.area > 0, "the grid laid out with the sweep pane")
        assert sweep.region.x == budget.region.x and sweep.region.y == budget.region.bottom
        assert len([p for p in app.console_screen.panes if p.region.area > 0]) == 7
        text = screen_text(app)
        assert "7 Sweep" in text
        lines = sweep_lines(app)
        assert "┊ target 95%" in lines[0]
        for lvl, pct, word in ((1, "100.0%", "PASS"), (2, "100.0%", "PASS"), (4, "98.0%", "PASS"), (8, "30.0%", "FAIL")):
            row = row_of(lines, lvl)
            assert pct in row and row.rstrip().endswith(word), row
            assert row in text, "the row is on screen, not clipped"
        # every bar is drawn against the same target column
        assert len({row_of(lines, lvl).index("┊") for lvl in (1, 2, 4, 8)}) == 1
        # level axis, lowest first: 1, 2, 4, the measured capacity, 8, then the candidate (beyond the levels tested)
        order = [lines.index(row_of(lines, lvl)) for lvl in (1, 2, 4)]
        cap = next(i for i, ln in enumerate(lines) if "measured capacity 4" in ln)
        cand = next(i for i, ln in enumerate(lines) if "◆ memory-only candidate" in ln)
        assert order == sorted(order) and order[-1] < cap < lines.index(row_of(lines, 8)) < cand
        assert lines[cand].split()[0] == "15"
        assert "measured capacity 4" in text and "15 ◆ memory-only candidate" in text
        # colours: each level's bar and figure take its verdict's theme variable
        from tui.widgets.sweep import sweep_markup

        markup = sweep_markup(snap, 37).splitlines()
        row8 = next(ln for ln in markup if ln.lstrip().startswith("8 "))
        row4 = next(ln for ln in markup if ln.lstrip().startswith("4 "))
        assert "$sw-bad]" in row8 and "$sw-good" not in row8
        assert "$sw-good]" in row4 and "$sw-bad" not in row4
        # 7 maximises the sweep: n, the interval and what limits, from the core
        await pilot.press("7")
        await pilot.pause()
        assert [p.id for p in app.console_screen.panes if p.display and p.region.area > 0] == ["sweep"]
        wide = "\n".join(sweep_lines(app))
        row4 = row_of(sweep_lines(app), 4)
        r4 = next(r for r in snap.levels if r.level == 4.0)
        assert "900" in row4 and fmt.interval(r4.window.good.lo, r4.window.good.hi) in row4
        assert "What limits" in wide and "memory-only candidate (15)" in wide
        await pilot.press("7")
        await pilot.pause()
        assert len([p for p in app.console_screen.panes if p.region.area > 0]) == 7


async def test_sweep_pane_stays_out_of_the_grid_for_one_level(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        assert not app.console_screen.sweep_active
        assert app.query_one("#sweep").region.area == 0
        assert app.query_one("#budget").region.height > 20, "the budget keeps both rows"
        assert "7 Sweep" not in screen_text(app)
        assert "7" in app.active_bindings and app.active_bindings["7"].binding.action == "maximise(7)"
        await pilot.press("7")  # still reachable: says why there is nothing to compare
        await pilot.pause()
        assert [p.id for p in app.console_screen.panes if p.display and p.region.area > 0] == ["sweep"]
        assert "one load level so far" in "\n".join(sweep_lines(app))


async def test_sweep_candidate_between_levels_and_no_budget(tmp_path):
    p = write_sweep_run(tmp_path / "ramp.jsonl", levels=((1, 160, 1.0), (8, 160, 0.99), (32, 160, 0.5)))
    app, src, sink = make_app(p, max_speed=True, cfg=MonitorConfig(min_window_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        lines = sweep_lines(app)
        cand = next(i for i, ln in enumerate(lines) if "◆ memory-only candidate" in ln)
        assert lines.index(row_of(lines, 8)) < cand < lines.index(row_of(lines, 32)), lines
        assert ("not tested" in lines[cand] or "untested" in lines[cand]) and "beyond" not in lines[cand]
        assert any("measured capacity 8" in ln for ln in lines)
    app, src, sink = make_app(p, max_speed=True, budget=None, cfg=MonitorConfig(min_window_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        text = "\n".join(sweep_lines(app))
        assert "◆ candidate N/A (no budget given)" in text and "measured capacity 8" in text


async def test_sweep_in_req_per_s_keeps_the_concurrency_candidate_off_the_axis(tmp_path):
    p = write_sweep_run(tmp_path / "open.jsonl", levels=((1, 160, 1.0), (2, 160, 1.0), (4, 160, 0.5)), mode="open")
    app, src, sink = make_app(p, max_speed=True, cfg=MonitorConfig(min_window_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        assert app.console_screen.sweep_active
        text = "\n".join(sweep_lines(app))
        assert "measured capacity 2 req/s" in text
        assert "◆ memory-only candidate" not in text, "a concurrency is not a point on a req/s axis"
        assert "candidate 15 (a concurrency: not on this req/s" in " ".join(text.split())


# ----------------------------------------------------------------------------- live in-flight


class _InFlightSource(_StaticSource):
    """A live-like source that reports the client's in-flight count, as LiveSource does."""

    in_flight = 5


async def test_live_source_in_flight_reaches_the_queue_pane_every_tick():
    monitor = Monitor()
    sink = MonitorSink(monitor)
    src = _InFlightSource()
    app = ServewatchApp(src, sink, None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "in-flight" in app.query_one("#queue-text").visual.plain, "in-flight shown")
        assert monitor.snapshot().queue.client_in_flight == 5
        assert "5" in app.query_one("#queue-text").visual.plain.split("in-flight")[1]
        seq = sink.snapshot().seq
        src.in_flight = 2  # no new record: the tick alone carries the new figure to the screen
        await wait_for(pilot, lambda: app.console_screen.snapshot.queue.client_in_flight == 2, "in-flight 2 in the snapshot")
        assert sink.snapshot().seq == seq
        assert app.query_one("#queue-text").visual.plain.split("in-flight")[1].split()[0] == "2"


# ----------------------------------------------------------------------------- follow mode


async def test_follow_mode_shows_records_appended_while_running(tmp_path):
    p = write_run(tmp_path / "growing.jsonl", [1.0, 2.0])
    app, src, sink = make_app(p, follow=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.console_screen.snapshot is not None and app.console_screen.snapshot.requests_total == 2 and src.caught_up)
        with open(p, "a", encoding="utf-8") as fh:
            fh.write(req_line(10, 3.0) + req_line(11, 4.0, ok=False))
        await wait_for(pilot, lambda: app.console_screen.snapshot.requests_total == 4, "appended records on screen")
        assert [r.id for r in app.query_one(RequestList).rows][-2:] == ["r10", "r11"]
        assert "following" in app.query_one(HeaderBar).visual.plain


# ----------------------------------------------------------------------------- small terminals


async def test_degrades_to_80x24(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app, src, sink)
        assert app.screen.has_class("-narrow", "-short")  # the breakpoint classes on the console screen
        text = screen_text(app)
        assert "INSUFFICIENT WINDOW" in text and "SYNTHETIC" in text
        assert app.query_one(VerdictBar).region.y + app.query_one(VerdictBar).region.height <= 24


# ----------------------------------------------------------------------------- CLI glue


def test_replay_arguments_parse_and_bad_file_exits_2(tmp_path, capsys):
    from tui.cli import UsageError, build_parser, settings_of
    from tui.cli.replay import run

    args = settings_of(["replay", str(tmp_path / "missing.jsonl"), "--speed", "4", "--theme", "light",
                        "--slo-ttft-ms", "500", "--target", "0.9", "--rolling-requests", "200",
                        "--min-window-minutes", "2", "--gpu-gib", "80"])
    assert args.speed.speed == 4.0 and args.console.theme == "light"
    cfg = args.acceptance.monitor_config(args.rolling.rolling_seconds, args.rolling.rolling_requests)
    assert (cfg.slos.ttft_ms, cfg.target, cfg.rolling_n, cfg.min_window_s) == (500.0, 0.9, 200, 120.0)
    with pytest.raises(UsageError, match="no such file"):
        run(args)
    with pytest.raises(SystemExit):
        build_parser(only=["replay"]).parse_args(["replay", "f.jsonl", "--speed", "0"])


def test_default_sample_is_found():
    from tui.cli.replay import default_sample_path

    p = default_sample_path()
    assert p is not None and p.name in ("default.jsonl", "seed.jsonl") and p.is_file()


# ----------------------------------------------------------------------------- the console at every size

#: A reason longer than any the core writes today (other wording may come): the layout must cope.
LONG_REASON = ("good fraction 96.1% on 1,204 requests over 11 min: the evidence so far favours PASS against the 95% "
               "target, but the anytime-valid test (alpha 0.05) has not yet crossed its threshold, so keep the run "
               "going; 37 requests were cancelled when the run was stopped")
LONG_MISSING = "need 1,234 more requests, 12 min more, and a second round at this level"


def _verdict_snapshot(state: str = "UNDECIDED", reason: str = LONG_REASON, missing: str = "", header=None):
    from dataclasses import replace

    base = Monitor(MonitorConfig(), budget=teaching_case(), budget_origin=ORIGIN_TEACHING).snapshot()
    verdict = replace(base.verdict, state=state, reason=reason, missing=missing)
    return replace(base, seq=3, verdict=verdict, header={"type": "run"} if header is None else header,
                   requests_total=1)


def footer_keys(app) -> list:
    from textual.widgets._footer import FooterKey

    return list(app.query(FooterKey))


async def footer_ready(pilot, app) -> list:
    """The footer builds its keys after a refresh: wait for them."""
    await wait_for(pilot, lambda: any(k.key_display == "q" and k.region.area > 0 for k in footer_keys(app)),
                   "the footer keys")
    return footer_keys(app)


def fully_on_screen(app, widget) -> bool:
    r = widget.region
    return r.area > 0 and r.x >= 0 and r.right <= app.size.width and r.bottom <= app.size.height


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
@pytest.mark.parametrize("state, missing", [("UNDECIDED", ""), ("INSUFFICIENT_WINDOW", LONG_MISSING)])
async def test_verdict_budget_quality_and_every_key_are_visible_at_every_size(size, state, missing):
    snap = _verdict_snapshot(state, missing=missing)
    app = ServewatchApp(ReplaySource(SEED if SEED.is_file() else "missing.jsonl"), _FixedSink(snap), teaching_case(),
                        start_source=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        text = screen_text(app)
        bar = app.query_one(VerdictBar)
        assert fully_on_screen(app, bar)
        words = fmt.VERDICT_STYLE[state][0]
        assert f" {words} " in text
        flat = " ".join(text.split())
        assert " ".join(LONG_REASON[:60].split()) in flat, "the first 60 characters of the reason"
        if size[1] >= 34:  # two reason lines from 34 rows (today's longest reasons, ~190 characters, fit)
            assert " ".join(LONG_REASON[:200].split()) in flat
        if size[1] >= 50:  # three from 50 rows
            assert " ".join(LONG_REASON.split()) in flat
        assert "budget: feasible (teaching case)" in text and "quality: not run" in text
        if missing and size[0] >= 120:
            assert LONG_MISSING in text
        # every key that applies to a replay is in the footer, and the footer item is wholly on screen
        keys = await footer_ready(pilot, app)
        shown = {k.key_display for k in keys}
        assert {"q", "?", "p", "+", "-", "s", "e", "t", "^s", "^p"} <= shown, shown
        for k in keys:
            assert fully_on_screen(app, k), (k.key_display, k.region)
        # the full reason is one hover away
        assert LONG_REASON in str(bar.tooltip)


#: The longest reason the core writes today (INSUFFICIENT WINDOW, leaning PASS, bursty outcomes).
TODAYS_LONGEST = ("good fraction 96.1% on 1204 requests over 11 min: too few to judge the 95% target honestly. "
                  "Evidence so far favours PASS. Outcomes are bursty (VIF 2.3 > 2): decided on effective n = 523.")


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@pytest.mark.parametrize("size, reason, cut", [((80, 24), TODAYS_LONGEST, True), ((120, 40), TODAYS_LONGEST, False),
                                               ((120, 40), LONG_REASON, True), ((200, 60), LONG_REASON, False)])
async def test_reason_wraps_to_the_lines_the_height_allows_and_says_when_it_is_cut(size, reason, cut):
    app = ServewatchApp(_StaticSource(), _FixedSink(_verdict_snapshot(reason=reason)), None)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        lines = app.query_one(VerdictBar).visual.plain.splitlines()
        first = next(i for i, ln in enumerate(lines) if ln.startswith("good fraction"))
        shown = lines[first:]
        assert all(len(ln) <= size[0] - 2 for ln in lines), lines
        assert len(shown) <= (1 if size[1] < 34 else 2 if size[1] < 50 else 3)
        assert shown[-1].endswith(" …") == cut
        if not cut:
            assert " ".join(shown) == reason


async def test_live_footer_shows_only_keys_that_apply_live():
    app = ServewatchApp(_StaticSource(), MonitorSink(Monitor()), None)
    async with app.run_test(size=SIZE) as pilot:
        shown = {k.key_display for k in await footer_ready(pilot, app)}
        assert {"q", "?", "p", "t", "^s"} <= shown
        assert not shown & {"+", "-", "s", "S", "e"}, shown
        await pilot.press("s")  # a replay key still says why nothing happens
        await pilot.pause()
        assert any("replays only" in n.message for n in app._notifications)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_replay_footer_shows_the_replay_keys(seed_path):
    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        assert {"+", "-", "s", "e"} <= {k.key_display for k in await footer_ready(pilot, app)}


async def test_file_without_a_run_header_says_provenance_unknown(tmp_path):
    p = tmp_path / "bare.jsonl"
    p.write_text("".join(req_line(i, 1.0 + i) for i in range(3)))
    app, src, sink = make_app(p, max_speed=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app, src, sink)
        assert "provenance unknown" in app.query_one(HeaderBar).visual.plain
    app, src, sink = make_app(write_run(tmp_path / "with-header.jsonl", [1.0, 2.0]), max_speed=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app, src, sink)
        assert "provenance unknown" not in app.query_one(HeaderBar).visual.plain


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_budget_needs_no_scrolling_at_200x60_and_uses_the_height(tmp_path):
    from tests.console.test_snapshots import demo_lines

    p = tmp_path / "demo.jsonl"
    p.write_text("".join(demo_lines()))
    app, src, sink = make_app(p, max_speed=True)
    async with app.run_test(size=(200, 60)) as pilot:
        await settled(pilot, app, src, sink)
        budget = app.query_one("#budget")
        await wait_for(pilot, lambda: budget.region.area > 0, "layout")
        assert budget.max_scroll_y == 0, "the whole budget is on screen"
        assert "GiB = 2**30 bytes" in screen_text(app)  # its last assumption
        # the request list gets the rows the budget does not need
        assert app.query_one("#requests").region.height >= 15
    async with make_app(p, max_speed=True)[0].run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert pilot.app.query_one("#budget").max_scroll_y > 0  # at 120x40 the budget scrolls (1 maximises)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_maximised_sweep_spells_out_every_verdict_at_120x40(tmp_path):
    p = write_sweep_run(tmp_path / "ramp.jsonl")
    app, src, sink = make_app(p, max_speed=True)  # default 10 min window: every level INSUFFICIENT WINDOW
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        await pilot.press("7")
        await pilot.pause()
        text = screen_text(app)
        rows = [ln for ln in sweep_lines(app) if "┊" in ln and ln.split()[0].isdigit()]
        assert len(rows) == 4, rows
        words = [next((w for w in ("INSUFFICIENT WINDOW", "UNDECIDED", "PASS", "FAIL") if r.rstrip().endswith(w)), None)
                 for r in rows]
        assert None not in words and "INSUFFICIENT WINDOW" in words, rows
        for r in rows:
            assert r.rstrip() in text, "the whole row is on screen"


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_sweep_sits_under_the_budget_in_the_wide_layout(tmp_path):
    p = write_sweep_run(tmp_path / "ramp.jsonl")
    app, src, sink = make_app(p, max_speed=True, cfg=MonitorConfig(min_window_s=0.0))
    async with app.run_test(size=(200, 60)) as pilot:
        await settled(pilot, app, src, sink)
        sweep, budget, req = app.query_one("#sweep"), app.query_one("#budget"), app.query_one("#requests")
        await wait_for(pilot, lambda: sweep.region.area > 0, "the grid laid out with the sweep pane")
        assert sweep.region.x == budget.region.x and sweep.region.y == budget.region.bottom
        assert req.region.x == sweep.region.right and req.region.y == sweep.region.y
        assert budget.max_scroll_y == 0, "the whole budget is on screen beside the sweep"
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert sweep.region.x == budget.region.x and sweep.region.y == budget.region.bottom
        assert req.region.x == budget.region.x and req.region.y > sweep.region.bottom - 1


def test_live_accepts_every_console_flag_replay_does(tmp_path):
    from tui.cli import settings_of
    from tui.cli.loadtest import config_from_args, console_monitor_config

    args = settings_of(["live", "--url", "http://127.0.0.1:9", "--concurrency", "1",
                        "--theme", "light", "--themes-dir", str(tmp_path), "--export-dir",
                        str(tmp_path / "x"), "--rolling-seconds", "30"])
    c = args.console
    assert (c.theme, c.themes_dir, c.export_dir) == ("light", str(tmp_path), str(tmp_path / "x"))
    assert console_monitor_config(args.rolling, config_from_args(args)).rolling_s == 30.0
    args = settings_of(["live", "--url", "http://127.0.0.1:9", "--rate", "1", "--rolling-requests", "80"])
    assert console_monitor_config(args.rolling, config_from_args(args)).rolling_n == 80


def test_verdict_bar_packs_statuses_without_losing_one():
    from tui.widgets.bars import pack

    head, budget, quality, extra = "[b] FAIL [/]", "│ budget: feasible (candidate 15)", "│ quality: not run", "│ 37 cancelled"
    assert pack([head, budget, quality], 80) == [f"{head}  {budget}  {quality}"]
    assert pack([head, budget, quality, extra], 60) == [f"{head}  {budget}", f"quality: not run  {extra}"]
    long_head = "[b] INSUFFICIENT WINDOW [/]  need 1,234 more requests, 12 min more, and a second round"
    assert pack([long_head, budget, quality], 78) == [long_head, f"budget: feasible (candidate 15)  {quality}"]


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
async def test_the_console_screen_takes_its_layout_classes_from_breakpoints_as_the_terminal_resizes(seed_path):
    """One width class and one height class on the console screen (Textual's breakpoints), kept current on a
    resize; at the wide breakpoint the sweep pane moves after the GPU pane in grid order, and back."""
    from textual.widgets import Footer

    app, src, sink = make_app(seed_path, max_speed=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app, src, sink)
        screen = app.console_screen
        assert screen.has_class("-narrow", "-short") and not screen.has_class("-medium", "-wide", "-mid", "-tall")
        assert app.query_one(Footer).compact
        for size, width_class, height_class in (((120, 40), "-medium", "-mid"), ((200, 60), "-wide", "-tall"),
                                                ((109, 50), "-narrow", "-tall"), ((160, 33), "-wide", "-short")):
            await pilot.resize_terminal(*size)
            await wait_for(pilot, lambda w=width_class, h=height_class: screen.has_class(w, h), f"classes at {size}")
            others = {"-narrow", "-medium", "-wide", "-short", "-mid", "-tall"} - {width_class, height_class}
            assert not any(screen.has_class(c) for c in others), (size, screen.classes)
            assert app.query_one(Footer).compact == (width_class == "-narrow")
            order = [w.id for w in app.query_one("#grid").children]
            assert (order.index("sweep") > order.index("gpu")) == (width_class == "-wide"), (size, order)
