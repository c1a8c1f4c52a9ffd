"""The load settings: built by the CLI from the parsed flags, every default from tui.core.defaults, and the two
command modules (`run`, `live`) with the one command interface. Also what travels to a worker (PlannedArrival).

No server: these build settings and frames only.
"""

from __future__ import annotations

import ast
import asyncio
import os
import pathlib
import pickle
import subprocess
import sys
from typing import Any

import pytest

import tui.core.defaults as defaults
from tui.cli import COMMANDS, settings_of
from tui.cli.loadtest import config_from_args, console_monitor_config
from tui.sources.load.arrivals import PlannedArrival, open_schedule, process_arrivals
from tui.sources.load.config import LoadConfig
from tui.sources.load.wire import StepOrder, frame, read_frame

ROOT = pathlib.Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:9"


def parse(argv: list[str]) -> Any:
    """The command's settings object (``tui.cli.declare``), as ``main`` hands it to the command."""
    return settings_of(argv)


def test_run_and_live_are_two_command_modules_with_the_one_interface():
    import tui.cli.live as live
    import tui.cli.run as run

    for name, mod in (("run", run), ("live", live)):
        command = COMMANDS[name]
        assert (command.module, command.settings, command.run) == (mod.__name__, f"{name.title()}Settings", "run")
        assert command.load() == (getattr(mod, f"{name.title()}Settings"), mod.run)
    assert run.__name__ != live.__name__


def test_with_no_flag_given_the_settings_are_the_dataclass_defaults():
    cfg = config_from_args(parse(["run", "--url", URL, "--rate", "2"]))
    plain = LoadConfig(url=URL)
    fields = ("api", "arrival", "burstiness", "input_tokens", "output_tokens", "warmup", "rounds", "seed",
              "metrics_interval", "connect_timeout", "read_timeout", "api_key_env", "workers", "ignore_eos")
    assert {f: getattr(cfg, f) for f in fields} == {f: getattr(plain, f) for f in fields}
    assert cfg.monitor == plain.monitor  # SLO, target, alpha, window: the MonitorConfig defaults
    assert (cfg.input_tokens, cfg.output_tokens, cfg.monitor.slos.ttft_ms) == (
        (defaults.INPUT_TOKENS,) * 2, (defaults.OUTPUT_TOKENS,) * 2, defaults.SLO_TTFT_MS)


def test_the_flags_take_their_defaults_from_core_defaults(monkeypatch):
    """Change a default in tui.core.defaults: the parser and the settings built from it follow (no copy of it
    in argparse or in config_from_args)."""
    changed = {"CONNECT_TIMEOUT_S": 7.0, "READ_TIMEOUT_S": 77.0, "METRICS_INTERVAL_S": 3.0, "ROUNDS": 2,
               "WARMUP_REQUESTS": 3, "LOAD_SEED": 5, "INPUT_TOKENS": 11, "OUTPUT_TOKENS": 13, "BURSTINESS": 1.5,
               "ARRIVAL": "gamma", "SLO_TTFT_MS": 700.0, "TARGET": 0.9, "ALPHA": 0.01, "MIN_WINDOW_MINUTES": 2.0,
               "API_KEY_ENV": "SOME_KEY_VAR"}
    for name, value in changed.items():
        monkeypatch.setattr(defaults, name, value)
    cfg = config_from_args(parse(["run", "--url", URL, "--rate", "2"]))
    got = {"CONNECT_TIMEOUT_S": cfg.connect_timeout, "READ_TIMEOUT_S": cfg.read_timeout,
           "METRICS_INTERVAL_S": cfg.metrics_interval, "ROUNDS": cfg.rounds, "WARMUP_REQUESTS": cfg.warmup,
           "LOAD_SEED": cfg.seed, "INPUT_TOKENS": cfg.input_tokens[0], "OUTPUT_TOKENS": cfg.output_tokens[1],
           "BURSTINESS": cfg.burstiness, "ARRIVAL": cfg.arrival, "SLO_TTFT_MS": cfg.monitor.slos.ttft_ms,
           "TARGET": cfg.monitor.target, "ALPHA": cfg.monitor.alpha,
           "MIN_WINDOW_MINUTES": cfg.monitor.min_window_s / 60.0, "API_KEY_ENV": cfg.api_key_env}
    assert got == changed


