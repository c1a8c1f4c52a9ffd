"""The latency pane's views (pane 4): the markup of each, from the snapshot; nothing here computes a metric.

Key ``l`` cycles the views: ``ttft`` (TTFT large, rolling and cumulative, with its sparkline: the default),
``all`` (TTFT, TPOT, inter-token latency and end-to-end side by side for the cumulative window, with throughput
and goodput), then ``tpot``, ``itl`` and ``e2e`` each large. Every percentile comes from
``WindowStat.ttft`` / ``WindowStat.latency`` (the Monitor's, with its n-support rule); a metric the snapshot does
not carry (older records without last-token times, a Monitor that does not fill it in) shows ``N/A`` and says so,
never a number made up here.
"""

from __future__ import annotations

import tui.core.stats as stats
import tui.widgets.fmt as fmt
from tui.core.slos import SLO_TABLE
from tui.core.snapshot import Percentile, Snapshot, WindowStat
from tui.widgets.fmt import esc, na

#: (snapshot key, short name) of each latency metric, in the order every view lists them.
METRICS: tuple[tuple[str, str], ...] = tuple((k.key, k.name) for k in SLO_TABLE)  # tui.core.slos: the table
#: The views ``l`` cycles through, the default first.
VIEWS: tuple[str, ...] = ("ttft", "all", *(k.key for k in SLO_TABLE[1:]))
#: The pane's border title in each view ("4 " goes before it).
VIEW_TITLES = {"ttft": "TTFT", "all": "Latency", "tpot": "TPOT", "itl": "Inter-token (ITL)",
               "e2e": "End-to-end (E2E)",
               **{k.key: k.name for k in SLO_TABLE[4:]}}  # a kind added to the SLO table: its name
#: What each metric is, one line (docs/statistics.md has the definitions).
DEFINITIONS = {
    "ttft": "request sent to first token",
    "tpot": "(last - first token) / (tokens - 1), per request",
    "itl": "largest gap between two tokens, per request",
    "e2e": "request sent to last token",
    **{k.key: k.title for k in SLO_TABLE[4:]},
}


def _quantiles() -> tuple[str, ...]:
    """The labels of the percentiles shown (``--percentiles``; default P50, P95, P99)."""
    return stats.labels()


def next_view(view: str) -> str:
    """The view after ``view`` in the ``l`` cycle (an unknown view starts the cycle over)."""
    i = VIEWS.index(view) if view in VIEWS else -1
    return VIEWS[(i + 1) % len(VIEWS)]


def ms_text(v: float, fine: bool) -> str:
    """A latency in ms; ``fine``: one decimal below 100 ms (TPOT and inter-token gaps are a few ms)."""
    if fine and 0 <= v < 100:
        return f"{v:.1f} ms"
    return fmt.ms(v)


def pct_cell(p: Percentile | None, fine: bool = False) -> tuple[str, int]:
    """(markup, plain width) for one percentile value; an unsupported value gets the one mark, a ``*`` that the
    legend line explains (as in the text report, the JSON's ``insufficient_n`` and the pages' hollow markers)."""
    if p is None or p.value_ms is None:
        return na(), len(fmt.NA_TEXT)
    value = ms_text(p.value_ms, fine)
    approx = "≈" if p.approximate else ""
    if p.supported:
        return f"{approx}{value}", len(approx + value)
    return f"{approx}[$sw-warn]{value}*[/]", len(approx + value) + 1


def percentiles(w: WindowStat, key: str) -> tuple[Percentile, ...]:
    """The window's percentiles of one metric as the snapshot gives them (TTFT: ``latency["ttft"]`` when the
    Monitor fills it in, else ``ttft``); () when the snapshot does not carry the metric."""
    got = w.latency.get(key) or ()
    if not got and key == "ttft":
        return w.ttft
    return got


def _n(ps: tuple[Percentile, ...]) -> int:
    return ps[0].n if ps else 0


def _needs_line(ps: list[Percentile], width: int) -> list[str]:
    needs = sorted({(p.label, p.n_needed) for p in ps if p.value_ms is not None and not p.supported})
    if not needs:
        return []
    need_text = ", ".join(f"{lbl} {n}" for lbl, n in needs)
    if len("* insufficient n (needs )") + len(need_text) <= width:
        return [f"[$sw-warn]* insufficient n[/] [$sw-na](needs {need_text})[/]"]
    return ["[$sw-warn]* insufficient n[/] [$sw-na]· n needed:[/]", f"[$sw-na]  {need_text}[/]"]


def _unjudgeable(w: WindowStat, names: tuple[str, ...]) -> list[str]:
    return [f"[$sw-warn]{esc(name)} not judgeable on {n:,} requests[/]"
            for name, n in w.unjudgeable.items() if n and name in names]


