"""Profile servewatch's load generator (closed loop) against the delay server: where does the client's CPU go?

    python bench/profile_client.py [--concurrency 64] [--requests 640] [--tokens 8] [--interval-ms 20]
                                   [--profiler cprofile|sample] [--top 25] [--out FILE]

The delay server (bench/delay_server.py) runs as its own process; ``run_load`` runs in THIS process exactly as
``bench_client_timing.py`` runs it (``metrics=False``, ``gpu=False``, ``warmup=0``, every record written by the real
``Recorder`` to a temp file, so the monitor and the recorder are part of the profile), under one of:

- ``cprofile`` (default): deterministic, counts calls (builtins such as ``json.loads`` and socket calls show up on
  their own), but its per-call overhead inflates small functions: read the ranking, not the absolute seconds;
- ``sample``: a stdlib sampling profiler (``ITIMER_PROF`` every ``--sample-ms`` of this process's CPU time; each
  sample charges the interval to the innermost Python function (self) and once to every function on the stack
  (cumulative)); time spent inside C functions is charged to the Python function that called them. Low overhead,
  so its proportions are the honest ones.

Figures are CPU seconds per 1000 requests and per 1000 streamed content tokens (``--tokens`` + 1 content tokens per
request), plus the whole run's process CPU time with and without the profiler's overhead in mind (the summary
line says which profiler ran). The machine's load average is printed with the result: on a shared 2-core box it
changes every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from collections import Counter
from types import FrameType

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from delay_server import DelayServerProcess  # noqa: E402


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3", ROOT + "/"):
        i = filename.find(marker)
        if i >= 0:
            rest = filename[i + len(marker):]
            return rest.split("/", 1)[1] if marker == "/lib/python3" and "/" in rest else rest
    return filename


class Sampler:
    """Charge every ``interval`` s of process CPU time to the Python stack that was running."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.self_: Counter = Counter()
        self.cum: Counter = Counter()
        self.samples = 0

    def _on_tick(self, _sig: int, frame: FrameType | None) -> None:
        self.samples += 1
        seen = set()
        first = True
        f = frame
        while f is not None:
            co = f.f_code
            key = (co.co_filename, co.co_firstlineno, co.co_name)
            if first:
                self.self_[key] += 1
                first = False
            if key not in seen:
                seen.add(key)
                self.cum[key] += 1
            f = f.f_back

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._on_tick)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)

    def table(self, top: int, n_req: int, n_tok: int, cpu_s: float) -> str:
        out = io.StringIO()
        # the kernel delivers ITIMER_PROF at its tick (often 4 ms), not at the interval asked: scale the samples
        # to the CPU time measured over the same window
        dt = cpu_s / max(1, self.samples)
        out.write(f"{self.samples} samples, {dt * 1e3:.2f} ms of CPU each (asked {self.interval * 1e3:g} ms)\n")
        for title, ctr in (("self", self.self_), ("cumulative", self.cum)):
            out.write(f"\nby {title} time: CPU s per 1000 requests | per 1000 tokens | share | function\n")
            for key, k in ctr.most_common(top):
                s = k * dt
                out.write(f"  {s / n_req * 1e3:8.3f} | {s / n_tok * 1e3:8.4f} | {k / max(1, self.samples):5.1%} | "
                          f"{_short(key[0])}:{key[1]}({key[2]})\n")
        return out.getvalue()


