"""The records of one drill, kept for its judgement: ``DrillCollector.add_many(items)`` takes the same blocks of
parsed records the Monitor takes (every reader feeds both, ``tui.sources.evidence_monitor``; the console's sink too)
and keeps what the recovery rule needs and the Monitor does not keep: every measured request's send, first-token and
end times, its outcome by the one rule (``tui.core.slos.slo_rule``), its error class and its step, in compact arrays
(about 40 bytes a request); the phase records; the server's queue samples.

A collector stays inert (each block costs one look) until a run header with a ``load.drill`` block arrives.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from tui.core.drill.settings import is_drill_header
from tui.core.outcomes import CANCELLED, EXCLUDED, FAILED, GOOD, SLOW
from tui.core.records.model import PhaseRecord, QueueSample, RunHeader, StepRecord
from tui.core.records.request import RequestRecord
from tui.core.slos import Slos, slo_rule

#: outcome codes in ``DrillCollector.outcome``: EXCLUDED is a request cancelled while its outcome was still open;
#: UNJUDGED one completed with an SLO in force it cannot be judged on (never good here)
OUTCOME_CODES = {GOOD: 0, SLOW: 1, FAILED: 2, EXCLUDED: 3}
CODE_GOOD, CODE_SLOW, CODE_FAILED, CODE_EXCLUDED, CODE_UNJUDGED = 0, 1, 2, 3, 4
#: at most this many measured requests are kept (a 10-hour drill at 50 req/s); more are counted, never judged
MAX_REQUESTS = 2_000_000


@dataclass
class PhaseSeen:
    """One phase as its records say: start and end (epoch s), its step, the details of each record."""

    name: str
    start: float | None = None
    end: float | None = None
    key: tuple[float, int] | None = None
    start_info: dict = field(default_factory=dict)
    end_info: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class DrillCollector:
    """See the module doc. ``slos``: the SLOs the drill is judged at (the Monitor's)."""

    def __init__(self, slos: Slos) -> None:
        self.slos = slos
        self._classify = slo_rule(slos)
        self.active: bool | None = None  # None: no header seen yet; False: not a drill
        self.header: dict = {}
        self.t_sent = array("d")
        self.t_end = array("d")
        self.ttft_ms = array("d")  # NaN: no first token (or no TTFT judged)
        self.outcome = array("b")
        self.err = array("h")  # index into error_names; -1: no error
        self.cancelled = array("b")
        self.key = array("h")  # index into keys
        self.error_names: list[str] = []
        self._err_index: dict[str, int] = {}
        self.keys: list[tuple[float | None, int]] = []
        self._key_index: dict[tuple[float | None, int], int] = {}
        self.phases: dict[str, PhaseSeen] = {}
        self.phase_order: list[tuple[str, str]] = []  # (name, event) in file order
        self.queue_t = array("d")
        self.queue_waiting = array("d")
        self.queue_source: str | None = None
        self.steps_seen: list[tuple[str, tuple[float | None, int], float]] = []  # (event, key, t)
        self.overflow = 0
        self.warmup = 0

    def add_many(self, items: Iterable) -> None:
        if self.active is False:
            return
        for it in items:
            tp = type(it)
            if tp is RequestRecord:
                if self.active:
                    self._request(it)
            elif tp is RunHeader:
                if self.active is None:
                    self.active = is_drill_header(it.data)
                    if self.active:
                        self.header = it.data
                    else:
                        return
            elif not self.active:
                continue
            elif tp is PhaseRecord:
                self._phase(it)
            elif tp is QueueSample:
                w = it.waiting
                if it.source not in ("none", "client") and w is not None and math.isfinite(w):
                    self.queue_t.append(it.t)
                    self.queue_waiting.append(w)
                    self.queue_source = it.source
            elif tp is StepRecord:
                self.steps_seen.append((it.event, (it.level, it.round), it.t))

    def _request(self, r: RequestRecord) -> None:
        if r.phase == "warmup":
            self.warmup += 1
            return
        if len(self.t_sent) >= MAX_REQUESTS:
            self.overflow += 1
            return
        outcome, ttft, _misses = self._classify(r)
        self.t_sent.append(r.t_sent)
        self.t_end.append(r.t_end)
        self.ttft_ms.append(math.nan if ttft is None else ttft)
        code = OUTCOME_CODES[outcome]
        if code == CODE_EXCLUDED and r.error != CANCELLED:
            code = CODE_UNJUDGED
        self.outcome.append(code)
        e = r.error
        if e is None and outcome == FAILED:
            e = "incomplete"  # complete: false (or a record contradicting itself) without an error class
        if e is None:
            self.err.append(-1)
        else:
            i = self._err_index.get(e)
            if i is None:
                i = self._err_index[e] = len(self.error_names)
                self.error_names.append(e)
            self.err.append(i)
        self.cancelled.append(1 if r.error == CANCELLED else 0)
        k = (r.level, r.round)
        j = self._key_index.get(k)
        if j is None:
            j = self._key_index[k] = len(self.keys)
            self.keys.append(k)
        self.key.append(j)

    def _phase(self, p: PhaseRecord) -> None:
        seen = self.phases.get(p.name)
        if seen is None:
            seen = self.phases[p.name] = PhaseSeen(p.name)
        self.phase_order.append((p.name, p.event))
        key = (float(p.level), int(p.round)) if p.level is not None and p.round is not None else None
        if p.event == "start":
            if seen.start is not None:
                seen.problems.append(f"the {p.name} phase starts twice")
            seen.start, seen.start_info = p.t, dict(p.info)
            seen.key = key
        else:
            if seen.end is not None:
                seen.problems.append(f"the {p.name} phase ends twice")
            if seen.key is not None and key is not None and key != seen.key:
                seen.problems.append(f"the {p.name} phase's end names another step than its start")
            seen.end, seen.end_info = p.t, dict(p.info)

    @property
    def n(self) -> int:
        return len(self.t_sent)
