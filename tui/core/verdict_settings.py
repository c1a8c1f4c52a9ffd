"""The run's settings are the verdict's settings (issue 35): what a run was judged at, read back by every reader,
and what a reader's flags change (standard library only).

- :func:`header_block` is the ONE writer of the run header's ``verdict_settings`` object (every load command:
  `run`, `live`, `sweep`; a future `drill` / `measure` calls the same function): the SLOs in force, which TTFT the
  TTFT SLO judges, the target, the minimum window and request count, the error level and the required level.
- :func:`read_header` reads it back (``FileSettings``): ``verdict_settings`` when present (every field checked; a
  malformed object is a named problem that forbids PASS), else an older file's ``slo`` block for what it states
  (the SLOs, ``ttft_of`` and the target), else nothing (another tool's file, a hand-made one). A header whose
  ``slo`` block and ``verdict_settings`` disagree is a named problem too (one of them was edited).
- :func:`resolve` decides what a file is judged at (``Resolution``): its own settings, except where the reader's
  flags (``JudgeAt.given``) or one common setting for several files (``JudgeAt.common``) say otherwise; every
  setting changed is listed with whether the change is WEAKER than the run's. A re-judgement is at least as strict
  when every SLO threshold is lower or equal (an SLO switched on counts as stricter, switched off as weaker), the
  target higher or equal, the window and the minimum count longer or equal and alpha lower or equal; changing
  ``ttft_of`` counts as weaker; the required level picks a level and is never a weakening.
- :func:`settings_exit` is the exit rule: the re-judged verdict's code when the re-judgement is at least as strict
  on every setting, else 3 ("re-judged at weaker settings than the run's").
- :func:`common_values` is the rule where files of different settings meet (`accept`, `plan`, `compare`): every
  file is judged at ONE stated setting, per setting the strictest any of them was judged at (the flags given win).

See docs/statistics.md, "The run's settings are the verdict's settings".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import tui.core.defaults as D
from tui.core.exitcodes import ExitCode
from tui.core.slos import SLO_JSON_KEYS, SLO_NAMES, SLO_TABLE, TTFT_OF, Slos, from_header_block
from tui.core.verdict import MixtureTest

#: every verdict setting, as the header block and the resolution name them
#: the SLO kinds' fields are the SLO table's JSON keys (tui.core.slos.SLO_TABLE), in its order
SLO_FIELDS: Final = SLO_JSON_KEYS
FIELDS: Final = (*SLO_FIELDS, "ttft_of", "target", "min_window_s", "min_requests", "alpha", "required_level")
_KEY_OF: Final = {k.json_key: k.key for k in SLO_TABLE}
#: each setting's name in a sentence
NAMES: Final = {**{k.json_key: f"{k.name} SLO" for k in SLO_TABLE},
                "ttft_of": "which TTFT", "target": "target", "min_window_s": "window", "min_requests": "min requests",
                "alpha": "alpha", "required_level": "required level"}
#: the settings that decide which request is good (all `compare` judges on)
GOOD_FIELDS: Final = (*SLO_FIELDS, "ttft_of")
#: a target below this is bad usage everywhere (exit 2): a good fraction under one half is no target
TARGET_USAGE_FLOOR: Final = 0.5
#: the block's version: a reader refuses (names) a version it does not know
BLOCK_VERSION: Final = 1

VERDICT_SETTINGS = "verdict_settings"  # origin: the run header's verdict_settings object
SLO_BLOCK = "slo block"  # origin: an older servewatch file's slo block (SLOs, ttft_of, target)
NO_SETTINGS = "none"  # origin: nothing in the file says what it was judged at

BY_FLAG = "flag"
BY_COMMON = "common"
WEAKER = "re-judged at weaker settings than the run's"


@dataclass(frozen=True)
class VerdictSettings:
    """The settings a verdict is judged at. ``min_requests`` None: the fewest with which PASS is possible;
    ``required_level`` None: the highest level tested."""

    slos: Slos = field(default_factory=Slos)
    target: float = D.TARGET
    alpha: float = D.ALPHA
    min_window_s: float = D.MIN_WINDOW_S
    min_requests: int | None = None
    required_level: float | None = None

    def get(self, name: str) -> Any:
        if name in SLO_FIELDS:
            return self.slos.limit(_KEY_OF[name])
        if name == "ttft_of":
            return self.slos.ttft_of
        return getattr(self, name)

    def values(self) -> dict[str, Any]:
        return {f: self.get(f) for f in FIELDS}

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> VerdictSettings:
        """From field values (``FIELDS``; a missing one takes its default)."""
        d = cls().values()
        d.update({k: v for k, v in values.items() if k in FIELDS})
        return cls(slos=Slos.of({_KEY_OF[f]: d[f] for f in SLO_FIELDS}, ttft_of=d["ttft_of"]),
                   target=d["target"], alpha=d["alpha"], min_window_s=d["min_window_s"],
                   min_requests=d["min_requests"], required_level=d["required_level"])

    def min_count(self) -> int:
        """The fewest measured requests a PASS needs at these settings (as the Monitor counts them)."""
        return max(self.min_requests or 0, MixtureTest(self.target, self.alpha).min_requests_to_pass())

    def describe(self, names: Iterable[str] = FIELDS) -> str:
        """"TTFT <= 50 ms (answer), target 0.99, window 1 min, min requests auto, alpha 0.05, level: highest"."""
        names = list(names)
        parts: list[str] = []
        slos = [n for n in names if n in SLO_FIELDS]
        if slos:
            on = [f"{SLO_NAMES[SLO_FIELDS.index(n)]} <= {_g(self.get(n))} ms" for n in slos if self.get(n) is not None]
            if on and "ttft_of" in names and self.slos.ttft_ms is not None and "ttft_ms" in slos:
                on[0] += f" ({self.slos.ttft_shown()})"
            parts.append(", ".join(on) if on else "no latency SLO")
        elif "ttft_of" in names:
            parts.append(f"TTFT of the {self.slos.ttft_shown()}")
        parts += [value_text(n, self.get(n)) for n in names if n not in SLO_FIELDS and n != "ttft_of"]
        return ", ".join(parts)


def _g(v: float) -> str:
    return f"{v:g}"


def value_text(name: str, v: Any) -> str:
    """One setting as the outputs name it: "TTFT <= 50 ms", "TTFT off", "target 0.99", "window 1 min"."""
    if name in SLO_FIELDS:
        label = SLO_NAMES[SLO_FIELDS.index(name)]
        return f"{label} off" if v is None else f"{label} <= {_g(v)} ms"
    if name == "ttft_of":
        return f"TTFT of the {v}" if v == "answer" else "TTFT of any token"
    if name == "target":
        return f"target {_g(v)}"
    if name == "min_window_s":
        return f"window {_g(v / 60.0)} min"
    if name == "min_requests":
        return "min requests auto" if v is None else f"min requests {v}"
    if name == "alpha":
        return f"alpha {_g(v)}"
    if name == "required_level":
        return "level: the highest tested" if v is None else f"level {_g(v)}"
    raise KeyError(name)


# ------------------------------------------------------------------ the one writer


def header_block(vs: VerdictSettings) -> dict:
    """The run header's ``verdict_settings`` object (docs/record-format.md): every setting, always every key
    (a reader holds a missing key against the file), and the sentence."""
    s = vs.slos
    return {"version": BLOCK_VERSION, "ttft_ms": s.ttft_ms, "tpot_ms": s.tpot_ms, "itl_ms": s.itl_ms,
            "e2e_ms": s.e2e_ms, "ttft_of": s.ttft_of, "target": vs.target, "min_window_s": vs.min_window_s,
            "min_requests": vs.min_requests, "alpha": vs.alpha, "required_level": vs.required_level,
            "text": vs.describe()}


# ------------------------------------------------------------------ reading a header


@dataclass(frozen=True)
class FileSettings:
    """What a file says it was judged at: ``values`` holds the settings it states (all of ``FIELDS`` from
    ``verdict_settings``; the SLOs, ``ttft_of`` and the target from an older ``slo`` block; none otherwise);
    ``problems``: what is wrong with them (each forbids PASS)."""

    origin: str = NO_SETTINGS
    values: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(name: str, v: Any) -> str | None:
    """Why ``v`` is not a valid value of setting ``name`` (None: it is)."""
    if name in SLO_FIELDS:
        return None if v is None or (_num(v) and v > 0) else "a number of ms > 0 or null"
    if name == "ttft_of":
        return None if v in TTFT_OF else "one of " + ", ".join(TTFT_OF)
    if name == "target":
        return None if _num(v) and TARGET_USAGE_FLOOR <= v < 1 else f"a fraction from {TARGET_USAGE_FLOOR:g} to below 1"
    if name == "alpha":
        return None if _num(v) and 0 < v < 1 else "a fraction between 0 and 1"
    if name == "min_window_s":
        return None if _num(v) and v >= 0 else "seconds >= 0"
    if name == "min_requests":
        return None if v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0) else \
            "a whole number > 0 or null"
    if name == "required_level":
        return None if v is None or (_num(v) and v > 0) else "a level > 0 or null"
    raise KeyError(name)


def _verdict_settings(block: Any) -> tuple[dict[str, Any] | None, list[str]]:
    if not isinstance(block, dict):
        return None, [f"the run header's verdict_settings is not an object ({type(block).__name__}): its settings "
                      "cannot be read; judged at the flags given, and it cannot PASS"]
    bad = []
    values: dict[str, Any] = {}
    if block.get("version") != BLOCK_VERSION:
        bad.append(f"version {block.get('version')!r} (this reader knows {BLOCK_VERSION})")
    for name in FIELDS:
        if name not in block:
            bad.append(f"{name} missing")
            continue
        why = _check(name, block[name])
        if why:
            bad.append(f"{name} {block[name]!r} (expected {why})")
        else:
            v = block[name]
            values[name] = float(v) if _num(v) and name != "min_requests" else v
    if bad:
        return None, ["the run header's verdict_settings is malformed (" + "; ".join(bad) + "): judged at the flags "
                      "given instead, and it cannot PASS"]
    return values, []


def _slo_block(block: Any) -> tuple[dict[str, Any] | None, list[str]]:
    slos = from_header_block(block)
    if slos is None:
        return None, []
    values: dict[str, Any] = {n: getattr(slos, n) for n in GOOD_FIELDS}
    problems = []
    if isinstance(block, dict) and "target" in block:
        t = block["target"]
        if _check("target", t) is None:
            values["target"] = float(t)
        else:
            problems.append(f"the run header's slo block states target {t!r} (expected a fraction from "
                            f"{TARGET_USAGE_FLOOR:g} to below 1): judged at the flags given, and it cannot PASS")
    return values, problems


def read_header(header: Mapping[str, Any] | None) -> FileSettings:
    """The settings a run header states (``FileSettings``); an empty or missing header states none."""
    if not header:
        return FileSettings()
    problems: list[str] = []
    old, p = _slo_block(header.get("slo"))
    problems += p
    if VERDICT_SETTINGS in header:
        values, p = _verdict_settings(header[VERDICT_SETTINGS])
        problems += p
        if values is not None:
            if old is not None:
                differ = [n for n in old if old[n] != values.get(n)]
                if differ:
                    problems.append("the run header's slo block and verdict_settings disagree ("
                                    + "; ".join(f"{n}: {old[n]!r} vs {values.get(n)!r}" for n in differ)
                                    + "): one of them was edited; it cannot PASS")
            return FileSettings(VERDICT_SETTINGS, values, tuple(problems))
    if old is not None:
        return FileSettings(SLO_BLOCK, old, tuple(problems))
    return FileSettings(NO_SETTINGS, {}, tuple(problems))


# ------------------------------------------------------------------ what a file is judged at


@dataclass(frozen=True)
class JudgeAt:
    """What a reader was asked: ``values`` (every setting: the flags, their defaults where not given, and the
    common setting's values), ``given`` (the settings the user gave as flags), ``common`` (the settings set to one
    common value for several files: ``common_values``), ``fields`` (the settings this reader judges on: `compare`
    judges only which request is good)."""

    values: VerdictSettings = field(default_factory=VerdictSettings)
    given: frozenset[str] = frozenset()
    common: frozenset[str] = frozenset()
    fields: tuple[str, ...] = FIELDS


@dataclass(frozen=True)
class Change:
    """One setting the reader changed: the run's value, the one judged at, whether that is weaker, and why
    (``BY_FLAG``: a flag given; ``BY_COMMON``: the one setting of several files)."""

    name: str
    run: Any
    now: Any
    weaker: bool
    by: str

    def why_weaker(self) -> str:
        """"TTFT 1000 ms > 50 ms", "TTFT switched off", "target 0.9 < 0.99", "ttft_of any, the run's answer"."""
        n, r, v = self.name, self.run, self.now
        if n in SLO_FIELDS:
            label = SLO_NAMES[SLO_FIELDS.index(n)]
            return f"{label} switched off (the run's {_g(r)} ms)" if v is None else f"{label} {_g(v)} ms > {_g(r)} ms"
        if n == "ttft_of":
            return f"TTFT of the {v}, the run's of the {r}"
        if n == "target":
            return f"target {_g(v)} < {_g(r)}"
        if n == "min_window_s":
            return f"window {_g(v / 60.0)} min < {_g(r / 60.0)} min"
        if n == "alpha":
            return f"alpha {_g(v)} > {_g(r)}"
        if n == "min_requests":
            return f"min requests {'auto' if v is None else v} (fewer than the run's {'auto' if r is None else r})"
        return value_text(n, v)

    def to_dict(self) -> dict:
        return {"setting": self.name, "run": self.run, "judged_at": self.now, "weaker": self.weaker, "by": self.by}


def is_weaker(name: str, run: Any, now: Any, run_vs: VerdictSettings, now_vs: VerdictSettings) -> bool:
    """Whether judging at ``now`` instead of the run's ``run`` is weaker on setting ``name`` (the rule above)."""
    if name in SLO_FIELDS:
        if now is None:
            return run is not None  # switched off
        return run is not None and now > run  # switched on: stricter
    if name == "ttft_of":
        return now != run
    if name == "target":
        return now < run
    if name == "min_window_s":
        return now < run
    if name == "alpha":
        return now > run
    if name == "min_requests":
        return now_vs.min_count() < run_vs.min_count()
    return False  # required_level: picks a level, never a weakening


