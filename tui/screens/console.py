"""The console screen: the panes, the tick that feeds them, the layout at each terminal size, export.

Data flow (the performance rule): a source thread hands records to the monitor; one timer tick
(``tick_hz``, default 4 Hz) takes ``feed.snapshot()`` and, only when the snapshot's ``seq`` changed,
updates every pane inside ``App.batch_update()``. Nothing is pushed into the DOM per record, the request
table is capped and nothing here computes a metric: every number comes from the Snapshot.

A live source that reports ``in_flight`` (the client's in-flight request count) has it handed to the
monitor every tick (``ConsoleFeed.set_client_in_flight``), so the client in-flight figure is live. After
the source has ended with nothing new, a tick takes no snapshot (the console then costs next to nothing).

With more than one load level in the snapshot (a ramp or a sweep) the grid shows the Sweep pane (7) under
the budget, and the footer offers ``7 Sweep``.

Size: Textual's breakpoints put one width class (``-narrow`` below 110 columns, ``-medium``, ``-wide`` from
160) and one height class (``-short`` below 34 rows, ``-mid``, ``-tall`` from 50) on the screen and
``tui/app.tcss`` lays the grid out for them: two columns that scroll when narrow, fixed row heights when
short, a wider budget column when wide, taller graph and request rows when tall. Header, verdict bar and
footer never scroll; the verdict bar wraps the reason to what the height allows (``tui.widgets.bars``).
Keys 1-7 maximise a pane with ``Screen.maximize`` (header, verdict and footer stay); ``l`` cycles the latency
pane's views (TTFT large, all four metrics with throughput and goodput, TPOT, inter-token, end-to-end). The footer shows only
keys that apply: a live run hides the replay controls.

UI state is reactive: ``display_paused`` (a live run's frozen display), ``sweep_active`` (the Sweep pane in
the grid and its key in the footer) and Textual's own ``maximized``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

import tui.core.defaults as defaults
from tui.core.budget import BudgetResult
from tui.core.console_seams import ConsoleFeed, DrillMark, ReplayControls, SourceView
from tui.core.phases import DRILL_EXIT
from tui.core.report import exit_code
from tui.core.snapshot import Snapshot
from tui.core.textsafe import console
from tui.core.verdict_settings import settings_exit
from tui.screens.export import export_json, free_base
from tui.widgets.bars import HeaderBar, VerdictBar
from tui.widgets.panes import PANES, BudgetPane, GoodFractionPane, GpuPane, QueuePane, RequestsPane, TtftPane
from tui.widgets.sweep import SweepPane, is_sweep

NARROW_BELOW = 110  # columns: below this the panes stack two wide and the page scrolls
SHORT_BELOW = 34  # rows: below this the grid keeps its row heights and the page scrolls
WIDE_FROM = 160  # columns: from here the budget column widens so its text needs no scrolling
TALL_FROM = 50  # rows: from here the graph and request rows share the extra height
#: Actions that only a replay can do; hidden from the footer (and answered with a note) on a live run.
REPLAY_ONLY = {"faster": "speed", "slower": "speed", "step": "stepping", "jump_end": "jump to end"}
SPEED_KEYS = Binding.Group("Speed", compact=True)

#: Writes a text file whole (the application passes ``tui.sources.outfiles.write_text_atomic``).
WriteText = Callable[[Path, str], None]


class ConsoleScreen(Screen[None]):
    """The console: ``feed`` gives snapshots, ``source`` the header's label and badge and the replay keys."""

    HORIZONTAL_BREAKPOINTS = [
        (0, "-narrow"), (NARROW_BELOW, "-medium"), (WIDE_FROM, "-wide")]
    VERTICAL_BREAKPOINTS = [
        (0, "-short"), (SHORT_BELOW, "-mid"), (TALL_FROM, "-tall")]
    ALLOW_IN_MAXIMIZED_VIEW: ClassVar[str | None] = "#header, #verdict, Footer"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit", priority=True),
        Binding("question_mark,f1", "app.help", "Help", key_display="?", priority=True),
        Binding("p,space", "toggle_pause", "Pause", key_display="p", priority=True),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+", priority=True, group=SPEED_KEYS),
        Binding("minus", "slower", "Slower", key_display="-", priority=True, group=SPEED_KEYS),
        Binding("s", "step('record')", "Step", priority=True),
        Binding("S", "step('second')", "Step 1 s", show=False, priority=True),
        Binding("e", "jump_end", "End", priority=True),
        # live run: the replay keys are hidden and fall through to this one, which says why nothing happens
        Binding("plus,equals_sign,minus,s,S,e", "replay_only", show=False, priority=True),
        # shown in the footer only while the run has more than one level; key 7 works always (below)
        Binding("7", "show_sweep", "Sweep", priority=True),
        Binding("l", "latency_view", "Lat", priority=True),  # pane 4's views: TTFT, all four, TPOT, ITL, E2E
        Binding("t", "app.next_theme", "Theme", priority=True),
        Binding("m", "mark_disturbance", "Mark act", priority=True),  # a live --fault-manual drill only
        Binding("ctrl+s", "export", "Export", priority=True),
        *(Binding(str(n), f"maximise({n})", f"Pane {n}", show=False, priority=True) for n in PANES),
    ]

    display_paused: reactive[bool] = reactive(False, init=False)
    sweep_active: reactive[bool] = reactive(False, init=False, bindings=True)

    def __init__(self, source: SourceView | None, feed: ConsoleFeed, budget: BudgetResult | None = None, *,
                 write_text: WriteText, quality: str | None = None, tick_hz: float = 4.0,
                 export_dir: Path = Path(defaults.EXPORT_DIR), baseline: dict | None = None) -> None:
        super().__init__()
        self.source = source
        self.feed = feed
        self.budget = budget
        self.quality = quality
        self.baseline = baseline  # `replay CAND --baseline BASE`: the base run's per-level good fraction
        self.tick_hz = min(10.0, max(0.5, float(tick_hz)))
        self.export_dir = export_dir
        self._write_text = write_text
        # None: a live run (the footer hides the replay keys)
        self.controls: ReplayControls | None = source.controls if source is not None else None
        self.replay_controls = self.controls is not None
        self.snapshot: Snapshot | None = None
        self.last_seq: int | None = None
        self.ticks = 0
        self.idle_ticks = 0  # ticks that found the source ended and nothing new (no snapshot taken)
        self.pane_updates = 0
        self.exports: list[tuple[Path, Path]] = []
        self._notices_seen = 0
        self._error_shown = False
        self._in_flight_pushed: int | None = None
        self._header: HeaderBar | None = None
        self._verdict: VerdictBar | None = None
        self._panes: list[Widget] | None = None
        self._begun = self._ticking = False

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        with VerticalScroll(id="main"):
            with Grid(id="grid"):
                yield BudgetPane(self.budget, id="budget")
                yield GoodFractionPane(id="good")
                yield TtftPane(id="ttft")
                yield SweepPane(self.budget, baseline=self.baseline, id="sweep")  # under the budget when shown
                yield QueuePane(id="queue")
                yield GpuPane(id="gpu")
                yield RequestsPane(id="requests")
        yield VerdictBar(self.budget, self.quality, id="verdict")
        yield Footer()

    @property
    def panes(self) -> list[Widget]:
        if self._panes is None:
            self._panes = [self.query_one(f"#{key}", Widget) for key, _ in PANES.values()]
        return self._panes

    def on_mount(self) -> None:
        self._header = self.query_one(HeaderBar)
        self._verdict = self.query_one(VerdictBar)
        self._panes = [self.query_one(f"#{key}", Widget) for key, _ in PANES.values()]
        width, height = self.app.size
        self._breakpoints_now(width, height)
        self._fit(width, height)
        if self._begun:
            self._start_ticking()

    def begin(self) -> None:
        """The first snapshot as soon as the panes are there, then one every ``1 / tick_hz`` s (the application
        calls this once the source is started)."""
        self._begun = True
        if self._header is not None:
            self._start_ticking()

    def _start_ticking(self) -> None:
        if self._ticking:
            return
        self._ticking = True
        self.tick(force=True)
        self.set_interval(1.0 / self.tick_hz, self.tick, name="snapshot-tick")

    def on_unmount(self) -> None:
        self._header = self._verdict = self._panes = None

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _breakpoints_now(self, width: int, height: int) -> None:
        """The breakpoint classes for the first frame (Textual sets them on each resize, which comes later)."""
        classes: dict[str, bool] = {}
        for value, points in ((width, self.HORIZONTAL_BREAKPOINTS or []), (height, self.VERTICAL_BREAKPOINTS or [])):
            hit = next((name for at, name in sorted(points, reverse=True) if value >= at), None)
            classes.update({name: name == hit for _, name in points})
        self.update_classes(classes, animate=False)

    def _fit(self, width: int, height: int) -> None:
        """What CSS cannot say: the grid order when wide, the compact footer, the verdict's line count."""
        grid = self.query_one("#grid", Grid)
        wide = width >= WIDE_FROM  # the breakpoint class comes with the same event, after this handler
        if wide != grid.has_class("-wide-order"):
            # wide: the sweep pane sits under the budget's two rows, after the GPU pane in grid order
            sweep = self.query_one("#sweep")
            if wide:
                grid.move_child(sweep, after=self.query_one("#gpu"))
            else:
                grid.move_child(sweep, before=self.query_one("#queue"))
            grid.set_class(wide, "-wide-order")
        self.query_one(Footer).compact = width < NARROW_BELOW  # every key that applies fits on one line
        if self._verdict is not None:
            self._verdict.fit(height)

    def watch_sweep_active(self, active: bool) -> None:
        """More than one level: the Sweep pane joins the grid (under the budget) and the footer."""
        self.query_one("#grid", Grid).set_class(active, "-sweep")

    def watch_display_paused(self, paused: bool) -> None:
        if not paused:
            self.tick(force=True)
        self._refresh_header()

    # ------------------------------------------------------------------ the tick
    @property
    def mode_badge(self) -> str:
        if self.display_paused:
            return "PAUSED"
        if self.source is None:
            return "LIVE"
        return self.source.status or self.source.mode

    @property
    def source_label(self) -> str:
        return (self.source.label if self.source is not None else "") or (self.snapshot.source if self.snapshot else "")

    def _nothing_new(self) -> bool:
        """True when the source has ended and the monitor holds nothing the last snapshot did not."""
        if self.source is None or self.snapshot is None or self.feed.seq_no is None or not self.source.finished:
            return False
        return self.feed.seq_no() == self.last_seq

    def tick(self, force: bool = False) -> None:
        """Take one snapshot; update the panes only when it changed (or when forced). After the source has
        ended with nothing new, only the header's badge is kept current."""
        self.ticks += 1
        in_flight_changed = self._push_in_flight()
        if not force and not in_flight_changed and self._nothing_new():
            self.idle_ticks += 1
            self._refresh_header()
            self.app.sub_title = f"{self.source_label} · {self.mode_badge}"
            return
        try:
            snap = self.feed.snapshot()
        except Exception as exc:  # a bug in the core must not kill the console
            if not self._error_shown:
                self._error_shown = True
                self.notify(console(f"snapshot failed: {type(exc).__name__}: {exc}"), severity="error", timeout=15)
            return
        self._show_source_notices()
        changed = force or snap.seq != self.last_seq or in_flight_changed
        if self.display_paused and not force:
            changed = False
        if self._header is None or self._verdict is None or self._panes is None:
            return  # not mounted yet, or already torn down
        with self.app.batch_update():
            shown = snap if changed else (self.snapshot or snap)
            self._header.show(source=self.source_label, mode=self.mode_badge, snap=shown)
            self.app.sub_title = f"{self.source_label} · {self.mode_badge}"
            if changed:
                for pane in self._panes:
                    pane.show_snapshot(snap)  # type: ignore[attr-defined]  # every pane is a PaneMixin
                self._verdict.update_snapshot(snap)
                self.snapshot = snap
                self.last_seq = snap.seq
                self.pane_updates += 1
                self.sweep_active = is_sweep(snap)

    def _push_in_flight(self) -> bool:
        """Hand a live source's ``in_flight`` to the monitor; True when it changed."""
        n = self.source.in_flight if self.source is not None else None
        setter = self.feed.set_client_in_flight
        if setter is None or not isinstance(n, int) or isinstance(n, bool):
            return False
        try:
            setter(n)
        except Exception:
            return False
        changed = n != self._in_flight_pushed
        self._in_flight_pushed = n
        return changed

    def _show_source_notices(self) -> None:
        notices = self.source.notices if self.source is not None else None
        if not notices:
            return
        while self._notices_seen < len(notices):
            self.notify(console(notices[self._notices_seen]), title="Source", severity="warning", timeout=10)
            self._notices_seen += 1

    def _refresh_header(self) -> None:
        if self._header is not None:
            self._header.show(source=self.source_label, mode=self.mode_badge, snap=self.snapshot)

    def exit_code(self) -> int:
        """The verdict shown, as the command's exit code (3 before any snapshot)."""
        if self.snapshot is None:
            return 3
        drill = self.snapshot.drill
        verdict = DRILL_EXIT.get(drill.state or "", 3) if drill is not None else exit_code(self.snapshot.verdict.state)
        code, _why = settings_exit(verdict, self.snapshot.settings)  # a drill: its own verdict's code (3 until judged)
        return code  # re-judged at weaker settings than the run's: 3 (tui.core.verdict_settings)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "mark_disturbance":  # only while a live manual drill awaits the operator's act
            return isinstance(self.source, DrillMark) and bool(self.source.awaits_mark)
        if action == "show_sweep":
            return self.sweep_active  # False: not in the footer; key 7 then falls through to maximise(7)
        if action in REPLAY_ONLY:
            return self.replay_controls  # False: hidden on a live run; the key falls through to replay_only
        if action == "replay_only":
            return not self.replay_controls
        return True

    def _replay_only(self, what: str) -> ReplayControls | None:
        """The replay controls, or None (and a notice saying why nothing happens) on a live run."""
        if self.controls is None:
            self.notify(f"{what} applies to replays only", timeout=4)
        return self.controls

    def action_replay_only(self) -> None:
        """A replay key pressed on a live run (the key is not in the live footer)."""
        self.notify("speed, stepping and jump to end apply to replays only", timeout=4)

    def action_toggle_pause(self) -> None:
        if self.controls is not None:
            self.controls.toggle_pause()
            self._refresh_header()
        else:  # live: keep collecting, freeze the display
            self.display_paused = not self.display_paused

    def action_faster(self) -> None:
        if (controls := self._replay_only("speed")) is not None:
            controls.speed_up()
            self._refresh_header()

    def action_slower(self) -> None:
        if (controls := self._replay_only("speed")) is not None:
            controls.slow_down()
            self._refresh_header()

    def action_step(self, unit: str = "record") -> None:
        if (controls := self._replay_only("stepping")) is not None:
            controls.step(unit)
            self._refresh_header()

    def action_jump_end(self) -> None:
        if (controls := self._replay_only("jump to end")) is not None:
            controls.jump_to_end()
            self._refresh_header()

    def action_mark_disturbance(self) -> None:
        """``m``: the operator acted now (a live ``--fault-manual`` drill)."""
        if isinstance(self.source, DrillMark):
            self.source.mark_disturbance("the console's m key")
            self.notify("disturbance marked: the recovery phase starts now", title="Drill", timeout=6)

    def action_maximise(self, number: int) -> None:
        """Keys 1-7: that pane alone (header, verdict and footer stay); the same key again restores."""
        target = self.query_one(f"#{PANES[number][0]}", Widget)
        if self.maximized is target:
            self.minimize()
        else:
            self.maximize(target, container=False)

    def action_latency_view(self) -> None:
        """Key l: the latency pane's next view (TTFT large, all four, TPOT, ITL, E2E; ``tui.widgets.latency``)."""
        self.query_one("#ttft", TtftPane).set_view()

    def action_show_sweep(self) -> None:
        self.action_maximise(7)

    def action_export(self) -> None:
        try:
            svg, js = self.export()
        except OSError as exc:
            self.notify(console(f"export failed: {exc}"), title="Export", severity="error", timeout=10)
            return
        self.notify(f"{console(svg)}\n{console(js)}", title="Exported", timeout=8)

    # ------------------------------------------------------------------ export
    def export(self, directory: Path | None = None) -> tuple[Path, Path]:
        """Write an SVG screenshot and a JSON snapshot of every metric shown; returns their paths."""
        d = Path(directory) if directory is not None else self.export_dir
        d.mkdir(parents=True, exist_ok=True)
        base = free_base(d)
        svg_path = Path(self.app.save_screenshot(filename=f"{base}.svg", path=str(d)))
        snap = self.snapshot or self.feed.snapshot()
        json_path = d / f"{base}.json"
        self._write_text(json_path, export_json(snap, source=self.source_label, mode=self.mode_badge,
                                                theme=self.app.theme, budget=self.budget, quality=self.quality))
        self.exports.append((svg_path, json_path))
        return svg_path, json_path
