"""`accept`'s own quality policy (standard library only): the verdict recomputed from a quality file's per-case
results with accept's settings, never the thresholds written inside the file, and the conditions under which
a quality PASS is acceptance-grade.

A quality PASS counts towards "ready" only when
- it is recomputed with accept's margin / alpha / minimum cases (the defaults of `servewatch quality`),
- the set holds at least one long-context case (category ``long_context`` or a generated long-context case),
- the candidate was run against the same model as the load runs (and the file names its model),
- candidate and baseline are different configurations (endpoint, model or a stated setting),
- no category FAILs and every category the file marks required (``set.required``) is itself PASS.
Anything short is "quality: not acceptance-grade (why)", never "ready".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.quality.advice import with_advice
from tui.core.quality.lctable import is_long_context
from tui.core.quality.regression import compare
from tui.core.quality.results import baseline_from_result, recheck, required_of
from tui.core.quality.vocab import DEFAULT_ALPHA, DEFAULT_MARGIN, DEFAULT_MIN_CASES, FAIL, PASS, SetError


@dataclass(frozen=True, slots=True)
class QualityPolicy:
    margin: float = DEFAULT_MARGIN
    alpha: float = DEFAULT_ALPHA
    min_cases: int = DEFAULT_MIN_CASES


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


__all__ = ["QualityPolicy", "file_settings_note", "is_long_context", "policy_problems", "recompute"]


def recompute(doc: Mapping[str, Any], policy: QualityPolicy) -> tuple[dict | None, dict]:
    """(comparison, verdict) of the file's per-case rows under ``policy``, with the file's required categories
    (``set.required``) and the advice from its sides (raises SetError)."""
    recheck(doc)  # validates the document as `quality` would
    cand = _map(doc.get("candidate"))
    base = doc.get("baseline")
    try:
        base_rows = baseline_from_result(base, require_success=False)["cases"] if isinstance(base, Mapping) else None
        comparison, verdict = compare(cand.get("cases") or [], base_rows, margin=policy.margin, alpha=policy.alpha,
                                      min_cases=policy.min_cases, required=required_of(doc))
    except (TypeError, ValueError) as exc:
        raise SetError(f"quality result cannot be rechecked: {exc}") from None
    return comparison, with_advice(verdict, comparison, cand, base if isinstance(base, Mapping) else None)


def _config(side: Mapping[str, Any]) -> dict:
    """What identifies a configuration: the target (url, model and any stated setting) and the side's config facts
    (their values), secrets left out."""
    tgt = _map(side.get("target"))
    out = {k: v for k, v in tgt.items() if k not in ("headers", "api_key", "authorization")}
    for k, v in _map(side.get("config")).items():
        out[f"config.{k}"] = _map(v).get("value") if isinstance(v, Mapping) else v
    return out


def policy_problems(doc: Mapping[str, Any], policy: QualityPolicy, load_models: Sequence[str]) -> list[str]:
    """Why the quality evidence is not acceptance-grade for these load runs (empty: it is)."""
    out: list[str] = []
    comparison, _verdict = recompute(doc, policy)
    for cat, d in sorted(_map(_map(comparison).get("per_category")).items()):
        d = _map(d)
        if d.get("state") == FAIL:
            out.append(f"category {cat} FAILs: the candidate is worse than the baseline there by more than the "
                       f"{policy.margin:.0%} margin")
        elif d.get("required") and d.get("state") != PASS:
            out.append(f"required category {cat} is {d.get('state')} ({d.get('reason')})")
    cand = _map(doc.get("candidate"))
    rows = [r for r in (cand.get("cases") or []) if isinstance(r, Mapping)]
    if not any(is_long_context(r) for r in rows):
        out.append("no long-context case in the set")
    qmodel = _map(cand.get("target")).get("model")
    if not qmodel:
        out.append("the quality file names no candidate model")
    elif load_models and str(qmodel) not in load_models:
        out.append(f"quality was run against model {qmodel}, the load runs against {', '.join(load_models)}")
    base = doc.get("baseline")
    if isinstance(base, Mapping) and _config(base) == _config(cand):
        tgt = _map(cand.get("target"))
        out.append(f"candidate and baseline are the same configuration (endpoint {tgt.get('url') or 'unknown'}, "
                   f"model {tgt.get('model') or 'unknown'}, no setting stated that differs)")
    return out


def file_settings_note(doc: Mapping[str, Any], policy: QualityPolicy) -> str | None:
    """A note when the file's own thresholds differ from accept's (they are not used)."""
    st = _map(doc.get("settings"))
    own = {"margin": policy.margin, "alpha": policy.alpha, "min_cases": policy.min_cases}
    diff = [f"{k} {st[k]}" for k in own if k in st and st[k] != own[k]]
    if not diff:
        return None
    return (f"the quality file's own settings ({', '.join(diff)}) are not used: accept judges with margin "
            f"{policy.margin:g}, alpha {policy.alpha:g}, min cases {policy.min_cases}")
