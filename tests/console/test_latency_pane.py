"""Pilot tests of the latency pane (pane 4): key ``l`` cycles its views, each shows what the snapshot says, N/A
where the snapshot does not carry a metric, goodput beside throughput."""

from __future__ import annotations

from dataclasses import replace

from tests.console.test_app import SIZE, _FixedSink, _StaticSource
from tui.app import ServewatchApp
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.snapshot import Percentile, Snapshot
from tui.widgets.latency import VIEWS, next_view
from tui.widgets.panes import TtftPane


def _ps(values: tuple[float, float, float], n: int, supported: bool = True) -> tuple[Percentile, ...]:
    return tuple(Percentile(q, v, n, supported if q == 0.99 else True, 299)
                 for q, v in zip((0.5, 0.95, 0.99), values, strict=True))


def _snapshot(with_latency: bool) -> Snapshot:
    base = Monitor(MonitorConfig()).snapshot()
    latency = {}
    if with_latency:
        latency = {"ttft": _ps((412.0, 803.0, 951.0), 600), "tpot": _ps((12.3, 27.5, 44.4), 590, supported=False),
                   "itl": _ps((61.0, 240.0, 777.0), 580), "e2e": _ps((2210.0, 4400.0, 6130.0), 600)}
    cumulative = replace(base.cumulative, ttft=_ps((400.0, 800.0, 950.0), 600), completed=600, latency=latency,
                         req_per_s=3.25, output_tok_per_s=121.0, goodput_per_s=3.01,
                         good_output_tok_per_s=110.0 if with_latency else None,
                         misses={"TTFT": 20, "TPOT": 41}, miss_combos={"TTFT+TPOT": 7},
                         unjudgeable={} if with_latency else {"TPOT": 400})
    return replace(base, seq=3, synthetic=False, cumulative=cumulative, current_level=8.0)


def _rows(text: str) -> dict[str, str]:
    """Each line of the pane by its first word (the first line with that word)."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        if ln.split():
            out.setdefault(ln.split()[0], ln)
    return out


async def _text(pilot, app) -> str:
    await pilot.pause()
    return app.query_one("#ttft-text").visual.plain


def test_the_l_cycle_visits_every_view_and_comes_back():
    seen, v = [], VIEWS[0]
    for _ in VIEWS:
        seen.append(v)
        v = next_view(v)
    assert seen == ["ttft", "all", "tpot", "itl", "e2e"] and v == "ttft"


async def test_key_l_switches_the_pane_and_each_view_shows_the_snapshot(tmp_path):
    app = ServewatchApp(_StaticSource(), _FixedSink(_snapshot(with_latency=True)), None, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one("#ttft", TtftPane)
        text = await _text(pilot, app)
        assert pane.view == "ttft" and "rolling" in text and "800 ms" in text  # w.ttft, as before
        assert str(pane.border_title).endswith("TTFT") and app.query_one("#ttft-spark").display

        await pilot.press("l")
        text = await _text(pilot, app)
        assert pane.view == "all" and str(pane.border_title).endswith("Latency")
        assert not app.query_one("#ttft-spark").display, "the per-bucket series is TTFT's: hidden in other views"
        lines = _rows(text)
        assert "412 ms" in lines["TTFT"] and "803 ms" in lines["TTFT"] and lines["TTFT"].rstrip().endswith("600")
        assert "12.3 ms" in lines["TPOT"] and "44.4 ms*" in lines["TPOT"], "unsupported P99 carries the * marker"
        assert "777 ms" in lines["ITL"] and "6130 ms" in lines["E2E"]
        assert "insufficient n" in text
        assert "3.25 req/s" in lines["throughput"] and "121 tok/s" in lines["throughput"]
        assert "3.01 req/s" in lines["goodput"] and "110 tok/s" in lines["goodput"]
        assert "missed TTFT 20, TPOT 41; TTFT+TPOT 7" in text

        await pilot.press("l")
        text = await _text(pilot, app)
        assert pane.view == "tpot" and "12.3 ms" in text and "27.5 ms" in text and "(last - first token)" in text

        await pilot.press("l")
        assert "240 ms" in await _text(pilot, app) and pane.view == "itl"
        await pilot.press("l")
        assert "4400 ms" in await _text(pilot, app) and pane.view == "e2e"
        await pilot.press("l")
        assert pane.view == "ttft" and app.query_one("#ttft-spark").display


async def test_metrics_the_snapshot_lacks_show_na_never_a_number(tmp_path):
    app = ServewatchApp(_StaticSource(), _FixedSink(_snapshot(with_latency=False)), None, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l")
        text = await _text(pilot, app)
        lines = _rows(text)
        assert "800 ms" in lines["TTFT"], "TTFT falls back to WindowStat.ttft"
        for name in ("TPOT", "ITL", "E2E"):
            assert lines[name].split()[1:] == ["N/A", "N/A", "N/A", "0"], lines[name]
        assert "N/A: TPOT, ITL, E2E not in this run's records" in text
        assert "TPOT not judgeable on 400 requests" in text
        assert "N/A tok/s" in lines["goodput"], "good tokens per second unknown: N/A, not 0"
        await pilot.press("l")
        text = await _text(pilot, app)
        assert "N/A: TPOT is not in this run's records" in text and "ms" not in text.split("TPOT:")[0]


def test_the_maximised_sweep_view_shows_p95_of_each_metric_and_goodput_per_level():
    from tests.unit.core.test_sweep_latency import _snap
    from tui.widgets.sweep import sweep_markup

    snap = _snap()
    wide = sweep_markup(snap, 110)
    assert "TTFT P95" in wide and "E2E P95" in wide and "goodput" in wide
    row4 = next(ln for ln in wide.splitlines() if "160.0" in ln).split()
    assert row4[:5] == ["4", "600", "40.0", "N/A", "3000*"] and row4[-2:] == ["5.00", "160.0"]
    assert "TTFT P95" not in sweep_markup(snap, 40), "the narrow pane keeps its bars only"


async def test_the_command_palette_switches_the_latency_view_too(tmp_path):
    app = ServewatchApp(_StaticSource(), _FixedSink(_snapshot(with_latency=True)), None, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        cmds = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "Maximise Latency" in cmds
        cmds["Latency view"].callback()
        text = await _text(pilot, app)
        assert app.query_one("#ttft", TtftPane).view == "all" and "TPOT" in text and "E2E" in text
