"""The servewatch console: one screen that renders Monitor snapshots.

Data flow (the performance rule): a source thread hands records to a ``MonitorSink``;
one timer tick (``tick_hz``, default 4 Hz) takes ``sink.snapshot()`` and, only when the
snapshot's ``seq`` changed, updates every pane inside ``App.batch_update()``. Nothing is
pushed into the DOM per record, the request table is capped and nothing here computes a
metric: every number comes from the Snapshot.

A live source that reports ``in_flight`` (the client's in-flight request count) has it handed to
the monitor every tick (under the sink's lock), so the client in-flight figure is live.

With more than one load level in the snapshot (a ramp or a sweep) the grid shows the Sweep pane
(7) under the budget, and the footer offers ``7 Sweep``.

Size: the layout follows the terminal (``_apply_size``): two columns that scroll below 110 columns,
fixed row heights below 34 rows, a wider budget column from 160 columns, taller graph and request
rows from 50 rows. Header, verdict bar and footer never scroll; the verdict bar wraps the reason to
what the height allows (``tui.widgets.bars``). The footer shows only keys that apply: a live run
hides the replay controls.

When the driver goes away (SIGTERM, SIGHUP from a closed terminal, standard input closed as under
``textual serve``) the console stops its source through ``stop_source`` (a live run records its
in-flight requests as cancelled) and exits, with a backstop that ends the process if Textual's own
shutdown hangs on a terminal that is gone.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer

from tui.core.snapshot import Snapshot
from tui.screens.help import HelpFacts, HelpScreen
from tui.sources.base import ReplayControls, Source
from tui.theming import DEFAULT_THEME, ThemeSet, load_themes, sw_variable_defaults
from tui.widgets.bars import HeaderBar, VerdictBar
from tui.widgets.panes import PANES, BudgetPane, GoodFractionPane, GpuPane, QueuePane, RequestsPane, TtftPane
from tui.widgets.sweep import SweepPane, is_sweep

NARROW_BELOW = 110  # columns: below this the panes stack two wide and the page scrolls
SHORT_BELOW = 34  # rows: below this the grid keeps its row heights and the page scrolls
WIDE_FROM = 160  # columns: from here the budget column widens so its text needs no scrolling
TALL_FROM = 50  # rows: from here the graph and request rows share the extra height
#: Actions that only a replay can do; hidden from the footer (and answered with a note) on a live run.
REPLAY_ONLY = {"faster": "speed", "slower": "speed", "step": "stepping", "jump_end": "jump to end"}
#: Exit codes when the driver goes away: 128 + the signal, as a shell reports it; closed input as a hangup.
STDIN_CLOSED_EXIT = 128 + signal.SIGHUP
STOP_TIMEOUT_S = 0.6  # how long stopping the source may take when the driver is gone
EXIT_BACKSTOP_S = 0.9  # after this the process ends even if Textual's shutdown hangs on a dead terminal
EXPORT_SCHEMA = "servewatch.export/1"


def _json_safe(obj: Any) -> Any:
    """Snapshot dicts may hold inf (the failures-as-inf reading): write them as strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else "-inf" if obj < 0 else "nan"
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _budget_dict(budget: Any) -> dict | None:
    if budget is None:
        return None
    try:
        from tui.core.budget import budget_to_dict

        return budget_to_dict(budget)
    except Exception:
        return asdict(budget) if is_dataclass(budget) and not isinstance(budget, type) else {"repr": repr(budget)}


SPEED_KEYS = Binding.Group("Speed", compact=True)


