"""Counted tokens: the lengths asked beside the lengths received, and the server's count beside the client's.

``TokenTally`` takes request records one at a time (the caller chooses which: e.g. the measured ones of one level)
and keeps, in bounded memory, four length distributions and the disagreements between counts:

- **input asked**: ``input_tokens_asked`` (the load generator writes it; absent: unknown, never guessed); a turn of
  a session (a record with ``session``) asked its whole prompt, ``context_tokens`` (prefix + history + message);
- **input received**: ``usage_input_tokens``, the server's ``usage.prompt_tokens``, else ``input_tokens`` (in the
  load generator's records that is the same server count: ``input_tokens`` is never read as "asked");
- **output asked**: ``output_tokens_asked`` when the record carries it (absent: unknown, never guessed);
- **output received**: the server's ``usage_output_tokens`` when present, else the client's ``output_chunks``, else
  ``output_tokens`` (the same precedence as the tokens TPOT divides by, ``tui.core.slos``).

**Disagreement.** Output: a request carrying both ``usage_output_tokens`` and ``output_chunks``; input: both the
tokens asked and the input received. The two disagree when ``|server - other| > tolerance(server)`` with
``tolerance(n) = max(TOKEN_TOLERANCE_TOKENS, floor(TOKEN_TOLERANCE_FRACTION * n))`` (defaults: max(1, 2%): +-1 up
to 99 tokens, +-2 at 100..149, ...). A chat template makes the server's prompt count larger than the tokens asked,
so an input disagreement is a finding to read, not an error.

**Bounded memory.** Each distribution is a count per distinct value, exact up to ``TOKEN_EXACT_DISTINCT`` distinct
values; past that, values of 256 and more are kept to their 8 leading binary digits (the midpoint of a bucket
``[m * 2**e, (m + 1) * 2**e)``, relative error below 0.4 %), and the summary says ``approximate``. min and max
stay exact. Quantiles are the nearest rank (``x_(ceil(q n))``), as in ``docs/statistics.md``.

Standard library only (tui/core rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tui.core.defaults import TOKEN_EXACT_DISTINCT, TOKEN_TOLERANCE_FRACTION, TOKEN_TOLERANCE_TOKENS
from tui.core.records.request import RequestRecord

#: the rule as the summary and the lines state it
TOLERANCE_RULE = (f"more than max({TOKEN_TOLERANCE_TOKENS}, {TOKEN_TOLERANCE_FRACTION:.0%} of the server's count) "
                  "apart")


def tolerance(server_count: int) -> int:
    """The largest difference from the server's count that is not a disagreement."""
    return max(TOKEN_TOLERANCE_TOKENS, math.floor(TOKEN_TOLERANCE_FRACTION * server_count))


def disagree(server_count: int, other: int) -> bool:
    return abs(server_count - other) > tolerance(server_count)


def _coarse(v: int) -> int:
    """``v`` kept to its 8 leading binary digits (the bucket midpoint); exact below 256."""
    if v < 256:
        return v
    e = v.bit_length() - 8
    return ((v >> e) << e) + (1 << (e - 1))


class LengthDist:
    """A distribution of whole-number lengths: a count per distinct value (exact up to ``cap`` distinct values,
    then coarsened, see the module docstring); exact min / max / n."""

    __slots__ = ("cap", "counts", "n", "lo", "hi", "approximate")

    def __init__(self, cap: int = TOKEN_EXACT_DISTINCT) -> None:
        self.cap = cap
        self.counts: dict[int, int] = {}
        self.n = 0
        self.lo: int | None = None
        self.hi: int | None = None
        self.approximate = False

    def add(self, v: int, k: int = 1) -> None:
        """``k`` requests of length ``v``."""
        self.n += k
        self.lo = v if self.lo is None or v < self.lo else self.lo
        self.hi = v if self.hi is None or v > self.hi else self.hi
        key = _coarse(v) if self.approximate else v
        c = self.counts
        c[key] = c.get(key, 0) + k
        if not self.approximate and len(c) > self.cap:
            self.approximate = True
            merged: dict[int, int] = {}
            for k, cnt in c.items():
                ck = _coarse(k)
                merged[ck] = merged.get(ck, 0) + cnt
            self.counts = merged

    def merge(self, other: LengthDist) -> None:
        """Add ``other``'s lengths (the run-wide distribution from the per-level ones)."""
        lo, hi = self.lo, self.hi
        for v, k in other.counts.items():
            self.add(v, k)
        self.lo, self.hi = lo, hi  # exact: a coarsened key is a bucket's midpoint, not a length seen
        if other.n:
            assert other.lo is not None and other.hi is not None
            self.lo = other.lo if self.lo is None or other.lo < self.lo else self.lo
            self.hi = other.hi if self.hi is None or other.hi > self.hi else self.hi
            self.approximate = self.approximate or other.approximate

    def quantile(self, q: float) -> int | None:
        """Nearest-rank quantile; the exact min / max at the ends."""
        if self.n == 0:
            return None
        k = max(1, math.ceil(q * self.n - 1e-12))
        if k >= self.n:
            return self.hi
        seen = 0
        for v in sorted(self.counts):
            seen += self.counts[v]
            if seen >= k:
                assert self.lo is not None and self.hi is not None
                return min(max(v, self.lo), self.hi)
        return self.hi  # unreachable: the counts add up to n

    def summary(self) -> dict[str, Any]:
        d: dict[str, Any] = {"min": self.lo, "p50": self.quantile(0.5), "max": self.hi, "n": self.n}
        if self.approximate:
            d["approximate"] = True
        return d


