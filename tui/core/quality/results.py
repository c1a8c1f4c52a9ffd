"""The result document of one ``servewatch quality`` run: its sides, the whole JSON, a baseline read back from a
saved result, the verdict rechecked from a file's per-case rows (``accept``), and the plain-text summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tui.core.quality.advice import NOTHING_KNOWN, with_advice
from tui.core.quality.lctable import is_long_context, long_context_table, side_context, table_lines
from tui.core.quality.regression import _count, _dropped_text, compare
from tui.core.quality.scoring import row_passed, summarize
from tui.core.quality.sets import QualitySet
from tui.core.quality.vocab import DEFAULT_ALPHA, DEFAULT_MARGIN, DEFAULT_MIN_CASES, RESULT_SCHEMA, SAMPLING, SetError
from tui.core.textsafe import term


def run_section(rows: list[dict], *, target: Mapping | None = None, server: Mapping | None = None,
                headers: Mapping | None = None, started_at: float | None = None, seconds: float | None = None,
                notes: Iterable[str] = (), source: str = "endpoint", config: Mapping | None = None,
                server_identity: Mapping | None = None) -> dict:
    """One side (candidate or baseline) of a quality result. ``config``: the facts about this configuration
    (``{key: {"value", "source"}}``, kept as given); ``server_identity``: the model the server says it serves
    (``tui.sources.server_info.server_identity``, read by ``tui.core.identity``; ``target.model`` is the name
    sent); ``long_context_reached`` says what its long-context cases reached (:func:`long_context_reached`)."""
    s = summarize(rows)
    return {
        "source": source,
        "target": dict(target or {}),
        "server": dict(server or {}),
        "server_identity": None if server_identity is None else dict(server_identity),
        "headers": {str(k): "<redacted>" for k in (headers or {})},
        "started_at": started_at,
        "seconds": seconds,
        "cases": rows,
        "categories": s["categories"],
        "overall": s["overall"],
        "errors_by_class": s["errors_by_class"],
        "failed_requests": s["failed_requests"],
        "config": {str(k): (dict(v) if isinstance(v, Mapping) else v) for k, v in (config or {}).items()},
        "long_context_reached": long_context_reached(rows),
        "notes": list(notes),
    }


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def long_context_reached(rows: Iterable[Mapping]) -> dict:
    """What one side's long-context cases reached: ``{"cases", "max_prompt_tokens"`` (the longest prompt the server
    reported in its usage; None when none did), ``"max_target_tokens"`` (the longest intended prompt),
    ``"rejected_too_long"`` (long-context cases refused with an HTTP 4xx)``}``."""
    lc = [r for r in rows if isinstance(r, Mapping) and is_long_context(r)]
    prompts = [p for p in (_int(r.get("prompt_tokens")) for r in lc if not r.get("error")) if p is not None]
    targets = [t for t in (_int((r.get("generated") or {}).get("target_tokens")) for r in lc
                           if isinstance(r.get("generated") or {}, Mapping)) if t is not None]
    return {"cases": len(lc), "max_prompt_tokens": max(prompts) if prompts else None,
            "max_target_tokens": max(targets) if targets else None,
            "rejected_too_long": sum(1 for r in lc if r.get("error") == "http_4xx")}


def decoding_of(sampling: Mapping, repeat: int = 1) -> dict:
    """The decoding a result states when none was given: read from the sampling sent."""
    temp = sampling.get("temperature")
    return {"deterministic": temp == 0, "temperature": temp, "seed": sampling.get("seed"),
            "seed_sent": "seed" in sampling, "repeat": repeat}


def build_result(
    *,
    qset: QualitySet,
    set_source: str,
    set_sha256: str | None,
    candidate: dict,
    baseline: dict | None,
    margin: float = DEFAULT_MARGIN,
    alpha: float = DEFAULT_ALPHA,
    min_cases: int = DEFAULT_MIN_CASES,
    sampling: Mapping | None = None,
    generated_at: str | None = None,
    tool_version: str | None = None,
    notes: Iterable[str] = (),
    required: Sequence[str] = (),
    decoding: Mapping | None = None,
) -> dict:
    """The whole result JSON of one ``servewatch quality`` run. The required categories are the set's
    (``qset.required``) and ``required``; ``decoding`` is stated as given (else read from the sampling)."""
    req = list(dict.fromkeys([*qset.required, *required]))
    comparison, verdict = compare(candidate["cases"], None if baseline is None else baseline["cases"],
                                  margin=margin, alpha=alpha, min_cases=min_cases, required=req,
                                  context_tokens=side_context(candidate)[0])
    with_advice(verdict, comparison, candidate, baseline)
    sampling = dict(sampling or SAMPLING)
    all_notes = list(notes)
    if comparison:
        all_notes += comparison["notes"]
    if qset.starter:
        all_notes.append("this is the STARTER set: replace it with the team's own key tasks (quality/README.md)")
    return {
        "schema": RESULT_SCHEMA,
        "synthetic": False,
        "generated_at": generated_at,
        "tool_version": tool_version,
        "set": {
            "source": set_source,
            "sha256": set_sha256,
            "label": qset.label,
            "starter": qset.starter,
            "cases": len(qset.cases),
            "fingerprint": qset.fingerprint,
            "long_context": dict(qset.long_context),
            "suite": dict(qset.suite) if qset.suite else None,
            "required": req,
        },
        "sampling": sampling,
        "decoding": dict(decoding) if decoding is not None else decoding_of(sampling),
        "settings": {"margin": margin, "alpha": alpha, "min_cases": min_cases},
        "candidate": candidate,
        "baseline": baseline,
        "comparison": comparison,
        "long_context": long_context_table(candidate["cases"], None if baseline is None else baseline["cases"],
                                           margin=margin),
        "verdict": verdict,
        "notes": all_notes,
    }


def baseline_from_result(doc: Any, *, require_success: bool = True) -> dict:
    """The baseline side from a saved quality result (its ``candidate`` run), or a bare case list.

    Accepts ``{"schema": "servewatch.quality/1", "candidate": {"cases": [...]}, ...}``,
    ``{"cases": [...]}`` or ``[...]``; each case needs ``id`` and ``passed`` (raises SetError).
    With ``require_success`` (a baseline for a new comparison) a run without one passed case is
    refused: the candidate could lose nothing against it, so no comparison could show anything.
    """
    run: Any
    if isinstance(doc, list):
        run = {"cases": doc}
    elif isinstance(doc, Mapping) and isinstance(doc.get("candidate"), Mapping):
        run = doc["candidate"]
    elif isinstance(doc, Mapping) and "cases" in doc:
        run = doc
    else:
        raise SetError("baseline file is neither a quality result nor a list of cases")
    rows = run.get("cases")
    if not isinstance(rows, list) or not rows:
        raise SetError("baseline file has no cases")
    clean = []
    for i, r in enumerate(rows):
        if not (isinstance(r, Mapping) and isinstance(r.get("id"), str) and isinstance(r.get("passed"), bool)):
            raise SetError(f"baseline case {i + 1} needs a string \"id\" and a true/false \"passed\"")
        row = dict(r)
        row.setdefault("category", "general")
        if row["passed"] and not row_passed(row):  # "passed" beside a failed check or an error: not a pass
            row["passed"] = False
        clean.append(row)
    if require_success and not any(r["passed"] and not r.get("error") for r in clean):
        errs = _count(r.get("error") for r in clean if r.get("error"))
        why = f" (request errors: {', '.join(f'{k}={v}' for k, v in errs.items())})" if errs else ""
        raise SetError(f"baseline has no successful case: 0 of {len(clean)} passed{why}; "
                       "a baseline must pass some cases for a comparison to show anything")
    out = {k: v for k, v in run.items() if k != "cases"} if isinstance(run, Mapping) else {}
    out = dict(out)
    out["cases"] = clean
    s = summarize(clean)
    out["categories"], out["overall"] = s["categories"], s["overall"]
    out.setdefault("errors_by_class", s["errors_by_class"])
    if isinstance(doc, Mapping):
        lc = (doc.get("set") or {}).get("long_context") if isinstance(doc.get("set"), Mapping) else None
        if isinstance(lc, Mapping):
            out["long_context"] = dict(lc)
        if doc.get("synthetic") is True:
            out["synthetic"] = True
    return out


def required_of(doc: Mapping) -> list[str]:
    """The required categories a saved result records (``set.required``; raises SetError when malformed)."""
    st = doc.get("set")
    req = st.get("required", []) if isinstance(st, Mapping) else []
    if req is None:
        return []
    if not isinstance(req, list) or not all(isinstance(c, str) for c in req):
        raise SetError("quality result: set.required must be a list of category names")
    return list(dict.fromkeys(req))


def recheck(doc: Any) -> tuple[dict | None, dict]:
    """Recompute (comparison, verdict) from the per-case rows of a saved result, with its required categories and
    the advice from its sides (raises SetError)."""
    if not isinstance(doc, Mapping) or doc.get("schema") != RESULT_SCHEMA:
        raise SetError(f"not a quality result (schema {RESULT_SCHEMA!r} expected)")
    cand = doc.get("candidate")
    if not isinstance(cand, Mapping) or not isinstance(cand.get("cases"), list):
        raise SetError("quality result has no candidate cases")
    base = doc.get("baseline")
    settings: Any = doc.get("settings") if isinstance(doc.get("settings"), Mapping) else {}
    required = required_of(doc)
    try:
        margin = float(settings.get("margin", DEFAULT_MARGIN))
        alpha = float(settings.get("alpha", DEFAULT_ALPHA))
        min_cases = int(settings.get("min_cases", DEFAULT_MIN_CASES))
        base_rows = None
        if isinstance(base, Mapping):
            base_rows = baseline_from_result(base, require_success=False)["cases"]
        cand_rows = baseline_from_result(cand, require_success=False)["cases"]  # validated, contradictions not passes
        comparison, verdict = compare(cand_rows, base_rows, margin=margin, alpha=alpha, min_cases=min_cases,
                                      required=required, context_tokens=side_context(cand)[0])
    except (TypeError, ValueError) as exc:
        raise SetError(f"quality result cannot be rechecked: {exc}") from None
    with_advice(verdict, comparison, cand, base if isinstance(base, Mapping) else None)
    return comparison, verdict


def format_result_text(doc: Mapping) -> str:
    """A short plain-text summary of a quality result: the set or suite, the decoding, pass rates and each
    category's own state, the long-context table (length x depth), the failed cases, the verdict and the advice."""
    out: list[str] = []
    add = out.append
    cand = doc["candidate"]
    tgt = cand.get("target") or {}
    add(f"servewatch quality: {tgt.get('url') or '-'}  model: {tgt.get('model') or '-'}")
    st = doc.get("set") or {}
    n_rows = len(cand["cases"])
    count = f"{n_rows} cases" if st.get("cases") == n_rows else f"{n_rows} cases; the file says {st.get('cases')}"
    add(f"set: {st.get('source')}  ({count}" + (", STARTER set" if st.get("starter") else "") + ")")
    suite = st.get("suite")
    if isinstance(suite, Mapping) and suite:
        add(f"suite: {suite.get('name')} version {suite.get('version')}, seed {suite.get('seed')}, "
            f"{suite.get('cases')} cases, level {suite.get('level')}, context {suite.get('context_tokens')} tokens")
    if st.get("required"):
        add(f"required categories: {', '.join(st['required'])}")
    dec = doc.get("decoding")
    if isinstance(dec, Mapping):
        add(_decoding_text(dec))
    add("")
    base = doc.get("baseline")
    comp = doc.get("comparison")
    per_cat = (comp or {}).get("per_category") or {}
    add(f"  {'category':<18} {'candidate':>16} {'wilson 95%':>14}" + (f" {'baseline':>16}" if base else "")
        + ("  state" if per_cat else ""))
    cats = sorted(set(cand["categories"]) | set((base or {}).get("categories", {})) | set(per_cat))
    for c in cats + ["overall"]:
        r = cand["overall"] if c == "overall" else cand["categories"].get(c)
        b = None if not base else (base["overall"] if c == "overall" else base["categories"].get(c))
        line = f"  {c:<18} {_fmt_rate(r):>16} {_fmt_ci(r):>14}" + (f" {_fmt_rate(b):>16}" if base else "")
        if per_cat:
            line += f"  {_cat_state(per_cat.get(c)) if c != 'overall' else doc['verdict']['state']}"
        add(line)
    if cand.get("errors_by_class"):
        add("  failed requests (HTTP errors are failed cases; a transport error drops the pair): "
            + ", ".join(f"{k}={v}" for k, v in cand["errors_by_class"].items()))
    lc_lines = table_lines(doc.get("long_context") or long_context_table(
        cand["cases"], None if not base else base.get("cases"), margin=float((comp or {}).get("margin") or 0.05)))
    if lc_lines:
        add("")
        add("  long-context recall by length and depth:")
        out.extend("  " + ln for ln in lc_lines)
    reached = cand.get("long_context_reached")
    if isinstance(reached, Mapping) and reached.get("cases"):
        add(f"  long context reached: {reached.get('cases')} cases, longest prompt served "
            f"{reached.get('max_prompt_tokens') if reached.get('max_prompt_tokens') is not None else 'unknown'} tokens"
            f" (intended up to {reached.get('max_target_tokens') or 'unknown'}), "
            f"{reached.get('rejected_too_long') or 0} rejected with an HTTP 4xx")
    failed = [r for r in cand["cases"] if not r.get("passed")]
    if failed:
        add("")
        add("  failed cases:")
        for r in failed[:40]:
            fc = r.get("failed_check") or {}
            add(f"    {r['id']}: {fc.get('type')}: {fc.get('detail')}")
        if len(failed) > 40:
            add(f"    ... and {len(failed) - 40} more")
    if comp:
        add("")
        add(f"  usable pairs {comp['paired']}: both pass {comp['both_pass']}, regressed {comp['regressed']}, "
            f"improved {comp['improved']}, both fail {comp['both_fail']}")
        dropped = comp.get("dropped") or {}
        if dropped.get("pairs"):
            add(f"  dropped pairs (not scored): {_dropped_text(dropped)}")
        for c, d in per_cat.items():
            if isinstance(d, Mapping) and d.get("state") and d.get("state") != "PASS":
                add(f"  category {c}{' (required)' if d.get('required') else ''}: {d['state']}: {d.get('reason')}")
    for n in doc.get("notes") or []:
        add(f"  note: {n}")
    v = doc["verdict"]
    add("")
    add(f"quality verdict: {v['state']}")
    add(f"  {v['reason']}")
    advice = v.get("advice") or []
    if advice:
        add("  next configuration to try:")
        for a in advice:
            add(f"    {a.get('category')}: {a.get('because')}" if a.get("because") == NOTHING_KNOWN else
                f"    {a.get('category')}: try {a.get('try')} (because {a.get('because')})")
    elif v.get("fallback"):
        add(f"  fallback: {v['fallback']}")
    grade = doc.get("acceptance_grade")
    if isinstance(grade, Mapping):
        for n in grade.get("notes") or []:
            add(f"  note: {n}")
        if grade.get("problems"):
            add("  not acceptance-grade (accept will not count it towards \"ready\"):")
            out.extend(f"    {pr}" for pr in grade["problems"])
    return "\n".join(term(line) for line in out) + "\n"  # outside text stays on its line (tui.core.textsafe)


