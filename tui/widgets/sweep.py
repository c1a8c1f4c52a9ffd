"""7 Sweep: good fraction per load level against the target line, with the memory-only candidate
and the measured capacity on the same level axis.

Every figure comes from elsewhere: the good fraction, n, interval and verdict of each level and
round from the snapshot (``Snapshot.levels``, one ``LevelRow`` per level and round); the measured
capacity, what limits it and the candidate's place on the axis from ``Snapshot.capacity`` (the core's
``tui.core.capacity.measure_capacity``, the function `servewatch sweep` and `accept` use). The pane only
scales fractions into bar cells and picks the theme variable of each row's verdict.

One row per (level, round), lowest level first::

    lvl   good fraction       ┊ target 95%
      1   ████████████████████┊█ 100.0% PASS
      4   ████████████████████┊▍  97.0% PASS
          ╌╌ measured capacity 4 ╌╌╌╌╌╌╌╌╌╌╌╌╌╌
      8   ██████              ┊   30.0% FAIL
     15 ◆ memory-only candidate (not tested)
"""

from __future__ import annotations

import textwrap
from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

import tui.widgets.fmt as fmt
from tui.core.compare import baseline_for
from tui.core.snapshot import LevelRow, Snapshot
from tui.widgets.fmt import VERDICT_STYLE, esc, na
from tui.widgets.latency import METRICS, ms_text, percentiles
from tui.widgets.panes import PaneMixin

_EIGHTHS = " ▏▎▍▌▋▊▉█"
TARGET_MARK = "┊"
CANDIDATE_MARK = "◆"
TRACK = "·"
#: Verdict state -> the short word of the narrow layout (the wide one spells VERDICT_STYLE out).
SHORT_STATE = {"PASS": "PASS", "FAIL": "FAIL", "UNDECIDED": "UNDEC", "INSUFFICIENT_WINDOW": "INSUF"}
WIDE_AT = 80  # content columns from which n, the interval and the full verdict words are shown
WIDE_BAR_MAX = 60  # bar cells at most (a longer bar reads no better)


def tested_rows(snap: Snapshot) -> list[LevelRow]:
    """The snapshot's level rows that sit on the level axis (level known), lowest level first."""
    return sorted((r for r in snap.levels if r.level is not None), key=lambda r: (r.level, r.round))


def is_sweep(snap: Snapshot | None) -> bool:
    """More than one load level (a ramp or a sweep): the console shows the sweep pane."""
    if snap is None:
        return False
    return len({r.level for r in snap.levels if r.level is not None}) > 1


def bar_markup(fraction: float | None, target: float | None, cells: int, var: str) -> str:
    """``cells`` bar cells for a 0..1 fraction (eighth-block resolution), coloured ``var``, with the
    target line drawn as an extra column between the cells below and above the target."""
    cells = max(1, cells)
    tcol = None if target is None else min(cells, max(0, round(target * cells)))
    eighths = 0 if fraction is None else round(min(1.0, max(0.0, fraction)) * cells * 8)
    out: list[str] = []
    run_var: str | None = None
    run: list[str] = []

    def put(ch: str, v: str) -> None:
        nonlocal run_var
        if v != run_var and run:
            out.append(f"[{run_var}]{''.join(run)}[/]")
            run.clear()
        run_var = v
        run.append(ch)

    for i in range(cells + 1):
        if i == tcol:
            put(TARGET_MARK, "b $foreground")
        if i == cells:
            break
        amount = min(8, max(0, eighths - 8 * i))
        if amount:
            put(_EIGHTHS[amount], var)
        else:
            put(TRACK, "$sw-na")
    if run:
        out.append(f"[{run_var}]{''.join(run)}[/]")
    return "".join(out)


def limits(snap: Snapshot) -> list[str]:
    """What limits capacity, in the core's sentences (``Snapshot.capacity``); [] if unavailable."""
    cap = snap.capacity
    return [] if cap is None else [*cap.limits, *cap.notes]


