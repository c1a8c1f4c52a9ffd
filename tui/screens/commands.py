"""The console's entries in the command palette (ctrl+p): the same actions as its keys."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from textual.app import SystemCommand

from tui.screens.console import ConsoleScreen
from tui.widgets.panes import PANES


def console_commands(console: ConsoleScreen, *, next_theme: Callable[[], object],
                     show_help: Callable[[], object]) -> Iterable[SystemCommand]:
    """Pause, the replay controls (a replay only), theme and help (the application's), export, one entry per
    pane."""
    yield SystemCommand("Pause / resume", "Pause or resume the replay (live: freeze the display)",
                        console.action_toggle_pause)
    if console.replay_controls:  # a live run has no replay controls
        yield SystemCommand("Replay faster", "Double the replay speed", console.action_faster)
        yield SystemCommand("Replay slower", "Halve the replay speed", console.action_slower)
        yield SystemCommand("Step one record", "Pause and hand over the next record",
                            lambda: console.action_step("record"))
        yield SystemCommand("Step one second", "Pause and replay one second of record time",
                            lambda: console.action_step("second"))
        yield SystemCommand("Jump to end", "Replay everything up to the end of the file now", console.action_jump_end)
    yield SystemCommand("Latency view", "The latency pane's next view: TTFT, all four, TPOT, ITL, E2E (key l)",
                        console.action_latency_view)
    yield SystemCommand("Next theme", "Switch to the next servewatch theme", next_theme)
    yield SystemCommand("Export", "Save an SVG screenshot and a JSON snapshot", console.action_export)
    yield SystemCommand("Help", "Keys, colours and what each verdict means", show_help)
    for n, (_key, title) in PANES.items():
        what = (f"Show only the {title} pane (again to restore)" if n != 7 else
                "Good fraction per level against the target, the memory-only candidate and the measured "
                "capacity, full width (again to restore)")
        yield SystemCommand(f"Maximise {title}", what, lambda n=n: console.action_maximise(n))
