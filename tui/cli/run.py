"""`servewatch run`: a headless load test against a server, recorded, then the report on the record file.

    servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos
    servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300
    servewatch run --url http://127.0.0.1:8080 --trace azure.csv --trace-window 0-600 --trace-speed 2

Exit codes: those of the report (0 PASS, 1 FAIL, 3 insufficient/undecided); 2 for bad usage or a
server that cannot be reached; 130 after Ctrl-C and 143 after SIGTERM (sending stopped, the record sealed, the
partial verdict printed first). The flags, the settings built from them and the recorded run are shared
with `live` and `sweep` (:mod:`tui.cli.loadtest`); the report is `report`'s (:mod:`tui.cli.reporting`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.cli.loadtest import LoadSettings, config_or_usage, record_run, say
from tui.cli.options import details_flag, epilog, percentiles_flag

EPILOG = epilog("servewatch run --url http://127.0.0.1:8080 --concurrency 1,2,4,8 --output-tokens 64 --ignore-eos",
                "servewatch run --url https://host/v1 --rate 0.5,1,2 --arrival gamma --burstiness 2 --duration 300",
                "servewatch run --url http://127.0.0.1:8080 --trace azure.csv --trace-window 0-600 --trace-speed 2",
                codes="exit codes: those of the report (0 PASS, 1 FAIL, 3 INSUFFICIENT_WINDOW or UNDECIDED); "
                      "2 bad usage or a server that cannot be reached; 130 Ctrl-C, 143 SIGTERM (record sealed, "
                      "partial verdict printed)")


@dataclass(frozen=True, kw_only=True)
class RunSettings(LoadSettings):
    """`servewatch run`: the load flags, and the closing report's length."""

    DESCRIPTION = "Headless load test against a server, recorded, then the report on the record file."
    EPILOG = EPILOG

    details: bool = details_flag()  # the closing report: short by default, --details the long one
    percentiles: tuple[float, ...] | None = percentiles_flag()


def run(settings: RunSettings) -> int:
    """`servewatch run`."""
    cfg = config_or_usage(settings)
    recorded = record_run(cfg)
    if recorded.failed is not None:
        return recorded.failed
    from tui.cli.reporting import ReportSettings, run_report
    from tui.sources.evidence_reader import LAST_RUN

    say("")
    assert cfg.record is not None  # record_run named it
    # the record file may hold earlier runs (appended): the verdict is on this one, at the run's own flags
    report = ReportSettings(file=cfg.record, run=LAST_RUN, details=settings.details,
                            acceptance=settings.acceptance, budget=settings.budget)
    code = run_report(report, default_budget=False)  # the partial verdict of a stopped run too
    return recorded.stop_code(code)  # stopped by Ctrl-C / SIGTERM: 130 / 143 after the report


__all__ = ["RunSettings", "run"]
