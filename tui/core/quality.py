"""Quality regression: the regression-set format, the checks, scoring and the regression verdict.

Pure domain, standard library only. The HTTP side lives in ``tui.sources.quality_runner``;
the command line in ``tui.cli.quality``. Format and method: ``docs/acceptance.md`` and
``quality/README.md``.

A regression set is JSON Lines. Each line is either one *case*::

    {"id": "arith-add", "category": "arithmetic",
     "messages": [{"role": "user", "content": "What is 17 + 25? Answer with the number only."}],
     "max_tokens": 16,
     "checks": [{"type": "number", "value": 42}]}

(``prompt`` instead of ``messages`` sends a plain completion), or a *generator* line that
expands into several long-context cases::

    {"generate": "long_context", "id": "lc-code", "fact": "The access code is 7319.",
     "question": "What is the access code? Answer with the number only.", "answer": "7319",
     "depths": [0.1, 0.5, 0.9], "tokens": 3000}

A case passes when every one of its checks passes. A request that failed is a failed case.

The regression verdict compares the candidate with a baseline on the SAME cases (paired by id,
and only when both sides ran the same case content). A pair is *usable* when both sides got an
HTTP answer: a pair where either side had a transport error (no answer at all: refused, TLS,
connect timeout; :data:`TRANSPORT_ERRORS`) or the baseline failed to answer (any request error) is
dropped and counted, never scored. A candidate that took the request and then timed out or reset
the stream failed that case (:data:`CANDIDATE_FAILURES`): it is scored, not dropped. Over the n usable pairs let n10 be the cases
the baseline passed and the candidate failed, n01 the reverse, and ``delta = (n10 - n01) / n``
the drop in pass rate. With margin m and error level alpha:

- NO_EVIDENCE when there is nothing to judge: no usable pair; the candidate answered no usable
  case (every request failed); the baseline passed no usable case (then the candidate has nothing
  to lose, and no set of pairs can show a regression).
- FAIL: the candidate is worse by more than m, with evidence: the one-sided exact McNemar
  test (H0: not worse) rejects at alpha AND the paired score test (Tango / Nam) rejects
  H0: delta <= m at alpha.
- PASS only from the non-inferiority test: n >= min_cases AND the paired score test rejects
  H0: delta >= m at alpha AND the exact guard P(Bin(n, m) <= n10 - n01) < alpha (the score test
  alone is slightly liberal when nearly every pair is concordant: 6.8% instead of 5% at 52 pairs).
  "Lost no more cases than it gained" is not evidence: with every pair concordant PASS needs
  ``pairs_needed(m, alpha)`` usable pairs (59 at m = 0.05, alpha = 0.05).
- NO_EVIDENCE otherwise: fewer usable pairs than min_cases, or too little evidence either way.
- NO_BASELINE: nothing to compare with; absolute pass rates only (never PASS).

Why ~1,100 lines: the set format with its checks, long-context expansion, scoring and the paired
non-inferiority verdict form one contract with the result file; the verdict is re-checked from the file's cases
(`accept`), so format and statistics must not drift apart.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Final, Literal

from tui.core.exitcodes import ExitCode
from tui.core.stats import wilson

RESULT_SCHEMA = "servewatch.quality/1"

#: A quality comparison's state (the value is what the result file and --json carry).
QualityState = Literal["PASS", "FAIL", "NO_EVIDENCE", "NO_BASELINE"]
PASS: Final = "PASS"
FAIL: Final = "FAIL"
NO_EVIDENCE: Final = "NO_EVIDENCE"
NO_BASELINE: Final = "NO_BASELINE"
EXIT_CODES = {PASS: ExitCode.PASS, FAIL: ExitCode.FAIL, NO_EVIDENCE: ExitCode.INSUFFICIENT, NO_BASELINE: ExitCode.INSUFFICIENT}

CHECK_TYPES = ("exact", "contains", "not_contains", "regex", "json", "number")
DEFAULT_DEPTHS = (0.1, 0.5, 0.9)
DEFAULT_LONG_CONTEXT_TOKENS = 3000
DEFAULT_CHARS_PER_TOKEN = 4.0
DEFAULT_SEED = 1234
DEFAULT_MARGIN = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_CASES = 20
MAX_TOKENS_LIMIT = 32768
EXCERPT_CHARS = 200
LOW_PASS_RATE = 0.5  # below this on both sides, a PASS carries a warning about absolute quality

#: Deterministic sampling sent with every request (non-streaming).
SAMPLING = {"temperature": 0.0, "top_p": 1.0, "seed": DEFAULT_SEED, "cache_prompt": False}

FALLBACK = (
    "fall back to a larger model or a different quantization (for example 8-bit or bf16 instead of "
    "4-bit weights), then re-run this quality set and the load test on that configuration"
)

#: Error classes of a failed quality request.
ERROR_CLASSES = (
    "connect", "connect_timeout", "tls", "read_timeout", "stream_reset", "http_4xx", "http_429", "http_5xx",
    "malformed_response", "other",
)
#: Error classes on the candidate's side that are scored as failed cases, never dropped: the server took the
#: request and then did not finish the answer (a candidate that hangs or resets on the hard cases must not
#: lose those pairs and so look better).
CANDIDATE_FAILURES = frozenset({"read_timeout", "stream_reset"})

#: Error classes that mean "no HTTP answer at all" (the same set as tui.sources.openai_http.TRANSPORT_ERRORS).
TRANSPORT_ERRORS = frozenset({"connect", "connect_timeout", "tls", "read_timeout", "stream_reset", "other"})


class SetError(ValueError):
    """A regression set (or one of its lines) that cannot be used."""


# ------------------------------------------------------------------ cases


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


# ------------------------------------------------------------------ long context

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


# ------------------------------------------------------------------ checks

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


def _json_value(answer: str, strict: bool) -> Any:
    s = answer.strip()
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
            value = _json_value(answer, bool(chk.get("strict", False)))
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


# ------------------------------------------------------------------ scoring


def rate(passed: int, n: int) -> dict:
    lo, hi = wilson(passed, n)
    return {"n": n, "passed": passed, "pass_rate": (passed / n) if n else None, "wilson_95": [lo, hi]}


def summarize(rows: Iterable[Mapping]) -> dict:
    """Per-category and overall pass rates (Wilson 95% intervals, descriptive) and error counts."""
    rows = list(rows)
    cats: dict[str, list[int]] = {}
    errors: dict[str, int] = {}
    for r in rows:
        c = cats.setdefault(str(r.get("category", "general")), [0, 0])
        c[0] += bool(r.get("passed"))
        c[1] += 1
        if r.get("error"):
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    passed = sum(1 for r in rows if r.get("passed"))
    return {
        "categories": {k: rate(v[0], v[1]) for k, v in sorted(cats.items())},
        "overall": rate(passed, len(rows)),
        "errors_by_class": dict(sorted(errors.items())),
        "failed_requests": sum(errors.values()),
    }


# ------------------------------------------------------------------ regression test


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


def compare(
    candidate: Iterable[Mapping],
    baseline: Iterable[Mapping] | None,
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = DEFAULT_ALPHA,
    min_cases: int = DEFAULT_MIN_CASES,
) -> tuple[dict | None, dict]:
    """(comparison, verdict) from per-case rows of both sides (``baseline`` None: no baseline)."""
    if not 0 <= margin < 1:
        raise ValueError("margin must be >= 0 and < 1")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be between 0 and 1")
    cand = _case_map(candidate)
    if baseline is None:
        s = summarize(cand.values())["overall"]
        pr = "N/A" if s["pass_rate"] is None else f"{s['pass_rate']:.0%}"
        verdict = {
            "state": NO_BASELINE,
            "reason": (f"no baseline: the candidate passed {s['passed']}/{s['n']} cases ({pr}); absolute pass rates "
                       "alone cannot show that quality did not regress, so the quality verdict cannot be PASS"),
            "fallback": None,
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
    paired, dropped = usable_pairs(paired)
    n_dropped = sum(dropped["pairs"].values())
    if n_dropped:
        notes.append(f"{n_dropped} pair(s) dropped, not scored: {_dropped_text(dropped)}")
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
    per_cat: dict[str, dict] = {}
    for c, b in paired:
        d = per_cat.setdefault(str(c.get("category", "general")), {"n": 0, "both_pass": 0, "regressed": 0,
                                                                   "improved": 0, "both_fail": 0})
        d["n"] += 1
        key = ("both_pass" if b.get("passed") else "improved") if c.get("passed") else \
            ("regressed" if b.get("passed") else "both_fail")
        d[key] += 1
    for cat, d in per_cat.items():
        d["candidate_pass_rate"] = (d["both_pass"] + d["improved"]) / d["n"]
        d["baseline_pass_rate"] = (d["both_pass"] + d["regressed"]) / d["n"]
        d["mcnemar_p_worse"] = mcnemar_one_sided(d["regressed"], d["improved"])
        if len(per_cat) > 1 and d["regressed"] > d["improved"] and d["mcnemar_p_worse"] < alpha:
            notes.append(f"category {cat}: the candidate lost {d['regressed']} of {d['n']} cases "
                         f"(exact McNemar p={d['mcnemar_p_worse']:.3g}); check it even if the overall verdict passes")
    comparison: dict[str, Any] = {
        "paired": n,
        "dropped": dropped,
        "both_pass": n11,
        "regressed": n10,
        "improved": n01,
        "both_fail": n00,
        "candidate_pass_rate": (n11 + n01) / n if n else None,
        "baseline_pass_rate": (n11 + n10) / n if n else None,
        "delta": delta,
        "margin": margin,
        "alpha": alpha,
        "min_cases": min_cases,
        "mcnemar_p_worse": p_mc,
        "score_z": z if math.isfinite(z) else (1e308 if z > 0 else -1e308),
        "p_worse_by_more_than_margin": p_worse_by_margin,
        "p_noninferior": p_noninferior,
        "p_noninferior_exact_guard": p_guard,
        "per_category": dict(sorted(per_cat.items())),
        "notes": notes,
    }
    dpct = "N/A" if delta is None else f"{100 * delta:+.1f} points"
    cp = comparison["candidate_pass_rate"]
    bp = comparison["baseline_pass_rate"]
    rates = ("" if not n else f"candidate {cp:.0%} vs baseline {bp:.0%} on {n} usable paired cases "
             f"({n10} regressed, {n01} improved; drop {dpct})")
    drop_txt = f"; {n_dropped} pair(s) dropped for errors, not scored" if n_dropped else ""
    answered = sum(1 for c, _b in paired if not c.get("error"))
    if n == 0:
        state = NO_EVIDENCE
        reason = ("no usable paired cases" + (f" ({n_dropped} dropped: {_dropped_text(dropped)})" if n_dropped else "")
                  + ": nothing was compared")
    elif answered == 0:
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
                  f"exact guard p={p_guard:.3g}, exact McNemar p={p_mc:.3g} for worse, alpha {alpha:g}){more}; add cases{drop_txt}")
    if n and cp is not None and bp is not None and max(cp, bp) < LOW_PASS_RATE:
        low = (f"both sides pass few cases (candidate {cp:.0%}, baseline {bp:.0%}): the regression verdict says "
               "nothing about absolute quality")
        notes.append(low)
        if state == PASS:
            reason += f"; but {low}"
    verdict = {
        "state": state,
        "reason": reason,
        "fallback": FALLBACK if state == FAIL else None,
        "exit_code": EXIT_CODES[state],
    }
    return comparison, verdict


# ------------------------------------------------------------------ result documents


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
