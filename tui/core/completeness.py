"""Complete or not PASS (issue 35): what a servewatch load run's file must hold before any level of it can PASS.
Standard library only; the Monitor calls these from ``finish`` (the whole run read) and turns each sentence into a
``block_pass`` reason (a PASS becomes UNDECIDED with it; a FAIL stands). The one list, in words, is
docs/record-format.md "What a file must hold to PASS".

A **load run** is a run whose header comes from servewatch's own load commands (`run`, `live`, `sweep`): ``source.kind``
``run`` or ``trace``, or, in files written before the source block existed, a servewatch header that plans levels
(``load.levels``). SYNTHETIC files, imports (another tool's data: their own checks, ``tui.core.importers``) and watch
recordings (their own judge) are not load runs. A load run must hold:

- **its planned steps, in order** (``plan_problems``): one step ``end`` record per level of ``load.levels`` per round
  of ``load.rounds``, round by round, in the order the load generator runs them; fewer only when the last step
  present records why the ladder stopped (``stop``: a FAIL with ``--stop-on-fail``, or a lost load worker; a file
  written before stops were recorded: its last step FAILed and the header says ``stop_on_fail``), and that step's own
  request records agree (a stop on FAIL whose records do not FAIL explains nothing). The probes of
  ``sweep --search`` (``search_probe``, header ``load.search``) follow the ladder and are not planned.
- **well-formed step records**: a field of the wrong type makes the record a bad line (``tui.core.records.parse``),
  so its step is missing here, never a check skipped; an end record without its counts is named.
- **each step record agreeing with its request records** (``step_problems``): ``requests``, ``completed``,
  ``failed`` and the ``errors`` classes; the percentiles the load generator wrote (TTFT p50, send overhead or
  dispatch lateness p50 and p99, recomputed with the generator's own algorithm, ``tui.core.stepstats``, within
  ``PERCENTILE_ABS_TOL_MS`` plus 2.5 times ``percentiles_rel_error`` when either side is the histogram's); and its
  verdict (recomputed at the reader's settings, before any evidence problem: a verdict recorded as UNDECIDED
  "cannot PASS: ..." was a PASS held back).
- **its seal** (``seal_problem``): a run whose header starts a digest chain ends with its seal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tui.core.stepstats import PCT_REL_ERR, StepQuantiles, pct

LOAD_KINDS = ("run", "trace")
#: step percentiles: the writer stamps with perf_counter, the file holds epoch floats (about 0.5 us apart) and the
#: record rounds to 10 us: within this they agree
PERCENTILE_ABS_TOL_MS = 0.05
#: a plan of more steps than this is not enumerated (it cannot be a real run): named, forbids PASS
MAX_PLANNED_STEPS = 100_000
STOP_CAUSES = ("stop_on_fail", "degraded")
_VERDICTS = ("PASS", "FAIL", "UNDECIDED", "INSUFFICIENT_WINDOW")

Key = tuple[float | None, int]
NameOf = Callable[[float | None, int], str]


def is_load_run(header: Mapping | None) -> bool:
    """Whether ``header`` is the header of a servewatch load run (see the module doc)."""
    if not header or header.get("synthetic") is True:
        return False
    src = header.get("source")
    if isinstance(src, Mapping):
        return src.get("kind") in LOAD_KINDS
    load = header.get("load")
    return (header.get("tool") == "servewatch" and isinstance(load, Mapping) and isinstance(load.get("levels"), list)
            and bool(load.get("levels")))


def _level_ok(v: object) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v > 0  # type: ignore[arg-type,operator]


def _span_text(levels: Sequence[float]) -> str:
    vals = [f"{v:g}" for v in levels]
    if len(vals) == 1:
        return f"level {vals[0]}"
    if len(vals) > 8:
        return f"levels {vals[0]}-{vals[-1]} ({len(vals)} levels)"
    return f"levels {vals[0]}-{vals[-1]}" if len(vals) > 2 else f"levels {', '.join(vals)}"


def plan_problems(header: Mapping, ends: Sequence[tuple[Key, bool, Mapping]], name: NameOf,
                  recomputed: Callable[[Key], str | None],
                  held_back: Callable[[Key], bool] | None = None) -> list[str]:
    """The planned steps of a load run against its step ``end`` records in file order (``ends``: (level, round),
    whether it is a search probe, its fields). ``recomputed(key)``: the level's verdict recomputed from its request
    records (None: none); ``held_back(key)``: whether the reader itself finds a problem in the level that forbids
    its PASS (the delivered-load check). Run-wide problems (each forbids PASS)."""
    load = header.get("load")
    ld: Mapping = load if isinstance(load, Mapping) else {}
    if "drill" in ld:  # a drill (servewatch drill, issue 39): its own steps
        return drill_plan_problems(ld.get("drill"), ends, name, recomputed, held_back)
    levels = ld.get("levels")
    rounds = ld.get("rounds", 1)
    rounds = 1 if rounds is None else rounds
    if not (isinstance(levels, list) and levels and all(_level_ok(v) for v in levels)):
        return [f"the run header's planned levels (load.levels: {str(levels)[:60]}) are not a list of positive "
                "numbers: which steps the run must hold cannot be told"]
    if type(rounds) is not int or rounds < 1:
        return [f"the run header's planned rounds (load.rounds: {str(rounds)[:20]}) are not a whole number >= 1: "
                "which steps the run must hold cannot be told"]
    n_levels = len(levels)
    total = n_levels * rounds
    if total > MAX_PLANNED_STEPS:
        return [f"the run header plans {total:,} steps ({n_levels} levels x {rounds} rounds): more than any run "
                f"holds ({MAX_PLANNED_STEPS:,}); the plan cannot be checked"]

    def planned(k: int) -> Key:
        return float(levels[k % n_levels]), k // n_levels + 1

    problems: list[str] = []
    ladder: list[tuple[Key, Mapping]] = []
    probes: list[Key] = []
    search = isinstance(ld.get("search"), Mapping)
    for key, probe, info in ends:
        if probe:
            if not search:
                problems.append(f"{name(*key)}: a step record marked as a capacity-search probe in a run whose header "
                                "plans no search (load.search): a planned step relabelled")
            probes.append(key)
            continue
        if probes:
            problems.append(f"{name(*key)}: a ladder step after the capacity search's probes: steps reordered or "
                            "relabelled")
            continue
        k = len(ladder)
        if k >= total:
            problems.append(f"{name(*key)}: a step record beyond the {total} steps the run header plans "
                            f"({n_levels} levels x {rounds} rounds)")
            continue
        want = planned(k)
        if key != want:
            problems.append(f"step records out of the planned order: the ladder's step {k + 1} is {name(*key)}, the "
                            f"run header plans {name(*want)} there (levels {', '.join(f'{v:g}' for v in levels[:12])}"
                            f"{', ...' if n_levels > 12 else ''}, {rounds} round{'s' if rounds != 1 else ''})")
            break
        ladder.append((key, info))
    planned_keys = {planned(k) for k in range(len(ladder))}
    for key in probes:
        if key in planned_keys:
            problems.append(f"{name(*key)}: a search probe at a step the ladder already ran: a step recorded twice")
    if len(ladder) < total and not problems:
        stop = _stop_excuse(header, ladder, recomputed, name)
        if stop is None:
            missing = [planned(k) for k in range(len(ladder), total)]
            if rounds == 1:
                what = _span_text([float(lv or 0.0) for lv, _r in missing])
            else:
                shown = ", ".join(name(*m) for m in missing[:4]) + (", ..." if len(missing) > 4 else "")
                what = f"{len(missing)} of {total} steps ({shown})"
            have = "no step record at all" if not ends else f"{len(ladder)} of {total} planned steps present"
            problems.append(f"incomplete: {what} planned, not present ({have}; no recorded stop explains it: the run "
                            "was cut short, or its end removed)")
        elif stop:
            problems.append(stop)
    return problems


#: why a drill may end after its baseline (the baseline step's ``stop.cause``): its baseline did not PASS; with
#: ``--fault-manual``, no act was marked in time, or one was marked before the baseline PASSed
DRILL_STOPS = ("drill_baseline", "drill_no_mark", "drill_marked_early")


def drill_plan_problems(drill: object, ends: Sequence[tuple[Key, bool, Mapping]], name: NameOf,
                        recomputed: Callable[[Key], str | None],
                        held_back: Callable[[Key], bool] | None = None) -> list[str]:
    """A drill's steps (``load.drill.steps``: baseline, disturbance, recovery, each a (level, round)) against its
    step ``end`` records in file order: all of them in order, or the baseline alone when its end record says why the
    drill stopped there (``DRILL_STOPS``; ``drill_baseline`` only when the baseline cannot PASS on the reader's own
    evidence: its request records do not PASS, or ``held_back`` finds a problem that forbids its PASS, such as the
    load it was labelled with not reached)."""
    steps = drill.get("steps") if isinstance(drill, Mapping) else None
    planned: list[Key] = []
    if isinstance(steps, list) and 2 <= len(steps) <= 3:
        for s in steps:
            lv, rnd = (s.get("level"), s.get("round")) if isinstance(s, Mapping) else (None, None)
            if _level_ok(lv) and type(rnd) is int and rnd >= 1:
                planned.append((float(lv), rnd))  # type: ignore[arg-type]
    if not steps or len(planned) != len(steps):
        return [f"the run header's drill steps (load.drill.steps: {str(steps)[:80]}) are not a list of steps: which "
                "steps the drill must hold cannot be told"]
    problems: list[str] = []
    got: list[tuple[Key, Mapping]] = []
    for key, probe, info in ends:
        if probe:
            problems.append(f"{name(*key)}: a capacity-search probe in a drill: a step relabelled")
            continue
        k = len(got)
        if k >= len(planned) or key != planned[k]:
            want = name(*planned[k]) if k < len(planned) else "nothing more"
            problems.append(f"step records out of the drill's plan: its step {k + 1} is {name(*key)}, the run header "
                            f"plans {want} there")
            break
        got.append((key, info))
    if problems or len(got) == len(planned):
        return problems
    if len(got) == 1:
        key, info = got[0]
        stop = info.get("stop")
        cause = stop.get("cause") if isinstance(stop, Mapping) else None
        manual = isinstance(drill, Mapping) and drill.get("kind") == "fault_manual"
        if cause in DRILL_STOPS and (cause == "drill_baseline" or manual) and (
                cause != "drill_baseline" or recomputed(key) != "PASS"
                or (held_back is not None and held_back(key))):
            return []
        if cause == "drill_baseline":
            return [f"incomplete: the drill says it stopped after its baseline ({name(*key)}) because the baseline did "
                    "not PASS, but the baseline's own request records PASS and nothing else holds it back: the later "
                    "steps are missing unexplained"]
    missing = ", ".join(name(*k) for k in planned[len(got):])
    return [f"incomplete: the drill's steps {missing} planned, not present ({len(got)} of {len(planned)}; no recorded "
            "stop explains it: the drill was cut short, or its end removed)"]


def _stop_excuse(header: Mapping, ladder: Sequence[tuple[Key, Mapping]], recomputed: Callable[[Key], str | None],
                 name: NameOf) -> str | None:
    """Why the ladder may end early: "" when its last step records a stop its own records support; a problem
    sentence when it records one they do not; None when nothing explains the missing steps."""
    if not ladder:
        return None
    key, info = ladder[-1]
    load = header.get("load")
    stop_on_fail = isinstance(load, Mapping) and load.get("stop_on_fail") is True
    stop = info.get("stop")
    cause = stop.get("cause") if isinstance(stop, Mapping) else None
    if cause is None and stop_on_fail and info.get("verdict") == "FAIL":
        cause = "stop_on_fail"  # a file written before stops were recorded: the generator's own rule
    if cause == "degraded" and info.get("degraded") is True:
        return ""
    if cause == "stop_on_fail" and stop_on_fail and info.get("verdict") == "FAIL":
        got = recomputed(key)
        if got == "FAIL":
            return ""
        return (f"incomplete: the ladder stopped after {name(*key)} on a FAIL (--stop-on-fail), but that step's own "
                f"request records do not FAIL (recomputed: {got}): the later planned steps are missing unexplained")
    if cause is not None:
        return (f"incomplete: {name(*key)} records a stop ({str(cause)[:40]}) that its header or its step does not "
                "support (stop_on_fail not set, no FAIL, not degraded): the later planned steps are missing")
    return None


def seal_problem(integrity: Any) -> str | None:
    """A load run whose header starts a digest chain must end with its seal (``integrity``: the judged run's
    ``tui.core.chain.RecordsIntegrity``; None: not read from a file)."""
    if integrity is None or not getattr(integrity, "chained", False) or getattr(integrity, "sealed", False):
        return None
    if integrity.state == "broken":
        return None  # the break is already the reason
    return ("incomplete: no seal: the run's digest chain has no seal record (the run was cut short, or its end "
            "removed); lines after its last checkpoint are unverified")


class StepValues:
    """The values of one level and round that a step end record's percentiles are made of, in bounded memory:
    ``lateness`` (t_sent - t_intended, every measured record) and ``ttft`` (t_first_token - t_sent, +inf without a
    first token, for records without an error), exact for the first values, then the generator's histogram
    (``StepQuantiles``). The Monitor keeps the exact parts in its own arrays (the hot path appends to them) and
    hands the overflow here: ``add_lateness`` / ``add_ttft``, or (the hot path, no call per value) an append to
    ``lateness_more`` / ``ttft_more`` and ``fold()`` once they hold ``FOLD_AT`` values; the histograms
    (``lateness_over`` / ``ttft_over``) fold what is pending whenever read, so memory stays bounded and a reader
    sees every value."""

    __slots__ = ("_lateness", "_ttft", "lateness_more", "ttft_more")

    #: pending values kept before they are folded into the histograms
    FOLD_AT = 4096

    def __init__(self) -> None:
        self._lateness: StepQuantiles | None = None
        self._ttft: StepQuantiles | None = None
        self.lateness_more: list[float] = []
        self.ttft_more: list[float] = []

    def add_lateness(self, v: float) -> None:
        self.lateness_more.append(v)
        if len(self.lateness_more) >= self.FOLD_AT:
            self.fold()

    def add_ttft(self, v: float) -> None:
        self.ttft_more.append(v)
        if len(self.ttft_more) >= self.FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """The pending values into the histograms, in the order given."""
        if self.lateness_more:
            if self._lateness is None:
                self._lateness = StepQuantiles(cap=0)
            self._lateness.extend(self.lateness_more)
            self.lateness_more = []
        if self.ttft_more:
            if self._ttft is None:
                self._ttft = StepQuantiles(cap=0)
            self._ttft.extend(self.ttft_more)
            self.ttft_more = []

    @property
    def lateness_over(self) -> StepQuantiles | None:
        self.fold()
        return self._lateness

    @property
    def ttft_over(self) -> StepQuantiles | None:
        self.fold()
        return self._ttft


def _quantiles(exact: Sequence[float], over: StepQuantiles | None, qs: Sequence[float]) -> tuple[list, bool]:
    """Nearest-rank percentiles of ``exact`` plus ``over`` (the generator's rule: exact when they all fit, else the
    histogram of every value); (values, approximate)."""
    if over is None or over.n == 0:
        if not exact:
            return [None for _ in qs], False
        srt = sorted(exact)
        return [pct(srt, q) for q in qs], False
    every = StepQuantiles(cap=0)
    for v in exact:
        every.add(v)
    every.merge(over)
    return every.quantiles(qs), True


def _ms(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) or math.isnan(v) else v * 1000.0


def _num(v: object) -> float | None:
    return float(v) if type(v) in (int, float) and math.isfinite(v) else None  # type: ignore[arg-type]


def step_problems(name: str, end: Mapping, counts: tuple[int, int, int], errors: Mapping[str, int],
                  lateness: Sequence[float], ttft: Sequence[float], over: StepValues | None,
                  recomputed: str | None, settings: str) -> list[str]:
    """One step ``end`` record against the request records of its level and round (see the module doc): ``counts``
    (records, with an error, not complete without one), their ``errors`` per class, the exact ``lateness`` / ``ttft``
    values (and the ``over``flow), the verdict ``recomputed`` from them (None: not judged) at ``settings`` (words)."""
    out: list[str] = []
    n, err, inc = counts
    done = end.get("completed")
    if isinstance(done, int) and end.get("requests") == n and done not in (n - err, n - err - inc):
        out.append(f"{name}: the step record counts {done} completed; the file holds {n - err - inc} complete of {n}: "
                   "records altered")
    said = end.get("errors")
    if isinstance(said, Mapping) and end.get("requests") == n:
        # a record not complete without an error class is counted "other" by the generator's worker processes
        classes = set(said) | set(errors) | ({"other"} if inc else set())
        diff = [c for c in sorted(classes)
                if said.get(c, 0) not in (errors.get(c, 0), errors.get(c, 0) + (inc if c == "other" else 0))]
        if diff:
            shown = ", ".join(f"{c} {said.get(c, 0)} vs {errors.get(c, 0)}" for c in diff[:4])
            out.append(f"{name}: the step record's error classes differ from its request records' ({shown}): "
                       "failures relabelled")
    rel = _num(end.get("percentiles_rel_error")) or 0.0
    (late50, late99), approx_l = _quantiles(lateness, over.lateness_over if over else None, (0.5, 0.99))
    (ttft50,), approx_t = _quantiles(ttft, over.ttft_over if over else None, (0.5,))
    # open loop: "lateness" (against the schedule); closed loop: "send_overhead"; the same t_sent - t_intended
    for field_name, mine, approx in (("lateness_p50_ms", late50, approx_l), ("lateness_p99_ms", late99, approx_l),
                                     ("send_overhead_p50_ms", late50, approx_l),
                                     ("send_overhead_p99_ms", late99, approx_l), ("ttft_p50_ms", ttft50, approx_t)):
        if field_name not in end:
            continue
        theirs = _num(end.get(field_name))
        ours = _ms(mine)
        if theirs is None and ours is None:
            continue
        r = max(rel, PCT_REL_ERR if approx else 0.0)
        if theirs is None or ours is None or abs(theirs - ours) > PERCENTILE_ABS_TOL_MS + 2.5 * r * max(
                abs(theirs), abs(ours)):
            t = "none" if theirs is None else f"{theirs:.3f} ms"
            o = "none" if ours is None else f"{ours:.3f} ms"
            out.append(f"{name}: the step record's {field_name} is {t}; recomputed from its request records: {o}: "
                       "records altered")
    said_v = end.get("verdict")
    if said_v in _VERDICTS and recomputed is not None and end.get("degraded") is not True:
        reason = end.get("verdict_reason")
        held = said_v == "UNDECIDED" and isinstance(reason, str) and reason.startswith("cannot PASS")
        if ("PASS" if held else said_v) != recomputed:
            shown = "UNDECIDED (a PASS held back)" if held else said_v
            out.append(f"{name}: the step record's verdict is {shown}; recomputed from its request records at "
                       f"{settings}: {recomputed}: records altered, or judged at other settings than the run's")
    return out
