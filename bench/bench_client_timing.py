"""Benchmark: how precisely servewatch's load generator measures TTFT, next to a minimal raw-socket client, same run.

    python bench/bench_client_timing.py [--levels 1,64,256] [--requests 100,640,1024] [--reps 2]
                                        [--delay-ms 100] [--tokens 8] [--interval-ms 20] [--json results.json]

Three processes: the delay server (bench/delay_server.py: first content token exactly D ms after the request is
read, then K tokens ``--interval-ms`` apart, logs its own arrival and first-token write times), the client under test
(one subprocess per measurement, so its CPU time and peak RSS are its own), and this script (idle while a client
runs). Per concurrency level and repetition it runs

- servewatch: ``run_load`` closed loop (``metrics=False``, ``gpu=False``, every record written by the real
  ``Recorder`` to a temp file), ``--requests`` requests at that concurrency, new connection per request;
- raw: bench/raw_client.py with the same concurrency, request count and prompt size;

one after the other (order alternates between repetitions). Per request, matched by id with the server log:

- TTFT error = client TTFT (t_first - t_sent) - server truth (t_first_write - t_arrival);
- send leg = server t_arrival - client t_sent, receive leg = client t_first - server t_first_write (both processes
  stamp CLOCK_MONOTONIC, so these cross-process differences are meaningful; error = send leg + receive leg);

plus the client's CPU seconds per 1000 streamed content tokens over the traffic window (servewatch: the step's
``process_cpu_s``; raw: process CPU around its traffic), how busy the client was (CPU s / wall s of that window: 1.0
means its single event-loop thread was saturated), its peak RSS, the most streams the server saw open at once, how
late the server's own first-token timer fired (truth - D; it does not enter the error, which uses the truth), and
the CPU that OTHER processes on the machine used meanwhile (before each measurement the script waits up to
``--quiet-wait`` s for the machine to go quiet; on a shared 2-core box other people's jobs change every figure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from delay_server import DelayServerProcess  # noqa: E402

# ---------------------------------------------------------------- the servewatch client (child process)


def servewatch_child(port: int, concurrency: int, requests: int, out_tokens: int, out: str) -> None:
    """Run servewatch's load generator once (closed loop) and print a JSON summary on stdout.
    Records go to ``out`` through the real Recorder, as ``servewatch run --record`` does."""

    sys.path.insert(0, os.environ.get("SW_BENCH_ROOT", ROOT))  # --before-root: another tree's tui/
    from tui.sources.load import LoadConfig

    if os.path.exists(out):
        os.unlink(out)
    cfg = LoadConfig(url=f"http://127.0.0.1:{port}/v1", model="delay-model", mode="closed",
                     levels=[float(concurrency)], input_tokens=(128, 128), output_tokens=(out_tokens, out_tokens),
                     requests=requests, metrics=False, gpu=False, record=out, api_key_env=None, warmup=0)
    w0 = time.perf_counter()
    summary = record_servewatch(cfg)
    summary["wall_s"] = round(time.perf_counter() - w0, 3)
    sys.stdout.write(json.dumps(summary) + "\n")


def record_servewatch(cfg) -> dict:
    """Run servewatch's load generator for ``cfg`` into ``cfg.record`` (in this child process); return
    its step-end records, peak RSS and the generator's clock anchor (epoch stamps -> perf_counter)."""
    import asyncio
    import resource

    from tui.sources.load import run_load
    from tui.sources.recorder import Recorder

    anchors: dict = {}

    def grab(gen) -> None:
        anchors["perf0"] = gen.clock.perf0
        anchors["epoch0"] = gen.clock.epoch0

    async def go() -> None:
        rec = Recorder(cfg.record)
        try:
            await run_load(cfg, rec.write, on_generator=grab)
        finally:
            rec.close()

    asyncio.run(go())
    steps = []
    with open(cfg.record, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d.get("type") == "step" and d.get("event") == "end":
                steps.append(d)
    return {"client": "servewatch", "steps": steps,
            "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), **anchors}


# ---------------------------------------------------------------- the machine's other load


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, steal) jiffies of the whole machine from /proc/stat (busy = user+nice+system+irq+softirq)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    busy = f[0] + f[1] + f[2] + (f[5] if len(f) > 5 else 0) + (f[6] if len(f) > 6 else 0)
    return busy, f[7] if len(f) > 7 else 0


class MachineLoad:
    """CPU used on the machine by processes OTHER than this benchmark's own (this script, its client child and
    the delay server) over a measurement window, in cores. Other people's jobs on a shared 2-core box change
    every figure here, so each row reports it."""

    HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def begin(self, server_cpu_s: float) -> None:
        import resource

        self.j0 = _cpu_jiffies()
        self.w0 = time.perf_counter()
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.c0 = ch.ru_utime + ch.ru_stime
        self.s0 = time.process_time()
        self.srv0 = server_cpu_s

    def end(self, server_cpu_s: float) -> dict:
        import resource

        j1 = _cpu_jiffies()
        wall = max(1e-9, time.perf_counter() - self.w0)
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        own = (ch.ru_utime + ch.ru_stime - self.c0) + (time.process_time() - self.s0) + (server_cpu_s - self.srv0)
        busy = (j1[0] - self.j0[0]) / self.HZ
        steal = (j1[1] - self.j0[1]) / self.HZ
        return {"bg_cores": round(max(0.0, busy - own) / wall, 2), "own_cores": round(own / wall, 2),
                "steal_cores": round(steal / wall, 2), "loadavg1": _loadavg()}


def _loadavg() -> float | None:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_quiet(max_wait: float, threshold: float = 0.3) -> tuple[float, float]:
    """Wait (up to ``max_wait`` s, in 1 s samples) until the machine's busy CPU is below ``threshold`` cores.
    Only call while nothing of ours is running. Returns (seconds waited, busy cores in the last sample)."""
    t0 = time.perf_counter()
    busy = 0.0
    while True:
        j0, w0 = _cpu_jiffies()[0], time.perf_counter()
        time.sleep(1.0)  # a sampling interval of the machine, not synchronisation
        busy = (_cpu_jiffies()[0] - j0) / MachineLoad.HZ / (time.perf_counter() - w0)
        if busy < threshold or time.perf_counter() - t0 >= max_wait:
            return time.perf_counter() - t0, busy


# ---------------------------------------------------------------- statistics


def pct(vals: list[float], q: float) -> float | None:
    """Nearest-rank percentile (the convention servewatch's step records use)."""
    if not vals:
        return None
    s = sorted(vals)
    return s[min(len(s), max(1, math.ceil(q * len(s)))) - 1]


def ms(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v * 1e3:.{nd}f}"


def run_child(cmd: list[str], timeout: float, root: str = ROOT) -> dict:
    """Run a client child; ``root``: the source tree whose ``tui/`` a servewatch child imports."""
    extra = os.environ.get("PYTHONPATH")  # kept after the project root (e.g. to try a patched dependency)
    env = dict(os.environ, PYTHONPATH=root + (os.pathsep + extra if extra else ""), SW_BENCH_ROOT=root)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"child failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def load_servewatch(path: str, anchors: dict) -> list[dict]:
    """Request records -> {id, t_sent, t_first, t_end, tokens, error, t_intended} in perf_counter seconds."""
    perf0, epoch0 = anchors["perf0"], anchors["epoch0"]

    def perf(v: float | None) -> float | None:
        return None if v is None else v - epoch0 + perf0

    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d.get("type") != "request" or d.get("phase") != "measure":
                continue
            out.append({"id": d["id"], "t_intended": perf(d["t_intended"]), "t_sent": perf(d["t_sent"]),
                        "t_first": perf(d["t_first_token"]), "t_end": perf(d["t_end"]),
                        "tokens": (d.get("output_tokens") or 0) if d.get("complete") else 0,
                        "error": d.get("error"),
                        # TTFT straight from the record's epoch stamps (no anchor conversion)
                        "ttft": (d["t_first_token"] - d["t_sent"]) if d.get("t_first_token") is not None else None})
    return out


def load_raw(path: str) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            d["ttft"] = d["t_first"] - d["t_sent"] if d.get("t_first") is not None and d.get("t_sent") else None
            out.append(d)
    return out


def open_mean(entries: list[dict]) -> float | None:
    """Time-weighted mean number of streams the server had open between the first and the last request arrival
    (while the client was issuing: in closed loop, a client that keeps its level shows about that level here)."""
    arrivals = [e["t_arrival"] for e in entries if e.get("t_arrival") is not None]
    if len(arrivals) < 2:
        return None
    w0, w1 = min(arrivals), max(arrivals)
    if w1 <= w0:
        return None
    ev = []
    for e in entries:
        a, b = e.get("t_arrival"), e.get("t_end")
        if a is None:
            continue
        b = w1 if b is None else b
        lo, hi = max(a, w0), min(b, w1)
        if hi > lo:
            ev.append((lo, 1))
            ev.append((hi, -1))
    ev.sort()
    area, level, t = 0.0, 0, w0
    for when, d in ev:
        area += level * (when - t)
        level += d
        t = when
    return area / (w1 - w0)


def compare(recs: list[dict], truth: dict, delay_s: float) -> dict:
    err, send, recv, late = [], [], [], []
    unmatched = 0
    mine = [truth[r["id"]] for r in recs if r["id"] in truth]
    for r in recs:
        e = truth.get(r["id"])
        if e is None or r["ttft"] is None or e.get("t_first_write") is None or r.get("error"):
            unmatched += 1
            continue
        t_true = e["t_first_write"] - e["t_arrival"]
        late.append(t_true - delay_s)
        err.append(r["ttft"] - t_true)
        send.append(e["t_arrival"] - r["t_sent"])
        recv.append(r["t_first"] - e["t_first_write"])
    return {"matched": len(err), "unmatched": unmatched, "open_mean": open_mean(mine),
            "err_p50": pct(err, 0.5), "err_p99": pct(err, 0.99), "err_max": max(err) if err else None,
            "send_p50": pct(send, 0.5), "send_p99": pct(send, 0.99),
            "recv_p50": pct(recv, 0.5), "recv_p99": pct(recv, 0.99),
            "server_late_p50": pct(late, 0.5), "server_late_p99": pct(late, 0.99)}


# ---------------------------------------------------------------- the benchmark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,64,256")
    ap.add_argument("--requests", default="100,640,1024", help="requests per level (same order as --levels)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--tokens", type=int, default=8, help="content tokens after the first (K)")
    ap.add_argument("--interval-ms", type=float, default=20.0)
    ap.add_argument("--json", help="also write all figures here")
    ap.add_argument("--before-root", help="also measure servewatch from this source tree (e.g. an export of main "
                    "before a change) as client 'before', interleaved with the others in the same run")
    ap.add_argument("--quiet-wait", type=float, default=10.0,
                    help="before each measurement wait up to this many seconds for other load to drop (0: don't)")
    ap.add_argument("--child-servewatch", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child_servewatch:
        servewatch_child(a.port, a.concurrency, a.n, a.tokens + 1, a.out)
        return 0

    levels = [int(x) for x in a.levels.split(",")]
    counts = [int(x) for x in a.requests.split(",")]
    if len(counts) != len(levels):
        ap.error("--requests needs one count per level")
    tmp = tempfile.mkdtemp(prefix="sw-bench-timing-")
    log = os.path.join(tmp, "server.jsonl")
    rows: list[dict] = []
    print(f"delay server: first token {a.delay_ms:g} ms after arrival, then {a.tokens} tokens every "
          f"{a.interval_ms:g} ms; {os.cpu_count()} CPUs; temp dir {tmp}", flush=True)
    t_start = time.perf_counter()
    with DelayServerProcess(log, a.delay_ms, a.tokens, a.interval_ms) as ds:
        for rep in range(1, a.reps + 1):
            for level, n in zip(levels, counts):
                clients = ["servewatch", "raw"] + (["before"] if a.before_root else [])
                k = (rep - 1) % len(clients)
                order = clients[k:] + clients[:k]  # rotate the order between repetitions
                for client in order:
                    out = os.path.join(tmp, f"{client}-c{level}-r{rep}.jsonl")
                    waited, _ = wait_quiet(a.quiet_wait) if a.quiet_wait > 0 else (0.0, 0.0)
                    cpu_srv0 = ds.flush()["cpu_s"]
                    ml = MachineLoad()
                    ml.begin(cpu_srv0)
                    if client in ("servewatch", "before"):
                        s = run_child([sys.executable, os.path.abspath(__file__), "--child-servewatch",
                                       "--port", str(ds.port), "--concurrency", str(level), "--n", str(n),
                                       "--tokens", str(a.tokens), "--out", out], timeout=170,
                                      root=a.before_root if client == "before" else ROOT)
                        step = s["steps"][-1]
                        recs = load_servewatch(out, s)
                        cpu = step["process_cpu_s"]
                        wall = step["duration_s"]
                    else:
                        s = run_child([sys.executable, os.path.join(HERE, "raw_client.py"), "--port", str(ds.port),
                                       "--concurrency", str(level), "--requests", str(n),
                                       "--max-tokens", str(a.tokens + 1), "--out", out], timeout=170)
                        recs = load_raw(out)
                        cpu = s["cpu_s"]
                        wall = s["wall_s"]
                    fl = ds.flush()
                    load = ml.end(fl["cpu_s"])
                    c = compare(recs, ds.entries(), a.delay_ms / 1e3)
                    tokens = sum(r["tokens"] for r in recs if not r.get("error"))
                    row = {"client": client, "concurrency": level, "rep": rep, "requests": len(recs),
                           "failed": sum(1 for r in recs if r.get("error")), "tokens": tokens,
                           "cpu_s": cpu, "cpu_per_1k_tokens": cpu / tokens * 1000 if tokens else None,
                           "busy": round(cpu / max(wall, 1e-9), 3),
                           "rss_mb": s["rss_mb"], "wall_s": wall, "server_max_open": fl["max_open_streams"],
                           "server_cpu_s": round(fl["cpu_s"] - cpu_srv0, 3), "waited_s": round(waited, 1),
                           **load, **c}
                    rows.append(row)
                    print(f"  rep {rep} c={level:<4} {client:<10} n={row['requests']:<5} failed={row['failed']} "
                          f"err p50 {ms(c['err_p50'])} p99 {ms(c['err_p99'])} ms  (send leg p99 {ms(c['send_p99'])}, "
                          f"recv leg p99 {ms(c['recv_p99'])}; server truth - D p99 {ms(c['server_late_p99'], 2)})  "
                          f"CPU {row['cpu_per_1k_tokens'] or 0:.3f} s/1k tok, busy {row['busy']:.2f}  "
                          f"RSS {row['rss_mb']:.0f} MB  server saw {row['server_max_open']} open at most, "
                          f"{row['open_mean'] or 0:.0f} on average  wall {wall:.1f} s  "
                          f"others' CPU {load['bg_cores']:.2f} cores (waited {waited:.0f} s)", flush=True)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s\n")
    print_table(rows, levels, a.reps, a.before_root)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(a), "cpus": os.cpu_count(), "rows": rows}, fh, indent=1)
    return 0


