"""Token-length distributions of ``--input-tokens`` / ``--output-tokens``: parsing, drawing, the header block.

The forms (:func:`parse_lengths`):

- ``N``: fixed, every request asks N tokens;
- ``A-B``: uniform whole numbers A..B inclusive, the form servewatch always had. It keeps its old draws: the load
  generator draws it from one sequential stream per runner (``random.Random(f"{seed}:lengths")``), so a run with the
  same seed asks the same lengths as before (with ``--workers`` each worker has its own stream, as before);
- ``uniform:A-B``: the same distribution, drawn per request (below), so a split over workers asks what one process asks;
- ``normal:MEAN,SD`` and ``lognormal:MEDIAN,SIGMA`` (sigma of the natural log of the length), each optionally
  followed by its clip bounds ``[LO-HI]``, e.g. ``normal:400,100[50-800]``. A draw is rounded to a whole number and
  clamped to the bounds (the default bounds: ``defaults.LENGTH_CLIP_MIN``-``defaults.LENGTH_CLIP_MAX``), so the
  bounds hold a little extra mass; they are never exceeded.

Per-request draws (:func:`draw_at`) depend only on (seed, stream, key): the key names the request's place in the
load (its step and its index in the step), never which process sends it, and the two uniforms of one draw come
from BLAKE2b of that text (stable across Python versions and machines, about a microsecond each).
Standard library only.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import tui.core.defaults as defaults

Kind = Literal["fixed", "uniform", "normal", "lognormal"]
KINDS: tuple[Kind, ...] = ("fixed", "uniform", "normal", "lognormal")

FORMS = "N, A-B, uniform:A-B, normal:MEAN,SD[LO-HI], lognormal:MEDIAN,SIGMA[LO-HI]"


@dataclass(frozen=True)
class LengthDist:
    """One token-length distribution. ``a``/``b``: fixed N (both N), uniform A and B, normal mean and sd,
    lognormal median and sigma; ``lo``/``hi``: the bounds every draw lies in; ``legacy``: the ``A-B`` form
    (drawn from the runner's sequential stream); ``given``: the text as the user wrote it."""

    kind: Kind
    a: float
    b: float
    lo: int
    hi: int
    legacy: bool = False
    given: str = ""

    @property
    def bounds(self) -> tuple[int, int]:
        return (self.lo, self.hi)

    @property
    def sequential(self) -> bool:
        """Drawn from the runner's sequential stream (the ``A-B`` form), not per request."""
        return self.legacy and self.kind == "uniform"

    def typical_max(self) -> int:
        """A length few draws exceed (the bound, or about the 99.9th percentile when that is lower): what the
        prompt builder checks its calibration at."""
        if self.kind == "normal":
            q = self.a + 3.1 * self.b
        elif self.kind == "lognormal":
            q = self.a * math.exp(3.1 * self.b)
        else:
            return self.hi
        return max(self.lo, min(self.hi, round(q)))


def _num(text: str, what: str, given: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{what} is not a number in {given!r} (forms: {FORMS})") from None
    if not math.isfinite(v):
        raise ValueError(f"{what} must be finite in {given!r}")
    return v


def _whole(text: str, what: str, given: str) -> int:
    s = text.strip()
    if not re.fullmatch(r"\d+", s):
        raise ValueError(f"{what} must be a whole number in {given!r} (forms: {FORMS})")
    return int(s)


def _range(text: str, given: str) -> tuple[int, int]:
    lo_s, sep, hi_s = text.partition("-")
    if not sep:
        raise ValueError(f"expected A-B in {given!r} (forms: {FORMS})")
    lo, hi = _whole(lo_s, "A", given), _whole(hi_s, "B", given)
    if not 1 <= lo <= hi:
        raise ValueError(f"expected 1 <= A <= B in {given!r}")
    return lo, hi


def parse_lengths(text: str) -> LengthDist:
    """The distribution ``text`` names (see the module docstring); ValueError with a one-line reason otherwise."""
    given = str(text).strip()
    s = given.replace(" ", "")
    kind, colon, rest = s.partition(":")
    if not colon:
        if "-" in s:
            lo, hi = _range(s, given)
            return LengthDist("uniform" if lo < hi else "fixed", lo, hi, lo, hi, legacy=lo < hi, given=given)
        n = _whole(s, "N", given)
        if n < 1:
            raise ValueError(f"a length must be >= 1, got {given!r}")
        return LengthDist("fixed", n, n, n, n, given=given)
    kind = kind.lower()
    if kind == "uniform":
        lo, hi = _range(rest, given)
        return LengthDist("uniform", lo, hi, lo, hi, given=given)
    if kind not in ("normal", "lognormal"):
        raise ValueError(f"unknown length distribution {kind!r} in {given!r} (forms: {FORMS})")
    m = re.fullmatch(r"([^,\[\]]+),([^,\[\]]+)(?:\[([^\]]*)\])?", rest)
    if m is None:
        raise ValueError(f"expected {kind}:{'MEAN,SD' if kind == 'normal' else 'MEDIAN,SIGMA'} with optional "
                         f"[LO-HI] in {given!r}")
    a = _num(m.group(1), "MEAN" if kind == "normal" else "MEDIAN", given)
    b = _num(m.group(2), "SD" if kind == "normal" else "SIGMA", given)
    if kind == "normal" and (a <= 0 or b < 0):
        raise ValueError(f"normal needs MEAN > 0 and SD >= 0 in {given!r}")
    if kind == "lognormal" and (a <= 0 or b < 0):
        raise ValueError(f"lognormal needs MEDIAN > 0 and SIGMA >= 0 in {given!r}")
    lo, hi = (defaults.LENGTH_CLIP_MIN, defaults.LENGTH_CLIP_MAX) if m.group(3) is None else _range(m.group(3), given)
    return LengthDist(kind, a, b, lo, hi, given=given)  # type: ignore[arg-type]


def _g(v: float) -> str:
    """The shortest text that reads back as ``v`` (``400`` rather than ``400.0``)."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def format_lengths(d: LengthDist) -> str:
    """The canonical text of ``d`` (``parse_lengths(format_lengths(d))`` is ``d`` but for ``given``)."""
    if d.kind == "fixed":
        return str(d.lo)
    if d.kind == "uniform":
        return f"{d.lo}-{d.hi}" if d.legacy else f"uniform:{d.lo}-{d.hi}"
    return f"{d.kind}:{_g(d.a)},{_g(d.b)}[{d.lo}-{d.hi}]"


def clamp(d: LengthDist, x: float) -> int:
    """``x`` rounded to a whole number of tokens and clamped to the bounds."""
    if not math.isfinite(x):
        return d.hi if x > 0 else d.lo
    return min(d.hi, max(d.lo, round(x)))


def draw_from(d: LengthDist, u1: float, u2: float) -> int:
    """The length of two independent uniforms ``u1`` in (0, 1], ``u2`` in [0, 1): uniform by inversion, normal and
    lognormal by Box-Muller."""
    if d.kind == "fixed" or d.lo == d.hi:
        return d.lo
    if d.kind == "uniform":
        return min(d.hi, d.lo + int((1.0 - u1) * (d.hi - d.lo + 1)))
    z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
    if d.kind == "normal":
        return clamp(d, d.a + d.b * z)
    return clamp(d, d.a * math.exp(min(700.0, d.b * z)))


_SCALE = 1.0 / (1 << 53)


def uniforms(seed: Any, key: str) -> tuple[float, float]:
    """Two independent uniforms, in (0, 1] and [0, 1), from BLAKE2b of ``seed|key`` alone (53 bits each)."""
    h = hashlib.blake2b(f"{seed}|{key}".encode(), digest_size=16).digest()
    n1 = int.from_bytes(h[:8], "big") >> 11
    n2 = int.from_bytes(h[8:], "big") >> 11
    return (n1 + 1) * _SCALE, n2 * _SCALE


def draw_at(d: LengthDist, seed: Any, key: str) -> int:
    """The length of the request ``key`` names under ``seed``: a function of (seed, key) alone."""
    if d.kind == "fixed" or d.lo == d.hi:
        return d.lo
    return draw_from(d, *uniforms(seed, key))


def header_block(d: LengthDist) -> dict:
    """The run header's ``load.input_tokens`` / ``load.output_tokens``: ``min``/``max`` (the bounds, as old headers
    have them), ``given`` (the user's text) and ``distribution`` (kind, parameters, bounds, how it is drawn)."""
    dist: dict[str, Any] = {"kind": d.kind, "min": d.lo, "max": d.hi}
    if d.kind == "normal":
        dist.update(mean=d.a, sd=d.b)
    elif d.kind == "lognormal":
        dist.update(median=d.a, sigma=d.b)
    if d.kind in ("normal", "lognormal"):
        dist["clip"] = "rounded, then clamped to [min, max]"
    if d.kind != "fixed":
        dist["draw"] = ("sequential per load process (the A-B form, as before)" if d.sequential
                        else "per request from (seed, step, index): the same with any split over workers")
    return {"min": d.lo, "max": d.hi, "given": d.given or format_lengths(d), "distribution": dist}


def from_header(v: Any) -> LengthDist | None:
    """The distribution a header's ``load.input_tokens`` describes: this module's block, an old ``{"min", "max"}``
    (uniform, or fixed when equal), an old ``[min, max]`` pair or a bare N; None when it is none of these."""
    if isinstance(v, Mapping):
        dist = v.get("distribution")
        if isinstance(dist, Mapping):
            given = v.get("given")
            try:
                parsed = parse_lengths(str(given)) if isinstance(given, str) and given else None
            except ValueError:
                parsed = None
            if parsed is not None:
                return parsed
        lo, hi = v.get("min"), v.get("max")
    elif isinstance(v, (list, tuple)) and len(v) == 2:
        lo, hi = v
    else:
        lo = hi = v
    if not (isinstance(lo, int) and isinstance(hi, int)) or isinstance(lo, bool) or isinstance(hi, bool):
        return None
    if not 1 <= lo <= hi:
        return None
    return parse_lengths(f"{lo}-{hi}" if lo < hi else str(lo))
