"""The checks on one answer (exact, contains, not_contains, regex, json, number), a case's evaluation and its
per-case result row.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from statistics import median
from typing import Any

from tui.core.quality.cases import Case, _regex_flags
from tui.core.quality.vocab import EXCERPT_CHARS

_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)
# a sign counts only when it does not follow a word character ("A-1042" is 1042, "x -5" is -5)
_NUMBER = re.compile(
    r"(?:(?<![\w.])[-+\u2212])?(?:(?<![\d.])\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
    r"|(?:(?<![\w.])[-+\u2212])?(?<!\d)\.\d+"
)
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def clean_answer(text: str) -> str:
    """The answer the checks see: a leading <think>...</think> block removed."""
    return _THINK.sub("", text or "", count=1)


def _norm(s: str, case_sensitive: bool) -> str:
    s = " ".join(s.split())
    return s if case_sensitive else s.casefold()


def _values(chk: Mapping) -> list[str]:
    v = chk.get("value", chk.get("any"))
    return [v] if isinstance(v, str) else list(v)


def numbers_in(text: str) -> list[float]:
    out = []
    for m in _NUMBER.finditer(text):
        tok = m.group(0).replace(",", "").replace("\u2212", "-")
        try:
            v = float(tok)
        except ValueError:
            continue
        if math.isfinite(v):
            out.append(v)
    return out


def _json_value(answer: str, strict: bool, prefix: bool = False) -> Any:
    """The answer's JSON value. ``prefix``: the answer must START with the value (after whitespace or a code
    fence's opening line); what follows it is ignored (the suite's extraction cases: as its other checks read the
    answer's start)."""
    s = answer.strip()
    if prefix:
        s = re.sub(r"^```[A-Za-z0-9_-]*\s*\n?", "", s)
        return json.JSONDecoder().raw_decode(s)[0]
    if not strict:
        m = _FENCE.match(s)
        if m:
            s = m.group(1).strip()
    return json.loads(s)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return _norm(a, False).strip() == _norm(b, False).strip()
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def run_check(chk: Mapping, answer: str) -> tuple[bool, str]:
    """(passed, detail) for one check on one (cleaned) answer."""
    typ = chk["type"]
    cs = bool(chk.get("case_sensitive", False))
    if typ == "exact":
        a = _norm(answer, cs).strip()
        a2 = a[:-1].rstrip() if a.endswith(".") else a
        for v in _values(chk):
            nv = _norm(v, cs).strip()
            if a == nv or a2 == nv:
                return True, ""
        return False, f"answer is not exactly {' or '.join(repr(v) for v in _values(chk))}"
    if typ == "contains":
        a = _norm(answer, cs)
        vals = _values(chk)
        need_all = bool(chk.get("all", False))
        hits = [v for v in vals if _norm(v, cs) in a]
        if (need_all and len(hits) == len(vals)) or (not need_all and hits):
            return True, ""
        missing = [v for v in vals if v not in hits]
        return False, ("answer lacks " + (" and " if need_all else " or ").join(repr(v) for v in missing))
    if typ == "not_contains":
        a = _norm(answer, cs)
        hits = [v for v in _values(chk) if _norm(v, cs) in a]
        return (False, f"answer contains {hits[0]!r}") if hits else (True, "")
    if typ == "regex":
        flags = _regex_flags(chk.get("flags", ""))
        if re.search(chk["pattern"], answer, flags):
            return True, ""
        return False, f"no match for /{chk['pattern']}/"
    if typ == "json":
        try:
            value = _json_value(answer, bool(chk.get("strict", False)), bool(chk.get("prefix", False)))
        except (ValueError, RecursionError):
            return False, "answer is not valid JSON"
        keys = chk.get("required_keys") or []
        eq = chk.get("equals") or {}
        if keys or eq:
            if not isinstance(value, dict):
                return False, "JSON answer is not an object"
            missing = [k for k in keys if k not in value]
            if missing:
                return False, f"JSON lacks key(s) {', '.join(missing)}"
            for k, want in eq.items():
                if k not in value:
                    return False, f"JSON lacks key {k}"
                if not _same(value[k], want):
                    return False, f"JSON {k}={json.dumps(value[k])[:40]}, expected {json.dumps(want)[:40]}"
        return True, ""
    if typ == "number":
        nums = numbers_in(answer)
        if not nums:
            return False, "no number in the answer"
        want = float(chk["value"])
        tol = max(float(chk.get("tolerance", 0)), float(chk.get("rel_tolerance", 0)) * abs(want))
        pick = chk.get("pick", "last")
        if pick == "only" and len(nums) != 1:
            return False, f"expected exactly one number, found {len(nums)}"
        cands = nums if pick == "any" else [nums[0] if pick == "first" else nums[-1]]
        if any(abs(x - want) <= tol + 1e-12 * max(1.0, abs(want)) for x in cands):
            return True, ""
        tol_txt = f" +-{tol:g}" if tol else ""
        if len(cands) == 1:
            return False, f"{pick} number {cands[0]:g} is not {want:g}{tol_txt}"
        return False, f"no number equal to {want:g}{tol_txt}"
    return False, f"unknown check type {typ!r}"


