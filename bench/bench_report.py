"""Benchmark: `servewatch report` on a 1,000,000-request file vs a bare `json.loads` loop, side by side.

    python bench/bench_report.py [--requests 1000000] [--file /tmp/sw-bench-1m.jsonl] [--repeat 2]

Each measurement runs in its own subprocess (so peak RSS is that process's own), alternating bare / report.
The input is SYNTHETIC (bench/gen_records.py) and only measures ingest speed and memory, nothing about servers.
Goal (issue 2): report throughput >= 0.5 x bare loop, report peak RSS < 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BARE = r"""
import json, resource, sys, time
t = time.perf_counter(); n = 0
with open(sys.argv[1], 'rb') as f:
    for line in f:
        json.loads(line); n += 1
dt = time.perf_counter() - t
print(json.dumps({"lines": n, "seconds": dt, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

REPORT = r"""
import io, json, resource, sys, time
from argparse import Namespace
from tui.cli.report import run_report
args = Namespace(slo_ttft_ms=1000.0, target=0.95, alpha=0.05, min_window_minutes=10.0, min_requests=None, json=False,
                 level=None, params=None, weights=None, gpu_gib=None, margin_gib=None, layers=None, kv_heads=None,
                 head_dim=None, max_seq=None, kv_dtype=None, tp=None, block_size=None, config=None, budget=None)
t = time.perf_counter()
out = io.StringIO()
rc = run_report(sys.argv[1], args, out=out)
dt = time.perf_counter() - t
with open(sys.argv[1], 'rb') as f:
    n = sum(1 for _ in f)
print(json.dumps({"lines": n, "seconds": dt, "rc": rc, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(code: str, path: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--file", default="/tmp/sw-bench-1m.jsonl")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    if not os.path.exists(a.file):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_records.py"), a.file, "--requests", str(a.requests)], check=True)
    print(f"file: {a.file} ({os.path.getsize(a.file) / 1e6:.0f} MB), python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for i in range(a.repeat):
        bare = run(BARE, a.file)
        rep = run(REPORT, a.file)
        b_rate = bare["lines"] / bare["seconds"]
        r_rate = rep["lines"] / rep["seconds"]
        print(f"run {i + 1}: bare json.loads {b_rate:,.0f} lines/s ({bare['rss_mb']:.0f} MB) | "
              f"servewatch report {r_rate:,.0f} lines/s, peak RSS {rep['rss_mb']:.0f} MB, exit {rep['rc']} | "
              f"ratio {r_rate / b_rate:.2f}")


if __name__ == "__main__":
    main()
