"""`run --trace` of a servewatch recording of sessions, prefixes and a dataset (issue 23): the recording's own
workload replayed; the flags that would describe another workload refused, --dataset required (the recorded file,
by SHA-256) when the recording used one; each refusal one line, exit 2."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.unit.sources.load.test_sessions import Server
from tests.unit.sources.load.test_trace_sessions import SESSIONS, record
from tui.cli import main
from tui.core.lengths import parse_lengths
from tui.sources.load.dataset import example_path

URL = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def session_rec(tmp_path_factory) -> Path:
    rec = tmp_path_factory.mktemp("rec") / "sessions.jsonl"
    asyncio.run(record(Server(), rec, **SESSIONS))
    return rec


@pytest.fixture(scope="module")
def dataset_rec(tmp_path_factory) -> Path:
    rec = tmp_path_factory.mktemp("rec") / "dataset.jsonl"
    asyncio.run(record(Server(), rec, mode="open", levels=[40.0], arrival="constant",
                       turns=parse_lengths("uniform:1-3"), dataset=str(example_path()), requests=4, seed=3))
    return rec


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("args", [["--turns", "2"], ["--think-time", "1"], ["--shared-prefix-tokens", "64"],
                                  ["--shared-prefix-tokens", "64", "--prefix-groups", "2"]])
def test_a_session_recording_refuses_the_session_flags(session_rec, args, capsys):
    rc = main(["run", "--url", URL, "--trace", str(session_rec), *args])
    line = one_line(capsys)
    assert rc == 2 and args[0] in line, line


def test_a_recording_without_a_dataset_refuses_dataset(session_rec, capsys):
    rc = main(["run", "--url", URL, "--trace", str(session_rec), "--dataset", str(example_path())])
    line = one_line(capsys)
    assert rc == 2 and "used no dataset" in line, line


def test_a_dataset_recording_needs_its_dataset(dataset_rec, capsys):
    rc = main(["run", "--url", URL, "--trace", str(dataset_rec)])
    line = one_line(capsys)
    assert rc == 2 and "example-chat.jsonl" in line and "--dataset FILE" in line, line


def test_a_dataset_recording_refuses_another_file_naming_both_hashes(dataset_rec, tmp_path, capsys):
    other = tmp_path / "example-chat.jsonl"
    shutil.copy(example_path(), other)
    other.write_bytes(other.read_bytes() + b"\n")
    import hashlib

    got = hashlib.sha256(other.read_bytes()).hexdigest()
    want = hashlib.sha256(example_path().read_bytes()).hexdigest()
    rc = main(["run", "--url", URL, "--trace", str(dataset_rec), "--dataset", str(other)])
    line = one_line(capsys)
    assert rc == 2 and got in line and want in line, line


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_run_replays_a_session_recording_from_the_command_line(session_rec, tmp_path, capsys):
    out = tmp_path / "replay.jsonl"
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=2), "--trace", str(session_rec), "--warmup", "0", "--no-gpu",
                   "--record", str(out)])
    text = capsys.readouterr()
    assert rc in (0, 1, 3), text.err
    lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    load = lines[0]["load"]
    assert load["trace"]["replay"]["sessions"] == 6 and load["level_unit"] == "sessions/s"
    orig = [json.loads(x) for x in session_rec.read_text().splitlines() if x.strip()]
    n = len([d for d in orig if d.get("type") == "request"])
    reqs = [d for d in lines if d.get("type") == "request"]
    assert len(reqs) == n and len({r["session"] for r in reqs}) == 6


def test_the_session_anomalies_are_printed_file_line(session_rec, tmp_path):
    from tui.cli import settings_of
    from tui.cli.loadtest import config_from_args, trace_lines

    lines = session_rec.read_text().splitlines()
    first_req = next(x for x in lines if json.loads(x).get("type") == "request")
    rec = tmp_path / "dup.jsonl"
    rec.write_text("\n".join([*lines, first_req]) + "\n")  # one (session, turn) recorded twice, on the last line
    cfg = config_from_args(settings_of(["run", "--url", URL, "--trace", str(rec)]))
    out = [x for x in trace_lines(cfg) if "session anomaly" in x]
    assert len(out) == 1 and out[0].startswith(f"trace: session anomaly {rec}:{len(lines) + 1}: ")
    assert "recorded twice" in out[0]


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_a_trace_that_says_it_is_synthetic_labels_the_run_synthetic(tmp_path, capsys):
    """issue 37: `run --trace sample_logs/traces/azure-synthetic.csv` replayed a file whose first line says
    "# synthetic" and the run header said `synthetic: false`. The trace's own word labels the run: SYNTHETIC in the
    header (with the reason quoted), in the report, and never exit 0."""
    from tui.sources.load.trace import load_trace

    bundled = load_trace(str(Path(__file__).resolve().parents[2] / "sample_logs" / "traces" / "azure-synthetic.csv"))
    assert bundled.synthetic_reason is not None and "synthetic" in bundled.synthetic_reason
    trace = tmp_path / "made-up.csv"
    trace.write_text("# synthetic: made up for this test\nTIMESTAMP,ContextTokens,GeneratedTokens\n"
                     + "".join(f"2023-11-16 18:15:{10 + i:02d}.0,32,4\n" for i in range(6)))
    out = tmp_path / "replay.jsonl"
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=2), "--trace", str(trace), "--trace-speed", "20",
                   "--no-gpu", "--record", str(out), "--min-window-minutes", "0"])
    text = capsys.readouterr().out
    assert rc != 0
    header = json.loads(out.read_text().splitlines()[0])
    assert header["synthetic"] is True and "made up for this test" in header["synthetic_reason"]
    assert "SYNTHETIC" in text and "synthetic workload" in text
    assert "SYNTHETIC, SYNTHETIC" not in text and "SYNTHETIC: SYNTHETIC" not in text


def test_a_trace_without_the_word_is_not_labelled(tmp_path):
    from tui.sources.load.trace import load_trace

    trace = tmp_path / "real.csv"
    trace.write_text("# exported from production on 2026-11-30\nTIMESTAMP,ContextTokens,GeneratedTokens\n"
                     + "".join(f"2023-11-16 18:15:{10 + i:02d}.0,32,4\n" for i in range(6)))
    assert load_trace(str(trace)).synthetic_reason is None
