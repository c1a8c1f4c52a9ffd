"""`accept`'s own quality policy (standard library only): the verdict recomputed from a quality file's per-case
results with accept's settings, never the thresholds written inside the file, and the conditions under which
a quality PASS is acceptance-grade.

A quality PASS counts towards "ready" only when
- the file verifies against its own digest (``integrity``; with a key, its signature), and a saved baseline it was
  compared with verified too; a file without a digest is unverified, never acceptance-grade
  (``tui.core.quality.digest``);
- its rows agree with themselves (``passed`` vs ``failed_check``, duplicate ids, the set's count, the suite it names;
  ``tui.core.quality.filecheck``);
- it is recomputed with accept's margin / alpha / minimum cases (the defaults of `servewatch quality`);
- the set holds long-context cases, each category holding them is required (it must itself PASS), the candidate
  server's context is known and no long-context case is below its declared share of it, and some case reaches the
  largest share (``QUALITY_CONTEXT_FRACTIONS``);
- the model each side claimed is the model its server said it serves, and the candidate's served model is the load
  runs' served model (tied by what the servers said, never by ``--model``);
- candidate and baseline are different configurations by their servers' own facts (engine, build, model file or
  name, quantization, context, slots, parameters; ``tui.core.identity.server_facts``), or by a setting stated on
  both sides (``--setting`` / ``--baseline-setting``) with different values that the servers do not show; never by
  URL strings;
- no category FAILs and every required category is itself PASS.
Anything short is "quality: not acceptance-grade (why)", never "ready".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.defaults import QUALITY_CONTEXT_FRACTIONS
from tui.core.identity import (
    Identity,
    fact_differences,
    identity_of,
    model_mismatch,
    same_model,
    server_facts,
)
from tui.core.quality.advice import with_advice
from tui.core.quality.digest import QualityIntegrity, verify
from tui.core.quality.filecheck import file_problems
from tui.core.quality.lctable import (
    LONG_CONTEXT_REACH,
    is_long_context,
    reached_tokens,
    short_long_context,
    side_context,
)
from tui.core.quality.regression import compare
from tui.core.quality.results import baseline_from_result, recheck, required_of
from tui.core.quality.vocab import DEFAULT_ALPHA, DEFAULT_MARGIN, DEFAULT_MIN_CASES, FAIL, PASS, SetError

#: stated settings (``--setting KEY=VALUE``) that make two configurations different when the servers' facts do not
#: (a free-text note is not a configuration)
STATED_KEYS = ("weights", "kv_cache", "engine", "model", "context_tokens", "quantization", "gpu")


@dataclass(frozen=True, slots=True)
class QualityPolicy:
    margin: float = DEFAULT_MARGIN
    alpha: float = DEFAULT_ALPHA
    min_cases: int = DEFAULT_MIN_CASES


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


__all__ = ["QualityPolicy", "configuration_problems", "file_settings_note", "identity_problems", "is_long_context",
           "long_context_problems", "policy_problems", "recompute", "required_categories", "side_identity",
           "tie_problems"]


def _rows(side: Mapping[str, Any]) -> list[Mapping]:
    return [r for r in (side.get("cases") or []) if isinstance(r, Mapping)]


def required_categories(doc: Mapping[str, Any]) -> list[str]:
    """The categories that must themselves PASS: the file's (``set.required``) and every category that holds
    long-context cases (raises SetError when ``set.required`` is malformed)."""
    req = required_of(doc)
    lc = sorted({str(r.get("category", "general")) for r in _rows(_map(doc.get("candidate"))) if is_long_context(r)})
    return list(dict.fromkeys([*req, *lc]))


def recompute(doc: Mapping[str, Any], policy: QualityPolicy) -> tuple[dict | None, dict]:
    """(comparison, verdict) of the file's per-case rows under ``policy``, with the required categories
    (:func:`required_categories`), the candidate server's context for the long-context evidence, and the advice
    from its sides (raises SetError)."""
    recheck(doc)  # validates the document as `quality` would
    cand = _map(doc.get("candidate"))
    base = doc.get("baseline")
    try:
        base_rows = baseline_from_result(base, require_success=False)["cases"] if isinstance(base, Mapping) else None
        cand_rows = baseline_from_result(cand, require_success=False)["cases"]
        comparison, verdict = compare(cand_rows, base_rows, margin=policy.margin, alpha=policy.alpha,
                                      min_cases=policy.min_cases, required=required_categories(doc),
                                      context_tokens=side_context(cand)[0])
    except (TypeError, ValueError) as exc:
        raise SetError(f"quality result cannot be rechecked: {exc}") from None
    return comparison, with_advice(verdict, comparison, cand, base if isinstance(base, Mapping) else None)


def side_identity(side: Mapping[str, Any]) -> Identity:
    """What one quality side measured, read as a run header is (``tui.core.identity.identity_of``): the model sent
    (``target.model``) and the model its server said it serves (``server_identity``, else ``server``)."""
    return identity_of({"target": _map(side.get("target")), "server_identity": side.get("server_identity"),
                        "environment": {"server": _map(side.get("server"))}})


def identity_problems(doc: Mapping[str, Any]) -> list[str]:
    """A side that claimed a model its server did not serve."""
    out = []
    for name in ("candidate", "baseline"):
        side = doc.get(name)
        if isinstance(side, Mapping):
            why = model_mismatch(side_identity(side))
            if why:
                out.append(f"quality {name}: {why.replace('the run claims', 'it claims', 1)}")
    return out


def tie_problems(doc: Mapping[str, Any], load: Sequence[Identity]) -> list[str]:
    """The quality candidate against the load runs, by the model their servers said they serve."""
    if not load:
        return []
    q = side_identity(_map(doc.get("candidate")))
    if not q.served_model and not q.claimed_model:
        return ["the quality file names no candidate model"]
    out = []
    for ident in load:
        if not q.served_model or not ident.served_model:
            which = "the quality candidate's" if not q.served_model else "a load run's"
            out.append(f"{which} served model is not recorded: quality ({q.value('model')}) and load "
                       f"({ident.value('model') or 'unknown'}) cannot be tied by the model their servers serve")
        elif not (same_model(q.served_model, ident.served_model, q.served_models)
                  or same_model(ident.served_model, q.served_model, ident.served_models)):
            out.append(f"quality was run against the served model {q.served_model}, the load against "
                       f"{ident.served_model} (tied by what the servers said, not by --model)")
    return list(dict.fromkeys(out))


def _stated(side: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in _map(side.get("config")).items():
        if k in STATED_KEYS:
            val = _map(v).get("value") if isinstance(v, Mapping) else v
            if val is not None:
                out[str(k)] = str(val)
    return out


def configuration_problems(doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, notes): candidate and baseline compared by their servers' own facts, never by URL strings. The
    same facts on both sides (or none stated) and no stated setting that differs: the same configuration, not
    acceptance-grade. A difference only in stated settings is taken as stated, and said."""
    base = doc.get("baseline")
    if not isinstance(base, Mapping):
        return [], []
    cand = _map(doc.get("candidate"))
    fa = server_facts(_map(cand.get("server")), _map(cand.get("server_identity")))
    fb = server_facts(_map(base.get("server")), _map(base.get("server_identity")))
    differ, same = fact_differences(fa, fb)
    if differ:
        return [], ["candidate and baseline differ by their servers' facts: "
                    + ", ".join(f"{k} {fa[k]} vs {fb[k]}" for k in differ)]
    sa, sb = _stated(cand), _stated(base)
    stated = [k for k in sorted(set(sa) & set(sb)) if sa[k] != sb[k]]  # stated on one side only: unknown
    if stated:
        return [], ["candidate and baseline differ only by stated settings the servers do not show (taken as "
                    "stated): " + ", ".join(f"{k} {sa[k]} vs {sb[k]}" for k in stated)]
    facts = ", ".join(f"{k} {fa[k]}" for k in same) if same else "neither server stated a fact both share"
    return [f"candidate and baseline are the same configuration by their servers' own facts ({facts}; no stated "
            "setting differs): a configuration compared with itself shows nothing about a change"], []


