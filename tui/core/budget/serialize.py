"""A budget as JSON-ready data and back: :func:`budget_from_dict` never trusts saved results, it recomputes them
from the parameters and raises :class:`BudgetError` when they disagree. Reading a file is
``tui.sources.budget_files``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from tui.core.budget.arithmetic import compute_budget
from tui.core.budget.inputs import _INT_FIELDS_MIN, BudgetInputs
from tui.core.budget.results import BudgetResult
from tui.core.budget.vocab import CANDIDATE_NOTE, SCHEMA, VERIFY_TOLERANCE_GIB, BudgetError

# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------

_RESULT_FLOATS = ("weights_gib", "margin_gib", "kv_per_seq_gib", "cache_budget_gib", "shortfall_gib")
_RESULT_EXACT = (
    "candidate",
    "fits",
    "gpu_bytes",
    "weights_bytes",
    "margin_bytes",
    "kv_per_seq_bytes",
    "cache_budget_bytes",
    "kv_bytes_per_token",
    "kv_tokens_per_seq",
)
_RESULT_REQUIRED = ("weights_gib", "kv_per_seq_gib", "cache_budget_gib", "candidate", "fits")


def inputs_to_dict(inputs: BudgetInputs) -> dict[str, Any]:
    d = dataclasses.asdict(inputs)
    d["notes"] = list(inputs.notes)
    return d


def inputs_from_dict(d: Mapping[str, Any]) -> BudgetInputs:
    if not isinstance(d, Mapping):
        raise BudgetError("budget 'parameters' must be a JSON object")
    known = {f.name for f in dataclasses.fields(BudgetInputs)}
    unknown = set(d) - known
    if unknown:
        raise BudgetError(f"unknown budget parameter(s): {', '.join(sorted(unknown))}")
    values = dict(d)
    if "notes" in values:
        if not isinstance(values["notes"], list):
            raise BudgetError("budget parameter 'notes' must be a list of strings")
        values["notes"] = tuple(values["notes"])
    # JSON has one number type: accept 4096.0 for whole-number fields, nothing fractional.
    for name in _INT_FIELDS_MIN:
        v = values.get(name)
        if isinstance(v, float) and v.is_integer():
            values[name] = int(v)
    return BudgetInputs(**values)


def budget_to_dict(result: BudgetResult) -> dict[str, Any]:
    """The budget as JSON-ready data: schema, parameters (inputs), results, variants, assumptions, note."""
    results = {
        "weights_gib": result.weights_gib,
        "margin_gib": result.margin_gib,
        "kv_per_seq_gib": result.kv_per_seq_gib,
        "cache_budget_gib": result.cache_budget_gib,
        "candidate": result.candidate,
        "fits": result.fits,
        "shortfall_gib": result.shortfall_gib,
        "gpu_bytes": result.gpu_bytes,
        "weights_bytes": result.weights_bytes,
        "margin_bytes": result.margin_bytes,
        "kv_per_seq_bytes": result.kv_per_seq_bytes,
        "cache_budget_bytes": result.cache_budget_bytes,
        "kv_bytes_per_token": result.kv_bytes_per_token,
        "kv_tokens_per_seq": result.kv_tokens_per_seq,
        "verdict": result.verdict,
    }
    return {
        "schema": SCHEMA,
        "parameters": inputs_to_dict(result.inputs),
        "results": results,
        "variants": [dataclasses.asdict(v) for v in result.variants],
        "assumptions": list(result.assumptions),
        "assumptions_status": "not measured",
        "note": CANDIDATE_NOTE,
    }


def budget_to_json(result: BudgetResult, indent: int | None = 2) -> str:
    return json.dumps(budget_to_dict(result), indent=indent)


def _disagreements(saved: Mapping[str, Any], fresh: Mapping[str, Any], where: str, floats: tuple[str, ...], exact: tuple[str, ...]) -> list[str]:
    out = []
    for key in floats:
        if key not in saved:
            continue
        s = saved[key]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            out.append(f"{where}{key} saved as {s!r}, not a number")
        elif abs(s - fresh[key]) > VERIFY_TOLERANCE_GIB:
            out.append(f"{where}{key} saved {s:.4f}, recomputed {fresh[key]:.4f}")
    for key in exact:
        if key in saved and (saved[key] != fresh[key] or isinstance(saved[key], bool) != isinstance(fresh[key], bool)):
            out.append(f"{where}{key} saved {saved[key]!r}, recomputed {fresh[key]!r}")
    return out


def budget_from_dict(d: Mapping[str, Any]) -> BudgetResult:
    """Recompute a saved budget from its parameters; raise BudgetError if its saved results disagree.

    Accepts the file shape {"schema": ..., "parameters": ..., "results": ..., ...} and the budget
    record shape (the same keys plus "type": "budget"). Numbers too large for a float (``10**400``) are a
    BudgetError too, never an OverflowError.
    """
    try:
        return _budget_from_dict(d)
    except OverflowError:
        raise BudgetError("a number in the budget is too large to compute with") from None


def _budget_from_dict(d: Mapping[str, Any]) -> BudgetResult:
    if not isinstance(d, Mapping):
        raise BudgetError("a budget must be a JSON object")
    if d.get("type") == "budget" and "schema" not in d and isinstance(d.get("budget"), Mapping):
        d = {**d["budget"], "type": "budget"}  # also the nested record shape {"type": "budget", "budget": {...}}
    if "type" in d and d["type"] != "budget":
        raise BudgetError(f"not a budget record: type is {d['type']!r}")
    if d.get("schema") != SCHEMA:
        raise BudgetError(f"unsupported budget schema {d.get('schema')!r}; expected {SCHEMA!r}")
    if "parameters" not in d:
        raise BudgetError("budget has no 'parameters' to recompute from")
    result = compute_budget(inputs_from_dict(d["parameters"]))
    saved = d.get("results")
    if not isinstance(saved, Mapping):
        raise BudgetError("budget has no 'results' object to verify")
    missing = [k for k in _RESULT_REQUIRED if k not in saved]
    if missing:
        raise BudgetError(f"budget results lack {', '.join(missing)}")
    fresh = budget_to_dict(result)
    problems = _disagreements(saved, fresh["results"], "", _RESULT_FLOATS, _RESULT_EXACT)
    saved_variants = d.get("variants")
    if saved_variants is not None:
        if not isinstance(saved_variants, list) or not all(isinstance(v, Mapping) for v in saved_variants):
            raise BudgetError("budget 'variants' must be a list of objects")
        fresh_variants = {v["name"]: v for v in fresh["variants"]}
        saved_names = [v.get("name") for v in saved_variants]
        if sorted(map(str, saved_names)) != sorted(fresh_variants):
            problems.append(f"variants saved {saved_names!r}, recomputed {list(fresh_variants)!r}")
        else:
            for v in saved_variants:
                problems += _disagreements(
                    v,
                    fresh_variants[v["name"]],
                    f"variant {v['name']!r}: ",
                    ("weights_gib", "kv_per_seq_gib", "cache_budget_gib"),
                    ("candidate",),
                )
    if problems:
        raise BudgetError(
            "saved budget disagrees with recomputation from its parameters: " + "; ".join(problems)
        )
    return result
