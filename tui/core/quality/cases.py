"""One regression-set case: the :class:`Case` and :class:`QualitySet` types, the field and check validation, and
:func:`parse_case` (one fixed case from a decoded JSON line).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tui.core.quality.vocab import CHECK_TYPES, MAX_TOKENS_LIMIT, SetError


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    max_tokens: int
    checks: tuple[dict, ...]
    messages: tuple[dict, ...] | None = None
    prompt: str | None = None
    fingerprint: str = ""
    generated: dict | None = None  # long-context cases: depth, target tokens, chars per token

    @property
    def api(self) -> str:
        return "chat" if self.messages is not None else "completions"


@dataclass
class QualitySet:
    cases: list[Case]
    problems: list[str] = field(default_factory=list)  # "file:line: reason"; a set with problems is not run
    label: str = ""  # first comment line / "starter" marker
    starter: bool = False
    long_context: dict = field(default_factory=dict)
    suite: dict | None = None  # the generated suite's spec (tui.core.quality.suite.SuiteSpec.to_dict) and counts
    required: tuple[str, ...] = ()  # categories that must themselves be non-inferior for an overall PASS

    @property
    def fingerprint(self) -> str:
        return _hash([c.fingerprint for c in self.cases])


def _hash(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _validate_check(chk: Any, where: str) -> dict:
    if not isinstance(chk, Mapping):
        raise SetError(f"{where}: a check must be an object")
    typ = chk.get("type")
    if typ not in CHECK_TYPES:
        raise SetError(f"{where}: check type {typ!r} unknown; use one of {', '.join(CHECK_TYPES)}")
    c = dict(chk)
    if typ in ("exact", "contains", "not_contains"):
        vals = c.get("value", c.get("any"))
        if isinstance(vals, str):
            pass
        elif isinstance(vals, list) and vals and all(isinstance(v, str) for v in vals):
            pass
        else:
            raise SetError(f"{where}: {typ} check needs \"value\" (a string or a list of strings)")
    elif typ == "regex":
        pat = c.get("pattern")
        if not isinstance(pat, str) or not pat:
            raise SetError(f"{where}: regex check needs \"pattern\"")
        try:
            re.compile(pat, _regex_flags(c.get("flags", "")))
        except (re.error, ValueError) as exc:
            raise SetError(f"{where}: regex {pat!r} does not compile: {exc}") from None
    elif typ == "json":
        keys = c.get("required_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise SetError(f"{where}: json check \"required_keys\" must be a list of strings")
        eq = c.get("equals", {})
        if not isinstance(eq, Mapping):
            raise SetError(f"{where}: json check \"equals\" must be an object")
    elif typ == "number":
        v = c.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise SetError(f"{where}: number check needs a numeric \"value\"")
        for k in ("tolerance", "rel_tolerance"):
            t = c.get(k, 0)
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
                raise SetError(f"{where}: number check {k!r} must be a number >= 0")
        if c.get("pick", "last") not in ("first", "last", "any", "only"):
            raise SetError(f"{where}: number check \"pick\" must be first, last, any or only")
    return c


def _regex_flags(flags: Any) -> int:
    if not isinstance(flags, str):
        raise ValueError("flags must be a string such as \"i\" or \"ims\"")
    out = 0
    for ch in flags:
        if ch == "i":
            out |= re.IGNORECASE
        elif ch == "m":
            out |= re.MULTILINE
        elif ch == "s":
            out |= re.DOTALL
        else:
            raise ValueError(f"unknown regex flag {ch!r} (use i, m, s)")
    return out


def _max_tokens(d: Mapping, where: str, default: int | None = None) -> int:
    v = d.get("max_tokens", default)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_TOKENS_LIMIT:
        raise SetError(f"{where}: \"max_tokens\" must be a whole number from 1 to {MAX_TOKENS_LIMIT}")
    return v


def _checks(d: Mapping, where: str) -> tuple[dict, ...]:
    checks = d.get("checks")
    if not isinstance(checks, list) or not checks:
        raise SetError(f"{where}: \"checks\" must be a non-empty list")
    return tuple(_validate_check(c, f"{where} check {i + 1}") for i, c in enumerate(checks))


def _str_field(d: Mapping, key: str, where: str, default: str | None = None) -> str:
    v = d.get(key, default)
    if not isinstance(v, str) or not v.strip():
        raise SetError(f"{where}: \"{key}\" must be a non-empty string")
    return v


def parse_case(d: Any, where: str) -> Case:
    """One fixed case from a decoded JSON object (raises SetError)."""
    if not isinstance(d, Mapping):
        raise SetError(f"{where}: a case must be a JSON object")
    cid = _str_field(d, "id", where)
    category = _str_field(d, "category", where, "general")
    msgs = d.get("messages")
    prompt = d.get("prompt")
    if (msgs is None) == (prompt is None):
        raise SetError(f"{where}: give exactly one of \"messages\" (chat) or \"prompt\" (completion)")
    messages: tuple[dict, ...] | None = None
    if msgs is not None:
        if not isinstance(msgs, list) or not msgs:
            raise SetError(f"{where}: \"messages\" must be a non-empty list")
        for m in msgs:
            if not (isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                raise SetError(f"{where}: each message needs string \"role\" and \"content\"")
        messages = tuple({"role": m["role"], "content": m["content"]} for m in msgs)
    elif not isinstance(prompt, str) or not prompt:
        raise SetError(f"{where}: \"prompt\" must be a non-empty string")
    max_tokens = _max_tokens(d, where, 64)
    checks = _checks(d, where)
    fp = _hash({"messages": messages, "prompt": prompt, "max_tokens": max_tokens, "checks": checks})
    return Case(cid, category, max_tokens, checks, messages, prompt, fp)
