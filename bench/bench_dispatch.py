"""Benchmark: open-loop dispatch lateness of servewatch's load generator (does it send on schedule?).

    python bench/bench_dispatch.py [--rates 50,200,500] [--arrivals poisson,constant] [--seconds 8] [--no-raw]
                                   [--delay-ms 10] [--tokens 3] [--interval-ms 5] [--json results.json]

Against the delay server (bench/delay_server.py, its own process) with a short answer (first token after 10 ms, then
3 tokens 5 ms apart) so the server is never the bottleneck, servewatch's ``run_load`` runs in open loop (one
subprocess per arrival process and rate, ``--seconds`` of arrivals, so a bounded ``rate x seconds`` requests;
``metrics=False``, ``gpu=False``, records through the real Recorder), then (unless ``--no-raw``) bench/raw_client.py
runs the same rate and arrival process as a yardstick (its own arrival draws, same distribution). Per step:

- lateness = ``t_sent - t_intended`` per request (servewatch stamps ``t_sent`` when httpcore starts writing the
  request headers, after the connection is up): p50, p99 and max, computed here from the request records;
- what servewatch itself said: the step end record's ``lateness_p99_ms`` and ``saturated`` flag (it flags a step when
  lateness p99 > 10 ms);
- at the server: ``t_arrival - t_intended`` p99 (the whole request read by the server, same CLOCK_MONOTONIC);
- failures, client CPU seconds (the step's ``process_cpu_s``), and the CPU other processes on the machine used
  meanwhile (before each measurement the script waits up to ``--quiet-wait`` s for the machine to go quiet).

Goal (issue): lateness p99 <= 10 ms, or the step is flagged saturated.

``SW_BENCH_WORKLOAD=sessions`` (issue 23): each arrival starts a 2-turn session (think 0.05 s) whose prompts start with
one of 4 shared 128-token system prompts, so ``--rates 250`` sends about 500 requests/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_client_timing import (  # noqa: E402
    MachineLoad,
    load_raw,
    load_servewatch,
    ms,
    pct,
    record_servewatch,
    run_child,
    wait_quiet,
)
from delay_server import DelayServerProcess  # noqa: E402


def servewatch_open_child(port: int, rates: list[float], arrival: str, seconds: float, out_tokens: int,
                          out: str) -> None:

    sys.path.insert(0, os.environ.get("SW_BENCH_ROOT", ROOT))  # --before-root: another tree's tui/
    from tui.sources.load import LoadConfig

    if os.path.exists(out):
        os.unlink(out)
    cfg = LoadConfig(url=f"http://127.0.0.1:{port}/v1", model="delay-model", mode="open", levels=list(rates),
                     arrival=arrival, input_tokens=(128, 128), output_tokens=(out_tokens, out_tokens),
                     requests=None, duration=seconds, metrics=False, gpu=False, record=out, api_key_env=None,
                     warmup=0)
    if os.environ.get("SW_BENCH_WORKLOAD") == "sessions":  # issue 23: 2-turn sessions, 4 shared 128-token prefixes
        from tui.core.lengths import parse_lengths
        from tui.core.thinktime import parse_think_time

        cfg.turns, cfg.think_time = parse_lengths("2"), parse_think_time("0.05")
        cfg.shared_prefix_tokens, cfg.prefix_groups = 128, 4
    sys.stdout.write(json.dumps(record_servewatch(cfg)) + "\n")


def lateness_stats(recs: list[dict], truth: dict) -> dict:
    late = [r["t_sent"] - r["t_intended"] for r in recs if r.get("t_sent") is not None]
    wire = [truth[r["id"]]["t_arrival"] - r["t_intended"] for r in recs if r["id"] in truth]
    return {"n": len(recs), "failed": sum(1 for r in recs if r.get("error")),
            "late_p50": pct(late, 0.5), "late_p99": pct(late, 0.99), "late_max": max(late) if late else None,
            "arrive_p99": pct(wire, 0.99)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="50,200,500")
    ap.add_argument("--arrivals", default="poisson,constant")
    ap.add_argument("--seconds", type=float, default=8.0, help="arrivals per step (requests = rate x seconds)")
    ap.add_argument("--delay-ms", type=float, default=10.0)
    ap.add_argument("--tokens", type=int, default=3, help="content tokens after the first")
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument("--no-raw", action="store_true", help="skip the raw-client yardstick")
    ap.add_argument("--json")
    ap.add_argument("--before-root", help="also measure servewatch from this source tree (e.g. an export of main "
                    "before a change) as client 'before', right after servewatch in the same run")
    ap.add_argument("--quiet-wait", type=float, default=10.0,
                    help="before each measurement wait up to this many seconds for other load to drop (0: don't)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--arrival", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    rates = [float(x) for x in a.rates.split(",")]
    if a.child:
        servewatch_open_child(a.port, rates, a.arrival, a.seconds, a.tokens + 1, a.out)
        return 0
    arrivals = a.arrivals.split(",")
    tmp = tempfile.mkdtemp(prefix="sw-bench-dispatch-")
    log = os.path.join(tmp, "server.jsonl")
    rows: list[dict] = []
    print(f"delay server: first token {a.delay_ms:g} ms, then {a.tokens} tokens every {a.interval_ms:g} ms; "
          f"{a.seconds:g} s of arrivals per rate; {os.cpu_count()} CPUs; temp dir {tmp}", flush=True)
    t_start = time.perf_counter()
    with DelayServerProcess(log, a.delay_ms, a.tokens, a.interval_ms) as ds:
        for arrival in arrivals:
            for lv in rates:
                clients = ["servewatch"] + (["before"] if a.before_root else []) + ([] if a.no_raw else ["raw"])
                for client in clients:
                    waited, _ = wait_quiet(a.quiet_wait) if a.quiet_wait > 0 else (0.0, 0.0)
                    ml = MachineLoad()
                    ml.begin(ds.flush()["cpu_s"])
                    if client in ("servewatch", "before"):
                        out = os.path.join(tmp, f"{client}-{arrival}-{lv:g}.jsonl")
                        s = run_child([sys.executable, os.path.abspath(__file__), "--child", "--port", str(ds.port),
                                       "--rates", f"{lv:g}", "--arrival", arrival, "--seconds", str(a.seconds),
                                       "--tokens", str(a.tokens), "--out", out], timeout=300,
                                      root=a.before_root if client == "before" else ROOT)
                        recs = load_servewatch(out, s)
                        step = s["steps"][-1]
                        extra = {"step_late_p99_ms": step.get("lateness_p99_ms"), "saturated": step.get("saturated"),
                                 "cpu_s": step.get("process_cpu_s"), "errors": step.get("errors"),
                                 "step_s": step.get("duration_s")}
                    else:
                        out = os.path.join(tmp, f"raw-{arrival}-{lv:g}.jsonl")
                        n = max(1, int(round(lv * a.seconds)))
                        s = run_child([sys.executable, os.path.join(HERE, "raw_client.py"), "--port", str(ds.port),
                                       "--rate", str(lv), "--arrival", arrival, "--requests", str(n),
                                       "--max-tokens", str(a.tokens + 1), "--out", out], timeout=300)
                        recs = load_raw(out)
                        extra = {"step_late_p99_ms": None, "saturated": None, "cpu_s": s["cpu_s"],
                                 "errors": s["errors"], "step_s": s["wall_s"]}
                    fl = ds.flush()
                    load = ml.end(fl["cpu_s"])
                    st = lateness_stats(recs, ds.entries())
                    row = {"client": client, "arrival": arrival, "rate": lv, **st, **extra, "rss_mb": s["rss_mb"],
                           "waited_s": round(waited, 1), **load}
                    rows.append(row)
                    show(row)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s\n")
    print("| client | arrival | rate req/s | requests | failed | lateness p50 ms | lateness p99 ms | lateness max ms "
          "| server arrival - intended p99 ms | servewatch's own p99 / saturated flag | client CPU s | errors "
          "| others' CPU cores | load average |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        flag = "-" if r["client"] == "raw" else f"{r['step_late_p99_ms']} / {r['saturated']}"
        print(f"| {r['client']} | {r['arrival']} | {r['rate']:g} | {r['n']} | {r['failed']} | {ms(r['late_p50'], 2)} | "
              f"{ms(r['late_p99'], 2)} | {ms(r['late_max'], 1)} | {ms(r['arrive_p99'], 2)} | {flag} | "
              f"{r['cpu_s']:.2f} | {fmt_errors(r['errors'])} | {r['bg_cores']:.2f} | {r['loadavg1']} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(a), "cpus": os.cpu_count(), "rows": rows}, fh, indent=1)
    return 0


def fmt_errors(e: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((e or {}).items())) or "-"


def show(r: dict) -> None:
    flag = "" if r["client"] == "raw" else f"  servewatch says p99 {r['step_late_p99_ms']} ms, saturated={r['saturated']}"
    print(f"  {r['client']:<10} {r['arrival']:<8} {r['rate']:>5g} req/s  n={r['n']:<5} failed={r['failed']}  lateness "
          f"p50 {ms(r['late_p50'], 2)} p99 {ms(r['late_p99'], 2)} max {ms(r['late_max'], 1)} ms  server-arrival p99 "
          f"{ms(r['arrive_p99'], 2)} ms  CPU {r['cpu_s']:.2f} s  errors {fmt_errors(r['errors'])}  others' CPU "
          f"{r['bg_cores']:.2f} cores (waited {r['waited_s']:.0f} s){flag}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
