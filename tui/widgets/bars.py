"""The header bar (title, SYNTHETIC, source, mode, elapsed) and the verdict bar (always visible)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.core.snapshot import Snapshot
from tui.widgets import fmt
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
        badge_var = "$sw-warn" if mode.startswith("PAUSED") else "$primary"
        parts.append(f"[b reverse {badge_var}] {esc(mode)} [/]")
        if snap is not None:
            label = "" if compact else "[$sw-na]elapsed[/] "
            parts.append(f"{label}{fmt.duration(snap.run_elapsed_s)}")
            if snap.current_level is not None:
                rnd = f" round {snap.current_round}" if snap.current_round != 1 else ""
                label = "L" if compact else "[$sw-na]level[/] "
                parts.append(f"{label}{fmt.level(snap.current_level)}{rnd}")
        src_label = "" if compact else "[$sw-na]source[/] "
        sep = " " if compact else "  "
        used = Content.from_markup(sep.join(parts) + sep + src_label).cell_length + 2  # 2: padding
        room = width - used
        if room < 12 and not compact:
            return None
        parts.append(f"{src_label}{esc(fmt.clip_left(source, max(1, room)))}")
        return sep.join(parts)


def budget_phrase(budget) -> str:
    if budget is None:
        return "budget: " + na("N/A")
    if getattr(budget, "fits", False):
        return f"budget: [$sw-good]feasible[/] (candidate {budget.candidate})"
    return "budget: [$sw-bad]does not fit[/]"


class VerdictBar(Static):
    """Verdict, what is missing, budget and quality status, and the malformed-line counter."""

    def __init__(self, budget=None, quality: str | None = None, **kw) -> None:
        super().__init__("", **kw)
        self.budget = budget
        self.quality = quality

    def update_snapshot(self, snap: Snapshot) -> None:
        v = snap.verdict
        words, var = VERDICT_STYLE.get(v.state, (v.state, "$sw-warn"))
        first = [f"[b reverse {var}] {words} [/]"]
        if v.missing and v.state == "INSUFFICIENT_WINDOW":
            first.append(f"[{var}]{esc(v.missing)}[/]")
        first.append("│ " + budget_phrase(self.budget))
        first.append("│ quality: " + (esc(self.quality) if self.quality else na("not run")))
        lines = ["  ".join(first), f"[$sw-na]{esc(v.reason)}[/]"]
        if snap.cancelled_note:
            lines.append(f"[$sw-warn]{esc(snap.cancelled_note)}[/]")
        issues = snap.malformed + snap.truncated + snap.unknown_types
        if issues:
            counts = [f"{snap.malformed} malformed"]
            if snap.truncated:
                counts.append(f"{snap.truncated} truncated")
            if snap.unknown_types:
                counts.append(f"{snap.unknown_types} unknown type")
            examples = "; ".join(esc(e) for e in snap.malformed_examples[:3])
            lines.append(f"[$sw-bad]lines skipped: {', '.join(counts)}[/]  [$sw-na]{examples}[/]")
        self.update("\n".join(lines))
