"""The Monitor's settings (``MonitorConfig``), and the verdict settings they hold (``config_at``, ``settings_of``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import tui.core.defaults as defaults
import tui.core.evidence as evidence
from tui.core.slos import Slos
from tui.core.verdict_settings import (
    VerdictSettings,
)

GIB = 2**30
EVIDENCE_CAP = evidence.EVIDENCE_CAP
SERIES_LEN = 240
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class MonitorConfig:
    target: float = defaults.TARGET
    alpha: float = defaults.ALPHA
    min_window_s: float = defaults.MIN_WINDOW_S
    min_requests: int | None = None  # default: the fewest requests with which PASS is possible
    rolling_s: float = defaults.ROLLING_S
    rolling_n: int | None = None  # when set, the rolling window is the last N requests instead
    # The one duplicate rule (tui.core.evidence.Duplicates): a request id seen again, or the send, first-token and
    # end times of an earlier request under another id, is an input problem: counted once, named, and it forbids
    # PASS (a file with each request repeated ten times must not reach PASS on a tenth of the evidence). The load
    # generator makes ids unique by construction and turns this off so a soak's memory stays flat.
    check_duplicate_ids: bool = True
    recent_rows: int = defaults.RECENT_ROWS
    bucket_s: float = defaults.BUCKET_S  # sparkline bucket width (record time)
    batch_s: float = defaults.BATCH_S  # shortest batch length of the dependence correction (also x2, x4, x8)
    # every SLO a request must meet to be good (tui.core.slos: the table, the limits in force); default: TTFT alone
    slos: Slos = Slos()

    def __post_init__(self) -> None:
        if not 0.0 < self.target < 1.0:
            raise ValueError("target must be a fraction between 0 and 1 (for example 0.95)")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be between 0 and 1 (for example 0.05)")
        if self.min_window_s < 0:
            raise ValueError("min_window_s must be >= 0")


def config_at(cfg: MonitorConfig, vs: VerdictSettings) -> MonitorConfig:
    """``cfg`` with the verdict settings ``vs`` (``tui.core.verdict_settings``); the views (rolling window, ...)
    kept."""
    s = vs.slos
    return dataclasses.replace(cfg, slos=s, target=vs.target, alpha=vs.alpha, min_window_s=vs.min_window_s,
                               min_requests=vs.min_requests)


def settings_of(cfg: MonitorConfig, required_level: float | None = None) -> VerdictSettings:
    """The verdict settings of ``cfg`` (and the required level): what a load command writes into its header."""
    return VerdictSettings(slos=cfg.slos, target=cfg.target, alpha=cfg.alpha, min_window_s=cfg.min_window_s,
                           min_requests=cfg.min_requests, required_level=required_level)

