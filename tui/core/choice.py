"""The decision table of `servewatch select` (issue 40): candidates measured at one workload, ranked by cost per
1M good output tokens at their measured capacity, among those `accept` calls ready. Pure, standard library only.

Per candidate (``CandidateInput``, built by the command line from `accept`'s own document for that candidate):

- its **acceptance state** exactly as `accept` gives it (judged at its measured capacity unless a required level is
  given): ready or not, with `accept`'s own sentences (and `select`'s checks of the quality file);
- its **capacity bracket** at the SLO (:func:`measured_from`: the capacity search's rule, ``tui.core.plan`` /
  ``tui.core.search``, over the runs' levels): ``low`` the highest level that PASSes below the first FAIL,
  ``high`` the lowest level above it that does not PASS (None: nothing above was decided: open);
- its **goodput at the capacity level** (good output tokens per second at ``low``, the slowest round);
- its **cost**: per hour (GPUs x the price per GPU-hour) and per 1M good output tokens at ``low``; without prices,
  GPU-hours per 1M good output tokens (comparable only when every candidate ran on the same hardware).

The choice (:func:`decide`): the lowest cost per 1M good output tokens among the ready candidates. The ranking could
flip within the brackets (a **near-tie**, said, never hidden) when another ready candidate's cost at its most
favourable capacity inside its bracket is below the chosen one's measured cost: its goodput there is taken as at
most the throughput measured at its bracket's upper end (an open bracket: unbounded). Exit codes: 0 a choice;
1 no ready candidate (what each lacks, said); 3 not enough evidence to rank (candidates not comparable, costs that
cannot be set side by side, settings below the acceptance floors, or SYNTHETIC input: never 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.capacity import measure_capacity, snapshot_rows
from tui.core.levels import fmt_level
from tui.core.plan import level_evidence, search_bracket
from tui.core.textsafe import term

__all__ = ["SCHEMA", "CandidateInput", "Measured", "decide", "format_decision", "measured_from"]

SCHEMA = "servewatch.select/1"
USD, GPU_HOURS = "USD", "GPU-hours"


@dataclass(frozen=True, slots=True)
class Measured:
    """A candidate's capacity bracket and goodput (levels in ``unit``)."""

    unit: str = "level"
    mode: str | None = None
    low: float | None = None
    high: float | None = None
    good_tok_s: float | None = None  # good output tokens per second at ``low`` (the slowest round)
    good_rps: float | None = None
    high_tok_s: float | None = None  # output tokens per second measured at ``high`` (the fastest round)
    notes: tuple[str, ...] = ()

    @property
    def has_capacity(self) -> bool:
        return self.low is not None

    def bracket_text(self) -> str:
        if self.low is None:
            return "none (no level PASSes)"
        hi = "open: nothing above decided" if self.high is None else f"{fmt_level(self.high)}"
        return f"[{fmt_level(self.low)}, {hi}) {self.unit}"


@dataclass(frozen=True)
class CandidateInput:
    name: str
    ready: bool
    reasons: tuple[str, ...]
    accept_exit: int
    measured: Measured
    synthetic: bool = False
    budget: Mapping[str, Any] = field(default_factory=dict)  # fits, memory_only_candidate, source
    quality: Mapping[str, Any] = field(default_factory=dict)  # state, source, baseline
    usd_per_gpu_hour: float | None = None
    gpus: int = 1
    gpus_from: str = "1 GPU assumed: pass --gpus NAME=N"
    hardware: str | None = None  # the GPU the runs report ("none": no GPU), for GPU-hours
    sources: tuple[str, ...] = ()
    accept_command: str = ""
    judged: str = ""  # accept's judged-level sentence
    not_acceptance_grade: tuple[str, ...] = ()

    # ---- cost at capacity
    @property
    def usd_per_hour(self) -> float | None:
        return None if self.usd_per_gpu_hour is None else self.usd_per_gpu_hour * self.gpus

    def _per_1m(self, per_hour: float | None, tok_s: float | None) -> float | None:
        if per_hour is None or not tok_s or tok_s <= 0:
            return None
        return per_hour / (tok_s * 3600.0) * 1e6

    @property
    def usd_per_1m(self) -> float | None:
        return self._per_1m(self.usd_per_hour, self.measured.good_tok_s)

    @property
    def gpu_hours_per_1m(self) -> float | None:
        return self._per_1m(float(self.gpus), self.measured.good_tok_s)

    def cost(self, basis: str | None) -> float | None:
        return self.usd_per_1m if basis == USD else self.gpu_hours_per_1m if basis == GPU_HOURS else None

    def best_cost(self, basis: str | None) -> float | None:
        """The cost at the most favourable capacity inside the bracket: goodput at most the throughput measured at
        the upper end (0 when the bracket is open above: nothing bounds it)."""
        c = self.cost(basis)
        if c is None:
            return None
        m = self.measured
        if m.high is None:
            return 0.0
        best = max(m.good_tok_s or 0.0, m.high_tok_s or 0.0)
        per_hour = self.usd_per_hour if basis == USD else float(self.gpus)
        v = self._per_1m(per_hour, best)
        return c if v is None else min(c, v)