def _decoding_text(dec: Mapping) -> str:
    if dec.get("deterministic"):
        how = f"deterministic (temperature {dec.get('temperature')}"
        how += f", seed {dec.get('seed')} sent)" if dec.get("seed_sent") else ", no seed sent)"
    else:
        how = f"not deterministic (temperature {dec.get('temperature')})"
    rep = dec.get("repeat") or 1
    return f"decoding: {how}" + (f"; each case sent {rep} times, the majority scored" if rep and rep > 1 else "")


def _cat_state(d: Mapping | None) -> str:
    if not isinstance(d, Mapping) or not d.get("state"):
        return "-"
    req = " (required)" if d.get("required") else ""
    if d["state"] == "NO_EVIDENCE":
        need = f"> {d.get('pairs_needed')}" if d.get("regressed") else f">= {d.get('pairs_needed')}"
        return f"NO_EVIDENCE{req}: {d.get('n', 0)} pairs, a PASS needs {need}"
    return f"{d['state']}{req}"


def _fmt_rate(r: Mapping | None) -> str:
    if not r or r.get("pass_rate") is None:
        return "N/A"
    return f"{r['passed']}/{r['n']} ({r['pass_rate']:.0%})"


def _fmt_ci(r: Mapping | None) -> str:
    if not r or r.get("wilson_95", [None])[0] is None:
        return "N/A"
    lo, hi = r["wilson_95"]
    return f"{lo:.0%}-{hi:.0%}"
