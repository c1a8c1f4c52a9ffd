"""The whole-file checks of the Monitor (``WholeFileChecks``): ``finish`` holds a file read whole against itself (tui.core.evidence, tui.core.completeness, the tool's summary, the settings) and the digest chain's result."""

from __future__ import annotations

from typing import Any

import tui.core.completeness as completeness
import tui.core.evidence as evidence
import tui.core.importers.crosscheck as crosscheck
from tui.core.monitor.level import LevelState
from tui.core.monitor.view import ReadSide
from tui.core.monitor.words import verdict_from_judge
from tui.core.states import FAIL, INSUFFICIENT_WINDOW
from tui.core.textfmt import fmt_minutes


class WholeFileChecks(ReadSide):
    """Once per file: the file held against itself when it has all been read (``finish``) and its digest chain."""

    def finish(self) -> None:
        """The whole file has been read: hold what it says against itself (tui.core.evidence) and record every
        contradiction as a reason that forbids PASS. Readers of complete files call it once at the end; a live
        run does not (its steps are still being written)."""
        self.finished = True
        if self._shadow is not None:
            self._shadow.finish()
        header = self.header
        load = header.get("load")
        ld: dict = load if isinstance(load, dict) else {}
        by_key = {(st.level, st.round): st for st in self.levels.values()}
        load_run = completeness.is_load_run(header)  # issue 35: complete or not PASS
        # a step record's verdict was reached at the run's own settings: held against the level judged at those
        # (the second monitor when this one re-judges at a reader's flags), never against a re-judgement
        rs = self.run_settings_monitor()
        settings = rs._settings_words()

        def recomputed(key: tuple) -> str:
            return rs._recomputed_state(rs.levels.get(key) if rs is not self else by_key.get(key))
        # step end records against the request records of their level and round
        if self.step_info:
            for key, info in self.step_info.items():
                st = by_key.get(key)
                name = self._name_of(*key)
                n, err, inc = (st.rec_n, st.rec_err, st.rec_incomplete) if st is not None else (0, 0, 0)
                problem = evidence.step_count_problem(name, info, n, err, err + inc)
                if problem:
                    self.block_pass(problem, key)
                if load_run and not all(isinstance(info.get(k), int) for k in ("requests", "completed", "failed")):
                    self.block_pass(f"{name}: the step record holds no request counts (requests, completed, failed): "
                                    "its request records cannot be checked against it", key)
                for problem in completeness.step_problems(
                        name, info, (n, err, inc),
                        st.err_classes if st is not None else {}, st.times[2::3] if st is not None else (),
                        st.ttft0 if st is not None else (), st.step_over if st is not None else None,
                        recomputed(key), settings):
                    self.block_pass(problem, key)
            for key, st in by_key.items():
                if st.rec_n and key not in self.step_info:
                    name = evidence.level_name(key[0], key[1], self._mode_of(st))
                    self.block_pass(f"{name}: {st.rec_n} request records but no step end record for them (the "
                                    "file has step records for other levels): records added or relabelled", key)
        if load_run:  # its planned steps present in order (or a recorded stop), and its seal
            ends = [(key, probe, info) for key, probe, info, _mode in self.step_ends]
            def held_back(key: tuple) -> bool:  # the delivered-load check, on the whole file
                st = by_key.get(key)
                if st is None or not st.n:
                    return False
                st.delivered_cache = None
                return bool(self.delivered(st).problem)
            for problem in completeness.plan_problems(header, ends, self._name_of, recomputed, held_back):
                self.block_pass(problem)
            problem = completeness.seal_problem(self.records_integrity)
            if problem:
                self.block_pass(problem)
        # planned rounds against those present (a sweep that stopped at a FAIL legitimately has fewer; a load
        # run's plan is held against its steps above)
        stopped_on_fail = bool(ld.get("stop_on_fail")) and any(
            self.verdict_for(st).state == FAIL for st in self.levels.values() if st.n)
        if not stopped_on_fail and not load_run:
            rounds: dict[float | None, list[int]] = {}
            for (lv, rnd), st in by_key.items():
                if st.rec_n:
                    rounds.setdefault(lv, []).append(rnd)
            for lv, present in rounds.items():
                st0 = by_key[(lv, present[0])]
                problem = evidence.rounds_problem(ld.get("rounds"), present,
                                                  evidence.level_name(lv, 1, self._mode_of(st0)).rsplit(" round", 1)[0])
                if problem:
                    for rnd in present:
                        self.block_pass(problem, (lv, rnd))
        # warmup records in the middle of the measured load
        fm = min((min(st.times[0::3]) for st in self.levels.values() if st.times), default=None)
        if fm is not None and self._warm_sends:
            late = sum(1 for t in self._warm_sends if t > fm)
            problem = evidence.warmup_problem(late, self.warmup_total)
            if problem:
                self.block_pass(problem)
        # the loop mode the delivered load is read by: known in a servewatch run, one for header and steps
        run_file = self.run_file()
        for key, st in by_key.items():
            if st.rec_n:
                problem = evidence.mode_problem(ld.get("mode"), (st.mode,), run_file)
                if problem:
                    self.block_pass(f"{evidence.level_name(key[0], key[1], self._mode_of(st))}: {problem}", key)
                if run_file and self._mode_of(st) == "open" and key in self.step_info and \
                        evidence.recorded_p99(self.step_info[key], "open") is None:
                    self.block_pass(f"{evidence.level_name(key[0], key[1], 'open')}: the step record carries no "
                                    "dispatch lateness p99 (lateness_p99_ms): the requests' dispatch times "
                                    "(t_intended) cannot be held against it", key)
        # delivered load: a level not reached can never PASS (shown with the measured figure); recomputed now that
        # the step records and queue samples are all in
        for st in by_key.values():
            st.delivered_cache = None
        for key, st in by_key.items():
            if st.n:
                d = self.delivered(st)
                if d.problem:
                    self.block_pass(f"{evidence.level_name(key[0], key[1], self._mode_of(st))} {d.problem}", key)
        for key, st in by_key.items():
            for problem in self.unjudgeable_problems(st):
                self.block_pass(problem, key)
        self._hold_against_tool_summary()
        if self.contradictions:
            self._notes.append(f"{self.contradictions} request record(s) say complete but contradict themselves (an "
                               "HTTP status other than 2xx, 0 output tokens, an abort/error finish reason or no first "
                               "token): counted as failed")
        for st in self.levels.values():
            st.verdict_cache = None

    def _hold_against_tool_summary(self) -> None:
        """An imported file against its own tool's counts (``source.tool_summary``: tui.core.importers.crosscheck):
        each disagreement forbids PASS run-wide, with both numbers; what was checked is a note."""
        src = self.header.get("source") if self.header else None
        ts = src.get("tool_summary") if isinstance(src, dict) else None
        if ts is None:
            return
        tally = crosscheck.Tally(warmup=self._warm_tally.warmup, unusable=sum(self.unreadable.values()))
        for key, st in self.levels.items():
            if st.rec_n:
                canc = self.cancelled_open.get(key, 0) + self.cancelled_late.get(key, 0)
                tally.measured[key] = crosscheck.Counts(st.rec_n, st.rec_n - st.rec_err - st.rec_incomplete,
                                                        st.rec_err - canc + st.rec_incomplete, canc)
        problems, notes = crosscheck.problems(ts, tally)
        for problem in problems:
            self.block_pass(problem)
        self._notes.extend(n for n in notes if n not in self._notes)

    def _recomputed_state(self, st: LevelState | None) -> str:
        """A level's verdict from its request records alone (its judge, and the unreadable lines that may be
        its requests), before any evidence problem holds it back: what its step record's verdict is held against."""
        if st is None or st.n == 0:
            return INSUFFICIENT_WINDOW
        v = verdict_from_judge(st.judge, self.cfg)
        lost = self.unreadable_requests((st.level, st.round))
        if lost:
            v = self._hold_against_unreadable(st.judge, v, lost)
        return v.state

    def _settings_words(self) -> str:
        cfg = self.cfg
        return (f"{cfg.slos.describe()}, target {cfg.target:.0%}, window {fmt_minutes(cfg.min_window_s)}, "
                f"alpha {cfg.alpha:g}")

    # ------------------------------------------------------------------ records integrity (tui.core.chain)
    def set_records_integrity(self, integrity: Any) -> None:
        """The digest chain's verification of the file (``tui.core.chain.RecordsIntegrity``): shown in every view;
        each of its problems (a broken chain, a signature that does not verify) forbids PASS run-wide."""
        self.records_integrity = integrity
        if self._shadow is not None:
            self._shadow.set_records_integrity(integrity)
        for problem in integrity.problems:
            self.block_pass(f"records integrity: {problem}")
