"""Acceptance-grade settings: which acceptance settings differ from their defaults, and which are weaker than
a stated floor (standard library only).

The defaults' one home is ``tui.core.monitor.MonitorConfig`` (the argparse options in ``tui/cli/options.py``
state the same). Settings weaker than a floor stay allowed for quick checks: `report` / `run` may still PASS
and exit 0, marked "PASS (not acceptance-grade: window 0 min, alpha 0.5)"; `accept` never says "ready" on them.
Rolling-window settings are views, not acceptance settings. See docs/statistics.md, "Acceptance-grade settings".
"""

from __future__ import annotations

from tui.core.monitor import MonitorConfig
from tui.core.verdict import MixtureTest

ALPHA_FLOOR = 0.1  # an error level above this is not acceptance-grade
MIN_WINDOW_FLOOR_S = 60.0  # a minimum observation window under 1 minute is not acceptance-grade


def _g(v: float) -> str:
    return f"{v:g}"


def changed_settings(cfg: MonitorConfig) -> list[str]:
    """Every acceptance setting of ``cfg`` that differs from its default, named with its value."""
    d = MonitorConfig()
    out: list[str] = []
    if cfg.slo_ttft_ms != d.slo_ttft_ms:
        out.append(f"SLO {_g(cfg.slo_ttft_ms)} ms")
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
    """Why ``cfg`` is not acceptance-grade (empty: it is): alpha above ALPHA_FLOOR, a window under
    MIN_WINDOW_FLOOR_S, a minimum request count below what the verdict test needs (MixtureTest)."""
    out: list[str] = []
    if cfg.min_window_s < MIN_WINDOW_FLOOR_S:
        out.append(f"window {_g(cfg.min_window_s / 60.0)} min")
    if cfg.alpha > ALPHA_FLOOR:
        out.append(f"alpha {_g(cfg.alpha)}")
    if cfg.min_requests is not None:
        need = MixtureTest(cfg.target, cfg.alpha).min_requests_to_pass()
        if cfg.min_requests < need:
            out.append(f"min requests {cfg.min_requests} (the test needs {need})")
    return out


def grade_label(state: str, cfg: MonitorConfig) -> str:
    """The verdict as a line shows it: "PASS (not acceptance-grade: window 0 min, alpha 0.5)" when the settings
    are below a floor, the state alone otherwise."""
    weak = acceptance_grade(cfg)
    return f"{state} (not acceptance-grade: {', '.join(weak)})" if weak and state == "PASS" else state
