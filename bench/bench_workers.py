"""Benchmark: servewatch's load split over worker processes, side by side with the raw-socket client, same run.

    python bench/bench_workers.py [--levels 64,256] [--requests 640,1024] [--workers 1,2,auto] [--reps 2]
                                  [--rates 500,1000] [--arrivals constant,poisson] [--rate-seconds 6]
                                  [--delay-ms 100] [--tokens 20] [--interval-ms 10] [--json FILE]

Three kinds of process: the delay server (bench/delay_server.py: first content token exactly D ms after a request
is read, then K tokens ``--interval-ms`` apart; it logs its own arrival, first-token and end times), the client
under test (one child process per measurement: servewatch's ``run_load`` with ``--workers W`` writing every record
through the real Recorder, or bench/raw_client.py), and this script (idle while a client runs).

Closed loop, per level (streams), client and repetition:

- records/s: measured requests recorded / the step's duration;
- mean open streams the SERVER saw: the sum over requests of (server end - server arrival) / the traffic window
  (first arrival to last end): whether the level really happened;
- TTFT error = client TTFT (from the request write) - server truth (first-token write - arrival), p50/p99;
- client CPU per 1,000 streamed tokens: servewatch's step ``process_cpu_s`` (the coordinator plus every worker
  process), the raw client's process CPU over its traffic;
- requests sent vs recorded (every id once).

Open loop (``--rates``): dispatch lateness p99 (``t_sent - t_intended``) from the step record, per arrival process
and worker count, for ``--rate-seconds`` per measurement; the raw client's own lateness beside it.

On a 2-core machine the coordinator, the workers and the delay server share two cores: more workers add
processes, not cores. The figures that carry over are CPU per request and per token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_client_timing import record_servewatch, run_child  # noqa: E402
from delay_server import DelayServerProcess  # noqa: E402


def pct(vals: list[float], q: float) -> float | None:
    if not vals:
        return None
    s = sorted(vals)
    k = max(1, -(-int(q * len(s) * 1000) // 1000))
    return s[min(len(s), k) - 1]


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.1f}"


# ---------------------------------------------------------------- the servewatch client (child process)


def servewatch_child(a: argparse.Namespace) -> None:
    """One servewatch measurement (closed or open loop, ``--workers a.w``), recorded through the real Recorder by
    ``bench_client_timing.record_servewatch``; prints its summary plus the worker count and the workers' peak RSS."""
    sys.path.insert(0, ROOT)
    import resource

    from tui.sources.load import LoadConfig

    workers: int | str = a.w if a.w == "auto" else int(a.w)
    kw: dict = {"mode": "closed", "levels": [float(a.c)], "requests": a.n} if a.rate is None else {
        "mode": "open", "levels": [float(a.rate)], "arrival": a.arrival, "duration": a.seconds}
    cfg = LoadConfig(url=f"http://127.0.0.1:{a.port}/v1", model="delay-model", input_tokens=(128, 128),
                     output_tokens=(a.tokens + 1, a.tokens + 1), metrics=False, gpu=False, record=a.out,
                     api_key_env=None, warmup=0, workers=workers, progress_interval=0, **kw)
    summary = record_servewatch(cfg)
    with open(a.out, encoding="utf-8") as fh:
        hdr = json.loads(fh.readline())
    rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({**summary, "workers": hdr["load"]["workers"]["count"],
                      "worker_rss_mb_max": round(rss_children, 1)}))


def servewatch_records(path: str, anchors: dict) -> list[dict]:
    perf0, epoch0 = anchors["perf0"], anchors["epoch0"]
    out = []
    for d in map(json.loads, open(path, encoding="utf-8")):
        if d.get("type") != "request" or d.get("phase") != "measure":
            continue
        tf = d.get("t_first_token")
        out.append({"id": d["id"], "t_sent": d["t_sent"] - epoch0 + perf0,
                    "t_first": None if tf is None else tf - epoch0 + perf0,
                    "ttft": None if tf is None else tf - d["t_sent"], "error": d.get("error"),
                    "tokens": (d.get("output_tokens") or 0) if d.get("complete") else 0,
                    "lateness": d["t_sent"] - d["t_intended"]})
    return out


