"""`servewatch index DIR...`, `servewatch history` and `run:ID` (issue 41): a SQLite catalogue of the runs found,
idempotent (an unchanged file is not read again, a changed one is re-read, a gone one loses its rows), the history
table and its trend page, and `compare run:ID` resolved through the catalogue (a file changed since is refused)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_hostile_strings import page_problems
from tests.support.hostile import hostile_records, problems, write_jsonl
from tests.support.load_runs import write_load_run
from tui.cli import main
from tui.cli.options import UsageError
from tui.cli.runref import resolve_run

DAY = 86_400.0
T0 = 1_767_225_600.0  # 2026-01-01


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Three weekly runs of one deployment: PASS at 1 and 2 (capacity 2), then level 2 failing (capacity 1), then
    PASS again; and a file that holds no run."""
    d = tmp_path_factory.mktemp("runs")
    write_load_run(d / "week1.jsonl", levels=(1, 2), fail=(), pass_seconds=660.0, t0=T0, run_id="week-1")
    (d / "sub").mkdir()
    write_load_run(d / "sub" / "week2.jsonl", levels=(1, 2), fail=(2,), pass_seconds=660.0, t0=T0 + 7 * DAY,
                   run_id="week-2")
    write_load_run(d / "week3.jsonl", levels=(1, 2), fail=(), pass_seconds=660.0, t0=T0 + 14 * DAY, run_id="week-3")
    (d / "notes.json").write_text('{"hello": "not a run"}')
    return d