def cprofile_table(prof: cProfile.Profile, top: int, n_req: int, n_tok: int) -> str:
    st = pstats.Stats(prof)
    stats = st.stats  # type: ignore[attr-defined]
    out = io.StringIO()
    total = sum(v[2] for v in stats.values())
    out.write(f"cProfile total self time {total:.3f} s (inflated by the profiler's own per-call cost)\n")
    for title, idx in (("self (tottime)", 2), ("cumulative (cumtime)", 3)):
        out.write(f"\nby {title}: CPU s per 1000 requests | per 1000 tokens | calls per request | function\n")
        rows = sorted(stats.items(), key=lambda kv: kv[1][idx], reverse=True)[:top]
        for (fn, line, name), v in rows:
            s = v[idx]
            where = f"{_short(fn)}:{line}({name})" if fn != "~" else name
            out.write(f"  {s / n_req * 1e3:8.3f} | {s / n_tok * 1e3:8.4f} | {v[1] / n_req:7.2f} | {where}\n")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=640)
    ap.add_argument("--delay-ms", type=float, default=100.0)
    ap.add_argument("--tokens", type=int, default=8, help="content tokens after the first")
    ap.add_argument("--interval-ms", type=float, default=20.0)
    ap.add_argument("--profiler", choices=("cprofile", "sample", "none"), default="cprofile")
    ap.add_argument("--sample-ms", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", help="also write the text here")
    a = ap.parse_args(argv)

    import importlib

    from tui.sources.load import LoadConfig, run_load
    from tui.sources.recorder import Recorder

    # imported lazily by the run: import them now so that import time stays out of the profile
    for mod in ("tui.core.monitor", "tui.core.progress", "tui.sources.server_info", "tui.sources.metrics"):
        importlib.import_module(mod)

    tmp = tempfile.mkdtemp(prefix="sw-profile-")
    rec_path = os.path.join(tmp, "records.jsonl")
    out_tokens = a.tokens + 1
    with DelayServerProcess(os.path.join(tmp, "server.jsonl"), a.delay_ms, a.tokens, a.interval_ms) as ds:
        cfg = LoadConfig(url=f"http://127.0.0.1:{ds.port}/v1", model="delay-model", mode="closed",
                         levels=[float(a.concurrency)], input_tokens=(128, 128),
                         output_tokens=(out_tokens, out_tokens), requests=a.requests, metrics=False, gpu=False,
                         record=rec_path, api_key_env=None, warmup=0, progress_interval=0)

        async def go() -> None:
            rec = Recorder(rec_path)
            try:
                await run_load(cfg, rec.write)
            finally:
                rec.close()

        prof = cProfile.Profile() if a.profiler == "cprofile" else None
        sampler = Sampler(a.sample_ms / 1e3) if a.profiler == "sample" else None
        load0 = os.getloadavg()[0]
        c0, w0 = time.process_time(), time.perf_counter()
        if prof is not None:
            prof.enable()
        if sampler is not None:
            sampler.start()
        try:
            asyncio.run(go())
        finally:
            if prof is not None:
                prof.disable()
            if sampler is not None:
                sampler.stop()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        load1 = os.getloadavg()[0]
    steps, n_req, n_tok, failed = [], 0, 0, 0
    with open(rec_path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d.get("type") == "request":
                n_req += 1
                if d.get("complete"):
                    n_tok += d.get("output_tokens") or 0
                else:
                    failed += 1
            elif d.get("type") == "step" and d.get("event") == "end":
                steps.append(d)
    step = steps[-1] if steps else {}
    head = (f"servewatch run_load closed loop, concurrency {a.concurrency}, {n_req} requests ({failed} failed), "
            f"{n_tok} content tokens; delay server {a.delay_ms:g} ms + {a.tokens} x {a.interval_ms:g} ms\n"
            f"profiler {a.profiler}; process CPU {cpu:.2f} s over {wall:.2f} s wall (incl. setup) = "
            f"{cpu / max(n_req, 1) * 1e3:.3f} s per 1000 requests, {cpu / max(n_tok, 1) * 1e3:.3f} s per 1000 tokens; "
            f"step process_cpu_s {step.get('process_cpu_s')}; load average {load0:.2f} -> {load1:.2f} "
            f"({os.cpu_count()} CPUs); python {sys.version.split()[0]}\n")
    body = ""
    if prof is not None:
        body = cprofile_table(prof, a.top, max(n_req, 1), max(n_tok, 1))
    elif sampler is not None:
        body = sampler.table(a.top, max(n_req, 1), max(n_tok, 1), cpu)
    text = head + body
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
