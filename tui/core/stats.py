"""Descriptive statistics: percentiles with an honesty check, intervals, a streaming sketch, burstiness.

Percentile definition (documented in docs/statistics.md): the *nearest-rank* sample
percentile, P_q = x_(k) with k = ceil(q * n) over the sorted sample x_(1) <= ... <= x_(n).

A percentile is *supported* when n is large enough that the sample maximum is a
distribution-free upper confidence bound for the true q-quantile at confidence
``conf``: P(max < Q_q) = q**n <= 1 - conf, i.e. n >= log(1 - conf) / log(q).
At conf = 0.95 that is n >= 5 for P50, 59 for P95 and 299 for P99.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

from tui.core.snapshot_parts import Percentile

QUANTILES = (0.50, 0.95, 0.99)  # the default reading (``--percentiles 50,95,99``)
_log = math.log
#: the quantiles every reading shows (``--percentiles``, issue 41): one process-wide choice, set once by the command
#: line (``set_selected``) before anything is read; the default is ``QUANTILES``
_SELECTED: list[tuple[float, ...]] = [QUANTILES]


def selected() -> tuple[float, ...]:
    """The quantiles read and shown (``--percentiles``; default ``QUANTILES``)."""
    return _SELECTED[0]


def set_selected(qs: Sequence[float]) -> tuple[float, ...]:
    """Make ``qs`` (each in (0, 1), ascending, distinct) the quantiles read and shown; returns the previous ones."""
    qs = tuple(qs)
    if not qs or any(not 0.0 < q < 1.0 for q in qs) or list(qs) != sorted(set(qs)):
        raise ValueError("percentiles must be distinct, ascending, each above 0 and below 100")
    prev = _SELECTED[0]
    _SELECTED[0] = qs
    return prev


def percent_text(q: float) -> str:
    """0.5 -> "50", 0.999 -> "99.9"."""
    return f"{round(q * 100, 6):g}"


def qkey(q: float) -> str:
    """The JSON key of a quantile: "p50", "p99.9"."""
    return "p" + percent_text(q)


def keys() -> tuple[str, ...]:
    """The JSON keys of the selected quantiles ("p50", "p95", "p99" by default)."""
    return tuple(qkey(q) for q in selected())


def labels() -> tuple[str, ...]:
    """The labels of the selected quantiles ("P50", "P95", "P99" by default)."""
    return tuple("P" + percent_text(q) for q in selected())


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``--percentiles 50,90,95,99,99.9`` -> (0.5, 0.9, 0.95, 0.99, 0.999), sorted; ValueError on a bad list."""
    out: set[float] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            v = float(part)
        except ValueError:
            raise ValueError(f"--percentiles: {part!r:.20} is not a number (a list such as 50,90,95,99,99.9)") from None
        if not (math.isfinite(v) and 0.0 < v < 100.0) or len(part) > 10:
            raise ValueError(f"--percentiles: {part:.20} must be above 0 and below 100")
        out.add(round(v / 100.0, 8))
    if not out or len(out) > 12:
        raise ValueError("--percentiles: give 1 to 12 percentiles, such as 50,90,95,99,99.9")
    return tuple(sorted(out))
_ceil = math.ceil


def n_needed(q: float, conf: float = 0.95) -> int:
    """Smallest n for which the sample maximum bounds the q-quantile at confidence ``conf``."""
    if not 0.0 < q < 1.0:
        raise ValueError("q must be in (0, 1)")
    return math.ceil(math.log(1.0 - conf) / math.log(q) - 1e-12)


def nearest_rank(sorted_values: Sequence[float], q: float) -> float | None:
    n = len(sorted_values)
    if n == 0:
        return None
    k = max(1, math.ceil(q * n - 1e-12))
    return sorted_values[k - 1]


