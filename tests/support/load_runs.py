"""Load runs written as `servewatch run` / `sweep` write them, in process and in seconds: the real Recorder (digest
chain, seal, optional signature), the header's planned levels, step start/end records made by the load
generator's own ``step_end_record`` (counts, percentiles) with the verdict its Monitor gives at the step's end,
the recorded stop of a ``--stop-on-fail`` ladder (``ladder_stop``) and the probes of ``sweep --search``. The request
records are the honest ones of ``tests.support.evidence_files`` (closed loop, every slot busy; a level in ``fail``
fails every request).

Used by the completeness and signature tests (issues 35 and 36) and their property test."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import evidence_files as ef
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import parse_object
from tui.sources.load.steps import Step, ladder_stop, step_end_record
from tui.sources.recorder import Recorder

KEY = b"a signing key for the tests, 35 and 36"
SEARCH = {"precision": 0.1, "budget_s": 1800.0, "probe_cap_s": 720.0}


def write_load_run(path: Path, *, key: bytes | None = None, levels: tuple = (1, 2, 4), fail: tuple = (4,),
                   pass_seconds: float = 660.0, fail_seconds: float = 90.0, stop_on_fail: bool = False,
                   rounds: int = 1, t0: float = ef.T0, run_id: str = "test-run", probes: tuple = (),
                   chain: bool = True, slow: tuple = ()) -> Path:
    """One closed-loop run appended to ``path`` (a second call appends a second run): levels in ``fail`` fail every
    request (FAIL), levels in ``slow`` complete every request 1.5 s after it was sent (FAIL on the TTFT SLO, over
    ``pass_seconds``), the others pass (PASS at the default settings). ``probes``: the levels of a capacity search
    run after the ladder (the header then has ``load.search``)."""
    hdr = ef.header("closed", levels, rounds=rounds, stop_on_fail=stop_on_fail,
                    **({"search": dict(SEARCH)} if probes else {}))
    hdr["run_id"] = run_id
    hdr["started_at"] = t0
    mon = Monitor(MonitorConfig(check_duplicate_ids=False))
    clock = [t0 + 1.0]

    with Recorder(str(path), ids_unique=True, sign_key=key, chain=chain) as rec:
        def write(d: dict) -> None:
            rec.write(d)
            mon.add(parse_object(d))

        def step(lvl: float, rnd: int, probe: bool) -> dict:
            bad = lvl in fail
            reqs = ef.closed_step(int(lvl), clock[0], fail_seconds if bad else pass_seconds, rnd=rnd,
                                  fail=(lambda i: True) if bad else (lambda i: False),
                                  ttft=1.5 if lvl in slow else 0.2)
            for r in reqs:
                r["id"] = f"{run_id}-{'p' if probe else ''}{r['id']}"
            start, _ = ef.step_records(reqs, lvl, "closed", rnd)
            if probe:
                start["search_probe"] = True
            write(start)
            st = Step(lvl, rnd, "measure", "closed")
            for r in sorted(reqs, key=lambda r: r["t_end"]):
                write(r)
                ttft = r["t_first_token"] - r["t_sent"] if r["t_first_token"] is not None else None
                st.add(r["t_sent"] - r["t_intended"], None if r["complete"] else r["error"], ttft,
                       r["output_tokens"] or 0)
            t_first = min(r["t_sent"] for r in reqs)
            clock[0] = max(r["t_end"] for r in reqs) + 1.0
            st.t0, st.t1 = 0.0, clock[0] - t_first  # the step's own clock: as long as its requests took, as a run's
            end = step_end_record(st, clock[0], mon.verdict_for(mon.levels.get((float(lvl), rnd))))
            if probe:
                end["search_probe"] = True
            else:
                stop = ladder_stop(end, stop_on_fail, bool(probes))
                if stop is not None:
                    end["stop"] = stop
            write(end)
            return end

        write(hdr)
        stopped = False
        for rnd in range(1, rounds + 1):
            for lvl in levels:
                if step(lvl, rnd, False).get("stop"):
                    stopped = True
                    break
            if stopped:
                break
        for lvl in probes:
            for rnd in range(1, rounds + 1):
                step(lvl, rnd, True)
    return path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def step_end_lines(lines: list[bytes]) -> list[int]:
    """0-based indexes of the step end records."""
    return [i for i, ln in enumerate(lines) if b'"type":"step"' in ln and b'"event":"end"' in ln]


def without_chain(lines: list[bytes]) -> list[bytes]:
    """The same records as a file written before the digest chain (no ``chain`` fields, no seal)."""
    out = []
    for ln in lines:
        d = json.loads(ln)
        if d.get("type") == "seal":
            continue
        d.pop("chain", None)
        out.append((json.dumps(d, separators=(",", ":")) + "\n").encode())
    return out
