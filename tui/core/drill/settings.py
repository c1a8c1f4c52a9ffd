"""What a drill is asked to do (``DrillPlan``): the disturbance, the phases' lengths, the steps that carry them, and
the recovery rule's settings; written into the run header's ``load.drill`` block and read back from it, so every
reader judges a drill file at the settings it was run with.

The steps (``planned_steps``): the baseline is the step (L, 1) at the drill's level L; a spike is its own step at
its own level (K x L, round 1), so the delivered-load and completeness checks hold it like any step; a fault command
runs during the step (L, 2); the recovery is the next round at L: (L, 2) after a spike or an operator's act, (L, 3)
after a fault command. An operator's act (``fault_manual``) is an instant with no step of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tui.core.defaults as D
from tui.core.phases import (
    BASELINE,
    DISTURBANCE,
    DISTURBANCE_KINDS,
    FAULT_CMD,
    FAULT_MANUAL,
    RECOVERY,
    SPIKE,
    fmt_duration,
)
from tui.core.phases import is_drill_header as is_drill_header

#: the month an error budget is counted over (the acceptance report's burn-rate rules use the same 30 days)
MONTH_S = 30 * 24 * 3600.0


@dataclass(frozen=True)
class PlannedStep:
    """One step of a drill: the phase it carries and its (level, round)."""

    phase: str
    level: float
    round: int

    @property
    def key(self) -> tuple[float, int]:
        return (float(self.level), self.round)


@dataclass(frozen=True)
class DrillPlan:
    """A drill's settings (seconds). ``level``/``mode``: the steady load (req/s in open loop, concurrency in closed
    loop); ``fault_at_s``: when a fault command starts, from the baseline's start (at least the baseline);
    ``window_s``/``step_s``: the rolling window of the recovery rule and its step; ``hold_s``: how long after the
    recovery point the requests must PASS; ``rto_s``: the recovery time objective."""

    kind: str
    level: float
    mode: str
    baseline_s: float
    recovery_s: float
    window_s: float = D.DRILL_RECOVERY_WINDOW_S
    step_s: float = D.DRILL_STEP_S
    hold_s: float = D.MIN_WINDOW_S
    rto_s: float = D.MIN_WINDOW_S
    spike_factor: float | None = None
    spike_s: float | None = None
    fault_cmd: str | None = None
    fault_at_s: float | None = None
    manual_wait_s: float = D.DRILL_MANUAL_WAIT_S
    requests_per_month: float | None = None

    def validate(self) -> None:
        """Raises ValueError naming the flag."""
        if self.kind not in DISTURBANCE_KINDS:
            raise ValueError("give one disturbance: --spike KxDURATION, --fault-cmd CMD or --fault-manual")
        if self.mode not in ("open", "closed"):
            raise ValueError("a drill runs at one load: --rate R (open loop) or --concurrency C (closed loop)")
        if not (_pos(self.level)):
            raise ValueError("the drill's load must be one positive --rate or --concurrency")
        for name, v in (("--baseline-minutes", self.baseline_s), ("--recovery-minutes", self.recovery_s),
                        ("--recovery-window-s", self.window_s), ("--step-s", self.step_s),
                        ("--hold-minutes", self.hold_s), ("--rto", self.rto_s), ("manual wait", self.manual_wait_s)):
            if not _pos(v):
                raise ValueError(f"{name} must be above 0")
        if self.step_s > self.window_s:
            raise ValueError("--step-s must be at most --recovery-window-s (the windows would leave gaps)")
        if self.window_s > self.recovery_s:
            raise ValueError("--recovery-window-s must fit in the recovery phase (--recovery-minutes)")
        if self.kind == SPIKE:
            if not (_pos(self.spike_factor) and self.spike_factor > 1 and _pos(self.spike_s)):  # type: ignore[operator]
                raise ValueError("--spike needs a factor above 1 and a duration, such as 3x:60s")
            if self.mode == "closed" and self.spike_level <= self.level:
                raise ValueError(f"--spike {self.spike_factor:g}x at concurrency {self.level:g} adds no request in "
                                 "flight: use a larger factor")
        if self.kind == FAULT_CMD:
            if not (isinstance(self.fault_cmd, str) and self.fault_cmd.strip()):
                raise ValueError("--fault-cmd needs a command")
            if self.fault_at_s is not None and not (_pos(self.fault_at_s) and self.fault_at_s >= self.baseline_s):
                raise ValueError("--fault-at must be at least the baseline (--baseline-minutes): the fault comes "
                                 "after a steady state")
        if self.requests_per_month is not None and not _pos(self.requests_per_month):
            raise ValueError("--requests-per-month must be above 0")

    @property
    def spike_level(self) -> float:
        """The spike's step level: K x L (closed loop: rounded to whole requests in flight)."""
        k = float(self.spike_factor or 1.0)
        if self.mode == "closed":
            return float(max(1, round(k * self.level)))
        return round(k * self.level, 6)

    @property
    def fault_start_s(self) -> float:
        """When the disturbance starts, from the baseline's start (an operator's act: at the earliest)."""
        if self.kind == FAULT_CMD and self.fault_at_s is not None:
            return self.fault_at_s
        return self.baseline_s

    def planned_steps(self) -> list[PlannedStep]:
        """The drill's steps in the order it runs them (see the module doc)."""
        L = float(self.level)
        steps = [PlannedStep(BASELINE, L, 1)]
        if self.kind == SPIKE:
            steps += [PlannedStep(DISTURBANCE, self.spike_level, 1), PlannedStep(RECOVERY, L, 2)]
        elif self.kind == FAULT_CMD:
            steps += [PlannedStep(DISTURBANCE, L, 2), PlannedStep(RECOVERY, L, 3)]
        else:
            steps += [PlannedStep(RECOVERY, L, 2)]
        return steps

    def step_of(self, phase: str) -> PlannedStep | None:
        return next((s for s in self.planned_steps() if s.phase == phase), None)

    def describe_disturbance(self) -> str:
        """"spike 3x for 60 s (30 req/s)", "fault command at 2 min: kill -9 ...", "the operator's act (marked)"."""
        unit = "req/s" if self.mode == "open" else "concurrency"
        if self.kind == SPIKE:
            return (f"spike {self.spike_factor:g}x for {fmt_duration(self.spike_s)} "
                    f"({unit} {self.spike_level:g})")
        if self.kind == FAULT_CMD:
            return f"fault command at {fmt_duration(self.fault_start_s)}: {self.fault_cmd}"
        return "the operator's act, marked (a key in the console, SIGUSR1 headless)"

    def block(self) -> dict[str, Any]:
        """The run header's ``load.drill`` block (docs/record-format.md)."""
        return {
            "kind": self.kind,
            "level": self.level,
            "mode": self.mode,
            "baseline_s": self.baseline_s,
            "recovery_s": self.recovery_s,
            "recovery_window_s": self.window_s,
            "step_s": self.step_s,
            "hold_s": self.hold_s,
            "rto_s": self.rto_s,
            "spike": ({"factor": self.spike_factor, "duration_s": self.spike_s, "level": self.spike_level}
                      if self.kind == SPIKE else None),
            "fault": ({"command": self.fault_cmd, "at_s": self.fault_start_s} if self.kind == FAULT_CMD else None),
            "manual_wait_s": self.manual_wait_s if self.kind == FAULT_MANUAL else None,
            "requests_per_month": self.requests_per_month,
            "steps": [{"phase": s.phase, "level": s.level, "round": s.round} for s in self.planned_steps()],
        }