def percentiles(
    sorted_values: Sequence[float],
    qs: Iterable[float] | None = None,
    *,
    extra_inf: int = 0,
    conf: float = 0.95,
    approximate: bool = False,
) -> tuple[Percentile, ...]:
    """Percentiles of ``sorted_values`` (ms), optionally with ``extra_inf`` values of +inf appended
    (the "failures count as +inf" reading)."""
    n_fin = len(sorted_values)
    n = n_fin + extra_inf
    out = []
    for q in selected() if qs is None else qs:
        need = n_needed(q, conf)
        if n == 0:
            value = None
        else:
            k = max(1, math.ceil(q * n - 1e-12))
            value = sorted_values[k - 1] if k <= n_fin else math.inf
        out.append(Percentile(q=q, value_ms=value, n=n, supported=n >= need, n_needed=need, approximate=approximate))
    return tuple(out)


def wilson(good: int, n: int, z: float = 1.959963984540054) -> tuple[float | None, float | None]:
    """Wilson score interval for a binomial proportion (descriptive only, not a decision rule)."""
    if n <= 0:
        return None, None
    p = good / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


class LogHistogram:
    """Streaming quantile sketch with bounded relative error (log-spaced buckets).

    Any returned quantile is within ``rel_err`` relative error of a value whose
    rank is the requested nearest rank. Memory grows with log(max/min), not with n.
    """

    __slots__ = ("rel_err", "_gamma_log", "_inv_log", "_buckets", "_zeros", "n")

    def __init__(self, rel_err: float = 0.01) -> None:
        self.rel_err = rel_err
        gamma = (1 + rel_err) / (1 - rel_err)
        self._gamma_log = math.log(gamma)
        self._inv_log = 1.0 / self._gamma_log
        self._buckets: dict[int, int] = {}
        self._zeros = 0
        self.n = 0

    def add(self, x: float) -> None:
        self.add_many((x,))

    def add_many(self, xs: Iterable[float]) -> None:
        """Add values (the one definition of the bucketing; ``add`` is a batch of one)."""
        b = self._buckets
        get = b.get
        inv = self._inv_log
        n = zeros = 0
        for x in xs:
            n += 1
            if x <= 1e-9:
                zeros += 1
                continue
            i = _ceil(_log(x) * inv)
            b[i] = get(i, 0) + 1
        self.n += n
        self._zeros += zeros

    def quantile(self, q: float) -> float | None:
        if self.n == 0:
            return None
        k = max(1, math.ceil(q * self.n - 1e-12))
        if k <= self._zeros:
            return 0.0
        seen = self._zeros
        g = self._gamma_log
        for i in sorted(self._buckets):
            seen += self._buckets[i]
            if seen >= k:
                # midpoint (in the relative sense) of bucket (gamma^(i-1), gamma^i]
                return 2.0 * math.exp(i * g) / (1.0 + math.exp(g))
        return None  # unreachable


class QuantileStore:
    """Exact values up to ``cap``; past it, a ``LogHistogram`` (seeded with the exact values) takes over.

    The exact values are a compact array of doubles (8 bytes each, not a list of float objects), emptied
    when the sketch takes over: the memory is bounded by ``cap`` values, then by the sketch's buckets."""

    __slots__ = ("cap", "exact", "sketch", "n")

    def __init__(self, cap: int = 100_000) -> None:
        self.cap = cap
        self.exact: array = array("d")
        self.sketch: LogHistogram | None = None
        self.n = 0

    def add(self, x: float) -> None:
        self.extend((x,))

    def extend(self, xs: Sequence[float]) -> None:
        """Add values: kept exactly until ``cap`` of them, then the sketch (seeded with those) takes the rest."""
        self.n += len(xs)
        sk = self.sketch
        if sk is None:
            ex = self.exact
            room = self.cap - len(ex)
            if len(xs) < room:
                ex.extend(xs)
                return
            ex.extend(xs[:max(room, 0)])
            sk = self.sketch = LogHistogram()
            sk.add_many(ex)
            self.exact = array("d")  # the sketch holds them now
            xs = xs[max(room, 0):]
        sk.add_many(xs)

    @property
    def approximate(self) -> bool:
        return self.sketch is not None

    def quantile(self, q: float) -> float | None:
        if self.sketch is not None:
            return self.sketch.quantile(q)
        return nearest_rank(sorted(self.exact), q)


