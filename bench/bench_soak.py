"""Benchmark: does the load client's memory grow with the run? (a soak at a steady open-loop rate)

    python3 bench/bench_soak.py [--minutes 60] [--rate 50] [--arrival poisson|constant] [--warmup-minutes W]
                                [--tokens 8] [--delay-ms 50] [--interval-ms 10] [--sample-s 10] [--json FILE]
                                [--tree DIR] [--no-metrics] [--no-gpu]

The delay server (bench/delay_server.py, its OWN process, so its memory is not in the figure) answers on
127.0.0.1. A child process runs servewatch's load generator as ``servewatch run`` does (tui/cli/run.py): one
open-loop step of ``--rate`` req/s for ``--minutes``, no warmup requests, records written through the real
``Recorder`` (``ids_unique=True`` where the tree has it, as ``run`` passes it) to a temp file, the core Monitor fed by
the generator itself (``LoadGenerator.emit``), the metrics scraper and the host/GPU sampler on unless
``--no-metrics`` / ``--no-gpu``. This script samples the child's resident memory (``VmRSS`` of
``/proc/PID/status``) every ``--sample-s`` seconds and prints:

- requests sent (the generator's count) and requests recorded (in the file; must be equal), every id unique
  (checked after the run by streaming the record file here, in this process, with one bit per sequence number:
  the client keeps no set of ids);
- RSS at the end of the warm-up (``--warmup-minutes``, default 5 min, or 10% of a run shorter than 50 min),
  the maximum after it, RSS at the end, and growth = max after warm-up - RSS at warm-up (issue 11's goal: <= 10 MB
  over a 1-hour soak at 50 req/s);
- with ``--json FILE`` all of it, with every sample, as JSON (one line is printed too).

``--tree DIR``: the servewatch source tree the child imports (default: this checkout), e.g. an older commit
unpacked elsewhere, for a before/after comparison with the same script.

If the load generator runs worker processes, their memory is not in this figure (the child's own RSS only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from delay_server import DelayServerProcess  # noqa: E402

MB = 1024.0  # kB per MB (VmRSS is in kB)


def rss_kb(pid: int | str) -> int | None:
    """VmRSS of a process in kB (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


# ---------------------------------------------------------------- the client (child process)


def child(a: argparse.Namespace) -> int:
    """Run the load generator as `servewatch run` does; print one JSON line at the end."""
    import asyncio
    import inspect

    from tui.sources.load import LoadConfig, run_load
    from tui.sources.recorder import Recorder

    cfg = LoadConfig(url=f"http://127.0.0.1:{a.port}/v1", model="delay-model", mode="open", levels=[a.rate],
                     arrival=a.arrival, input_tokens=(128, 128), output_tokens=(a.tokens + 1, a.tokens + 1),
                     requests=None, duration=a.minutes * 60.0, metrics=not a.no_metrics, gpu=not a.no_gpu,
                     record=a.out, api_key_env=None, warmup=0, progress_interval=5.0)
    unique = "ids_unique" in inspect.signature(Recorder).parameters
    rec = Recorder(a.out, ids_unique=True) if unique else Recorder(a.out)  # type: ignore[call-arg]
    gens: list = []
    prog = open(a.progress, "a", encoding="utf-8")  # noqa: SIM115 (closed below)

    def progress(line: str) -> None:
        prog.write(line + "\n")
        prog.flush()

    try:
        summary = asyncio.run(run_load(cfg, rec.write, progress=progress, on_generator=gens.append))
    finally:
        rec.close()
        prog.close()
    gen = gens[0]
    out = {"sent": gen.sent_total, "recorded_by_recorder": rec.requests_written,
           "duplicates_refused": rec.duplicates_refused, "recorder_keeps_ids": not unique,
           "run_id": gen.run_id, "step": summary.steps[-1] if summary.steps else None,
           "rss_end_kb": rss_kb("self")}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------- checking the record file (this process)


def check_records(path: str) -> dict:
    """Stream the record file: request records, duplicate ids (one bit per sequence number of ids shaped
    ``<run>-<seq>``, a set only for other ids), step end records, unreadable lines."""
    bits: dict[str, bytearray] = {}
    other: set[str] = set()
    n = dup = bad = 0
    steps = []
    with open(path, "rb") as fh:
        for line in fh:
            try:
                d = json.loads(line)
            except ValueError:
                bad += 1
                continue
            t = d.get("type")
            if t == "step" and d.get("event") == "end":
                steps.append(d)
            if t != "request":
                continue
            n += 1
            rid = str(d.get("id"))
            run, _, seq = rid.rpartition("-")
            if run and seq.isdigit():
                i = int(seq)
                b = bits.setdefault(run, bytearray())
                if len(b) <= i >> 3:
                    b.extend(bytes((i >> 3) + 1 - len(b) + 4096))
                m = 1 << (i & 7)
                if b[i >> 3] & m:
                    dup += 1
                b[i >> 3] |= m
            elif rid in other:
                dup += 1
            else:
                other.add(rid)
    return {"requests": n, "duplicate_ids": dup, "unreadable_lines": bad, "runs": len(bits), "steps": steps}


def count_lines(path: str) -> int:
    n = 0
    try:
        with open(path, "rb") as fh:
            for _ in fh:
                n += 1
    except FileNotFoundError:
        pass
    return n


# ---------------------------------------------------------------- the soak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="length of the one open-loop step")
    ap.add_argument("--rate", type=float, default=50.0, help="requests per second")
    ap.add_argument("--arrival", choices=("poisson", "constant"), default="poisson")
    ap.add_argument("--warmup-minutes", type=float, default=None,
                    help="RSS growth is measured from this point (default: 5, or 10%% of a run under 50 min)")
    ap.add_argument("--tokens", type=int, default=8, help="content tokens after the first (the answer length - 1)")
    ap.add_argument("--delay-ms", type=float, default=50.0, help="the server's time to the first token")
    ap.add_argument("--interval-ms", type=float, default=10.0, help="gap between the server's tokens")
    ap.add_argument("--sample-s", type=float, default=10.0, help="RSS sampling period")
    ap.add_argument("--json", help="write the result (with every sample) here")
    ap.add_argument("--tree", default=ROOT, help="servewatch source tree the client imports (default: this one)")
    ap.add_argument("--no-metrics", action="store_true", help="no Prometheus scraper in the client")
    ap.add_argument("--no-gpu", action="store_true", help="no GPU/host sampler in the client")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (record file, server log)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--progress", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.minutes <= 0 or a.rate <= 0 or a.sample_s <= 0 or a.tokens < 0:
        ap.error("--minutes, --rate and --sample-s must be > 0, --tokens >= 0")
    if a.child:
        return child(a)
    warm_min = a.warmup_minutes if a.warmup_minutes is not None else (5.0 if a.minutes >= 50 else a.minutes * 0.1)
    warm_s = warm_min * 60.0
    tree = os.path.abspath(a.tree)
    tmp = tempfile.mkdtemp(prefix="sw-bench-soak-")
    log = os.path.join(tmp, "server.jsonl")
    out = os.path.join(tmp, "records.jsonl")
    prog = os.path.join(tmp, "progress.log")
    commit = subprocess.run(["git", "-C", tree, "describe", "--always", "--dirty"], capture_output=True, text=True)
    print(f"soak: {a.rate:g} req/s {a.arrival} for {a.minutes:g} min (~{int(a.rate * a.minutes * 60)} requests), "
          f"warm-up {warm_min:g} min; client tree {tree} ({commit.stdout.strip() or 'no git'}); delay server first "
          f"token {a.delay_ms:g} ms then {a.tokens} tokens every {a.interval_ms:g} ms; temp dir {tmp}", flush=True)
    samples: list[tuple[float, int]] = []
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("OPENAI_API_KEY", None)
    w0 = time.monotonic()
    with DelayServerProcess(log, a.delay_ms, a.tokens, a.interval_ms) as ds:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--port", str(ds.port), "--rate", str(a.rate),
               "--arrival", a.arrival, "--minutes", str(a.minutes), "--tokens", str(a.tokens), "--out", out,
               "--progress", prog]
        if a.no_metrics:
            cmd.append("--no-metrics")
        if a.no_gpu:
            cmd.append("--no-gpu")
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        next_print = 60.0
        while True:
            try:
                proc.wait(timeout=a.sample_s - ((time.monotonic() - t0) % a.sample_s))
                break
            except subprocess.TimeoutExpired:
                pass
            t = time.monotonic() - t0
            kb = rss_kb(proc.pid)
            if kb is not None:
                samples.append((round(t, 1), kb))
            ds.flush()  # the server's pending log lines go to disk (its memory, not the client's)
            if t >= next_print:
                next_print += 60.0
                last = ""
                try:
                    with open(prog, encoding="utf-8") as fh:
                        for line in fh:
                            last = line.strip()
                except OSError:
                    pass
                print(f"[{t / 60:5.1f} min] client RSS {kb / MB if kb else float('nan'):.1f} MB  | {last[:140]}",
                      flush=True)
        res_line = proc.stdout.read() if proc.stdout else ""  # type: ignore[union-attr]
        ds.flush()
    wall = time.monotonic() - w0
    if proc.returncode != 0 or not res_line.strip():
        print(f"client failed (exit {proc.returncode}); see {prog}", file=sys.stderr)
        return 1
    res = json.loads(res_line.strip().splitlines()[-1])
    chk = check_records(out)
    at_server = count_lines(log)
    end_kb = res.get("rss_end_kb") or (samples[-1][1] if samples else None)
    after = [kb for t, kb in samples if t >= warm_s]
    at_warm = after[0] if after else None
    t_warm = next((t for t, _ in samples if t >= warm_s), None)
    if end_kb is not None and after:
        after.append(end_kb)
    max_after = max(after) if after else None
    growth = None if at_warm is None or max_after is None else max_after - at_warm
    step = res.get("step") or {}
    result = {
        "minutes": a.minutes, "rate": a.rate, "arrival": a.arrival, "warmup_minutes": warm_min,
        "tokens": a.tokens + 1, "tree": tree, "commit": commit.stdout.strip() or None,
        "requests_sent": res["sent"], "requests_recorded": chk["requests"],
        "recorded_by_recorder": res["recorded_by_recorder"], "requests_at_server": at_server,
        "duplicate_ids": chk["duplicate_ids"], "duplicates_refused": res["duplicates_refused"],
        "unreadable_lines": chk["unreadable_lines"], "recorder_keeps_ids": res["recorder_keeps_ids"],
        "sent_equals_recorded": res["sent"] == chk["requests"] == res["recorded_by_recorder"],
        "rss_start_mb": round(samples[0][1] / MB, 2) if samples else None,
        "rss_at_warmup_mb": None if at_warm is None else round(at_warm / MB, 2), "warmup_sample_s": t_warm,
        "rss_max_after_warmup_mb": None if max_after is None else round(max_after / MB, 2),
        "rss_end_mb": None if end_kb is None else round(end_kb / MB, 2),
        "growth_mb": None if growth is None else round(growth / MB, 2),
        "step": {k: step.get(k) for k in ("requests", "completed", "failed", "errors", "duration_s",
                                          "ttft_p50_ms", "lateness_p50_ms", "lateness_p99_ms", "saturated",
                                          "percentiles_rel_error", "process_cpu_s")},
        "wall_s": round(wall, 1), "cpus": os.cpu_count(), "sample_s": a.sample_s,
        "samples": [[t, round(kb / MB, 2)] for t, kb in samples],
    }
    print(f"\nrequests sent {result['requests_sent']}, recorded {result['requests_recorded']} "
          f"(recorder {result['recorded_by_recorder']}, at the server {at_server}), duplicate ids "
          f"{result['duplicate_ids']}, unreadable lines {result['unreadable_lines']}: "
          f"{'sent == recorded, every id once' if result['sent_equals_recorded'] and not chk['duplicate_ids'] else 'MISMATCH'}")
    print(f"client RSS: start {result['rss_start_mb']} MB, at warm-up end ({warm_min:g} min) "
          f"{result['rss_at_warmup_mb']} MB, max after warm-up {result['rss_max_after_warmup_mb']} MB, "
          f"end {result['rss_end_mb']} MB; growth {result['growth_mb']} MB (goal: <= 10 MB)")
    print(f"step: {json.dumps(result['step'])}")
    brief = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(brief))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
    if not a.keep:
        for p in (log, out, prog):
            try:
                os.unlink(p)
            except OSError:
                pass
        try:
            os.rmdir(tmp)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
