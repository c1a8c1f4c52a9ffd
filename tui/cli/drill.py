"""`servewatch drill`: how the service comes back from a spike, a crash or a lost replica (issue 39;
docs/recovery.md). One run in three phases at a steady load (open loop --rate R or closed loop --concurrency C, with
every workload and verdict flag of `run`): a baseline that must PASS, a disturbance (--spike KxDURATION,
--fault-cmd CMD at --fault-at, or --fault-manual marked by SIGUSR1), and the recovery at the same load; recorded
like `run`, then judged from the record file as `report` judges it.

    servewatch drill --url http://127.0.0.1:8080 --rate 2 --spike 3x:60s
    servewatch drill --url http://127.0.0.1:8080 --rate 1 --fault-cmd 'kill -9 $(pidof llama-server)' --rto 2m

Exit codes: 0 RECOVERED, 1 NOT RECOVERED, 3 INSUFFICIENT (no PASSing baseline, too little recovery time, an evidence
problem; also a RECOVERED on SYNTHETIC data); 2 bad usage or a server that cannot be reached; 130 / 143 after
Ctrl-C / SIGTERM (record sealed, the partial judgement printed first).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tui.cli.declare import block, switch
from tui.cli.drillopts import DrillFlags, judge_file, plan_from_args, print_drill, read_drill
from tui.cli.loadtest import TRACE_FLAGS, Load, LoadSettings, config_or_usage, record_run
from tui.cli.options import epilog
from tui.core.exitcodes import UsageError
from tui.core.redact import redact_url
from tui.core.textsafe import term

EPILOG = epilog("servewatch drill --url http://127.0.0.1:8080 --rate 2 --spike 3x:60s",
                "servewatch drill --url http://127.0.0.1:8080 --rate 1 --fault-cmd 'kill -9 $(pidof llama-server)' "
                "--rto 2m",
                "servewatch drill --url http://127.0.0.1:8080 --concurrency 4 --fault-manual --json",
                codes="exit codes: 0 RECOVERED, 1 NOT RECOVERED, 3 INSUFFICIENT (no PASSing baseline, too little "
                      "recovery time, an evidence problem; a RECOVERED on SYNTHETIC data); 2 bad usage or a server "
                      "that cannot be reached; 130 Ctrl-C, 143 SIGTERM (record sealed, partial judgement printed)")


@dataclass(frozen=True, kw_only=True)
class DrillSettings(LoadSettings):
    """`servewatch drill`: the load flags of `run` (one level, no trace) and the drill's."""

    DESCRIPTION = ("A drill: baseline, disturbance and recovery at one steady load, recorded; the time to recover, "
                   "the impact and the verdict RECOVERED / NOT RECOVERED / INSUFFICIENT.")
    EPILOG = EPILOG

    load: Load = block(Load, omit=TRACE_FLAGS)
    drill: DrillFlags = block(DrillFlags, omit=("drill",))
    json: bool = switch("--json", help="print only the drill document as JSON on standard output (progress goes to "
                                       "stderr)")


def run(settings: DrillSettings) -> int:
    """`servewatch drill`."""
    from tui.core.runs import RunNotInFile, SeveralRuns
    from tui.sources.evidence_reader import LAST_RUN
    from tui.sources.importing import ImportProblem
    from tui.sources.load.drill import run_drill

    cfg = config_or_usage(settings)
    plan = plan_from_args(settings, cfg)
    as_json = settings.json

    def say(line: str) -> None:
        print(term(line), file=sys.stderr if as_json else sys.stdout, flush=True)

    if cfg.mode == "closed" and plan.kind != "spike":
        say("note: a fault drill in closed loop: while the server refuses requests each fails at once and the loops "
            "hold fewer than the concurrency in flight, which the delivered-load check names (no RECOVERED then); "
            "traffic arrives whatever the server does: --rate (open loop) models a fault (docs/recovery.md)")
    unit = cfg.level_unit
    intro = (f"servewatch drill: {redact_url(cfg.url)}, {unit} {cfg.levels[0]:g}; {plan.describe_disturbance()}")
    recorded = record_run(cfg, runner=lambda c, emit, progress: run_drill(c, plan, emit, progress), say=say,
                          intro=intro)
    if recorded.failed is not None:
        return recorded.failed
    say("")
    try:  # the record file may hold earlier runs (appended): the judgement is of this one
        mon, col = read_drill(cfg.record or "", cfg.monitor, pick_run=LAST_RUN,
                              judge_at=settings.acceptance.judge_at())
    except OSError as exc:
        raise UsageError(f"cannot read {cfg.record}: {exc.strerror or exc}") from None
    except (SeveralRuns, RunNotInFile, ImportProblem) as exc:
        raise UsageError(str(exc)) from None
    if not col.active:
        raise UsageError(f"{cfg.record}: the last run is not a drill (the file was written to by another run)")
    doc = judge_file(mon, col)
    print_drill(doc, as_json)
    return recorded.stop_code(int(doc["drill"]["exit"]["code"]))