def dispersion_vif(batches: Sequence[tuple[int, int]], min_batches: int = 10) -> float | None:
    """Variance inflation factor from batch means.

    ``batches`` holds (good, total) per time bucket. Under independent outcomes the
    Pearson dispersion sum((g_i - n_i p)^2 / (n_i p (1 - p))) / (k - 1) is about 1;
    correlated (bursty) outcomes inflate it. Returns None when it cannot be estimated
    (fewer than ``min_batches`` non-empty batches, or p in {0, 1}).
    """
    used = [(g, n) for g, n in batches if n > 0]
    k = len(used)
    if k < min_batches:
        return None
    tot = sum(n for _, n in used)
    p = sum(g for g, _ in used) / tot
    if p <= 0.0 or p >= 1.0:
        return None
    chi2 = sum((g - n * p) ** 2 / (n * p * (1 - p)) for g, n in used)
    return max(1.0, chi2 / (k - 1))


# ---------------------------------------------------------------------------------------------------------------
# One rule for a percentile with too few samples (issue 37), in every output: docs/statistics.md's n with
# 1 - q^n >= 0.95 (``n_needed``). JSON: the flat value is null and ``insufficient_n`` keeps the raw value and the n
# it needs; text: the raw value with INSUFFICIENT_MARK; charts: a hollow marker; "N/A" only where there is no value.

INSUFFICIENT_MARK = "*"
INSUFFICIENT_LEGEND = "* too few requests for that percentile (P95 needs 59, P99 299): shown, not supported"


class InsufficientDoc(TypedDict):
    value: float | str
    n_needed: int


class LatencyDoc(TypedDict):
    """One metric's percentiles in a JSON document (``latency_json``): the default reading's keys; with
    ``--percentiles`` the keys are the selected ones ("p90", "p99.9", ...), built by name at run time."""

    p50: NotRequired[float | str | None]
    p95: NotRequired[float | str | None]
    p99: NotRequired[float | str | None]
    n: int
    insufficient_n: NotRequired[dict[str, InsufficientDoc]]  # "p95": the raw value too few requests support


def insufficient_legend() -> str:
    """The legend of the mark for the selected quantiles (the default's is ``INSUFFICIENT_LEGEND``)."""
    if selected() == QUANTILES:
        return INSUFFICIENT_LEGEND
    needs = ", ".join(f"P{percent_text(q)} {n_needed(q):,}" for q in selected() if n_needed(q) > 5)
    return f"* too few requests for that percentile (needs: {needs or 'each 5'}): shown, not supported"


def latency_json(ps: Iterable[Percentile]) -> LatencyDoc:
    """One metric's percentiles as every JSON report carries them: ``{"p50", "p95", "p99", "n"}`` in ms, a value
    null when there is none or too few requests support it (then ``insufficient_n`` keeps the raw value and the n
    it needs, said, not hidden); +inf as the string "inf"."""
    out: dict[str, Any] = dict.fromkeys(keys())
    out["n"] = 0
    short: dict[str, Any] = {}
    for p in ps:
        key = p.label.lower()
        out["n"] = p.n
        v: Any = p.value_ms
        if v is not None and math.isinf(v):
            v = "inf"
        if p.supported:
            out[key] = v
        elif v is not None:
            short[key] = {"value": v, "n_needed": p.n_needed}
    if short:
        out["insufficient_n"] = short
    return cast(LatencyDoc, out)  # the percentile keys are the labels of ``ps``: built by name, declared above


def latency_value(block: Mapping[str, Any], q: str) -> str:
    """One percentile (``q``: "p50", "p95", "p99") of a latency block in ms: "412", "12.3", "812*" (too few
    requests to support it: the raw value), "N/A"."""
    v = block.get(q)
    if v is None:
        short = (block.get("insufficient_n") or {}).get(q)
        if short is None:
            return "N/A"
        v, star = short["value"], "*"
    else:
        star = ""
    return (v if isinstance(v, str) else f"{v:.1f}" if v < 100 else f"{v:.0f}") + star


def latency_cell(block: Mapping[str, Any] | None) -> str:
    """One metric's JSON block (``latency_json``) as "412 / 803 / 951* (n 600)" (ms; * too few requests to
    support it, the raw value shown); "N/A" when there is no value."""
    if not block or not block.get("n"):
        return "N/A"
    return " / ".join(latency_value(block, q) for q in keys()) + f" (n {block['n']})"
