"""A multi-row sparkline with an optional target line, coloured by theme variables.

Textual's own ``Sparkline`` is one row high and has no reference line; the console
needs "good fraction against the 95% target" and "P95 against the SLO" at a glance.
The widget only scales values the snapshot already holds into block characters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

_BLOCKS = " ▁▂▃▄▅▆▇█"


class TargetSparkline(Widget):
    """Bars for the newest values (one per column), a dashed target row, colours by side.

    ``higher_is_better``: bars at/above the target are good (good fraction); otherwise bars
    above the target are bad (latency).
    """

    DEFAULT_CSS = """
    TargetSparkline {
        height: 3;
        width: 1fr;
    }
    """

    values: reactive[tuple[float, ...]] = reactive((), layout=False)

    def __init__(
        self,
        target: float | None = None,
        *,
        higher_is_better: bool = True,
        floor: float | None = None,
        ceiling: float | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.target = target
        self.higher_is_better = higher_is_better
        self.floor = floor
        self.ceiling = ceiling

    def set_data(self, values: Sequence[float], target: float | None = None) -> None:
        if target is not None:
            self.target = target
        clean = tuple(v for v in values if v is not None and math.isfinite(v))
        if clean != self.values:
            self.values = clean
        else:
            self.refresh()

    def _range(self, vals: Sequence[float]) -> tuple[float, float]:
        lo, hi = min(vals), max(vals)
        if self.target is not None:
            lo, hi = min(lo, self.target), max(hi, self.target)
        if self.higher_is_better:
            lo -= max((hi - lo) * 0.25, 0.02)  # headroom below, so the lowest bar still shows
            if self.floor is not None:
                lo = max(self.floor, lo)
            if self.ceiling is not None:
                hi = max(self.ceiling, hi)
        else:
            lo = 0.0 if self.floor is None else self.floor
            hi = hi * 1.1 if hi > 0 else 1.0
        if hi - lo < 1e-12:
            hi = lo + 1.0
        return lo, hi

    def render(self) -> Content:
        width = max(1, self.size.width)
        height = max(1, self.size.height)
        vals = list(self.values)[-width:]
        if not vals:
            rows = [" " * width] * (height - 1) + ["no data yet"[:width].ljust(width)]
            return Content.from_markup("[$sw-na]" + "\n".join(rows) + "[/]")
        lo, hi = self._range(vals)
        span = hi - lo
        eighths_total = height * 8
        pad = width - len(vals)
        levels = [max(1, int(round((v - lo) / span * eighths_total))) for v in vals]  # every bucket shows
        target_row = None
        if self.target is not None and lo <= self.target <= hi:
            # the row whose band contains the target (0 = bottom)
            target_row = min(height - 1, int((self.target - lo) / span * height))
        out_rows = []
        for r in range(height - 1, -1, -1):
            parts = ["[$sw-na]" + "┄" * pad + "[/]" if target_row == r and pad else " " * pad]
            for v, lv in zip(vals, levels):
                cell_eighths = min(8, max(0, lv - r * 8))
                if cell_eighths == 0:
                    parts.append("[$primary]┄[/]" if target_row == r else " ")
                    continue
                ch = _BLOCKS[cell_eighths]
                if self.target is None:
                    var = "$primary"
                elif self.higher_is_better:
                    var = "$sw-good" if v >= self.target else "$sw-bad"
                else:
                    var = "$sw-good" if v <= self.target else "$sw-bad"
                parts.append(f"[{var}]{ch}[/]")
            out_rows.append("".join(parts))
        return Content.from_markup("\n".join(out_rows))
