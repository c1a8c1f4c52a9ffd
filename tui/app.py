"""The servewatch application: the theme, the driver and the screens.

The console itself is a screen (``tui.screens.console.ConsoleScreen``: the panes, the tick, the layout,
export); help is another (``tui.screens.help``). The application wires the outside world to them: it
starts and stops the ``Source``, turns the ``MonitorSink`` into the screen's ``ConsoleFeed`` (plain
callables: the screens may not import ``tui.sources``), loads the themes, answers the palette
(``tui.screens.commands``) and exits with the verdict's code on ``q``.

When the driver goes away (SIGTERM, SIGHUP from a closed terminal, standard input closed as under
``textual serve``; ``tui.screens.driver_watch``) the console stops its source through ``stop_source``
(a live run records its in-flight requests as cancelled) and exits, with a backstop that ends the process
if Textual's own shutdown hangs on a terminal that is gone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

import tui.core.defaults as defaults
from tui.core.budget import BudgetResult
from tui.core.console_seams import ConsoleFeed, SnapshotFeed
from tui.core.exitcodes import ExitCode
from tui.core.records import LineIssue, Record
from tui.core.textsafe import console
from tui.screens.commands import console_commands
from tui.screens.console import ConsoleScreen
from tui.screens.driver_watch import STOP_TIMEOUT_S, DriverWatch, start_backstop
from tui.screens.help import HelpFacts, HelpScreen
from tui.sources.base import MonitorSink, Source
from tui.sources.outfiles import write_text_atomic
from tui.theming import DEFAULT_THEME, ThemeSet, load_themes, sw_variable_defaults


class ServewatchApp(App[int]):
    """The console application: ``source`` produces records into ``sink``; the console screen shows
    ``sink.snapshot()``."""

    CSS_PATH = "app.tcss"
    TITLE = "servewatch"
    ENABLE_COMMAND_PALETTE = True
    # the console screen's footer shows its own keys; q also quits from the help screen
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit", show=False, priority=True)]

    def __init__(
        self,
        source: Source | None,
        sink: MonitorSink | SnapshotFeed,
        budget: BudgetResult | None = None,
        *,
        theme: str | None = None,
        themes_dir: str | os.PathLike[str] | None = None,
        export_dir: str | os.PathLike[str] = defaults.EXPORT_DIR,
        tick_hz: float = 4.0,
        quality: str | None = None,
        help_facts: HelpFacts | None = None,
        start_source: bool = True,
        baseline: dict | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.sink = sink
        self.budget = budget
        self.start_source = start_source
        self.help_facts = help_facts or facts_from(sink, budget)
        self.console_screen = ConsoleScreen(source, feed_of(sink), budget, write_text=write_text_atomic, quality=quality,
                                     tick_hz=tick_hz, export_dir=Path(export_dir), baseline=baseline)
        self.driver_gone: str | None = None  # why the console closed itself (signal, closed input)
        self._driver_watch = DriverWatch(self.driver_went_away)
        self._source_started = False
        #: Ctrl-C was pressed: a live run's load was stopped (or the console quit); the exit code is then 130
        self.stopped_by_ctrl_c = False
        # themes: bundled + --themes-dir; problems become notifications once mounted
        self.theme_set: ThemeSet = load_themes(themes_dir)
        self.theme_problems: list[str] = list(self.theme_set.problems)
        for t in self.theme_set.themes:
            self.register_theme(t)
        wanted = theme or DEFAULT_THEME
        if self.theme_set.get(wanted) is not None or wanted in self.available_themes:
            self.theme = wanted  # a theme file, or a Textual built-in theme by name
        else:
            avail = ", ".join(self.theme_names) or "none"
            self.theme_problems.append(f"theme {wanted!r} not found (available: {avail})")
            if self.theme_set.get(DEFAULT_THEME) is not None:
                self.theme = DEFAULT_THEME
            elif self.theme_set.themes:
                self.theme = self.theme_set.themes[0].name

    def get_default_screen(self) -> Screen:
        return self.console_screen

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

    # ------------------------------------------------------------------ the source and the driver
    def on_mount(self) -> None:
        for problem in self.theme_problems:
            self.notify(console(problem), title="Theme problem", severity="warning", timeout=12)
        if self.start_source and self.source is not None:
            try:
                self.source.start(self.sink if isinstance(self.sink, MonitorSink) else _no_records)
                self._source_started = True
            except Exception as exc:
                self.notify(console(f"source did not start: {exc}"), title="Source", severity="error", timeout=15)
        self.console_screen.begin()
        if not self.is_headless:
            self._driver_watch.start()

    def on_unmount(self) -> None:
        self._driver_watch.stop()
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

    def driver_went_away(self, reason: str, code: int) -> None:
        """Nobody is watching any more: stop the source (recording what is in flight) and exit."""
        if self.driver_gone is not None:
            return
        self.driver_gone = reason
        self._driver_watch.stop()
        start_backstop(code)
        self.stop_source(timeout=STOP_TIMEOUT_S)
        self.exit(code)

    # ------------------------------------------------------------------ actions
    def action_next_theme(self) -> None:
        names = self.theme_names
        if not names:
            return
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        else:
            self.push_screen(HelpScreen(self.help_facts))

    async def action_quit(self) -> None:
        code = self.console_screen.exit_code()
        self.stop_source()
        self.exit(int(ExitCode.INTERRUPTED) if self.stopped_by_ctrl_c else code)

    def action_help_quit(self) -> None:
        """Ctrl-C (Textual's binding, replaced): on a live run still sending, the first press stops the load
        (in-flight requests recorded as cancelled, the record sealed) and the console keeps showing the final
        state; a second press, or ``q``, quits (exit 130). Anywhere else it quits at once (130)."""
        source = self.source
        live = source is not None and self._source_started and getattr(source, "controls", None) is None
        if live and not self.stopped_by_ctrl_c and not getattr(source, "finished", True):
            self.stopped_by_ctrl_c = True
            self.notify("Ctrl-C: stopping the load (in-flight requests recorded as cancelled, record sealed); "
                        "the final state stays on screen. Ctrl-C again or q quits.", title="Stopping",
                        timeout=10)
            self.run_worker(self._stop_after_ctrl_c, thread=True, exclusive=True, group="ctrl-c")
            return
        self.stopped_by_ctrl_c = True
        self.stop_source()
        self.exit(int(ExitCode.INTERRUPTED))

    def _stop_after_ctrl_c(self) -> None:
        self.stop_source(timeout=STOP_TIMEOUT_S)
        self.call_from_thread(self.notify, "load stopped: the record is sealed; the verdict bar shows the final "
                              "state. Ctrl-C again or q quits.", title="Stopped", timeout=30)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from console_commands(self.console_screen, next_theme=self.action_next_theme, show_help=self.action_help)


def _no_records(items: Iterable[Record | LineIssue]) -> None:
    """The sink handed to a source that makes its own snapshots (the watch console): it gets no records."""


def feed_of(sink: MonitorSink | SnapshotFeed) -> ConsoleFeed:
    """The console screen's view of the sink: a ``MonitorSink`` also says whether anything new arrived and
    takes the client's in-flight count (under its lock)."""
    if not isinstance(sink, MonitorSink):
        return ConsoleFeed(snapshot=lambda: sink.snapshot())
    monitor_sink = sink

    def set_client_in_flight(n: int) -> None:
        with monitor_sink.lock:
            monitor_sink.monitor.set_client_in_flight(n)

    return ConsoleFeed(snapshot=lambda: monitor_sink.snapshot(), seq_no=lambda: monitor_sink.monitor.seq_no,
                       set_client_in_flight=set_client_in_flight)


def facts_from(sink: MonitorSink | SnapshotFeed, budget: BudgetResult | None) -> HelpFacts:
    """The thresholds in force, for the help text (the defaults where the sink has no monitor)."""
    note = budget.note if budget is not None else ""
    if not isinstance(sink, MonitorSink):
        return HelpFacts(candidate_note=note)
    mon = sink.monitor
    cfg = mon.cfg
    rolling = f"last {cfg.rolling_n} requests" if cfg.rolling_n else f"last {cfg.rolling_s:g} s"
    return HelpFacts(slos=cfg.slos, target=cfg.target, alpha=cfg.alpha,
                     min_window_s=cfg.min_window_s, min_requests=mon.min_requests, rolling=rolling,
                     candidate_note=note)


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
    monitor_sink: MonitorSink | SnapshotFeed,
    budget: BudgetResult | None = None,
    theme: str | None = None,
    themes_dir: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> ServewatchApp:
    """The console for any source (replay or live) feeding ``monitor_sink``."""
    return ServewatchApp(source, monitor_sink, budget, theme=theme, themes_dir=themes_dir, **kw)
