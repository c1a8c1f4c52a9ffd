"""Benchmark: `servewatch report` on a 1,000,000-request file vs a bare `json.loads` loop, side by side.

    python bench/bench_report.py [--requests 1000000] [--file PATH] [--repeat 3]

What it measures (issue 10): the bare side is a loop over the file's lines as bytes (``for line in f:
json.loads(line)``, file opened ``'rb'``); the report side is ``run_report`` (what ``servewatch report FILE``
runs: read, validate, the Monitor, the verdict, the formatted report). Each measurement runs in its own
subprocess (so peak RSS is that process's own), alternating bare / report, ``--repeat`` times (default 3); the
figure is the MEDIAN lines/s of each side and their ratio. Lines/s counts every line of the file on both sides.
CPU seconds (user + system of that process, and of the reader process a large file is read by: see --serial)
are shown next to wall seconds, and the 1-minute load average before each run: on a shared machine wall-clock
figures are only comparable at a similar load.

The input is SYNTHETIC (bench/gen_records.py, generated when the file is missing; default
/tmp/sw-bench-1m.jsonl for 1,000,000 requests, /tmp/sw-bench-<N>.jsonl otherwise) and only measures ingest
speed and memory, nothing about servers. An existing file must hold exactly --requests request records.
Goal (issues 2, 10 and 38): report throughput >= 0.6 x bare loop on the 300,000-request file, report peak RSS < 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"lines": n, "seconds": dt, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}))
"""

REPORT = r"""
import io, json, resource, sys, time
from tui.cli import settings_of
from tui.cli.reporting import run_report
if len(sys.argv) > 2 and sys.argv[2] == "serial":  # --serial: the one-process reading path
    import tui.sources.parallel_read as P
    P.PARALLEL_MIN_BYTES = 1 << 62
args = settings_of(["report", sys.argv[1]])
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
out = io.StringIO()
rc = run_report(args, out=out)
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
rc_ = resource.getrusage(resource.RUSAGE_CHILDREN)  # a large file's forked reader (tui.sources.parallel_read)
cpu = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime) + rc_.ru_utime + rc_.ru_stime
with open(sys.argv[1], 'rb') as f:
    n = sum(1 for _ in f)
print(json.dumps({"lines": n, "seconds": dt, "cpu": cpu, "rc": rc, "rss_mb": ru.ru_maxrss / 1024,
                  "child_rss_mb": rc_.ru_maxrss / 1024}))
"""


def run(code: str, path: str, root: str = ROOT, *extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root)  # run in ``root`` too: ``python -c`` puts the working folder first
    out = subprocess.run([sys.executable, "-c", code, os.path.abspath(path), *extra], capture_output=True, text=True,
                         env=env, cwd=root, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def count_requests(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            n += line.startswith(b'{"type":"request"') or b'"type": "request"' in line
    return n


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000, help="request records in the file (default 1000000)")
    ap.add_argument("--file", default=None,
                    help="record file (default /tmp/sw-bench-1m.jsonl for 1000000 requests, else /tmp/sw-bench-N.jsonl)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the median is reported (default 3)")
    ap.add_argument("--baseline", metavar="DIR", default=None,
                    help="also time the report of another checkout (for example an exported earlier commit), "
                         "in the same rounds: bare / report / baseline report")
    ap.add_argument("--stream-fields", action="store_true",
                    help="a file with the stream fields a servewatch run writes (last token, chunks, usage, gaps): "
                         "the parser's optional-field path (default file name gains -sf)")
    ap.add_argument("--serial", action="store_true",
                    help="report in one process (a file of 32 MiB or more is otherwise read by a forked reader "
                         "while the judging process ingests: tui.sources.parallel_read)")
    a = ap.parse_args()
    if a.repeat < 1 or a.requests < 1:
        print("bench_report: --repeat and --requests must be >= 1", file=sys.stderr)
        sys.exit(2)
    sf = "-sf" if a.stream_fields else ""
    path = a.file or (f"/tmp/sw-bench-1m{sf}.jsonl" if a.requests == 1_000_000 else f"/tmp/sw-bench-{a.requests}{sf}.jsonl")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_records.py"), path, "--requests", str(a.requests)]
                       + (["--stream-fields"] if a.stream_fields else []), check=True)
    have = count_requests(path)
    if have != a.requests:
        print(f"bench_report: {path} holds {have} request records, not --requests {a.requests} "
              "(give another --file, or delete it to regenerate)", file=sys.stderr)
        sys.exit(2)
    print(f"file: {path} ({os.path.getsize(path) / 1e6:.0f} MB, {have:,} requests), python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; {a.repeat} runs per side, each in its own process, bare / report alternating")
    bare_rates, rep_rates, bare_cpu, rep_cpu, rss, base_rates, base_cpu = [], [], [], [], [], [], []
    for i in range(a.repeat):
        lb = load()
        bare = run(BARE, path)
        lr = load()
        rep = run(REPORT, path, ROOT, *(["serial"] if a.serial else []))
        b_rate = bare["lines"] / bare["seconds"]
        r_rate = rep["lines"] / rep["seconds"]
        bare_rates.append(b_rate)
        rep_rates.append(r_rate)
        bare_cpu.append(bare["lines"] / bare["cpu"])
        rep_cpu.append(rep["lines"] / rep["cpu"])
        rss.append(rep["rss_mb"])
        if a.baseline:
            lo = load()
            old = run(REPORT, path, os.path.abspath(a.baseline))
            o_rate = old["lines"] / old["seconds"]
            base_rates.append(o_rate)
            base_cpu.append(old["lines"] / old["cpu"])
            print(f"        baseline report {o_rate:,.0f} lines/s ({old['seconds']:.1f} s wall, {old['cpu']:.1f} s CPU, "
                  f"peak RSS {old['rss_mb']:.0f} MB, exit {old['rc']}, {lo}) | ratio {o_rate / b_rate:.2f}", flush=True)
        print(f"run {i + 1}: bare json.loads {b_rate:,.0f} lines/s ({bare['seconds']:.1f} s wall, {bare['cpu']:.1f} s CPU, "
              f"{bare['rss_mb']:.0f} MB, {lb}) | servewatch report {r_rate:,.0f} lines/s ({rep['seconds']:.1f} s wall, "
              f"{rep['cpu']:.1f} s CPU, peak RSS {rep['rss_mb']:.0f} MB + reader {rep.get('child_rss_mb', 0):.0f} MB, exit "
              f"{rep['rc']}, {lr}) | ratio {r_rate / b_rate:.2f}",
              flush=True)
    mb, mr = statistics.median(bare_rates), statistics.median(rep_rates)
    print(f"median of {a.repeat}: bare {mb:,.0f} lines/s | report {mr:,.0f} lines/s, peak RSS {max(rss):.0f} MB | "
          f"ratio {mr / mb:.2f} (goal >= 0.60, issue 38) | by CPU time: ratio "
          f"{statistics.median(rep_cpu) / statistics.median(bare_cpu):.2f}; {load()}")
    if base_rates:
        mo = statistics.median(base_rates)
        print(f"baseline ({a.baseline}): report {mo:,.0f} lines/s | ratio {mo / mb:.2f} | by CPU time: ratio "
              f"{statistics.median(base_cpu) / statistics.median(bare_cpu):.2f}")


if __name__ == "__main__":
    main()
