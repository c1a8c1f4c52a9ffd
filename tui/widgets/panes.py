"""The panes of the console. Each takes a Snapshot and shows it; none computes a metric.

Numbers match the keys that maximise them: 1 budget, 2 requests, 3 good fraction,
4 latency (TTFT by default; ``l`` cycles its views: ``tui.widgets.latency``), 5 queue, 6 GPU memory, 7 sweep (``tui.widgets.sweep``; shown in the grid only
when the run has more than one load level).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

import tui.core.defaults as defaults
import tui.widgets.fmt as fmt
from tui.core.budget.results import BudgetResult
from tui.core.budgetview import BudgetView
from tui.core.snapshot import GpuState, Snapshot, WindowStat
from tui.widgets.fmt import esc, na, sev
from tui.widgets.latency import VIEW_TITLES, VIEWS, all_markup, metric_markup, next_view, pct_cell
from tui.widgets.requests import RequestList, header_text
from tui.widgets.sparkline import TargetSparkline

PANES = {
    1: ("budget", "Budget"),
    2: ("requests", "Requests"),
    3: ("good", "Good fraction"),
    4: ("ttft", "Latency"),
    5: ("queue", "Queue"),
    6: ("gpu", "GPU memory"),
    7: ("sweep", "Sweep"),
}


if TYPE_CHECKING:  # the mixin is only ever mixed into a Widget: let the checker see the Widget it uses
    from textual.widget import Widget as _PaneBase
else:
    _PaneBase = object


class PaneMixin(_PaneBase):
    """Shared bits: numbered border title, snapshot hook; keys 1-7 maximise a pane (``Screen.maximize``)."""

    ALLOW_MAXIMIZE = True
    number: int = 0
    _snap: Snapshot | None = None  # the last snapshot shown (re-rendered on resize)

    def _init_pane(self, number: int) -> None:
        self.number = number
        key, title = PANES[number]
        self.border_title = f"{number} {title}"
        self.add_class("pane")

    def update_snapshot(self, snap: Snapshot) -> None:  # pragma: no cover - overridden
        pass

    def show_snapshot(self, snap: Snapshot) -> None:
        """Remember the snapshot (to re-render on resize) and render it."""
        self._snap = snap
        self.update_snapshot(snap)

    def on_resize(self, event) -> None:
        snap = self._snap
        if snap is not None:  # sparklines, bars and inline notes depend on the width
            self.update_snapshot(snap)


# --------------------------------------------------------------------------- 1 budget


class BudgetPane(PaneMixin, VerticalScroll):
    """The memory budget: table, variants, assumptions, and what the candidate means."""

    _view: BudgetView | None = None  # the budget view shown (the snapshot's)

    def __init__(self, budget: BudgetResult | None = None, **kw) -> None:
        super().__init__(**kw)
        self.budget = budget
        self._init_pane(1)
        self.border_subtitle = "scroll · 1 maximises"

    def compose(self) -> ComposeResult:
        yield Static(self.budget_markup(), id="budget-text")

    def update_snapshot(self, snap: Snapshot) -> None:
        view = snap.budget_view
        if view is not None and view != self._view:  # the file's budget record, server capacity
            self._view = view
            if snap.budget is not None:
                self.budget = snap.budget
            self.query_one("#budget-text", Static).update(self.budget_markup())

    def budget_markup(self) -> str:
        b = self.budget
        view = self._view
        server = [] if view is None or not view.capacity_line else ["", f"[b]server[/] {esc(view.capacity_line)}"]
        if view is not None and view.allocation:  # the config's prediction beside the engine's own allocation
            server.append(f"[b]allocation[/] predicted vs engine: {esc(str(view.allocation.get('result', '?')))}")
        if view is not None and view.server_log_line:  # --server-log: the engine's startup line
            server.append(f"[b]server log[/] {esc(view.server_log_line)}")
        if b is None:
            hint = view.hint if view is not None and view.hint else "pass the budget flags, --config or --budget FILE"
            problem = [] if view is None or not view.problem else [sev(esc(view.problem), "bad")]
            return "\n".join([sev("budget unknown", "na", bold=True), f"[$sw-na]{esc(hint)}[/]", *problem, *server])
        gpu = b.gpu_gib
        fits = b.fits
        origin = [] if view is None or not view.origin else [f"[$sw-na]from {esc(view.origin)}[/]"]
        teaching = [] if view is None or not view.teaching else [
            "[b reverse $sw-warn] TEACHING CASE [/] [$sw-warn]an example, not this run's model[/]"]
        kv_space = b.inputs.kv_space_bytes
        memory = view.memory if view is not None and view.memory else None
        if memory and kv_space:  # the KV space itself (issue 22): its label, no GPU size nobody gave
            head = esc(memory.partition(":")[0])
        else:
            head = f"GPU {fmt.num(gpu, 0) if gpu is None else f'{gpu:g}'} GiB"
        if memory and view is not None and memory.partition(": ")[2] == view.origin:
            memory = None  # the label adds nothing to "from <origin>" (flags, a file, the teaching case)
        if kv_space:  # the KV space itself: weights and margin are not subtracted from it, so not shown as if
            costs = [_row("weights, margin", "not subtracted")]
        else:
            costs = [_row("weights", fmt.gib(b.weights_gib)), _row("runtime margin", fmt.gib(b.margin_gib))]
        lines = [
            *teaching,
            f"[b]per GPU[/] · {head} · "
            + (sev("fits", "good", bold=True) if fits else sev("does not fit", "bad", bold=True)),
            *origin,
            *([f"[$sw-na]memory: {esc(memory)}[/]"] if memory else []),
            *costs,
            _row("KV per sequence", fmt.gib(b.kv_per_seq_gib)),
            _row("cache budget", fmt.gib(b.cache_budget_gib)),
            "[b]" + _row("memory-only candidate", f"{b.candidate} seq") + "[/]",
            "[$sw-warn]The candidate is a number to test,\nnot a limit.[/]",
            *server,
        ]
        if not fits:
            lines.append(sev(esc(b.verdict), "bad"))
        variants = list(b.variants)
        if variants:
            lines.append("")
            lines.append(
                "[b]" + "what if".ljust(13) + "[/]" + "wts".rjust(6) + "KV".rjust(5) + "cache".rjust(6) + "cand".rjust(5)
            )
            notes = []
            for v in variants:
                short, _, detail = v.name.partition(" (")
                lines.append(
                    esc(fmt.clip(short, 13).ljust(13))
                    + f"{v.weights_gib:6.2f}{v.kv_per_seq_gib:5.2f}{v.cache_budget_gib:6.2f}{v.candidate:5d}"
                )
                if detail:
                    notes.append(f"[$sw-na]{esc(short)}: {esc(detail.rstrip(')'))}[/]")
            lines.append("[$sw-na]GiB per GPU; cand = sequences[/]")
            lines.extend(notes)
        assumptions = list(b.assumptions)
        if assumptions:
            lines.append("")
            lines.append("[b]Not measured (assumptions)[/]")
            lines.extend(f"• {esc(a)}" for a in assumptions)
        return "\n".join(lines)


def _row(label: str, value: str, width: int = 22) -> str:
    return f"{label.ljust(width)}{value.rjust(13)}"


# --------------------------------------------------------------------------- 2 requests


class RequestsPane(PaneMixin, Vertical):
    """Newest finished requests (snapshot.recent), capped; keeps the reader's place when scrolled back."""

    MAX_ROWS = 500

    def __init__(self, max_rows: int = MAX_ROWS, **kw) -> None:
        super().__init__(**kw)
        self.max_rows = max_rows
        self._last_key: tuple | None = None
        self._init_pane(2)

    def compose(self) -> ComposeResult:
        yield Static("[b]" + esc(header_text()) + "[/]", id="requests-header")
        yield RequestList(self.max_rows, id="requests-list")

    @property
    def list(self) -> RequestList:
        return self.query_one(RequestList)

    def at_end(self) -> bool:
        return self.list.at_end()

    @property
    def row_count(self) -> int:
        return self.list.row_count

    def update_snapshot(self, snap: Snapshot) -> None:
        recent = snap.recent
        lst = self.list
        new = recent
        if self._last_key is not None:
            idx = None
            for j in range(len(recent) - 1, -1, -1):
                r = recent[j]
                if (r.id, r.t_end, r.round) == self._last_key:
                    idx = j
                    break
            if idx is None:  # the last row we showed is gone from the snapshot: start over
                lst.clear()
            else:
                new = recent[idx + 1 :]
        if new:
            lst.append(new[-self.max_rows :])
            last = new[-1]
            self._last_key = (last.id, last.t_end, last.round)
        self.border_subtitle = f"{lst.row_count} newest, {snap.requests_total:,} in all"