@dataclass(frozen=True)
class Resolution:
    """What one file is judged at, and why. ``run``: what the run was judged at (the settings it states, the
    reader's values for those it does not; None when it states none); ``effective``: what it is judged at now;
    ``changes``: every stated setting the reader changed; ``unstated``: the settings the file does not state
    (judged at the flags given); ``problems``: the file's settings problems (each forbids PASS)."""

    origin: str
    run: VerdictSettings | None
    effective: VerdictSettings
    changes: tuple[Change, ...] = ()
    unstated: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    fields: tuple[str, ...] = FIELDS
    overridden: frozenset[str] = frozenset()  # the settings the flags given or the common setting decide

    def from_run(self, name: str) -> bool:
        """Whether setting ``name`` is judged at the value the run itself states."""
        return self.origin != NO_SETTINGS and name not in self.unstated and name not in self.overridden

    @property
    def rejudged(self) -> bool:
        return bool(self.changes)

    @property
    def weaker(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.weaker)

    def rejudged_text(self) -> str | None:
        """"re-judged at TTFT <= 1000 ms (the flags given)" or None."""
        if not self.changes:
            return None
        names = [c.name for c in self.changes]
        bys = {c.by for c in self.changes}
        why = ("the flags given" if bys == {BY_FLAG} else "the one setting of the files judged together"
               if bys == {BY_COMMON} else "the flags given and the one setting of the files judged together")
        return f"re-judged at {self.effective.describe(_order(names))} ({why})"

    def lines(self, run_state: str | None = None) -> list[str]:
        """The header block's lines: what the file is judged at and, when re-judged, what the run was judged at
        and its verdict there (``run_state``); then the exit rule and every settings problem."""
        out: list[str] = []
        fields = self.fields
        if self.changes:
            names = _order([c.name for c in self.changes])
            assert self.run is not None
            was = f"the run was judged at {self.run.describe(names)}" + (f": {run_state}" if run_state else "")
            out.append(f"{self.rejudged_text()}; {was}")
            if self.weaker:
                out.append(f"  {WEAKER} ({', '.join(c.why_weaker() for c in self.weaker)}): exit 3")
        judged = self.effective.describe(fields)
        if self.origin == VERDICT_SETTINGS:
            out.append(f"settings: judged at {judged} (" + ("the run's own, its verdict_settings" if not self.changes
                       else "the run's verdict_settings, re-judged as above") + ")")
        elif self.origin == SLO_BLOCK:
            assert self.run is not None
            stated = [f for f in fields if f not in self.unstated]
            rest = [f for f in fields if f in self.unstated]
            line = f"settings: judged at {judged}; the run's slo block states {self.run.describe(stated)}"
            if rest:
                line += f"; {', '.join(NAMES[f] for f in rest)}: not stated there, the flags given"
            out.append(line)
        else:
            out.append(f"settings: judged at {judged}: the flags given (the file records no verdict settings: "
                       "another tool's file, or one written before servewatch recorded them)")
        out += [f"  settings problem: {p}" for p in self.problems]
        return out

    def console_line(self, run_state: str | None = None) -> str | None:
        """The console's one line when re-judged (None otherwise): "re-judged at TTFT <= 1000 ms (the flags
        given); the run was judged at TTFT <= 50 ms: FAIL; weaker than the run's: exit 3"."""
        if not self.changes:
            return None
        lines = self.lines(run_state)
        return lines[0] + ("; weaker than the run's settings: exit 3" if self.weaker else "")

    def to_dict(self, run_state: str | None = None) -> dict:
        """The ``verdict_settings`` object of `report --json` and the others (docs/statistics.md)."""
        return {
            "origin": self.origin,
            "run": None if self.run is None else {f: self.run.get(f) for f in self.fields},
            "judged_at": {f: self.effective.get(f) for f in self.fields},
            "rejudged": self.rejudged,
            "weaker": bool(self.weaker),
            "changes": [c.to_dict() for c in self.changes],
            "unstated": list(self.unstated),
            "run_verdict": run_state if self.rejudged else None,
            "problems": list(self.problems),
            "lines": self.lines(run_state),
        }