def long_context_problems(doc: Mapping[str, Any]) -> list[str]:
    """The long-context evidence against the candidate server's context: known, every case at its declared share,
    and the largest share reached."""
    cand = _map(doc.get("candidate"))
    rows = [r for r in _rows(cand) if is_long_context(r)]
    if not rows:
        return ["no long-context case in the set"]
    ctx, _where = side_context(cand)
    if ctx is None:
        return ["the candidate server's context is not recorded: the long-context cases' share of it was not checked"]
    out = []
    short = short_long_context(rows, ctx)
    if short:
        first = next(iter(short.values()))
        out.append(f"{len(short)} of {len(rows)} long-context cases are below their declared share of the server's "
                   f"{ctx}-token context (e.g. {first}): the long-context category is NO_EVIDENCE")
    top = max(QUALITY_CONTEXT_FRACTIONS)
    longest = max((t for t in (reached_tokens(r)[0] for r in rows) if t is not None), default=None)
    if longest is None or longest < LONG_CONTEXT_REACH * top * ctx:
        out.append(f"no long-context case reaches {top:.0%} of the server's {ctx}-token context (longest prompt "
                   f"{longest if longest is not None else 'unknown'} tokens)")
    return out


def _integrity_problems(doc: Mapping[str, Any], integrity: QualityIntegrity | None) -> list[str]:
    ri = integrity if integrity is not None else verify(doc)
    out = list(ri.problems)
    if ri.state == "unverified" and not ri.problems:
        out.append("the quality file carries no digest (an older servewatch, or the field was removed): its content "
                   "is unverified; rerun `servewatch quality`")
    base = doc.get("baseline")
    if isinstance(base, Mapping) and str(base.get("source") or "").startswith("file:"):
        bi = _map(base.get("integrity"))
        if bi.get("state") != "intact":
            out.append(f"the saved baseline it was compared with was {bi.get('state') or 'unverified'} (no digest "
                       "checked when it was read)")
    return out


