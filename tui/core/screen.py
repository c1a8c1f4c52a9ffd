"""The screening table (`servewatch budget` with lists, issue 40): the cross product of models, weight formats, KV
cache dtypes, sequence lengths, tensor-parallel degrees and memories, one memory budget per row, in one table.

Each row says whether the configuration fits and, when it does not, why, in this order:

1. **TP does not divide the KV heads** (``kv_heads % tp`` and ``tp % kv_heads`` both non-zero; MLA latents are
   replicated and always divide): engines refuse such a split, so the row does not fit whatever the memory;
2. **weights alone exceed** the memory of one GPU (the weights per GPU are larger than the memory);
3. **weights + runtime margin exceed** it (the margin is an allowance, not measured);
4. **KV for one sequence exceeds** the cache budget (memory - weights - margin).

Beside it: the KV cache of one ``max_seq``-token sequence, the memory-only candidate (sequences; a number to load-test,
never a limit), the headroom (memory left after the weights, the margin and one sequence's KV cache; negative: the
shortfall), and the cost per hour (GPUs x the price per GPU-hour, when one is given; the device table ships none).

Rows are sorted fitting first, then by the candidate per GPU-hour (candidate / tp), then by cost per hour (known
first, lower first), then by id. Pure, standard library only: the command line builds each row's inputs (a
config.json parsed by ``tui.sources``) through the callable a :class:`ModelSpec` carries.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.budget.arithmetic import compute_budget
from tui.core.budget.inputs import BudgetInputs
from tui.core.budget.results import BudgetResult
from tui.core.budget.vocab import CANDIDATE_NOTE, GIB
from tui.core.devices import Device
from tui.core.textsafe import term

__all__ = ["CSV_KEYS", "DEFAULT_MAX_CANDIDATES", "JSON_KEYS", "SCHEMA", "Axes", "GridTooLarge", "Memory",
           "ModelSpec", "Row", "Screen", "format_screen", "grid_size", "screen", "screen_csv", "screen_doc"]

SCHEMA = "servewatch.screen/1"
#: the largest grid screened without being asked for more (`--max-candidates`)
DEFAULT_MAX_CANDIDATES = 500
#: each row of ``--json``'s ``candidates`` list: exactly these keys (the other figures are in ``details``)
JSON_KEYS = ("id", "model", "weights", "kv_dtype", "max_seq", "tp", "device", "memory_gib", "fits", "reason",
             "kv_per_seq_gib", "memory_only_candidate")
#: the columns of ``--csv``: the JSON keys, then the headroom and the cost per hour
CSV_KEYS = (*JSON_KEYS, "headroom_gib", "usd_per_hour")

FITS = "fits"


class GridTooLarge(ValueError):
    """The cross product is larger than the limit given: refused with the count (bad usage)."""


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory of the grid: a device of the table, or ``--gpu-gib`` G. ``gib`` is what a budget divides (for
    unified memory, the GPU's assumed share); ``usd_per_gpu_hour`` the price given for it, if any."""

    label: str
    gib: float
    device: Device | None = None
    usd_per_gpu_hour: float | None = None

    @property
    def how(self) -> str:
        return self.device.assumption() if self.device is not None else f"--gpu-gib {self.gib:g}: one GPU of {self.gib:g} GiB"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One model of the grid: a short key (for row ids), the label shown, and ``make(**fields)`` building its budget
    inputs for one row (``weights``, ``kv_dtype``, ``max_seq``, ``tp``, ``gpu_gib``: None leaves the model's own)."""

    key: str
    label: str
    make: Callable[..., BudgetInputs]


@dataclass(frozen=True, slots=True)
class Axes:
    """The lists the flags gave; ``None`` in a list is "the model's own value" (the flag was not given)."""

    models: tuple[ModelSpec, ...]
    weights: tuple[str | None, ...] = (None,)
    kv_dtypes: tuple[str | None, ...] = (None,)
    max_seqs: tuple[int | None, ...] = (None,)
    tps: tuple[int | None, ...] = (None,)
    memories: tuple[Memory, ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    model: str
    memory: Memory
    budget: BudgetResult
    fits: bool
    reason: str

    @property
    def inputs(self) -> BudgetInputs:
        return self.budget.inputs

    @property
    def candidate(self) -> int:
        return self.budget.candidate if self.fits else 0

    @property
    def headroom_gib(self) -> float:
        b = self.budget
        return (b.gpu_bytes - b.weights_bytes - b.margin_bytes - b.kv_per_seq_bytes) / GIB

    @property
    def usd_per_hour(self) -> float | None:
        p = self.memory.usd_per_gpu_hour
        return None if p is None else p * self.inputs.tp

    @property
    def candidate_per_gpu(self) -> float:
        return self.candidate / self.inputs.tp

    def as_json(self) -> dict[str, Any]:
        i = self.inputs
        return {"id": self.id, "model": self.model, "weights": i.weights, "kv_dtype": i.kv_dtype,
                "max_seq": i.max_seq, "tp": i.tp, "device": self.memory.label, "memory_gib": round(self.memory.gib, 4),
                "fits": self.fits, "reason": self.reason, "kv_per_seq_gib": round(self.budget.kv_per_seq_gib, 4),
                "memory_only_candidate": self.candidate}

    def details(self) -> dict[str, Any]:
        b = self.budget
        return {"id": self.id, "headroom_gib": round(self.headroom_gib, 4), "weights_gib": round(b.weights_gib, 4),
                "margin_gib": round(b.margin_gib, 4), "cache_budget_gib": round(b.cache_budget_gib, 4),
                "gpus": self.inputs.tp, "usd_per_gpu_hour": self.memory.usd_per_gpu_hour,
                "usd_per_hour": self.usd_per_hour, "candidate_per_gpu": round(self.candidate_per_gpu, 4),
                "memory": self.memory.how}


@dataclass(frozen=True, slots=True)
class Screen:
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def fitting(self) -> int:
        return sum(1 for r in self.rows if r.fits)

    @property
    def exit_code(self) -> int:
        """0 when at least one candidate fits, 1 when none does."""
        return 0 if self.fitting else 1


def grid_size(axes: Axes) -> int:
    return (len(axes.models) * len(axes.weights) * len(axes.kv_dtypes) * len(axes.max_seqs) * len(axes.tps)
            * len(axes.memories))


def _gib(bytes_: int) -> str:
    return f"{bytes_ / GIB:.2f} GiB"


def _why_not(inputs: BudgetInputs, b: BudgetResult) -> str:
    """The first reason the row does not fit ("" when it fits)."""
    tp = inputs.tp
    if tp > 1 and not inputs.mla_latent_dim and inputs.kv_heads % tp and tp % inputs.kv_heads:
        return (f"TP does not divide the KV heads: {inputs.kv_heads} KV heads over tp {tp} (neither divides the "
                "other: engines refuse this split)")
    if b.weights_bytes > b.gpu_bytes:
        return f"weights alone exceed: {_gib(b.weights_bytes)} of weights per GPU > {_gib(b.gpu_bytes)}"
    if b.weights_bytes + b.margin_bytes > b.gpu_bytes:
        return (f"weights + runtime margin exceed: {_gib(b.weights_bytes)} + {_gib(b.margin_bytes)} per GPU > "
                f"{_gib(b.gpu_bytes)}")
    if not b.fits:
        return (f"KV for one sequence exceeds: {_gib(b.kv_per_seq_bytes)} per {inputs.max_seq}-token sequence > "
                f"{_gib(b.cache_budget_bytes)} cache budget")
    return ""


_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(text: str, limit: int = 40) -> str:
    return _SLUG.sub("-", text).strip("-.")[:limit] or "model"


def _row_id(model: ModelSpec, inputs: BudgetInputs, memory: Memory) -> str:
    mem = memory.device.name if memory.device is not None else f"{memory.gib:g}GiB"
    return (f"{_slug(model.key)}.{inputs.weights}.kv-{inputs.kv_dtype}.seq{inputs.max_seq}.tp{inputs.tp}."
            f"{_slug(mem)}")


def _sort_key(r: Row) -> tuple:
    usd = r.usd_per_hour
    return (not r.fits, -r.candidate_per_gpu, usd is None, usd if usd is not None else 0.0, r.id)


def screen(axes: Axes, max_candidates: int = DEFAULT_MAX_CANDIDATES) -> Screen:
    """Every row of the cross product, budgeted and sorted. Raises GridTooLarge past ``max_candidates``, and
    ValueError (a BudgetError) for inputs a model refuses."""
    n = grid_size(axes)
    if n > max_candidates:
        raise GridTooLarge(f"the grid has {n:,} candidates ({len(axes.models)} models x {len(axes.weights)} weights x "
                           f"{len(axes.kv_dtypes)} KV dtypes x {len(axes.max_seqs)} sequence lengths x {len(axes.tps)} "
                           f"TP x {len(axes.memories)} memories), more than --max-candidates {max_candidates}: "
                           "narrow a list or raise --max-candidates")
    rows: list[Row] = []
    ids: dict[str, int] = {}
    for model in axes.models:
        for w in axes.weights:
            for kv in axes.kv_dtypes:
                for seq in axes.max_seqs:
                    for tp in axes.tps:
                        for mem in axes.memories:
                            inputs = model.make(weights=w, kv_dtype=kv, max_seq=seq, tp=tp, gpu_gib=mem.gib)
                            if mem.device is not None:
                                inputs = inputs.replace(notes=(*inputs.notes, mem.device.assumption()))
                            b = compute_budget(inputs)
                            why = _why_not(inputs, b)
                            rid = _row_id(model, inputs, mem)
                            if rid in ids:
                                ids[rid] += 1
                                rid = f"{rid}-{ids[rid]}"
                            else:
                                ids[rid] = 1
                            rows.append(Row(rid, model.label, mem, b, not why, why or FITS))
    rows.sort(key=_sort_key)
    return Screen(tuple(rows))


# ------------------------------------------------------------------ outputs


def screen_doc(s: Screen, devices: Sequence[str] = ()) -> dict[str, Any]:
    """The ``--json`` document: ``candidates`` (exactly :data:`JSON_KEYS` each), ``details`` (per id: headroom,
    weights, cache budget, GPUs, cost per hour, where the memory came from), the counts and the exit code."""
    return {"schema": SCHEMA, "candidates": [r.as_json() for r in s.rows], "details": [r.details() for r in s.rows],
            "total": len(s.rows), "fitting": s.fitting, "devices": list(devices), "notes": list(s.notes),
            "headroom": "memory - weights - runtime margin - one sequence's KV cache, per GPU (negative: the shortfall)",
            "sorted": "fitting first, then the candidate per GPU-hour (candidate / tp), then cost per hour, then id",
            "note": CANDIDATE_NOTE, "exit_code": s.exit_code}


def screen_csv(s: Screen) -> str:
    """The table as CSV (:data:`CSV_KEYS`): one header line, one line per row; outside strings stay data."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_KEYS)
    for r in s.rows:
        d = {**r.as_json(), "headroom_gib": round(r.headroom_gib, 4), "usd_per_hour": r.usd_per_hour}
        w.writerow([_csv_cell(d[k]) for k in CSV_KEYS])
    return buf.getvalue()


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    text = term(str(v))
    return "'" + text if text[:1] in ("=", "+", "-", "@") and not _is_number(text) else text  # no spreadsheet formula


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _fmt_usd(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


def format_screen(s: Screen, memories: Sequence[Memory], max_rows: int | None = None,
                  extra: Mapping[str, str] | None = None) -> str:
    """The text table: a line per row (fitting first), the reason of each row that does not fit, then where each
    memory came from and what the candidate is."""
    head = ("fits", "model", "weights", "kv", "max_seq", "tp", "device", "mem GiB", "KV/seq GiB", "candidate",
            "headroom GiB", "$/h")
    body = []
    for r in s.rows[:max_rows]:
        i = r.inputs
        body.append(("yes" if r.fits else "NO", r.model, i.weights, i.kv_dtype, str(i.max_seq), str(i.tp),
                     r.memory.label, f"{r.memory.gib:.2f}", f"{r.budget.kv_per_seq_gib:.3f}", str(r.candidate),
                     f"{r.headroom_gib:.2f}", _fmt_usd(r.usd_per_hour)))
    widths = [max(len(h), *(len(x[k]) for x in body)) if body else len(h) for k, h in enumerate(head)]
    right = {4, 5, 7, 8, 9, 10, 11}

    def line(cells: Sequence[str]) -> str:
        return "  " + "  ".join(c.rjust(widths[k]) if k in right else c.ljust(widths[k])
                                for k, c in enumerate(cells)).rstrip()

    noun = "candidate" if len(s.rows) == 1 else "candidates"
    out = [f"Screening table: {len(s.rows)} {noun}, {s.fitting} fit (memory only: each a number to load-test, "
           "not a limit)", "", line(head)]
    for r, cells in zip(s.rows, body):
        out.append(line(cells))
        out.append(f"      id {r.id}" + ("" if r.fits else f": {r.reason}"))
    if max_rows is not None and len(s.rows) > max_rows:
        out.append(f"  ... {len(s.rows) - max_rows} more rows (--json or --csv list them all)")
    out += ["", "Memory (what each budget divides; the runtime margin comes off it):"]
    out += [f"  - {m.label}: {m.how}" for m in memories]
    out += ["", "headroom: memory - weights - runtime margin - one sequence's KV cache, per GPU (negative: the "
            "shortfall); sorted fitting first, then by the candidate per GPU-hour (candidate / tp)"]
    if not any(m.usd_per_gpu_hour is not None for m in memories):
        out.append("$/h: no price given (--gpu-hour-usd USD, or NAME=USD per device); the device table ships none")
    for k, v in (extra or {}).items():
        out.append(f"{k}: {v}")
    out += s.notes
    out += ["", CANDIDATE_NOTE]
    return "\n".join(term(x) for x in out) + "\n"