def _order(names: Iterable[str]) -> list[str]:
    s = set(names)
    return [f for f in FIELDS if f in s]


def resolve(fs: FileSettings, at: JudgeAt) -> Resolution:
    """What a file of settings ``fs`` is judged at when a reader asks ``at`` (see the module's rule)."""
    over = at.given | at.common
    flags = at.values.values()
    stated = dict(fs.values)
    eff: dict[str, Any] = {}
    for f in FIELDS:
        eff[f] = flags[f] if (f in over or f not in stated) else stated[f]
    effective = VerdictSettings.of(eff)
    if fs.origin == NO_SETTINGS:
        return Resolution(NO_SETTINGS, None, effective, (), tuple(at.fields), fs.problems, at.fields, over)
    run = VerdictSettings.of({**flags, **stated})
    changes = []
    for f in at.fields:
        if f in stated and f in over and stated[f] != eff[f]:
            changes.append(Change(f, stated[f], eff[f], is_weaker(f, stated[f], eff[f], run, effective),
                                  BY_FLAG if f in at.given else BY_COMMON))
    unstated = tuple(f for f in at.fields if f not in stated)
    return Resolution(fs.origin, run, effective, tuple(changes), unstated, fs.problems, at.fields, over)


def settings_exit(code: int, res: Resolution | None) -> tuple[int, str | None]:
    """The exit rule: ``code`` (the re-judged verdict's) when the re-judgement is at least as strict on every
    setting, else 3 with the reason."""
    if res is None or not res.weaker:
        return int(code), None
    return int(ExitCode.INSUFFICIENT), f"{WEAKER} ({', '.join(c.why_weaker() for c in res.weaker)}): exit 3"