def raw_records(path: str) -> list[dict]:
    out = []
    for d in map(json.loads, open(path, encoding="utf-8")):
        d["ttft"] = d["t_first"] - d["t_sent"] if d.get("t_first") is not None and d.get("t_sent") else None
        d["lateness"] = (d["t_sent"] - d["t_intended"]) if d.get("t_intended") is not None and d.get("t_sent") else None
        out.append(d)
    return out


def measure(recs: list[dict], truth: dict) -> dict:
    err = []
    spans = []
    for r in recs:
        e = truth.get(r["id"])
        if e is None:
            continue
        if e.get("t_end") is not None and e.get("t_arrival") is not None:
            spans.append((e["t_arrival"], e["t_end"]))
        if r["ttft"] is not None and e.get("t_first_write") is not None and not r.get("error"):
            err.append(r["ttft"] - (e["t_first_write"] - e["t_arrival"]))
    mean_open = None
    if spans:
        t0 = min(s for s, _ in spans)
        t1 = max(e for _, e in spans)
        mean_open = sum(e - s for s, e in spans) / max(t1 - t0, 1e-9)
    return {"matched": len(err), "err_p50": pct(err, 0.5), "err_p99": pct(err, 0.99), "mean_open": mean_open,
            "seen_by_server": len(spans)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="64,256")
    ap.add_argument("--requests", default="640,1024")
    ap.add_argument("--workers", default="1,2,auto", help="worker counts to try (comma list; 1 = in process)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rates", default="", help="open loop rates (req/s) for the dispatch-lateness table")
    ap.add_argument("--arrivals", default="constant,poisson")
    ap.add_argument("--rate-seconds", type=float, default=6.0)
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--tokens", type=int, default=20, help="content tokens after the first")
    ap.add_argument("--interval-ms", type=float, default=10.0)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for f in ("--port", "--c", "--n", "--w", "--out", "--rate", "--arrival", "--seconds"):
        ap.add_argument(f, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        a.port, a.c = int(a.port), a.c
        a.n = int(a.n) if a.n else None
        a.rate = float(a.rate) if a.rate else None
        a.seconds = float(a.seconds) if a.seconds else None
        servewatch_child(a)
        return 0
    levels = [int(x) for x in a.levels.split(",") if x]
    counts = [int(x) for x in a.requests.split(",") if x]
    wlist = [w.strip() for w in a.workers.split(",") if w.strip()]
    tmp = tempfile.mkdtemp(prefix="sw-bench-workers-")
    rows: list[dict] = []
    me = os.path.abspath(__file__)
    print(f"{os.cpu_count()} CPUs; delay server: first token {a.delay_ms:g} ms, then {a.tokens} tokens "
          f"{a.interval_ms:g} ms apart; load average {os.getloadavg()[0]:.2f}", flush=True)
    with DelayServerProcess(os.path.join(tmp, "server.jsonl"), a.delay_ms, a.tokens, a.interval_ms) as ds:
        for rep in range(1, a.reps + 1):
            for level, n in zip(levels, counts, strict=True):
                clients = ["raw", *[f"w{w}" for w in wlist]]
                if rep % 2 == 0:
                    clients.reverse()
                for client in clients:
                    out = os.path.join(tmp, f"{client}-c{level}-r{rep}.jsonl")
                    ds.flush()
                    la = os.getloadavg()[0]
                    if client == "raw":
                        s = run_child([sys.executable, os.path.join(HERE, "raw_client.py"), "--port", str(ds.port),
                                       "--concurrency", str(level), "--requests", str(n),
                                       "--max-tokens", str(a.tokens + 1), "--out", out], timeout=300)
                        recs, cpu, wall, nw = raw_records(out), s["cpu_s"], s["wall_s"], 0
                    else:
                        s = run_child([sys.executable, me, "--child", "--port", str(ds.port), "--c", str(level),
                                       "--n", str(n), "--w", client[1:], "--tokens", str(a.tokens), "--out", out],
                                      timeout=300)
                        step = s["steps"][-1]
                        recs = servewatch_records(out, s)
                        cpu, wall, nw = step["process_cpu_s"], step["duration_s"], s["workers"]
                    ds.flush()
                    m = measure(recs, ds.entries())
                    tokens = sum(r["tokens"] for r in recs if not r.get("error"))
                    row = {"kind": "closed", "client": client, "workers": nw, "level": level, "rep": rep,
                           "sent": n, "recorded": len(recs), "unique": len({r["id"] for r in recs}),
                           "failed": sum(1 for r in recs if r.get("error")), "records_per_s": len(recs) / wall,
                           "cpu_per_1k_tokens": cpu / tokens * 1000 if tokens else None, "loadavg": la,
                           "rss_mb": s.get("rss_mb"), **m}
                    rows.append(row)
                    print(f"  rep {rep} c={level:<4} {client:<6} recorded {row['recorded']}/{n} failed {row['failed']} "
                          f"{row['records_per_s']:7.1f} rec/s  mean open {m['mean_open'] or 0:6.1f}  "
                          f"TTFT err p50 {ms(m['err_p50'])} p99 {ms(m['err_p99'])} ms  "
                          f"CPU {row['cpu_per_1k_tokens'] or 0:.3f} s/1k tok  load {la:.2f}", flush=True)
        rates = [float(x) for x in a.rates.split(",") if x]
        for rep in range(1, a.reps + 1):
            for rate in rates:
                for arrival in a.arrivals.split(","):
                    for client in ["raw", *[f"w{w}" for w in wlist]]:
                        out = os.path.join(tmp, f"{client}-r{rate:g}-{arrival}-{rep}.jsonl")
                        la = os.getloadavg()[0]
                        n = int(rate * a.rate_seconds)
                        if client == "raw":
                            s = run_child([sys.executable, os.path.join(HERE, "raw_client.py"), "--port",
                                           str(ds.port), "--rate", str(rate), "--arrival", arrival, "--requests",
                                           str(n), "--max-tokens", str(a.tokens + 1), "--out", out], timeout=300)
                            late = [r["lateness"] for r in raw_records(out) if r["lateness"] is not None]
                            p99, nw = pct(late, 0.99), 0
                        else:
                            s = run_child([sys.executable, me, "--child", "--port", str(ds.port), "--w", client[1:],
                                           "--rate", str(rate), "--arrival", arrival, "--seconds",
                                           str(a.rate_seconds), "--tokens", str(a.tokens), "--out", out], timeout=300)
                            step = s["steps"][-1]
                            p99 = (step.get("lateness_p99_ms") or 0) / 1e3
                            nw = s["workers"]
                        row = {"kind": "open", "client": client, "workers": nw, "rate": rate, "arrival": arrival,
                               "rep": rep, "lateness_p99": p99, "loadavg": la}
                        rows.append(row)
                        print(f"  rep {rep} {rate:g} req/s {arrival:<8} {client:<6} dispatch lateness p99 {ms(p99)} ms"
                              f"  load {la:.2f}", flush=True)
    print()
    print("| client | workers | streams | records/s | mean open streams (server) | TTFT error p50 / p99 ms "
          "| CPU s per 1k tokens | recorded/sent |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "closed":
            print(f"| {r['client']} | {r['workers']} | {r['level']} | {r['records_per_s']:.0f} | "
                  f"{r['mean_open'] or 0:.0f} | {ms(r['err_p50'])} / {ms(r['err_p99'])} | "
                  f"{r['cpu_per_1k_tokens'] or 0:.3f} | {r['recorded']}/{r['sent']} |")
    if any(r["kind"] == "open" for r in rows):
        print("\n| client | workers | rate req/s | arrival | dispatch lateness p99 ms |")
        print("|---|---|---|---|---|")
        for r in rows:
            if r["kind"] == "open":
                print(f"| {r['client']} | {r['workers']} | {r['rate']:g} | {r['arrival']} | {ms(r['lateness_p99'])} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(a), "cpus": os.cpu_count(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