def _nums(rows: Iterable[Mapping[str, Any]], key: str) -> list[float]:
    return [float(v) for v in (r.get(key) for r in rows) if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _min_tok(rows: Iterable[Mapping[str, Any]], key: str) -> float | None:
    vals = _nums(rows, key)
    return min(vals) if vals else None


def _max_tok(rows: Iterable[Mapping[str, Any]], key: str) -> float | None:
    vals = _nums(rows, key)
    return max(vals) if vals else None


def measured_from(runs: Sequence[Any], level_rows: Sequence[Mapping[str, Any]]) -> Measured:
    """The bracket of the runs (``runs``: `accept`'s RunInputs, each with ``source`` and ``snapshot``) by the capacity
    search's rule over the primary mode's levels (``tui.core.plan.search_bracket``), and the goodput at its ends from
    `accept`'s level rows (``measured.levels``)."""
    crows = [c for r in runs for c in snapshot_rows(r.snapshot, r.source)]
    cap = measure_capacity(crows)
    if not cap.tables:
        return Measured(notes=("no measured level in the files",))
    mode = cap.tables[0].mode
    levels = level_evidence(crows, cap)
    br = search_bracket([c.row for c in crows if c.mode == mode], levels, mode, cap.unit)
    low = br.lo.level if br.lo is not None else None
    high = br.hi.level if br.hi is not None else None
    at_low = [r for r in level_rows if r.get("mode") == mode and r.get("level") == low] if low is not None else []
    at_high = [r for r in level_rows if r.get("mode") == mode and r.get("level") == high] if high is not None else []
    # the plan's rate conversion (Little's law, a falling throughput taken as the upper end's rate) is no part of a
    # bracket of levels: left out here
    notes = [n for n in br.notes if not n.startswith(("Little's law", "throughput fell"))]
    if low is not None and high is None:
        notes.append(f"no level above {cap.unit} {fmt_level(low)} was decided: the bracket is open above")
    return Measured(unit=cap.unit, mode=mode, low=low, high=high, good_tok_s=_min_tok(at_low, "goodput_tok_s"),
                    good_rps=_min_tok(at_low, "goodput_rps"), high_tok_s=_max_tok(at_high, "output_tok_per_s"),
                    notes=tuple(notes))


# ------------------------------------------------------------------ the decision


def _basis(cands: Sequence[CandidateInput]) -> tuple[str | None, str]:
    """(the cost basis the candidates can be ranked on, why)."""
    priced = [c for c in cands if c.usd_per_gpu_hour is not None]
    if cands and len(priced) == len(cands):
        return USD, "USD per 1M good output tokens (the prices given x GPUs per replica)"
    if priced:
        missing = ", ".join(c.name for c in cands if c.usd_per_gpu_hour is None)
        return None, f"a price was given for some candidates only (none for {missing}): give --gpu-hour-usd for each"
    hw = {c.hardware for c in cands}
    if len(hw) == 1 and None not in hw and not str(next(iter(hw))).startswith("mixed"):
        return GPU_HOURS, (f"GPU-hours per 1M good output tokens (no price given; every candidate ran on the same "
                           f"hardware: GPU {next(iter(hw))}; an hour of that hardware is the unit)")
    return None, ("no price given and the candidates did not all run on the same recorded hardware ("
                  + "; ".join(f"{c.name}: GPU {c.hardware or 'not recorded'}" for c in cands)
                  + "): GPU-hours are not one unit of cost; give --gpu-hour-usd NAME=USD for each")


def _pareto(cands: Sequence[CandidateInput], basis: str | None) -> set[str]:
    """Names on the front of (lower cost, higher measured capacity), over the candidates with both."""
    pts: list[tuple[str, float, float]] = []
    for c in cands:
        cost, cap = c.cost(basis), c.measured.low
        if cost is not None and cap is not None:
            pts.append((c.name, cost, cap))
    front = set()
    for n, cost, cap in pts:
        dominated = any((c2 <= cost and k2 >= cap) and (c2 < cost or k2 > cap) for m, c2, k2 in pts if m != n)
        if not dominated:
            front.add(n)
    return front


def _fmt_cost(v: float | None, basis: str | None) -> str:
    if v is None:
        return "unknown"
    return f"${v:,.4g}" if basis == USD else f"{v:,.4g} GPU-h"


def decide(cands: Sequence[CandidateInput], comparability: Mapping[str, Any] | None = None,
           not_grade: Sequence[str] = (), extra_refusals: Sequence[str] = ()) -> dict[str, Any]:
    """The decision document: ``choice`` (a name or None), ``candidates`` (a row each), ``exit_code``, ``reason``,
    ``near_tie``, ``allowed`` (the differences allowed, printed beside the choice), ``basis``."""
    comp = dict(comparability or {"fields": [], "refused": [], "allowed": [], "unchecked": []})
    refused = [*comp.get("refused", []), *extra_refusals]
    ready = [c for c in cands if c.ready]
    basis, basis_why = _basis(ready or list(cands))
    front = _pareto(cands, basis)
    choice: CandidateInput | None = None
    near_tie: str | None = None
    synthetic = [c.name for c in cands if c.synthetic]
    if refused:
        code, reason = 3, f"NOT ENOUGH EVIDENCE to rank: {refused[0]}" + (
            f" (and {len(refused) - 1} more)" if len(refused) > 1 else "")
    elif not ready:
        lacks = "; ".join(f"{c.name} ({(c.reasons[0] if c.reasons else 'not ready').rstrip('.')})" for c in cands)
        if not_grade:
            code, reason = 3, (f"no candidate is ready, and the settings are not acceptance-grade ({', '.join(not_grade)}):"
                               f" {lacks}")
        else:
            code, reason = 1, f"no candidate is ready: {lacks}"
    elif len(ready) == 1:
        choice = ready[0]
        code, reason = 0, (f"{choice.name}: the only ready candidate (cost per 1M good output tokens "
                           f"{_fmt_cost(choice.cost(basis), basis)})")
    else:
        unknown = [c.name for c in ready if c.cost(basis) is None]
        if basis is None:
            code, reason = 3, f"NOT ENOUGH EVIDENCE to rank the ready candidates: {basis_why}"
        elif unknown:
            code, reason = 3, (f"NOT ENOUGH EVIDENCE to rank the ready candidates: no good output tokens measured at "
                               f"the capacity of {', '.join(unknown)}")
        else:
            ranked = sorted(ready, key=lambda c: (c.cost(basis), -(c.measured.low or 0.0), c.name))
            choice = ranked[0]
            best = choice.cost(basis)
            assert best is not None
            code, reason = 0, (f"{choice.name}: the lowest cost per 1M good output tokens among the ready candidates, "
                               f"{_fmt_cost(best, basis)} at {choice.measured.unit} {fmt_level(choice.measured.low)}")
            flips = []
            for c in ranked[1:]:
                bc = c.best_cost(basis)
                if bc is not None and bc < best:
                    where = ("its bracket is open above" if c.measured.high is None else
                             f"at up to {_fmt_cost(bc, basis)} within its bracket {c.measured.bracket_text()}")
                    flips.append(f"{c.name} ({_fmt_cost(c.cost(basis), basis)} at its measured capacity; {where})")
            if flips:
                near_tie = ("near-tie: the ranking could flip within the capacity brackets: " + "; ".join(flips)
                            + f" against {choice.name}'s {_fmt_cost(best, basis)}; narrow the brackets "
                            "(sweep --search --precision) before relying on the order")
    cheapest = None
    if choice is None and basis is not None:
        costed = sorted((c for c in cands if c.cost(basis) is not None),
                        key=lambda c: (c.cost(basis), -(c.measured.low or 0.0), c.name))
        if costed:
            c0 = costed[0]
            cheapest = (f"{c0.name}: {_fmt_cost(c0.cost(basis), basis)} per 1M good output tokens at "
                        f"{c0.measured.unit} {fmt_level(c0.measured.low)}, on the load evidence alone (not a choice: "
                        + ("it is ready, but the ranking was refused)" if c0.ready else "it is not ready)"))
    if code == 0 and synthetic:
        code = 3
        reason += f"; but SYNTHETIC input ({', '.join(synthetic)}): never a choice to act on (exit 3)"
    rows = []
    for c in cands:
        m = c.measured
        rows.append({
            "name": c.name, "ready": c.ready, "reasons": list(c.reasons),
            "capacity": {"low": m.low, "high": m.high, "unit": m.unit},
            "cost_per_1m_good_tokens": c.usd_per_1m,
            "gpu_hours_per_1m_good_tokens": c.gpu_hours_per_1m,
            "goodput_tok_s": m.good_tok_s, "goodput_rps": m.good_rps, "usd_per_hour": c.usd_per_hour,
            "usd_per_gpu_hour": c.usd_per_gpu_hour, "gpus": c.gpus, "gpus_from": c.gpus_from,
            "best_cost_in_bracket": c.best_cost(basis), "pareto": c.name in front, "chosen": choice is c,
            "acceptance_exit": c.accept_exit, "budget": dict(c.budget), "quality": dict(c.quality),
            "hardware": c.hardware, "synthetic": c.synthetic, "sources": list(c.sources),
            "accept_command": c.accept_command, "judged": c.judged, "bracket_notes": list(m.notes),
            "not_acceptance_grade": list(c.not_acceptance_grade)})
    return {"schema": SCHEMA, "choice": None if choice is None else choice.name, "exit_code": code, "reason": reason,
            "near_tie": near_tie, "cheapest_measured": cheapest, "basis": basis, "basis_why": basis_why, "allowed": comp.get("allowed", []),
            "refused": refused, "comparability": comp, "not_acceptance_grade": list(not_grade),
            "synthetic": synthetic, "candidates": rows}


# ------------------------------------------------------------------ text


def _n(v: float | None, spec: str = "{:.3g}") -> str:
    return "-" if v is None else spec.format(v)


def format_decision(doc: Mapping[str, Any]) -> str:
    """The decision table as text: one line per candidate, its reasons below it, then the choice."""
    basis = doc.get("basis")
    head = ("candidate", "ready", "budget", "capacity", "good tok/s", "quality", "$/h",
            "$/1M good tok" if basis != GPU_HOURS else "GPU-h/1M good tok", "pareto")
    body = []
    for r in doc["candidates"]:
        b, q, cap = r["budget"], r["quality"], r["capacity"]
        budget = ("unknown" if b.get("fits") is None else
                  ("fits" if b["fits"] else "does not fit")
                  + (f", {b['memory_only_candidate']} seq" if b.get("memory_only_candidate") is not None else ""))
        capacity = ("none" if cap["low"] is None else
                    f"[{fmt_level(cap['low'])}, {'open' if cap['high'] is None else fmt_level(cap['high'])}) "
                    f"{cap['unit']}")
        cost = r["cost_per_1m_good_tokens"] if basis != GPU_HOURS else r["gpu_hours_per_1m_good_tokens"]
        body.append((r["name"] + (" *" if r["chosen"] else ""), "yes" if r["ready"] else "NO", budget, capacity,
                     _n(r["goodput_tok_s"], "{:.1f}"), str(q.get("state") or "not run"),
                     _n(r["usd_per_hour"], "{:,.2f}"), _n(cost, "{:,.4g}"), "yes" if r["pareto"] else ""))
    widths = [max(len(h), *(len(x[k]) for x in body)) if body else len(h) for k, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  " + "  ".join(c.ljust(widths[k]) for k, c in enumerate(cells)).rstrip()

    out = ["Decision table (each candidate judged as `servewatch accept` judges it; cost at its measured capacity)",
           "", line(head)]
    for r, cells in zip(doc["candidates"], body):
        out.append(line(cells))
        for why in r["reasons"]:
            out.append(f"      - {why}")
        if r.get("judged"):
            out.append(f"      judged: {r['judged']}")
        for note in r.get("bracket_notes") or ():
            out.append(f"      bracket: {note}")
        if r.get("accept_command"):
            out.append(f"      reproduce its acceptance state: {r['accept_command']}")
    comp = doc.get("comparability") or {}
    out += ["", "Comparability (checked before any ranking):"]
    for f in comp.get("fields", []):
        vals = sorted(set(f["values"].values()))
        shown = vals[0] if len(vals) == 1 else "; ".join(f"{n}: {v}" for n, v in f["values"].items())
        out.append(f"  {f['name']}: {f['state']}: {shown}")
    out += [f"  not checked: {u}" for u in comp.get("unchecked", [])]
    out += ["", f"cost basis: {doc.get('basis_why')}"]
    if doc.get("not_acceptance_grade"):
        out.append("settings: not acceptance-grade (" + ", ".join(doc["not_acceptance_grade"]) + "): never a choice")
    out += ["", f"choice: {doc['choice'] or 'none'}  (exit {doc['exit_code']})", f"  {doc['reason']}"]
    if doc.get("near_tie"):
        out.append(f"  {doc['near_tie']}")
    if doc.get("cheapest_measured"):
        out.append(f"  cheapest measured: {doc['cheapest_measured']}")
    for f in doc.get("allowed") or ():
        out.append(f"  allowed difference: {f} (--allow-different {f}): the ranking sets unlike evidence side by side")
    for r in (doc.get("refused") or [])[1:]:  # the first is the reason above
        out.append(f"  also: {r}")
    out.append("  (* the choice; pareto: no other candidate is both cheaper per 1M good tokens and of higher measured "
               "capacity)")
    return "\n".join(term(x) for x in out) + "\n"
