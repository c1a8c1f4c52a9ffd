"""Where the evidence of one level stands, in one line (pure; for progress output).

The numbers are the monitor's own (``Monitor.verdict_for`` -> ``Verdict``): nothing is recomputed here.

    312 requests, 6:40 of the 10-min window, evidence 7.1 of 20 for PASS (0.0 for FAIL)
"""

from __future__ import annotations

from typing import Any


def _clock(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _window(seconds: float) -> str:
    minutes = seconds / 60.0
    return f"{minutes:g}-min" if minutes == int(minutes) else f"{minutes:.1f}-min"


def fmt_evidence(e: float) -> str:
    if e != e:
        return "n/a"
    if e >= 1e6:  # (also inf: the product overflowed) far past any threshold; the exact size says nothing more
        return "over 1e6"
    if e >= 1000:
        return f"{e:.3g}"
    return f"{e:.1f}"


def evidence_line(verdict: Any, min_window_s: float) -> str:
    """One line from a ``Verdict``: count (and the minimum while short of it), time in the window, evidence."""
    v = verdict
    n = int(getattr(v, "n", 0) or 0)
    parts = []
    need_n = int(getattr(v, "need_requests", 0) or 0)
    if need_n > 0:
        parts.append(f"{n} of the {n + need_n} requests needed")
    else:
        parts.append(f"{n} requests")
    elapsed = float(getattr(v, "elapsed_s", 0.0) or 0.0)
    if min_window_s > 0:
        if elapsed < min_window_s:
            parts.append(f"{_clock(elapsed)} of the {_window(min_window_s)} window")
        else:
            parts.append(f"{_clock(elapsed)} (the {_window(min_window_s)} window is covered)")
    thr = float(v.threshold)
    ev = f"evidence {fmt_evidence(float(v.e_pass))} of {thr:g} for PASS"
    if float(v.e_fail) > max(1.0, float(v.e_pass)):  # leaning towards FAIL: show that side too
        ev += f", {fmt_evidence(float(v.e_fail))} of {thr:g} for FAIL"
    parts.append(ev)
    line = ", ".join(parts)
    if v.state in ("PASS", "FAIL"):
        line += f": {v.state}"
    return line
