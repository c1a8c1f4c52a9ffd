"""The header bar (title, SYNTHETIC, source, mode, elapsed) and the verdict bar (always visible).

The verdict bar lays its text out for the space it has; nothing here computes a figure:

* the verdict state, with what is missing (INSUFFICIENT WINDOW), then ``budget: …`` and
  ``quality: …`` (``status_parts``): packed in order on as few lines as the width allows, so a
  status never falls off the right edge;
* the reason, wrapped at word boundaries to at most ``reason_lines(terminal rows)`` lines (1 below
  34 rows, 2 below 50, else 3), the last one ending in `` …`` when the reason is longer; at 80
  columns one line still shows the first ~75 characters. The whole reason is the bar's tooltip;
* the skipped-lines counter, one line; a line longer than the width ends in an ellipsis.
"""

from __future__ import annotations

import textwrap

from textual import events
from textual.content import Content
from textual.widgets import Static

import tui.widgets.fmt as fmt
from tui.core.budget.results import BudgetResult
from tui.core.budgetview import BudgetView
from tui.core.phases import DRILL_WORDS
from tui.core.snapshot import Snapshot
from tui.widgets.fmt import VERDICT_STYLE, esc, na


class HeaderBar(Static):
    """One line: servewatch · SYNTHETIC · source · mode badge · elapsed (record time)."""

    def __init__(self, **kw) -> None:
        super().__init__("", **kw)
        self._last = ""

    def show(self, *, source: str, mode: str, snap: Snapshot | None, title: str = "servewatch") -> str:
        width = self.size.width or 120
        text = self._header_line(source, mode, snap, title, compact=False, width=width)
        if text is None:  # too narrow for the labels: drop the label words, keep the values
            text = self._header_line(source, mode, snap, title, compact=True, width=width) or ""
        if text != self._last:
            self._last = text
            self.update(text)
        return text

    @staticmethod
    def _header_line(source: str, mode: str, snap: Snapshot | None, title: str, *, compact: bool, width: int) -> str | None:
        parts = [f"[b]{esc(title)}[/]"]
        if snap is not None and snap.synthetic:
            parts.append("[b reverse $sw-synthetic] SYNTHETIC [/]")
        if snap is not None and not snap.header and snap.requests_total:
            parts.append("[b $sw-warn]provenance unknown[/]")  # no run header (docs/record-format.md)
        badge_var = "$sw-warn" if mode.startswith("PAUSED") else "$primary"
        parts.append(f"[b reverse {badge_var}] {esc(mode)} [/]")
        if snap is not None:
            label = "" if compact else "[$sw-na]elapsed[/] "
            parts.append(f"{label}{fmt.duration(snap.run_elapsed_s)}")
            if snap.current_level is not None:
                rnd = f" round {snap.current_round}" if snap.current_round != 1 else ""
                label = "L" if compact else "[$sw-na]level[/] "
                parts.append(f"{label}{fmt.level(snap.current_level)}{rnd}")
        if snap is not None and snap.provenance_short:  # where the data came from (tui.core.provenance.short)
            parts.append(f"[$sw-na]{esc(snap.provenance_short)}[/]" if snap.header else f"[$sw-warn]{esc(snap.provenance_short)}[/]")
        res = None if snap is None else snap.settings
        if res is not None and res.rejudged:  # judged at other settings than the run's (tui.core.verdict_settings)
            parts.append("[b $sw-warn]re-judged (weaker)[/]" if res.weaker else "[b $sw-warn]re-judged[/]")
        ri = None if snap is None else snap.records_integrity
        if ri is not None and ri.state != "unverified":  # the digest chain (tui.core.chain): its label, the core's words
            style = "$sw-warn" if ri.state == "broken" else "$sw-na"
            parts.append(f"[{style}]{esc(ri.short)}[/]")
        src_label = "" if compact else "[$sw-na]source[/] "
        sep = " " if compact else "  "
        used = Content.from_markup(sep.join(parts) + sep + src_label).cell_length + 2  # 2: padding
        room = width - used
        if room < 12 and not compact:
            return None
        parts.append(f"{src_label}{esc(fmt.clip_left(source, max(1, room)))}")
        return sep.join(parts)


def budget_phrase(budget: BudgetResult | None, view: BudgetView | None = None) -> str:
    if view is not None:  # the core's words (tui.core.budgetview.BudgetView.phrase)
        if not view.known:
            return "budget: " + na("unknown")
        return "budget: " + (f"[$sw-good]{esc(view.phrase)}[/]" if view.state == "feasible" else f"[$sw-bad]{esc(view.phrase)}[/]")
    if budget is None:
        return "budget: " + na("unknown")
    if budget.fits:
        return f"budget: [$sw-good]feasible[/] (candidate {budget.candidate})"
    return "budget: [$sw-bad]does not fit[/]"


#: (terminal rows below which, reason lines): the verdict reason gets more lines on taller terminals.
REASON_LINES = ((34, 1), (50, 2))
REASON_LINES_MAX = 3


def reason_lines(rows: int) -> int:
    """How many lines the verdict reason may take on a terminal ``rows`` high."""
    for below, n in REASON_LINES:
        if rows < below:
            return n
    return REASON_LINES_MAX


