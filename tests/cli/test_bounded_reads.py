"""Issue 36 "Bounded reads" (finding 4): no input makes a command hang, exhaust memory or crash on its shape.

Each input kind gets its bounded-read test, each failing on 1a93a75:

- regular files only: a FIFO (it blocked report, report --html, accept, plan, import and replay forever), a device
  or a directory given to any path flag that reads is one line, exit 2, at once (run in a subprocess with a
  timeout, so a regression fails instead of hanging the suite); the same for the readers of datasets, traces,
  themes and the recorder;
- a line longer than ``MAX_LINE_BYTES`` (1 MiB) in every line-based input (record files, AIPerf imports, watch
  recordings, JSON Lines datasets, CSV and JSONL traces, the replay reader) is one bad line, counted, reported with
  its number, and the lines after it keep theirs;
- whole files have a size limit, refused at once without reading them (sparse files: no disk used): budget JSON and
  config.json, quality results and sets, rollback files, whole-document imports (JSON and YAML), datasets;
- JSON nested past the bound: a first line that cannot be read is exit 2, a nested header a bad line, a nested
  config or quality file exit 2 (4 KB of brackets on line 1 was an internal error, exit 70);
- config numbers range-checked before any loop (``num_hidden_layers: 10**30`` counted layer by layer forever);
- plan on a header whose ``target``, ``load`` or another object field is a list (exit 70): a generated family of
  wrong-typed header fields, never an internal error;
- at most 1,000 distinct levels: one more level and the records beyond are counted, reported and never PASS; the
  work per level is linear (counted in traced lines, deterministic: no clock);
- memory bounded on a 2 GB sparse file under ``RLIMIT_AS`` in a subprocess, through every reading command.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.evidence_files import T0, another_run, header, honest_closed, request, write
from tests.support.paths import REPO
from tui.cli import main
from tui.core.bounds import (
    MAX_DATASET_BYTES,
    MAX_DOCUMENT_BYTES,
    MAX_LEVELS,
    MAX_LINE_BYTES,
    MAX_QUALITY_FILE_BYTES,
    MAX_SMALL_FILE_BYTES,
    MAX_YAML_BYTES,
)

SEED = REPO / "sample_logs" / "seed.jsonl"
AIPERF = REPO / "tests" / "fixtures" / "imports" / "aiperf" / "profile_export.jsonl"
LONG = "x" * (MAX_LINE_BYTES + 10)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def one_line_exit_2(argv: list[str], *words: str) -> str:
    rc, _out, err = run_cli(argv)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("servewatch: "), (argv, rc, err[-800:])
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (argv, lines[0])
    return lines[0]


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


# ====================================================================== regular files only

_FIFO_SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys
    from tui.cli import main
    for argv in json.loads(sys.argv[1]):
        print("START", json.dumps(argv), flush=True)
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(argv)
        print("DONE", json.dumps({"argv": argv, "rc": rc, "err": err.getvalue()}), flush=True)
    from tui.sources.load.dataset import DatasetError, read_dataset
    from tui.sources.load.errors import ConfigError
    from tui.sources.load.trace import load_trace
    from tui.sources.recorder import Recorder
    from tui.theming import ThemeFileError, load_theme_file
    for name, call, errors in (("dataset", lambda p: read_dataset(p), DatasetError),
                               ("trace", lambda p: load_trace(p), ConfigError),
                               ("recorder", lambda p: Recorder(p), OSError),
                               ("theme", lambda p: load_theme_file(p), ThemeFileError)):
        print("START", json.dumps([name]), flush=True)
        try:
            call(sys.argv[2])
            msg = None
        except errors as exc:
            msg = str(exc)
        print("DONE", json.dumps({"argv": [name], "rc": 2 if msg else 0, "err": msg or ""}), flush=True)
""")


def _run_all(argvs: list[list[str]], special: str, timeout: float = 240.0) -> list[dict]:
    """Run each command line in one subprocess (each in-process there); a hang fails with the command named."""
    try:
        r = subprocess.run([sys.executable, "-c", _FIFO_SCRIPT, json.dumps(argvs), special], cwd=REPO,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        started = [ln for ln in out.splitlines() if ln.startswith("START")]
        raise AssertionError(f"blocked on {special}: {started[-1] if started else '(nothing started)'}") from None
    assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads(ln[5:]) for ln in r.stdout.splitlines() if ln.startswith("DONE ")]


