"""Benchmark: the console (issue 3). Prints figures; asserts nothing.

    python bench/bench_console.py [--file /tmp/sw-console-1m.jsonl] [--requests 1000000] [--repeat 1]
                                  [--only baseline,replay,firstframe,serve] [--cold 2] [--warm 5]
                                  [--key-interval 0.2] [--ui-patch] [--serve-screenshot PNG]

baseline    ReplaySource(max_speed=True) -> MonitorSink with no UI (a snapshot 4 times a second, as the UI
            takes them): what this machine can ingest right now. Run beside `replay`: same load, same caveat.
replay      The real app: a ServewatchApp subclass (timestamps only) headless in ``App.run_test(size=(120, 40))``
            with ``ReplaySource(max_speed=True)`` and a ``MonitorSink``, the 1M-request file. Measured in the
            app process:
              * ingest: monitor.requests_total over time; records/s from source start to source finished,
                and per 10 % slice of the run;
              * the UI tick: every call of ``ConsoleScreen.tick`` (count, gaps between calls, CPU spent in it);
              * keys: ``t`` (next theme), ``?`` (help) and ``escape`` (close help), pressed with ``pilot.press``
                throughout; latency = press -> the action method ran (app-side timestamp) and press -> the
                first frame composed after it (``App._display``, which Textual calls headless too);
                ``pilot.press`` itself returns only after Pilot's wait-for-idle (1-2 s while the CPU is busy),
                so its return time is shown but is not the latency;
              * where the UI thread's CPU goes: the core snapshot (``sink.snapshot``) and Textual's screen
                updates (``Screen._on_timer_update`` / ``_refresh_layout``), in thread CPU time;
              * CPU seconds of the source thread and of the rest of the process while ingesting;
              * asyncio loop lag (a 50 ms sleeper's overshoot): how long the UI loop could not run;
              * RSS (psutil) at 10 %, 50 %, 100 % of the requests (and per 10 %), peak RSS (ru_maxrss).
            --ui-patch adds a run with an EXPERIMENT patched into that process only: Static.update skips an
            unchanged text and asks for a layout pass only when the line count changed.
firstframe  ``python -m tui.cli replay FILE`` spawned under a pseudo-terminal (120x40, TERM=xterm-256color):
            time from just before the spawn to the first output byte and to the first complete frame (the
            screen text holds a pane title and the footer), then ``q`` and the exit code. Three conditions:
            cold, no bytecode  a fresh PYTHONPYCACHEPREFIX: every module compiled from source (a first launch
                               from a source checkout; pip install normally writes bytecode);
            cold page cache    bytecode present, every file Python reads at start evicted from the page cache
                               with posix_fadvise(DONTNEED) (a first launch after a reboot; on a VM the host
                               may still cache them);
            warm               repeated launches.
serve       textual-serve (``pip install textual-serve``; not a servewatch dependency) serving
            ``python -m tui.cli replay sample_logs/seed.jsonl`` on 127.0.0.1 and a free port: the page and
            textual.js over httpx, then the page's websocket (as the browser uses it) until the console's
            first frame, ``q`` through it, and a check that no app process is left behind.
            --serve-screenshot PNG also opens the page in headless Chromium (DevTools protocol) and saves
            a screenshot.

Each measurement runs in its own subprocess (its RSS is its own). The input is SYNTHETIC
(bench/gen_records.py); it measures the console's plumbing, nothing about servers. Results on a shared
machine swing with its load: the load average is printed at start and end.
Goals (issue 3): ingest >= 50,000 records/s while the UI ticks at >= 2 Hz (max gap <= 0.5 s) and a key is
handled within 200 ms; RSS < 400 MB and flat over the run; first frame within 1.5 s of launch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZE = (120, 40)

GOAL_RATE = 50_000.0
GOAL_TICK_GAP_S = 0.5
GOAL_KEY_MS = 200.0
GOAL_RSS_MB = 400.0
GOAL_FIRST_FRAME_S = 1.5


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


# ---------------------------------------------------------------------------- child: replay with the UI


def _patch_static_update() -> None:
    """EXPERIMENT (--ui-patch, this process only): what the console would cost if its Static panes did not
    ask Textual for a layout pass on every update. ``Static.update`` defaults to ``layout=True``; here an
    update with the same text is skipped and a layout is requested only when the number of lines changed."""
    from textual.widgets import Static

    orig = Static.update

    def update(self, content="", *, layout: bool = True) -> None:
        last = getattr(self, "_bench_last", None)
        if isinstance(content, str) and isinstance(last, str):
            if content == last:
                return
            layout = content.count("\n") != last.count("\n")
        self._bench_last = content
        orig(self, content, layout=layout)

    Static.update = update


async def _replay_child(path: str, key_interval: float, deadline_s: float, ui_patch: bool = False,
                        tick_hz: float = 4.0) -> dict:
    import psutil

    if ui_patch:
        _patch_static_update()

    proc = psutil.Process()
    perf = time.perf_counter

    import threading

    from textual.screen import Screen

    import tui.app as app_mod
    import tui.screens.help as help_mod
    from tui.app import ServewatchApp
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.screens.console import ConsoleScreen
    from tui.sources.base import MonitorSink
    from tui.sources.replay import ReplaySource

    marks: list[tuple[str, float]] = []  # (action, perf time the action method started)

    # escape on the help screen runs HelpScreen.action_close: time-stamp it in this process only
    orig_close = help_mod.HelpScreen.action_close

    def timed_close(self) -> None:
        marks.append(("close_help", perf()))
        orig_close(self)

    help_mod.HelpScreen.action_close = timed_close

    # the console screen's tick (the timer calls it): time-stamp it in this process only
    orig_tick = ConsoleScreen.tick

    def timed_tick(self, force: bool = False) -> None:
        t, c = perf(), time.thread_time()
        orig_tick(self, force)
        self.app.tick_log.append((t, time.thread_time() - c))

    ConsoleScreen.tick = timed_tick

    class TimedSource(ReplaySource):
        t_started: float | None = None
        t_done: float | None = None
        native_id: int | None = None
        cpu_at_start: dict | None = None
        cpu_at_done: dict | None = None

        def start(self, sink) -> None:
            self.t_started = perf()
            self.cpu_at_start = _thread_cpu()
            super().start(sink)

        def _run(self, sink) -> None:
            self.native_id = threading.get_native_id()
            try:
                super()._run(sink)
            finally:
                self.t_done = perf()
                self.cpu_at_done = _thread_cpu()

    class BenchApp(ServewatchApp):
        # CSS_PATH is resolved against the defining class's file: point it back at tui/app.tcss
        CSS_PATH = os.path.join(os.path.dirname(os.path.abspath(app_mod.__file__)), ServewatchApp.CSS_PATH)

        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.tick_log: list[tuple[float, float]] = []  # (start, CPU seconds spent in the tick)
            self.frames: list[tuple[float, str]] = []  # (perf time, screen class) of every composed frame

        def _display(self, screen, renderable) -> None:
            if renderable is not None and not self._batch_count:
                self.frames.append((perf(), type(screen).__name__))
            super()._display(screen, renderable)

        def action_next_theme(self) -> None:
            marks.append(("next_theme", perf()))
            super().action_next_theme()

        def action_help(self) -> None:
            marks.append(("help", perf()))
            super().action_help()

    def _thread_cpu() -> dict[int, float]:
        return {t.id: t.user_time + t.system_time for t in proc.threads()}

    n_lines = n_requests = 0
    with open(path, "rb") as fh:
        for line in fh:
            n_lines += 1
            n_requests += b'"request"' in line
    src = TimedSource(path, max_speed=True)
    mon = Monitor(MonitorConfig(), source=src.label)
    sink = MonitorSink(mon)

    # where the UI thread's time goes: the core snapshot (under the sink lock) and Textual's screen updates
    snap_times: list[tuple[float, float]] = []
    render_times: list[tuple[float, float]] = []
    snap_wall: list[tuple[float, float]] = []
    orig_snapshot = sink.snapshot
    cpu = time.thread_time

    def timed_snapshot():
        t, c = perf(), cpu()
        try:
            return orig_snapshot()
        finally:
            snap_times.append((t, cpu() - c))
            snap_wall.append((t, perf() - t))  # includes waiting for the sink lock and the GIL

    sink.snapshot = timed_snapshot
    depth = [0]

    def timed_render(orig):
        def wrapper(self, *a, **kw):
            depth[0] += 1
            t, c = perf(), cpu()
            try:
                return orig(self, *a, **kw)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    render_times.append((t, cpu() - c))
        return wrapper

    Screen._on_timer_update = timed_render(Screen._on_timer_update)
    Screen._refresh_layout = timed_render(Screen._refresh_layout)
    app = BenchApp(src, sink, None, tick_hz=tick_hz)

    samples: list[tuple[float, int, float]] = []  # (perf, requests_total, rss MB)
    rss_at: dict[str, float] = {}
    presses: list[dict] = []
    lag: list[float] = []
    stop = asyncio.Event()
    rss0 = proc.memory_info().rss / 2**20

    async def sampler() -> None:
        targets = [("10%", 0.10), ("50%", 0.50), ("100%", 1.00)]
        while not stop.is_set():
            n = mon.requests_total
            rss = proc.memory_info().rss / 2**20
            samples.append((perf(), n, rss))
            for name, frac in targets:
                if name not in rss_at and (n >= frac * n_requests or (name == "100%" and src.t_done is not None)):
                    rss_at[name] = rss
            await asyncio.sleep(0.1)

    async def lag_probe() -> None:
        while not stop.is_set():
            t = perf()
            await asyncio.sleep(0.05)
            lag.append(perf() - t - 0.05)

    async with app.run_test(size=SIZE) as pilot:
        t_run = perf()
        tasks = [asyncio.create_task(sampler()), asyncio.create_task(lag_probe())]
        keys = ["t", "question_mark", "escape"]
        k = 0
        while src.t_done is None and perf() - t_run < deadline_s:
            if key_interval <= 0:  # no keys: only watch the ingest and the tick
                await asyncio.sleep(0.1)
                continue
            key = keys[k % len(keys)]
            k += 1
            n_marks = len(marks)
            t0 = perf()
            await pilot.press(key)
            t_ret = perf()
            presses.append({"key": key, "t0": t0, "t_return": t_ret, "mark_index": n_marks,
                            "during_ingest": src.t_done is None})
            await asyncio.sleep(key_interval)
        # the replay is over: wait (bounded) for the last snapshot to be on screen
        while perf() - t_run < deadline_s and app.console_screen.last_seq != sink.snapshot().seq:
            await pilot.pause(0.05)
        final_rendered = app.console_screen.last_seq == sink.snapshot().seq
        t_end = perf()
        stop.set()
        for task in tasks:
            await task
        snap = sink.snapshot()
        ticks = list(app.tick_log)
        frames = list(app.frames)
        if isinstance(app.screen, help_mod.HelpScreen):
            await pilot.press("escape")
        await pilot.press("q")

    # ---- key latencies: match each press with the action it caused and the first frame after that
    want = {"t": "next_theme", "question_mark": "help", "escape": "close_help"}
    key_rows = []
    for p in presses:
        action = next(((name, t) for name, t in marks[p["mark_index"]:] if name == want[p["key"]] and t >= p["t0"]),
                      None)
        row = {"key": p["key"], "during_ingest": p["during_ingest"], "pilot_press_ms": (p["t_return"] - p["t0"]) * 1e3}
        if action is None:
            row.update(handled=False)
        else:
            t_act = action[1]
            if p["key"] == "question_mark":
                frame = next((t for t, scr in frames if t >= t_act and scr == "HelpScreen"), None)
            elif p["key"] == "escape":
                frame = next((t for t, scr in frames if t >= t_act and scr != "HelpScreen"), None)
            else:
                frame = next((t for t, _ in frames if t >= t_act), None)
            row.update(handled=True, action_ms=(t_act - p["t0"]) * 1e3,
                       frame_ms=None if frame is None else (frame - p["t0"]) * 1e3)
        key_rows.append(row)

    t_start, t_done = src.t_started, src.t_done
    # CPU seconds of the source thread and of everything else (the UI loop and Textual's threads) while ingesting
    cpu_start, cpu_done = src.cpu_at_start or {}, src.cpu_at_done or {}
    src_cpu = cpu_done.get(src.native_id, 0.0)
    other_cpu = sum(v - cpu_start.get(k, 0.0) for k, v in cpu_done.items() if k != src.native_id)
    ingest_s = (t_done - t_start) if (t_start is not None and t_done is not None) else None
    in_ingest = [(t, d) for t, d in ticks if t_start is not None and t_done is not None and t_start <= t <= t_done]
    gaps = [b[0] - a[0] for a, b in zip(in_ingest, in_ingest[1:])]

    def _during(rows):
        return [d for t, d in rows if t_start is not None and t_done is not None and t_start <= t <= t_done]

    snap_d, render_d, snap_w = _during(snap_times), _during(render_times), _during(snap_wall)
    # ingest rate in 10 %-of-run slices (does it slow down as the run goes on?)
    slices = []
    if ingest_s:
        inside = [(t, n) for t, n, _ in samples if t_start <= t <= t_done]
        edges = [t_start + ingest_s * i / 10 for i in range(11)]
        for a, b in zip(edges, edges[1:]):
            pts = [(t, n) for t, n in inside if a <= t <= b]
            if len(pts) >= 2:
                slices.append((pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0]))
    return {
        "file_lines": n_lines,
        "requests": snap.requests_total,
        "issues": snap.malformed + snap.truncated + snap.unknown_types,
        "synthetic": snap.synthetic,
        "ingest_s": ingest_s,
        "rate": (snap.requests_total / ingest_s) if ingest_s else None,
        "rate_slices": slices,
        "final_rendered": final_rendered,
        "render_after_done_s": (t_end - t_done) if t_done else None,
        "ticks_during_ingest": len(in_ingest),
        "tick_hz_during_ingest": (len(in_ingest) / ingest_s) if ingest_s else None,
        "tick_gap_max_s": max(gaps) if gaps else None,
        "tick_gap_p99_s": _pct(gaps, 0.99),
        "tick_gap_median_s": _pct(gaps, 0.5),
        "tick_work_max_ms": max((d for _, d in in_ingest), default=0.0) * 1e3,
        "tick_work_mean_ms": (statistics.fmean(d for _, d in in_ingest) * 1e3) if in_ingest else None,
        "frames": len(frames),
        "snapshot_mean_ms": statistics.fmean(snap_d) * 1e3 if snap_d else None,
        "snapshot_max_ms": max(snap_d, default=0.0) * 1e3,
        "snapshot_total_s": sum(snap_d),
        "snapshot_wall_p50_ms": (_pct(snap_w, 0.5) or 0.0) * 1e3,
        "snapshot_wall_max_ms": max(snap_w, default=0.0) * 1e3,
        "render_count": len(render_d),
        "render_mean_ms": statistics.fmean(render_d) * 1e3 if render_d else None,
        "render_max_ms": max(render_d, default=0.0) * 1e3,
        "render_total_s": sum(render_d),
        "tick_total_s": sum(d for _, d in in_ingest),
        "source_cpu_s": src_cpu,
        "ui_cpu_s": other_cpu,
        "rss_slices_mb": [max((m for t, _, m in samples if t <= t_start + ingest_s * i / 10), default=None)
                          for i in range(1, 11)] if ingest_s else [],
        "pane_updates": app.console_screen.pane_updates,
        "loop_lag_max_ms": max(lag, default=0.0) * 1e3,
        "loop_lag_p99_ms": (_pct(lag, 0.99) or 0.0) * 1e3,
        "keys": key_rows,
        "rss_start_mb": rss0,
        "rss_at_mb": rss_at,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "python": sys.version.split()[0],
    }


# ---------------------------------------------------------------------------- child: source only (no UI)


def _baseline_child(path: str) -> dict:
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.sources.base import MonitorSink
    from tui.sources.replay import ReplaySource

    src = ReplaySource(path, max_speed=True)
    sink = MonitorSink(Monitor(MonitorConfig(), source=src.label))
    snaps = []
    c0 = time.process_time()
    t0 = time.perf_counter()
    src.start(sink)
    while not src.finished:  # a bench, not a test: a plain poll is fine here
        time.sleep(0.25)
        s = time.perf_counter()
        sink.snapshot()  # as the UI would, 4 times a second
        snaps.append(time.perf_counter() - s)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    src.stop()
    n = sink.monitor.requests_total
    return {"requests": n, "seconds": dt, "rate": n / dt, "cpu_us_per_record": cpu / max(1, n) * 1e6, "snapshot_max_ms": max(snaps, default=0) * 1e3,
            "snapshot_mean_ms": statistics.fmean(snaps) * 1e3 if snaps else None,
            "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# ---------------------------------------------------------------------------- first frame under a pty

_CSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
FRAME_MARKERS = ("Good fraction", "Quit")  # a pane title and the footer: the whole screen has been drawn


def first_frame(argv: list[str], env: dict, timeout: float = 30.0) -> dict:
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    buf = b""
    t_first_byte = t_frame = None
    deadline = t0 + timeout
    try:
        while time.perf_counter() < deadline and t_frame is None:
            r, _, _ = select.select([master], [], [], 0.05)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            if t_first_byte is None:
                t_first_byte = time.perf_counter()
            buf += data
            text = _CSI.sub(b"", buf).decode("utf-8", "replace")
            if all(m in text for m in FRAME_MARKERS):
                t_frame = time.perf_counter()
        code = None
        if proc.poll() is None:
            os.write(master, b"q")
            end = time.perf_counter() + 15
            while time.perf_counter() < end and proc.poll() is None:
                r, _, _ = select.select([master], [], [], 0.1)
                if r:
                    try:
                        os.read(master, 65536)
                    except OSError:
                        pass
        code = proc.poll()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
            code = "killed"
        os.close(master)
    return {"first_byte_s": None if t_first_byte is None else t_first_byte - t0,
            "first_frame_s": None if t_frame is None else t_frame - t0, "exit": code,
            "bytes_seen": len(buf)}


# ---------------------------------------------------------------------------- textual-serve (browser) check

SERVER = r"""
import sys
from textual_serve.server import Server
Server(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]), title="servewatch").serve()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_check(record_file: str, timeout: float = 60.0, screenshot: str | None = None) -> dict:
    """Serve `python -m tui.cli replay FILE` with textual-serve on 127.0.0.1, fetch the page and its JS with
    httpx, then connect the page's websocket like the browser does and wait for the console's first frame."""
    import httpx

    try:
        import aiohttp  # noqa: F401 - comes with textual-serve
        import textual_serve  # noqa: F401
    except ImportError:
        return {"skipped": "textual-serve is not installed (pip install textual-serve)"}
    port = _free_port()
    command = f"{sys.executable} -m tui.cli replay {record_file} --export-dir {tempfile.gettempdir()}"
    env = dict(os.environ, PYTHONPATH=ROOT)
    server = subprocess.Popen([sys.executable, "-c", SERVER, command, str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    res: dict = {"port": port, "command": command}
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.perf_counter() + 20
        page = None
        while time.perf_counter() < deadline and server.poll() is None:
            try:
                page = httpx.get(base + "/", timeout=2.0)
                break
            except httpx.TransportError:
                time.sleep(0.1)  # the server is still starting: bounded poll
        if page is None:
            res["error"] = "server did not answer"
            return res
        res["page_status"] = page.status_code
        res["page_has_ws_url"] = f"ws://127.0.0.1:{port}/ws" in page.text
        res["page_has_textual_js"] = "js/textual.js" in page.text
        res["page_names_app"] = ">servewatch<" in page.text  # Server(title=...) is shown on the page
        js = httpx.get(base + "/static/js/textual.js", timeout=5.0)
        res["js_status"], res["js_bytes"] = js.status_code, len(js.content)
        res.update(asyncio.run(_serve_ws(f"ws://127.0.0.1:{port}/ws?width={SIZE[0]}&height={SIZE[1]}", timeout)))
        if screenshot:
            res.update(_browser_screenshot(f"{base}/?fontsize=12", screenshot))
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)  # textual-serve exits gracefully on SIGINT
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(5)
        # the app processes textual-serve spawned live in the server's process group (start_new_session):
        # report any that outlived the server, then end them
        try:
            left = subprocess.run(["pgrep", "-g", str(server.pid)], capture_output=True, text=True,
                                  check=False).stdout.split()
        except OSError:
            left = []
        res["leftover_processes"] = len(left)
        if left:
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out = server.stdout.read().decode("utf-8", "replace") if server.stdout else ""
        res["server_log_tail"] = _CSI.sub(b"", out.encode()).decode("utf-8", "replace")[-600:]
    return res


async def _serve_ws(url: str, timeout: float) -> dict:
    import aiohttp

    res: dict = {}
    buf = b""
    t0 = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as ws:
            end = t0 + timeout
            while time.perf_counter() < end:
                try:
                    msg = await asyncio.wait_for(ws.receive(), timeout=max(0.1, end - time.perf_counter()))
                except TimeoutError:
                    break
                if msg.type == aiohttp.WSMsgType.BINARY:
                    buf += msg.data
                    text = _CSI.sub(b"", buf).decode("utf-8", "replace")
                    if "first_frame_s" not in res and all(m in text for m in FRAME_MARKERS):
                        res["first_frame_s"] = time.perf_counter() - t0
                        end = min(end, time.perf_counter() + 3.0)  # then a little longer, for the run header
                    if "first_frame_s" in res and "SYNTHETIC" in text:
                        break
                elif msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    break
            res["ws_bytes"] = len(buf)
            res["synthetic_badge"] = "SYNTHETIC" in _CSI.sub(b"", buf).decode("utf-8", "replace")
            # quit the console the way a browser user would: press q
            await ws.send_json(["stdin", "q"])
            closed = False
            end = time.perf_counter() + 15
            while time.perf_counter() < end:
                try:
                    msg = await asyncio.wait_for(ws.receive(), timeout=max(0.1, end - time.perf_counter()))
                except TimeoutError:
                    break
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                    closed = True
                    break
                if msg.type == aiohttp.WSMsgType.TEXT and '"exit"' in msg.data:
                    closed = True
            res["closed_after_q"] = closed or ws.closed
    return res


def _browser_screenshot(url: str, out_png: str, settle_s: float = 4.0, timeout: float = 60.0) -> dict:
    """Open ``url`` in headless Chromium (DevTools protocol over a websocket), wait until the page has
    received the console's first bytes plus ``settle_s``, and save a PNG screenshot."""
    import base64

    import httpx

    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        return {"screenshot": "skipped: no chromium on PATH"}
    port = _free_port()
    profile = tempfile.mkdtemp(prefix="sw-chromium-")
    browser = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                f"--user-data-dir={profile}", f"--remote-debugging-port={port}",
                                "--window-size=1500,1000", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.perf_counter() + 20
        target = None
        while time.perf_counter() < deadline and target is None:
            try:
                pages = httpx.get(f"http://127.0.0.1:{port}/json", timeout=2.0).json()
                target = next((p["webSocketDebuggerUrl"] for p in pages if p.get("type") == "page"), None)
            except (httpx.TransportError, ValueError):
                pass
            if target is None:
                time.sleep(0.2)  # the browser is still starting: bounded poll
        if target is None:
            return {"screenshot": "failed: the browser's DevTools endpoint did not answer"}
        return asyncio.run(_cdp_screenshot(target, url, out_png, settle_s, timeout, base64))
    finally:
        browser.kill()
        browser.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


async def _cdp_screenshot(target: str, url: str, out_png: str, settle_s: float, timeout: float, base64) -> dict:
    import aiohttp

    ids = iter(range(1, 10_000))

    async def call(ws, method: str, **params):
        i = next(ids)
        await ws.send_json({"id": i, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(ws.receive_json(), timeout=timeout)
            if msg.get("id") == i:
                return msg.get("result", {})

    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(target, max_msg_size=0) as ws:
            t0 = time.perf_counter()
            await call(ws, "Page.navigate", url=url)
            seen = None
            while time.perf_counter() - t0 < timeout:
                r = await call(ws, "Runtime.evaluate", expression="document.body && document.body.className")
                if "-first-byte" in str(r.get("result", {}).get("value", "")):  # textual.js: data arrived
                    seen = time.perf_counter() - t0
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(settle_s)  # let the first frames paint (a bench: a fixed settle time is fine)
            shot = await call(ws, "Page.captureScreenshot", format="png")
    data = base64.b64decode(shot.get("data", ""))
    with open(out_png, "wb") as fh:
        fh.write(data)
    return {"screenshot": out_png, "screenshot_bytes": len(data), "browser_first_byte_s": seen}


def evict_page_cache() -> int:
    """Ask the kernel to drop its cached pages of every file Python reads at start (the stdlib, the venv's
    site-packages, this project's tui/ and themes/, the interpreter): a first launch after a reboot, with
    bytecode present. posix_fadvise(DONTNEED) is advisory and per file; no privileges needed. Returns the
    number of files advised. (On a VM the host may still have them cached.)"""
    import sysconfig

    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs |= {os.path.join(ROOT, "tui"), os.path.join(ROOT, "themes")}
    files = {os.path.realpath(sys.executable)}
    for d in dirs:
        for folder, _, names in os.walk(d):
            files.update(os.path.join(folder, n) for n in names)
    n = 0
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return n


# ---------------------------------------------------------------------------- parent


def _child(args: list[str], timeout: float, opts: tuple[str, ...] = ()) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), *opts, "--child", *args], capture_output=True,
                         text=True, env=env, timeout=timeout, cwd=ROOT, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ok(flag: bool) -> str:
    return "OK " if flag else "MISS"


def report_replay(r: dict) -> None:
    keys = [k for k in r["keys"] if k["handled"]]
    during = [k for k in keys if k["during_ingest"]]
    act = [k["action_ms"] for k in during]
    frm = [k["frame_ms"] for k in during if k["frame_ms"] is not None]
    missed = [k for k in r["keys"] if not k["handled"]]
    rss_vals = [r["rss_at_mb"].get(n) for n in ("10%", "50%", "100%")]
    print(f"  requests {r['requests']:,} (file {r['file_lines']:,} lines, {r['issues']} bad lines, "
          f"synthetic={r['synthetic']}), ingest {r['ingest_s']:.1f} s")
    print(f"  [{_ok((r['rate'] or 0) >= GOAL_RATE)}] ingest {r['rate']:,.0f} records/s (goal >= {GOAL_RATE:,.0f}); "
          f"per 10% slice: " + " ".join(f"{x / 1000:.0f}k" for x in r["rate_slices"]))
    print(f"  [{_ok((r['tick_gap_max_s'] or 9) <= GOAL_TICK_GAP_S)}] UI tick {r['ticks_during_ingest']} calls, "
          f"{r['tick_hz_during_ingest']:.2f} Hz, gap median {r['tick_gap_median_s'] * 1e3:.0f} ms / p99 "
          f"{r['tick_gap_p99_s'] * 1e3:.0f} ms / max {r['tick_gap_max_s'] * 1e3:.0f} ms (goal max <= "
          f"{GOAL_TICK_GAP_S * 1e3:.0f} ms); CPU per tick mean {r['tick_work_mean_ms']:.1f} ms, max "
          f"{r['tick_work_max_ms']:.1f} ms; {r['frames']} frames, {r['pane_updates']} pane updates")
    print(f"        CPU while ingesting: source thread {r['source_cpu_s']:.1f} s, everything else (UI) "
          f"{r['ui_cpu_s']:.1f} s, of {r['ingest_s']:.1f} s wall on {os.cpu_count()} CPUs")
    print(f"        UI thread CPU while ingesting: tick {r['tick_total_s']:.1f} s (of which sink.snapshot "
          f"{r['snapshot_total_s']:.1f} s: mean {r['snapshot_mean_ms']:.0f} ms, max {r['snapshot_max_ms']:.0f} ms; "
          f"wall incl. lock and GIL waits median {r['snapshot_wall_p50_ms']:.0f} / max {r['snapshot_wall_max_ms']:.0f} ms), "
          f"screen updates {r['render_total_s']:.1f} s ({r['render_count']}, mean {r['render_mean_ms']:.0f} ms, "
          f"max {r['render_max_ms']:.0f} ms)")
    print(f"        asyncio loop lag p99 {r['loop_lag_p99_ms']:.0f} ms, max {r['loop_lag_max_ms']:.0f} ms")
    if act:
        print(f"  [{_ok(max(frm or [1e9]) <= GOAL_KEY_MS)}] keys during ingest: {len(during)} presses (t, ?, escape); "
              f"press->action median {_pct(act, .5):.0f} ms, max {max(act):.0f} ms; press->frame median "
              f"{_pct(frm, .5):.0f} ms, max {max(frm):.0f} ms (goal <= {GOAL_KEY_MS:.0f} ms); "
              f"pilot.press returned after median {_pct([k['pilot_press_ms'] for k in during], .5):.0f} ms "
              f"(includes Pilot's wait-for-idle){'; NOT HANDLED: ' + str(len(missed)) if missed else ''}")
        for key in ("t", "question_mark", "escape"):
            ks = [k for k in during if k["key"] == key]
            if ks:
                fr = [k["frame_ms"] for k in ks if k["frame_ms"] is not None]
                print(f"        {key:>13}: n={len(ks)} action max {max(k['action_ms'] for k in ks):.0f} ms, "
                      f"frame median {_pct(fr, .5) or float('nan'):.0f} / max {max(fr, default=float('nan')):.0f} ms")
    else:
        print(f"  [MISS] no key press was handled during ingest ({len(r['keys'])} presses)")
    flat = all(v is not None for v in rss_vals) and rss_vals[2] - rss_vals[0] < 50
    print(f"  [{_ok(r['rss_peak_mb'] < GOAL_RSS_MB and flat)}] RSS at 10% / 50% / 100%: "
          + " / ".join("n/a" if v is None else f"{v:.0f}" for v in rss_vals)
          + f" MB (start {r['rss_start_mb']:.0f} MB; per 10%: "
          + " ".join("-" if v is None else f"{v:.0f}" for v in r["rss_slices_mb"]) + f"), peak {r['rss_peak_mb']:.0f} MB (goal < {GOAL_RSS_MB:.0f} MB, flat)")
    print(f"  final snapshot on screen: {r['final_rendered']} ({r['render_after_done_s']:.2f} s after the source finished)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--file", default="/tmp/sw-console-1m.jsonl")
    ap.add_argument("--only", default="replay,baseline,firstframe,serve",
                    help="comma-separated sections: replay, baseline, firstframe, serve (needs textual-serve)")
    ap.add_argument("--repeat", type=int, default=1, help="replay/baseline runs (alternating)")
    ap.add_argument("--warm", type=int, default=5, help="warm first-frame launches per case")
    ap.add_argument("--cold", type=int, default=2, help="cold first-frame launches per case")
    ap.add_argument("--key-interval", type=float, default=0.2,
                    help="seconds between key presses in `replay` (0: press no keys)")
    ap.add_argument("--tick-hz", dest="tick_hz", type=float, default=4.0,
                    help="replay: the app's tick rate (ServewatchApp(tick_hz=...); the console's default is 4)")
    ap.add_argument("--ui-patch", dest="ui_patch", action="store_true",
                    help="also run `replay` with the proposed app-side fix patched in (Static updates without a "
                         "layout pass unless the line count changed; bench process only)")
    ap.add_argument("--serve-screenshot", dest="serve_screenshot", default=None, metavar="PNG",
                    help="serve: also open the page in headless Chromium and save a screenshot")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.child:
        import faulthandler

        # a hung child prints every thread's stack and exits instead of hanging the benchmark
        faulthandler.dump_traceback_later(float(os.environ.get("SW_BENCH_WATCHDOG_S", "900")), exit=True)
        kind = a.child[0]
        if kind == "replay":
            res = asyncio.run(_replay_child(a.child[1], a.key_interval, 900.0, a.ui_patch, a.tick_hz))
        elif kind == "baseline":
            res = _baseline_child(a.child[1])
        else:
            raise SystemExit(f"unknown child {kind}")
        print(json.dumps(res))
        return

    only = {x.strip() for x in a.only.split(",") if x.strip()}
    if not os.path.exists(a.file):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_records.py"), a.file, "--requests", str(a.requests)],
                       check=True)
    load = os.getloadavg()
    print(f"servewatch console benchmark, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"file: {a.file} ({os.path.getsize(a.file) / 1e6:.0f} MB, SYNTHETIC), python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")

    for i in range(a.repeat):
        if "baseline" in only:
            b = _child(["baseline", a.file], 1800)
            print(f"baseline {i + 1} (ReplaySource -> MonitorSink, no UI, 4 snapshots/s): {b['rate']:,.0f} records/s, "
                  f"{b['seconds']:.1f} s, CPU {b['cpu_us_per_record']:.1f} us/record, snapshot mean {b['snapshot_mean_ms']:.1f} ms / max {b['snapshot_max_ms']:.0f} ms,"
                  f" peak RSS {b['rss_peak_mb']:.0f} MB")
        if "replay" in only:
            opts = ("--key-interval", str(a.key_interval), "--tick-hz", str(a.tick_hz))
            r = _child(["replay", a.file], 1800, opts)
            print(f"replay {i + 1} (ServewatchApp headless {SIZE[0]}x{SIZE[1]}, ReplaySource max speed, "
                  f"{a.tick_hz:g} Hz tick):")
            report_replay(r)
            if a.ui_patch:
                r = _child(["replay", a.file], 1800, (*opts, "--ui-patch"))
                print(f"replay {i + 1} with --ui-patch (EXPERIMENT: Static.update without a layout pass unless the "
                      f"line count changed):")
                report_replay(r)

    if "firstframe" in only:
        print(f"first frame: `python -m tui.cli replay FILE` under a {SIZE[0]}x{SIZE[1]} pseudo-terminal "
              f"(spawn -> screen shows {' and '.join(repr(m) for m in FRAME_MARKERS)}), then `q`")
        sample = os.path.join(ROOT, "sample_logs", "seed.jsonl")
        cases = [(f"{os.path.basename(a.file)} --max-speed", ["replay", a.file, "--max-speed"])]
        if os.path.exists(sample):
            cases.append(("sample_logs/seed.jsonl", ["replay", sample]))
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("TEXTUAL", "PYTHONPYCACHEPREFIX"))}
        base_env.update(PYTHONPATH=ROOT, TERM="xterm-256color", COLORTERM="truecolor")
        base_env.pop("COLUMNS", None)
        base_env.pop("LINES", None)
        for name, extra in cases:
            argv = [sys.executable, "-m", "tui.cli", *extra, "--export-dir", tempfile.gettempdir()]
            cold, cache, warm = [], [], []
            for _ in range(a.cold):
                prefix = tempfile.mkdtemp(prefix="sw-pyc-")
                try:
                    cold.append(first_frame(argv, dict(base_env, PYTHONPYCACHEPREFIX=prefix)))
                finally:
                    shutil.rmtree(prefix, ignore_errors=True)
            first_frame(argv, base_env)  # make sure the normal __pycache__ is written
            for _ in range(a.cold):
                evict_page_cache()
                cache.append(first_frame(argv, base_env))
            first_frame(argv, base_env)  # page cache hot again
            for _ in range(a.warm):
                warm.append(first_frame(argv, base_env))
            for label, runs in (("cold, no bytecode", cold), ("cold page cache", cache), ("warm", warm)):
                ff = [x["first_frame_s"] for x in runs if x["first_frame_s"] is not None]
                fb = [x["first_byte_s"] for x in runs if x["first_byte_s"] is not None]
                if not runs:
                    continue
                worst = max(ff) if len(ff) == len(runs) else None
                print(f"  [{_ok(worst is not None and worst <= GOAL_FIRST_FRAME_S)}] {name:<32} {label:<17}: first frame "
                      + ", ".join("none" if x["first_frame_s"] is None else f"{x['first_frame_s']:.2f}" for x in runs)
                      + f" s (median {statistics.median(ff) if ff else float('nan'):.2f}); first byte median "
                      f"{statistics.median(fb) if fb else float('nan'):.2f} s; exit codes "
                      + ",".join(str(x["exit"]) for x in runs))
    if "serve" in only:
        sample = os.path.join(ROOT, "sample_logs", "seed.jsonl")
        r = serve_check(sample if os.path.exists(sample) else a.file, screenshot=a.serve_screenshot)
        if "skipped" in r:
            print(f"textual-serve: skipped: {r['skipped']}")
        else:
            ok = (r.get("page_status") == 200 and r.get("page_has_ws_url") and r.get("js_status") == 200
                  and r.get("first_frame_s") is not None)
            ff = r.get("first_frame_s")
            print(f"textual-serve: [{_ok(bool(ok))}] {r['command']!r} on 127.0.0.1:{r['port']}: page HTTP "
                  f"{r.get('page_status')} (names servewatch {r.get('page_names_app')}, websocket URL {r.get('page_has_ws_url')}, "
                  f"textual.js {r.get('js_status')} / {r.get('js_bytes')} bytes); websocket: console frame after "
                  + ("none" if ff is None else f"{ff:.2f} s")
                  + f" (SYNTHETIC badge {r.get('synthetic_badge')}), {r.get('ws_bytes')} bytes, closed after q: "
                  f"{r.get('closed_after_q')}")
            print(f"  processes left behind after the server stopped: {r.get('leftover_processes')}")
            if a.serve_screenshot:
                print(f"  browser (headless Chromium): {r.get('screenshot')} ({r.get('screenshot_bytes', 0)} bytes), "
                      f"first bytes in the page after {r.get('browser_first_byte_s')} s")
            if not ok:
                print("  server log: " + r.get("server_log_tail", "").replace("\n", "\n  "))
    load = os.getloadavg()
    print(f"load average at end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


if __name__ == "__main__":
    main()
