"""The paired regression verdict (candidate against baseline on the same cases): usable pairs, the exact McNemar
test, the paired score test (Tango / Nam) with its exact guard, and :func:`compare`. The method is stated in
``tui.core.quality`` and ``docs/acceptance.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

from tui.core.quality.advice import with_advice
from tui.core.quality.lctable import is_long_context, short_long_context
from tui.core.quality.scoring import summarize
from tui.core.quality.vocab import (
    CANDIDATE_FAILURES,
    DEFAULT_ALPHA,
    DEFAULT_MARGIN,
    DEFAULT_MIN_CASES,
    EXIT_CODES,
    FAIL,
    LOW_PASS_RATE,
    NO_BASELINE,
    NO_EVIDENCE,
    PASS,
    TRANSPORT_ERRORS,
)


def mcnemar_one_sided(n10: int, n01: int) -> float:
    """Exact one-sided McNemar p-value for "candidate worse": P(X >= n10), X ~ Bin(n10 + n01, 1/2)."""
    m = n10 + n01
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, k) for k in range(n10, m + 1))
    return min(1.0, tail / 2**m)


def restricted_p01(n10: int, n01: int, n: int, margin: float) -> float:
    """Maximum-likelihood P(baseline fail, candidate pass) under delta = p10 - p01 = margin.

    Root of 2n q^2 - B q - C = 0 with B = n10 (1 - m) + n01 (1 - 3m) - 2 nc m, C = n01 m (1 - m),
    nc = n - n10 - n01 (the concordant pairs); see docs/acceptance.md.
    """
    m = margin
    nc = n - n10 - n01
    b = n10 * (1 - m) + n01 * (1 - 3 * m) - 2 * nc * m
    c = n01 * m * (1 - m)
    return (b + math.sqrt(b * b + 8 * n * c)) / (4 * n)


def score_z(n10: int, n01: int, n: int, margin: float) -> float:
    """Paired score statistic (Tango 1998 / Nam 1997) for H0: delta = margin; positive means worse."""
    if n <= 0:
        return 0.0
    delta_hat = (n10 - n01) / n
    q = restricted_p01(n10, n01, n, margin)
    var = (2 * q + margin - margin * margin) / n
    if var <= 0:
        return 0.0 if delta_hat == margin else math.copysign(math.inf, delta_hat - margin)
    return (delta_hat - margin) / math.sqrt(var)


def usable_pairs(pairs: Iterable[tuple[Mapping, Mapping]]) -> tuple[list[tuple[Mapping, Mapping]], dict]:
    """(usable pairs, what was dropped). A pair is dropped when the candidate had a transport error that
    never reached an answer (refused, TLS, connect timeout, other), or the baseline had any request error
    (it gave no answer to compare with). A candidate's read timeout or reset stream is a failed case
    (:data:`CANDIDATE_FAILURES`), scored: dropping it would favour a candidate that hangs on hard cases.

    ``dropped = {"pairs": {reason: count}, "candidate": {class: count}, "baseline": {class: count}}``.
    """
    keep: list[tuple[Mapping, Mapping]] = []
    why: dict[str, int] = {}
    side: dict[str, dict[str, int]] = {"candidate": {}, "baseline": {}}
    for c, b in pairs:
        ec, eb = c.get("error"), b.get("error")
        c_t = bool(ec) and ec in TRANSPORT_ERRORS and ec not in CANDIDATE_FAILURES
        b_any = bool(eb)
        if not (c_t or b_any):
            keep.append((c, b))
            continue
        if c_t:
            side["candidate"][str(ec)] = side["candidate"].get(str(ec), 0) + 1
        if b_any:
            side["baseline"][str(eb)] = side["baseline"].get(str(eb), 0) + 1
        key = ("transport error on both sides" if c_t and eb in TRANSPORT_ERRORS else
               "candidate transport error" if c_t else
               "baseline transport error" if eb in TRANSPORT_ERRORS else "baseline request error")
        why[key] = why.get(key, 0) + 1
    return keep, {"pairs": dict(sorted(why.items())), "candidate": dict(sorted(side["candidate"].items())),
                  "baseline": dict(sorted(side["baseline"].items()))}


def _dropped_text(dropped: Mapping) -> str:
    parts = [f"{k} {v}" for k, v in dropped["pairs"].items()]
    for name in ("candidate", "baseline"):
        if dropped[name]:
            parts.append(f"{name} errors " + ", ".join(f"{k}={v}" for k, v in dropped[name].items()))
    return "; ".join(parts)


def _count(items: Iterable[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[str(x)] = out.get(str(x), 0) + 1
    return dict(sorted(out.items()))


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p) (log-space terms: no overflow for large n)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
    return min(1.0, total)


def pairs_needed(margin: float, alpha: float) -> int:
    """Usable pairs PASS needs when every pair is concordant: the score test needs
    sqrt(n m / (1 - m)) > z_alpha and the exact guard (1 - m)^n < alpha."""
    if margin <= 0:
        return 10**9
    z = NormalDist().inv_cdf(1 - alpha)
    n_score = int(math.floor(z * z * (1 - margin) / margin)) + 1
    n_exact = int(math.floor(math.log(alpha) / math.log1p(-margin))) + 1
    return max(n_score, n_exact)


def _case_map(rows: Iterable[Mapping]) -> dict[str, Mapping]:
    out: dict[str, Mapping] = {}
    for r in rows:
        if isinstance(r, Mapping) and isinstance(r.get("id"), str):
            out.setdefault(r["id"], r)
    return out


def _judge(paired: list[tuple[Mapping, Mapping]], *, margin: float, alpha: float, min_cases: int,
           dropped: Mapping | None = None, answered_elsewhere: bool = False) -> dict:
    """The decision on a list of usable pairs, shared by the overall verdict and each category's: the counts, the
    tests and ``state`` / ``reason``. ``dropped`` (the overall's dropped pairs) only changes the wording.
    ``answered_elsewhere`` (a category's decision): the candidate answered cases of other categories, so the server
    works and every failed request here is a failed case (a prompt too long for its context), not an unmeasured
    endpoint."""
    n_dropped = sum(dropped["pairs"].values()) if dropped else 0
    n = len(paired)
    n11 = sum(1 for c, b in paired if c.get("passed") and b.get("passed"))
    n10 = sum(1 for c, b in paired if b.get("passed") and not c.get("passed"))
    n01 = sum(1 for c, b in paired if c.get("passed") and not b.get("passed"))
    n00 = n - n11 - n10 - n01
    z_crit = NormalDist().inv_cdf(1 - alpha)
    p_mc = mcnemar_one_sided(n10, n01)
    z = score_z(n10, n01, n, margin) if n else 0.0
    p_worse_by_margin = 1 - NormalDist().cdf(z) if math.isfinite(z) else (0.0 if z > 0 else 1.0)
    p_noninferior = NormalDist().cdf(z) if math.isfinite(z) else (0.0 if z < 0 else 1.0)
    p_guard = binom_cdf(n10 - n01, n, margin) if n and margin > 0 else 1.0
    delta = (n10 - n01) / n if n else None
    cp = (n11 + n01) / n if n else None
    bp = (n11 + n10) / n if n else None
    dpct = "N/A" if delta is None else f"{100 * delta:+.1f} points"
    rates = ("" if not n else f"candidate {cp:.0%} vs baseline {bp:.0%} on {n} usable paired cases "
             f"({n10} regressed, {n01} improved; drop {dpct})")
    drop_txt = f"; {n_dropped} pair(s) dropped for errors, not scored" if n_dropped else ""
    answered = sum(1 for c, _b in paired if not c.get("error"))
    if n == 0:
        state = NO_EVIDENCE
        reason = ("no usable paired cases" + (f" ({n_dropped} dropped: {_dropped_text(dropped)})"
                                              if dropped and n_dropped else "") + ": nothing was compared")
    elif answered == 0 and not answered_elsewhere:
        errs = _count(c.get("error") for c, _b in paired)
        state = NO_EVIDENCE
        reason = (f"the candidate answered none of the {n} usable cases (request errors: "
                  f"{', '.join(f'{k}={v}' for k, v in errs.items())}): its quality was not measured{drop_txt}")
    elif n11 + n10 == 0:
        state = NO_EVIDENCE
        reason = (f"{rates}: the baseline passed none of the usable cases, so the candidate had nothing to lose and "
                  f"no regression could show{drop_txt}; use a set the baseline can pass")
    elif p_mc < alpha and z > z_crit:
        state = FAIL
        reason = (f"{rates}: the candidate is worse than the baseline by more than the {margin:.0%} margin, with "
                  f"evidence (exact McNemar p={p_mc:.3g}, margin score test p={p_worse_by_margin:.3g}, "
                  f"alpha {alpha:g}){drop_txt}")
    elif n < min_cases:
        state = NO_EVIDENCE
        reason = (f"{rates}: {n} usable paired case(s) are too few to judge (need at least {min_cases})"
                  f"{drop_txt}")
    elif z < -z_crit and p_guard < alpha:
        state = PASS
        reason = (f"{rates}: the drop is below the {margin:.0%} margin, with evidence (non-inferiority score "
                  f"test p={p_noninferior:.3g}, exact guard p={p_guard:.3g}, alpha {alpha:g}){drop_txt}")
    else:
        need = pairs_needed(margin, alpha)
        more = (f"; with no regressions at all, about {need} usable pairs are needed to show a drop below "
                f"{margin:.0%}" if n10 == 0 and n < need else "")
        state = NO_EVIDENCE
        reason = (f"{rates}: not enough evidence either way (non-inferiority score test p={p_noninferior:.3g}, "
                  f"exact guard p={p_guard:.3g}, exact McNemar p={p_mc:.3g} for worse, alpha {alpha:g}){more}; "
                  f"add cases{drop_txt}")
    return {"n": n, "both_pass": n11, "regressed": n10, "improved": n01, "both_fail": n00,
            "candidate_pass_rate": cp, "baseline_pass_rate": bp, "delta": delta, "mcnemar_p_worse": p_mc,
            "score_z": z, "p_worse_by_more_than_margin": p_worse_by_margin, "p_noninferior": p_noninferior,
            "p_noninferior_exact_guard": p_guard, "state": state, "reason": reason}


def category_pairs_needed(margin: float, alpha: float, min_cases: int) -> int:
    """Usable pairs a category's PASS needs when every pair is concordant (the tests' count, at least min_cases)."""
    return max(pairs_needed(margin, alpha), min_cases)


def _needed_text(j: Mapping, need: int) -> str:
    """What a category's NO_EVIDENCE would need: the usable pairs for a PASS."""
    n, lost = j["n"], j["regressed"]
    if lost:
        return (f"it has {n} usable pair(s) with {lost} regressed: a PASS needs more than {need} usable pairs "
                f"({need} would do only with every pair concordant)")
    if n < need:
        return f"it has {n} usable pair(s): a PASS needs at least {need} with every pair concordant"
    return f"it has {n} usable pair(s) (a PASS needs at least {need} with every pair concordant)"


def _category_states(per_cat: dict[str, dict], by_cat: Mapping[str, list[tuple[Mapping, Mapping]]],
                     required: Sequence[str], *, margin: float, alpha: float, min_cases: int) -> None:
    need = category_pairs_needed(margin, alpha, min_cases)
    answered = any(not c.get("error") for pairs in by_cat.values() for c, _b in pairs)
    for cat in set(per_cat) | set(required):
        j = _judge(by_cat.get(cat, []), margin=margin, alpha=alpha, min_cases=min_cases, answered_elsewhere=answered)
        d = per_cat.setdefault(cat, {"n": 0, "both_pass": 0, "regressed": 0, "improved": 0, "both_fail": 0})
        reason = j["reason"]
        if j["n"] == 0:
            reason = "not measured: no usable paired case in this category"
        if j["state"] == NO_EVIDENCE and "usable pairs are needed" not in reason:
            reason += f"; {_needed_text(j, need)}"
        d.update({"candidate_pass_rate": j["candidate_pass_rate"], "baseline_pass_rate": j["baseline_pass_rate"],
                  "mcnemar_p_worse": j["mcnemar_p_worse"], "state": j["state"], "reason": reason,
                  "required": cat in required, "pairs_needed": need})


def _combine(state: str, reason: str, per_cat: Mapping[str, Mapping], required: Sequence[str]) -> tuple[str, str]:
    """The overall (state, reason) once the categories are judged: a required category that FAILs makes the overall
    FAIL; a PASS with a required category not PASS becomes NO_EVIDENCE; another category's FAIL is said."""
    req_fail = [c for c in required if per_cat[c]["state"] == FAIL]
    req_open = [c for c in required if per_cat[c]["state"] not in (PASS, FAIL)]
    other_fail = [c for c, d in per_cat.items() if d["state"] == FAIL and c not in required]

    def short(c: str) -> str:
        d = per_cat[c]
        if not d["n"]:
            return "no usable paired case"
        return (f"candidate {d['candidate_pass_rate']:.0%} vs baseline {d['baseline_pass_rate']:.0%} on {d['n']} "
                f"usable pairs, {d['regressed']} regressed, exact McNemar p={d['mcnemar_p_worse']:.3g}")

    def why_open(c: str) -> str:
        d = per_cat[c]
        if d["n"] == 0:
            return f"required category {c} was not measured (no usable paired case; a PASS needs {d['pairs_needed']})"
        need = (f"more than {d['pairs_needed']} usable pairs" if d["regressed"] else
                f"at least {d['pairs_needed']} usable pairs")
        return f"required category {c} is {d['state']} ({short(c)}; a PASS needs {need})"

    if req_fail:
        head = "; ".join(f"required category {c} is worse than the baseline by more than the margin ({short(c)})"
                         for c in req_fail)
        reason = f"{head}; overall: {reason}" if state != FAIL else f"{reason}; and {head}"
        state = FAIL
    if req_open:
        opened = "; ".join(why_open(c) for c in req_open)
        if state == PASS:
            state = NO_EVIDENCE
            reason = f"{opened}, so the overall cannot PASS; overall: {reason}"
        else:
            reason = f"{reason}; and {opened}"
    if other_fail:
        reason += (f"; but category {other_fail[0]} is" if len(other_fail) == 1 else
                   f"; but categories {', '.join(other_fail)} are") + " worse by more than the margin"
    return state, reason


def compare(
    candidate: Iterable[Mapping],
    baseline: Iterable[Mapping] | None,
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = DEFAULT_ALPHA,
    min_cases: int = DEFAULT_MIN_CASES,
    required: Sequence[str] = (),
    context_tokens: int | None = None,
) -> tuple[dict | None, dict]:
    """(comparison, verdict) from per-case rows of both sides (``baseline`` None: no baseline).

    Each category is judged by the same tests as the overall (its own usable pairs); ``required`` names the
    categories that must themselves PASS for the overall to PASS. A long-context case is evidence for its category
    only when it reached its declared share of ``context_tokens`` (the candidate server's context;
    :func:`tui.core.quality.lctable.short_long_context`) and the baseline passed it: the others stay in the overall
    pairs, are counted out of their category's test and named (``per_category[c]["not_evidence"]``). The verdict's
    ``advice`` / ``fallback`` come from the rows only here (:func:`tui.core.quality.advice.with_advice` redoes them
    with each side's config)."""
    if not 0 <= margin < 1:
        raise ValueError("margin must be >= 0 and < 1")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    req = [str(c) for c in dict.fromkeys(required)]
    cand = _case_map(candidate)
    if baseline is None:
        s = summarize(cand.values())["overall"]
        pr = "N/A" if s["pass_rate"] is None else f"{s['pass_rate']:.0%}"
        verdict: dict[str, Any] = {
            "state": NO_BASELINE,
            "reason": (f"no baseline: the candidate passed {s['passed']}/{s['n']} cases ({pr}); absolute pass rates "
                       "alone cannot show that quality did not regress, so the quality verdict cannot be PASS"),
            "fallback": None,
            "advice": [],
            "categories": {},
            "failed_categories": [],
            "exit_code": EXIT_CODES[NO_BASELINE],
        }
        return None, verdict
    base = _case_map(baseline)
    notes: list[str] = []
    paired: list[tuple[Mapping, Mapping]] = []
    differ: list[str] = []
    no_fp = False
    for cid, c in cand.items():
        b = base.get(cid)
        if b is None:
            continue
        fc, fb = c.get("fingerprint"), b.get("fingerprint")
        if fc and fb and fc != fb:
            differ.append(cid)
            continue
        if not (fc and fb):
            no_fp = True
        paired.append((c, b))
    only_cand = sorted(set(cand) - set(base))
    only_base = sorted(set(base) - set(cand))
    if differ:
        notes.append(f"{len(differ)} case(s) differ in content between baseline and candidate and were not paired: "
                     + ", ".join(differ[:10]) + (" ..." if len(differ) > 10 else ""))
    if only_cand:
        notes.append(f"{len(only_cand)} candidate case(s) have no baseline: " + ", ".join(only_cand[:10])
                     + (" ..." if len(only_cand) > 10 else ""))
    if only_base:
        notes.append(f"{len(only_base)} baseline case(s) were not run on the candidate: " + ", ".join(only_base[:10])
                     + (" ..." if len(only_base) > 10 else ""))
    if no_fp:
        notes.append("some cases carry no fingerprint: they were paired by id only")
    seen_cats = {str(r.get("category", "general")) for r in list(cand.values()) + list(base.values())}
    paired, dropped = usable_pairs(paired)
    n_dropped = sum(dropped["pairs"].values())
    if n_dropped:
        notes.append(f"{n_dropped} pair(s) dropped, not scored: {_dropped_text(dropped)}")
    j = _judge(paired, margin=margin, alpha=alpha, min_cases=min_cases, dropped=dropped)
    n, cp, bp = j["n"], j["candidate_pass_rate"], j["baseline_pass_rate"]
    per_cat: dict[str, dict] = {}
    by_cat: dict[str, list[tuple[Mapping, Mapping]]] = {}
    short = short_long_context([c for c, _b in paired], context_tokens)
    left_out: dict[str, dict[str, Any]] = {}
    for c, b in paired:
        cat = str(c.get("category", "general"))
        if is_long_context(c) and (c.get("id") in short or not b.get("passed")):
            lo = left_out.setdefault(cat, {"short": 0, "baseline_failed": 0, "examples": []})
            lo["short" if c.get("id") in short else "baseline_failed"] += 1
            if c.get("id") in short and len(lo["examples"]) < 3:
                lo["examples"].append(f"{c.get('id')}: {short[c['id']]}")
            continue
        by_cat.setdefault(cat, []).append((c, b))
        d = per_cat.setdefault(cat, {"n": 0, "both_pass": 0, "regressed": 0, "improved": 0, "both_fail": 0})
        d["n"] += 1
        key = ("both_pass" if b.get("passed") else "improved") if c.get("passed") else \
            ("regressed" if b.get("passed") else "both_fail")
        d[key] += 1
    measured = len(per_cat)
    for cat in seen_cats:
        per_cat.setdefault(cat, {"n": 0, "both_pass": 0, "regressed": 0, "improved": 0, "both_fail": 0})
    _category_states(per_cat, by_cat, req, margin=margin, alpha=alpha, min_cases=min_cases)
    for cat, lo in left_out.items():
        parts = []
        if lo["short"]:
            parts.append(f"{lo['short']} below their declared share of the server's context ("
                         + "; ".join(lo["examples"]) + ")")
        if lo["baseline_failed"]:
            parts.append(f"{lo['baseline_failed']} failed by the baseline (they cannot show a regression)")
        text = "long-context cases that are not evidence, left out of this category's test: " + "; ".join(parts)
        d = per_cat[cat]
        d["not_evidence"] = lo
        d["reason"] = f"{d['reason']}; {text}"
        if lo["short"] and d["state"] == PASS:  # cases short of their declared length: that length is not measured
            d["state"] = NO_EVIDENCE
            d["reason"] = "NO_EVIDENCE: " + d["reason"]
        notes.append(f"category {cat}: {text}")
    for cat, d in sorted(per_cat.items()):
        if measured > 1 and d["regressed"] > d["improved"] and d["mcnemar_p_worse"] < alpha:
            notes.append(f"category {cat}: the candidate lost {d['regressed']} of {d['n']} cases "
                         f"(exact McNemar p={d['mcnemar_p_worse']:.3g}); check it even if the overall verdict passes")
    z = j["score_z"]
    state, reason = j["state"], j["reason"]
    if n and cp is not None and bp is not None and max(cp, bp) < LOW_PASS_RATE:
        low = (f"both sides pass few cases (candidate {cp:.0%}, baseline {bp:.0%}): the regression verdict says "
               "nothing about absolute quality")
        notes.append(low)
        if state == PASS:
            reason += f"; but {low}"
    per_cat = dict(sorted(per_cat.items()))
    state, reason = _combine(state, reason, per_cat, req)
    comparison: dict[str, Any] = {
        "paired": n,
        "dropped": dropped,
        "both_pass": j["both_pass"],
        "regressed": j["regressed"],
        "improved": j["improved"],
        "both_fail": j["both_fail"],
        "candidate_pass_rate": cp,
        "baseline_pass_rate": bp,
        "delta": j["delta"],
        "margin": margin,
        "alpha": alpha,
        "min_cases": min_cases,
        "mcnemar_p_worse": j["mcnemar_p_worse"],
        "score_z": z if math.isfinite(z) else (1e308 if z > 0 else -1e308),
        "p_worse_by_more_than_margin": j["p_worse_by_more_than_margin"],
        "p_noninferior": j["p_noninferior"],
        "p_noninferior_exact_guard": j["p_noninferior_exact_guard"],
        "per_category": per_cat,
        "required": req,
        "state": state,
        "notes": notes,
    }
    verdict = {
        "state": state,
        "reason": reason,
        "fallback": None,
        "advice": [],
        "categories": {c: d["state"] for c, d in per_cat.items()},
        "failed_categories": [c for c, d in per_cat.items() if d["state"] == FAIL],
        "exit_code": EXIT_CODES[state],
    }
    with_advice(verdict, comparison, {"cases": list(cand.values())}, {"cases": list(base.values())})
    return comparison, verdict
