"""Drill files written as `servewatch drill` writes them, in process and in well under a second: the real Recorder
(digest chain, seal), the run header's ``load.drill`` block and ``verdict_settings``, phase records, and step records
made by the load generator's own ``step_end_record`` with the verdict its Monitor gives at the step's end (issue 39).

The requests are an open loop at constant arrivals: ``rate`` req/s, each outcome chosen by ``outcome(phase, t)`` with
``t`` the seconds since the reference (the spike's end, the fault's start): ``"good"`` (TTFT 50 ms), ``"slow"`` (TTFT
2 s), ``"failed"`` (a refused connection, 5 ms). Everything here is a test fixture: the headers say ``synthetic:
false`` only because the judgement is what is being tested (a SYNTHETIC file never exits 0).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.support.evidence_files import T0
from tui.core.drill.settings import DrillPlan
from tui.core.monitor import Monitor, MonitorConfig, settings_of
from tui.core.records import parse_object
from tui.core.slos import Slos
from tui.core.verdict_settings import header_block
from tui.sources.load.steps import Step, step_end_record
from tui.sources.recorder import Recorder

Outcome = Callable[[str, float], str]
CFG = MonitorConfig(slos=Slos(ttft_ms=500.0), target=0.9, min_window_s=20.0, check_duplicate_ids=False)


def plan(kind: str = "spike", rate: float = 10.0, *, baseline_s: float = 20.0, recovery_s: float = 40.0,
         window_s: float = 2.0, step_s: float = 1.0, hold_s: float = 20.0, rto_s: float = 20.0,
         spike: tuple[float, float] = (3.0, 4.0), fault_at_s: float | None = None) -> DrillPlan:
    p = DrillPlan(kind=kind, level=rate, mode="open", baseline_s=baseline_s, recovery_s=recovery_s, window_s=window_s,
                  step_s=step_s, hold_s=hold_s, rto_s=rto_s,
                  spike_factor=spike[0] if kind == "spike" else None, spike_s=spike[1] if kind == "spike" else None,
                  fault_cmd="kill -9 4242" if kind == "fault_cmd" else None, fault_at_s=fault_at_s)
    p.validate()
    return p


def recovers_at(seconds: float) -> Outcome:
    """Slow (queued) from the disturbance until ``seconds`` after the reference, good before and after."""
    def outcome(phase: str, t: float) -> str:
        if phase == "baseline":
            return "good"
        return "slow" if t < seconds else "good"
    return outcome


def fails_until(seconds: float, then: str = "good") -> Outcome:
    """Refused connections from the fault until ``seconds`` after it, then ``then``."""
    def outcome(phase: str, t: float) -> str:
        if phase == "baseline":
            return "good"
        return "failed" if t < seconds else then
    return outcome


def _request(i: int, t_intended: float, what: str, level: float, rnd: int, late: float = 0.0) -> dict:
    ok = what != "failed"
    ttft = 0.05 if what == "good" else 2.0
    t = t_intended + late
    return {"type": "request", "id": f"drill-{i:06d}", "t_intended": t_intended, "t_sent": t,
            "t_first_token": t + ttft if ok else None, "t_end": t + (ttft + 0.05 if ok else 0.005),
            "input_tokens": 100, "output_tokens": 16 if ok else None, "finish_reason": "length" if ok else None,
            "http_status": 200 if ok else None, "complete": ok, "error": None if ok else "connect",
            "error_detail": None if ok else "connection refused", "phase": "measure", "level": level, "round": rnd}


RECOVERS_AT_4 = recovers_at(4.0)


def write_drill(path: Path, p: DrillPlan, outcome: Outcome = RECOVERS_AT_4, *, cfg: MonitorConfig = CFG,
                t0: float = T0, stop_after_baseline: bool = False, chain: bool = True,
                baseline: Callable[[float], str] | None = None,
                baseline_late: Callable[[int], float] | None = None) -> Path:
    """One drill appended to ``path``. ``stop_after_baseline``: it ends after its baseline (a baseline that did not
    PASS, recorded as the drill writes it); ``baseline(t)``: the baseline's outcomes (default all good);
    ``baseline_late(k)``: the k-th baseline request's dispatch lateness in seconds (default 0: on schedule)."""
    hdr = {"type": "run", "schema": "servewatch.record/1", "schema_version": 1, "tool": "servewatch",
           "tool_version": "0.1.0", "started_at": t0, "target": {"url": "http://127.0.0.1:9", "model": "m"},
           "load": {"mode": "open", "levels": [p.level], "rounds": 1, "warmup": 0, "arrival": "constant",
                    "stop_on_fail": False, "drill": p.block()},
           "environment": {}, "synthetic": False, "run_id": f"drill-{t0:.0f}",
           "source": {"kind": "run", "tool": "servewatch", "version": "0.1.0", "file": None, "sha256": None,
                      "derived": []},
           "verdict_settings": header_block(settings_of(cfg))}
    mon = Monitor(cfg)
    steps = {s.phase: s for s in p.planned_steps()}
    counter = [0]
    with Recorder(str(path), ids_unique=True, chain=chain) as rec:
        def write(d: dict) -> None:
            rec.write(d)
            mon.add(parse_object(d))

        def phase(name: str, event: str, t: float, step: bool = True, **info: object) -> None:
            d: dict = {"type": "phase", "t": t, "name": name, "event": event}
            if step and name in steps:
                d.update(level=steps[name].level, round=steps[name].round)
            d.update(info)
            write(d)

        def run_step(name: str, start: float, seconds: float, rate: float, ref: float, stop: dict | None = None,
                     pick: Callable[[float], str] | None = None,
                     late: Callable[[int], float] | None = None) -> float:
            s = steps[name]
            write({"type": "step", "t": start, "event": "start", "level": s.level, "round": s.round, "mode": "open",
                   "phase": "measure", "requests": None, "duration": None, "arrival": "constant", "rate": s.level})
            st = Step(s.level, s.round, "measure", "open")
            reqs = []
            n = int(round(seconds * rate))
            for k in range(n):
                t = start + k / rate
                what = pick(t - start) if pick is not None else outcome(name, t - ref)
                reqs.append(_request(counter[0], t, what, s.level, s.round, late(k) if late is not None else 0.0))
                counter[0] += 1
            for r in sorted(reqs, key=lambda r: r["t_end"]):
                write(r)
                ttft = r["t_first_token"] - r["t_sent"] if r["t_first_token"] is not None else None
                st.add(r["t_sent"] - r["t_intended"], None if r["complete"] else r["error"], ttft,
                       r["output_tokens"] or 0)
            end_t = max((r["t_end"] for r in reqs), default=start)
            end = step_end_record(st, end_t, mon.verdict_for(mon.levels.get((float(s.level), s.round))),
                                  slo_ms=cfg.slos.ttft_ms)
            end["duration_s"] = round(end_t - start, 3)
            end["verdict_settings"] = header_block(settings_of(cfg))
            if stop is not None:
                end["stop"] = stop
            write(end)
            return start + seconds

        write(hdr)
        b0 = t0 + 1.0
        phase("baseline", "start", b0)
        b1 = b0 + (p.fault_at_s or p.baseline_s)
        stop = {"cause": "drill_baseline", "reason": "the baseline is FAIL"} if stop_after_baseline else None
        run_step("baseline", b0, b1 - b0, p.level, b1, stop, pick=baseline, late=baseline_late)
        phase("baseline", "end", b1, **({"stop": stop} if stop else {}))
        if stop_after_baseline:
            return path
        if p.kind == "spike":
            phase("disturbance", "start", b1, kind="spike", factor=p.spike_factor, duration_s=p.spike_s)
            b2 = run_step("disturbance", b1, float(p.spike_s or 0), p.spike_level, b1 + float(p.spike_s or 0))
            phase("disturbance", "end", b2)
            ref = b2
        elif p.kind == "fault_cmd":
            phase("disturbance", "start", b1, kind="fault_cmd", command=p.fault_cmd)
            b2 = run_step("disturbance", b1, 0.5, p.level, b1)
            phase("disturbance", "end", b2, exit_status=0, output=[])
            ref = b1
        else:
            phase("disturbance", "start", b1, step=False, kind="fault_manual", marked_by="SIGUSR1")
            phase("disturbance", "end", b1, step=False)
            b2 = ref = b1
        phase("recovery", "start", b2)
        b3 = run_step("recovery", b2, p.recovery_s, p.level, ref)
        phase("recovery", "end", b3, health={"probed": False, "note": "a test file"})
    return path
