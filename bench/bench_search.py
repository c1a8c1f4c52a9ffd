"""`servewatch sweep --search` in real time: the probe count, the search's time and the bracket, against a server whose
capacity is known (tests/support/slot_server.py: fixed slots, fixed service time, FIFO), or against the real
llama-server (``--llama``: the binary from tests/support/llama_fixture.py and the model given with ``--model-file``).

The sweep runs as a child process (`python -m tui sweep ... --search`), open loop, evenly spaced arrivals; the bench
prints one JSON line: the settings, the capacity known in advance (slot server: slots / service_s, and the
concurrency-1 end-to-end time that bounds it from below on this machine), the bracket, the probes, the seconds of
probes and the wall time of the whole sweep (ladder included). Every server it starts is stopped before it exits.

    python3 bench/bench_search.py --slots 1 --service-s 0.095 --ladder 8,16 --window-minutes 0.05
    python3 bench/bench_search.py --slots 2 --service-s 0.2 --ladder 2,4,8,16 --window-minutes 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def sweep(url: str, ladder: str, slo_ms: float, window_min: float, max_step_s: float, precision: str,
          out_tokens: int, workdir: str) -> tuple[dict, float, str]:
    out_json = os.path.join(workdir, "sweep.json")
    cmd = [sys.executable, "-m", "tui", "sweep", "--url", url, "--rate", ladder, "--arrival", "constant", "--search",
           "--precision", precision, "--slo-ttft-ms", f"{slo_ms:.0f}", "--min-window-minutes", f"{window_min:g}",
           "--max-step-seconds", f"{max_step_s:g}", "--output-tokens", str(out_tokens), "--no-gpu",
           "--record", os.path.join(workdir, "r.jsonl"), "--sweep-json", out_json]
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if not os.path.exists(out_json):
        raise SystemExit(f"sweep wrote no JSON (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
    return json.loads(Path(out_json).read_text()), wall, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--service-s", type=float, default=0.095)
    ap.add_argument("--ladder", default="8,16", help="--rate ladder (req/s)")
    ap.add_argument("--slo-ms", type=float, default=150.0)
    ap.add_argument("--window-minutes", type=float, default=0.05)
    ap.add_argument("--max-step-seconds", type=float, default=15.0)
    ap.add_argument("--precision", default="10%")
    ap.add_argument("--output-tokens", type=int, default=4)
    ap.add_argument("--llama", action="store_true", help="against the real llama-server instead of the slot server")
    ap.add_argument("--model-file", default=None, help="GGUF model for --llama")
    ap.add_argument("--llama-args", default="", help="extra llama-server arguments (space separated)")
    ap.add_argument("--show", action="store_true", help="also print the sweep's own output")
    a = ap.parse_args()
    from tests.support.calibrate import measure_peer

    with tempfile.TemporaryDirectory() as tmp:
        if a.llama:
            from tests.support.llama_fixture import llama_server_binary

            if not a.model_file:
                raise SystemExit("--llama needs --model-file")
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            proc = subprocess.Popen([str(llama_server_binary()), "-m", a.model_file, "--host", "127.0.0.1",
                                     "--port", str(port), *a.llama_args.split()],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                url = f"http://127.0.0.1:{port}"
                import httpx

                for _ in range(600):
                    try:
                        if httpx.get(url + "/health", timeout=1).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.5)
                speed = measure_peer(url + "/v1", n=3, output_tokens=a.output_tokens)
                known = {"server": "llama-server", "capacity": "not known in advance",
                         "concurrency1": str(speed)}
                summary, wall, out = sweep(url, a.ladder, a.slo_ms, a.window_minutes, a.max_step_seconds,
                                           a.precision, a.output_tokens, tmp)
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        else:
            from tests.support.slot_server import SlotServer

            with SlotServer(a.slots, a.service_s, tokens=a.output_tokens) as server:
                speed = measure_peer(server.url + "/v1", n=3, model="slot-server")
                known = {"server": f"slot server ({a.slots} slots x {a.service_s:g} s, FIFO)",
                         "capacity_rps": round(server.capacity_rps, 3),
                         "capacity_floor_rps": round(min(server.capacity_rps, a.slots / speed.e2e_median_s), 3),
                         "concurrency1": str(speed)}
                summary, wall, out = sweep(server.url, a.ladder, a.slo_ms, a.window_minutes, a.max_step_seconds,
                                           a.precision, a.output_tokens, tmp)
    b = summary.get("capacity_bracket") or {}
    if a.show:
        print(out)
    print(json.dumps({"settings": vars(a), "known": known, "low": b.get("low"), "high": b.get("high"),
                      "stopped_by": b.get("stopped_by"), "probes": [(p["level"], p["verdict"]) for p in
                                                                   b.get("probes") or []],
                      "probe_count": len(b.get("probes") or []), "search_seconds": b.get("search_seconds"),
                      "sweep_wall_s": round(wall, 1), "loadavg": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