class ServewatchApp(App[int]):
    """The console. ``source`` produces records into ``sink``; ``sink.snapshot()`` feeds the panes."""

    CSS_PATH = "app.tcss"
    TITLE = "servewatch"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", priority=True),
        Binding("question_mark,f1", "help", "Help", key_display="?", priority=True),
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
        Binding("t", "next_theme", "Theme", priority=True),
        Binding("ctrl+s", "export", "Export", priority=True),
        *(Binding(str(n), f"maximise({n})", f"Pane {n}", show=False, priority=True) for n in PANES),
    ]

    def __init__(
        self,
        source: Source | None,
        sink: Any,
        budget: Any = None,
        *,
        theme: str | None = None,
        themes_dir: str | os.PathLike | None = None,
        export_dir: str | os.PathLike = "exports",
        tick_hz: float = 4.0,
        quality: str | None = None,
        help_facts: HelpFacts | None = None,
        start_source: bool = True,
        baseline: dict | None = None,
    ) -> None:
        super().__init__()
        self.baseline = baseline  # `replay CAND --baseline BASE`: the base run's per-level good fraction
        self.source = source
        self.sink = sink
        self.budget = budget
        self.quality = quality
        self.export_dir = Path(export_dir)
        self.tick_hz = min(10.0, max(0.5, float(tick_hz)))
        self.start_source = start_source
        self.help_facts = help_facts or self._facts_from_sink()
        self.snapshot: Snapshot | None = None
        self.last_seq: int | None = None
        self.ticks = 0
        self.idle_ticks = 0  # ticks that found the source ended and nothing new (no snapshot taken)
        self.pane_updates = 0
        self.display_paused = False
        self.solo: int | None = None
        self.exports: list[tuple[Path, Path]] = []
        self._notices_seen = 0
        self._error_shown = False
        self._source_started = False
        self.sweep_active = False
        self._in_flight_pushed: int | None = None
        # None: a live run (the footer hides the replay keys)
        self.controls: ReplayControls | None = source.controls if source is not None else None
        self.replay_controls = self.controls is not None
        self.driver_gone: str | None = None  # why the console closed itself (signal, closed input)
        self._watching = threading.Event()  # set while the driver watch thread should run
        self._header: HeaderBar | None = None
        self._verdict: VerdictBar | None = None
        self._panes: list | None = None
        # themes: bundled + --themes-dir; problems become notifications once mounted
        self.theme_set: ThemeSet = load_themes(themes_dir)
        self.theme_problems: list[str] = list(self.theme_set.problems)
        for t in self.theme_set.themes:
            self.register_theme(t)
        wanted = theme or DEFAULT_THEME
        if self.theme_set.get(wanted) is not None:
            self.theme = wanted
        elif wanted in self.available_themes:
            self.theme = wanted  # a Textual built-in theme by name
        else:
            avail = ", ".join(self.theme_names) or "none"
            self.theme_problems.append(f"theme {wanted!r} not found (available: {avail})")
            if self.theme_set.get(DEFAULT_THEME) is not None:
                self.theme = DEFAULT_THEME
            elif self.theme_set.themes:
                self.theme = self.theme_set.themes[0].name

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Textual's ``run``, refused (``UsageError``: one line, exit 2) when there is no terminal to draw on and
        no driver named: ``servewatch | tail -2`` or ``servewatch < /dev/null`` would otherwise spin unseen.
        ``textual serve`` names its web driver (``TEXTUAL_DRIVER``); headless runs and Pilot tests
        (``run_test``, which does not come through here) have their own driver. An unhandled exception inside
        the app is raised again after Textual has shown it, so the command exits 70 instead of 3."""
        if not kwargs.get("headless") and kwargs.get("auto_pilot") is None:
            problem = terminal_problem()
            if problem:
                from tui.core.exitcodes import UsageError

                raise UsageError(problem)
        result = super().run(*args, **kwargs)
        crash = getattr(self, "_exception", None)  # Textual printed it and exited with no value: not a verdict
        if isinstance(crash, Exception):
            raise crash  # the command line's boundary: exit 70 (internal error), never 3 "no decision"
        return result

    # ------------------------------------------------------------------ themes
    @property
    def theme_names(self) -> list[str]:
        """Themes ``t`` cycles through: the loaded theme files, in order."""
        return self.theme_set.names

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # sw-* variables a theme leaves out fall back to that theme's own status colours
        return sw_variable_defaults(self.current_theme.to_color_system().generate())

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        with VerticalScroll(id="main"):
            with Grid(id="grid"):
                yield BudgetPane(self.budget, id="budget")
                yield GoodFractionPane(id="good")
                yield TtftPane(id="ttft")
                yield SweepPane(self.budget, baseline=self.baseline, id="sweep")  # under the budget when shown (grid.-sweep)
                yield QueuePane(id="queue")
                yield GpuPane(id="gpu")
                yield RequestsPane(id="requests")
        yield VerdictBar(self.budget, self.quality, id="verdict")
        yield Footer()

    @property
    def panes(self) -> list:
        if self._panes is None:
            self._panes = [self.query_one(f"#{key}") for key, _ in PANES.values()]
        return self._panes

    def on_mount(self) -> None:
        self._header = self.query_one(HeaderBar)
        self._verdict = self.query_one(VerdictBar)
        self._panes = [self.query_one(f"#{key}") for key, _ in PANES.values()]
        for problem in self.theme_problems:
            self.notify(problem, title="Theme problem", severity="warning", timeout=12)
        self._apply_size(self.size.width, self.size.height)
        if self.start_source and self.source is not None:
            try:
                self.source.start(self.sink)
                self._source_started = True
            except Exception as exc:
                self.notify(f"source did not start: {exc}", title="Source", severity="error", timeout=15)
        self.tick(force=True)
        self.set_interval(1.0 / self.tick_hz, self.tick, name="snapshot-tick")
        if not self.is_headless:
            self._watch_driver()

    def on_unmount(self) -> None:
        self._watching.clear()
        self._header = self._verdict = self._panes = None
        self.stop_source()

    def stop_source(self, timeout: float | None = None) -> None:
        """Stop the source once (a live run records its in-flight requests as cancelled)."""
        if self._source_started and self.source is not None:
            self._source_started = False
            try:
                if timeout is not None:
                    self.source.stop(timeout=timeout)
                else:
                    self.source.stop()
            except Exception:
                pass

    # ------------------------------------------------------------------ the driver going away
    def _watch_driver(self) -> None:
        """SIGTERM / SIGHUP and a closed standard input end the console (see ``driver_went_away``)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_IGN:  # nohup: whoever started us asked for it to be ignored
                continue
            try:  # replaces the web driver's own SIGTERM handler, which would not stop the source first
                loop.add_signal_handler(sig, self.driver_went_away, f"signal {sig.name}", 128 + int(sig))
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            fd = sys.__stdin__.fileno()  # type: ignore[union-attr]  # (None: AttributeError, handled below)
        except (AttributeError, ValueError, OSError):
            return
        self._watching.set()
        threading.Thread(target=self._watch_stdin, args=(fd, loop), name="servewatch-stdin-watch",
                         daemon=True).start()

    def _watch_stdin(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for a hang-up on standard input without reading it (Textual's driver reads it).

        POLLHUP is a state, not data: a pipe whose writer closed (``textual serve`` gone) or a
        terminal that hung up reports it on every poll, while keys typed by a user never do."""
        poller = select.poll()
        poller.register(fd, select.POLLHUP | select.POLLERR)
        gone = select.POLLHUP | select.POLLERR | select.POLLNVAL
        while self._watching.is_set():
            try:
                events = poller.poll(250)
            except OSError:
                return
            if any(ev & gone for _fd, ev in events):
                try:
                    loop.call_soon_threadsafe(self.driver_went_away, "standard input closed", STDIN_CLOSED_EXIT)
                except RuntimeError:  # the loop has closed: the app is already gone
                    pass
                return

    def driver_went_away(self, reason: str, code: int) -> None:
        """Nobody is watching any more: stop the source (recording what is in flight) and exit."""
        if self.driver_gone is not None:
            return
        self.driver_gone = reason
        self._watching.clear()
        backstop = threading.Timer(EXIT_BACKSTOP_S, os._exit, (code,))
        backstop.daemon = True
        backstop.start()
        self.stop_source(timeout=STOP_TIMEOUT_S)
        self.exit(code)

    def on_resize(self, event: events.Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        try:
            grid = self.query_one("#grid", Grid)
        except Exception:
            return
        narrow = width < NARROW_BELOW
        grid.set_class(narrow, "-narrow")
        grid.set_class(not narrow and height < SHORT_BELOW, "-short")
        wide = width >= WIDE_FROM
        if wide != grid.has_class("-wide"):
            # wide: the sweep pane sits under the budget's two rows, after the GPU pane in grid order
            try:
                sweep = self.query_one("#sweep")
                if wide:
                    grid.move_child(sweep, after=self.query_one("#gpu"))
                else:
                    grid.move_child(sweep, before=self.query_one("#queue"))
            except Exception:
                pass
        grid.set_class(wide, "-wide")
        grid.set_class(not narrow and height >= TALL_FROM, "-tall")
        try:
            self.query_one(Footer).compact = narrow  # every key that applies fits on one line
        except Exception:
            pass
        if self._verdict is not None:
            self._verdict.fit(height)

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
        """True when the source has ended and the monitor holds nothing the last snapshot did not: the tick
        then takes no snapshot (idle after a replay has ended, the console costs next to nothing)."""
        if self.source is None or self.snapshot is None or not getattr(self.source, "finished", False):
            return False
        seq = getattr(getattr(self.sink, "monitor", None), "seq_no", None)
        return isinstance(seq, int) and seq == self.last_seq

    def tick(self, force: bool = False) -> None:
        """Take one snapshot; update the panes only when it changed (or when forced). After the source has
        ended with nothing new, only the header's badge is kept current."""
        self.ticks += 1
        in_flight_changed = self._push_in_flight()
        if not force and not in_flight_changed and self._nothing_new():
            self.idle_ticks += 1
            self._refresh_header()
            self.sub_title = f"{self.source_label} · {self.mode_badge}"
            return
        try:
            snap = self.sink.snapshot()
        except Exception as exc:  # a bug in the core must not kill the console
            if not self._error_shown:
                self._error_shown = True
                self.notify(f"snapshot failed: {type(exc).__name__}: {exc}", severity="error", timeout=15)
            return
        self._show_source_notices()
        changed = force or snap.seq != self.last_seq or in_flight_changed
        if self.display_paused and not force:
            changed = False
        if self._header is None or self._verdict is None or self._panes is None:
            return  # not mounted yet, or already torn down
        with self.batch_update():
            shown = snap if changed else (self.snapshot or snap)
            self._header.show(source=self.source_label, mode=self.mode_badge, snap=shown)
            self.sub_title = f"{self.source_label} · {self.mode_badge}"
            if changed:
                for pane in self._panes:
                    pane.show_snapshot(snap)
                self._verdict.update_snapshot(snap)
                self.snapshot = snap
                self.last_seq = snap.seq
                self.pane_updates += 1
                self._show_sweep_if(is_sweep(snap))

    def _push_in_flight(self) -> bool:
        """Hand a live source's ``in_flight`` to the monitor (under the sink lock); True when it changed."""
        n = self.source.in_flight if self.source is not None else None
        monitor = getattr(self.sink, "monitor", None)
        setter = getattr(monitor, "set_client_in_flight", None)
        if setter is None or not isinstance(n, int) or isinstance(n, bool):
            return False
        lock = getattr(self.sink, "lock", None)
        try:
            with lock if lock is not None else nullcontext():
                setter(n)
        except Exception:
            return False
        changed = n != self._in_flight_pushed
        self._in_flight_pushed = n
        return changed

    def _show_sweep_if(self, active: bool) -> None:
        """More than one level: the Sweep pane joins the grid (under the budget) and the footer."""
        if active == self.sweep_active:
            return
        self.sweep_active = active
        try:
            self.query_one("#grid", Grid).set_class(active, "-sweep")
        except Exception:
            return
        self.refresh_bindings()

    def _show_source_notices(self) -> None:
        notices = self.source.notices if self.source is not None else None
        if not notices:
            return
        while self._notices_seen < len(notices):
            self.notify(str(notices[self._notices_seen]), title="Source", severity="warning", timeout=10)
            self._notices_seen += 1

    def _refresh_header(self) -> None:
        if self._header is not None:
            self._header.show(source=self.source_label, mode=self.mode_badge, snap=self.snapshot)

    # ------------------------------------------------------------------ actions
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
        else:  # live: keep collecting, freeze the display
            self.display_paused = not self.display_paused
            if not self.display_paused:
                self.tick(force=True)
        self._refresh_header()

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

    def action_maximise(self, number: int) -> None:
        grid = self.query_one("#grid", Grid)
        for pane in self.panes:
            pane.remove_class("-solo")
        if self.solo == number:
            self.solo = None
            grid.remove_class("-solo")
            return
        self.solo = number
        grid.add_class("-solo")
        target = self.query_one(f"#{PANES[number][0]}")
        target.add_class("-solo")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "show_sweep":
            return self.sweep_active  # False: not in the footer; key 7 then falls through to maximise(7)
        if action in REPLAY_ONLY:
            return self.replay_controls  # False: hidden on a live run; the key falls through to replay_only
        if action == "replay_only":
            return not self.replay_controls
        return True

    def action_show_sweep(self) -> None:
        self.action_maximise(7)

    def action_next_theme(self) -> None:
        names = self.theme_names
        if not names:
            return
        try:
            i = names.index(self.theme)
        except ValueError:
            i = -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        else:
            self.push_screen(HelpScreen(self.help_facts))

    def action_export(self) -> None:
        try:
            svg, js = self.export()
        except OSError as exc:
            self.notify(f"export failed: {exc}", title="Export", severity="error", timeout=10)
            return
        self.notify(f"{svg}\n{js}", title="Exported", timeout=8)

    async def action_quit(self) -> None:
        from tui.core.report import exit_code

        code = exit_code(self.snapshot.verdict.state) if self.snapshot is not None else 3
        self.stop_source()
        self.exit(code)

    # ------------------------------------------------------------------ export
    def export(self, directory: str | os.PathLike | None = None) -> tuple[Path, Path]:
        """Write an SVG screenshot and a JSON snapshot of every metric shown; returns their paths."""
        d = Path(directory) if directory is not None else self.export_dir
        d.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = f"servewatch-{stamp}"
        n = 1
        while (d / f"{base}.svg").exists() or (d / f"{base}.json").exists():
            n += 1
            base = f"servewatch-{stamp}-{n}"
        svg_path = Path(self.save_screenshot(filename=f"{base}.svg", path=str(d)))
        snap = self.snapshot or self.sink.snapshot()
        doc = {
            "schema": EXPORT_SCHEMA,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "source": self.source_label,
            "mode": self.mode_badge,
            "synthetic": bool(snap.synthetic),
            "theme": self.theme,
            "budget": _budget_dict(self.budget),
            "quality": self.quality or "not run",
            "snapshot": snap.to_dict(),
        }
        json_path = d / f"{base}.json"
        from tui.sources.outfiles import write_text_atomic

        write_text_atomic(json_path, json.dumps(_json_safe(doc), indent=2, allow_nan=False, default=str) + "\n")
        self.exports.append((svg_path, json_path))
        return svg_path, json_path

    # ------------------------------------------------------------------ command palette
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Pause / resume", "Pause or resume the replay (live: freeze the display)", self.action_toggle_pause)
        if self.replay_controls:  # a live run has no replay controls
            yield SystemCommand("Replay faster", "Double the replay speed", self.action_faster)
            yield SystemCommand("Replay slower", "Halve the replay speed", self.action_slower)
            yield SystemCommand("Step one record", "Pause and hand over the next record",
                                lambda: self.action_step("record"))
            yield SystemCommand("Step one second", "Pause and replay one second of record time",
                                lambda: self.action_step("second"))
            yield SystemCommand("Jump to end", "Replay everything up to the end of the file now", self.action_jump_end)
        yield SystemCommand("Next theme", "Switch to the next servewatch theme", self.action_next_theme)
        yield SystemCommand("Export", "Save an SVG screenshot and a JSON snapshot", self.action_export)
        yield SystemCommand("Help", "Keys, colours and what each verdict means", self.action_help)
        for n, (_key, title) in PANES.items():
            what = (f"Show only the {title} pane (again to restore)" if n != 7 else
                    "Good fraction per level against the target, the memory-only candidate and the measured "
                    "capacity, full width (again to restore)")
            yield SystemCommand(f"Maximise {title}", what, lambda n=n: self.action_maximise(n))

    # ------------------------------------------------------------------ helpers
    def _facts_from_sink(self) -> HelpFacts:
        mon = getattr(self.sink, "monitor", None)
        cfg = getattr(mon, "cfg", None)
        note = getattr(self.budget, "note", "") if self.budget is not None else ""
        if cfg is None:
            return HelpFacts(candidate_note=note)
        rolling = f"last {cfg.rolling_n} requests" if getattr(cfg, "rolling_n", None) else f"last {cfg.rolling_s:g} s"
        return HelpFacts(
            slo_ttft_ms=cfg.slo_ttft_ms,
            target=cfg.target,
            alpha=cfg.alpha,
            min_window_s=cfg.min_window_s,
            min_requests=getattr(mon, "min_requests", None),
            rolling=rolling,
            candidate_note=note,
        )


def terminal_problem() -> str | None:
    """Why the console cannot be drawn here (standard input or output not a terminal and no driver named by
    ``TEXTUAL_DRIVER``), else None."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    missing = []
    for name, stream in (("input", sys.__stdin__), ("output", sys.__stdout__)):
        try:
            tty = stream is not None and stream.isatty()
        except (ValueError, OSError):
            tty = False
        if not tty:
            missing.append(name)
    if not missing:
        return None
    return (f"the console needs a terminal, and standard {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one; for a verdict without a terminal use "
            "`servewatch report FILE` (or `watch --once`), or serve the console with `textual serve`")


def build_app(
    source: Source | None,
    monitor_sink: Any,
    budget: Any = None,
    theme: str | None = None,
    themes_dir: str | os.PathLike | None = None,
    **kw: Any,
) -> ServewatchApp:
    """The console for any source (replay or live) feeding ``monitor_sink``."""
    return ServewatchApp(source, monitor_sink, budget, theme=theme, themes_dir=themes_dir, **kw)
