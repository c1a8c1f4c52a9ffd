"""Benchmark (issue 25): what `servewatch report FILE --html OUT` adds to `report`, in time and in bytes.

    python bench/bench_html.py [--requests 10000,1000000] [--repeat 3] [--stream-fields]

For each size a SYNTHETIC record file (bench/gen_records.py; /tmp/sw-bench-html-<N>.jsonl, generated when
missing) is reported in its own subprocess, alternating without and with ``--html``, ``--repeat`` times. Two
figures per size:

- **added, measured inside** (the one the goal is about): the time spent in what ``--html`` adds, timed inside
  the process with ``--html``: the charts' bounded sampler over every block read
  (``tui.core.chartdata.RunSampler.add_many``) plus building and writing the page
  (``tui.cli.reporting.write_report_html``: the chart data, the options, the tables, the inlined library). Median
  over the repeats.
- **end to end**: median wall seconds and CPU seconds of the whole report with and without ``--html`` and their
  difference, and peak RSS (wall seconds are noisy on a shared machine: the 1-minute load average is printed before
  each run).

And the size of the HTML file. Goal: at most 3 s added at 1,000,000 requests; at most 3 MB at 10,000.
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

CHILD = r"""
import io, json, resource, sys, time
path, html = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
import tui.cli.reporting as R
import tui.core.chartdata as CD
spent = {"sampler": 0.0, "page": 0.0, "sampler_cpu": 0.0}
orig_add = CD.RunSampler.add_many
def timed_add(self, items):
    t, c = time.perf_counter(), time.process_time(); orig_add(self, items)
    spent["sampler"] += time.perf_counter() - t; spent["sampler_cpu"] += time.process_time() - c
CD.RunSampler.add_many = timed_add
orig_write = R.write_report_html
def timed_write(*a, **k):
    t = time.perf_counter(); orig_write(*a, **k); spent["page"] += time.perf_counter() - t
R.write_report_html = timed_write
from tui.cli import main
argv = ["report", path] + (["--html", html] if html else [])
out = io.StringIO()
t = time.perf_counter()
real = sys.stdout
sys.stdout = out
try:
    rc = main(argv)
finally:
    sys.stdout = real
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": dt, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "rc": rc, **spent}))
"""


def ensure_file(n: int, stream_fields: bool) -> str:
    path = f"/tmp/sw-bench-html-{n}{'-sf' if stream_fields else ''}.jsonl"
    if not os.path.exists(path):
        cmd = [sys.executable, os.path.join(HERE, "gen_records.py"), path, "--requests", str(n)]
        subprocess.run(cmd + (["--stream-fields"] if stream_fields else []), check=True)
    return path


def child(path: str, html: str | None) -> dict:
    load = os.getloadavg()[0]
    r = subprocess.run([sys.executable, "-c", CHILD, path] + ([html] if html else []), capture_output=True,
                       text=True, cwd=ROOT, check=False)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    d = json.loads(r.stdout.strip().splitlines()[-1])
    d["load"] = load
    return d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", default="10000,1000000", help="comma-separated sizes (default 10000,1000000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side per size (default 3)")
    ap.add_argument("--stream-fields", action="store_true", help="generate files with the stream fields")
    a = ap.parse_args()
    results = {}
    for n in (int(x) for x in a.requests.split(",")):
        path = ensure_file(n, a.stream_fields)
        html = f"/tmp/sw-bench-html-{n}.html"
        without, with_ = [], []
        for i in range(a.repeat):
            without.append(child(path, None))
            with_.append(child(path, html))
            print(f"  {n:>9,} run {i + 1}: without {without[-1]['seconds']:.2f} s, {without[-1]['cpu']:.2f} CPU s, "
                  f"{without[-1]['rss_mb']:.0f} MB (load {without[-1]['load']:.2f}); with {with_[-1]['seconds']:.2f} s, "
                  f"{with_[-1]['cpu']:.2f} CPU s, {with_[-1]['rss_mb']:.0f} MB (load {with_[-1]['load']:.2f}; sampler "
                  f"{with_[-1]['sampler']:.3f} s / {with_[-1]['sampler_cpu']:.3f} CPU s, page {with_[-1]['page']:.3f} s)",
                  flush=True)
        added = statistics.median(w["sampler"] + w["page"] for w in with_)
        res = {"requests": n, "file_mb": round(os.path.getsize(path) / 2 ** 20, 1),
               "html_bytes": os.path.getsize(html), "added_inside_s": round(added, 3),
               "sampler_s": round(statistics.median(w["sampler"] for w in with_), 3),
               "page_s": round(statistics.median(w["page"] for w in with_), 3),
               "report_without_s": round(statistics.median(w["seconds"] for w in without), 2),
               "report_with_s": round(statistics.median(w["seconds"] for w in with_), 2)}
        res["end_to_end_diff_s"] = round(res["report_with_s"] - res["report_without_s"], 2)
        res["report_cpu_without_s"] = round(statistics.median(w["cpu"] for w in without), 2)
        res["report_cpu_with_s"] = round(statistics.median(w["cpu"] for w in with_), 2)
        res["rss_mb_without"] = round(statistics.median(w["rss_mb"] for w in without))
        res["rss_mb_with"] = round(statistics.median(w["rss_mb"] for w in with_))
        results[n] = res
        print(json.dumps(res), flush=True)
    print("requests | html size | added (sampler + page), inside | report without / with (median wall; CPU) | goal")
    for n, r in results.items():
        goal = ("<= 3 s at 1M" if n >= 1_000_000 else "<= 3 MB") + (
            " OK" if (r["added_inside_s"] <= 3 if n >= 1_000_000 else r["html_bytes"] <= 3 * 2 ** 20) else " MISSED")
        print(f"{n:>9,} | {r['html_bytes'] / 2 ** 20:.2f} MiB | {r['added_inside_s']:.3f} s ({r['sampler_s']:.3f} + "
              f"{r['page_s']:.3f}) | {r['report_without_s']:.2f} / {r['report_with_s']:.2f} s; {r['report_cpu_without_s']:.2f} / "
              f"{r['report_cpu_with_s']:.2f} CPU s | {goal}")


if __name__ == "__main__":
    main()
