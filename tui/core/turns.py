"""The per-turn table of a session workload (issue 23): per turn index, what its requests met.

Later turns carry the conversation so far, so their prompts are longer; the report shows, per turn index of a level
(records that carry ``turn``): the requests, their TTFT P50 / P95 over completed requests (the n-support rule of
``tui.core.stats``: a percentile too few requests support is shown with a star), the good fraction by the one rule
the level is judged by (``tui.core.slos.slo_rule`` through the Monitor: good / judged, the cancelled-while-open
left out as the level's good fraction leaves them out), the mean ``context_tokens`` (the prompt as sent, asked or
estimated) and the mean ``input_tokens`` (the server's count). Descriptive: the verdict judges all turns together.

Bounded memory: turn indexes above ``defaults.TURN_ROWS_CAP`` share the last row ("N+"); each row keeps its TTFTs
in a ``stats.QuantileStore`` (exact up to ``defaults.TURN_TTFT_EXACT``, then the sketch, said).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tui.core.defaults as defaults
import tui.core.stats as stats

__all__ = ["TurnTable", "attach", "report_lines"]


class _Turn:
    __slots__ = ("n", "good", "ttft", "ctx_sum", "ctx_n", "in_sum", "in_n")

    def __init__(self) -> None:
        self.n = self.good = self.ctx_n = self.in_n = 0
        self.ctx_sum = self.in_sum = 0
        self.ttft = stats.QuantileStore(defaults.TURN_TTFT_EXACT)


class TurnTable:
    """Per turn index of one level: requests, good, TTFTs, context and input token sums (``add`` per judged
    measured request that carries ``turn``; ``rows`` for the report)."""

    __slots__ = ("cap", "turns")

    def __init__(self, cap: int = defaults.TURN_ROWS_CAP) -> None:
        self.cap = cap
        self.turns: dict[int, _Turn] = {}

    def add(self, turn: int, good: bool, ttft_ms: float | None, context_tokens: int | None,
            input_tokens: int | None) -> None:
        """One judged request of turn ``turn``: ``ttft_ms`` None when it has none to count (failed, no token)."""
        key = turn if turn < self.cap else self.cap
        t = self.turns.get(key)
        if t is None:
            t = self.turns[key] = _Turn()
        t.n += 1
        if good:
            t.good += 1
        if ttft_ms is not None:
            t.ttft.add(ttft_ms)
        if context_tokens is not None:
            t.ctx_sum += context_tokens
            t.ctx_n += 1
        if input_tokens is not None:
            t.in_sum += input_tokens
            t.in_n += 1

    def rows(self) -> tuple[dict[str, Any], ...]:
        """One JSON-ready dict per turn index, in order: ``turn`` (int), ``label`` ("3", or "32+" for the pooled
        last row), ``n``, ``good``, ``good_fraction``, ``ttft_ms`` {p50, p95, n, supported_p50, supported_p95,
        approximate}, ``mean_context_tokens``, ``mean_input_tokens`` (None: no record of the turn carries it)."""
        out = []
        for key in sorted(self.turns):
            t = self.turns[key]
            st = t.ttft
            ttft: dict[str, Any] = {"n": st.n, "approximate": st.approximate}
            for q in (0.50, 0.95):
                name = f"p{round(q * 100)}"
                ttft[name] = st.quantile(q) if st.n else None
                ttft[f"supported_{name}"] = st.n >= stats.n_needed(q)
            out.append({
                "turn": key, "label": f"{key}+" if key == self.cap else str(key), "n": t.n, "good": t.good,
                "good_fraction": t.good / t.n if t.n else None, "ttft_ms": ttft,
                "mean_context_tokens": t.ctx_sum / t.ctx_n if t.ctx_n else None,
                "mean_input_tokens": t.in_sum / t.in_n if t.in_n else None,
            })
        return tuple(out)


def attach(rep: dict, rows: Any) -> None:
    """Adds ``turns`` (the rows of ``TurnTable.rows``, or None: no record of the level carries ``turn``) to each
    level of a report dict (built from the snapshot's ``rows`` in order) and to ``rep["measured"]`` for the judged
    row."""
    measured = rep.get("measured") or {}
    measured.setdefault("turns", None)
    for lv, row in zip(rep.get("levels") or [], rows):
        tr = getattr(row, "turns", None)
        lv["turns"] = None if tr is None else [dict(t) for t in tr]
        if measured.get("level") == lv.get("level") and measured.get("round") == lv.get("round"):
            measured["turns"] = lv["turns"]


def _ms(t: Mapping[str, Any], name: str) -> str:
    v = t.get(name)
    if v is None:
        return "N/A"
    return f"{v:.0f}" + ("" if t.get(f"supported_{name}") else "*")


def _mean(v: Any) -> str:
    return "N/A" if v is None else f"{v:,.0f}"


def report_lines(rep: Mapping[str, Any]) -> list[str]:
    """The judged level's per-turn table (indented for the report's Measured section); none without turns."""
    m = rep.get("measured") or {}
    rows = m.get("turns")
    if not rows:
        return []
    out = ["  per turn (session workload; descriptive: the verdict judges all turns together; "
           "* = insufficient n for that percentile):",
           "     turn  requests   good%  TTFT P50 ms  TTFT P95 ms  mean context tokens  mean input tokens"]
    for t in rows:
        gf = t.get("good_fraction")
        ttft = t.get("ttft_ms") or {}
        out.append(f"  {t['label']:>7} {t['n']:>9} {'N/A' if gf is None else f'{100 * gf:.1f}':>7} "
                   f"{_ms(ttft, 'p50'):>12} {_ms(ttft, 'p95'):>12} {_mean(t.get('mean_context_tokens')):>20} "
                   f"{_mean(t.get('mean_input_tokens')):>18}" + ("  (approx.)" if ttft.get("approximate") else ""))
    return out