def _get(r: RequestRecord | Mapping[str, Any], name: str) -> int | None:
    """A count field of a record object or a record dict; None when absent (older records, other record types) or
    not a whole number >= 0."""
    v = r.get(name) if isinstance(r, Mapping) else getattr(r, name, None)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        return None
    if isinstance(v, float) and (not math.isfinite(v) or not v.is_integer()):
        return None
    return int(v)


def _get_session(r: Any) -> bool:
    v = r.get("session") if isinstance(r, Mapping) else getattr(r, "session", None)
    return isinstance(v, str) and bool(v)


def record_key(r: RequestRecord) -> tuple:
    """A parsed record's seven count fields, in ``TokenTally.add_counts``'s order (the key of ``pending``)."""
    asked_in = r.input_tokens_asked if r.session is None or r.context_tokens is None else r.context_tokens
    return (asked_in, r.usage_input_tokens, r.input_tokens, r.output_tokens_asked, r.usage_output_tokens,
            r.output_chunks, r.output_tokens)


class TokenTally:
    """Asked and received token lengths, and server-vs-client disagreements, over the records added."""

    __slots__ = ("in_asked", "in_received", "out_asked", "out_received", "out_server_disagreeing",
                 "out_chunks_disagreeing", "in_server_disagreeing", "in_asked_disagreeing", "added",
                 "out_compared", "in_compared", "out_disagree", "in_disagree", "pending", "cap")

    def __init__(self, cap: int = TOKEN_EXACT_DISTINCT) -> None:
        self.in_asked = LengthDist(cap)
        self.in_received = LengthDist(cap)
        self.out_asked = LengthDist(cap)
        self.out_received = LengthDist(cap)
        # the two counts of the requests that disagree (what the lines quote)
        self.out_server_disagreeing = LengthDist(cap)
        self.out_chunks_disagreeing = LengthDist(cap)
        self.in_server_disagreeing = LengthDist(cap)
        self.in_asked_disagreeing = LengthDist(cap)
        self.cap = cap
        #: parsed records not yet tallied, as ``record_key(r) -> how many``: the hot path (the Monitor's) is one
        #: tuple and one dict update per request; ``flush`` tallies them (at most ``cap`` keys are held)
        self.pending: dict[tuple[int | None, ...], int] = {}
        self.added = 0
        self.out_compared = self.in_compared = 0
        self.out_disagree = self.in_disagree = 0

    def add(self, r: RequestRecord | Mapping[str, Any]) -> None:
        """One record (a ``RequestRecord`` or a record dict)."""
        if type(r) is RequestRecord:  # parsed (counts validated): counted by its key, tallied at ``flush``
            key = record_key(r)
            p = self.pending
            p[key] = p.get(key, 0) + 1
            if len(p) > self.cap:
                self.flush()
            return
        ctx = _get(r, "context_tokens") if _get_session(r) else None  # a session turn asked its whole prompt
        self.add_counts(_get(r, "input_tokens_asked") if ctx is None else ctx, _get(r, "usage_input_tokens"),
                        _get(r, "input_tokens"),
                        _get(r, "output_tokens_asked"), _get(r, "usage_output_tokens"), _get(r, "output_chunks"),
                        _get(r, "output_tokens"))

    def add_counts(self, asked_in: int | None, server_in: int | None, input_tokens: int | None,
                   asked_out: int | None, server_out: int | None, chunks: int | None,
                   output_tokens: int | None, k: int = 1) -> None:
        """``k`` requests with these counts (each a whole number >= 0 or None), the fields of the same names."""
        self.added += k
        received_in = server_in if server_in is not None else input_tokens
        if asked_in is not None:
            self.in_asked.add(asked_in, k)
        if received_in is not None:
            self.in_received.add(received_in, k)
        if asked_out is not None:
            self.out_asked.add(asked_out, k)
        received_out = server_out if server_out is not None else chunks if chunks is not None else output_tokens
        if received_out is not None:
            self.out_received.add(received_out, k)
        if server_out is not None and chunks is not None:
            self.out_compared += k
            if disagree(server_out, chunks):
                self.out_disagree += k
                self.out_server_disagreeing.add(server_out, k)
                self.out_chunks_disagreeing.add(chunks, k)
        if received_in is not None and asked_in is not None:
            self.in_compared += k
            if disagree(received_in, asked_in):
                self.in_disagree += k
                self.in_server_disagreeing.add(received_in, k)
                self.in_asked_disagreeing.add(asked_in, k)

    def flush(self) -> None:
        """Tally the pending records (``summary``, ``lines`` and ``merge`` do it first)."""
        p = self.pending
        if p:
            self.pending = {}
            add = self.add_counts
            for (a, b, c, d, e, f, g), k in p.items():
                add(a, b, c, d, e, f, g, k)

    def merge(self, other: TokenTally) -> None:
        """Add ``other``'s records (the run-wide tally from the per-level ones)."""
        other.flush()
        self.flush()
        for name in ("in_asked", "in_received", "out_asked", "out_received", "out_server_disagreeing",
                     "out_chunks_disagreeing", "in_server_disagreeing", "in_asked_disagreeing"):
            getattr(self, name).merge(getattr(other, name))
        self.added += other.added
        self.out_compared += other.out_compared
        self.in_compared += other.in_compared
        self.out_disagree += other.out_disagree
        self.in_disagree += other.in_disagree

    def summary(self) -> dict[str, Any]:
        """``{"lines", "input": {"asked", "received"}, "output": {"asked", "received"}, "disagree": {...}}``; each
        length ``{"min", "p50", "max", "n"}`` (None values with n 0; ``approximate: True`` once coarsened);
        ``lines``: ``lines()``, so a view shows them without the tally."""
        self.flush()
        return {
            "lines": self.lines(),
            "input": {"asked": self.in_asked.summary(), "received": self.in_received.summary()},
            "output": {"asked": self.out_asked.summary(), "received": self.out_received.summary()},
            "disagree": {"output": self.out_disagree, "input": self.in_disagree, "of": self.added,
                         "output_compared": self.out_compared, "input_compared": self.in_compared,
                         "tolerance": {"tokens": TOKEN_TOLERANCE_TOKENS, "fraction": TOKEN_TOLERANCE_FRACTION,
                                       "rule": TOLERANCE_RULE}},
        }

    def lines(self) -> list[str]:
        """Two lines for a report or a pane, e.g. ``output tokens: asked 64 / 64 / 64, received 8 / 63 / 64
        (min / P50 / max); server counted 64, 63 chunks seen, on 212 of 400 requests (tolerance +-max(1, 2%))``."""
        self.flush()
        tol = f"(tolerance \u00b1max({TOKEN_TOLERANCE_TOKENS}, {TOKEN_TOLERANCE_FRACTION:.0%}))"
        out = (f"output tokens: asked {_mpm(self.out_asked)}, received {_mpm(self.out_received)} (min / P50 / max)"
               + _disagreement(self.out_compared, self.out_disagree, self.out_server_disagreeing,
                               self.out_chunks_disagreeing, "chunks seen", "server count and chunk count", tol))
        inp = (f"input tokens: asked {_mpm(self.in_asked)}, received {_mpm(self.in_received)} (min / P50 / max)"
               + _disagreement(self.in_compared, self.in_disagree, self.in_server_disagreeing,
                               self.in_asked_disagreeing, "asked", "server count and tokens asked", tol))
        return [out, inp]