def sweep_markup(snap: Snapshot, width: int, baseline: dict | None = None) -> str:
    """The pane's text for ``width`` content columns (``baseline``: a base run's per-level good fraction,
    from ``tui.core.compare.baseline_levels``, drawn under each matching level)."""
    rows = tested_rows(snap)
    capacity = snap.capacity
    no_cand: str | None
    if capacity is None:
        cap, open_loop, budget_cand, cand, no_cand = None, False, None, None, "not computed"
    else:
        cap, open_loop, budget_cand = capacity.capacity, capacity.mode == "open", capacity.candidate
        cand, no_cand = capacity.axis_candidate, capacity.axis_candidate_note
    wide = width >= WIDE_AT
    multi_round = any(r.round != 1 for r in rows)

    def label(r: LevelRow) -> str:
        return fmt.level(r.level) + (f" r{r.round}" if multi_round else "")

    labels = [label(r) for r in rows]
    labw = max([3, *(len(s) for s in labels)] + ([len(str(cand))] if cand is not None else []))
    state_w = max(len(VERDICT_STYLE.get(s, (s,))[0]) for s in SHORT_STATE) if wide else 5
    extra_w = (10 + 17) if wide else 0  # "  n 12,345" and "  " + the interval padded to 15
    saturated_w = len(" client saturated") if any(r.saturated for r in rows) else 0
    # label + " mark ", the target column, " 100.0%", " " + the verdict words, and the extras
    fixed = labw + 3 + 1 + 7 + 1 + state_w + extra_w + saturated_w
    cells = max(8, width - fixed)
    if wide:
        cells = min(cells, WIDE_BAR_MAX)
    target = snap.target
    tcol = min(cells, max(0, round(target * cells)))
    tested = {r.level for r in rows}

    lines: list[str] = []
    before = "good fraction" if tcol >= 14 else ("good" if tcol >= 5 else "")
    lines.append(f"[b]{'lvl'.rjust(labw)}[/]   [b]{before.ljust(tcol)}[/]"
                 f"[b $foreground]{TARGET_MARK}[/] target {fmt.pct(target, 0)}")
    if not rows:
        lines.append(na("no measured levels yet"))

    def candidate_line(beyond: bool) -> str:
        head = f"{str(cand).rjust(labw)} [b $primary]{CANDIDATE_MARK}[/] [$primary]memory-only candidate[/]"
        used = labw + 3 + len("memory-only candidate")
        notes = ((" (beyond the levels tested)",) if beyond else ()) + (" (not tested)", ", untested")
        for note in notes:
            if used + len(note) <= width:
                return f"{head}[$sw-na]{note}[/]"
        return head

    cand_pending = cand is not None and cand not in tested
    last_of_level = {r.level: i for i, r in enumerate(rows)}
    for i, (r, lab) in enumerate(zip(rows, labels)):
        if cand_pending and cand is not None and r.level is not None and cand < r.level:
            lines.append(candidate_line(False))
            cand_pending = False
        state = r.verdict.state
        words, var = VERDICT_STYLE.get(state, (state, "$sw-warn"))
        g = r.window.good
        mark = f"[b $primary]{CANDIDATE_MARK}[/]" if cand is not None and r.level == cand else " "
        pct = fmt.pct(g.fraction).rjust(6)
        line = f"{esc(lab.rjust(labw))} {mark} " + bar_markup(g.fraction, target, cells, var) + f" [b {var}]{pct}[/]"
        if wide:  # n and the descriptive interval, then the verdict in words
            interval = f"({fmt.interval(g.lo, g.hi)})"
            line += f"  [$sw-na]n[/] {g.n:>6,}  [$sw-na]{interval.ljust(15)}[/] [{var}]{esc(words)}[/]"
        else:
            line += f" [{var}]{esc(SHORT_STATE.get(state, state[:5]))}[/]"
        if r.saturated:
            line += " [$sw-warn]client saturated[/]"
        lines.append(line)
        base = baseline_for(baseline, r.level) if baseline else None
        if base is not None:
            bline = f"{'base'.rjust(labw)}   " + bar_markup(base["fraction"], target, cells, "$sw-na") + \
                f" [$sw-na]{fmt.pct(base['fraction']).rjust(6)}[/]"
            if wide:
                bline += f"  [$sw-na]n[/] {base['n']:>6,}  [$sw-na]({fmt.interval(base['lo'], base['hi'])})[/]"
            lines.append(bline)
        if cap is not None and r.level == cap and last_of_level[r.level] == i:
            text = f" measured capacity {fmt.level(cap)}{' req/s' if open_loop else ''} "
            fill = max(2, cells + 8 - 2 - len(text))  # under the bar, the target column and the percentage
            lines.append(f"{' ' * (labw + 3)}[b $sw-good]╌╌{text}{'╌' * fill}[/]")
    def note(text: str) -> None:
        lines.extend(na(esc(part)) for part in textwrap.wrap(text, width, subsequent_indent="  "))

    if cand_pending:
        lines.append(candidate_line(bool(rows)))
    if baseline:
        note(f"base run: {baseline.get('label')} (grey bars; levels matched within 5%)"
             + (f"; {baseline['limit']}" if baseline.get("limit") else ""))
    if cap is None and rows:
        note("measured capacity: none yet (no level has passed)")
    if cand is None:
        note(f"{CANDIDATE_MARK} candidate {'N/A' if budget_cand is None else budget_cand} ({no_cand})")
    if len(tested) == 1:
        note("one load level so far: this view compares levels")
    if wide and rows:  # maximised: P95 of each latency metric and goodput per level
        lines.append("")
        lines += latency_rows(rows, labels, labw)
    if wide and rows:  # maximised: what limits, in the core's words
        lines.append("")
        lines.append("[b]What limits[/] [$sw-na](measured capacity vs the memory-only candidate)[/]")
        for sentence in limits(snap):
            for k, part in enumerate(textwrap.wrap(sentence, max(20, width - 2))):
                lines.append(("• " if k == 0 else "  ") + esc(part))
    return "\n".join(lines)