def evaluate(case: Case, answer: str) -> tuple[bool, dict | None]:
    """(passed, the first failed check as {"index", "type", "detail"} or None)."""
    a = clean_answer(answer)
    for i, chk in enumerate(case.checks):
        try:
            ok, detail = run_check(chk, a)
        except (re.error, ValueError, RecursionError) as exc:
            ok, detail = False, f"check could not run: {exc}"
        if not ok:
            return False, {"index": i, "type": chk["type"], "detail": detail}
    return True, None


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def case_result(
    case: Case,
    answer: str | None,
    *,
    latency_s: float | None,
    error: str | None = None,
    error_detail: str | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    finish_reason: str | None = None,
) -> dict:
    """The per-case result row. A failed request is a failed case."""
    failed: dict | None
    if error is not None:
        passed, failed = False, {"index": None, "type": "request", "detail": f"request failed ({error})"}
    else:
        passed, failed = evaluate(case, answer or "")
    row = {
        "id": case.id,
        "category": case.category,
        "fingerprint": case.fingerprint,
        "passed": passed,
        "failed_check": failed,
        "answer_excerpt": None if error is not None else excerpt(clean_answer(answer or "")),
        "latency_s": latency_s,
        "error": error,
        "error_detail": error_detail,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "finish_reason": finish_reason,
    }
    if case.generated:
        row["generated"] = dict(case.generated)
    return row


def majority_row(case: Case, rows: Sequence[dict]) -> dict:
    """One row for K attempts of one case (``rows``: their :func:`case_result` rows, in the order sent).

    ``passed`` is a strict majority of passing attempts (an errored attempt counts as not passed); ``error`` is the
    most common error class only when more than half the attempts errored (else None); the answer excerpt, failed
    check and token counts come from the first attempt with the majority outcome; ``latency_s`` is the median.
    ``repeats`` = ``{"k", "passed", "errors": {class: n}, "distinct_answers"}``. One attempt: the row unchanged.
    """
    if not rows:
        raise ValueError(f"case {case.id}: no attempt to score")
    if len(rows) == 1:
        return dict(rows[0])
    k = len(rows)
    passes = sum(1 for r in rows if r.get("passed") and not r.get("error"))
    passed = passes * 2 > k
    errors: dict[str, int] = {}
    for r in rows:
        if r.get("error"):
            errors[str(r["error"])] = errors.get(str(r["error"]), 0) + 1
    n_err = sum(errors.values())
    # most common class; ties broken by the first attempt that had it (deterministic)
    order = [str(r["error"]) for r in rows if r.get("error")]
    error = max(errors, key=lambda c: (errors[c], -order.index(c))) if n_err * 2 > k else None
    if error is not None:
        pick = next(r for r in rows if r.get("error") == error)
    else:
        same = [r for r in rows if bool(r.get("passed")) == passed]
        pick = next((r for r in same if not r.get("error")), same[0] if same else rows[0])
    out = dict(pick)
    out["passed"] = passed
    out["error"] = error
    lat = [float(r["latency_s"]) for r in rows if isinstance(r.get("latency_s"), (int, float))]
    out["latency_s"] = median(lat) if lat else None
    answers = {r.get("answer_excerpt") for r in rows if not r.get("error")}
    out["repeats"] = {"k": k, "passed": passes, "errors": dict(sorted(errors.items())), "distinct_answers": len(answers)}
    return out
