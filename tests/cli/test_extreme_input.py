"""Extreme and wrongly typed values anywhere in a record never crash a reading command.

A hypothesis test builds small record files over the whole schema (run header, step, request, queue, gpu, host
and budget records; another tool's AIPerf export; a `watch --record` file), puts extreme values into any field
(+-inf, NaN, +-1e308, huge integers, strings, booleans, lists, objects, null) and runs each reading command's
entry point in-process (``tui.cli.main``): ``report`` (text and JSON), ``accept``, ``compare`` (both ways),
``import`` (then ``report`` on what it wrote), the replay reader (``ReplaySource`` into a Monitor, then the
report built from its snapshot), and ``report`` on a watch record file. Each must exit 0, 1, 2 or 3 with every
stderr line a one-line ``servewatch:`` message (no traceback, no internal error), exactly one line for exit 2.

Bounded: few examples each (``max_examples``), no deadline (a busy machine must not fail it), all in a
temporary folder.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.paths import REPO
from tui.cli import main

REPO = REPO
AIPERF = REPO / "tests" / "fixtures" / "imports" / "aiperf" / "profile_export.jsonl"
T0 = 1_795_997_541.0

EXTREME = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1e308, 10**30, -(10**30), 2**64, 10**400, -1, 0,
                     5e-324, -0.0, "", "x", "inf", "NaN", True, False, None, [], {}, [1, 2], {"a": 1}]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.text(max_size=4),
)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _request(i: int, level: float = 1.0) -> dict:
    t = T0 + 20.0 + 2.0 * i
    return {"type": "request", "id": f"r-{level:g}-{i}", "t_intended": t, "t_sent": t, "t_first_token": t + 0.4,
            "t_end": t + 1.4, "input_tokens": 128, "output_tokens": 64, "finish_reason": "length",
            "http_status": 200, "complete": True, "error": None, "error_detail": None, "phase": "measure",
            "level": level, "round": 1, "input_tokens_asked": 128, "output_tokens_asked": 64, "t_headers": t + 0.05}


def _budget_record() -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["budget", "--params", "1B", "--gpu-gib", "24", "--json"]) == 0
    return {"type": "budget", "budget": json.loads(out.getvalue())}


def _templates() -> list[dict]:
    header = json.loads((REPO / "sample_logs" / "default.jsonl").open(encoding="utf-8").readline())
    recs: list[dict] = [header, _budget_record(),
                        {"type": "step", "t": T0 + 10, "event": "start", "level": 1.0, "round": 1, "mode": "closed",
                         "phase": "measure", "requests": None, "duration": 150.0}]
    recs += [_request(i) for i in range(6)]
    recs += [{"type": "queue", "t": T0 + 21, "source": "llamacpp", "waiting": 0.0, "running": 1.0,
              "kv_cache_usage": 0.2, "client_in_flight": 1, "slots_busy": 1, "slots_total": 4},
             {"type": "host", "t": T0 + 22, "cpu_percent": 10.0, "memory_used": 7 * 2**30,
              "memory_total": 24 * 2**30, "client_cpu_percent": 5.0},
             {"type": "gpu", "t": T0 + 23, "device": 0, "name": "TestGPU", "memory_used": 18 * 2**30,
              "memory_total": 24 * 2**30, "utilization": 50},
             {"type": "step", "t": T0 + 40, "event": "end", "level": 1.0, "round": 1, "mode": "closed",
              "phase": "measure", "requests": 6, "completed": 6, "failed": 0, "errors": {}, "duration_s": 30.0,
              "ttft_p50_ms": 400.0, "verdict": "INSUFFICIENT_WINDOW", "verdict_reason": "too few"}]
    return recs


TEMPLATES = _templates()


def _paths(d: Any, prefix: tuple = ()) -> list[tuple]:
    """Every field path of a record (nested objects included, lists as a whole)."""
    out = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append((*prefix, k))
            if isinstance(v, dict):
                out += _paths(v, (*prefix, k))
    return out


def _set(d: dict, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


@st.composite
def mutated(draw, templates: list[dict], most: int = 6) -> list[dict]:
    recs = copy.deepcopy(templates)
    for _ in range(draw(st.integers(1, most))):
        i = draw(st.integers(0, len(recs) - 1))
        paths = [p for p in _paths(recs[i]) if p != ("type",)] or [("type",)]
        _set(recs[i], draw(st.sampled_from(paths)), draw(EXTREME))
    return recs


def _dump(recs: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in recs)  # NaN / Infinity / huge ints as Python writes them


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def assert_clean(argv: list[str], rc: int, err: str) -> None:
    """Exit 0/1/2/3; no traceback, no internal error; every stderr line one ``servewatch:`` message; exit 2
    ends with the one refusal line."""
    lines = err.splitlines()
    where = f"servewatch {' '.join(argv)} -> {rc}\n{err[-2000:]}"
    assert rc in (0, 1, 2, 3), where
    assert "Traceback" not in err and "internal error" not in err, where
    assert all(line.startswith("servewatch: ") for line in lines), where
    if rc == 2:
        assert lines, where


def _with(templates: list[dict], index: int, **fields: Any) -> list[dict]:
    recs = copy.deepcopy(templates)
    recs[index].update(fields)
    return recs


REQ = 3  # a request record in TEMPLATES
ISSUE_EXAMPLES = [  # the values of issue 18's findings, always tried
    _with(TEMPLATES, REQ, t_sent=-1e308, t_end=1e308),
    _with(TEMPLATES, REQ, t_sent=-1e308),
    _with(TEMPLATES, REQ, t_end=1e308, t_first_token=1e308),
    _with(TEMPLATES, REQ, t_end=math.nan),
    _with(TEMPLATES, REQ, t_sent=math.inf, t_intended=-math.inf),
    _with(TEMPLATES, REQ, output_tokens=10**30, input_tokens=-(10**30)),
    _with(TEMPLATES, 2, t=1e308),
    _with(TEMPLATES, 0, target=1e308),  # a header field of the wrong type (report's target line)
    _with(TEMPLATES, 0, environment={"server": {"slots": 10**400, "n_ctx_per_slot": 1e308}}),
    _with(TEMPLATES, 0, load={**TEMPLATES[0]["load"], "burstiness": 10**400}),  # accept's figures
]
_BUDGET = copy.deepcopy(TEMPLATES[1])
for _k, _v in (("params", 10**400), ("layers", 10**400)):
    _b = copy.deepcopy(_BUDGET)
    _b["budget"]["parameters"][_k] = _v
    ISSUE_EXAMPLES.append([*TEMPLATES[:1], _b, *TEMPLATES[2:]])
_b = copy.deepcopy(_BUDGET)
_b["budget"]["results"]["weights_gib"] = 10**400
ISSUE_EXAMPLES.append([*TEMPLATES[:1], _b, *TEMPLATES[2:]])


def _examples(fn):
    for recs in ISSUE_EXAMPLES:
        fn = example(recs=recs)(fn)
    return fn


@pytest.mark.slow
@settings(SETTINGS, max_examples=60)
@given(recs=mutated(TEMPLATES))
@_examples
def test_record_readers_never_crash_on_extreme_values(recs):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "run.jsonl"
        base = Path(tmp) / "base.jsonl"
        f.write_text(_dump(recs), encoding="utf-8")
        base.write_text(_dump(TEMPLATES), encoding="utf-8")
        for argv in (["report", str(f)], ["report", str(f), "--json"],
                     ["accept", "--records", str(f), "--out", str(Path(tmp) / "acc"), "--no-html"],
                     ["compare", str(base), str(f)], ["compare", str(f), str(base)]):
            rc, _out, err = run_cli(argv)
            assert_clean(argv, rc, err)


@SETTINGS
@given(recs=mutated(TEMPLATES))
@_examples
def test_the_replay_reader_never_crashes_on_extreme_values(recs):
    """The console's path without the UI: ReplaySource (max speed, run in this thread) into the Monitor the
    console uses, then the snapshot and the report built from it."""
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.core.report import build_report, format_report
    from tui.sources.base import MonitorSink
    from tui.sources.replay import ReplaySource, validate_record_file

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "run.jsonl"
        f.write_text(_dump(recs), encoding="utf-8")
        if validate_record_file(str(f)) is not None:
            return  # refused up front with one line (the CLI's exit 2)
        sink = MonitorSink(Monitor(MonitorConfig(), source=str(f)))
        src = ReplaySource(str(f), max_speed=True)
        src._run(sink)  # synchronously: the thread body, no sleeps
        assert src.finished and src.error is None, src.error
        snap = sink.snapshot()
        format_report(build_report(snap))


def _aiperf_lines() -> list[dict]:
    return [json.loads(line) for line in AIPERF.read_text(encoding="utf-8").splitlines()[:6]]


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@SETTINGS
@given(recs=mutated(_aiperf_lines()))
def test_import_never_crashes_on_extreme_values(recs):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "profile_export.jsonl"
        out = Path(tmp) / "out.jsonl"
        f.write_text(_dump(recs), encoding="utf-8")
        argv = ["import", str(f), "--out", str(out)]
        rc, _o, err = run_cli(argv)
        assert_clean(argv, rc, err)
        assert rc in (0, 2)
        for argv in (["report", str(f)], ["compare", str(f), str(f)]):  # read directly, converted on the fly
            rc, _o, err = run_cli(argv)
            assert_clean(argv, rc, err)
        if out.exists():
            argv = ["report", str(out)]
            rc, _o, err = run_cli(argv)
            assert_clean(argv, rc, err)


def _watch_templates() -> list[dict]:
    header = {"type": "run", "schema": "servewatch.record/1", "schema_version": 1, "tool": "servewatch",
              "kind": "watch", "started_at": T0, "target": {"url": "http://127.0.0.1:8000/metrics"}}
    wins = []
    for i in range(3):
        t = T0 + 60.0 * i
        wins.append({"type": "watch", "t_start": t, "t_end": t + 60.0, "engine": "vllm", "source": "metrics",
                     "ttft_buckets": [[0.1, 5 * i], [0.5, 40 * i], [1.0, 50 * i], ["+Inf", 50 * i]],
                     "e2e_buckets": None, "queue_time_buckets": None, "success": 50.0 * i, "failed": 0.0,
                     "preemptions": 0.0, "waiting_start": 0.0, "waiting_end": 1.0, "running": 4.0,
                     "kv_cache_usage": 0.3, "gaps": [], "reset": None})
    return [header, *wins]


@SETTINGS
@given(recs=mutated(_watch_templates()))
def test_a_watch_record_file_judged_by_report_never_crashes(recs):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "watch.jsonl"
        f.write_text(_dump(recs), encoding="utf-8")
        for argv in (["report", str(f)], ["report", str(f), "--json"]):
            rc, _o, err = run_cli(argv)
            assert_clean(argv, rc, err)


@pytest.mark.parametrize("field", ["output_tokens", "level"])
def test_a_request_count_or_level_too_large_for_a_float_is_a_bad_line(tmp_path, field):
    """``10**400`` (valid JSON) in a request's output_tokens or level reaches float() in the monitor, the
    level formatter and compare: the request parser must make it a bad line ("numbers too large to be counts")."""
    f = tmp_path / "run.jsonl"
    f.write_text(_dump(_with(TEMPLATES, REQ, **{field: 10**400})), encoding="utf-8")
    for argv in (["report", str(f)], ["compare", str(f), str(f)]):
        rc, _o, err = run_cli(argv)
        assert_clean(argv, rc, err)
