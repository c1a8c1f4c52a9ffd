"""A quality result file checked against itself (standard library only): every reader (``accept``, ``quality
--baseline FILE``) runs :func:`file_problems` beside the digest (``tui.core.quality.digest``).

- rows: ``passed`` against ``failed_check`` and ``error`` (a row that says it passed and names a failed check or a
  request error contradicts itself), duplicate case ids, ``repeats`` against ``passed`` (the majority of K
  attempts);
- counts: the set's case count (``set.cases``) and fingerprint (``set.fingerprint``, a hash of the case
  fingerprints in set order) against the rows each side holds;
- the suite: a file that names a generated suite (``set.suite``) is rebuilt from that spec (the same spec always
  builds the same cases) and every suite case must be on the candidate side with the suite's id, category,
  fingerprint and long-context length; a file that holds 64 of a 200-case suite says so;
- the summaries written beside the rows (``categories``, ``overall``) against the rows.

Each problem is one sentence; any problem forbids a quality PASS from that file being acceptance-grade, and a saved
baseline with a problem is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tui.core.quality.cases import _hash
from tui.core.quality.scoring import summarize
from tui.core.quality.suite import SuiteSpec, build_suite
from tui.core.quality.vocab import SetError

__all__ = ["file_problems", "side_problems"]

_SHOWN = 3


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _listed(items: list[str], total: int) -> str:
    return ", ".join(items[:_SHOWN]) + (f" and {total - _SHOWN} more" if total > _SHOWN else "")


def side_problems(side: Mapping[str, Any], name: str) -> list[str]:
    """The problems of one side's rows (``name``: "candidate" or "baseline")."""
    rows = side.get("cases")
    if not isinstance(rows, list):
        return [f"{name}: no case list"]
    out: list[str] = []
    seen: dict[str, int] = {}
    contradict: list[str] = []
    unexplained: list[str] = []
    repeats_off: list[str] = []
    for r in rows:
        if not isinstance(r, Mapping) or not isinstance(r.get("id"), str) or not isinstance(r.get("passed"), bool):
            out.append(f"{name}: a case row without a string id and a true/false passed")
            continue
        rid = r["id"]
        seen[rid] = seen.get(rid, 0) + 1
        if r["passed"] and (r.get("failed_check") is not None or r.get("error")):
            contradict.append(rid)
        elif not r["passed"] and r.get("failed_check") is None and not r.get("error"):
            unexplained.append(rid)
        rep = r.get("repeats")
        if isinstance(rep, Mapping):
            k, p = _int(rep.get("k")), _int(rep.get("passed"))
            if k is None or p is None or not 0 <= p <= k or (p * 2 > k) != r["passed"]:
                repeats_off.append(rid)
    dup = [f"{i} x{n}" for i, n in seen.items() if n > 1]
    if dup:
        out.append(f"{name}: {len(dup)} case id(s) appear more than once ({_listed(dup, len(dup))}): a case counts once")
    if contradict:
        out.append(f"{name}: {len(contradict)} row(s) say passed and name a failed check or a request error "
                   f"({_listed(contradict, len(contradict))}): not passes")
    if unexplained:
        out.append(f"{name}: {len(unexplained)} row(s) say failed and name no failed check or error "
                   f"({_listed(unexplained, len(unexplained))})")
    if repeats_off:
        out.append(f"{name}: {len(repeats_off)} row(s) whose passed disagrees with the majority of their attempts "
                   f"({_listed(repeats_off, len(repeats_off))})")
    good = [r for r in rows if isinstance(r, Mapping)]
    s = summarize(good)
    for key, what in (("overall", "overall"),):
        saved = _map(side.get(key))
        if saved and (saved.get("n") != s[key]["n"] or saved.get("passed") != s[key]["passed"]):
            out.append(f"{name}: the file's {what} says {saved.get('passed')}/{saved.get('n')} passed, its rows "
                       f"{s[key]['passed']}/{s[key]['n']}")
    saved_cats = _map(side.get("categories"))
    if saved_cats:
        off = [c for c, v in s["categories"].items()
               if _map(saved_cats.get(c)).get("passed") != v["passed"] or _map(saved_cats.get(c)).get("n") != v["n"]]
        off += [c for c in saved_cats if c not in s["categories"]]
        if off:
            out.append(f"{name}: the file's per-category pass counts disagree with its rows ({_listed(off, len(off))})")
    return out


def _suite_problems(doc: Mapping[str, Any], rows: list) -> list[str]:
    rec = _map(doc.get("set")).get("suite")
    if not rec:
        return []
    try:
        spec = SuiteSpec.from_dict(rec)
        qset = build_suite(spec)
    except SetError as exc:
        return [f"the suite the file names cannot be rebuilt: {exc}"]
    by_id = {r["id"]: r for r in rows if isinstance(r, Mapping) and isinstance(r.get("id"), str)}
    missing: list[str] = []
    changed: list[str] = []
    for c in qset.cases:
        r = by_id.get(c.id)
        if r is None:
            missing.append(c.id)
            continue
        gen, want = _map(r.get("generated")), c.generated or {}
        if (r.get("fingerprint") != c.fingerprint or r.get("category") != c.category
                or any(gen.get(k) != want.get(k) for k in ("kind", "target_tokens", "length_fraction", "depth")
                       if k in want)):
            changed.append(c.id)
    out = []
    n = len(qset.cases)
    if missing:
        out.append(f"the suite the file names (seed {spec.seed}, level {spec.level}, {n} cases) has {n} cases; the "
                   f"candidate side holds {n - len(missing)} of them ({len(missing)} missing: "
                   f"{_listed(missing, len(missing))})")
    if changed:
        out.append(f"{len(changed)} suite case(s) differ from the suite the file names (id, category, fingerprint or "
                   f"long-context length): {_listed(changed, len(changed))}")
    return out


def file_problems(doc: Any) -> list[str]:
    """Everything a quality result file says against itself (empty: nothing found). Never raises."""
    if not isinstance(doc, Mapping):
        return ["not a quality result (a JSON object expected)"]
    out: list[str] = []
    cand = _map(doc.get("candidate"))
    base = doc.get("baseline")
    raw = cand.get("cases")
    rows: list = raw if isinstance(raw, list) else []
    out += side_problems(cand, "candidate")
    if isinstance(base, Mapping):
        out += side_problems(base, "baseline")
    claimed = _map(doc.get("set")).get("cases")
    if claimed is not None and claimed != len(rows):
        out.append(f"the file says its set has {claimed} cases, the candidate side holds {len(rows)} rows")
    fp = _map(doc.get("set")).get("fingerprint")
    if isinstance(fp, str) and fp != _hash([r.get("fingerprint") for r in rows if isinstance(r, Mapping)]):
        out.append("the set's fingerprint does not match the case fingerprints of the candidate's rows (rows added, "
                   "removed, reordered or changed)")
    if (isinstance(base, Mapping) and base.get("source") == "endpoint" and isinstance(base.get("cases"), list)
            and len(base["cases"]) != len(rows)):
        out.append(f"the baseline endpoint ran {len(base['cases'])} cases, the candidate {len(rows)}: both sides of one "
                   "run send the same set")
    try:
        out += _suite_problems(doc, rows)
    except (TypeError, ValueError, RecursionError) as exc:  # a suite record of the wrong shape
        out.append(f"the suite the file names cannot be rebuilt: {type(exc).__name__}")
    return out