def print_table(rows: list[dict], levels: list[int], reps: int, before_root: str | None = None) -> None:
    def cell(sel: list[dict], key: str, fmt) -> str:
        return " / ".join(fmt(r[key]) for r in sel)

    print("| client | concurrency | TTFT error p50 ms | TTFT error p99 ms | send leg p99 ms | receive leg p99 ms "
          "| CPU s per 1000 streamed tokens | client busy (CPU s / wall s) | peak RSS MB | server saw open (max) "
          "| mean open streams at the server | server truth - D p99 ms | others' CPU cores | load average |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for client, label in (("raw", "raw stdlib asyncio client (bench/raw_client.py), new connection per request"),
                          ("servewatch", "servewatch loadgen (run_load, httpx), new connection per request"),
                          ("before", f"servewatch from {before_root}")):
        for lv in levels:
            sel = sorted((r for r in rows if r["client"] == client and r["concurrency"] == lv), key=lambda r: r["rep"])
            if not sel:
                continue
            print(f"| {label} | {lv} | {cell(sel, 'err_p50', ms)} | {cell(sel, 'err_p99', ms)} | "
                  f"{cell(sel, 'send_p99', ms)} | {cell(sel, 'recv_p99', ms)} | "
                  f"{cell(sel, 'cpu_per_1k_tokens', lambda v: '-' if v is None else f'{v:.3f}')} | "
                  f"{cell(sel, 'busy', lambda v: f'{v:.2f}')} | "
                  f"{cell(sel, 'rss_mb', lambda v: f'{v:.0f}')} | {cell(sel, 'server_max_open', str)} | "
                  f"{cell(sel, 'open_mean', lambda v: '-' if v is None else f'{v:.0f}')} | "
                  f"{cell(sel, 'server_late_p99', lambda v: ms(v, 2))} | "
                  f"{cell(sel, 'bg_cores', lambda v: f'{v:.2f}')} | "
                  f"{cell(sel, 'loadavg1', lambda v: '-' if v is None else f'{v:.2f}')} |")
            label = "same"
    for who in ("servewatch", "before") if before_root else ("servewatch",):
        print(f"\n{who} / raw ratio (same rep):")
        for lv in levels:
            parts = []
            for rep in range(1, reps + 1):
                sw = next((r for r in rows if r["client"] == who and r["concurrency"] == lv and r["rep"] == rep), None)
                rw = next((r for r in rows if r["client"] == "raw" and r["concurrency"] == lv and r["rep"] == rep), None)
                if sw and rw and rw["err_p99"] and rw["err_p50"] and rw["cpu_per_1k_tokens"]:
                    opened = (f", open streams x{sw['open_mean'] / rw['open_mean']:.2f}"
                              if sw.get("open_mean") and rw.get("open_mean") else "")
                    parts.append(f"rep {rep}: p50 x{sw['err_p50'] / rw['err_p50']:.1f}, "
                                 f"p99 x{sw['err_p99'] / rw['err_p99']:.1f}, "
                                 f"CPU x{sw['cpu_per_1k_tokens'] / rw['cpu_per_1k_tokens']:.1f}{opened}")
            print(f"  concurrency {lv}: " + "; ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