def test_the_live_console_judges_with_the_runs_own_settings_and_its_rolling_window():
    base = ["live", "--url", URL, "--concurrency", "1,2", "--slo-ttft-ms", "500", "--target", "0.9",
            "--min-window-minutes", "2", "--min-requests", "30"]
    for extra, rolling in (([], (defaults.ROLLING_S, None)), (["--rolling-seconds", "30"], (30.0, None)),
                           (["--rolling-requests", "80"], (defaults.ROLLING_S, 80))):
        args = parse(base + extra)
        cfg = config_from_args(args)
        mcfg = console_monitor_config(args.rolling, cfg)
        assert (mcfg.slos.ttft_ms, mcfg.target, mcfg.min_window_s, mcfg.min_requests) == (500.0, 0.9, 120.0, 30)
        assert (mcfg.rolling_s, mcfg.rolling_n, mcfg.check_duplicate_ids) == (*rolling, False)
        # the same console settings the shared reader of the other commands builds from these flags
        assert mcfg == args.acceptance.monitor_config(args.rolling.rolling_seconds, args.rolling.rolling_requests,
                                                      check_duplicate_ids=False)


def test_a_sweep_replays_no_trace_and_its_settings_build_from_its_own_flags():
    args = parse(["sweep", "--url", URL, "--concurrency", "1,2"])
    assert (args.load.trace, args.load.trace_speed, args.load.trace_window) == (None, None, None)
    cfg = config_from_args(args)
    assert (cfg.mode, cfg.levels, cfg.trace, cfg.until_decided) == ("closed", [1.0, 2.0], None, True)
    with pytest.raises(SystemExit):
        parse(["sweep", "--url", URL, "--trace", "t.csv"])


def test_the_load_sources_take_settings_never_the_argparse_namespace():
    files = sorted((ROOT / "tui" / "sources" / "load").glob("*.py")) + [ROOT / "tui" / "sources" / "live.py"]
    for path in files:
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "argparse" not in imported, path
        params = [a.arg for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for a in n.args.args + n.args.kwonlyargs]
        assert "args" not in params, path


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_planned_arrivals_reach_a_worker_unchanged_over_its_pipe():
    plan = list(process_arrivals(open_schedule("gamma", 5.0, 2.0, 7, 1), 12, worker=1, workers=3))
    assert [a.seq for a in plan] == [1, 4, 7, 10] and all(isinstance(a, PlannedArrival) for a in plan)
    assert plan[0].offset > 0 and (plan[0].input_tokens, plan[0].output_tokens) == (None, None)
    order = StepOrder(5.0, 1, "measure", "open", 1.0e9, None, n_requests=12,
                      arrivals=[PlannedArrival(0, 0.0, 10, 20), *plan])

    async def through_the_pipe() -> StepOrder:
        reader = asyncio.StreamReader()
        reader.feed_data(frame(("step", order)))
        reader.feed_eof()
        kind, got = await read_frame(reader)
        assert kind == "step" and await read_frame(reader) is None
        return got

    got = asyncio.run(through_the_pipe())
    assert got == order and got.arrivals is not None
    assert got.arrivals[0].input_tokens == 10 and type(got.arrivals[1]) is PlannedArrival
    assert pickle.loads(pickle.dumps(plan[1])) == (4, plan[1].offset, None, None)  # still a plain tuple's values


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_a_worker_process_starts_and_ends_with_nothing_on_its_stderr():
    """The coordinator keeps a worker's last stderr line to say how a lost worker ended: starting the worker
    module must not print there itself (runpy warns when the package had already imported the module)."""
    from tui.sources.load.coordinator import WORKER_MODULE

    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's package, as PipeLink starts it
    r = subprocess.run([sys.executable, "-m", WORKER_MODULE], input=b"", capture_output=True, cwd=ROOT, env=env,
                       timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")  # input closed at once: nothing to do, exit 0
