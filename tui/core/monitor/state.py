"""The Monitor's state (``MonitorState``): what it holds, the evidence problems that forbid PASS, the level names."""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any, Self

import tui.core.evidence as evidence
import tui.core.importers.crosscheck as crosscheck
import tui.core.provenance as provenance
from tui.core.budget.memory import (
    WHY_NO_HEADER,
    MemoryMissing,
    memory_label,
)
from tui.core.budgetview import (
    BudgetView,
)
from tui.core.levels import row_mode
from tui.core.monitor.config import (
    SERIES_LEN,
    MonitorConfig,
)
from tui.core.monitor.level import LevelState
from tui.core.records.model import QueueSample
from tui.core.slos import slo_rule, ttft_or_default
from tui.core.states import VerdictState
from tui.core.verdict import MixtureTest
from tui.core.verdict_settings import (
    FileSettings,
    JudgeAt,
    Resolution,
)

TIMELINE_HEAD = 1000  # verdict state changes kept from the start of the run
TIMELINE_TAIL = 1000  # ... and the latest ones; changes in between are counted, not kept
ROLLING_MAX = 200_000  # most requests a time-based rolling window holds (above that rate it is the last 200,000)


class MonitorState:
    """Everything a Monitor holds (the one object a snapshot reads under one lock), the evidence problems that
    forbid PASS, and the names and counts every part reads. The parts that act on it are its subclasses:
    ``BudgetTracking`` (budget.py), ``Ingest`` (ingest.py), ``ReadSide`` (view.py), ``WholeFileChecks``
    (checks.py); ``Monitor`` (facade.py) is all of them."""

    records_integrity: Any = None  # the RecordsIntegrity of the file read; None: not verified

    def __init__(self, config: MonitorConfig | None = None, budget: Any = None, source: str = "",
                 budget_origin: str | None = None, judge_at: JudgeAt | None = None, views: bool = True) -> None:
        cfg = config or MonitorConfig()
        #: the console's views (the recent rows, the rolling window, the sparkline series): kept only when a console
        #: may show them; a whole-file read for a document (``tui.sources.evidence_monitor.monitor_of``: report,
        #: accept, compare, select) shows none and skips them on the hot path (its snapshot says "not kept")
        self._views = views
        #: issue 35: a reader's Monitor judges a file at the settings its run header states (``judge_at``: what
        #: the reader's flags change, ``tui.core.verdict_settings.resolve``), settled at the header (before any
        #: request); None: ``config`` as given (the load generator's own Monitor, which writes the header)
        self._judge_at = judge_at
        self.settings: Resolution | None = None
        self._file_settings: FileSettings | None = None  # what the run header states (held against step records)
        #: when a reader re-judges at other settings: a second Monitor at the run's own, for "the run was judged
        #: at 50 ms: FAIL" (fed the same records; only while re-judging)
        self._shadow: Self | None = None
        #: a budget given without its memory input (issue 22): completed from the run header (NVML, else the
        #: engine's own KV space) when it comes; until then, and when neither is there, the budget is unknown
        self.memory_pending: MemoryMissing | None = budget if isinstance(budget, MemoryMissing) else None
        if self.memory_pending is not None:
            budget = None
        self.budget = budget
        #: where the budget came from ("flags: ...", "file: ...", the record file's budget record, the teaching case)
        self.budget_origin = budget_origin if budget is not None else None
        self.budget_memory: str | None = memory_label(budget, self.budget_origin)
        self.budget_hint: str | None = (None if self.memory_pending is None
                                        else self.memory_pending.hint(WHY_NO_HEADER))
        self.budget_problem: str | None = None
        #: the engine's startup-log figures (``--server-log``: ``tui.sources.server_log``), shown beside the
        #: memory-only candidate; None: no log given
        self.server_log: dict | None = None
        self._budget_view_key: tuple | None = None
        self._budget_view: BudgetView | None = None
        self.source = source
        self._use_config(cfg)
        # measured requests cancelled (by the user or by servewatch), per (level, round): still open
        # (excluded from the good fraction and the verdict) / already past the SLO (counted as failed)
        self.cancelled_open: dict[tuple, int] = {}
        self.cancelled_late: dict[tuple, int] = {}
        self._rolling_n = cfg.rolling_n
        self._rolling_s = cfg.rolling_s
        self._bucket_s = cfg.bucket_s
        self.header: dict = {}
        self.seq_no = 0
        self.requests_total = 0
        self.warmup_total = 0
        self.malformed = 0
        self.truncated = 0
        self.unknown_types = 0
        self.duplicates = 0
        self.levels_over_cap = 0  # measured request and step records of levels beyond MAX_LEVELS (never judged)
        #: refused lines that may have been measured requests (``LineIssue.request`` not False), by the
        #: (level, round) the line still names, or under None when it names none (it may belong to any level)
        self.unreadable: dict[tuple | None, int] = {}
        self._dups: evidence.Duplicates | None = evidence.Duplicates() if cfg.check_duplicate_ids else None
        #: False when the run header says the file has no time axis (``source.time_axis: "none"``)
        self.time_axis = True
        #: the queue samples' client_in_flight with their times (the delivered-load check; bounded)
        self._queue_in_flight = evidence.QueueInFlight()
        self.examples: list[str] = []
        self.errors_by_class: dict[str, int] = {}
        self.levels: dict[tuple, LevelState] = {}
        self.current: LevelState | None = None
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.ids_seen = 0
        # rolling window of measured requests: (t_end, good, ttft_ms|None, failed, out_tokens, tpot_ms|None)
        # bounded by what it shows: the last ``rolling_n`` requests, else those of the last ``rolling_s`` (pruned
        # on every request; at 50 req/s and 60 s, ~3,000 entries), with ROLLING_MAX as a ceiling above 3,333 req/s
        self._roll: deque = deque(maxlen=cfg.rolling_n or ROLLING_MAX)
        self._roll_good = 0
        # the level+round the rolling window shows: the newest one that has measured requests (a level change
        # starts the window afresh; a straggler of an earlier level counts in its level, not in the window)
        self._roll_owner: LevelState | None = None
        self._recent: deque = deque(maxlen=cfg.recent_rows)
        # sparkline buckets
        self._bucket_idx: int | None = None
        self._bucket_good = 0
        self._bucket_n = 0
        self._bucket_ttfts: list[float] = []
        self._good_series: deque = deque(maxlen=SERIES_LEN)
        self._p95_series: deque = deque(maxlen=SERIES_LEN)
        # queue / gpu / host
        self._queue_latest: QueueSample | None = None
        self._queue_source: str | None = None
        self._waiting_series: deque = deque(maxlen=SERIES_LEN)
        self._running_series: deque = deque(maxlen=SERIES_LEN)
        self._inflight_series: deque = deque(maxlen=SERIES_LEN)
        self._max_waiting: float | None = None
        self._kv_usage_series: deque = deque(maxlen=SERIES_LEN)  # the engine's kv_cache_usage (0..1)
        self._kv_usage_peak: float | None = None
        self._kv_usage_n = 0
        self._client_in_flight: int | None = None
        self._gpu: dict[int, dict] = {}
        self._host: dict = {}
        self._notes: list[str] = []
        self.step_info: dict[tuple, dict] = {}
        #: every step end record in file order: ((level, round), search probe, its fields, its mode)
        self.step_ends: list[tuple[tuple, bool, dict, str | None]] = []
        # every verdict state change a watcher re-checking after each request would have seen
        self._timeline_head: list[tuple] = []
        self._timeline_tail: deque = deque(maxlen=TIMELINE_TAIL)
        self.timeline_omitted = 0
        # evidence problems that forbid a PASS (tui.core.evidence cross-checks, the digest chain, ...): per
        # (level, round), or for every level under the key None; each reason is shown wherever the verdict is
        self._pass_blocks: dict[tuple | None, list[str]] = {}
        self._warm_sends = array("d")  # t_sent of warmup records (the first EVIDENCE_CAP)
        self._warm_tally = crosscheck.Tally()  # warmup records per (level, round): an import's tool counts them
        self.contradictions = 0
        self.finished = False  # ``finish()`` ran: the whole file has been read

    def _use_config(self, cfg: MonitorConfig) -> None:
        """The verdict settings in force (before any request is judged)."""
        self.cfg = cfg
        self.test = MixtureTest(cfg.target, cfg.alpha)
        self.min_requests = max(cfg.min_requests or 0, self.test.min_requests_to_pass())
        self._slo_ms = ttft_or_default(cfg.slos)  # the delivered load's yardstick (tui.core.evidence)
        self.slo_s = self._slo_ms / 1000.0
        self._classify = slo_rule(cfg.slos)  # the one rule (tui.core.slos)

    def run_settings_monitor(self) -> Self:
        """The Monitor that judges at the run's own settings: this one, or the second one when re-judging."""
        return self._shadow if self._shadow is not None else self

    # ------------------------------------------------------------------ evidence problems
    def block_pass(self, reason: str, key: tuple | None = None) -> None:
        """Record an evidence problem that forbids PASS: for the level ``key`` = (level, round), or for every
        level when ``key`` is None. A PASS becomes UNDECIDED with the reason; FAIL stands (a failing server is
        still failing); the reason is listed in the snapshot's ``evidence_problems``."""
        if self._shadow is not None:
            self._shadow.block_pass(reason, key)
        reasons = self._pass_blocks.setdefault(key, [])
        if reason not in reasons:
            reasons.append(reason)
            if key is not None:  # one level's problem: only its verdict changes (per-level work stays linear)
                one = self.levels.get(key)
                if one is not None:
                    one.verdict_cache = None
                return
            for st in self.levels.values():
                st.verdict_cache = None

    def pass_blocks(self, key: tuple | None) -> list[str]:
        """The reasons that forbid PASS for level ``key`` (the run-wide ones first: the duplicates so far)."""
        return (self._run_blocks() + self._pass_blocks.get(None, [])
                + (self._pass_blocks.get(key, []) if key is not None else []))

    def _run_blocks(self) -> list[str]:
        """Run-wide reasons that grow while the file is read (their sentence carries the count so far)."""
        dups = self._dups
        if not self.duplicates or dups is None:
            return []
        problem = dups.problem()
        return [] if problem is None else [problem]

    def evidence_problems(self) -> tuple[str, ...]:
        """Every evidence problem recorded, run-wide first, in the order found."""
        out: list[str] = self._run_blocks() + list(self._pass_blocks.get(None, []))
        for key, reasons in self._pass_blocks.items():
            if key is not None:
                out.extend(r for r in reasons if r not in out)
        return tuple(out)

    # ------------------------------------------------------------------ names and counts
    def _mode_of(self, st: LevelState) -> str | None:
        return row_mode(st.mode, self.header)  # the one rule: the level's own mode, else the header's

    def _name_of(self, level: float | None, rnd: int) -> str:
        """'concurrency 4 round 1' (the level's own loop mode, else the header's)."""
        st = self.levels.get((level, rnd))
        return evidence.level_name(level, rnd, row_mode(st.mode if st is not None else None, self.header))

    def _cv2(self) -> float:
        """Squared coefficient of variation of the header's arrival process (the achieved-rate tolerance)."""
        ld = self.header.get("load") if self.header else None
        if not isinstance(ld, dict):
            return 1.0
        arr = ld.get("arrival")
        if arr == "constant":
            return 0.0
        b = ld.get("burstiness")
        if arr == "gamma" and isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0:
            return 1.0 / b
        return 1.0

    def run_file(self) -> bool:
        """The header says a servewatch load run wrote the file (source kind "run" or "trace"; a header without a
        valid source block counts when it names servewatch, a digest chain or a run id): its loop mode is required."""
        h = self.header
        if not h:
            return False
        ld = h.get("load")
        if h.get("synthetic") is True and isinstance(ld, dict) and ld.get("mode") == "synthetic":
            return False  # a SYNTHETIC teaching file says so (never exits 0): not a run
        src = provenance.source_block(h)
        if src is not None:
            return src.get("kind") in ("run", "trace")
        return h.get("tool") == "servewatch" or "chain" in h or "run_id" in h

    def usable_lines(self) -> int:
        """Lines read that were records this reader can use (every ``add`` minus the problem lines)."""
        return self.seq_no - self.malformed - self.truncated - self.unknown_types

    def unreadable_requests(self, key: tuple) -> int:
        """Refused lines that may have been measured requests of level ``key`` = (level, round): those that still
        name it, plus those that name no level (counted against every level)."""
        u = self.unreadable
        return u.get(None, 0) + u.get(key, 0) if u else 0

    def _timeline_add(self, st: LevelState, state: VerdictState, n: int, t: float) -> None:
        entry = (st.level, st.round, state, n, t)
        if len(self._timeline_head) < TIMELINE_HEAD:
            self._timeline_head.append(entry)
            return
        tail = self._timeline_tail
        if len(tail) == tail.maxlen:
            self.timeline_omitted += 1
        tail.append(entry)

    def timeline(self) -> tuple[tuple, ...]:
        """(level, round, state, n, t) for every verdict state change, in arrival order: the first
        TIMELINE_HEAD and the last TIMELINE_TAIL of them (``timeline_omitted`` counts the rest)."""
        return tuple(self._timeline_head) + tuple(self._timeline_tail)
