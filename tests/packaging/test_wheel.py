"""Installable anywhere: the wheel carries the bundled sample runs, themes and quality starter set.

Builds the wheel, installs it (runtime dependencies only, no test extras) into a fresh virtual environment
without system site-packages, and runs servewatch from a folder outside the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO

pytestmark = pytest.mark.packaging

def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)])
    assert r.returncode == 0, r.stderr[-2000:]
    wheels = list(dist.glob("servewatch-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    r = _run([str(py), "-m", "pip", "install", "-q", str(wheels[0])])
    assert r.returncode == 0, r.stderr[-2000:]
    outside = tmp / "elsewhere"
    outside.mkdir()
    return py, outside


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_wheel_ships_the_bundled_data(wheel_venv):
    py, outside = wheel_venv
    code = (
        "import json, tui; from tui.resources import bundled_dir; from tui.cli.quality import default_set_path;"
        "from tui.cli.replay import default_sample_path; from tui.theming import load_themes;"
        "ts = load_themes();"
        "print(json.dumps({'tui': tui.__file__, 'sample': str(default_sample_path()), 'quality': default_set_path(),"
        "'themes': list(ts.names), 'problems': [str(p) for p in ts.problems],"
        "'dirs': {n: str(bundled_dir(n)) for n in ('themes', 'sample_logs', 'quality')}}))"
    )
    r = _run([str(py), "-c", code], cwd=outside, env=_clean_env())
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads(r.stdout)
    venv_root = str(py.parent.parent)
    assert info["tui"].startswith(venv_root), info  # the installed copy, not the checkout
    for name, d in info["dirs"].items():
        assert d.startswith(venv_root), (name, d)
    assert info["sample"].endswith("default.jsonl") and info["sample"].startswith(venv_root)
    assert info["quality"] and info["quality"].endswith("starter.jsonl") and info["quality"].startswith(venv_root)
    assert {"dark", "light", "high-contrast"} <= set(info["themes"]), info
    assert not info["problems"], info


def test_installed_console_opens_on_the_bundled_run(wheel_venv):
    """The no-argument console, from the installed wheel, outside the checkout, headless: it loads the bundled
    real run with the bundled themes (Textual's own headless driver; the app quits itself after the replay)."""
    py, outside = wheel_venv
    code = textwrap.dedent(
        """
        import asyncio, json
        from tui.app import ServewatchApp
        seen = {}
        orig = ServewatchApp.run

        def run_headless(self, *a, **k):
            async def drive():
                async with self.run_test(size=(120, 40)) as pilot:
                    await pilot.press("e")  # jump to the end of the replay
                    for _ in range(20):
                        await pilot.pause()
                        self.console_screen.tick(force=True)
                        snap = self.sink.snapshot()
                        if snap.requests_total >= 182:
                            break
                    seen["requests"] = snap.requests_total
                    seen["synthetic"] = snap.synthetic
                    seen["themes"] = list(self.theme_names)
                    seen["theme"] = self.theme
            asyncio.run(drive())
            return 3

        ServewatchApp.run = run_headless
        from tui.cli import main
        rc = main([])
        print(json.dumps({"rc": rc, **seen}))
        """
    )
    r = _run([str(py), "-c", code], cwd=outside, env=_clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["requests"] == 1090, info  # every request of sample_logs/default.jsonl
    assert info["synthetic"] is False
    assert {"dark", "light", "high-contrast"} <= set(info["themes"]), info


def test_installed_quality_finds_its_starter_set(wheel_venv):
    py, outside = wheel_venv
    code = ("from tui.cli.quality import default_set_path; from tui.core.quality import parse_set; "
            "p = default_set_path(); print(p); print(len(parse_set(open(p, encoding='utf-8').read(), p).cases))")
    r = _run([str(py), "-c", code], cwd=outside, env=_clean_env())
    assert r.returncode == 0, r.stderr[-2000:]
    path, n = r.stdout.split()
    assert path.startswith(str(py.parent.parent)) and path.endswith("starter.jsonl")
    assert int(n) > 0


def test_installed_run_splits_the_load_over_worker_processes(wheel_venv, tmp_path):
    """`servewatch run --workers 2` from the installed wheel: the worker processes start from the installed
    package (not the checkout), and every request lands in the one record file once."""
    from tests.support.fault_server import FaultServer

    py, outside = wheel_venv
    rec = tmp_path / "w.jsonl"
    with FaultServer() as fs:
        r = _run([str(py), "-m", "tui", "run", "--url", fs.url("ok", tokens=2), "--model", "m", "--concurrency", "4",
                  "--requests", "40", "--workers", "2", "--no-gpu", "--record", str(rec)], cwd=outside, env=_clean_env())
    assert r.returncode in (0, 1, 3), r.stderr[-3000:] + r.stdout[-3000:]
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    block = lines[0]["load"]["workers"]
    assert block["count"] == 2 and block["kind"] == "processes"
    ids = [d["id"] for d in lines if d.get("type") == "request"]
    assert len(ids) == 40 == len(set(ids))


def test_wheel_ships_the_example_datasets(wheel_venv):
    """The example datasets (tui/data/datasets) are in the installed package, read as the example, 0 bad rows."""
    py, outside = wheel_venv
    code = ("import json; from tui.sources.load.dataset import EXAMPLES, example_path, read_dataset;"
            "print(json.dumps({n: [str(example_path(n)), read_dataset(str(example_path(n)), max_bad_share=0.0)"
            ".header_block()] for n in EXAMPLES}))")
    r = _run([str(py), "-c", code], cwd=outside, env=_clean_env())
    assert r.returncode == 0, r.stderr[-2000:]
    venv_root = str(py.parent.parent)
    for name, (path, block) in json.loads(r.stdout).items():
        assert path.startswith(venv_root) and path.endswith(name), path
        assert block["example"] is True and block["bad_rows"] == 0 and block["usable"] >= 20, block
