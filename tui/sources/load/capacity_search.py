"""The capacity search's loop (`servewatch sweep --search`, issue 26): after the ladder, probe the middle of the
bracket until ``tui.core.search.plan_next`` says stop.

Each probe is a full step (every round, until decided, capped like the ladder's steps) run by the generator's own
step machinery (``run_probe``), recorded in the same record file with ``search_probe: true`` in its step records,
and judged by the same monitor; the bracket after each probe is recomputed from the monitor's level rows
(``rows()``), the rows every reader of the file gets back, so the search steers by the rule that reports it.
A probe whose round FAILs runs no further round (the level is FAIL whatever they say).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tui.core.search import NO_FAIL, NO_PASS, Plan, SearchSettings, plan_next, points_from_rows
from tui.core.snapshot import LevelRow
from tui.core.states import FAIL
from tui.core.textfmt import fmt_level


@dataclass
class SearchOutcome:
    """What the loop did: the levels probed and the plan it stopped on."""

    probed: list[float] = field(default_factory=list)
    last: Plan | None = None


async def run_search(settings: SearchSettings, mode: str, rounds: int, unit: str,
                     rows: Callable[[], Sequence[LevelRow]],
                     run_probe: Callable[[float, int, str], Awaitable[dict]],
                     say: Callable[[str], object]) -> SearchOutcome:
    """Probe until the plan stops; ``run_probe(level, round, label)`` runs one step and returns its end record."""
    out = SearchOutcome()
    integer = mode == "closed"
    while True:
        plan = plan_next(points_from_rows(rows(), mode), settings, integer, unit, tried=out.probed)
        out.last = plan
        if plan.level is None and plan.stop in (NO_PASS, NO_FAIL):
            say(f"search: no bracket, so no search: {plan.why}")
            return out
        if plan.level is None:
            br = plan.bracket
            where = (f"[{fmt_level(br.low.level)}, {fmt_level(br.high.level)}]" if br.low is not None
                     and br.high is not None else "none")
            say(f"search: stopped ({plan.stop}): {plan.why}; bracket {unit} {where}, {len(out.probed)} probes, "
                f"{plan.spent_s:.0f} s")
            return out
        level = plan.level
        out.probed.append(level)
        k = len(out.probed)
        lo, hi = plan.bracket.low, plan.bracket.high
        assert lo is not None and hi is not None
        for rnd in range(1, rounds + 1):
            label = (f"search probe {k}: {unit} {fmt_level(level)}, round {rnd} (bracket {fmt_level(lo.level)} to "
                     f"{fmt_level(hi.level)}; until PASS or FAIL)")
            end = await run_probe(level, rnd, label)
            if end.get("verdict") == FAIL:
                break