def _copy(runs: Path, tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    shutil.copytree(runs, d)
    return d


def _index(capsys, *args) -> tuple[int, dict]:
    rc = main(["index", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _history(capsys, *args) -> tuple[int, dict]:
    rc = main(["history", *args, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_index_catalogues_every_run_and_is_idempotent(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    rc, first = _index(capsys, str(d))
    db = d / "servewatch-runs.sqlite"  # the default: in the first DIR
    assert rc == 0 and db.is_file() and first["db"] == str(db)
    assert first["files_read"] == 4 and first["runs_added"] == 3
    assert [s["file"] for s in first["skipped"]] == [str(d / "notes.json")]
    # the catalogue holds what the report says of each run
    rc, hist = _history(capsys, "--db", str(db))
    assert rc == 0 and [r["run_id"] for r in hist["runs"]] == ["week-1", "week-2", "week-3"]
    for row in hist["runs"]:
        main(["report", "--details", row["path"], "--json"])
        rep = json.loads(capsys.readouterr().out)
        assert row["verdict"] == rep["judged"]["state"]
        assert row["capacity"] == (rep["judged"]["measured_capacity"] if rep["judged"]["has_measured_capacity"]
                                   else None)
        assert row["goodput_rps"] == max(lv["goodput_rps"] for lv in rep["levels"])
        assert [(lv["level"], lv["verdict"]) for lv in row["levels"]] == [(lv["level"], lv["verdict"])
                                                                           for lv in rep["levels"]]
        assert row["digest"] == rep["records_integrity"]["state"] and row["started_at"] is not None
    assert [r["capacity"] for r in hist["runs"]] == [2.0, 1.0, 2.0]
    # again: nothing read, nothing added, the same ids
    ids = [r["id"] for r in hist["runs"]]
    rc, again = _index(capsys, str(d))
    assert rc == 0 and again["files_read"] == 0 and again["runs_added"] == 0 and again["unchanged"] == 4
    assert [r["id"] for r in _history(capsys, "--db", str(db))[1]["runs"]] == ids
    # touched (same content, a new time): not re-judged
    os.utime(d / "week1.jsonl", ns=(1, 1))
    rc, touched = _index(capsys, str(d))
    assert touched["touched"] == 1 and touched["files_read"] == 0
    assert [r["id"] for r in _history(capsys, "--db", str(db))[1]["runs"]] == ids


def test_a_changed_file_is_read_again_and_a_gone_one_loses_its_rows(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[0] == 0
    # week 3 rewritten: its level 2 now fails
    write_load_run(d / "week3.jsonl.new", levels=(1, 2), fail=(2,), pass_seconds=660.0, t0=T0 + 14 * DAY,
                   run_id="week-3b")
    os.replace(d / "week3.jsonl.new", d / "week3.jsonl")
    rc, rep = _index(capsys, str(d), "--db", str(db))
    assert rc == 0 and rep["files_read"] == 1 and rep["runs_added"] == 1
    rows = _history(capsys, "--db", str(db))[1]["runs"]
    assert [r["run_id"] for r in rows] == ["week-1", "week-2", "week-3b"] and rows[-1]["capacity"] == 1.0
    os.unlink(d / "sub" / "week2.jsonl")
    rc, rep = _index(capsys, str(d), "--db", str(db))
    assert rep["gone"] == 1
    assert [r["run_id"] for r in _history(capsys, "--db", str(db))[1]["runs"]] == ["week-1", "week-3b"]


def test_history_table_filters_and_trend_page(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[0] == 0
    page = tmp_path / "trend.html"
    assert main(["history", "--db", str(db), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["run", "date", "(UTC)"]
    body = [ln for ln in lines if ln.startswith("run:")]
    assert [ln.split()[1] for ln in body] == ["2026-01-01", "2026-01-08", "2026-01-15"]
    assert all("concurrency" in ln for ln in body) and "FAIL" in body[1] and "PASS" in body[0]
    html = page.read_text()
    assert "Measured capacity over time" in html and "Goodput over time" in html and "week3.jsonl" in html
    since = _history(capsys, "--db", str(db), "--since", "2026-01-05")[1]["runs"]
    assert [r["run_id"] for r in since] == ["week-2", "week-3"]
    assert _history(capsys, "--db", str(db), "--model", "M")[1]["runs"]  # the model asked, any case
    assert _history(capsys, "--db", str(db), "--model", "no-such-model")[1]["runs"] == []
    assert main(["history", "--db", str(db), "--since", "last tuesday"]) == 2
    assert "--since" in capsys.readouterr().err


def test_catalogue_files_that_are_not_catalogues_are_refused_untouched(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 10)
    foreign = tmp_path / "other.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE mine (x)")
    con.commit()
    con.close()
    for f in (text, foreign):
        before = f.read_bytes()
        assert main(["index", str(d), "--db", str(f)]) == 2
        assert main(["history", "--db", str(f)]) == 2
        err = capsys.readouterr().err
        assert "not a" in err and "Traceback" not in err and f.read_bytes() == before
    assert main(["history", "--db", str(tmp_path / "missing.sqlite")]) == 2
    assert "no such catalogue" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "no-such-dir")]) == 2
    capsys.readouterr()


def test_hostile_runs_reach_the_table_and_page_as_data(tmp_path, capsys):
    d = tmp_path / "runs"
    d.mkdir()
    write_jsonl(d / "hostile.jsonl", hostile_records(levels=(1,), n=40))
    (d / "\x1b[2J\x1b]0;owned\x07forged\nname.json").write_text('{"not": "a run"}')  # a file name is data too
    db = tmp_path / "cat.sqlite"
    assert main(["index", str(d), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert not problems(out)
    page = tmp_path / "h.html"
    assert main(["history", "--db", str(db), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "run:1" in out and not problems(out)
    assert page_problems(page.read_text()) == []


def test_compare_takes_run_ids_and_refuses_a_file_changed_since(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[0] == 0
    rows = _history(capsys, "--db", str(db))[1]["runs"]
    one, two = rows[0], rows[1]
    rc_files = main(["compare", one["path"], two["path"], "--json"])
    by_file = json.loads(capsys.readouterr().out)
    rc_ids = main(["compare", f"run:{one['id']}", f"run:{two['id']}", "--db", str(db), "--json"])
    by_id = json.loads(capsys.readouterr().out)
    assert rc_ids == rc_files and by_id["verdict"] == by_file["verdict"]
    assert by_id["levels"] == by_file["levels"]
    # the run's own id (a unique prefix) names it too
    assert main(["compare", "run:week-1", f"run:{two['id']}", "--db", str(db), "--json"]) == rc_files
    capsys.readouterr()
    for bad in (["run:999"], [f"run:{one['id']}", "--base-run", "1"]):
        args = ["compare", bad[0], f"run:{two['id']}", "--db", str(db), *bad[1:]]
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
    with open(two["path"], "ab") as fh:
        fh.write(b"\n")
    assert main(["compare", f"run:{one['id']}", f"run:{two['id']}", "--db", str(db)]) == 2
    assert "has changed since it was catalogued" in capsys.readouterr().err


def test_resolve_run_names_the_run_of_a_file_of_several(tmp_path, capsys):
    d = tmp_path / "runs"
    d.mkdir()
    f = d / "two.jsonl"
    write_load_run(f, levels=(1,), fail=(), t0=T0, run_id="first")
    write_load_run(f, levels=(1,), fail=(), t0=T0 + DAY, run_id="second")
    db = tmp_path / "cat.sqlite"
    rc, rep = _index(capsys, str(d), "--db", str(db))
    assert rc == 0 and rep["runs_added"] == 2
    ids = {r["run"]: r["id"] for r in rep["added"]}
    path, run_no, words = resolve_run(f"run:{ids[2]}", None, str(db), "base")
    assert (path, run_no) == (str(f), 2) and "run 2" in words
    assert resolve_run(str(f), 1, str(db), "base") == (str(f), 1, None)  # a file stays a file
    with pytest.raises(UsageError):
        resolve_run("run:first", 1, str(db), "base")


def test_an_import_without_a_time_axis_has_no_date_and_no_goodput(tmp_path, capsys):
    d = tmp_path / "runs"
    d.mkdir()
    src = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "llmperf"
    shutil.copy(src / "gemma_128_32_from_source_individual_responses.json", d)
    db = tmp_path / "cat.sqlite"
    rc, rep = _index(capsys, str(d), "--db", str(db))
    assert rc == 0 and rep["runs_added"] == 1
    row = _history(capsys, "--db", str(db))[1]["runs"][0]
    assert row["tool"] == "llmperf" and row["started_at"] is None and row["goodput_rps"] is None
    assert all(lv["goodput_rps"] is None for lv in row["levels"])
    assert main(["history", "--db", str(db)]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("run:")][0]
    assert "unknown" in line.split()[1] and line.rstrip().endswith("unknown")


def test_a_pass_below_the_acceptance_floors_is_marked_in_the_history(tmp_path, capsys):
    """A run judged at a 1-minute window PASSes as the report says, marked as the report marks it ("PASS (not
    acceptance-grade: window 1 min < 10 min)"), its capacity too: the history never shows it as a plain PASS."""
    import tests.support.evidence_files as ef
    from tui.core.verdict_settings import VerdictSettings, header_block

    d = tmp_path / "runs"
    d.mkdir()
    ef.write(d / "full.jsonl", ef.honest_closed(level=4, seconds=660.0))
    quick = ef.honest_closed(level=4, seconds=90.0)
    quick[0]["verdict_settings"] = header_block(VerdictSettings(min_window_s=60.0))
    quick[0]["run_id"] = "quick"
    quick[0]["started_at"] = ef.T0 + DAY
    ef.write(d / "quick.jsonl", quick)
    main(["report", str(d / "quick.jsonl")])
    report_text = capsys.readouterr().out
    assert "PASS (not acceptance-grade: window 1 min < 10 min)" in report_text
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[0] == 0
    rows = {r["run_id"]: r for r in _history(capsys, "--db", str(db))[1]["runs"]}
    assert rows["test-run"]["verdict"] == rows["quick"]["verdict"] == "PASS"
    assert rows["test-run"]["not_grade"] is None and rows["quick"]["not_grade"] == "window 1 min < 10 min"
    assert main(["history", "--db", str(db), "--html", str(tmp_path / "t.html")]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("run:")}
    full, short = (lines[f"run:{rows[k]['id']}"] for k in ("test-run", "quick"))
    assert "not acceptance-grade" not in full and "PASS" in full
    assert "PASS (not acceptance-grade: window 1 min < 10 min)" in short
    assert "concurrency 4 (not acceptance-grade)" in short
    assert "(not acceptance-grade)" in (tmp_path / "t.html").read_text()


def test_a_copied_run_is_marked_and_drawn_once(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    shutil.copy(d / "week1.jsonl", d / "sub" / "week1-copy.jsonl")
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[1]["runs_added"] == 4
    rows = _history(capsys, "--db", str(db))[1]["runs"]
    first, copy = [r for r in rows if r["run_id"] == "week-1"]
    assert main(["history", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"(copy of run:{first['id']})" in next(ln for ln in out.splitlines() if ln.startswith(f"run:{copy['id']} "))
    from tui.core.history import trends

    (points,) = trends(rows)["deployments"].values()
    assert len(points) == 3


def test_export_takes_a_run_id(runs, tmp_path, capsys):
    d = _copy(runs, tmp_path)
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[0] == 0
    row = _history(capsys, "--db", str(db))[1]["runs"][1]
    out = tmp_path / "x.csv"
    assert main(["export", f"run:{row['id']}", "--db", str(db), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["file"] == row["path"] and summary["rows"] == row["requests"]
    assert main(["export", f"run:{row['id']}", "--db", str(db)]) == 0  # the default name: beside the run's file
    capsys.readouterr()
    assert os.path.exists(row["path"] + ".csv")


def test_runs_that_name_no_deployment_are_never_one_trend_line():
    from tui.core.history import deployment_of

    a = {"path": "/r/a.json", "run_no": 1, "served_model": None, "claimed_model": None, "engine": None,
         "target_url": None}
    b = {**a, "path": "/r/b.json"}
    assert deployment_of(a) != deployment_of(b)
    same = {**a, "served_model": "m", "engine": "vllm", "target_url": "http://h"}
    assert deployment_of(same) == deployment_of({**same, "path": "/r/other.jsonl"})


def test_select_takes_run_ids_as_a_candidates_files(runs, tmp_path, capsys):
    """select's --candidate NAME=run:ID reads the catalogued file, the same decision as with its path; a run:ID
    that is one of several runs of a file, or an unknown one, is bad usage (one line, exit 2)."""
    d = _copy(runs, tmp_path)
    db = tmp_path / "cat.sqlite"
    assert _index(capsys, str(d), "--db", str(db))[0] == 0
    rows = _history(capsys, "--db", str(db))[1]["runs"]
    one, two = rows[0], rows[1]
    rc_files = main(["select", "--candidate", f"a={one['path']}", "--candidate", f"b={two['path']}", "--json"])
    by_file = json.loads(capsys.readouterr().out)
    rc_ids = main(["select", "--candidate", f"a=run:{one['id']}", "--candidate", f"b=run:{two['id']}",
                   "--db", str(db), "--json"])
    by_id = json.loads(capsys.readouterr().out)
    assert rc_ids == rc_files and by_id["choice"] == by_file["choice"]
    assert [c["reasons"] for c in by_id["candidates"]] == [c["reasons"] for c in by_file["candidates"]]
    assert main(["select", "--candidate", "a=run:999", "--candidate", f"b=run:{two['id']}", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


SECRETS = ("hunter2pw", "SEKRET123", "TOKEN456xyz")


@pytest.mark.parametrize("where", ["url", "endpoint", "headers"])
def test_credentials_a_record_file_carries_never_reach_the_export_or_the_catalogue(tmp_path, capsys, where):
    """A record file another tool wrote (or one edited) may carry a password, an API key in the URL's query or an
    Authorization header unredacted: `report` scrubs them, and so must `export` (its rows and its metadata),
    `index` (the SQLite file itself) and `history` (text, JSON, page)."""
    lines = (Path(__file__).resolve().parents[2] / "sample_logs" / "default.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head.pop("chain", None)
    if where == "headers":
        head["headers"] = {"Authorization": f"Bearer {SECRETS[2]}"}
    else:
        head["target"][where] = f"http://alice:{SECRETS[0]}@127.0.0.1:18080/v1?api_key={SECRETS[1]}"
    d = tmp_path / "runs"
    d.mkdir()
    body = [ln for ln in lines[1:] if json.loads(ln).get("type") != "seal"]
    (d / "run.jsonl").write_text("\n".join([json.dumps(head), *body]) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    assert main(["export", str(d / "run.jsonl"), "--format", "csv", "--out", str(out / "run.csv")]) == 0
    assert main(["export", str(d / "run.jsonl"), "--format", "llmd", "--out", str(out / "run.llmd.json")]) == 0
    db = tmp_path / "cat.sqlite"
    assert main(["index", str(d), "--db", str(db)]) == 0
    assert main(["history", "--db", str(db)]) == 0
    assert main(["history", "--db", str(db), "--json"]) == 0
    assert main(["history", "--db", str(db), "--html", str(out / "h.html")]) == 0
    cap = capsys.readouterr()
    texts = {"stdout": cap.out, "stderr": cap.err, "catalogue": db.read_bytes().decode("latin-1")}
    texts.update({p.name: p.read_text("utf-8") for p in out.iterdir()})
    for name, text in texts.items():
        assert not [s for s in SECRETS if s in text], name