def worst_exit(code: int, resolutions: Iterable[tuple[str, Resolution | None]]) -> tuple[int, list[str]]:
    """``settings_exit`` over several files (``(source, resolution)``): 3 when any is re-judged weaker."""
    why = []
    for src, res in resolutions:
        c, w = settings_exit(code, res)
        if w:
            why.append(f"{src}: {w}")
    return (int(ExitCode.INSUFFICIENT), why) if why else (int(code), [])


# ------------------------------------------------------------------ several files: one setting


def _strictest(name: str, vals: Sequence[Any]) -> Any:
    if name in SLO_FIELDS:
        on = [v for v in vals if v is not None]
        return min(on) if on else None  # an SLO any file judged is judged, at its lowest threshold
    if name == "ttft_of":
        return "answer" if "answer" in vals else vals[0]
    if name in ("target", "min_window_s"):
        return max(vals)
    if name == "alpha":
        return min(vals)
    if name == "min_requests":
        on = [v for v in vals if v is not None]
        return max(on) if on else None
    if name == "required_level":
        on = [v for v in vals if v is not None]
        return max(on) if on else None
    raise KeyError(name)


def common_values(files: Sequence[FileSettings], at: JudgeAt) -> JudgeAt:
    """Several files judged together (`accept`, `plan`, `compare`): per setting the user did not give, when the
    files would be judged at different values (each at its own, or at the flags where it states none), all are
    judged at the strictest of them, said in each file's re-judgement. Returns ``at`` with those settings common."""
    if len(files) < 2:
        return at
    per_file = [resolve(fs, JudgeAt(at.values, at.given, frozenset(), at.fields)).effective for fs in files]
    common: dict[str, Any] = {}
    for f in at.fields:
        if f in at.given:
            continue
        vals = [vs.get(f) for vs in per_file]
        if any(v != vals[0] for v in vals[1:]):
            common[f] = _strictest(f, vals)
    if not common:
        return at
    values = VerdictSettings.of({**at.values.values(), **common})
    return JudgeAt(values, at.given, frozenset(common), at.fields)