def _reading_command_lines(tmp_path: Path, special: str) -> list[list[str]]:
    rec = tmp_path / "run.jsonl"
    rec.write_bytes(SEED.read_bytes())
    out = tmp_path / "out"
    return [
        ["report", "--details", special], ["report", "--details", special, "--html", str(tmp_path / "r.html")], ["report", "--details", special, "--json"],
        ["accept", "--records", special, "--out", str(out)], ["plan", "--records", special, "--peak-rate", "1"],
        ["import", special, "--out", str(tmp_path / "imp.jsonl")], ["replay", special],
        ["compare", special, str(rec)], ["compare", str(rec), special],
        ["report", "--details", str(rec), "--budget", special], ["report", "--details", str(rec), "--config", special],
        ["report", "--details", str(rec), "--server-log", special],
        ["accept", "--records", str(rec), "--quality", special, "--out", str(out)],
        ["accept", "--records", str(rec), "--rollback", special, "--out", str(out)],
        ["plan", "--records", str(rec), "--trace", special],
        ["budget", "--config", special], ["budget", "--budget", special],
        ["quality", "--url", "http://127.0.0.1:9", "--set", special, "--out", str(tmp_path / "q.json")],
        ["quality", "--url", "http://127.0.0.1:9", "--baseline", special, "--out", str(tmp_path / "q.json")],
    ]