def _mpm(d: LengthDist) -> str:
    if d.n == 0:
        return "unknown"
    s = f"{d.lo} / {d.quantile(0.5)} / {d.hi}"
    return s + " (approximate P50)" if d.approximate else s


def _disagreement(compared: int, n: int, server: LengthDist, other: LengthDist, other_words: str, both: str,
                  tol: str) -> str:
    if compared == 0:
        return f"; no request carries both a {both}"
    if n == 0:
        return f"; server and client agree on all {compared} requests that carry both {tol}"
    return (f"; server counted {server.quantile(0.5)}, {other.quantile(0.5)} {other_words}, on {n} of {compared} "
            f"requests {tol}")


# ------------------------------------------------------------------ the report's text and JSON (tui.core.report)


def attach(rep: dict, rows: Any, run_wide: Mapping[str, Any] | None = None) -> None:
    """Adds ``tokens`` (a ``TokenTally.summary()``, or None) to each level of a report dict (``rep["levels"]``,
    built from the snapshot's ``rows`` in order), to ``rep["measured"]`` for the judged row, and the run-wide one
    at the top."""
    levels = rep.get("levels") or []
    measured = rep.get("measured") or {}
    for lv, row in zip(levels, rows):
        tk = getattr(row, "tokens", None)
        lv["tokens"] = tk
        if measured.get("level") == lv.get("level") and measured.get("round") == lv.get("round"):
            measured["tokens"] = tk
    rep["tokens"] = run_wide


def report_lines(rep: Mapping[str, Any]) -> list[str]:
    """The counted tokens of every level (indented for the report's Measured section); none when no level has
    them."""
    out: list[str] = []
    for lv in rep.get("levels") or []:
        tk = lv.get("tokens")
        lines = tk.get("lines") if isinstance(tk, Mapping) else None
        if not lines:
            continue
        lvl = lv.get("level")
        name = "-" if lvl is None else f"{lvl:g}" if isinstance(lvl, (int, float)) else str(lvl)
        head = f"    level {name} round {lv.get('round')}: "
        out.append(head + lines[0])
        out.extend(" " * len(head) + line for line in lines[1:])
    if out:
        out.insert(0, "  counted tokens (measured requests: asked vs received, the server's count vs the client's):")
    return out