def throughput_lines(w: WindowStat) -> list[str]:
    """Throughput and, beside it, goodput (good requests and their output tokens per second)."""
    return [
        f"[$sw-na]{'throughput':<11}[/]{fmt.num(w.req_per_s, 2)} req/s · {fmt.num(w.output_tok_per_s)} tok/s",
        f"[$sw-na]{'goodput':<11}[/]{fmt.num(w.goodput_per_s, 2)} req/s · {fmt.num(w.good_output_tok_per_s)} tok/s",
    ]


def misses_line(w: WindowStat, width: int) -> list[str]:
    """"missed TTFT 20, TPOT 41; TTFT+TPOT 7" when the snapshot counts misses per SLO."""
    parts = [f"{k} {v:,}" for k, v in w.misses.items() if v]
    if not parts:
        return []
    combos = [f"{k} {v:,}" for k, v in w.miss_combos.items() if v and "+" in k]
    text = "missed " + ", ".join(parts) + (f"; {', '.join(combos)}" if combos else "")
    return [f"[$sw-na]{esc(fmt.clip(text, max(10, width)))}[/]"]


def all_markup(snap: Snapshot, width: int) -> str:
    """All four metrics of the cumulative window: P50 / P95 / P99 and n, then throughput and goodput."""
    w = snap.cumulative
    fine = {"tpot", "itl"}
    rows_ps = [(name, key, percentiles(w, key)) for key, name in METRICS]
    cells = []
    for _name, key, ps in rows_ps:
        by_q = {p.label: p for p in ps}
        cells.append([pct_cell(by_q.get(q), key in fine) for q in _quantiles()])
    colw = max([wd for row in cells for _, wd in row] + [7]) + 1
    where = f" · level {fmt.level(snap.current_level)}" if snap.current_level is not None else ""
    lines = [f"[b]cumulative[/][$sw-na]{esc(where)}[/]",
             "[b]" + " " * 5 + "".join(q.ljust(colw) for q in _quantiles()) + "n".rjust(6) + "[/]"]
    for (name, _key, ps), row in zip(rows_ps, cells, strict=True):
        text = "".join(m + " " * (colw - wd) for m, wd in row)
        lines.append(f"[b]{name:<5}[/]{text}[$sw-na]{_n(ps):>6,}[/]")
    lines += _needs_line([p for _, _, ps in rows_ps for p in ps], width)
    absent = [name for name, _key, ps in rows_ps if not ps]
    if absent:
        lines.append(f"[$sw-na]N/A: {', '.join(absent)} not in this run's records[/]")
    lines += _unjudgeable(w, tuple(name for _key, name in METRICS))
    lines += throughput_lines(w)
    lines += misses_line(w, width)
    if any(p.approximate for _, _, ps in rows_ps for p in ps):
        lines.append("[$sw-na]≈ from the streaming sketch (±1%)[/]")
    return "\n".join(lines)


def metric_markup(snap: Snapshot, key: str, width: int) -> str:
    """One metric large (TPOT, ITL or E2E): P50 / P95 / P99 and n, rolling beside cumulative."""
    name = dict(METRICS)[key]
    fine = key in ("tpot", "itl")
    windows = (snap.rolling, snap.cumulative)
    pss = [percentiles(w, key) for w in windows]
    cells = []
    for ps in pss:
        by_q = {p.label: p for p in ps}
        cells.append([pct_cell(by_q.get(q), fine) for q in _quantiles()])
    colw = max([wd for col in cells for _, wd in col] + [10]) + 2
    rows = ["    [b]rolling[/]" + " " * (colw - len("rolling")) + "[b]cumulative[/]"]
    lab = max(4, *(len(q) + 1 for q in _quantiles()))  # "P99.9 " where asked; the default's 4 columns otherwise
    for i, lbl in enumerate(_quantiles()):
        left, lw = cells[0][i]
        right, _ = cells[1][i]
        rows.append(f"{lbl:<{lab}}{left}{' ' * (colw - lw)}{right}")
    n_left = f"{_n(pss[0]):,}"
    rows.append(f"[$sw-na]{'n':<4}{n_left}{' ' * (colw - len(n_left))}{_n(pss[1]):,}[/]")
    rows += _needs_line([p for ps in pss for p in ps], width)
    if not any(pss):
        rows.append(f"[$sw-na]N/A: {name} is not in this run's records[/]")
    rows += _unjudgeable(snap.cumulative, (name,))
    rows.append(f"[$sw-na]{esc(name)}: {esc(DEFINITIONS[key])}[/]")
    if any(p.approximate for ps in pss for p in ps):
        rows.append("[$sw-na]≈ from the streaming sketch (±1%)[/]")
    return "\n".join(rows)
