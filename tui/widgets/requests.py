"""The request list: a Line-API widget that only ever renders the rows on screen.

A DataTable re-measures every added row; at max-speed replay that is hundreds of rows per
tick. This list keeps at most ``max_rows`` RequestRow objects and draws the visible ones
from them, so a tick costs the same whether 1 or 500 rows arrived.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

import tui.widgets.fmt as fmt
from tui.core.snapshot import RequestRow
from tui.core.textsafe import term

#: (title, width) of each column; the last one takes what is left.
COLUMNS = (("id", 18), ("level", 7), ("phase", 7), ("TTFT", 9), ("latency", 9), ("out tok", 8), ("outcome", 32))
_OUTCOME_VAR = {"good": "sw-good", "slow": "sw-warn", "failed": "sw-bad"}


def header_text() -> str:
    cells = []
    for (title, width) in COLUMNS:
        cells.append(title.rjust(width - 1) + " " if title in ("TTFT", "latency", "out tok") else title.ljust(width))
    return "".join(cells).rstrip()


def row_cells(r: RequestRow) -> list[tuple[str, str | None]]:
    """(text, theme variable or None) per column, already padded to the column widths."""
    lvl = fmt.level(r.level) + (f" r{r.round}" if r.round != 1 else "")
    outcome = term(r.outcome + (f" · {r.missed}" if r.missed else "") + (f" · {r.error}" if r.error else ""))
    w = dict(COLUMNS)
    return [  # drawn as segments, not markup: outside text (a request id) only needs its control characters shown
        (fmt.clip(term(r.id), w["id"] - 1).ljust(w["id"]), None),
        (fmt.clip(lvl, w["level"] - 1).ljust(w["level"]), None),
        (("warmup" if r.phase != "measure" else "").ljust(w["phase"]), "sw-na"),
        (fmt.ms(r.ttft_ms).rjust(w["TTFT"] - 1) + " ", "sw-na" if r.ttft_ms is None else None),
        (fmt.ms(r.latency_ms).rjust(w["latency"] - 1) + " ", None),
        (fmt.num(r.output_tokens).rjust(w["out tok"] - 1) + " ", None),
        (fmt.clip(outcome, w["outcome"]), _OUTCOME_VAR.get(r.outcome, "sw-na")),
    ]


class RequestList(ScrollView, can_focus=True):
    """Newest requests last; keeps the reader's place when they have scrolled away from the end."""

    DEFAULT_CSS = """
    RequestList {
        height: 1fr;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, max_rows: int = 500, **kw) -> None:
        super().__init__(**kw)
        self.max_rows = max_rows
        self.rows: deque[RequestRow] = deque()
        self._styles: dict[str, Style] | None = None
        self._follow = True
        self._width = sum(w for _, w in COLUMNS)

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, self._on_theme_changed)

    def _on_theme_changed(self, _theme) -> None:
        self._styles = None
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def at_end(self) -> bool:
        """Following the stream: the reader has not scrolled away from the newest rows."""
        return self._follow

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # every scroll (wheel, keys, scrollbar, or ours) decides whether we follow the stream
        self._follow = new_value >= self.max_scroll_y - 0.5

    def _pin(self, tries: int = 5) -> None:
        """Keep the newest rows in view while following (run after layout has caught up)."""
        if not self._follow or self.scroll_y >= self.max_scroll_y:
            return
        if not self.show_vertical_scrollbar:
            # the scrollbar for the new rows is not laid out yet: scrolling now would be ignored
            if tries > 0:
                self.call_after_refresh(self._pin, tries - 1)
            return
        self.scroll_target_y = self.scroll_y = self.max_scroll_y

    def on_resize(self, event) -> None:
        self.call_after_refresh(self._pin)

    def clear(self) -> None:
        self._follow = True
        self.rows.clear()
        self.virtual_size = Size(self._width, 0)
        self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()

    def append(self, new: Iterable[RequestRow]) -> int:
        """Add rows at the end; returns how many old rows were trimmed from the top."""
        follow = self._follow
        rows = self.rows
        rows.extend(new)
        trimmed = 0
        while len(rows) > self.max_rows:
            rows.popleft()
            trimmed += 1
        self.virtual_size = Size(self._width, len(rows))
        # scrolling waits for the refresh that applies the new virtual size
        if follow:
            self.call_after_refresh(self._pin)
        elif trimmed:
            # the rows above the reader went away: move up with them so the same rows stay in view
            self.scroll_to(y=max(0.0, self.scroll_y - trimmed), animate=False, immediate=True)
        self.refresh()
        return trimmed

    def _resolve_styles(self) -> dict[str, Style]:
        if self._styles is None:
            vars_ = getattr(self.app, "theme_variables", {}) or {}
            bg = _colour(vars_.get("surface")) or _colour(vars_.get("background")) or Color(0, 0, 0)
            out: dict[str, Style] = {}
            for name in ("sw-good", "sw-warn", "sw-bad", "sw-na"):
                c = _colour(vars_.get(name))
                if c is not None and c.a < 1:
                    c = bg.blend(c.with_alpha(1.0), c.a)
                out[name] = Style(color=c.rich_color) if c is not None else Style()
            self._styles = out
        return self._styles

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self.rows) or index < 0:
            return Strip.blank(width, base)
        styles = self._resolve_styles()
        segments = [Segment(text, base + styles[var] if var else base) for text, var in row_cells(self.rows[index])]
        strip = Strip(segments).extend_cell_length(max(width + scroll_x, self._width), base)
        return strip.crop(scroll_x, scroll_x + width)


def _colour(value: str | None) -> Color | None:
    if not value:
        return None
    try:
        return Color.parse(value)
    except Exception:
        return None