def policy_problems(doc: Mapping[str, Any], policy: QualityPolicy, load_models: Sequence[str] = (), *,
                    load: Sequence[Identity] = (), integrity: QualityIntegrity | None = None,
                    check_integrity: bool = True) -> list[str]:
    """Why the quality evidence is not acceptance-grade for these load runs (empty: it is). ``load``: the load
    runs' identities (tie by served model); ``load_models`` (older callers): their claimed names, used only when no
    identity is given. ``integrity``: the file's verification with the key given (else verified without a key);
    ``check_integrity`` False: the document is about to be written (`quality`'s own summary)."""
    out: list[str] = _integrity_problems(doc, integrity) if check_integrity else []
    out += file_problems(doc)
    comparison, _verdict = recompute(doc, policy)
    for cat, d in sorted(_map(_map(comparison).get("per_category")).items()):
        d = _map(d)
        if d.get("state") == FAIL:
            out.append(f"category {cat} FAILs: the candidate is worse than the baseline there by more than the "
                       f"{policy.margin:.0%} margin")
        elif d.get("required") and d.get("state") != PASS:
            out.append(f"required category {cat} is {d.get('state')} ({d.get('reason')})")
    out += long_context_problems(doc)
    out += identity_problems(doc)
    if load:
        out += tie_problems(doc, load)
    elif load_models:
        qmodel = _map(_map(doc.get("candidate")).get("target")).get("model")
        if not qmodel:
            out.append("the quality file names no candidate model")
        elif str(qmodel) not in load_models:
            out.append(f"quality was run against model {qmodel}, the load runs against {', '.join(load_models)}")
    out += configuration_problems(doc)[0]
    return list(dict.fromkeys(out))


def file_settings_note(doc: Mapping[str, Any], policy: QualityPolicy) -> str | None:
    """A note when the file's own thresholds differ from accept's (they are not used)."""
    st = _map(doc.get("settings"))
    own = {"margin": policy.margin, "alpha": policy.alpha, "min_cases": policy.min_cases}
    diff = [f"{k} {st[k]}" for k in own if k in st and st[k] != own[k]]
    if not diff:
        return None
    return (f"the quality file's own settings ({', '.join(diff)}) are not used: accept judges with margin "
            f"{policy.margin:g}, alpha {policy.alpha:g}, min cases {policy.min_cases}")
