"""A regression set file (JSON Lines): fixed cases and long-context generator lines, comments, the starter marker;
:func:`parse_set` lists every problem with file and line and never raises on content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from tui.core.quality.cases import Case, QualitySet, parse_case
from tui.core.quality.long_context import expand_long_context
from tui.core.quality.vocab import DEFAULT_CHARS_PER_TOKEN, SetError


def parse_set(
    text: str,
    source: str = "<set>",
    *,
    long_context_tokens: int | None = None,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> QualitySet:
    """Parse a regression set. Never raises on content: problems are listed (and the set must not run)."""
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
            if isinstance(d, Mapping) and "generate" in d:
                if d["generate"] != "long_context":
                    raise SetError(f"{where}: unknown generator {d['generate']!r} (only \"long_context\")")
                new = expand_long_context(d, where, long_context_tokens, chars_per_token)
                lc_targets.append(new[0].generated["target_tokens"] if new and new[0].generated else 0)
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
    lc = {}
    if lc_targets:
        lc = {"target_tokens": sorted(set(lc_targets)), "chars_per_token": float(chars_per_token)}
    return QualitySet(cases, problems, label, starter, lc)
