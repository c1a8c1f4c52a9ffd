"""The standard regression suite: generated from a seed, in five categories a team recognises (exact arithmetic,
extraction to JSON, instruction/format following, copying and transforming given text, long-context retrieval).

Every word, name and number is generated here (invented names and places, digit-free filler prose from
:mod:`tui.core.quality.long_context`); nothing is taken from a benchmark or a book. Each case has a deterministic
check and a reference answer (``Case.generated["reference"]``) that passes it. The same :class:`SuiteSpec` builds the
same cases (same ids, same fingerprints), so a baseline and a candidate run the same cases: the spec is recorded in
the result (``set.suite``) and a saved baseline's spec rebuilds its cases at its lengths.

Levels: ``default`` is sized so that 135M-270M models (SmolLM2-135M, Gemma 3 270M) pass a useful share of every
category (two worked examples per prompt, short operands, one or three needles); ``hard`` has three-step arithmetic,
more fields, longer texts and five needles, for larger models.

Long-context cases: key/value needles planted in filler at each of ``fractions`` x ``depths``; the prompt targets
``round(fraction x context_tokens)`` tokens at ``chars_per_token`` (measured with the server's tokenizer when it has
one). One and several needles alternate, so a length x depth cell holds both.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tui.core.defaults import QUALITY_CONTEXT_FRACTIONS, QUALITY_SUITE_CASES, QUALITY_SUITE_SEED
from tui.core.quality.cases import Case, QualitySet, _hash
from tui.core.quality.long_context import filler_text, place_fact
from tui.core.quality.vocab import DEFAULT_CHARS_PER_TOKEN, DEFAULT_DEPTHS, SetError

SUITE_NAME = "standard"
SUITE_VERSION = 1
LEVELS = ("default", "hard")
CATEGORIES = ("arithmetic", "extraction", "format", "transform", "long_context")
LONG_CONTEXT_SHARE = 0.4
MIN_CONTEXT_TOKENS = 256
#: tokens kept for the instructions, the question and the answer of a long-context prompt
LC_RESERVE_TOKENS = 64
_ABBR = {"arithmetic": "ar", "extraction": "ex", "format": "fm", "transform": "tr", "long_context": "lc"}

_SYL = ("ka", "lo", "mi", "ren", "ta", "vo", "sel", "dru", "fen", "ga", "hol", "ni", "pra", "sto", "ve", "zan",
        "bri", "co", "del", "mar", "quin", "ro", "tu", "wen")
_COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple", "grey", "brown", "silver", "golden")
_THINGS = ("door", "box", "gate", "lamp", "boat", "chest", "drawer", "locker", "wagon", "tower", "bottle", "basket")
_WORDS = ("apple", "river", "candle", "forest", "window", "pencil", "garden", "mirror", "rocket", "button", "ladder",
          "cookie", "planet", "tunnel", "violin", "marble", "pepper", "saddle", "kettle", "anchor")
_JOBS = ("baker", "pilot", "farmer", "teacher", "painter", "nurse", "tailor", "miner", "sailor", "cook")


def _name(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(_SYL) for _ in range(parts)).capitalize()


@dataclass(frozen=True)
class SuiteSpec:
    """What builds a suite: the same spec always builds the same cases."""

    name: str = SUITE_NAME
    version: int = SUITE_VERSION
    seed: int = QUALITY_SUITE_SEED
    cases: int = QUALITY_SUITE_CASES
    level: str = "default"
    context_tokens: int | None = None
    fractions: tuple[float, ...] = QUALITY_CONTEXT_FRACTIONS
    depths: tuple[float, ...] = DEFAULT_DEPTHS
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    context_source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.name != SUITE_NAME:
            raise SetError(f"unknown suite {self.name!r} (this servewatch has {SUITE_NAME!r})")
        if self.version != SUITE_VERSION:
            raise SetError(f"suite {self.name!r} version {self.version!r} is not this servewatch's ({SUITE_VERSION})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise SetError("the suite seed must be a whole number")
        if isinstance(self.cases, bool) or not isinstance(self.cases, int) or not 10 <= self.cases <= 100_000:
            raise SetError("--cases must be a whole number from 10 to 100000")
        if self.level not in LEVELS:
            raise SetError(f"level {self.level!r} unknown; use one of {', '.join(LEVELS)}")
        ct = self.context_tokens
        if ct is not None and (isinstance(ct, bool) or not isinstance(ct, int) or ct < MIN_CONTEXT_TOKENS):
            raise SetError(f"the context the suite targets must be a whole number of tokens >= {MIN_CONTEXT_TOKENS}")
        for label, vals in (("fractions", self.fractions), ("depths", self.depths)):
            if (not vals or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in vals)
                    or len(set(vals)) != len(vals)):
                raise SetError(f"suite {label} must be distinct fractions between 0 and 1")
        if any(f <= 0 for f in self.fractions):
            raise SetError("suite fractions must be above 0")
        cpt = self.chars_per_token
        if isinstance(cpt, bool) or not isinstance(cpt, (int, float)) or not 0.5 <= cpt <= 20:
            raise SetError(f"chars per token {cpt!r} out of range (0.5 to 20)")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fractions"], d["depths"] = list(self.fractions), list(self.depths)
        return d

    @classmethod
    def from_dict(cls, d: Any) -> SuiteSpec:
        """The spec a result recorded (``set.suite``); SetError when it is not one this servewatch can rebuild."""
        if not isinstance(d, Mapping):
            raise SetError("the suite record is not an object")
        known = {k: d[k] for k in ("name", "version", "seed", "cases", "level", "context_tokens", "chars_per_token",
                                   "context_source") if k in d}
        for k in ("fractions", "depths"):
            if k in d:
                if not isinstance(d[k], list):
                    raise SetError(f"the suite record's {k} is not a list")
                known[k] = tuple(d[k])
        try:
            return cls(**known)
        except TypeError as exc:
            raise SetError(f"the suite record is not usable: {exc}") from None


def default_spec(**overrides: Any) -> SuiteSpec:
    return SuiteSpec(**overrides)


def category_counts(cases: int) -> dict[str, int]:
    """Cases per category: 40% long-context (80 of 200), the rest split evenly (remainder to the first)."""
    lc = round(LONG_CONTEXT_SHARE * cases)
    rest = cases - lc
    short = CATEGORIES[:-1]
    out = {c: rest // len(short) for c in short}
    for c in short[: rest % len(short)]:
        out[c] += 1
    out["long_context"] = lc
    return out


# ------------------------------------------------------------------ generators: (prompt, checks, reference, max_tokens)

Gen = tuple[tuple[dict, ...], list[dict], str, int]
SYSTEM = "Answer with the answer only, in exactly the same format as your earlier answers."


def _shots(examples: list[tuple[str, str]], task: str, system: str = SYSTEM) -> tuple[dict, ...]:
    """Two worked examples as earlier turns of the conversation, then the task."""
    msgs = [{"role": "system", "content": system}]
    for q, a in examples:
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    msgs.append({"role": "user", "content": task})
    return tuple(msgs)


def _arith_problem(rng: random.Random, hard: bool, kind: int) -> tuple[str, int]:
    if hard:
        a, b, c = rng.randint(12, 99), rng.randint(3, 19), rng.randint(100, 999)
        op = rng.choice(("+", "-"))
        return f"{a} * {b} {op} {c}", a * b + c if op == "+" else a * b - c
    # the default level: one step a 135M model can take (add one, add to ten, times ten)
    if kind == 0:
        a = rng.randint(2, 98)
        return f"{a} + 1", a + 1
    if kind == 1:
        b = rng.randint(1, 9)
        return f"10 + {b}", 10 + b
    a = rng.randint(2, 9)
    return f"{a} * 10", a * 10


def gen_arithmetic(rng: random.Random, hard: bool) -> Gen:
    kind = rng.randrange(3)  # the worked examples use the task's own operation
    shots = [_arith_problem(rng, hard, kind) for _ in range(2)]
    expr, ans = _arith_problem(rng, hard, kind)
    prompt = _shots([(f"What is {e}?", str(v)) for e, v in shots], f"What is {expr}?")
    return prompt, [{"type": "number", "value": ans, "pick": "first"}], str(ans), 16


def _person(rng: random.Random) -> dict:
    return {"name": f"{_name(rng)} {_name(rng, 3)}", "age": rng.randint(19, 88), "city": f"Port {_name(rng)}",
            "job": rng.choice(_JOBS)}


def _sentence(p: dict) -> str:
    return f"{p['name']} is a {p['job']} aged {p['age']} who lives in {p['city']}."


def gen_extraction(rng: random.Random, hard: bool) -> Gen:
    keys = ["name", "age", "city", "job"] if hard else ["name", "age"]
    people = [_person(rng) for _ in range(3)]

    def js(p: dict) -> str:
        return json.dumps({k: p[k] for k in keys})

    task_p = people[2]
    system = (f"Extract the {', '.join(keys)} from the text as one JSON object with exactly those keys. "
              "Answer with the JSON only.")
    prompt = _shots([(_sentence(p), js(p)) for p in people[:2]], _sentence(task_p), system)
    return prompt, [{"type": "json", "prefix": True, "equals": {k: task_p[k] for k in keys}}], js(task_p), 64


def gen_format(rng: random.Random, hard: bool) -> Gen:
    kind = rng.randrange(3)
    if kind == 0:  # a word in capitals, nothing else
        words = rng.sample(_WORDS, 3)
        prompt = _shots([(f"Write the word {w} in capital letters.", w.upper()) for w in words[:2]],
                        f"Write the word {words[2]} in capital letters.")
        ref = words[2].upper()
        return prompt, [{"type": "regex", "pattern": r"^\s*" + ref + r"\b(?![a-z])"}], ref, 12
    if kind == 1:  # wrap in square brackets
        picks = [rng.sample(_WORDS, 2) for _ in range(3)]
        q = [f"Put the words {a} and {b} in square brackets, separated by a comma." for a, b in picks]
        ans = [f"[{a}, {b}]" for a, b in picks]
        prompt = _shots(list(zip(q[:2], ans[:2])), q[2])
        a, b = picks[2]
        return prompt, [{"type": "regex", "pattern": rf"^\s*\[\s*{a}\s*,\s*{b}\s*\]", "flags": "i"}], ans[2], 16
    n = 5 if hard else 3  # numbered list of n given words
    sets = [rng.sample(_WORDS, n) for _ in range(3)]
    q = [f"Write the words {', '.join(ws)} as a numbered list, one per line." for ws in sets]
    lists = ["\n".join(f"{i}. {w}" for i, w in enumerate(ws, 1)) for ws in sets]
    prompt = _shots(list(zip(q[:2], lists[:2])), q[2])
    pat = r"^\s*" + r"\s*\n\s*".join(rf"{i}\.\s*{w}\b" for i, w in enumerate(sets[2], 1))
    return prompt, [{"type": "regex", "pattern": pat, "flags": "i"}], lists[2], 16 + 6 * n


def gen_transform(rng: random.Random, hard: bool) -> Gen:
    n = 5 if hard else 3
    kind = rng.randrange(3) if hard else rng.choice((2, 3, 4))
    if kind == 3:  # copy a short phrase exactly
        sets = [rng.sample(_WORDS, 3) for _ in range(3)]
        q = [f"Copy this phrase exactly: the {ws[0]} and the {ws[1]}" for ws in sets]
        a = [f"the {ws[0]} and the {ws[1]}" for ws in sets]
    elif kind == 4:  # join two words with a hyphen
        sets = [rng.sample(_WORDS, 2) for _ in range(3)]
        q = [f"Join the words {ws[0]} and {ws[1]} with a hyphen." for ws in sets]
        a = [f"{ws[0]}-{ws[1]}" for ws in sets]
    elif kind == 0:  # reverse the order of words
        sets = [rng.sample(_WORDS, n) for _ in range(3)]
        q = [f"Reverse the order of these words: {' '.join(ws)}" for ws in sets]
        a = [" ".join(reversed(ws)) for ws in sets]
    elif kind == 1:  # sort numbers ascending
        nums = [rng.sample(range(1, 100), n) for _ in range(3)]
        q = [f"Sort these numbers from smallest to largest: {' '.join(map(str, ws))}" for ws in nums]
        a = [" ".join(map(str, sorted(ws))) for ws in nums]
    else:  # copy a made-up code exactly
        length = 10 if hard else 6
        sets = [["".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(length))] for _ in range(3)]
        q = [f"Copy this code exactly: {ws[0]}" for ws in sets]
        a = [ws[0] for ws in sets]
    prompt = _shots(list(zip(q[:2], a[:2])), q[2])
    tokens = a[2].split()
    pat = r"^\s*" + r"[\s,]+".join(re.escape(t) for t in tokens) + r"(?![\w-])"
    return prompt, [{"type": "regex", "pattern": pat, "flags": "i"}], a[2], 12 + 4 * n


_SHORT: dict[str, Callable[[random.Random, bool], Gen]] = {
    "arithmetic": gen_arithmetic, "extraction": gen_extraction, "format": gen_format, "transform": gen_transform,
}


def _needle_case(rng: random.Random, spec: SuiteSpec, frac: float, depth: float, needles: int, cid: str) -> Case:
    assert spec.context_tokens is not None
    target = round(frac * spec.context_tokens)
    keys = rng.sample([(c, t) for c in _COLOURS for t in _THINGS], needles)
    codes = rng.sample(range(1000, 10000), needles)
    ask = rng.randrange(needles)
    colour, thing = keys[ask]
    answer = str(codes[ask])
    question = (f"What is the code of the {colour} {thing}? Answer with the four-digit code only.")
    instructions = "Read the text below. It hides one or more codes. Then answer the question after it."
    filler_tokens = max(32, target - LC_RESERVE_TOKENS)
    filler = filler_text(int(filler_tokens * spec.chars_per_token), rng.randrange(1 << 30))
    doc = filler
    # the asked needle at the depth; the others spread over the rest of the text
    others = [i for i in range(needles) if i != ask]
    spots = [(depth, ask)] + [((depth + (k + 1) / needles) % 1.0, i) for k, i in enumerate(others)]
    for d, i in sorted(spots, key=lambda s: -s[0]):
        c, t = keys[i]
        doc = place_fact(doc, f"The code of the {c} {t} is {codes[i]}.", d)
    content = f"{instructions}\n\n{doc}\n\n{question}"
    checks = ({"type": "regex", "pattern": r"(?<![0-9])" + answer + r"(?![0-9])"},)
    gen = {"kind": "long_context", "depth": float(depth), "target_tokens": target, "length_fraction": float(frac),
           "needles": needles, "chars_per_token": float(spec.chars_per_token), "filler_chars": len(filler),
           "reference": answer}
    msgs = ({"role": "user", "content": content},)
    fp = _hash({"suite": SUITE_NAME, "version": SUITE_VERSION, "content": content, "checks": checks, "max_tokens": 16})
    return Case(cid, "long_context", 16, checks, msgs, None, fp, generated=gen)


def build_suite(spec: SuiteSpec) -> QualitySet:
    """The suite's cases, deterministic from ``spec``. SetError when long-context cases are due and the spec has no
    context (the caller passes the server's, or ``--max-context``)."""
    counts = category_counts(spec.cases)
    if counts["long_context"] and spec.context_tokens is None:
        raise SetError("the server does not state its context length: pass --max-context TOKENS "
                       "(the long-context cases are sized from it)")
    hard = spec.level == "hard"
    cases: list[Case] = []
    for cat in CATEGORIES[:-1]:
        rng = random.Random(f"servewatch-suite:{spec.version}:{spec.seed}:{spec.level}:{cat}")
        for i in range(counts[cat]):
            msgs, checks, ref, max_tokens = _SHORT[cat](rng, hard)
            chk = tuple(checks)
            fp = _hash({"suite": SUITE_NAME, "version": SUITE_VERSION, "messages": msgs, "checks": chk,
                        "max_tokens": max_tokens})
            cases.append(Case(f"std{spec.version}-{_ABBR[cat]}-{i + 1:03d}", cat, max_tokens, chk, msgs, None, fp,
                              generated={"kind": "suite", "reference": ref}))
    rng = random.Random(f"servewatch-suite:{spec.version}:{spec.seed}:{spec.level}:long_context")
    cells = [(f, d) for f in spec.fractions for d in spec.depths]
    many = 5 if hard else 3
    for i in range(counts["long_context"]):
        frac, depth = cells[i % len(cells)]
        needles = 1 if (i // len(cells)) % 2 == 0 else many
        cases.append(_needle_case(rng, spec, frac, depth, needles, f"std{spec.version}-lc-{i + 1:03d}"))
    suite = spec.to_dict()
    suite["counts"] = counts
    lc: dict = {}
    if counts["long_context"]:
        lc = {"target_tokens": sorted({round(f * (spec.context_tokens or 0)) for f in spec.fractions}),
              "chars_per_token": float(spec.chars_per_token), "context_tokens": spec.context_tokens,
              "fractions": list(spec.fractions), "depths": list(spec.depths)}
    label = f"servewatch standard suite v{spec.version} (seed {spec.seed}, level {spec.level}, {spec.cases} cases)"
    # the long-context category is required: an overall PASS needs its own PASS (pooled pairs of the short
    # categories cannot stand in for recall at the context the server was sized for)
    return QualitySet(cases, [], label, False, lc, suite=suite,
                      required=("long_context",) if counts["long_context"] else ())


def reference_answers(qset: QualitySet) -> dict[str, str]:
    """``{case id: an answer that passes its checks}`` for the generated cases (tests, calibration)."""
    return {c.id: str(c.generated["reference"]) for c in qset.cases if c.generated and "reference" in c.generated}