def _pos(v: object) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v > 0  # type: ignore[arg-type,operator]


def plan_from_header(header: Mapping) -> DrillPlan:
    """The DrillPlan a drill file's header states; ValueError (the problem in words) when it is not one a drill
    writes: a file whose drill settings cannot be read cannot be judged as a drill."""
    load = header.get("load") if isinstance(header, Mapping) else None
    b = load.get("drill") if isinstance(load, Mapping) else None
    if not isinstance(b, Mapping):
        raise ValueError("the run header's load.drill is not an object")
    spike_b, fault_b = b.get("spike"), b.get("fault")
    spike: Mapping = spike_b if isinstance(spike_b, Mapping) else {}
    fault: Mapping = fault_b if isinstance(fault_b, Mapping) else {}

    def num(v: object, what: str, required: bool = True) -> Any:
        if v is None and not required:
            return None
        if not _pos(v):
            raise ValueError(f"the run header's load.drill.{what} is not a positive number ({str(v)[:30]})")
        return float(v)  # type: ignore[arg-type]

    try:
        plan = DrillPlan(
            kind=str(b.get("kind")), level=num(b.get("level"), "level"), mode=str(b.get("mode")),
            baseline_s=num(b.get("baseline_s"), "baseline_s"), recovery_s=num(b.get("recovery_s"), "recovery_s"),
            window_s=num(b.get("recovery_window_s"), "recovery_window_s"), step_s=num(b.get("step_s"), "step_s"),
            hold_s=num(b.get("hold_s"), "hold_s"), rto_s=num(b.get("rto_s"), "rto_s"),
            spike_factor=num(spike.get("factor"), "spike.factor", b.get("kind") == SPIKE),
            spike_s=num(spike.get("duration_s"), "spike.duration_s", b.get("kind") == SPIKE),
            fault_cmd=fault.get("command") if isinstance(fault.get("command"), str) else None,
            fault_at_s=num(fault.get("at_s"), "fault.at_s", False),
            manual_wait_s=num(b.get("manual_wait_s"), "manual_wait_s", False) or D.DRILL_MANUAL_WAIT_S,
            requests_per_month=num(b.get("requests_per_month"), "requests_per_month", False),
        )
        plan.validate()
    except ValueError as exc:
        raise ValueError(f"the run header's drill settings cannot be used: {exc}") from None
    steps = b.get("steps")
    want = [{"phase": s.phase, "level": s.level, "round": s.round} for s in plan.planned_steps()]
    if steps != want:
        raise ValueError(f"the run header's drill steps ({str(steps)[:120]}) are not the steps its settings plan "
                         f"({want}): steps relabelled or settings edited")
    return plan


def default_plan_durations(window_s: float) -> dict[str, float]:
    """The durations a drill takes when not given: the baseline, the hold and the RTO the verdict's window, the
    recovery phase twice it."""
    return {"baseline_s": window_s, "recovery_s": 2.0 * window_s, "hold_s": window_s, "rto_s": window_s}