def cells(markup: str) -> int:
    """Cells the markup takes on screen."""
    return Content.from_markup(markup).cell_length


def pack(parts: list[str], width: int) -> list[str]:
    """Markup parts on as few lines of ``width`` cells as they fit, in order; a part that starts a line
    drops its leading separator ("│ "). A part wider than the width gets a line of its own (and its
    end an ellipsis from the bar's CSS)."""
    lines: list[str] = []
    cur = ""
    for part in parts:
        if cur and cells(cur) + 2 + cells(part) <= width:
            cur += "  " + part
        else:
            if cur:
                lines.append(cur)
            cur = part.removeprefix("│ ")
    if cur:
        lines.append(cur)
    return lines


def wrap_reason(reason: str, width: int, lines: int) -> list[str]:
    """The reason in at most ``lines`` lines of ``width`` cells, word-wrapped; `` …`` when cut."""
    width = max(20, width)
    return textwrap.wrap(reason, width, max_lines=max(1, lines), placeholder=" …") or [""]


#: the drill's line, coloured by its verdict once decided (undecided: warn)
DRILL_STYLE = {"RECOVERED": "$sw-good", "NOT_RECOVERED": "$sw-bad", "INSUFFICIENT": "$sw-warn"}


class VerdictBar(Static):
    """Verdict, what is missing, budget and quality status, the reason, and the malformed-line counter."""

    def __init__(self, budget: BudgetResult | None = None, quality: str | None = None, **kw) -> None:
        super().__init__("", **kw)
        self.budget = budget
        self.quality = quality
        self.max_reason_lines = 2
        self._snap: Snapshot | None = None
        self._tip = ""

    def fit(self, rows: int) -> None:
        """The terminal is ``rows`` high: give the reason the lines that height allows."""
        n = reason_lines(rows)
        if n != self.max_reason_lines:
            self.max_reason_lines = n
            if self._snap is not None:
                self.update_snapshot(self._snap)

    def on_resize(self, event: events.Resize) -> None:
        if self._snap is not None:  # line breaks depend on the width
            self.update_snapshot(self._snap)

    def _width(self) -> int:
        w = self.content_size.width
        if not w:
            try:
                w = self.app.size.width - 2  # before the first layout: the padding is one cell each side
            except Exception:
                w = 118
        return max(20, w)

    def update_snapshot(self, snap: Snapshot) -> None:
        self._snap = snap
        width = self._width()
        v = snap.verdict
        words, var = VERDICT_STYLE.get(v.state, (v.state, "$sw-warn"))
        if snap.drill is not None and snap.drill.state:  # a judged drill: its verdict is the console's (and exit)
            words, var = DRILL_WORDS.get(snap.drill.state, snap.drill.state), DRILL_STYLE.get(snap.drill.state,
                                                                                              "$sw-warn")
        head = f"[b reverse {var}] {esc(words)} [/]"
        if v.missing and v.state == "INSUFFICIENT_WINDOW":
            head += f"  [{var}]{esc(v.missing)}[/]"
        lines = pack([head, *self.status_parts()], width)
        reason_lines = self.max_reason_lines
        drill = snap.drill
        if drill is not None:  # issue 39: "disturbance 0:42 ago, rolling good 62%, not yet recovered"
            var_d = DRILL_STYLE.get(drill.state or "", "$sw-warn")
            lines += [f"[{var_d}]{esc(part)}[/]" for part in wrap_reason(drill.line, width, 1 if reason_lines < 3
                                                                           else 2)]
            reason_lines = max(1, reason_lines - 1)
        lines += [f"[$sw-na]{esc(part)}[/]" for part in wrap_reason(v.reason, width, reason_lines)]
        issues = snap.malformed + snap.truncated + snap.unknown_types + snap.duplicates
        if issues:
            counts = [f"{snap.malformed} malformed"]
            if snap.truncated:
                counts.append(f"{snap.truncated} truncated")
            if snap.unknown_types:
                counts.append(f"{snap.unknown_types} unknown type")
            if snap.duplicates:
                counts.append(f"{snap.duplicates} repeated id")
            examples = "; ".join(esc(e) for e in snap.malformed_examples[:3])
            lines.append(f"[$sw-bad]lines skipped: {', '.join(counts)}[/]  [$sw-na]{examples}[/]")
        self.update("\n".join(lines))
        tip = f"{words}: {v.reason}" + (f" ({v.missing})" if v.missing else "")
        if tip != self._tip:
            self._tip = tip
            self.tooltip = tip

    def status_parts(self) -> list[str]:
        """The statuses beside the verdict, each starting with its separator."""
        view = None if self._snap is None else self._snap.budget_view
        parts = ["│ " + budget_phrase(self.budget, view),
                 "│ quality: " + (esc(self.quality) if self.quality else na("not run"))]
        res = None if self._snap is None else self._snap.settings
        if res is not None:  # the core's words: what it is re-judged at and the run's own verdict there
            rv = self._snap.run_verdict if self._snap is not None else None
            line = res.console_line(None if rv is None else rv.state)
            if line:
                parts.append(f"│ [$sw-warn]{esc(line)}[/]")
        note = None if self._snap is None else self._snap.cancelled_note
        if note:
            parts.append(f"│ [$sw-warn]{esc(note)}[/]")
        return parts