# --------------------------------------------------------------------------- 3 good fraction


#: how each drill phase is drawn in the band strip (character, theme colour)
DRILL_CELLS = {"baseline": ("─", "$sw-na"), "disturbance": ("█", "$sw-bad"), "recovery": ("▒", "$sw-warn"),
               "": (" ", "$sw-na")}


def drill_strip(view, width: int, target: str) -> str:
    """A drill's phases over its time as one row of cells (the core's ``DrillView.cells``), the recovery point as
    ``▼``, and a legend line."""
    out = []
    for name, mark in view.cells(width):
        ch, var = DRILL_CELLS.get(name, (" ", "$sw-na"))
        out.append("[b $sw-good]▼[/]" if mark else f"[{var}]{ch}[/]")
    dist = next((b.label for b in view.bands if b.name == "disturbance" and b.label), "disturbance")
    legend = (f"[$sw-na]─ baseline [/][$sw-bad]█[/][$sw-na] {esc(dist)} [/][$sw-warn]▒[/][$sw-na] recovery[/]"
              + (" [b $sw-good]▼[/][$sw-na] recovered[/]" if view.recovery_point is not None else "")
              + f"[$sw-na] · ┄ target {target}[/]")
    return "".join(out) + "\n" + legend


def _window_label(w: WindowStat) -> str:
    return esc(w.label)


