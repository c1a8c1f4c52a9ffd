"""Records in (``Ingest``): ``add_many``, the one ingest path and the hot path of every reader, and the records it dispatches (headers, steps, queue, GPU and host samples, line issues)."""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Iterable
from typing import Any, Self

import tui.core.clientlimit as clientlimit
import tui.core.evidence as evidence
import tui.core.provenance as provenance
import tui.core.stats as stats
import tui.core.turns as turns
from tui.core.bounds import MAX_ERROR_CLASSES, MAX_GPU_DEVICES, MAX_LEVELS, OTHER_ERRORS
from tui.core.completeness import StepValues
from tui.core.importers.limits import ttft_of_label
from tui.core.monitor.budget import BudgetTracking
from tui.core.monitor.config import (
    EVIDENCE_CAP,
    GIB,
    MAX_EXAMPLES,
    SERIES_LEN,
    config_at,
)
from tui.core.monitor.level import LevelState, add_other_ttft, step_over, store
from tui.core.outcomes import CLIENT, EXCLUDED, FAILED
from tui.core.records.model import BudgetRecord, GpuSample, HostSample, QueueSample, Record, RunHeader, StepRecord
from tui.core.records.request import RequestRecord, contradiction
from tui.core.records.schema import LineIssue
from tui.core.slos import itl_ms
from tui.core.verdict_settings import (
    NO_SETTINGS,
    VERDICT_SETTINGS,
    read_header,
)
from tui.core.verdict_settings import resolve as resolve_settings

_INF = math.inf
FOLD_AT = StepValues.FOLD_AT


