"""Audit of the verdict under bursty outcomes (issue 8): the figures in docs/statistics.md.

    PYTHONPATH=$PWD python3 bench/audit_verdict.py [--runs 2000] [--horizon-min 15] [--only NAME,...] [--out FILE]
                                                   [--uncorrected]

Drives tui.core.verdict.LevelJudge directly (the code path the Monitor uses), one request every
0.3 s, checked after every request, over the seeded scenarios of tests/support/verdict_scenarios.py
(seeds 1,000,000 + run, disjoint from the CI tests' seeds). Prints one line per scenario with
the rate and its Wilson 95% interval; --out appends the same as JSON lines. SYNTHETIC: it measures
the statistics of the decision rule, nothing about any server. Outside CI (minutes to hours).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.support.verdict_scenarios import INTERVAL_S, SCENARIOS, run_one  # noqa: E402
from tui.core.snapshot import FAIL, PASS  # noqa: E402
from tui.core.stats import wilson  # noqa: E402

SEED0 = 1_000_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--horizon-min", type=float, default=15.0)
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--out", default="")
    ap.add_argument("--uncorrected", action="store_true",
                    help="for comparison: the same non-latched rule without the dependence correction (v = 1)")
    a = ap.parse_args()
    if a.uncorrected:
        import tui.core.verdict as verdict

        verdict.MIN_BATCHES = verdict.MIN_BATCHES_SHORTEST = 1 << 62  # no batch length is ever used: v stays 1
    n = int(round(a.horizon_min * 60 / INTERVAL_S))
    only = {s for s in a.only.split(",") if s}
    for key, (sc, kind, target, horizon_cap) in SCENARIOS.items():
        if only and key not in only:
            continue
        h = n if horizon_cap is None else min(n, horizon_cap)
        stop = {"false_pass": PASS, "power_pass": PASS, "false_fail": FAIL, "power_fail": FAIL}.get(kind)
        t = time.perf_counter()
        res = [run_one(sc, h, SEED0 + i, stop_on=stop) for i in range(a.runs)]
        dt = time.perf_counter() - t
        if kind in ("false_pass", "power_pass"):
            hits = sum(r.first_pass_n is not None for r in res)
            what = "PASS shown at any check"
        elif kind == "power_window":
            hits = sum(r.window_state == PASS for r in res)
            what = "PASS at window completion"
        else:
            hits = sum(r.first_fail_n is not None for r in res)
            what = "FAIL shown at any check"
        lo, hi = wilson(hits, a.runs)
        row = {"scenario": key, "uncorrected": a.uncorrected, "kind": kind, "what": what, "target": target, "runs": a.runs,
               "horizon_min": h * INTERVAL_S / 60, "rate": hits / a.runs, "wilson95": [lo, hi], "seconds": dt,
               "definition": sc.__dict__}
        if kind == "power_fail":
            times = sorted((r.first_fail_n or 10**9) * INTERVAL_S for r in res)
            row["median_s_to_fail"] = times[len(times) // 2]
            row["p95_s_to_fail"] = times[int(0.95 * len(times))]
        print(("uncorrected " if a.uncorrected else "") + f"{key:10s} {what:26s} {hits / a.runs:7.2%} [{lo:.2%}, {hi:.2%}]  target {target}  "
              f"runs={a.runs} horizon={row['horizon_min']:.0f} min  ({dt:.0f} s)"
              + (f"  median {row['median_s_to_fail']:.1f} s, p95 {row['p95_s_to_fail']:.1f} s" if kind == "power_fail" else ""),
              flush=True)
        if a.out:
            with open(a.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
