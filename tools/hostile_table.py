"""Issue 36, finding 3: per output sink, the problems the hostile inputs of tests/support/hostile.py cause (control
characters, forged lines, markup a renderer acts on, invalid chart JSON, a crash), for the servewatch code in
``TUI_ROOT`` (a folder holding a ``tui/`` package; default: this checkout). The before/after table of the helper's
note came from::

    mkdir -p /tmp/orig && git archive 1a6ea7a tui | tar -x -C /tmp/orig
    TUI_ROOT=/tmp/orig python3 tools/hostile_table.py     # before
    python3 tools/hostile_table.py                         # after

Prints one JSON list of [sink, inputs, number of distinct problems, the problems]. Traffic: 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = os.environ.get("TUI_ROOT", str(REPO))


def main() -> list:
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, ROOT)
    import tests.cli.test_hostile_strings as T
    from tests.console.test_hostile_console import _problems, _screen
    from tests.support.hostile import HostileServer, hostile_records, payload, write_jsonl
    from tui.app import build_app
    from tui.core.exitcodes import ExitCode
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.sources.base import MonitorSink
    from tui.sources.replay import ReplaySource

    base = Path(tempfile.mkdtemp())

    class Factory:
        def mktemp(self, name: str) -> Path:
            p = base / name
            p.mkdir(parents=True, exist_ok=True)
            return p

    files = T.files.__wrapped__(Factory())
    d = files["dir"]
    rows: list = []

    def row(sink: str, cases: str, found: list, rc: int | None = None) -> None:
        rows.append((sink, cases, found + (["exit 70"] if rc == ExitCode.INTERNAL else [])))

    low = T.LOW
    rec = str(files["rec"])
    rc, out, err = T.run(["report", rec, *low])
    row("report (text)", "record file", T.terminal_problems(out), rc)
    row("report stderr (bad lines)", "record file", T.terminal_problems(err))
    rc, out, _ = T.run(["report", rec, "--json", *low])
    row("report --json", "record file", T.json_problems(out), rc)
    rc, out, _ = T.run(["report", rec, "--html", str(d / "r.html"), *low])
    row("report --html page", "record file", T.page_problems((d / "r.html").read_text()), rc)
    acc = d / "acc"
    rc, out, err = T.run(["accept", "--records", rec, "--quality", str(files["quality"]), "--rollback",
                          str(files["rules"]), "--config", str(files["config"]), "--gpu-gib", "80", "--out", str(acc),
                          *low])
    row("accept stdout/stderr", "record, quality, rules, config", T.terminal_problems(out + err), rc)
    row("acceptance.md", "record, quality, rules, config", T.markdown_problems((acc / "acceptance.md").read_text()))
    row("acceptance.json", "record, quality, rules, config",
        T.json_problems((acc / "acceptance.json").read_text(), raw_kept=False))
    row("acceptance.html", "record, quality, rules, config", T.page_problems((acc / "acceptance.html").read_text()))
    args = ["compare", rec, str(files["rec2"])]
    rc, out, err = T.run(args)
    row("compare (markdown)", "2 record files", T.markdown_problems(out) + T.terminal_problems(err), rc)
    rc, out, _ = T.run([*args, "--json"])
    row("compare --json", "2 record files", T.json_problems(out, raw_kept=False), rc)
    rc, out, _ = T.run([*args, "--html", str(d / "c.html")])
    row("compare --html page", "2 record files", T.page_problems((d / "c.html").read_text()) + T.terminal_problems(out),
        rc)
    rc, out, err = T.run(["plan", "--records", rec, "--peak-rate", "3", *low])
    row("plan (text)", "record file", T.terminal_problems(out + err), rc)
    rc, out, _ = T.run(["plan", "--records", rec, "--peak-rate", "3", "--json", *low])
    row("plan --json", "record file", T.json_problems(out, raw_kept=False), rc)
    rc, out, err = T.run(["budget", "--config", str(files["config"]), "--gpu-gib", "80"])
    row("budget (text)", "config.json", T.terminal_problems(out + err), rc)
    rc, out, err = T.run(["report", str(d / "x\x1b]0;t\x07\nFORGED: PASS")])
    row("usage error line", "file name", T.terminal_problems(err) + ([] if err.count("\n") == 1 else ["2 lines"]), rc)
    with HostileServer() as hs:
        rc, out, err = T.run(["run", "--url", hs.url, "--concurrency", "1,2", "--requests", "10", "--record",
                              str(d / "run.jsonl"), "--no-gpu", *low])
        row("run (progress and report)", "hostile server", T.terminal_problems(out + err), rc)
        qset = d / "set.jsonl"
        cases = [{"id": payload(f"id{i}"), "category": payload("cat"), "max_tokens": 8,
                  "messages": [{"role": "user", "content": payload("prompt")}],
                  "checks": [{"type": ["contains", "not_contains", "exact", "number"][i % 4],
                              "value": 7 if i % 4 == 3 else payload("want")}]} for i in range(8)]
        qset.write_text("".join(json.dumps(c) + "\n" for c in cases))
        qa = ["quality", "--url", hs.url, "--suite", "none", "--set", str(qset), "--min-cases", "1"]
        rc, out, err = T.run([*qa, "--out", str(d / "q.json")])
        row("quality (text)", "hostile server, hostile set", T.terminal_problems(out + err), rc)
        rc, out, _ = T.run([*qa, "--out", str(d / "q2.json"), "--json"])
        row("quality --json", "hostile server, hostile set", T.json_problems(out), rc)
        rc, out, err = T.run(["accept", "--records", str(d / "run.jsonl"), "--quality", str(d / "q.json"), "--out",
                              str(d / "acc2"), *low])
        row("acceptance.md (served run + quality)", "hostile server",
            T.markdown_problems((d / "acc2" / "acceptance.md").read_text()), rc)
    with HostileServer(engine="vllm") as hs:
        rc, out, err = T.run(["watch", "--metrics-url", hs.url + "/metrics", "--once", "--window-minutes", "0.01"])
        row("watch (text)", "hostile /metrics", T.terminal_problems(out + err), rc)

    async def console() -> list:
        path = write_jsonl(d / "run[\x1b]0;title\x07 [b]x[ \\.jsonl", hostile_records(n=12, fail_every=5))
        src = ReplaySource(path, poll_interval=0.02, max_speed=True)
        sink = MonitorSink(Monitor(MonitorConfig(), budget=None, source=src.label))
        app = build_app(src, sink, None, export_dir=d / "exports")
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                t = time.monotonic()
                while not (src.finished and app.console_screen.last_seq == sink.snapshot().seq) \
                        and time.monotonic() - t < 20:
                    await pilot.pause(0.02)
                return _problems(_screen(app))
        except Exception as exc:
            return [f"crash: {type(exc).__name__}"]

    row("replay console (pilot)", "record file and its name", asyncio.run(console()))
    return [(a, b, len(c), c) for a, b, c in rows]


if __name__ == "__main__":
    print(json.dumps(main()))
