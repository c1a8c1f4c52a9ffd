"""The result document of one ``servewatch quality`` run: its sides, the whole JSON, a baseline read back from a
saved result, the verdict rechecked from a file's per-case rows (``accept``), and the plain-text summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tui.core.quality.regression import _count, _dropped_text, compare
from tui.core.quality.scoring import summarize
from tui.core.quality.sets import QualitySet
from tui.core.quality.vocab import DEFAULT_ALPHA, DEFAULT_MARGIN, DEFAULT_MIN_CASES, RESULT_SCHEMA, SAMPLING, SetError


def run_section(rows: list[dict], *, target: Mapping | None = None, server: Mapping | None = None,
                headers: Mapping | None = None, started_at: float | None = None, seconds: float | None = None,
                notes: Iterable[str] = (), source: str = "endpoint") -> dict:
    """One side (candidate or baseline) of a quality result."""
    s = summarize(rows)
    return {
        "source": source,
        "target": dict(target or {}),
        "server": dict(server or {}),
        "headers": {str(k): "<redacted>" for k in (headers or {})},
        "started_at": started_at,
        "seconds": seconds,
        "cases": rows,
        "categories": s["categories"],
        "overall": s["overall"],
        "errors_by_class": s["errors_by_class"],
        "failed_requests": s["failed_requests"],
        "notes": list(notes),
    }


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
) -> dict:
    """The whole result JSON of one ``servewatch quality`` run."""
    comparison, verdict = compare(candidate["cases"], None if baseline is None else baseline["cases"],
                                  margin=margin, alpha=alpha, min_cases=min_cases)
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
        },
        "sampling": dict(sampling or SAMPLING),
        "settings": {"margin": margin, "alpha": alpha, "min_cases": min_cases},
        "candidate": candidate,
        "baseline": baseline,
        "comparison": comparison,
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


def recheck(doc: Any) -> tuple[dict | None, dict]:
    """Recompute (comparison, verdict) from the per-case rows of a saved result (raises SetError)."""
    if not isinstance(doc, Mapping) or doc.get("schema") != RESULT_SCHEMA:
        raise SetError(f"not a quality result (schema {RESULT_SCHEMA!r} expected)")
    cand = doc.get("candidate")
    if not isinstance(cand, Mapping) or not isinstance(cand.get("cases"), list):
        raise SetError("quality result has no candidate cases")
    base = doc.get("baseline")
    settings: Any = doc.get("settings") if isinstance(doc.get("settings"), Mapping) else {}
    try:
        margin = float(settings.get("margin", DEFAULT_MARGIN))
        alpha = float(settings.get("alpha", DEFAULT_ALPHA))
        min_cases = int(settings.get("min_cases", DEFAULT_MIN_CASES))
        base_rows = None
        if isinstance(base, Mapping):
            base_rows = baseline_from_result(base, require_success=False)["cases"]
        _ = baseline_from_result(cand, require_success=False)  # validates the candidate rows
        return compare(cand["cases"], base_rows, margin=margin, alpha=alpha, min_cases=min_cases)
    except (TypeError, ValueError) as exc:
        raise SetError(f"quality result cannot be rechecked: {exc}") from None


def format_result_text(doc: Mapping) -> str:
    """A short plain-text summary of a quality result."""
    out: list[str] = []
    add = out.append
    cand = doc["candidate"]
    tgt = cand.get("target") or {}
    add(f"servewatch quality: {tgt.get('url') or '-'}  model: {tgt.get('model') or '-'}")
    st = doc.get("set") or {}
    add(f"set: {st.get('source')}  ({st.get('cases')} cases" + (", STARTER set" if st.get("starter") else "") + ")")
    add("")
    base = doc.get("baseline")
    add(f"  {'category':<18} {'candidate':>16} {'wilson 95%':>14}" + (f" {'baseline':>16}" if base else ""))
    cats = sorted(set(cand["categories"]) | set((base or {}).get("categories", {})))
    for c in cats + ["overall"]:
        r = cand["overall"] if c == "overall" else cand["categories"].get(c)
        b = None if not base else (base["overall"] if c == "overall" else base["categories"].get(c))
        add(f"  {c:<18} {_fmt_rate(r):>16} {_fmt_ci(r):>14}" + (f" {_fmt_rate(b):>16}" if base else ""))
    if cand.get("errors_by_class"):
        add("  failed requests (HTTP errors are failed cases; a transport error drops the pair): "
            + ", ".join(f"{k}={v}" for k, v in cand["errors_by_class"].items()))
    failed = [r for r in cand["cases"] if not r.get("passed")]
    if failed:
        add("")
        add("  failed cases:")
        for r in failed[:40]:
            fc = r.get("failed_check") or {}
            add(f"    {r['id']}: {fc.get('type')}: {fc.get('detail')}")
        if len(failed) > 40:
            add(f"    ... and {len(failed) - 40} more")
    comp = doc.get("comparison")
    if comp:
        add("")
        add(f"  usable pairs {comp['paired']}: both pass {comp['both_pass']}, regressed {comp['regressed']}, "
            f"improved {comp['improved']}, both fail {comp['both_fail']}")
        dropped = comp.get("dropped") or {}
        if dropped.get("pairs"):
            add(f"  dropped pairs (not scored): {_dropped_text(dropped)}")
    for n in doc.get("notes") or []:
        add(f"  note: {n}")
    v = doc["verdict"]
    add("")
    add(f"quality verdict: {v['state']}")
    add(f"  {v['reason']}")
    if v.get("fallback"):
        add(f"  fallback: {v['fallback']}")
    return "\n".join(out) + "\n"


def _fmt_rate(r: Mapping | None) -> str:
    if not r or r.get("pass_rate") is None:
        return "N/A"
    return f"{r['passed']}/{r['n']} ({r['pass_rate']:.0%})"


def _fmt_ci(r: Mapping | None) -> str:
    if not r or r.get("wilson_95", [None])[0] is None:
        return "N/A"
    lo, hi = r["wilson_95"]
    return f"{lo:.0%}-{hi:.0%}"
