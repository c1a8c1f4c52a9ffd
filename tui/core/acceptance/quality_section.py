"""Section 5 of the acceptance report: the quality verdict recomputed with accept's own policy
(``tui.core.quality.policy``), and which load files and quality file were tied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tui.core.quality.vocab as Q
from tui.core.acceptance.inputs import RunInput, _map, _str
from tui.core.identity import Identity
from tui.core.quality.digest import QualityIntegrity, verify
from tui.core.quality.policy import (
    QualityPolicy,
    configuration_problems,
    file_settings_note,
    policy_problems,
    side_identity,
)
from tui.core.quality.policy import recompute as recompute_quality
from tui.core.quality.results import long_context_reached
from tui.core.quality.scoring import summarize
from tui.core.redact import redact_url

QUALITY_PHRASES = {
    Q.FAIL: ("FAIL: the candidate answers worse than the baseline by more than the margin; "
             "the quality section names the next configuration to try"),
    Q.NO_EVIDENCE: ("NO_EVIDENCE: too few usable paired cases, a side with no successful case, too little "
                    "evidence to show the drop is below the margin, or a required category without a PASS"),
    Q.NO_BASELINE: "no baseline: absolute pass rates only, so a regression cannot be ruled out",
}


def quality_section(doc: Mapping | None, source: str | None, measured_models: Sequence[str],
                    policy: QualityPolicy | None = None, *, load: Sequence[Identity] = (),
                    integrity: QualityIntegrity | None = None) -> dict:
    """Section 5: the quality verdict recomputed from the file's per-case rows with accept's own policy (its
    margin / alpha / minimum cases, never the file's), and why it is not acceptance-grade (tui.core.quality.policy):
    ``load`` the load runs' identities (tied by served model), ``integrity`` the file's verification (None: verified
    here, without a key)."""
    if doc is None:
        return {"run": False, "state": "not run", "source": None}
    policy = policy or QualityPolicy()
    if integrity is None:
        integrity = verify(doc, None, name=str(source or "the quality file"))
    comparison, verdict = recompute_quality(doc, policy)
    notes: list[str] = []
    saved = _map(doc.get("verdict"))
    if saved.get("state") and saved.get("state") != verdict["state"]:
        notes.append(f"the file says {saved.get('state')}, its cases say {verdict['state']} under accept's policy: "
                     "the recomputed verdict is used")
    own = file_settings_note(doc, policy)
    if own:
        notes.append(own)
    cand = _map(doc.get("candidate"))
    base = doc.get("baseline") if isinstance(doc.get("baseline"), Mapping) else None
    s_c = summarize(cand.get("cases") or [])
    s_b = summarize(base.get("cases") or []) if base else None
    tgt = _map(cand.get("target"))
    qmodel = _str(tgt.get("model"))
    not_grade = policy_problems(doc, policy, measured_models, load=load, integrity=integrity)
    notes += configuration_problems(doc)[1]
    served = side_identity(cand)
    st = _map(doc.get("set"))
    if st.get("starter"):
        notes.append("quality used the STARTER set: replace it with the team's own key tasks")
    return {
        "run": True,
        "source": source,
        "synthetic": bool(doc.get("synthetic", False)),
        "state": verdict["state"],
        "reason": verdict["reason"],
        "fallback": verdict.get("fallback"),
        "advice": list(verdict.get("advice") or []),
        "category_states": {c: {k: _map(d).get(k) for k in ("state", "reason", "required", "n", "pairs_needed")}
                            for c, d in _map(_map(comparison).get("per_category")).items()},
        "required": list(_map(comparison).get("required") or []),
        "suite": _suite(st.get("suite")),
        "decoding": dict(_map(doc.get("decoding"))) or None,
        "long_context_reached": _reached(cand),
        "target": {"url": redact_url(tgt.get("url")), "model": qmodel, "served_model": served.served_model,
                   "identity": served.line()},
        "integrity": integrity.to_dict(),
        "baseline": None if base is None else {
            "source": _str(base.get("source")),
            "url": redact_url((base.get("target") or {}).get("url")) if isinstance(base.get("target"), Mapping) else None,
            "model": _str((base.get("target") or {}).get("model")) if isinstance(base.get("target"), Mapping) else None,
            "overall": s_b["overall"] if s_b else None,
        },
        "set": {"source": _str(st.get("source")), "label": _str(st.get("label")), "starter": bool(st.get("starter")),
                "cases": len(cand.get("cases") or []),
                "long_context": _map(st.get("long_context"))},
        "candidate_overall": s_c["overall"],
        "categories": s_c["categories"],
        "baseline_categories": s_b["categories"] if s_b else None,
        "comparison": None if comparison is None else {k: comparison.get(k) for k in (
            "paired", "dropped", "both_pass", "regressed", "improved", "both_fail", "delta", "margin", "alpha",
            "min_cases", "mcnemar_p_worse", "p_worse_by_more_than_margin", "p_noninferior",
            "p_noninferior_exact_guard")},
        "failed_requests": s_c["failed_requests"],
        "policy": {"margin": policy.margin, "alpha": policy.alpha, "min_cases": policy.min_cases},
        "not_acceptance_grade": not_grade,
        "notes": notes + [n for n in (comparison or {}).get("notes", []) if isinstance(n, str)],
    }


def _suite(v: object) -> dict | None:
    """The suite a file names (name, version, seed, cases, level, targeted context), None for a file set."""
    m = _map(v)
    if not m:
        return None
    return {k: m.get(k) for k in ("name", "version", "seed", "cases", "level", "context_tokens")}


def _reached(side: Mapping) -> dict:
    """The long-context lengths the candidate reached: the file's own count when it has one, else from its rows."""
    saved = _map(side.get("long_context_reached"))
    if saved:
        return dict(saved)
    return long_context_reached([r for r in (side.get("cases") or []) if isinstance(r, Mapping)])


def tied_text(runs: Sequence[RunInput], qsec: Mapping) -> str:
    """Which load files and which quality file were tied: by the model their servers said they serve (the model
    claimed beside it when it differs), and the endpoint."""
    from tui.core.identity import identity_of

    loads = []
    for r in runs:
        tgt = _map(r.snapshot.header.get("target"))
        ident = identity_of(r.snapshot.header)
        loads.append(f"{r.source} ({_model_words(ident.served_model, ident.claimed_model)}, endpoint "
                     f"{redact_url(tgt.get('url')) or 'unknown'})")
    t = _map(qsec.get("target"))
    return (f"load {', '.join(loads) or 'none'} tied to quality {qsec.get('source')} "
            f"({_model_words(t.get('served_model'), t.get('model'))}, endpoint {t.get('url') or 'unknown'}), "
            "by the served model")


def _model_words(served: object, claimed: object) -> str:
    if served and claimed and served != claimed:
        return f"served model {served}, --model {claimed}"
    if served:
        return f"served model {served}"
    return f"model {claimed or 'unknown'} (claimed; the served model not recorded)"
