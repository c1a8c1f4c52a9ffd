"""The read side of the Monitor (``ReadSide``): snapshots, level rows, windows and verdicts."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import tui.core.clientlimit as clientlimit
import tui.core.evidence as evidence
import tui.core.provenance as provenance
import tui.core.stats as stats
from tui.core.capacity import budget_candidate, cap_rows, measure_capacity
from tui.core.levels import fmt_level
from tui.core.monitor.budget import BudgetTracking
from tui.core.monitor.config import (
    EVIDENCE_CAP,
)
from tui.core.monitor.level import LevelState, step_seconds
from tui.core.monitor.words import verdict_from_judge
from tui.core.outcomes import EXCLUDED, SLOW
from tui.core.prefix_cache import by_level as prefix_cache_by_level
from tui.core.prefix_cache import is_known as prefix_cache_known
from tui.core.prefix_cache import level_summary as prefix_cache_summary
from tui.core.prefix_cache import short_text as prefix_cache_short
from tui.core.records.request import RequestRecord
from tui.core.severity import NA, fraction_severity
from tui.core.slos import MISS_MASK, NOJUDGE_SHIFT, miss_names
from tui.core.snapshot import (
    FractionStat,
    LevelRow,
    Percentile,
    QueueState,
    RequestRow,
    Snapshot,
    Verdict,
    WindowStat,
)
from tui.core.states import FAIL, INSUFFICIENT_WINDOW, PASS, UNDECIDED
from tui.core.textfmt import fmt_minutes
from tui.core.token_counts import TokenTally
from tui.core.verdict import LevelJudge

#: the rolling window's label in a whole-file read for a document, which keeps no console view (``Monitor(views=False)``)
VIEWS_NOT_KEPT = "rolling window not kept (a whole-file read)"


class ReadSide(BudgetTracking):
    """Snapshots out: the windows, each level's verdict and row, the queue and GPU states (the console asks at
    2-4 Hz; a report once)."""

    def delivered(self, st: LevelState) -> evidence.Delivered:
        """The delivered-load check of a level (tui.core.evidence.delivered), recomputed when the level has grown
        by 2% since the last time (or after ``finish``): the console asks at every tick."""
        n = st.rec_n if st.rec_n < EVIDENCE_CAP else EVIDENCE_CAP
        c = st.delivered_cache
        if c is not None and (c[0] == n or (not self.finished and n - c[0] < max(1, c[0] // 50))):
            return c[1]
        ts = st.times
        step = self.step_info.get((st.level, st.round))
        if st.sessions is not None:  # a session workload: sessions in flight / session starts (issue 23)
            d = evidence.delivered_sessions(st.level, self._mode_of(st), st.sessions, self._slo_ms, self._cv2(),
                                            sends=ts[0::3], ends=ts[1::3], lateness_s=ts[2::3], step=step,
                                            total=st.rec_n, axis=self.time_axis)
        else:
            d = evidence.delivered(st.level, self._mode_of(st), ts[0::3], ts[1::3], ts[2::3], self._slo_ms,
                                   self._cv2(), step=step, queue=self._queue_in_flight, total=st.rec_n,
                                   axis=self.time_axis)
        st.delivered_cache = (n, d)
        return d

    def verdict_for(self, st: LevelState | None) -> Verdict:
        """The verdict of one level: the state its ``LevelJudge`` reached after the last measured
        request (the console, report, run, sweep and accept all read it from here)."""
        cfg = self.cfg
        thr = self.test.threshold
        if st is None or (st.n == 0 and not st.client):
            return Verdict(
                state=INSUFFICIENT_WINDOW, reason="no measured requests yet",
                missing=f"need {self.min_requests} more requests, {fmt_minutes(cfg.min_window_s)} more",
                n=0, good=0, elapsed_s=0.0, need_requests=self.min_requests, need_seconds=cfg.min_window_s,
                e_pass=1.0, e_fail=1.0, threshold=thr, vif=1.0, n_eff=0.0, bursty=False,
                target=cfg.target, alpha=cfg.alpha,
            )
        j = st.judge
        lost = self.unreadable_requests((st.level, st.round))
        key = (j.n, j.good, j.t_last, j.vif, lost, self.duplicates)
        c = st.verdict_cache
        if c is None or c[0] != key:  # the verdict is a function of the judge; the load generator asks often
            v = verdict_from_judge(j, cfg, st.unjudged)
            if lost:
                v = self._hold_against_unreadable(j, v, lost)
            if st.degraded and v.state == "PASS":
                v = dataclasses.replace(v, state="UNDECIDED", reason=st.degraded)
            blocks = self.pass_blocks((st.level, st.round))
            nj = self.unjudgeable_problems(st)
            if nj:
                blocks = blocks + [b for b in nj if b not in blocks]
            if not self.finished and v.state == PASS:  # live: the load must have been delivered (finish() adds it)
                d = self.delivered(st)
                if d.problem:
                    blocks = blocks + [d.problem]
            if blocks and v.state == PASS:
                v = dataclasses.replace(v, state=UNDECIDED, reason="cannot PASS: " + "; ".join(blocks))
            if st.unjudged and v.state == FAIL:
                v = dataclasses.replace(v, reason=v.reason + f" This holds even counting the {st.unjudged} requests "
                                        "not judgeable on an SLO as good (they are not shown as good).")
            if st.client or st.client_step:
                v = self._client_limited(st, v)
            c = st.verdict_cache = (key, v)
        return c[1]

    def _hold_against_unreadable(self, j: LevelJudge, v: Verdict, lost: int) -> Verdict:
        """A FAIL must hold even if every one of the ``lost`` unreadable request lines had been good, a PASS even
        if every one had failed: the same judge re-checked with them added (``LevelJudge.with_unknown``; for a
        FAIL as one burst of good outcomes, which the dependence correction sees, so that a FAIL is kept only if it
        would hold wherever they were; for a PASS under the correction in force: a burst of failures in a run
        without any would make every PASS UNDECIDED over one line); otherwise the level is UNDECIDED and the reason names the count."""
        if v.state != FAIL and v.state != PASS:
            return v
        alt = j.with_unknown(0, lost, burst=False) if v.state == PASS else j.with_unknown(lost, lost, burst=True)
        if v.state == FAIL and alt.state != FAIL and j.closed().state != FAIL:
            # closing the open batches alone (nothing added) already changes the state: the batch-means estimate
            # moves with the last, partial batch, not with the unreadable lines. Judge them under the correction
            # in force instead, as outcomes added at the end
            alt = j.with_unknown(lost, lost, burst=False)
        as_what = "good" if v.state == FAIL else "failed"
        if alt.state == v.state:
            lines = "line" if lost == 1 else "lines"
            return dataclasses.replace(v, reason=v.reason + f" This holds even counting the {lost} unreadable "
                                       f"request {lines} as {as_what}.")
        anywhere = self.unreadable.get(None, 0)
        where = (f" ({anywhere} of them name no level and are counted against every level)" if anywhere else "")
        return dataclasses.replace(v, state=UNDECIDED, reason=(
            f"{lost} request {'line' if lost == 1 else 'lines'} unreadable: counted as {as_what} "
            f"{'it' if lost == 1 else 'they'} would change this {v.state}{where}; "
            f"their outcome is unknown, so the verdict is not decided. Judged on the readable lines: " + v.reason))

    def client_limited_text(self, st: LevelState) -> str | None:
        """The client_limited sentence of a level (what ran out, what to do), or None when it is not."""
        if st.client:
            return clientlimit.describe(st.client, st.client_kinds, clientlimit.fd_limit_of(self.header),
                                        self._mode_of(st), of=st.client + st.n)
        if st.client_step:
            return ("client_limited: the step record says the client ran out of its own resources (no request record "
                    "of the level shows it)")
        return None

    def _client_limited(self, st: LevelState, v: Verdict) -> Verdict:
        """A client-limited level: it cannot PASS; FAIL only when the server's failures alone prove it (the judge
        counted the client's failures good); otherwise UNDECIDED with what ran out and what to do."""
        text = self.client_limited_text(st)
        if text is None:
            return v
        if v.state == FAIL:
            if not st.client:
                return v
            return dataclasses.replace(v, reason=(
                f"FAIL on the server's failures alone ({text}). The {st.client:,} requests that failed in the client "
                f"are counted good here (their outcome at the server is unknown: the most favourable case) and the "
                f"evidence still shows FAIL: {v.reason}"))
        if st.n:
            server = (f"the server's own outcomes ({st.good:,} good of the {st.n:,} requests it answered or failed) "
                      "do not show FAIL")
        else:
            server = "the server saw none of them"
        prev = v.reason if v.reason.startswith("cannot PASS: ") else None
        return dataclasses.replace(v, state=UNDECIDED, missing=None, reason=(
            f"cannot PASS: {text}. Their outcome at the server is unknown, so the level cannot PASS, and {server}."
            + (f" Also {prev}" if prev else "")))

    def unjudgeable_problems(self, st: LevelState) -> list[str]:
        """One sentence per SLO in force that some completed requests of the level could not be judged on (never
        good; each forbids PASS): "TPOT not judgeable on 400 of 400 requests: the file has no last-token times"."""
        out: list[str] = []
        if not any(bits >> NOJUDGE_SHIFT for bits in st.combos):
            return out
        nojudge = st.miss_counts()[2]
        name = evidence.level_name(st.level, st.round, self._mode_of(st))
        for slo, k in nojudge.items():
            needs = next(kind.needs for kind in st.table if kind.name == slo)
            out.append(f"{name}: {slo} not judgeable on {k} of {st.rec_n} requests: the file has no {needs}")
        return out

    # ------------------------------------------------------------------ snapshot
    def _window_from_state(self, st: LevelState | None) -> WindowStat:
        cfg = self.cfg
        if st is None or st.n == 0:
            return self._empty_window("cumulative")
        if st.ttft.approximate:
            ttft = tuple(
                Percentile(q=q, value_ms=st.ttft.quantile(q), n=st.ttft.n,
                           supported=st.ttft.n >= stats.n_needed(q), n_needed=stats.n_needed(q), approximate=True)
                for q in stats.selected()
            )
            ttft_inf = ttft  # documented: beyond the exact cap only the completed-only reading is kept exactly
        else:
            srt = st.sorted_ttfts()
            ttft = stats.percentiles(srt)
            ttft_inf = stats.percentiles(srt, extra_inf=st.failed)
        secs = max(0.0, (st.last_t or 0) - (st.first_t or 0))
        lo, hi = stats.wilson(st.good, st.n)
        frac = st.good / st.n
        misses, combos, nojudge = st.miss_counts()
        return WindowStat(
            label="cumulative",
            good=FractionStat(st.good, st.n, frac, lo, hi, fraction_severity(frac, cfg.target)),
            ttft=ttft,
            ttft_fail_inf=ttft_inf,
            completed=st.completed,
            failed=st.failed,
            slow=st.slow,
            req_per_s=st.n / secs if secs > 0 else None,
            output_tok_per_s=st.out_tokens / secs if secs > 0 else None,
            goodput_per_s=st.good / secs if secs > 0 else None,
            tpot_ms_p50=st.lat[0].quantile(0.5),
            seconds=secs,
            latency={"ttft": ttft, **{k.key: st.percentiles_of(k.key, s) for k, s in zip(st.table[1:], st.lat)},
                     **self._both_ttfts(st, ttft)},
            misses=misses, miss_combos=combos, unjudgeable=nojudge,
            good_output_tok_per_s=st.good_out_tokens / secs if secs > 0 else None,
        )

    def _both_ttfts(self, st: LevelState, judged: tuple[Percentile, ...]) -> dict[str, tuple[Percentile, ...]]:
        """``{"ttft_answer": ..., "ttft_any": ...}`` when the level saw reasoning (both TTFTs exist), else {}."""
        if st.ttft_other is None:
            return {}
        other = st.percentiles_of("ttft_other", st.ttft_other)
        if self.cfg.slos.ttft_of == "answer":
            return {"ttft_answer": judged, "ttft_any": other}
        return {"ttft_answer": other, "ttft_any": judged}

    def _empty_window(self, label: str) -> WindowStat:
        return WindowStat(
            label=label,
            good=FractionStat(0, 0, None, None, None, NA),
            ttft=stats.percentiles([]),
            ttft_fail_inf=stats.percentiles([]),
            completed=0, failed=0, slow=0, req_per_s=None, output_tok_per_s=None,
            goodput_per_s=None, tpot_ms_p50=None, seconds=0.0,
        )

    def _rolling(self) -> WindowStat:
        cfg = self.cfg
        if not self._views:
            return self._empty_window(VIEWS_NOT_KEPT)
        label = f"last {cfg.rolling_n} requests" if cfg.rolling_n else f"last {cfg.rolling_s:g} s"
        owner = self._roll_owner
        if owner is not None and owner.level is not None:
            label += f" of level {fmt_level(owner.level)}"
        roll = self._roll
        n = len(roll)
        if n == 0:
            return self._empty_window(label)
        ttfts = sorted(x[2] for x in roll if not x[3] and x[2] is not None)
        failed = sum(1 for x in roll if x[3])
        good = self._roll_good
        tpots = sorted(x[5] for x in roll if x[5] is not None)
        out_tok = sum(x[4] for x in roll if not x[3])
        secs = cfg.rolling_s if not cfg.rolling_n else max(0.0, roll[-1][0] - roll[0][0])
        span = max(0.0, roll[-1][0] - roll[0][0])
        secs = min(secs, span) if span > 0 else 0.0
        lo, hi = stats.wilson(good, n)
        frac = good / n
        return WindowStat(
            label=label,
            good=FractionStat(good, n, frac, lo, hi, fraction_severity(frac, cfg.target)),
            ttft=stats.percentiles(ttfts),
            ttft_fail_inf=stats.percentiles(ttfts, extra_inf=failed),
            completed=n - failed,
            failed=failed,
            slow=n - failed - good,
            req_per_s=n / secs if secs > 0 else None,
            output_tok_per_s=out_tok / secs if secs > 0 else None,
            goodput_per_s=good / secs if secs > 0 else None,
            tpot_ms_p50=stats.nearest_rank(tpots, 0.5),
            seconds=secs,
        )

    def _missed_text(self, r: RequestRecord, outcome: str) -> str:
        """Which SLOs a slow request missed ("TTFT+TPOT") and which it could not be judged on ("ITL?"): the one
        rule again, for the capped recent rows only (the hot path keeps no per-request miss bits)."""
        if outcome != SLOW and outcome != EXCLUDED:
            return ""
        bits = self._classify(r)[2]
        table = self.cfg.slos.table
        return "+".join(miss_names(bits & MISS_MASK, table)
                        + tuple(f"{n}?" for n in miss_names(bits >> NOJUDGE_SHIFT, table)))

    def level_rows(self) -> tuple[LevelRow, ...]:
        rows = []
        for st in self.levels.values():
            if st.n == 0 and not st.client:
                continue
            d = self.delivered(st)
            problems = self.pass_blocks((st.level, st.round))
            problems = problems + [p for p in self.unjudgeable_problems(st) if p not in problems]
            limited = self.client_limited_text(st)
            if limited is not None:
                problems.append(limited)
            rows.append(LevelRow(
                level=st.level, round=st.round, mode=st.mode, window=self._window_from_state(st),
                verdict=self.verdict_for(st), saturated=st.saturated, lateness_p99_ms=st.lateness_p99_ms,
                max_waiting=st.max_waiting, peak_gpu_gib=st.peak_gpu_gib,
                mean_waiting=st.waiting_sum / st.waiting_n if st.waiting_n else None, queue_samples=st.waiting_n,
                peak_kv_usage=st.peak_kv_usage,
                cancelled_open=self.cancelled_open.get((st.level, st.round), 0),
                delivered=d.figure, not_reached=d.problem,
                problems=tuple(problems),
                server_histograms=self.step_info.get((st.level, st.round), {}).get("server_histograms"),
                tokens=st.tokens.summary(),
                turns=None if st.turns is None else st.turns.rows(),
                prefix_cache=prefix_cache_summary(
                    st.pcache, (self.step_info.get((st.level, st.round), {}).get("prefix_cache"),)),
                search_probe=bool(self.step_info.get((st.level, st.round), {}).get("search_probe")),
                step_s=step_seconds(self.step_info.get((st.level, st.round), {})),
                client_limited=st.client, client_limited_kinds=dict(st.client_kinds) if st.client else None,
            ))
        return tuple(rows)

    @staticmethod
    def _prefix_cache_text(st: Any, levels: Sequence[LevelRow]) -> str | None:
        """The console's prefix-cache line for the current level, None when nothing is known there."""
        if st is None:
            return None
        for row in levels:
            if row.level == st.level and row.round == st.round and row.prefix_cache:
                return prefix_cache_short(row.prefix_cache) if prefix_cache_known(row.prefix_cache) else None
        return None

    def prefix_cache_by_level(self) -> dict:
        """``{level: tui.core.prefix_cache.level_summary}`` with the rounds of a level merged (compare's view)."""
        tallies = {k: st.pcache for k, st in self.levels.items() if st.n}
        steps = {k: info.get("prefix_cache") for k, info in self.step_info.items()}
        return prefix_cache_by_level(tallies, steps)

    def tokens_summary(self) -> dict | None:
        """Counted tokens over every measured level (``TokenTally.summary()`` of the levels' tallies merged); None
        before any measured request."""
        whole = TokenTally()
        for st in self.levels.values():
            if st.n:
                whole.merge(st.tokens)
        return whole.summary() if whole.added else None

    def _queue_state(self) -> QueueState:
        q = self._queue_latest
        return QueueState(
            source=self._queue_source,
            waiting=None if q is None else q.waiting,
            running=None if q is None else q.running,
            kv_cache_usage=None if q is None else q.kv_cache_usage,
            client_in_flight=self._client_in_flight,
            waiting_series=tuple(self._waiting_series),
            running_series=tuple(self._running_series),
            in_flight_series=tuple(self._inflight_series),
            max_waiting=self._max_waiting,
        )

    def snapshot(self) -> Snapshot:
        st = self.current
        header = self.header
        synthetic = bool(header.get("synthetic", False))
        notes = list(self._notes)
        if not header and self.requests_total:
            notes.append("no run header: provenance unknown")
        series_good = list(self._good_series)
        series_p95 = list(self._p95_series)
        if self._bucket_n:  # include the bucket still filling
            series_good.append(self._bucket_good / self._bucket_n)
            v = stats.nearest_rank(sorted(self._bucket_ttfts), 0.95)
            series_p95.append(v if v is not None else 0.0)
        elapsed = 0.0
        if self.first_t is not None and self.last_t is not None:
            elapsed = self.last_t - self.first_t
        levels = self.level_rows()
        cand, fits = budget_candidate(self.budget)
        cap = measure_capacity(cap_rows(self.source, levels, header), cand, fits)
        return Snapshot(
            seq=self.seq_no,
            source=self.source,
            synthetic=synthetic,
            header=header,
            run_elapsed_s=elapsed,
            current_level=None if st is None else st.level,
            current_round=1 if st is None else st.round,
            cumulative=self._window_from_state(st),
            rolling=self._rolling(),
            verdict=self.verdict_for(st),
            levels=levels,
            recent=tuple(
                RequestRow(r.id, r.level, r.round, r.phase, ttft_ms,
                           r.output_tokens, outcome, r.error, (r.t_end - r.t_sent) * 1000.0, r.t_end,
                           self._missed_text(r, outcome))
                for r, outcome, ttft_ms in self._recent
            ),
            good_series=tuple(series_good),
            p95_series=tuple(series_p95),
            target=self.cfg.target,
            slos=self.cfg.slos,
            tokens=self.tokens_summary(),
            prefix_cache_text=self._prefix_cache_text(st, levels),
            queue=self._queue_state(),
            gpu=self._gpu_state(),
            errors_by_class=dict(self.errors_by_class),
            requests_total=self.requests_total,
            warmup_total=self.warmup_total,
            malformed=self.malformed,
            malformed_examples=tuple(self.examples),
            unknown_types=self.unknown_types,
            duplicates=self.duplicates,
            truncated=self.truncated,
            host=dict(self._host),
            notes=tuple(notes),
            budget=self.budget,
            budget_view=self.budget_view_now(),
            provenance=provenance.describe(header),
            provenance_short=provenance.short(header),
            timeline=self.timeline(),
            timeline_omitted=self.timeline_omitted,
            cancelled_open=sum(self.cancelled_open.values()),
            cancelled_late=sum(self.cancelled_late.values()),
            capacity=cap,
            evidence_problems=self.evidence_problems(),
            levels_over_cap=self.levels_over_cap,
            records_integrity=self.records_integrity,
            settings=self.settings,
            run_levels=None if self._shadow is None else self._shadow.level_rows(),
            run_verdict=None if self._shadow is None else self._shadow.verdict_for(self._shadow.current),
        )
