"""Think times of ``--think-time``: the seconds a session waits between one turn's end and its next turn's send.

The forms (:func:`parse_think_time`), seconds, fractional allowed:

- ``S``: fixed, every turn waits S seconds (``0``: none);
- ``uniform:A-B``: uniform on [A, B];
- ``normal:M,SD[LO-HI]`` and ``lognormal:MEDIAN,SIGMA[LO-HI]`` (sigma of the natural log), clamped to the bounds
  (default ``0``-``defaults.THINK_CLIP_MAX_S``);
- ``exponential:MEAN`` (clamped to the same default bounds).

A draw (:func:`draw_think`) depends only on (seed, key): the key names the turn's place in the load (step, session
index, turn), never which process runs it, so a split over workers waits what one process waits. Standard library
only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import tui.core.defaults as defaults
from tui.core.lengths import uniforms

ThinkKind = Literal["fixed", "uniform", "normal", "lognormal", "exponential"]

FORMS = "S, uniform:A-B, normal:M,SD[LO-HI], lognormal:MEDIAN,SIGMA[LO-HI], exponential:MEAN (seconds)"


@dataclass(frozen=True)
class ThinkDist:
    """One think-time distribution (seconds). ``a``/``b``: fixed S (both S), uniform A and B, normal mean and sd,
    lognormal median and sigma, exponential mean (``b`` 0); ``lo``/``hi``: the bounds every draw lies in."""

    kind: ThinkKind
    a: float
    b: float
    lo: float
    hi: float
    given: str = ""


def _num(text: str, what: str, given: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{what} is not a number in {given!r} (forms: {FORMS})") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{what} must be a finite number >= 0 in {given!r}")
    return v


def _bounds(text: str, given: str) -> tuple[float, float]:
    lo_s, sep, hi_s = text.partition("-")
    if not sep:
        raise ValueError(f"expected A-B in {given!r} (forms: {FORMS})")
    lo, hi = _num(lo_s, "A", given), _num(hi_s, "B", given)
    if lo > hi:
        raise ValueError(f"expected A <= B in {given!r}")
    return lo, hi


def parse_think_time(text: str) -> ThinkDist:
    """The distribution ``text`` names (see the module docstring); ValueError with a one-line reason otherwise."""
    given = str(text).strip()
    s = given.replace(" ", "")
    kind, colon, rest = s.partition(":")
    if not colon:
        v = _num(s, "S", given)
        return ThinkDist("fixed", v, v, v, v, given=given)
    kind = kind.lower()
    if kind == "uniform":
        lo, hi = _bounds(rest, given)
        return ThinkDist("uniform", lo, hi, lo, hi, given=given)
    default_hi = float(defaults.THINK_CLIP_MAX_S)
    if kind == "exponential":
        m = re.fullmatch(r"([^\[\]]+)(?:\[([^\]]*)\])?", rest)
        if m is None:
            raise ValueError(f"expected exponential:MEAN in {given!r}")
        mean = _num(m.group(1), "MEAN", given)
        lo, hi = (0.0, default_hi) if m.group(2) is None else _bounds(m.group(2), given)
        return ThinkDist("exponential", mean, 0.0, lo, hi, given=given)
    if kind not in ("normal", "lognormal"):
        raise ValueError(f"unknown think-time distribution {kind!r} in {given!r} (forms: {FORMS})")
    m = re.fullmatch(r"([^,\[\]]+),([^,\[\]]+)(?:\[([^\]]*)\])?", rest)
    if m is None:
        raise ValueError(f"expected {kind}:{'M,SD' if kind == 'normal' else 'MEDIAN,SIGMA'} with optional [LO-HI] "
                         f"in {given!r}")
    a = _num(m.group(1), "M" if kind == "normal" else "MEDIAN", given)
    b = _num(m.group(2), "SD" if kind == "normal" else "SIGMA", given)
    if kind == "lognormal" and a <= 0:
        raise ValueError(f"lognormal needs MEDIAN > 0 in {given!r}")
    lo, hi = (0.0, default_hi) if m.group(3) is None else _bounds(m.group(3), given)
    return ThinkDist(kind, a, b, lo, hi, given=given)  # type: ignore[arg-type]




def draw_from(d: ThinkDist, u1: float, u2: float) -> float:
    """The think time of two independent uniforms ``u1`` in (0, 1], ``u2`` in [0, 1)."""
    if d.kind == "fixed" or d.lo == d.hi:
        return d.lo
    if d.kind == "uniform":
        x = d.lo + (1.0 - u1) * (d.hi - d.lo)
    elif d.kind == "exponential":
        x = -d.a * math.log(u1)
    else:
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        x = d.a + d.b * z if d.kind == "normal" else d.a * math.exp(min(700.0, d.b * z))
    return min(d.hi, max(d.lo, x))


def draw_think(d: ThinkDist, seed: Any, key: str) -> float:
    """The think time of the turn ``key`` names under ``seed``: a function of (seed, key) alone (its own stream:
    ``think|key``, apart from the length draws at the same key)."""
    if d.kind == "fixed" or d.lo == d.hi:
        return d.lo
    return draw_from(d, *uniforms(seed, "think|" + key))


def header_block(d: ThinkDist) -> dict:
    """The run header's ``load.sessions.think_time``: the text as given, the kind, its parameters and bounds."""
    dist: dict[str, Any] = {"kind": d.kind, "min_s": d.lo, "max_s": d.hi}
    if d.kind == "normal":
        dist.update(mean_s=d.a, sd_s=d.b)
    elif d.kind == "lognormal":
        dist.update(median_s=d.a, sigma=d.b)
    elif d.kind == "exponential":
        dist.update(mean_s=d.a)
    if d.kind != "fixed":
        dist["draw"] = "per turn from (seed, step, session index, turn): the same with any split over workers"
    return {"given": d.given or str(d.a), "unit": "s", "distribution": dist}
