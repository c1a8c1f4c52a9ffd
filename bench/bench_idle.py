"""Benchmark: the console's CPU once a replay has ended (issue 18). Prints figures; asserts nothing.

    python bench/bench_idle.py [--seconds 25] [--file sample_logs/default.jsonl] [--json]

Starts ``python -m tui replay FILE --max-speed`` (default: the bundled real run) under a pseudo-terminal
(120x40, TERM=xterm-256color), reads its screen until the header says the replay has ended ("· end"), lets it
settle for 2 s, then samples the process's CPU time (user + system, psutil, children included) over
``--seconds`` of wall time and prints the CPU share of one core. Then ``q``, and the exit code.

The figure is the console doing nothing: no keys, no new records. Before issue 18 every tick (4 a second)
took a full snapshot of the monitor and re-rendered what had not changed.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
END = "· end".encode()


def _drain(master: int, buf: bytearray, seconds: float) -> None:
    """Read the child's screen output for ``seconds`` (it must never block on a full terminal)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        r, _, _ = select.select([master], [], [], min(left, 0.2))
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            del buf[:-200_000]


def measure(path: str, seconds: float, start_timeout: float = 120.0) -> dict:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    env.pop("TEXTUAL_DRIVER", None)
    proc = subprocess.Popen([sys.executable, "-m", "tui", "replay", path, "--max-speed"], stdin=slave,
                            stdout=slave, stderr=slave, cwd=REPO, env=env, start_new_session=True)
    os.close(slave)
    buf = bytearray()
    out: dict = {"file": path, "seconds": seconds}
    try:
        t0 = time.monotonic()
        while END not in buf:
            if proc.poll() is not None or time.monotonic() - t0 > start_timeout:
                out["error"] = f"the replay did not reach its end (exit {proc.poll()}): {bytes(buf[-300:])!r}"
                return out
            _drain(master, buf, 0.2)
        out["end_after_s"] = round(time.monotonic() - t0, 2)
        _drain(master, buf, 2.0)  # settle: the last frames after the end
        p = psutil.Process(proc.pid)

        def cpu() -> float:
            t = p.cpu_times()
            return t.user + t.system + t.children_user + t.children_system

        c0, w0 = cpu(), time.monotonic()
        _drain(master, buf, seconds)
        c1, w1 = cpu(), time.monotonic()
        out["cpu_s"] = round(c1 - c0, 3)
        out["wall_s"] = round(w1 - w0, 2)
        out["cpu_share_of_one_core_pct"] = round(100.0 * (c1 - c0) / (w1 - w0), 2)
        os.write(master, b"q")
        t_q = time.monotonic()
        while proc.poll() is None and time.monotonic() - t_q < 20:
            _drain(master, buf, 0.2)
        out["exit_code"] = proc.poll()
        return out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        os.close(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(REPO / "sample_logs" / "default.jsonl"))
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = measure(a.file, a.seconds)
    if a.json:
        print(json.dumps(res))
    elif "error" in res:
        print(f"bench_idle: {res['error']}")
    else:
        print(f"idle console after the replay ended ({res['file']}): {res['cpu_share_of_one_core_pct']:.2f}% of "
              f"one core ({res['cpu_s']:.3f} s CPU over {res['wall_s']:.1f} s); end reached after "
              f"{res['end_after_s']} s; exit {res['exit_code']}")
    return 1 if "error" in res else 0


if __name__ == "__main__":
    raise SystemExit(main())
