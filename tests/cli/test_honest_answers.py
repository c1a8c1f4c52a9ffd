"""Honest answers: no budget nobody gave, one answer per question, input that is not a record file,
provenance everywhere. CLI tests go through ``tui.cli.main`` (or a subprocess for standard input) and assert exit
codes and text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tui.cli import main
from tui.core import provenance
from tui.core.budget import BudgetInputs, budget_to_dict, compute_budget
from tui.core.budgetview import capacity_sentence, server_capacity
from tui.core.levels import LevelNotInFile, judge_level
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RunHeader, parse_line, read_file, source_block
from tui.samples import sample_path

ROOT = REPO
# a real run WITHOUT a budget record (the first bundled sample: Gemma 3 270M on a CPU, llama.cpp, 4 slots x 2048);
# the bundled default.jsonl now carries its budget (tests/docs/test_bundled_run.py)
DEFAULT = str(REPO / "tests" / "fixtures" / "gemma_sweep_short.jsonl")
SEED = sample_path("seed.jsonl")  # the bundled teaching log
OWN_BUDGET = compute_budget(BudgetInputs(params=270e6, gpu_gib=16.0, layers=18, kv_heads=1, head_dim=256,
                                         max_seq=2048))


def _lines(path) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines(keepends=True)


def with_budget_record(tmp_path, budget_doc: dict, name="with_budget.jsonl") -> Path:
    """The bundled real run with a budget record after its header (what `run --params ...` writes)."""
    lines = _lines(DEFAULT)
    rec = json.dumps({"type": "budget", "budget": budget_doc}) + "\n"
    p = tmp_path / name
    p.write_text(lines[0] + rec + "".join(lines[1:]), encoding="utf-8")
    return p


def with_header(tmp_path, update: dict, name="hdr.jsonl") -> Path:
    lines = _lines(DEFAULT)
    hdr = json.loads(lines[0])
    hdr.update(update)
    p = tmp_path / name
    p.write_text(json.dumps(hdr) + "\n" + "".join(lines[1:]), encoding="utf-8")
    return p


def report_json(capsys, *argv) -> tuple[int, dict]:
    rc = main(["report", "--details", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def accept_in(tmp_path, *argv, out="acc") -> tuple[int, dict, str, str, Path]:
    d = tmp_path / out
    rc = main(["accept", *argv, "--out", str(d)])
    doc = json.loads((d / "acceptance.json").read_text()) if (d / "acceptance.json").exists() else {}
    md = (d / "acceptance.md").read_text() if (d / "acceptance.md").exists() else ""
    return rc, doc, md, "", d


# The bundled real run's highest level (8) has 9 requests over 12 s: a FAIL needs >= 60 s of data (issue 8), so every
# level of it is INSUFFICIENT_WINDOW (exit 3) under the default 10-minute window.

# ====================================================================== 1. never a budget nobody gave


def test_report_on_the_real_run_shows_budget_unknown_with_the_flags(capsys):
    rc = main(["report", "--details", DEFAULT])
    out = capsys.readouterr().out
    assert rc == 3
    assert "budget unknown" in out and "--config config.json" in out and "--budget FILE" in out
    assert "memory_only_candidate" not in out and "teaching" not in out.split("--teaching")[0]
    assert "budget: unknown" in out
    rc, rep = report_json(capsys, DEFAULT)
    assert rep["budget"] is None and rep["conclusion"]["budget"] is None
    assert rep["budget_view"]["known"] is False and "--params" in rep["budget_view"]["hint"]


def test_server_allocation_shown_beside_an_unknown_budget(capsys):
    rc, rep = report_json(capsys, DEFAULT)
    assert rc == 3
    cap = rep["budget_view"]["server_capacity"]
    assert cap["engine"] == "llamacpp" and cap["sequences"] == 4 and cap["tokens_per_sequence"] == 2048
    line = rep["budget_view"]["capacity_vs_server"]
    assert line.startswith("Predicted room: unknown (no budget); the server (llamacpp) allocated room for 4 sequences "
                           "of 2048 tokens.")
    assert "set by the operator" in line


def test_teaching_budget_only_when_asked_or_for_the_teaching_log(capsys):
    rc, rep = report_json(capsys, DEFAULT, "--teaching")
    assert rc == 3 and rep["conclusion"]["ready_for_traffic"] is False
    assert rep["budget"]["memory_only_candidate"] == 15 and rep["budget"]["teaching"] is True
    assert "--teaching" in rep["budget"]["origin"]
    assert main(["report", "--details", DEFAULT, "--teaching"]) == 3
    out = capsys.readouterr().out
    assert "the teaching case is an example, not this deployment's budget" in out
    assert "TEACHING CASE" in out
    assert "Predicted room for 15 sequences of 4096 tokens; the server (llamacpp) allocated room for 4 sequences" in out
    rc, rep = report_json(capsys, SEED)
    assert rc == 3
    assert rep["budget"]["memory_only_candidate"] == 15 and rep["budget"]["teaching"] is True
    assert "bundled teaching log" in rep["budget"]["origin"]
    assert main(["report", "--details", DEFAULT, "--teaching", "--params", "7B"]) == 2
    assert "cannot be combined" in capsys.readouterr().err


def test_budget_command_still_prints_the_teaching_case_labelled(capsys):
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert "teaching case" in out and "memory_only_candidate=15 sequences" in out


def test_budget_record_in_the_file_is_reused_and_verified(tmp_path, capsys):
    doc = budget_to_dict(OWN_BUDGET)
    p = with_budget_record(tmp_path, doc)
    rc, rep = report_json(capsys, str(p))
    assert rc == 3 and rep["budget"]["memory_only_candidate"] == OWN_BUDGET.candidate
    assert rep["budget"]["origin"] == "budget record in the record file" and rep["budget"]["teaching"] is False
    assert rep["conclusion"]["budget"] == "feasible"
    # flags given to the reader win, and a note says so
    rc, rep = report_json(capsys, str(p), "--teaching")
    assert rc == 3 and rep["budget"]["memory_only_candidate"] == 15
    assert any("carries a budget record" in n for n in rep["notes"])
    # a tampered budget record is not believed
    bad = json.loads(json.dumps(doc))
    bad["results"]["memory_only_candidate"] = bad["results"].get("memory_only_candidate", 1) + 100
    bad["results"]["candidate"] = 999
    q = with_budget_record(tmp_path, bad, "tampered.jsonl")
    rc, rep = report_json(capsys, str(q))
    assert rc == 3 and "failed verification" in capsys.readouterr().err + " ".join(rep["notes"])
    assert rep["budget"] is None and rep["budget_view"]["known"] is False
    assert "failed verification" in rep["budget_view"]["problem"]


def test_accept_uses_the_same_budget_rules(tmp_path, capsys):
    rc, doc, md, _, _ = accept_in(tmp_path, "--records", DEFAULT)
    out = capsys.readouterr().out
    assert doc["budget"]["given"] is False and doc["conclusion"]["budget"] == "unknown"
    assert "Budget unknown: no budget was given for this run;" in md and "--config" in md
    assert "the server (llamacpp) allocated room for 4 sequences of 2048 tokens" in md
    assert "budget: unknown" in out and "allocated room for 4 sequences" in out
    p = with_budget_record(tmp_path, budget_to_dict(OWN_BUDGET))
    rc, doc, md, _, _ = accept_in(tmp_path, "--records", str(p), out="acc2")
    assert doc["budget"]["given"] is True and doc["budget"]["memory_only_candidate"] == OWN_BUDGET.candidate
    assert doc["inputs"]["budget"] == f"budget record in {p}"
    rc, doc, md, _, _ = accept_in(tmp_path, "--records", DEFAULT, "--teaching", out="acc3")
    assert rc == 3 and doc["conclusion"]["ready_for_traffic"] is False
    assert doc["budget"]["teaching"] is True and "**TEACHING CASE**" in md


def test_server_capacity_from_the_header_beside_the_prediction(tmp_path, capsys):
    cap = {"engine": "vllm", "sequences": 37, "tokens_per_sequence": 4096, "total_tokens": 151552, "note": None,
           "source": "vllm:cache_config_info"}
    p = with_header(tmp_path, {"server_capacity": cap})
    rc, rep = report_json(capsys, str(p), "--teaching")
    assert rc == 3
    assert rep["budget_view"]["capacity_vs_server"] == ("Predicted room for 15 sequences of 4096 tokens; the server "
                                                        "(vllm) allocated room for 37 sequences of 4096 tokens.")
    rc, rep = report_json(capsys, str(p))
    assert rc == 3
    assert rep["budget_view"]["capacity_vs_server"].startswith("Predicted room: unknown (no budget); the server (vllm)")
    # llama.cpp: n_ctx is the operator's choice, and the view says so
    assert "set by the operator" in capacity_sentence(None, server_capacity(
        {"server_capacity": {"engine": "llamacpp", "sequences": 4, "tokens_per_sequence": 2048}}))
    assert server_capacity({}) is None and server_capacity({"server_capacity": {"engine": "x"}}) is None


def test_console_budget_pane_and_verdict_bar_say_unknown():
    from tui.widgets.bars import budget_phrase
    from tui.widgets.panes import BudgetPane

    mon = Monitor(MonitorConfig())
    for item in read_file(DEFAULT):
        mon.add(item)
    snap = mon.snapshot()
    assert snap.budget is None and snap.budget_view.known is False
    pane = BudgetPane(None)
    pane._view = snap.budget_view  # what update_snapshot stores before rendering
    text = pane.budget_markup()
    assert "budget unknown" in text and "--config" in text and "allocated room for 4 sequences" in text
    assert "candidate" not in text.split("--teaching")[0]
    assert "unknown" in budget_phrase(None, snap.budget_view)
    # a budget record in the file reaches the pane through the snapshot
    mon2 = Monitor(MonitorConfig())
    mon2.add(RunHeader({"type": "run", "schema_version": 1}))
    mon2.add(parse_line(json.dumps({"type": "budget", "budget": budget_to_dict(OWN_BUDGET)})))
    s2 = mon2.snapshot()
    assert s2.budget is not None and s2.budget_view.origin == "budget record in the record file"
    assert f"feasible (candidate {OWN_BUDGET.candidate})" == s2.budget_view.phrase


def test_console_default_and_replay_choose_no_budget_for_the_real_run(monkeypatch):
    import tui.cli.replay as R

    seen = {}

    def fake_run_console(path, args, budget, **kw):
        seen["budget"], seen["origin"] = budget, kw.get("budget_origin")
        return 0

    monkeypatch.setattr(R, "run_console", fake_run_console)
    monkeypatch.setattr(R, "default_sample_path", lambda: Path(DEFAULT))
    assert main([]) == 0 and seen["budget"] is None
    assert main(["--teaching"]) == 0 and seen["budget"].candidate == 15 and "--teaching" in seen["origin"]
    monkeypatch.setattr(R, "default_sample_path", lambda: Path(SEED))
    assert main([]) == 0 and seen["budget"].candidate == 15 and "teaching log" in seen["origin"]
    assert main(["replay", DEFAULT]) == 0 and seen["budget"] is None
    assert main(["replay", SEED]) == 0 and seen["budget"].candidate == 15


# ====================================================================== 2. one answer per question


def test_report_and_accept_give_the_same_measured_verdict(tmp_path, capsys):
    rc_r = main(["report", "--details", DEFAULT])
    out_r = capsys.readouterr().out
    rc_a, doc, _, _, _ = accept_in(tmp_path, "--records", DEFAULT)
    out_a = capsys.readouterr().out
    judged = "judged level: concurrency 8 (the highest level tested): INSUFFICIENT_WINDOW; measured capacity: none (no level PASSes)"
    assert judged in out_r and judged in out_a
    assert rc_r == 3 and doc["measured"]["state"] == "INSUFFICIENT_WINDOW" and rc_a == 3
    assert doc["measured"]["judged"]["level"] == 8
    # the same with a required level
    rc_r = main(["report", "--details", DEFAULT, "--required-level", "1"])
    out_r = capsys.readouterr().out
    rc_a, doc, _, _, _ = accept_in(tmp_path, "--records", DEFAULT, "--required-level", "1", out="acc2")
    out_a = capsys.readouterr().out
    judged = "judged level: concurrency 1 (--required-level 1): INSUFFICIENT_WINDOW"
    assert judged in out_r and judged in out_a
    assert rc_r == 3 and rc_a == 3 and doc["measured"]["state"] == "INSUFFICIENT_WINDOW"
    # --level is kept as an alias
    rc, rep = report_json(capsys, DEFAULT, "--level", "1")
    assert rc == 3
    assert rep["judged"]["level"] == 1 and rep["judged"]["why"] == "--required-level 1"


def test_a_level_not_in_the_file_is_refused_naming_the_levels(tmp_path, capsys):
    assert main(["report", "--details", DEFAULT, "--level", "3"]) == 2
    err = capsys.readouterr().err
    assert "level 3 is not in the record file; levels present (concurrency): 1, 2, 4, 8" in err
    rc, _, _, _, d = accept_in(tmp_path, "--records", DEFAULT, "--required-level", "3")
    assert rc == 2 and "levels present (concurrency): 1, 2, 4, 8" in capsys.readouterr().err
    assert not d.exists() or not any(d.iterdir()), "no report files for a refused level"


def test_judge_level_rule():
    rows = [(1, "closed", "PASS"), (2, "closed", "PASS"), (2, "closed", "FAIL"), (4, "closed", "INSUFFICIENT_WINDOW")]
    j = judge_level(rows)
    assert (j.level, j.state, j.capacity, j.why) == (4, "INSUFFICIENT_WINDOW", 1, "the highest level tested")
    j = judge_level(rows, 2)
    assert (j.level, j.state, j.rounds) == (2, "FAIL", 2), "a FAILed round fails the level"
    with pytest.raises(LevelNotInFile):
        judge_level(rows, 8)
    # closed loop is the primary mode; open-loop rows do not change the judged level
    assert judge_level(rows + [(50, "open", "PASS")]).level == 4
    assert judge_level([]) is None


# ====================================================================== 3. input that is not a record file


@pytest.fixture
def not_records(tmp_path) -> dict[str, Path]:
    other = tmp_path / "other_tool.json"
    other.write_text(json.dumps({"benchmark": "x", "results": [{"ttft": 0.1}, {"ttft": 0.2}]}, indent=2))
    jsonl = tmp_path / "other.jsonl"
    jsonl.write_text("".join(json.dumps({"ttft_ms": i, "ok": True}) + "\n" for i in range(5)))
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    return {"other": other, "jsonl": jsonl, "binary": binary, "empty": empty}


def test_report_refuses_input_that_is_not_a_record_file(not_records, capsys):
    for name, p in not_records.items():
        assert main(["report", "--details", str(p)]) == 2, name
        err = capsys.readouterr().err
        assert "not a servewatch record file (0 of" in err, (name, err)
        if name != "empty":
            assert f"lines usable; first problem: {p}:1:" in err, (name, err)
    assert main(["report", "--details", str(not_records["jsonl"])]) == 2
    assert "(0 of 5 lines usable; first problem: " in capsys.readouterr().err
    assert main(["report", "--details", str(not_records["empty"])]) == 2
    assert "(0 of 0 lines usable: it is empty)" in capsys.readouterr().err


def test_accept_refuses_it_and_writes_nothing(not_records, tmp_path, capsys):
    for name, p in not_records.items():
        rc, _, _, _, d = accept_in(tmp_path, "--records", str(p), out=f"acc_{name}")
        assert rc == 2 and "not a servewatch record file" in capsys.readouterr().err, name
        assert not d.exists() or not any(d.iterdir()), f"{name}: report files written for non-record input"


def test_replay_refuses_it_before_opening_the_console(not_records, capsys):
    for name, p in not_records.items():
        assert main(["replay", str(p)]) == 2, name
        err = capsys.readouterr().err
        assert "not a servewatch record file (0 of" in err, (name, err)


def test_directories_and_devices_get_their_own_message(tmp_path, capsys):
    for cmd in (["report"], ["replay"], ["accept", "--out", str(tmp_path / "a"), "--records"]):
        assert main([*cmd, str(tmp_path)]) == 2
        assert "is a directory, not a record file" in capsys.readouterr().err
        if os.path.exists("/dev/null"):
            assert main([*cmd, "/dev/null"]) == 2
            assert "/dev/null is a device, not a record file" in capsys.readouterr().err


def test_report_reads_standard_input():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(DEFAULT, "rb") as fh:
        r = subprocess.run([sys.executable, "-m", "tui", "report", "-", "--json"], stdin=fh, capture_output=True,
                           env=env, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 3, r.stderr.decode()
    rep = json.loads(r.stdout)
    assert rep["source"] == "<stdin>" and rep["measured"]["verdict"]["state"] == "INSUFFICIENT_WINDOW"
    r = subprocess.run([sys.executable, "-m", "tui", "report", "-"], input=b"\x00\x01 not json\n", capture_output=True,
                       env=env, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 2 and b"<stdin>: not a servewatch record file (0 of 1 lines usable" in r.stderr


def test_follow_waits_for_a_file_that_does_not_exist_yet(tmp_path, capsys):
    from tui.sources.replay import ReplaySource, validate_record_file

    p = tmp_path / "later.jsonl"
    assert validate_record_file(p, follow=True) is None
    assert validate_record_file(p).endswith("no such file")
    got: list = []
    cv = threading.Condition()

    def sink(items):
        with cv:
            got.extend(items)
            cv.notify_all()

    src = ReplaySource(p, follow=True, max_speed=True, poll_interval=0.01)
    src.start(sink)
    try:
        deadline = time.monotonic() + 10
        while not src.waiting_for_file:
            assert time.monotonic() < deadline, "the source never started waiting"
            threading.Event().wait(0.005)
        assert "waiting for the file" in src.status and not src.finished and src.error is None
        lines = _lines(DEFAULT)[:3]
        p.write_text("".join(lines), encoding="utf-8")
        with cv:
            ok = cv.wait_for(lambda: len(got) >= 3, timeout=10)
        assert ok and isinstance(got[0], RunHeader) and src.error is None
    finally:
        src.stop()


# ====================================================================== 4. provenance


def test_source_block_is_parsed_and_validated():
    block = source_block("run")
    assert block["kind"] == "run" and block["tool"] == "servewatch" and block["derived"] == []
    hdr = {"type": "run", "schema_version": 1, "synthetic": False, "source": block}
    rec = parse_line(json.dumps(hdr))
    assert isinstance(rec, RunHeader) and rec.data["source"]["kind"] == "run"
    assert provenance.short(rec.data).startswith("run · servewatch")
    assert provenance.describe(rec.data).startswith("measured by a servewatch load run (servewatch")
    imp = dict(hdr, source={"kind": "import", "tool": "converter", "version": "2", "file": "bench.json",
                            "sha256": "ab" * 32, "derived": ["t_first_token"]})
    text = provenance.describe(parse_line(json.dumps(imp)).data)
    assert "imported" in text and "bench.json" in text and "derived, not read: t_first_token" in text
    for bad in ({"kind": "guess"}, "run", {"kind": "run", "derived": "ttft"}):
        with pytest.raises(ValueError):
            parse_line(json.dumps(dict(hdr, source=bad)))
    with pytest.raises(ValueError):
        source_block("guess")


def test_load_generator_header_says_kind_run(tmp_path):
    pytest.importorskip("httpx")
    from tui.sources.load import LoadConfig, LoadGenerator

    cfg = LoadConfig(url="http://127.0.0.1:9/v1", model="m", levels=[1], requests=1, metrics=False, gpu=False,
                     progress_interval=0, api_key_env=None, record=str(tmp_path / "r.jsonl"))
    hdr = LoadGenerator(cfg, lambda d: None).header(None)
    rec = parse_line(json.dumps(hdr))  # what every reader sees
    assert isinstance(rec, RunHeader) and rec.data["source"]["kind"] == "run"
    assert rec.data["source"]["tool"] == "servewatch" and rec.data["source"]["file"] is None
    assert provenance.short(rec.data).startswith("run · servewatch")


def test_every_view_says_where_the_data_came_from(tmp_path, capsys):
    p = with_header(tmp_path, {"source": source_block("run")})
    assert main(["report", "--details", str(p)]) == 3
    assert "data from: measured by a servewatch load run (servewatch" in capsys.readouterr().out
    rc, rep = report_json(capsys, str(p))
    assert rc == 3 and rep["provenance"]["kind"] == "run" and rep["provenance"]["source"]["tool"] == "servewatch"
    rc, doc, md, _, _ = accept_in(tmp_path, "--records", str(p))
    assert doc["provenance"][0]["source_block"]["kind"] == "run"
    assert "data from: measured by a servewatch load run" in md
    # an old header (no block) and a file without a header
    assert main(["report", "--details", DEFAULT]) == 3
    assert "data from: written by servewatch 0.1.0 (the header has no source block" in capsys.readouterr().out
    headless = tmp_path / "headless.jsonl"
    headless.write_text("".join(_lines(DEFAULT)[1:]))
    assert main(["report", "--details", str(headless)]) == 3  # the same verdict at level 8, without a header
    assert "data from: provenance unknown (no run header)" in capsys.readouterr().out


def test_console_header_shows_provenance():
    pytest.importorskip("textual")
    from tui.widgets.bars import HeaderBar

    mon = Monitor(MonitorConfig())
    for item in list(read_file(DEFAULT))[1:]:
        mon.add(item)
    snap = mon.snapshot()
    assert snap.provenance_short == "provenance unknown"
    line = HeaderBar._header_line("x.jsonl", "REPLAY x1", snap, "servewatch", compact=False, width=160)
    assert "provenance unknown" in line
    mon = Monitor(MonitorConfig())
    mon.add(RunHeader({"type": "run", "schema_version": 1, "source": source_block("run")}))
    line = HeaderBar._header_line("x.jsonl", "REPLAY x1", mon.snapshot(), "servewatch", compact=False, width=160)
    assert "run · servewatch" in line
