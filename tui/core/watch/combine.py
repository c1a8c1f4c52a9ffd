"""Several SLOs from separate server histograms: the share of requests meeting ALL of them is not identifiable.

Each histogram gives the share of requests meeting ONE SLO, as a bracket [lo_i, hi_i] (bucket bounds, see
``histogram``). How the misses overlap is not in the histograms (one request's TTFT and its end-to-end latency are
observed apart), so the share meeting all k SLOs is only bounded, by the Fréchet bounds:

    lower = max(0, sum(lo_i) - (k - 1))        (the misses as disjoint as possible)
    upper = min(hi_i)                          (the misses all on the same requests)

PASS is judged on the lower end, FAIL on the upper (``judge``), and the output says so.

Per SLO (one common denominator D: TTFT observations + aborted/errored, as the TTFT-only judge uses):

- TTFT, E2E, TPOT (one observation per request): the bucket bracket at the SLO over D (E2E / TPOT over their own
  count when it is larger: requests in flight at a window's edges are then counted as misses on the lower end);
- ITL (the largest gap of a request; the server's histogram has one observation per GAP): a request meets it only
  when all its gaps do, and each request that misses it has at least one gap over the SLO, so at most
  ``gaps possibly over`` requests miss it (lower end ``(ttft_n - gaps possibly over) / D``); the upper end knows
  only that a gap certainly over the SLO makes at least one request miss;
- an SLO in force whose histogram the server does not expose (or that is missing in the window): [0, 1], not
  judgeable, so PASS is impossible and said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tui.core.records.watch import Buckets, Window
from tui.core.watch.histogram import count_of, good_bracket

FRECHET_NOTE = ("several SLOs from separate histograms: the share of requests meeting all of them is not "
                "identifiable, so it is bracketed by the Fréchet bounds [max(0, sum p_i - (k - 1)), min p_i]; "
                "PASS is judged on the lower end, FAIL on the upper")
ITL_NOTE = ("ITL from the server's histogram of inter-token gaps: a request meets the ITL SLO only when every gap "
            "does; at most one request per gap over the SLO misses it (the lower end), and the upper end knows "
            "only that a gap certainly over it makes one request miss")


@dataclass(frozen=True)
class SloShare:
    """The share of one window's requests meeting one SLO: [lo, hi] of ``total``."""

    name: str  # "TTFT" | "TPOT" | "ITL" | "E2E"
    limit_ms: float
    lo: float
    hi: float
    judgeable: bool
    exact: bool
    how: str = ""

    def to_dict(self) -> dict:
        return {"slo": self.name, "limit_ms": self.limit_ms, "share_lo": self.lo, "share_hi": self.hi,
                "judgeable": self.judgeable, "exact": self.exact, "how": self.how}


def frechet(los: list[float], his: list[float]) -> tuple[float, float]:
    """The Fréchet bounds on the share meeting all: (max(0, sum lo - (k - 1)), min hi); (1, 1) for k = 0."""
    k = len(los)
    if k == 0:
        return 1.0, 1.0
    lo = max(0.0, sum(los) - (k - 1))
    hi = min(his)
    return min(lo, hi), hi


def _per_request(name: str, limit_ms: float, b: Buckets | None, total: float, failed: float) -> SloShare:
    if b is None:
        return SloShare(name, limit_ms, 0.0, 1.0, False, False, "the server exposes no histogram for it (or it is "
                        "missing in this window): not judgeable")
    n = count_of(b) or 0.0
    if total <= 0:
        return SloShare(name, limit_ms, 0.0, 1.0, True, False, "no requests")
    br = good_bracket(b, limit_ms / 1000.0)
    lo = min(1.0, br.good_lo / max(total, n + failed))
    own = n + failed
    hi = 1.0 if own <= 0 else min(1.0, br.good_hi / own)
    return SloShare(name, limit_ms, lo, max(lo, hi), True, br.exact and math.isclose(own, total),
                    f"{br.good_lo:.0f}-{br.good_hi:.0f} of {n:.0f} observations at or under it")


def _itl(limit_ms: float, b: Buckets | None, ttft_n: float, total: float) -> SloShare:
    if b is None:
        return SloShare("ITL", limit_ms, 0.0, 1.0, False, False, "the server exposes no inter-token histogram (or "
                        "it is missing in this window): not judgeable")
    if total <= 0:
        return SloShare("ITL", limit_ms, 0.0, 1.0, True, False, "no requests")
    gaps = count_of(b) or 0.0
    br = good_bracket(b, limit_ms / 1000.0)
    possibly_over = max(0.0, gaps - br.good_lo)
    certainly_over = max(0.0, gaps - br.good_hi)
    lo = max(0.0, ttft_n - possibly_over) / total
    hi = max(0.0, ttft_n - (1.0 if certainly_over > 1e-9 else 0.0)) / total
    return SloShare("ITL", limit_ms, min(1.0, lo), min(1.0, max(lo, hi)), True, False,
                    f"{possibly_over:.0f} of {gaps:.0f} gaps possibly over it, {certainly_over:.0f} certainly")


def window_shares(w: Window, slos: list[tuple[str, float]]) -> tuple[list[SloShare], float]:
    """Each SLO's share of the window's requests, and the common denominator (TTFT observations + failed).
    Needs ``w.ttft``."""
    assert w.ttft is not None
    ttft_n = count_of(w.ttft) or 0.0
    failed = max(0.0, w.failed or 0.0)
    total = ttft_n + failed
    out = []
    for name, limit in slos:
        if name == "TTFT":
            br = good_bracket(w.ttft, limit / 1000.0, w.failed)
            out.append(SloShare("TTFT", limit, br.lo or 0.0, br.hi or 0.0, True, br.exact, br.text()))
        elif name == "ITL":
            out.append(_itl(limit, w.itl, ttft_n, total))
        elif name == "E2E":
            out.append(_per_request("E2E", limit, w.e2e, total, failed))
        else:
            out.append(_per_request("TPOT", limit, w.tpot, total, failed))
    return out, total


def combined_counts(w: Window, slos: list[tuple[str, float]]) -> tuple[int, int, int, bool, list[SloShare]]:
    """(good_lo, good_hi, total, exact, shares) of one window under all SLOs: conservative rounding (good counts
    down on the lower end, up on the upper, the total up)."""
    shares, total = window_shares(w, slos)
    lo, hi = frechet([s.lo for s in shares], [s.hi for s in shares])
    n = math.ceil(total - 1e-6)
    g_lo = math.floor(lo * total + 1e-6)
    g_hi = min(n, math.ceil(hi * total - 1e-6))
    exact = len(shares) == 1 and shares[0].exact
    return g_lo, max(g_lo, g_hi), n, exact, shares
