"""The help screen: keys, what the colours mean, what each verdict means."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

import tui.core.defaults as defaults
import tui.widgets.fmt as fmt
from tui.core.slos import Slos


@dataclass(frozen=True)
class HelpFacts:
    """The thresholds in force, so the help text quotes the real numbers."""

    slos: Slos = Slos()  # the SLOs in force: "good" is explained with them (``Slos.describe()``)
    target: float = defaults.TARGET
    alpha: float = defaults.ALPHA
    min_window_s: float = defaults.MIN_WINDOW_S
    min_requests: int | None = None
    rolling: str = f"last {defaults.ROLLING_S:g} s"
    candidate_note: str = ""


def _minutes(seconds: float) -> str:
    m = seconds / 60.0
    return f"{m:g} minutes" if m >= 1 else f"{seconds:g} seconds"


def help_markup(f: HelpFacts) -> str:
    slos = fmt.esc(f.slos.describe())
    on = f.slos.in_force()
    tgt = fmt.pct(f.target, 0)
    warn_floor = fmt.pct(max(0.0, f.target - 0.05), 0)
    min_req = f"{f.min_requests}" if f.min_requests else "enough"
    lines = [
        "[b]servewatch console[/]   [$sw-na]esc, ? or F1 closes this help[/]",
        "",
        "[b]Keys[/]",
        "  [b]q[/] quit    [b]?[/] / [b]F1[/] help    [b]p[/] / [b]space[/] pause or resume",
        "  [b]+[/] / [b]-[/] replay speed x2 / ÷2    [b]s[/] step one record    [b]S[/] step one second of record time",
        "  [b]e[/] jump to the end of the file    [b]1[/]-[b]7[/] maximise a pane (press again to restore)",
        "  [b]l[/] latency pane: TTFT, all four (TTFT, TPOT, inter-token, end-to-end, with throughput and goodput), "
        "TPOT, inter-token, end-to-end",
        "  [b]t[/] next theme    [b]ctrl+s[/] export an SVG screenshot and a JSON snapshot    "
        "[b]ctrl+p[/] command palette",
        "",
        "[b]What counts as good[/]",
        "  A request is [$sw-good]good[/] when it completed without error and "
        + (f"met every SLO in force: {slos}." if on else "nothing more: no latency SLO is in force."),
        "  [$sw-warn]slow[/]: completed, but " + (f"it missed {'an SLO' if len(on) > 1 else 'the SLO'} "
                                                 f"({', '.join(on)})." if on else "(none: every SLO is off).")
        + " [$sw-bad]failed[/]: an error, or the stream was cut off.",
        "",
        "[b]Colours[/]",
        f"  [b $sw-good]green[/]   good fraction at or above the {tgt} target; a good request; "
        "GPU memory within the prediction",
        f"  [b $sw-warn]yellow[/]  good fraction below target but not below {warn_floor}; a slow request; "
        "GPU memory above the predicted use; a value with too few requests behind it",
        f"  [b $sw-bad]red[/]     good fraction below {warn_floor}; a failed request; GPU memory within 5% of full",
        "  [b $sw-na]grey[/]    N/A: no data yet, or no source for it",
        "",
        "[b]Verdicts[/] (about the measured requests of the current load level)",
        "  [b $sw-warn]INSUFFICIENT WINDOW[/]  not enough requests or not enough time yet; the bar says what is missing.",
        f"  [b $sw-warn]UNDECIDED[/]            the window is long enough, but the evidence does not yet show the good "
        f"fraction is above or below {tgt}. Keep the load running.",
        f"  [b $sw-good]PASS[/]                 the evidence shows the good fraction is at or above {tgt} "
        f"(anytime-valid sequential test, alpha {f.alpha:g}).",
        f"  [b $sw-bad]FAIL[/]                 the evidence shows the good fraction is below {tgt}; "
        "this can be reached early, the window does not have to be complete.",
        "",
        "[b]Insufficient window, in two sentences[/]",
        "  A handful of requests can look perfect or terrible by pure luck, and a server can look fine for a "
        "minute before its queue fills up.",
        f"  So servewatch does not call PASS until it has seen at least {min_req} measured requests over at least "
        f"{_minutes(f.min_window_s)} of load, and the bar tells you exactly how much is still missing.",
        "",
        "[b]Reading the panes[/]",
        f"  Rolling = {fmt.esc(f.rolling)}; cumulative = every measured request of the current level. "
        "n is the number of requests behind each figure.",
        "  The interval in brackets beside a good fraction is descriptive (how precise the number is), "
        "not the decision; the verdict uses its own test.",
        "  [$sw-warn]insufficient n[/] beside a percentile: too few completed requests for that percentile to "
        "be trusted (P99 needs hundreds); the raw value is shown anyway.",
        "  4 Latency: P50 / P95 / P99 and n of each metric; [$sw-na]N/A[/] when the records do not carry it "
        "(older files have no last-token times). TPOT = (last - first token) / (tokens - 1); inter-token (ITL) = "
        "the largest gap between two tokens of a request; end-to-end (E2E) = request sent to last token.",
        "  Goodput = good requests (and their output tokens) per second, beside the throughput of all requests.",
        "  Warmup requests appear in the request list but never count toward the verdict.",
        f"  [b]7 Sweep[/] (shown under the budget when the run has more than one load level): the good fraction of "
        f"each level against the ┊ {tgt} target line, coloured by that level's verdict;",
        "  ╌ marks the measured capacity (the highest level that passed) and ◆ the memory-only candidate from the "
        "budget, even when it was not tested.",
        "  SYNTHETIC in the header: the data is made up (teaching or test data), not a measurement.",
        "  GPU memory: │ marks the budget's predicted use at the current concurrency, ┃ the ceiling "
        "(weights + margin + full cache budget).",
    ]
    if f.candidate_note:
        lines += ["", "[b]Budget[/]", f"  {fmt.esc(f.candidate_note)}"]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """Keys, colours and verdicts, with the thresholds in force."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 96%;
        max-width: 130;
        height: 92%;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
        padding: 0 1;
    }
    """

    BINDINGS = [
        Binding("escape", "close", "Close help"),
        Binding("question_mark", "close", "Close help", show=False),
        Binding("f1", "close", "Close help", show=False),
    ]

    def __init__(self, facts: HelpFacts) -> None:
        super().__init__()
        self.facts = facts

    def compose(self) -> ComposeResult:
        box = VerticalScroll(Static(help_markup(self.facts), id="help-text"), id="help-box")
        box.border_title = "Help"
        yield box

    def action_close(self) -> None:
        self.dismiss(None)
