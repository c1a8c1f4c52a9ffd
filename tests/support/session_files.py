"""Record files of session workloads (issue 23), shaped like `servewatch run --turns` writes them: a seeded
simulation of chat sessions (closed loop: ``loops`` sessions at a time, each loop starting its next session when
one ends; open loop: session starts at a rate), each turn's record carrying ``session``, ``turn``,
``turns_planned``, ``context_tokens`` and ``think_s``, with the step start/end records and their counts
(tests/support/evidence_files.py). Seeded: the same arguments give the same file."""

from __future__ import annotations

import random
from collections.abc import Callable

import tests.support.evidence_files as ef

T0 = ef.T0


def _session(rng: random.Random, sid: str, start: float, *, level: float, turns: tuple[int, int],
             think: tuple[float, float], dur: tuple[float, float], ttft: Callable[[int], float],
             first_late: float = 0.0, seq: list[int]) -> tuple[list[dict], float]:
    """One session's records from its first turn's intended start; returns them and the last turn's end."""
    n_turns = rng.randint(*turns)
    t = start
    ctx = 0
    out = []
    for k in range(1, n_turns + 1):
        think_s = rng.uniform(*think) if k > 1 else 0.0
        t_int = t + think_s
        t_sent = t_int + (first_late if k == 1 else 0.0)
        d = rng.uniform(*dur)
        ctx += 200 + 64  # this user message plus the previous answer
        seq[0] += 1
        rec = ef.request(seq[0], t_sent, ttft(k), d, level=level, t_intended=t_int, session=sid, turn=k,
                         turns_planned=n_turns, context_tokens=ctx, input_tokens=ctx + 7)
        if k > 1:
            rec["think_s"] = round(think_s, 6)
        out.append(rec)
        t = t_sent + d
    return out, t


def closed_sessions(level: int, *, loops: int | None = None, seconds: float = 660.0, seed: int = 1,
                    turns: tuple[int, int] = (2, 4), think: tuple[float, float] = (1.0, 3.0),
                    dur: tuple[float, float] = (1.0, 2.0), ttft: Callable[[int], float] = lambda k: 0.2,
                    gap: float = 0.005) -> list[dict]:
    """A closed-loop step labelled ``level`` concurrent sessions, run by ``loops`` session loops (default
    ``level``: the level held; fewer: not held)."""
    rng = random.Random(seed)
    reqs: list[dict] = []
    seq = [0]
    sessions = 0
    end_at = T0 + 1.0 + seconds
    for loop in range(level if loops is None else loops):
        t = T0 + 1.0 + loop * 0.01
        while True:
            recs, t_last = _session(rng, f"test-run-s{sessions}", t, level=level, turns=turns, think=think,
                                    dur=dur, ttft=ttft, seq=seq)
            if t_last > end_at:
                break
            reqs.extend(recs)
            sessions += 1
            t = t_last + gap
    start, end = ef.step_records(reqs, level, "closed")
    end["sessions"] = {"started": sessions, "completed": sessions, "ended_by_failure": 0, "cut_at_step_end": 0, "cancelled": 0}
    hdr = ef.header("closed", (level,), level_unit="sessions",
                    sessions={"turns": {"min": turns[0], "max": turns[1]}, "think_time": None,
                              "history": "each turn sends the whole conversation so far, with the answers the "
                                         "server gave"})
    return ef.assemble(hdr, [(start, reqs, end)])


def open_sessions(rate: float, *, seconds: float = 660.0, seed: int = 2, turns: tuple[int, int] = (2, 4),
                  think: tuple[float, float] = (1.0, 3.0), dur: tuple[float, float] = (1.0, 2.0),
                  late: Callable[[int], float] = lambda i: 0.0) -> list[dict]:
    """An open-loop step: session starts at ``rate`` sessions/s (Poisson, seeded); session ``i``'s first turn is
    sent ``late(i)`` s after its intended time."""
    rng = random.Random(seed)
    reqs: list[dict] = []
    seq = [0]
    t = T0 + 1.0
    i = 0
    end_at = T0 + 1.0 + seconds
    while True:
        t += rng.expovariate(rate)
        if t > end_at:
            break
        recs, _ = _session(rng, f"test-run-s{i}", t, level=rate, turns=turns, think=think, dur=dur,
                           ttft=lambda k: 0.2, first_late=late(i), seq=seq)
        reqs.extend(recs)
        i += 1
    start, end = ef.step_records(reqs, rate, "open")
    hdr = ef.header("open", (rate,), arrival="poisson", level_unit="sessions/s",
                    sessions={"turns": {"min": turns[0], "max": turns[1]}, "think_time": None,
                              "history": "each turn sends the whole conversation so far, with the answers the "
                                         "server gave"})
    return ef.assemble(hdr, [(start, reqs, end)])