def test_a_fifo_given_to_any_reading_flag_is_one_line_and_exit_2_at_once(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    argvs = _reading_command_lines(tmp_path, str(fifo))
    results = _run_all(argvs, str(fifo))
    assert len(results) == len(argvs) + 4
    for res in results:
        err = res["err"].strip().splitlines()
        assert res["rc"] == 2, res
        assert "pipe" in res["err"] or "FIFO" in res["err"], res
        assert "Traceback" not in res["err"] and len(err) <= 1, res


@pytest.mark.parametrize("special", ["/dev/zero", "dir"])
def test_a_device_or_a_directory_is_refused_too(tmp_path, special):
    path = str(tmp_path) if special == "dir" else special
    if special == "/dev/zero" and not os.path.exists(special):
        pytest.skip("no /dev/zero here")
    argvs = [a for a in _reading_command_lines(tmp_path, path) if a[0] != "replay"]
    for res in _run_all(argvs, path):
        assert res["rc"] == 2, res
        assert "Traceback" not in res["err"] and len(res["err"].strip().splitlines()) <= 1, res


def test_standard_input_stays(tmp_path, monkeypatch):
    data = SEED.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    rc, out, _err = run_cli(["report", "--details", "-"])
    assert rc in (0, 1, 3) and "verdict=" in out


# ====================================================================== the line cap, per line-based input


def _lines_file(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_record_file_line_over_the_cap_is_one_malformed_line_with_its_number(tmp_path):
    recs = [json.dumps(r) for r in honest_closed(seconds=120.0)]
    f = _lines_file(tmp_path / "run.jsonl", recs[:5] + [LONG] + recs[5:])
    rc, out, err = run_cli(["report", "--details", str(f), "--json"])
    doc = json.loads(out)
    assert doc["input_problems"]["malformed"] == 1
    assert f"{f}:6: line longer than the 1 MiB limit" in err
    assert doc["requests_total"] == sum(1 for r in recs if '"request"' in r)  # every line after it still read


def test_an_aiperf_line_over_the_cap_is_one_problem_entry(tmp_path):
    lines = AIPERF.read_text(encoding="utf-8").splitlines()
    f = _lines_file(tmp_path / "profile_export.jsonl", lines[:3] + [LONG] + lines[3:])
    rc, out, err = run_cli(["import", str(f), "--out", str(tmp_path / "o.jsonl"), "--json"])
    assert rc in (0, 3), err
    summary = json.loads(out)
    assert summary["problems"] == 1 and summary["converted"] == len([x for x in lines if x.strip()])
    assert ":4: line longer than the 1 MiB limit" in err


def test_a_watch_recording_line_over_the_cap_is_a_problem_line(tmp_path):
    from tests.cli.test_extreme_input import _watch_templates

    lines = [json.dumps(r) for r in _watch_templates()]
    f = _lines_file(tmp_path / "watch.jsonl", lines[:2] + [LONG] + lines[2:])
    rc, out, err = run_cli(["report", "--details", str(f), "--json"])
    assert rc in (0, 1, 3), err
    assert json.loads(out)["problems"] == 1
    assert f"{f}:3: line longer than the 1 MiB limit ({len(LONG):,} bytes)" in err


def test_a_dataset_row_over_the_cap_is_a_bad_row_and_a_long_sharegpt_item_a_refusal(tmp_path):
    from tui.sources.load.dataset import DatasetError, read_dataset

    row = json.dumps({"prompt": "hello there"})
    f = _lines_file(tmp_path / "d.jsonl", [row, LONG, row])
    ds = read_dataset(str(f), max_bad_share=1.0, chunk_bytes=65536)
    assert ds.rows == 3 and ds.bad_rows == 1 and len(ds.conversations) == 2
    assert ds.problems[0].startswith(f"{f}:2: longer than the 1 MiB line limit")
    g = tmp_path / "s.json"
    g.write_text(json.dumps([{"conversations": [{"from": "human", "value": "x" * (MAX_LINE_BYTES + 1)}]}]))
    with pytest.raises(DatasetError, match="longer than the 1 MiB limit"):
        read_dataset(str(g), chunk_bytes=65536)


@pytest.mark.parametrize("fmt", ["azure", "mooncake"])
def test_a_trace_line_over_the_cap_is_a_bad_row_and_the_numbers_after_it_stay(tmp_path, fmt):
    from tui.sources.load.trace import load_trace

    if fmt == "azure":
        rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [f"2023-11-16 18:15:{i:02d}.000,100,20" for i in range(9)]
    else:
        rows = [json.dumps({"timestamp": 1000 * i, "input_length": 100, "output_length": 20}) for i in range(9)]
    lines = rows[:4] + [LONG] + rows[4:] + ["bad,row"]
    f = _lines_file(tmp_path / f"t.{fmt}", lines)
    tr = load_trace(str(f))
    assert any(p.startswith(f"{f}:5: longer than the 1 MiB line limit") for p in tr.problems), tr.problems
    assert any(p.startswith(f"{f}:{len(lines)}:") for p in tr.problems), tr.problems  # the last line's own number


def test_the_replay_reader_reports_a_line_over_the_cap(tmp_path):
    from tui.core.records import LineIssue
    from tui.sources.replay import _Reader

    recs = [json.dumps(r) for r in honest_closed(seconds=60.0)]
    f = _lines_file(tmp_path / "run.jsonl", recs[:3] + [LONG] + recs[3:])
    reader = _Reader(str(f), str(f), 1 << 16)
    reader.open()
    items = []
    while True:
        got = reader.read_chunk()
        if got is None:
            break
        items += got
        assert len(reader.cut.partial) <= MAX_LINE_BYTES
    reader.close()
    issues = [it for it in items if isinstance(it, LineIssue)]
    assert [(i.line, "1 MiB" in i.reason) for i in issues] == [(4, True)]


# ====================================================================== whole files: a size limit, refused unread


def test_whole_files_over_their_limit_are_refused_at_once(tmp_path):
    rec = tmp_path / "run.jsonl"
    rec.write_bytes(SEED.read_bytes())
    big_small = sparse(tmp_path / "big.json", MAX_SMALL_FILE_BYTES + 1, b"{")
    big_quality = sparse(tmp_path / "quality.json", MAX_QUALITY_FILE_BYTES + 1, b"{")
    out = str(tmp_path / "out")
    for argv in (["budget", "--config", str(big_small)], ["budget", "--budget", str(big_small)],
                 ["report", "--details", str(rec), "--config", str(big_small)],
                 ["accept", "--records", str(rec), "--rollback", str(big_small), "--out", out],
                 ["accept", "--records", str(rec), "--quality", str(big_quality), "--out", out],
                 ["quality", "--url", "http://127.0.0.1:9", "--set", str(big_quality), "--out", str(tmp_path / "q")]):
        one_line_exit_2(argv, "larger than")


def test_a_whole_document_import_over_its_limit_is_refused_at_once(tmp_path):
    head = b'{"benchmarks": [{"requests": {"successful": [' + b" " * 70000
    doc = sparse(tmp_path / "benchmarks.json", MAX_DOCUMENT_BYTES + 1, head)
    one_line_exit_2(["import", str(doc), "--out", str(tmp_path / "o.jsonl")], "larger than 256 MiB")
    one_line_exit_2(["report", "--details", str(doc)], "256 MiB")
    pytest.importorskip("yaml")
    y = tmp_path / "benchmarks.yaml"
    y.write_bytes(b"benchmarks:\n" + b"  - a: 1\n" * (MAX_YAML_BYTES // 9 + 1))
    one_line_exit_2(["import", str(y), "--out", str(tmp_path / "y.jsonl")], "larger than 32 MiB")


def test_a_dataset_over_its_limit_is_refused_at_once(tmp_path):
    from tui.sources.load.dataset import DatasetError, read_dataset

    f = sparse(tmp_path / "d.jsonl", MAX_DATASET_BYTES + 1, b'{"prompt": "x"}\n')
    with pytest.raises(DatasetError, match="larger than 1 GiB"):
        read_dataset(str(f))


# ====================================================================== JSON depth


def test_a_first_line_nested_past_the_bound_is_exit_2_not_an_internal_error(tmp_path):
    f = tmp_path / "nest.jsonl"
    f.write_bytes(b"[" * 4096 + b"\n" + SEED.read_bytes())
    for argv in (["report", "--details", str(f)], ["report", "--details", str(f), "--html", str(tmp_path / "p.html")],
                 ["accept", "--records", str(f), "--out", str(tmp_path / "a")],
                 ["plan", "--records", str(f), "--peak-rate", "1"], ["compare", str(f), str(SEED)],
                 ["import", str(f), "--out", str(tmp_path / "i.jsonl")]):
        one_line_exit_2(argv)
    g = tmp_path / "nest2.jsonl"
    g.write_bytes(b'{"a":' * 100 + b"1" + b"}" * 100 + b"\n" + SEED.read_bytes())  # decodes, but 100 deep
    one_line_exit_2(["report", "--details", str(g)], "nested deeper than 64")


def test_nested_config_quality_and_rows_are_refused_or_counted(tmp_path):
    from tui.sources.load.dataset import read_dataset
    from tui.sources.load.trace import load_trace

    deep = "[" * 3000 + "]" * 3000
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "x": ' + deep + "}")
    one_line_exit_2(["budget", "--config", str(cfg)])
    medium = '{"a":' * 80 + "1" + "}" * 80
    cfg.write_text('{"model_type": "llama", "x": ' + medium + "}")
    one_line_exit_2(["budget", "--config", str(cfg)], "nested deeper")
    q = tmp_path / "quality.json"
    q.write_text(medium)
    one_line_exit_2(["accept", "--records", str(SEED), "--quality", str(q), "--out", str(tmp_path / "a")], "nested")
    d = _lines_file(tmp_path / "d.jsonl", [json.dumps({"prompt": "hi"}), deep, json.dumps({"prompt": "yo"})])
    ds = read_dataset(str(d), max_bad_share=1.0)
    assert ds.bad_rows == 1 and "nested too deep" in ds.problems[0]
    t = _lines_file(tmp_path / "t.jsonl", [json.dumps({"timestamp": 1000 * i, "input_length": 5, "output_length": 5})
                                           for i in range(5)] + [deep])
    assert any(":6: not JSON" in p for p in load_trace(str(t)).problems)


FIX = REPO / "tests" / "fixtures" / "imports"
DOCUMENTS = {"guidellm": FIX / "guidellm" / "benchmarks.json",
             "vllm-bench": FIX / "vllm" / "vllm_bench_c2_from_source.json",
             "llmperf": FIX / "llmperf" / "gemma_128_32_from_source_individual_responses.json",
             "inference-perf": FIX / "inference_perf" / "per_request_lifecycle_metrics.json"}


@pytest.mark.parametrize("fmt", sorted(DOCUMENTS))
def test_a_whole_document_nested_past_the_bound_is_not_imported(tmp_path, fmt):
    doc = json.loads(DOCUMENTS[fmt].read_text(encoding="utf-8"))
    deep: object = 1
    for _ in range(80):
        deep = {"x": deep}
    if isinstance(doc, dict):
        doc["extra"] = deep
    else:
        doc[0]["extra"] = deep
    f = tmp_path / DOCUMENTS[fmt].name
    f.write_text(json.dumps(doc), encoding="utf-8")
    rc, _out, err = run_cli(["import", str(f), "--out", str(tmp_path / "o.jsonl")])
    lines = err.splitlines()
    assert rc == 2 and "nested deeper than 64 levels" in lines[0] and "nothing importable" in lines[-1], err
    rc, _out, err = run_cli(["report", "--details", str(f)])
    assert rc == 2 and "internal error" not in err, err


# ====================================================================== config numbers, before any loop

_CONFIG_SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys
    from tui.cli import main
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["budget", "--config", sys.argv[1]])
    print(json.dumps({"rc": rc, "err": err.getvalue()}))
""")


@pytest.mark.parametrize("layers", ["1e30", str(10**30), str(2**40)])
def test_config_numbers_are_range_checked_before_any_loop(tmp_path, layers):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "num_attention_heads": 32, '
                   '"intermediate_size": 11008, "num_hidden_layers": ' + layers + "}")
    r = subprocess.run([sys.executable, "-c", _CONFIG_SCRIPT, str(cfg)], cwd=REPO, capture_output=True, text=True,
                       timeout=120)  # a loop over 10**30 layers never returns: the timeout fails it
    res = json.loads(r.stdout)
    assert res["rc"] == 2 and "num_hidden_layers" in res["err"] and len(res["err"].splitlines()) == 1, res


# ====================================================================== plan on wrong-typed header fields

WRONG = st.sampled_from([[1, 2], [], "x", 3, 1e308, True, None, [{"mode": "closed"}], {"a": [1]}])
HEADER_FIELDS = ("target", "load", "environment", "slo", "server_capacity", "headers", "source")
SUBFIELDS = {"load": ("mode", "levels", "input_tokens", "output_tokens", "dataset", "shared_prefix", "arrival",
                      "burstiness", "rounds", "stop_on_fail", "sessions", "warmup", "workers"),
             "target": ("api", "model", "url")}


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(where=st.one_of(st.tuples(st.sampled_from(HEADER_FIELDS), st.none()),
                       st.sampled_from([(f, k) for f, ks in SUBFIELDS.items() for k in ks])),
       value=WRONG)
def test_plan_never_crashes_on_a_wrong_typed_header_field(tmp_path, where, value):
    """A header field (or a field inside target / load) of any type: plan exited 70 on a list-typed target or load
    and on a list-typed load.mode; each reading command exits 0-3, never 70."""
    field, sub = where
    recs = honest_closed(seconds=90.0)
    if sub is None:
        recs[0] = {**recs[0], field: value}
    else:
        recs[0] = {**recs[0], field: {**(recs[0].get(field) or {}), sub: value}}
    f = write(tmp_path / "sweep.jsonl", recs)
    for argv in (["plan", "--records", str(f), "--peak-rate", "1"], ["accept", "--records", str(f), "--out",
                                                                     str(tmp_path / "acc")]):
        rc, _out, err = run_cli(argv)
        assert rc in (0, 1, 2, 3) and "internal error" not in err and "Traceback" not in err, (where, value, err)


# ====================================================================== at most 1,000 levels, linear work


def _with_levels(path: Path, extra: int) -> Path:
    """An honest PASSing level 4, then ``extra`` more distinct levels of one request each."""
    recs = list(honest_closed())
    for k in range(extra):
        recs.append(request(k, T0 + 2000 + k, 0.2, 1.0, level=round(0.001 * (k + 1), 3)))
    return write(path, recs)


def test_a_level_beyond_the_cap_is_counted_and_forbids_pass(tmp_path):
    at_cap = _with_levels(tmp_path / "a.jsonl", MAX_LEVELS - 1)
    rc, out, _ = run_cli(["report", "--details", str(at_cap), "--json"])
    doc = json.loads(out)
    assert rc == 0 and doc["judged"]["state"] == "PASS" and doc["input_problems"]["records_of_levels_over_cap"] == 0
    over = _with_levels(tmp_path / "b.jsonl", MAX_LEVELS + 5)
    rc, out, _ = run_cli(["report", "--details", str(over), "--json"])
    doc = json.loads(out)
    assert rc == 3 and doc["judged"]["state"] != "PASS"
    assert doc["input_problems"]["records_of_levels_over_cap"] == 6
    assert any("more than 1,000 distinct levels" in p for p in doc["evidence"]["problems"])
    rc, out, _ = run_cli(["report", "--details", str(over)])
    assert "6 records of levels beyond the first 1,000 distinct levels" in out
    other = write(tmp_path / "c.jsonl", another_run(list(honest_closed()), seed=3))  # another run, not this one
    rc, out, _ = run_cli(["compare", str(over), str(other)])
    assert rc != 0 and "more than 1,000 distinct levels" in out


def _traced_work(path: Path) -> int:
    """Python lines executed by `report` on ``path`` (deterministic: the same code and file give the same count)."""
    n = 0

    def tracer(frame, event, arg):
        nonlocal n
        n += 1
        return tracer

    run_cli(["report", "--details", str(path)])  # imports and caches first
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sys.settrace(tracer)
        try:
            main(["report", "--details", str(path)])
        finally:
            sys.settrace(None)
    return n


def test_the_work_per_level_is_linear(tmp_path):
    """8 times the levels, at most ~8 times the work (it was 13.7 times on 1a93a75: the capacity table compared
    every level with every row, and each level's evidence problem recomputed every level's verdict)."""

    def levels(n: int) -> Path:
        recs = [header("closed", tuple(range(1, n + 1)))]
        for lv in range(1, n + 1):
            recs += [request(i, T0 + 10 * lv + i, 0.2, 1.0, level=lv) for i in range(2)]
        return write(tmp_path / f"l{n}.jsonl", recs)

    small, large = _traced_work(levels(100)), _traced_work(levels(800))
    assert large < 9.0 * small, (small, large, large / small)


# ====================================================================== memory bounded: 2 GB under RLIMIT_AS

_RLIMIT_SCRIPT = textwrap.dedent("""
    import contextlib, io, json, resource, sys
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from tui.cli import main
    argvs = json.loads(sys.argv[1])
    for argv in argvs:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(argv)
        print(json.dumps({"argv": argv, "rc": rc, "err": err.getvalue()[-400:]}), flush=True)
    from tui.sources.load.dataset import DatasetError, read_dataset
    from tui.sources.load.errors import ConfigError
    from tui.sources.load.trace import load_trace
    for name, call, errors in (("dataset", read_dataset, DatasetError), ("trace", load_trace, ConfigError)):
        try:
            call(sys.argv[3])
            rc = 0
        except errors:
            rc = 2
        print(json.dumps({"argv": [name], "rc": rc, "err": ""}), flush=True)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"maxrss_mb": ru.ru_maxrss / 1024}))
