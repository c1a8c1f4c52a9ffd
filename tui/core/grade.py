"""Acceptance-grade settings: which acceptance settings differ from their defaults, and which are weaker than
the acceptance floors (standard library only).

The defaults' one home is ``tui.core.defaults`` (``tui.core.monitor.MonitorConfig`` and the argparse options in
``tui/cli/options.py`` read them). Evidence is acceptance-grade when it was judged over a window of at least the
default 10 minutes, at a target of at least 0.9, at an error level of at most the default 0.05, and with a minimum
request count no lower than the verdict test needs (issue 35, "Floors"). One definition, two uses:

- `accept` and `plan` (and a future `select`: the commands that say "ready", size a fleet or choose) need it:
  weaker evidence is still computed and printed, and exits 3 ("not acceptance-grade: window 1 min < 10 min");
- `report`, `run`, `replay`, `compare` (and a future `drill`) are quick checks too: a PASS on weaker settings is
  still PASS, exit 0, marked "PASS (not acceptance-grade: window 1 min < 10 min)" and "[settings not default: ...]".

A target below 0.5 is bad usage everywhere (exit 2: ``tui.core.verdict_settings.TARGET_USAGE_FLOOR``). Rolling
-window settings are views, not acceptance settings. See docs/statistics.md, "Acceptance-grade settings".
"""

from __future__ import annotations

from typing import Final

import tui.core.defaults as D
from tui.core.monitor import MonitorConfig
from tui.core.verdict import MixtureTest

#: the acceptance floors: a window of at least the default, a target of at least 0.9, alpha at most the default
MIN_WINDOW_FLOOR_S: Final = D.MIN_WINDOW_S
TARGET_FLOOR: Final = 0.9
ALPHA_FLOOR: Final = D.ALPHA


def _g(v: float) -> str:
    return f"{v:g}"


def changed_settings(cfg: MonitorConfig) -> list[str]:
    """Every acceptance setting of ``cfg`` that differs from its default, named with its value."""
    d = MonitorConfig()
    out: list[str] = []
    s = cfg.slos
    if s.ttft_ms is None:
        out.append("TTFT SLO off")
    elif s.ttft_ms != d.slos.ttft_ms:
        out.append(f"SLO {_g(s.ttft_ms)} ms")
    for name, v in (("TPOT", s.tpot_ms), ("ITL", s.itl_ms), ("E2E", s.e2e_ms)):
        if v is not None:
            out.append(f"{name} SLO {_g(v)} ms")
    if s.ttft_of != d.slos.ttft_of:
        out.append(f"TTFT of {s.ttft_of}")
    if cfg.target != d.target:
        out.append(f"target {_g(cfg.target)}")
    if cfg.alpha != d.alpha:
        out.append(f"alpha {_g(cfg.alpha)}")
    if cfg.min_window_s != d.min_window_s:
        out.append(f"window {_g(cfg.min_window_s / 60.0)} min")
    if cfg.min_requests != d.min_requests:
        out.append(f"min requests {cfg.min_requests}")
    return out


def acceptance_grade(cfg: MonitorConfig) -> list[str]:
    """Why ``cfg`` is not acceptance-grade (empty: it is), each with its floor: "window 1 min < 10 min",
    "target 0.5 < 0.9", "alpha 0.1 > 0.05", "min requests 1 < 3 (what the test needs)"."""
    out: list[str] = []
    if cfg.min_window_s < MIN_WINDOW_FLOOR_S:
        out.append(f"window {_g(cfg.min_window_s / 60.0)} min < {_g(MIN_WINDOW_FLOOR_S / 60.0)} min")
    if cfg.target < TARGET_FLOOR:
        out.append(f"target {_g(cfg.target)} < {_g(TARGET_FLOOR)}")
    if cfg.alpha > ALPHA_FLOOR:
        out.append(f"alpha {_g(cfg.alpha)} > {_g(ALPHA_FLOOR)}")
    if cfg.min_requests is not None:
        need = MixtureTest(cfg.target, cfg.alpha).min_requests_to_pass()
        if cfg.min_requests < need:
            out.append(f"min requests {cfg.min_requests} < {need} (what the test needs)")
    return out


def grade_label(state: str, cfg: MonitorConfig) -> str:
    """The verdict as a line shows it: "PASS (not acceptance-grade: window 0 min < 10 min)" when the settings
    are below a floor, the state alone otherwise."""
    weak = acceptance_grade(cfg)
    return f"{state} (not acceptance-grade: {', '.join(weak)})" if weak and state == "PASS" else state