class Ingest(BudgetTracking):
    """Records in: ``add_many`` (the hot path of every reader) and what it dispatches to."""

    # ------------------------------------------------------------------ the run's settings (issue 35)
    def _settle(self, items: Iterable) -> list:
        """Before the first request: the settings this file is judged at, from its run header (or none)."""
        items = list(items)
        for it in items:
            if isinstance(it, RunHeader):
                self._adopt(it.data)
                break
            if type(it) is RequestRecord:
                self._adopt(None)
                break
        return items

    def _adopt(self: Self, header: dict | None) -> None:
        at = self._judge_at
        assert at is not None
        self._file_settings = fs = read_header(header)
        res = resolve_settings(fs, at)
        label = ttft_of_label(header)  # an import's TTFT is its tool's: said wherever its settings are (issue 37)
        if label is not None:
            eff = res.effective
            res = dataclasses.replace(res, effective=dataclasses.replace(
                eff, slos=dataclasses.replace(eff.slos, ttft_label=label)))
        self.settings = res
        self._use_config(config_at(self.cfg, res.effective))
        if res.rejudged and res.run is not None:
            self._shadow = type(self)(config_at(self.cfg, res.run), source=self.source, views=self._views)
        for problem in res.problems:
            self.block_pass(problem)

    def _check_step_settings(self, s: StepRecord, block: Any) -> None:
        """A step end record states the settings its step was judged at (as `run` writes them): held against the
        run header's; a difference, or settings the header no longer states, forbids PASS run-wide."""
        step = read_header({"verdict_settings": block})
        own = self._file_settings
        name = evidence.level_name(s.level, s.round, s.mode)
        if step.problems:
            self.block_pass(f"{name}: its step end record's verdict_settings is malformed: the settings it was "
                            "judged at are unknown")
        elif own is None or own.origin != VERDICT_SETTINGS:
            self.block_pass(f"{name}: its step end record states verdict settings ({block.get('text')}) and the run "
                            "header does not: the header's settings were removed or edited")
        else:
            diff = [k for k in step.values if step.values[k] != own.values.get(k)]
            if diff:
                self.block_pass(f"{name}: its step end record states other verdict settings than the run header ("
                                + "; ".join(f"{k}: {step.values[k]!r} vs {own.values.get(k)!r}" for k in diff)
                                + "): the settings were edited")

    # ------------------------------------------------------------------ ingest
    def add_request(self, r: RequestRecord) -> None:
        """``add`` for a request record."""
        self.add_many((r,))

    def add(self, item: Record | LineIssue) -> None:
        """One record or line issue: ``add_many`` of one."""
        self.add_many((item,))

    def _add_other(self, item: Record | LineIssue) -> None:
        """Everything but a request, dispatched by type."""
        if isinstance(item, LineIssue):
            self._add_issue(item)
        elif isinstance(item, QueueSample):
            self._add_queue(item)
        elif isinstance(item, GpuSample):
            self._add_gpu(item)
        elif isinstance(item, RunHeader):
            if not self.header:
                if (self.settings is not None and self.settings.origin == NO_SETTINGS and self.requests_total
                        and read_header(item.data).origin != NO_SETTINGS):
                    self.block_pass("the run header came after request records: the verdict settings it states "
                                    "were not applied")
                self.header = item.data
                self._resolve_memory()
                label = ttft_of_label(item.data)  # an import's TTFT is its tool's, never "answer" (issue 37)
                if label is not None and self.cfg.slos.ttft_label != label:
                    self.cfg = dataclasses.replace(self.cfg, slos=dataclasses.replace(self.cfg.slos, ttft_label=label))
                    for st in self.levels.values():
                        st.verdict_cache = None
                self._header_axis()
            else:
                self._notes.append("more than one run header: the first is shown")
        elif isinstance(item, StepRecord):
            self._add_step(item)
        elif isinstance(item, HostSample):
            self._host = {
                "cpu_percent": item.cpu_percent,
                "memory_used": item.memory_used,
                "memory_total": item.memory_total,
                "client_cpu_percent": item.client_cpu_percent,
                "server_rss": item.server_rss,
                "server_pid": item.server_pid,
            }
        elif isinstance(item, BudgetRecord):
            self._add_budget_record(item)
        # anything else: ignored on purpose (parse_lines already counted unknown types)

    def _header_axis(self) -> None:
        """A header that says the file has no time axis (an import whose requests all start at one instant, their
        other times derived): no identical-times duplicate rule (equal durations by rounding are not copies), no
        delivered-load check."""
        src = provenance.source_block(self.header) or {}
        self.time_axis = src.get("time_axis") != "none"
        if self._dups is not None:
            self._dups.times = self.time_axis

    def _add_issue(self, issue: LineIssue) -> None:
        if issue.kind == "unknown_type":
            self.unknown_types += 1
        elif issue.kind == "truncated":
            self.truncated += 1
        else:
            self.malformed += 1
        if issue.kind in ("malformed", "truncated") and issue.request is not False:
            key = issue.level_round
            if key is not None and key not in self.unreadable and len(self.unreadable) >= MAX_LEVELS:
                key = None  # beyond the level cap: counted against every level (the stricter), never dropped
            self.unreadable[key] = self.unreadable.get(key, 0) + 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(str(issue))

    def _state_for(self, level: float | None, rnd: int) -> LevelState | None:
        """The state of level (level, round), made on its first record; None beyond ``MAX_LEVELS`` distinct ones
        (the caller counts the record as over the cap: ``_over_cap``)."""
        key = (level, rnd)
        st = self.levels.get(key)
        if st is None:
            if len(self.levels) >= MAX_LEVELS:
                return None
            st = self.levels[key] = LevelState(level, rnd, self.test, self.cfg, self.min_requests)
            st.order = len(self.levels)
        return st

    def _over_cap(self, level: float | None, rnd: int) -> None:
        """A record of a level beyond the first ``MAX_LEVELS``: counted, never judged, and no level of the run can
        PASS (a file that holds more levels than are judged is not judged whole)."""
        self.levels_over_cap += 1
        if self.levels_over_cap == 1:
            name = evidence.level_name(level, rnd, None)
            self.block_pass(f"the run holds more than {MAX_LEVELS:,} distinct levels (level, round), the most "
                            f"servewatch judges: the records of the levels after the first {MAX_LEVELS:,} (from "
                            f"{name} on) are counted and reported, never judged")

    def _add_step(self, s: StepRecord) -> None:
        st = self._state_for(s.level, s.round)
        if st is None:
            self._over_cap(s.level, s.round)
            return
        if s.mode:
            st.mode = s.mode
        if s.event == "start":
            self.current = st
        else:
            info = s.info
            if info.get("saturated"):
                st.saturated = True
            if info.get("client_limited"):  # the records say so too (derived there); a step record can only add it
                st.client_step = True
                st.verdict_cache = None
            if info.get("degraded"):
                st.degraded = (f"degraded: a load worker was lost during this step ({info.get('worker_lost', '?')} "
                               "requests in flight recorded as worker_lost); the level was not held, so it cannot PASS")
                st.verdict_cache = None
            lp = info.get("lateness_p99_ms")
            if isinstance(lp, (int, float)):
                st.lateness_p99_ms = float(lp)
            if self._judge_at is not None and "verdict_settings" in info:
                self._check_step_settings(s, info["verdict_settings"])
            self.step_info[(s.level, s.round)] = dict(info)
            self.step_ends.append(((s.level, s.round), info.get("search_probe") is True, info, s.mode))

    def add_many(self, items: Iterable) -> None:
        """Ingest records and line issues in order: the one ingest path (``add`` is a batch of one).

        The hot path of every reader (1M-record reports and replays): per request a few attribute
        reads, the outcome rule (``tui.core.records.outcome_rule``, its one definition), the level's
        judge and two tuples; what does not change within a batch is looked up once per batch."""
        if self._judge_at is not None:  # a reader: the run's settings first (once), then both judges when re-judging
            if self.settings is None:
                items = self._settle(items)
            if self._shadow is not None:
                if not isinstance(items, (list, tuple)):
                    items = list(items)
                self._shadow.add_many(items)
        classify = self._classify
        views = self._views  # the console's views (recent rows, rolling window, sparkline buckets): off in a report
        answer_judged = self.cfg.slos.ttft_of == "answer"
        recent_append = self._recent.append
        errors = self.errors_by_class
        roll = self._roll
        roll_append = roll.append
        roll_max = roll.maxlen
        rolling_n = self._rolling_n
        horizon_s = self._rolling_s
        bucket_s = self._bucket_s
        timeline_add = self._timeline_add
        dups = self._dups
        # the one duplicate rule (tui.core.evidence.Duplicates.check), inlined: a call per record costs more than
        # the check (bench/bench_report.py); tests/unit/core/test_delivered_forgery.py holds the two equal
        seen = seen_add = None
        dup_times = dup_hashed = False
        max_sent = max_end = -math.inf
        if dups is not None:
            seen = dups.seen
            seen_add = seen.add
            dup_times, dup_hashed = dups.times, dups.hashed
            max_sent, max_end = dups.max_sent, dups.max_end
            bs_ts, bs_te, bs_tf = (a.append for a in dups.by_sent)
            be_ts, be_te, be_tf = (a.append for a in dups.by_end)
        st = self.current
        seq = self.seq_no
        requests = 0
        # TTFT / TPOT values of level ``st`` not yet in its stores: stored when the level changes and at
        # the end of the batch (a store keeps values, not their order), so a snapshot sees them all
        ttfts: list[float] = []
        # new values of each SLO kind after TTFT (tui.core.slos.SLO_TABLE: TPOT, ITL, E2E, ...; the same batching): the
        # three built-in ones derived inline, any further kind of the table by its row's ``derive``
        kinds = self.cfg.slos.table[1:]
        extra = tuple((i, k.derive) for i, k in enumerate(kinds) if i >= 3)
        lat: tuple[list, ...] = tuple([] for _ in kinds)
        tp_add, itl_add, e2e_add = lat[0].append, lat[1].append, lat[2].append
        # the run's span, the rolling window and the open sparkline bucket, held in locals for the batch (written
        # back before anything else may read them: another record's dispatch, a closed bucket, the batch's end)
        first_t, last_t = self.first_t, self.last_t
        owner, roll_good = self._roll_owner, self._roll_good
        b_idx, b_n, b_good, b_ttfts = self._bucket_idx, self._bucket_n, self._bucket_good, self._bucket_ttfts
        try:
            for r in items:
                seq += 1
                if type(r) is not RequestRecord:
                    if ttfts or lat[2]:
                        store(st, ttfts, lat)
                        ttfts = []
                        lat = tuple([] for _ in kinds)
                        tp_add, itl_add, e2e_add = lat[0].append, lat[1].append, lat[2].append
                    self.seq_no = seq
                    self.first_t, self.last_t, self._roll_owner, self._roll_good = first_t, last_t, owner, roll_good
                    self._bucket_idx, self._bucket_n, self._bucket_good, self._bucket_ttfts = b_idx, b_n, b_good, b_ttfts
                    self._add_other(r)
                    first_t, last_t, owner, roll_good = self.first_t, self.last_t, self._roll_owner, self._roll_good
                    b_idx, b_n, b_good, b_ttfts = self._bucket_idx, self._bucket_n, self._bucket_good, self._bucket_ttfts
                    st = self.current
                    if dups is not None:
                        dup_times = dups.times  # a run header says whether the file has a time axis
                    continue
                t_end = r.t_end
                t_sent = r.t_sent
                if seen is not None:  # the one duplicate rule: counted once, shown, forbids PASS
                    h = hash(r.id)
                    if h in seen:
                        dups.count(h, True)  # type: ignore[union-attr]
                        self._duplicate(r, evidence.SAME_ID)
                        continue
                    if dup_times:
                        if dup_hashed:  # a file in no order: every record by the hash of its times
                            tf = r.t_first_token
                            k = hash((t_sent, -1.0 if tf is None else tf, t_end))  # Duplicates.repeated's key
                            if k in seen:
                                dups.count(k, False)  # type: ignore[union-attr]
                                self._duplicate(r, evidence.SAME_TIMES)
                                continue
                            seen_add(k)  # type: ignore[misc]
                        elif t_sent > max_sent:  # after every earlier send: cannot repeat earlier times
                            max_sent = t_sent
                            if t_end > max_end:
                                max_end = t_end
                            tf = r.t_first_token
                            bs_ts(t_sent)
                            bs_te(t_end)
                            bs_tf(-1.0 if tf is None else tf)  # evidence.NO_FIRST
                        elif t_end > max_end:  # after every earlier end: neither
                            max_end = t_end
                            tf = r.t_first_token
                            be_ts(t_sent)
                            be_te(t_end)
                            be_tf(-1.0 if tf is None else tf)
                        elif dups.repeated(t_sent, r.t_first_token, t_end):  # type: ignore[union-attr]
                            # (this call may have turned the rule to hashes: every later record by its hash)
                            dup_hashed = dups.hashed  # type: ignore[union-attr]
                            self._duplicate(r, evidence.SAME_TIMES)
                            continue
                        else:
                            dup_hashed = dups.hashed  # type: ignore[union-attr]
                    seen_add(h)  # type: ignore[misc]
                requests += 1
                if first_t is None or t_sent < first_t:
                    first_t = t_sent
                if last_t is None or t_end > last_t:
                    last_t = t_end
                err = r.error
                if err is not None:
                    c = errors.get(err)
                    if c is None and len(errors) >= MAX_ERROR_CLASSES:  # a class named per record: bounded
                        errors[OTHER_ERRORS] = errors.get(OTHER_ERRORS, 0) + 1
                    else:
                        errors[err] = 1 if c is None else c + 1
                outcome, ttft_ms, misses = classify(r)  # the one rule: tui.core.slos.slo_rule
                if views:
                    recent_append((r, outcome, ttft_ms))  # rows are built at snapshot time only
                if r.phase != "measure":
                    self.warmup_total += 1
                    ws = self._warm_sends
                    if len(ws) < EVIDENCE_CAP:
                        ws.append(t_sent)
                    self._warm_tally.count((r.level, r.round), True, r.complete, err)
                    continue
                if st is None or st.level != r.level or st.round != r.round:
                    if ttfts or lat[2]:
                        store(st, ttfts, lat)
                        ttfts = []
                        lat = tuple([] for _ in kinds)
                        tp_add, itl_add, e2e_add = lat[0].append, lat[1].append, lat[2].append
                    nst = self._state_for(r.level, r.round)
                    if nst is None:  # beyond MAX_LEVELS distinct levels: counted, never judged
                        self._over_cap(r.level, r.round)
                        continue
                    st = self.current = nst
                # what the file says about this level, for the cross-checks (tui.core.evidence)
                rn = st.rec_n = st.rec_n + 1
                if err is not None:
                    st.rec_err += 1
                    ec = st.err_classes
                    ec[err] = ec.get(err, 0) + 1
                else:
                    if not r.complete:
                        st.rec_incomplete += 1
                    elif outcome == FAILED:
                        self._contradiction(r)
                    tf = r.t_first_token  # the step record's TTFT (tui.core.completeness)
                    if len(st.ttft0) < EVIDENCE_CAP:
                        st.ttft0.append(_INF if tf is None else tf - t_sent)
                    else:
                        so = st.step_over or step_over(st)  # past the cap: pending, folded in thousands
                        so.ttft_more.append(_INF if tf is None else tf - t_sent)
                        if len(so.ttft_more) >= FOLD_AT:
                            so.fold()
                if rn <= EVIDENCE_CAP:  # rec_n == len(times) / 3 up to the cap
                    st.times.extend((t_sent, t_end, t_sent - r.t_intended))
                else:
                    so = st.step_over or step_over(st)
                    so.lateness_more.append(t_sent - r.t_intended)
                    if len(so.lateness_more) >= FOLD_AT:
                        so.fold()
                if r.session is not None:  # a session workload (issue 23): its spans, bounded by EVIDENCE_CAP
                    sp = st.sessions
                    if sp is None:
                        sp = st.sessions = evidence.SessionSpans(EVIDENCE_CAP)
                    sp.add(r.session, r.turn, r.t_intended, t_sent, t_end)
                if err is not None:  # (None == "cancelled" would cost a rich comparison per request)
                    if err == "cancelled":
                        key = (r.level, r.round)
                        if outcome == EXCLUDED:  # still open when cancelled: counted and shown, never judged
                            self.cancelled_open[key] = self.cancelled_open.get(key, 0) + 1
                            continue
                        self.cancelled_late[key] = self.cancelled_late.get(key, 0) + 1
                    elif err == CLIENT and outcome == EXCLUDED:  # the client's own resources ran out: unknown
                        self._client_unknown(st, r, t_sent, t_end)
                        continue
                # counted tokens: one tuple and one dict update (TokenTally.pending, tallied when read)
                tk = st.tokens.pending
                # a session's turn asked its whole prompt (context_tokens), not only its user message
                asked_in = r.input_tokens_asked if r.session is None or r.context_tokens is None else r.context_tokens
                tkey = (asked_in, r.usage_input_tokens, r.input_tokens, r.output_tokens_asked,
                       r.usage_output_tokens, r.output_chunks, r.output_tokens)  # token_counts.record_key
                c = tk.get(tkey)
                if c is None:
                    tk[tkey] = 1
                    if len(tk) > st.tokens.cap:
                        st.tokens.flush()
                else:
                    tk[tkey] = c + 1
                pc = st.pcache  # the server's prefix-cache count (issue 23): a count, and the rest when it said
                if r.cached_tokens is None:
                    pc.n += 1
                else:
                    pc.add_record(r)
                good = outcome == "good"
                failed = outcome == "failed"
                # nothing missed, but an SLO in force could not be judged (the record lacks what it needs): unknown.
                # Never shown or counted as good, and PASS is blocked (unjudgeable_problems); the judge counts it
                # good, so a FAIL holds even if every such request was good (the upper bound), never a FAIL made of
                # requests nobody saw miss
                unjudged = outcome == EXCLUDED
                n = st.n = st.n + 1
                if r.turn is not None:  # the per-turn table (issue 23): the same outcome, the same TTFT
                    tt = st.turns
                    if tt is None:
                        tt = st.turns = turns.TurnTable()
                    tt.add(r.turn, good, None if failed else ttft_ms, r.context_tokens, r.input_tokens)
                if st.first_t is None or t_sent < st.first_t:
                    st.first_t = t_sent
                if st.last_t is None or t_end > st.last_t:
                    st.last_t = t_end
                tpot_ms = None
                ot = r.output_tokens or 0
                if failed:
                    st.failed += 1
                else:
                    if good:
                        st.good += 1
                    elif unjudged:
                        st.unjudged += 1
                    else:
                        st.slow += 1
                    st.completed += 1
                    if st.ttft_other is not None or r.t_first_reasoning is not None:  # both TTFTs exist
                        add_other_ttft(st, r, ttfts, answer_judged)
                    if ttft_ms is not None:  # None: reasoning and no answer token (a TTFT miss, tui.core.slos)
                        ttfts.append(ttft_ms)
                    if misses:
                        combos = st.combos
                        combos[misses] = combos.get(misses, 0) + 1
                    if ot:
                        st.out_tokens += ot
                        if good:
                            st.good_out_tokens += ot
                    # the per-token metrics (tui.core.slos: one derivation each; inlined on the hot path)
                    tl = r.t_last_token
                    if tl is None:
                        e2e_add((t_end - t_sent) * 1000.0)
                    else:
                        e2e_add((tl - t_sent) * 1000.0)
                        nt = r.usage_output_tokens
                        if nt is None:
                            nt = r.output_chunks
                            if nt is None:
                                nt = ot
                        if nt > 1:  # the one TPOT (tui.core.slos.tpot_ms): also the rolling window's and the P50's
                            tpot_ms = (tl - r.t_first_token) * 1000.0 / (nt - 1)  # type: ignore[operator]
                            tp_add(tpot_ms)
                    gap = r.itl_max_ms
                    if gap is None and r.token_offsets is not None:
                        gap = itl_ms(r)
                    if gap is not None:
                        itl_add(gap)
                    if extra:
                        for i, derive in extra:
                            v = derive(r, answer_judged)
                            if v is not None:
                                lat[i].append(v)
                # the verdict: one judge per level, re-checked after every measured outcome (its window
                # starts when the level's first measured request was sent)
                judge = st.judge
                before = judge.state
                judge.add(t_end, good or unjudged, t_sent)
                if judge.state != before or n == 1:  # the first check of a level is what a watcher sees first
                    timeline_add(st, judge.state, n, t_end)
                if not views:
                    continue
                # rolling window: the current level's last ``rolling_n`` requests, else those that ended in the last
                # ``rolling_s``
                if st is not owner and (owner is None or st.order > owner.order):
                    roll.clear()
                    roll_good = 0
                    owner = st
                if st is owner:
                    if len(roll) == roll_max:
                        roll_good -= roll[0][1]
                    roll_append((t_end, good, ttft_ms, failed, ot, tpot_ms))
                    if good:
                        roll_good += 1
                    if rolling_n:
                        while len(roll) > rolling_n:
                            roll_good -= roll.popleft()[1]
                    else:
                        horizon = t_end - horizon_s
                        while roll and roll[0][0] < horizon:
                            roll_good -= roll.popleft()[1]
                # sparkline buckets
                bidx = int(t_end // bucket_s)
                if bidx != b_idx:
                    if b_idx is not None:
                        self._bucket_n, self._bucket_good, self._bucket_ttfts = b_n, b_good, b_ttfts
                        self._close_bucket()
                        b_n = b_good = 0
                        b_ttfts = self._bucket_ttfts
                    b_idx = bidx
                b_n += 1
                if good:
                    b_good += 1
                if ttft_ms is not None and len(b_ttfts) < 20_000:
                    b_ttfts.append(ttft_ms)
        finally:
            self.first_t, self.last_t, self._roll_owner, self._roll_good = first_t, last_t, owner, roll_good
            self._bucket_idx, self._bucket_n, self._bucket_good, self._bucket_ttfts = b_idx, b_n, b_good, b_ttfts
            if ttfts or lat[2]:
                store(st, ttfts, lat)
            self.seq_no = seq
            self.requests_total += requests
            if dups is not None:
                dups.max_sent, dups.max_end = max_sent, max_end

    def _client_unknown(self, st: LevelState, r: RequestRecord, t_sent: float, t_end: float) -> None:
        """A measured request the client itself could not carry out (``error: "client"``, outcome still open):
        counted per errno name, never in the level's n / good / failed (not the server's outcome); the judge counts
        it good, so a FAIL is one the server's failures alone prove (``_client_limited`` forbids PASS)."""
        st.client += 1
        kind = clientlimit.kind_of(r.error_detail)
        st.client_kinds[kind] = st.client_kinds.get(kind, 0) + 1
        judge = st.judge
        before = judge.state
        judge.add(t_end, True, t_sent)
        if judge.state != before or judge.n == 1:
            self._timeline_add(st, judge.state, judge.n, t_end)

    def _contradiction(self, r: RequestRecord) -> None:
        """A record that says complete but contradicts itself: judged failed (the outcome rule), counted, shown."""
        self.contradictions += 1
        why = contradiction(r)
        if why is not None and len(self.examples) < MAX_EXAMPLES:
            where = f"{self.source}: " if self.source else ""
            self.examples.append(f"{where}request {r.id!r}: {why}: counted as failed")

    def _duplicate(self, r: RequestRecord, how: int) -> None:
        self.duplicates += 1
        if len(self.examples) < MAX_EXAMPLES:
            where = f"{self.source}: " if self.source else ""
            if how == evidence.SAME_TIMES:
                self.examples.append(f"{where}request {r.id!r} has the send, first-token and end times of an earlier "
                                     "request under another id: counted once (the first)")
            else:
                self.examples.append(f"{where}request id {r.id!r} appears again: counted once (the first)")

    def _close_bucket(self) -> None:
        if self._bucket_n:
            self._good_series.append(self._bucket_good / self._bucket_n)
            v = stats.nearest_rank(sorted(self._bucket_ttfts), 0.95)
            self._p95_series.append(v if v is not None else 0.0)
        self._bucket_good = self._bucket_n = 0
        self._bucket_ttfts = []

    def _add_queue(self, q: QueueSample) -> None:
        if q.client_in_flight is not None:
            self._client_in_flight = q.client_in_flight
            self._queue_in_flight.add(q.t, q.client_in_flight)
            self._inflight_series.append(float(q.client_in_flight))
        if q.source in ("none", "client"):
            return
        self._queue_latest = q
        self._queue_source = q.source
        u = q.kv_cache_usage
        if u is not None and math.isfinite(u) and u >= 0:
            self._kv_usage_series.append(u)
            self._kv_usage_n += 1
            self._kv_usage_peak = u if self._kv_usage_peak is None else max(self._kv_usage_peak, u)
            cur = self.current
            if cur is not None:
                cur.peak_kv_usage = u if cur.peak_kv_usage is None else max(cur.peak_kv_usage, u)
        if q.waiting is not None:
            self._waiting_series.append(q.waiting)
            self._max_waiting = q.waiting if self._max_waiting is None else max(self._max_waiting, q.waiting)
            st = self.current
            if st is not None:
                st.max_waiting = q.waiting if st.max_waiting is None else max(st.max_waiting, q.waiting)
                if math.isfinite(q.waiting):
                    st.waiting_sum += q.waiting
                    st.waiting_n += 1
        if q.running is not None:
            self._running_series.append(q.running)

    def _add_gpu(self, g: GpuSample) -> None:
        if g.device not in self._gpu and len(self._gpu) >= MAX_GPU_DEVICES:
            return  # a device number per sample would grow without end: the first MAX_GPU_DEVICES are shown
        d = self._gpu.setdefault(g.device, {"series": deque(maxlen=SERIES_LEN), "peak": None})
        d["name"] = g.name
        d["util"] = g.utilization
        used = None if g.memory_used is None else g.memory_used / GIB
        d["used"] = used
        d["total"] = None if g.memory_total is None else g.memory_total / GIB
        if used is not None:
            d["series"].append(used)
            d["peak"] = used if d["peak"] is None else max(d["peak"], used)
            st = self.current
            if st is not None:
                st.peak_gpu_gib = used if st.peak_gpu_gib is None else max(st.peak_gpu_gib, used)

    def set_client_in_flight(self, n: int) -> None:
        self._client_in_flight = n
