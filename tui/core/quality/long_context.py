"""Long-context cases: deterministic filler prose, the fact placed at a depth, and the expansion of a
``{"generate": "long_context", ...}`` line into one case per depth.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping

from tui.core.quality.cases import Case, _checks, _hash, _max_tokens, _str_field
from tui.core.quality.vocab import DEFAULT_CHARS_PER_TOKEN, DEFAULT_DEPTHS, DEFAULT_LONG_CONTEXT_TOKENS, SetError

_FILLER_SUBJECTS = (
    "The old lighthouse keeper", "A quiet librarian", "The river ferry", "An orchard farmer",
    "The village baker", "A travelling musician", "The harbour master", "A young painter",
    "The mountain guide", "A retired sailor", "The night watchman", "A careful gardener",
)
_FILLER_VERBS = (
    "walked slowly past", "wrote a long letter about", "spent the afternoon near", "told a story about",
    "carefully repaired", "often thought about", "painted a picture of", "took a photograph of",
    "sang a quiet song about", "swept the path beside", "counted the boats near", "listened to the wind over",
)
_FILLER_OBJECTS = (
    "the stone bridge", "the market square", "the green hills", "the harbour wall", "the wooden mill",
    "the narrow lane", "the apple trees", "the grey cliffs", "the little chapel", "the frozen lake",
    "the busy station", "the sandy beach",
)
_FILLER_TAILS = (
    "while the rain kept falling", "before the evening bell", "as the fog lifted", "under a pale sky",
    "after the long winter", "when the tide turned", "during the quiet season", "as the lamps were lit",
)


def filler_text(n_chars: int, seed: int = 0) -> str:
    """Deterministic, digit-free filler prose of about ``n_chars`` characters (whole sentences)."""
    rng = random.Random(f"servewatch-filler:{seed}")
    parts: list[str] = []
    total = 0
    while total < n_chars:
        s = (f"{rng.choice(_FILLER_SUBJECTS)} {rng.choice(_FILLER_VERBS)} {rng.choice(_FILLER_OBJECTS)} "
             f"{rng.choice(_FILLER_TAILS)}.")
        parts.append(s)
        total += len(s) + 1
    return " ".join(parts)


def place_fact(filler: str, fact: str, depth: float) -> str:
    """Insert ``fact`` as a sentence at the sentence boundary nearest ``depth`` (0..1) of ``filler``."""
    target = depth * len(filler)
    bounds = [0] + [i + 2 for i, ch in enumerate(filler) if ch == "." and i + 2 <= len(filler)]
    pos = min(bounds, key=lambda b: abs(b - target))
    before, after = filler[:pos].rstrip(), filler[pos:].lstrip()
    return " ".join(x for x in (before, fact.strip(), after) if x)


def expand_long_context(
    d: Mapping, where: str, tokens: int | None = None, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
) -> list[Case]:
    """The cases a ``{"generate": "long_context", ...}`` line stands for."""
    prefix = _str_field(d, "id", where)
    category = _str_field(d, "category", where, "long_context")
    fact = _str_field(d, "fact", where)
    question = _str_field(d, "question", where)
    answer = _str_field(d, "answer", where)
    depths = d.get("depths", list(DEFAULT_DEPTHS))
    if (not isinstance(depths, list) or not depths
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in depths)):
        raise SetError(f"{where}: \"depths\" must be a list of fractions between 0 and 1")
    if len({round(float(x), 4) for x in depths}) != len(depths):
        raise SetError(f"{where}: \"depths\" has duplicates")
    target = tokens if tokens is not None else d.get("tokens", DEFAULT_LONG_CONTEXT_TOKENS)
    if isinstance(target, bool) or not isinstance(target, int) or not 16 <= target <= 10_000_000:
        raise SetError(f"{where}: \"tokens\" (the filler length) must be a whole number from 16 up")
    if not (isinstance(chars_per_token, (int, float)) and math.isfinite(chars_per_token) and 0.5 <= chars_per_token <= 20):
        raise SetError(f"{where}: chars per token {chars_per_token!r} out of range")
    seed = d.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SetError(f"{where}: \"seed\" must be a whole number")
    max_tokens = _max_tokens(d, where, 16)
    checks = _checks(d, where) if "checks" in d else (
        {"type": "regex", "pattern": r"(?<![0-9A-Za-z])" + re.escape(answer) + r"(?![0-9A-Za-z])"},
    )
    system = d.get("system")
    if system is not None and not isinstance(system, str):
        raise SetError(f"{where}: \"system\" must be a string")
    filler = filler_text(int(round(target * chars_per_token)), seed)
    spec = {k: d[k] for k in sorted(d) if k not in ("tokens",)}
    out = []
    for depth in depths:
        doc = place_fact(filler, fact, float(depth))
        content = f"{doc}\n\n{question}"
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        cid = f"{prefix}-d{round(float(depth) * 100):02d}"
        fp = _hash({"generator": spec, "tokens": target, "depth": float(depth), "checks": checks, "max_tokens": max_tokens})
        out.append(Case(
            cid, category, max_tokens, checks, tuple(msgs), None, fp,
            generated={"kind": "long_context", "depth": float(depth), "target_tokens": target,
                       "chars_per_token": float(chars_per_token), "filler_chars": len(filler)},
        ))
    return out
