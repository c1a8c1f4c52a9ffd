"""Write SVG screenshots of the console in every theme (and the help screen).

    PYTHONPATH=. .venv/bin/python docs/screenshots.py                  # bundled sample run -> docs/screenshots/
    PYTHONPATH=. .venv/bin/python docs/screenshots.py --file run.jsonl --out /tmp/shots --size 160x50

Each screenshot replays the record file at max speed to its end and waits until the panes
show the final snapshot, so the picture only depends on the file (elapsed time is record time).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tui.app import build_app  # noqa: E402
from tui.cli.replay import default_sample_path  # noqa: E402
from tui.core.budget import teaching_case  # noqa: E402
from tui.core.monitor import Monitor, MonitorConfig  # noqa: E402
from tui.sources.base import MonitorSink  # noqa: E402
from tui.sources.replay import ReplaySource  # noqa: E402
from tui.theming import load_themes  # noqa: E402

DEADLINE_S = 120.0


async def shoot(record_file: Path, theme: str, out: Path, size: tuple[int, int], help_screen: bool = False,
                themes_dir: str | None = None) -> Path:
    label = f"sample_logs/{record_file.name}" if record_file.parent.name == "sample_logs" else record_file.name
    src = ReplaySource(record_file, max_speed=True, label=label, poll_interval=0.02)
    budget = teaching_case()
    sink = MonitorSink(Monitor(MonitorConfig(), budget=budget, source=src.label))
    app = build_app(src, sink, budget, theme=theme, themes_dir=themes_dir)
    name = f"console-{theme}{'-help' if help_screen else ''}.svg"
    async with app.run_test(size=size) as pilot:
        deadline = time.monotonic() + DEADLINE_S
        while not (src.finished and app.console_screen.last_seq == sink.snapshot().seq):
            if time.monotonic() > deadline:
                raise SystemExit(f"{record_file}: replay did not finish within {DEADLINE_S:.0f} s")
            await pilot.pause(0.05)
        if help_screen:
            await pilot.press("question_mark")
        await pilot.pause(0.2)
        path = Path(app.save_screenshot(filename=name, path=str(out)))
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", type=Path, default=None, help="record file (default: the bundled sample run)")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots", help="output folder")
    p.add_argument("--size", default="120x40", help="terminal size COLSxROWS (default 120x40)")
    p.add_argument("--themes-dir", default=None, help="extra theme files to include")
    p.add_argument("--no-help", action="store_true", help="skip the help screen screenshot")
    args = p.parse_args(argv)
    record_file = args.file or default_sample_path()
    if record_file is None or not Path(record_file).is_file():
        print(f"screenshots: record file not found: {record_file}", file=sys.stderr)
        return 2
    try:
        cols, rows = (int(x) for x in args.size.lower().split("x"))
    except ValueError:
        print(f"screenshots: --size must look like 120x40, got {args.size!r}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    themes = load_themes(args.themes_dir)
    for problem in themes.problems:
        print(f"screenshots: {problem}", file=sys.stderr)
    for theme in themes.names:
        path = asyncio.run(shoot(Path(record_file), theme, args.out, (cols, rows), themes_dir=args.themes_dir))
        print(path)
    if not args.no_help and themes.names:
        print(asyncio.run(shoot(Path(record_file), themes.names[0], args.out, (cols, rows), help_screen=True,
                                themes_dir=args.themes_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
