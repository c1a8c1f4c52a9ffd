"""A regression set file (JSON Lines): fixed cases and long-context generator lines, comments, the starter marker;
:func:`parse_set` lists every problem with file and line and never raises on content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from tui.core.bounds import MAX_JSON_DEPTH, json_too_deep
from tui.core.quality.cases import Case, QualitySet, parse_case
from tui.core.quality.long_context import expand_long_context
from tui.core.quality.vocab import DEFAULT_CHARS_PER_TOKEN, SetError


def parse_set(
    text: str,
    source: str = "<set>",
    *,
    context_tokens: int | None = None,
    long_context_tokens: int | None = None,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> QualitySet:
    """Parse a regression set. Never raises on content: problems are listed (and the set must not run).

    ``context_tokens`` (``long_context_tokens`` is its old name) sizes the generator lines' long-context cases;
    a line ``{"required_categories": [...]}`` names the categories that must themselves be non-inferior."""
    if context_tokens is None:
        context_tokens = long_context_tokens
    required: list[str] = []
    cases: list[Case] = []
    problems: list[str] = []
    label = ""
    starter = False
    lc_targets: list[int] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#") or s.startswith("//"):
            body = s.lstrip("#/").strip()
            if not label and body:
                label = body
            if "starter" in body.lower():
                starter = True
            continue
        where = f"{source}:{lineno}"
        try:
            try:
                d = json.loads(s)
            except (ValueError, RecursionError) as exc:
                raise SetError(f"{where}: invalid JSON: {str(exc)[:80]}") from None
            if json_too_deep(d):
                raise SetError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(d, Mapping) and "generate" in d:
                if d["generate"] != "long_context":
                    raise SetError(f"{where}: unknown generator {d['generate']!r} (only \"long_context\")")
                new = expand_long_context(d, where, context_tokens, chars_per_token)
                lc_targets.append(new[0].generated["target_tokens"] if new and new[0].generated else 0)
            elif isinstance(d, Mapping) and "required_categories" in d:
                cats = d["required_categories"]
                if not isinstance(cats, list) or not cats or not all(isinstance(c, str) and c.strip() for c in cats):
                    raise SetError(f"{where}: \"required_categories\" must be a list of category names")
                required.extend(c.strip() for c in cats)
                continue
            elif isinstance(d, Mapping) and d.get("starter_set") is True:
                starter = True
                if isinstance(d.get("label"), str):
                    label = d["label"]
                continue
            else:
                new = [parse_case(d, where)]
        except SetError as exc:
            problems.append(str(exc))
            continue
        cases.extend(new)
    seen: dict[str, int] = {}
    for c in cases:
        seen[c.id] = seen.get(c.id, 0) + 1
    for cid, k in seen.items():
        if k > 1:
            problems.append(f"{source}: case id {cid!r} appears {k} times (ids must be unique)")
    if not cases and not problems:
        problems.append(f"{source}: no cases")
    present = {c.category for c in cases}
    for cat in dict.fromkeys(required):
        if cases and cat not in present:
            problems.append(f"{source}: required category {cat!r} has no case in the set")
    lc = {}
    if lc_targets:
        lc = {"target_tokens": sorted(set(lc_targets)), "chars_per_token": float(chars_per_token)}
    return QualitySet(cases, problems, label, starter, lc, required=tuple(dict.fromkeys(required)))


def merge_sets(first: QualitySet, second: QualitySet) -> QualitySet:
    """The cases of both (the suite's, then the team's): ids must stay unique; required categories joined."""
    cases = list(first.cases) + list(second.cases)
    problems = list(first.problems) + list(second.problems)
    ids = {c.id for c in first.cases}
    for c in second.cases:
        if c.id in ids:
            problems.append(f"case id {c.id!r} is in both the suite and the set (ids must be unique)")
    lc = dict(first.long_context)
    if second.long_context:
        lc["target_tokens"] = sorted(set(lc.get("target_tokens", [])) | set(second.long_context.get("target_tokens", [])))
        lc.setdefault("chars_per_token", second.long_context.get("chars_per_token"))
    label = " + ".join(x for x in (first.label, second.label) if x)
    return QualitySet(cases, problems, label, first.starter or second.starter, lc, suite=first.suite,
                      required=tuple(dict.fromkeys([*first.required, *second.required])))