def _p95_cell(row: LevelRow, key: str) -> str:
    """A level's P95 of one latency metric (``tui.widgets.latency``: the snapshot's, N/A when it lacks it)."""
    p = next((p for p in percentiles(row.window, key) if p.label == "P95"), None)
    if p is None or p.value_ms is None:
        return fmt.NA_TEXT
    return ms_text(p.value_ms, key in ("tpot", "itl")).removesuffix(" ms") + ("" if p.supported else "*")


def latency_rows(rows: list[LevelRow], labels: list[str], labw: int) -> list[str]:
    """The maximised view's table: per level the P95 of TTFT, TPOT, ITL and E2E (ms) and goodput beside
    throughput (requests per second, good output tokens per second)."""
    out = ["[b]" + "lvl".rjust(labw) + "".join(f"{name + ' P95':>10}" for _k, name in METRICS)
           + f"{'req/s':>8}{'goodput':>9}{'good tok/s':>12}[/]"]
    for r, lab in zip(rows, labels, strict=True):
        w = r.window
        cells = "".join(f"{_p95_cell(r, k):>10}" for k, _name in METRICS)
        out.append(esc(lab.rjust(labw)) + cells + f"{fmt.num(w.req_per_s, 2):>8}{fmt.num(w.goodput_per_s, 2):>9}"
                   f"{fmt.num(w.good_output_tok_per_s, 1):>12}")
    out.append(na("ms; * insufficient n; N/A: not in the records; goodput = good requests per second"))
    return out


class SweepPane(PaneMixin, VerticalScroll):
    """Good fraction per level (and round) against the target, candidate marker, measured capacity."""

    def __init__(self, budget: Any = None, baseline: dict | None = None, **kw) -> None:
        super().__init__(**kw)  # budget: kept for the app's call; the snapshot has it
        self.baseline = baseline
        self._init_pane(7)
        self.border_subtitle = "per level · 7 maximises"

    def compose(self) -> ComposeResult:
        yield Static(id="sweep-text")

    def update_snapshot(self, snap: Snapshot) -> None:
        width = max(24, (self.content_size.width or 38) - 1)  # one column kept for the scrollbar
        self.query_one("#sweep-text", Static).update(sweep_markup(snap, width, self.baseline))