class GoodFractionPane(PaneMixin, Vertical):
    """Rolling and cumulative good fraction with n and the descriptive interval; sparkline vs target."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._init_pane(3)

    def compose(self) -> ComposeResult:
        yield Static(id="good-text")
        yield TargetSparkline(defaults.TARGET, higher_is_better=True, floor=0.0, ceiling=1.0, id="good-spark")
        yield Static(id="good-legend")

    def update_snapshot(self, snap: Snapshot) -> None:
        lines = []
        for w in (snap.rolling, snap.cumulative):
            g = w.good
            kind = "rolling" if w is snap.rolling else "cumulative"
            where = _window_label(w) if w.label != kind else (
                f"level {fmt.level(snap.current_level)}" if snap.current_level is not None else "")
            lines.append(f"[b]{kind}[/]" + (f" [$sw-na]· {where}[/]" if where else ""))
            if g.n == 0:
                lines.append("  " + na() + "  [$sw-na]n 0[/]")
            else:
                lines.append(
                    "  " + sev(fmt.pct(g.fraction), g.severity, bold=True)
                    + f"  n {g.n:,}  [$sw-na]({fmt.interval(g.lo, g.hi)})[/]"
                )
        lines.append(f"[$sw-na]good:[/] {fmt.esc(snap.slos.describe())}")  # the SLOs in force, each named
        lines.append(f"target {fmt.pct(snap.target, 0)} [$sw-na]· (…) not the verdict[/]")
        self.query_one("#good-text", Static).update("\n".join(lines))
        self.query_one("#good-spark", TargetSparkline).set_data(snap.good_series, snap.target)
        legend = f"[$sw-na]per time bucket · ┄ target {fmt.pct(snap.target, 0)}[/]"
        if snap.drill is not None:  # issue 39: the drill's phases as bands, the recovery point as a marker
            legend = drill_strip(snap.drill, max(10, self.size.width - 4), fmt.pct(snap.target, 0))
        self.query_one("#good-legend", Static).update(legend)


# --------------------------------------------------------------------------- 4 TTFT


class TtftPane(PaneMixin, Vertical):
    """The latency pane. Its default view: TTFT P50/P95/P99 rolling and cumulative with n.

    Unsupported values carry the one mark, a *, and a legend line spells out "insufficient n" with the n each
    percentile needs, at every width (the text report, JSON and pages use the same rule: tui.core.stats).
    Key ``l`` (the console's) cycles the views (``tui.widgets.latency.VIEWS``): all four metrics, then TPOT,
    inter-token latency and end-to-end each large, then back to TTFT.
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._init_pane(4)
        self.view = VIEWS[0]
        self._title_view()

    def compose(self) -> ComposeResult:
        yield Static(id="ttft-text")
        yield TargetSparkline(defaults.SLO_TTFT_MS, higher_is_better=False, id="ttft-spark")
        yield Static(id="ttft-legend")

    def _title_view(self) -> None:
        self.border_title = f"{self.number} {VIEW_TITLES[self.view]}"
        self.border_subtitle = "l switches"

    def set_view(self, view: str | None = None) -> str:
        """Show ``view`` (None: the next one in the ``l`` cycle); re-renders the last snapshot. Only the TTFT
        view has a per-bucket series, so the sparkline shows there only. Returns the view now shown."""
        self.view = next_view(self.view) if view is None else (view if view in VIEWS else VIEWS[0])
        self._title_view()
        ttft = self.view == "ttft"
        for wid in ("#ttft-spark", "#ttft-legend"):
            self.query_one(wid).display = ttft
        snap = self._snap
        if snap is not None:
            self.update_snapshot(snap)
        return self.view

    def update_snapshot(self, snap: Snapshot) -> None:
        width = self.content_size.width or 38
        if self.view != "ttft":
            text = all_markup(snap, width) if self.view == "all" else metric_markup(snap, self.view, width)
            self.query_one("#ttft-text", Static).update(text)
            return
        windows = (snap.rolling, snap.cumulative)
        cells = []
        for w in windows:
            by_q = {p.label: p for p in w.ttft}
            cells.append([pct_cell(by_q.get(lbl)) for lbl in ("P50", "P95", "P99")])
        colw = max([wd for col in cells for _, wd in col] + [10]) + 2
        head = "    [b]rolling[/]" + " " * (colw - len("rolling")) + "[b]cumulative[/]"
        rows = [head]
        for i, lbl in enumerate(("P50", "P95", "P99")):
            left, lw = cells[0][i]
            right, _ = cells[1][i]
            rows.append(f"{lbl:<4}{left}{' ' * (colw - lw)}{right}")
        n_left = f"{snap.rolling.completed:,}"
        rows.append(f"[$sw-na]{'n':<4}{n_left}{' ' * (colw - len(n_left))}{snap.cumulative.completed:,}[/]")
        needs = sorted({(p.label, p.n_needed) for w in windows for p in w.ttft
                        if p.value_ms is not None and not p.supported})
        if needs:
            need_text = ", ".join(f"{lbl} {n}" for lbl, n in needs)
            if len("* insufficient n (needs )") + len(need_text) <= width:
                rows.append(f"[$sw-warn]* insufficient n[/] [$sw-na](needs {need_text})[/]")
            else:
                rows.append("[$sw-warn]* insufficient n[/] [$sw-na]· n needed:[/]")
                rows.append(f"[$sw-na]  {need_text}[/]")
        if any(p.approximate for w in windows for p in w.ttft):
            rows.append("[$sw-na]≈ from the streaming sketch (±1%)[/]")
        self.query_one("#ttft-text", Static).update("\n".join(rows))
        ttft_slo = snap.slos.ttft_ms  # None: the TTFT SLO is off (no SLO line)
        self.query_one("#ttft-spark", TargetSparkline).set_data(snap.p95_series, ttft_slo)
        self.query_one("#ttft-legend", Static).update(
            "[$sw-na]P95 per bucket" + ("" if ttft_slo is None else f" · ┄ SLO {fmt.ms(ttft_slo)}") + "[/]")


# --------------------------------------------------------------------------- 5 queue


class QueuePane(PaneMixin, Vertical):
    """Server waiting/running, KV-cache usage, client in-flight, over time; N/A without a source."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._init_pane(5)

    def compose(self) -> ComposeResult:
        yield Static(id="queue-text")

    def update_snapshot(self, snap: Snapshot) -> None:
        q = snap.queue
        width = max(4, self.content_size.width - 18)
        lines = []
        if q.source is None:
            lines.append("server  " + na("N/A") + " [$sw-na](no server metrics source)[/]")
        else:
            lines.append(f"server  [$sw-na]{esc(q.source)}[/]")
            lines.append(_series_line("waiting", fmt.num(q.waiting), q.waiting_series, width))
            lines.append(_series_line("running", fmt.num(q.running), q.running_series, width))
            if q.max_waiting is not None:
                lines.append(f"[$sw-na]max waiting {fmt.num(q.max_waiting)}[/]")
            if q.kv_cache_usage is None:
                lines.append("KV cache " + na())
            else:
                filled, empty = fmt.bar(q.kv_cache_usage, max(4, width - 2))
                s = "good" if q.kv_cache_usage < 0.9 else "warn" if q.kv_cache_usage < 0.98 else "bad"
                lines.append(
                    f"KV cache {fmt.pct(q.kv_cache_usage, 0):>6} "
                    + sev("█" * filled, s) + "[$sw-na]" + "░" * empty + "[/]"
                )
        pc = snap.prefix_cache_text  # issue 23: computed by the Monitor, shown when known
        if pc:
            lines.append(f"prefix cache [$sw-na]{esc(pc)}[/]")
        if q.client_in_flight is None:
            lines.append("client in-flight " + na())
        else:
            lines.append(_series_line("in-flight", fmt.num(q.client_in_flight), q.in_flight_series, width))
        self.query_one("#queue-text", Static).update("\n".join(lines))


def _series_line(label: str, value: str, series, width: int) -> str:
    value_markup = na(value) if value == fmt.NA_TEXT else f"[b]{value}[/]"
    pad = " " * max(0, 6 - len(value))
    sp = fmt.spark(series, width, lo=0.0)
    return f"{label:<10}{pad}{value_markup} [$primary]{sp}[/]"


# --------------------------------------------------------------------------- 6 GPU memory


class GpuPane(PaneMixin, Vertical):
    """Used vs total per device against the predicted ceiling; 'no GPU telemetry' when none."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._init_pane(6)

    def compose(self) -> ComposeResult:
        yield Static(id="gpu-text")

    def update_snapshot(self, snap: Snapshot) -> None:
        g = snap.gpu
        width = max(10, self.content_size.width)
        lines = []
        ref = [f"[$sw-na]│ predicted now[/] {fmt.gib(g.predicted_gib, 1)}",
               f"[$sw-na]┃ ceiling[/]       {fmt.gib(g.ceiling_gib, 1)}"]
        host = host_lines(snap.host, g.kv_ceiling_gib if g.ceiling_gib is None else None)
        if (not g.available or not g.devices) and host:
            lines.extend(host)  # issue 41: no GPU read: the host's memory and CPU, labelled host
            lines.append(f"[$sw-na]no GPU telemetry: {esc(g.note) if g.note and g.note != 'no GPU telemetry' else 'no gpu records in this run'}[/]")
        elif not g.available or not g.devices:
            lines.append(sev("no GPU telemetry", "na", bold=True))
            lines.append(f"[$sw-na]{esc(g.note) if g.note and g.note != 'no GPU telemetry' else 'no gpu records in this run'}[/]")
            lines.append("[$sw-na]budget (per GPU):[/]")
            lines.extend(ref)
        else:
            for d in g.devices:
                name = fmt.clip(d.name or "GPU", max(6, width - 18))
                util = "" if d.utilization is None else f"  util {d.utilization:.0f}%"
                lines.append(f"[b]GPU{d.device}[/] {esc(name)}[$sw-na]{util}[/]")
                lines.append(
                    "used " + sev(fmt.gib(d.used_gib, 1), d.severity, bold=True)
                    + f" / {fmt.gib(d.total_gib, 1)}"
                    + (f"  [$sw-na]peak {fmt.num(d.peak_used_gib, 1)}[/]" if d.peak_used_gib is not None else "")
                )
                lines.append(_memory_bar(d, g, width))
                sp = fmt.spark(d.used_series, max(4, width - 8), lo=0.0, hi=d.total_gib)
                if sp:
                    lines.append(f"[$sw-na]history[/] [$primary]{sp}[/]")
            lines.extend(ref)
        lines.extend(_engine_kv_lines(g, width))
        self.query_one("#gpu-text", Static).update("\n".join(lines))


def host_lines(host: dict, kv_ceiling_gib: float | None) -> list[str]:
    """The host block of the memory pane when no GPU is read (issue 41): the local server's RSS when its PID is
    known, else the system's memory used / total, and CPU %; the budget's KV ceiling beside it when the budget is
    of the KV space itself (``--kv-cache-gib``: CPU memory for a CPU-served model). Labelled host, never GPU.
    [] when the run recorded no host sample."""
    gib = 1024.0 ** 3
    used, total = host.get("memory_used"), host.get("memory_total")
    rss, pid, cpu = host.get("server_rss"), host.get("server_pid"), host.get("cpu_percent")
    if used is None and rss is None and cpu is None:
        return []
    out = ["[b]host[/] [$sw-na](no GPU read: the host's memory and CPU)[/]"]
    if rss is not None:
        out.append(f"server RSS [b]{fmt.gib(rss / gib, 2)}[/] [$sw-na](pid {pid})[/]")
    if used is not None and total:
        frac = used / total
        level = "bad" if frac >= 0.95 else "warn" if frac >= 0.85 else "good"
        label = "system memory" if rss is not None else "memory used"
        out.append(f"{label} " + sev(fmt.gib(used / gib, 1), level, bold=rss is None) + f" / {fmt.gib(total / gib, 1)}")
    if cpu is not None:
        out.append(f"CPU {cpu:.0f}%")
    if kv_ceiling_gib is not None:
        out.append(f"[$sw-na]┃ budget KV ceiling[/] {fmt.gib(kv_ceiling_gib, 2)} [$sw-na](host memory)[/]")
    return out


def _engine_kv_lines(g: GpuState, width: int) -> list[str]:
    """The engine's own KV memory in use (GpuState.engine_kv_*) against the budget's predicted KV ceiling."""
    if g.engine_kv_samples == 0:
        return []
    if g.engine_kv_allocated_gib is None and g.available and g.devices:
        return []  # NVML reads the GPU; a bare usage fraction without the engine's KV bytes adds little beside it
    lines = ["", "[b]engine KV cache[/]"]
    if g.engine_kv_allocated_gib is None:  # the usage fraction only: the engine did not state its KV bytes
        peak = "" if g.engine_kv_peak_usage is None else f"  [$sw-na]peak {g.engine_kv_peak_usage:.0%}[/]"
        lines.append(f"in use {g.engine_kv_usage:.0%} of its KV space{peak}")
        lines.append("[$sw-na]the engine did not state its KV bytes (kv_cache_memory_bytes)[/]")
        return lines
    lines.append(f"[$sw-na]{esc(g.engine_kv_label or '')}[/]")
    peak = "" if g.engine_kv_peak_gib is None else f"  [$sw-na]peak {g.engine_kv_peak_gib:.2f}[/]"
    lines.append(f"used [b]{g.engine_kv_used_gib:.2f}[/] / {g.engine_kv_allocated_gib:.2f} GiB allocated{peak}")
    sp = fmt.spark(g.engine_kv_series, max(4, width - 8), lo=0.0, hi=g.engine_kv_allocated_gib)
    if sp:
        lines.append(f"[$sw-na]history[/] [$primary]{sp}[/]")
    ceiling = "unknown (no budget)" if g.kv_ceiling_gib is None else f"{g.kv_ceiling_gib:.2f} GiB"
    lines.append(f"[$sw-na]predicted KV ceiling[/] {ceiling}")
    return lines


def _memory_bar(d, g, width: int) -> str:
    """Used memory as a bar over total, with markers at the predicted use (│) and ceiling (┃)."""
    total = d.total_gib
    if not total or d.used_gib is None:
        return na("used N/A")
    cells = []
    used_n = int(round(min(1.0, d.used_gib / total) * width))
    marks = {}
    if g.predicted_gib is not None and g.predicted_gib <= total:
        marks[min(width - 1, int(g.predicted_gib / total * width))] = "│"
    if g.ceiling_gib is not None and g.ceiling_gib <= total:
        marks[min(width - 1, int(g.ceiling_gib / total * width))] = "┃"
    for i in range(width):
        if i in marks:
            cells.append(f"[b $foreground]{marks[i]}[/]")
        elif i < used_n:
            cells.append(sev("█", d.severity))
        else:
            cells.append("[$sw-na]░[/]")
    return "".join(cells)
