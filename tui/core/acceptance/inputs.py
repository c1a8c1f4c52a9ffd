"""What the acceptance analysis takes (one analysed record file per :class:`RunInput`, the cost inputs), the
document's constants, and the small helpers every section uses (a field a record file may lack or get wrong is
unknown, never a crash).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.core.snapshot import Snapshot

SCHEMA = "servewatch.acceptance/1"
GIB = 2**30

READY = "ready for real traffic"
NOT_READY = "NOT ready for real traffic"

_MISSING = "not recorded"



@dataclass(frozen=True)
class RunInput:
    """One record file, analysed by the core Monitor."""

    source: str
    snapshot: Snapshot
    #: the token lengths the records show (``tui.core.token_counts.TokenTally.summary()``: ``input_tokens`` and
    #: ``output_tokens``, each {"min", "p50", "max"}); None: not computed (the load configuration says so)
    received: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CostInputs:
    gpu_hour_usd: float | None = None
    gpus: int | None = None
    tp: int | None = None  # --tp as given on the command line (else the budget's own)


# ------------------------------------------------------------------ small helpers


def _num(v: Any) -> float | None:
    """A finite number as a float, else None (unknown): wrong types, NaN, +-inf and integers too large for a
    float (``10**400`` in a record file)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _str(v: Any, limit: int = 200) -> str | None:
    if v is None:
        return None
    s = " ".join(str(v).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _fmt_level(level: float | None) -> str:
    return "-" if level is None else f"{level:g}"


def _pct(v: float | None, digits: int = 1) -> str:
    return "N/A" if v is None else f"{100 * v:.{digits}f}%"


def _f(v: float | None, digits: int = 2) -> str:
    return "N/A" if v is None else f"{v:.{digits}f}"


def _map(v: Any) -> Mapping[str, Any]:
    """``v`` when it is a mapping, else an empty one (a field a record file may lack or get wrong)."""
    return v if isinstance(v, Mapping) else {}


def _jsonable(x: Any) -> Any:
    """Replace non-finite floats (JSON cannot hold them) by strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _header_names(header: Mapping) -> list[str]:
    hdrs = header.get("headers")
    if isinstance(hdrs, Mapping):
        return sorted(str(k)[:60] for k in hdrs)
    if isinstance(hdrs, list):
        return sorted(str(k)[:60] for k in hdrs if isinstance(k, str))
    return []


def provenance(snap: Snapshot) -> str:
    """"synthetic", "measured" (a header that says synthetic: false) or "unknown" (no header)."""
    if not snap.header:
        return "unknown"
    return "synthetic" if snap.synthetic else "measured"