""")


def test_memory_stays_bounded_on_a_2_gb_sparse_file_under_an_address_space_cap(tmp_path):
    """A 2 GB file (sparse: no disk used) of no newline, read by every reading command in a process whose whole
    address space is capped at 768 MiB: before, one report of it grew to 2.4 GB RSS (and here: MemoryError,
    exit 70). Each must exit 0-3 with one line, never 70."""
    big = sparse(tmp_path / "big.jsonl", 2 << 30, b'{"type":"run","schema_version":1}\n')
    # the other readers (the HTML sampler, compare's, the watch recording's) on 1 GiB: still past the cap, and
    # the test stays within seconds
    gib = sparse(tmp_path / "gib.jsonl", 1 << 30, b'{"type":"run","schema_version":1}\n')
    watch = sparse(tmp_path / "watch.jsonl", 1 << 30, b'{"type":"run","schema_version":1,"kind":"watch"}\n')
    rec = tmp_path / "run.jsonl"
    rec.write_bytes(SEED.read_bytes())
    argvs = [["report", "--details", str(big)], ["accept", "--records", str(big), "--out", str(tmp_path / "acc")],
             ["plan", "--records", str(big), "--peak-rate", "1"], ["import", str(big), "--out", str(tmp_path / "i")],
             ["report", "--details", str(rec), "--server-log", str(big)], ["budget", "--config", str(big)],
             ["report", "--details", str(gib), "--html", str(tmp_path / "p.html")], ["compare", str(gib), str(rec)],
             ["report", "--details", str(watch)]]
    r = subprocess.run([sys.executable, "-c", _RLIMIT_SCRIPT, json.dumps(argvs), str(768 << 20), str(big)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    results = [json.loads(ln) for ln in r.stdout.splitlines()]
    for res in results[:-1]:
        assert res["rc"] in (0, 1, 2, 3), res
        assert "internal error" not in res["err"] and "MemoryError" not in res["err"], res
    assert len(results) == len(argvs) + 3
