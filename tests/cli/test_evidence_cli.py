"""The CLI half of the evidence checks: evidence a reviewer can sign.

- several runs in one file are never merged (`--run N`), in report, replay, compare and accept;
- several files: the same file or run twice counts once, files of other models or targets are refused (`--model`);
- SYNTHETIC data never exits 0 (report, compare, accept, import);
- weakened settings are named, "PASS (not acceptance-grade: ...)", and never "ready";
- accept applies its own quality policy (margin / alpha / minimum cases, a long-context case, same model, a real
  baseline) and says which load and quality files were tied;
- accept's advice is the judged level's own gap (the same as `report`).
Each test fails on the code before the change. The record files are written here (small, seconds to read);
one test records a real `servewatch run` against the in-test fault server (127.0.0.1, a few requests).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.test_accept import BUDGET, accept
from tests.support import quality_files as QF
from tests.support.paths import TESTS
from tui.cli import main
from tui.core.grade import ALPHA_FLOOR, MIN_WINDOW_FLOOR_S, acceptance_grade, changed_settings
from tui.core.monitor import MonitorConfig
from tui.core.records import run_header
from tui.core.runs import RunSplitter, run_identity
from tui.core.slos import Slos
from tui.samples import sample_path

T0 = 1_780_000_000.0


def _header(model="test-model", url="http://127.0.0.1:8000/v1", run_id=None, synthetic=False, started_at=T0):
    """The server serves the model the run names (its /props and /v1/models, as `run` records them)."""
    extra = {"run_id": run_id} if run_id else {}
    return run_header(target={"url": url, "model": model, "api": "chat"},
                      load={"mode": "closed", "levels": [1], "level_unit": "concurrency", "rounds": 1},
                      environment={"python": "3.11", "server": QF.server_env(f"/models/{model}.gguf")},
                      synthetic=synthetic, started_at=started_at, **extra)


def run_lines(*, n=700, gap=1.0, t0=T0, level=1, fail_every=0, prefix="r", header=True, **hkw) -> list[dict]:
    """One honest closed-loop run at concurrency 1: n requests back to back, each ``gap`` s long (700 x 1 s: past
    the default 10-min window; the slot is always busy, so the load was delivered),
    every ``fail_every``-th failed (0: none), with its step records and their counts."""
    lines: list[dict] = [_header(started_at=t0, **hkw)] if header else []
    lines.append({"type": "step", "t": t0, "event": "start", "level": level, "round": 1, "mode": "closed",
                  "phase": "measure"})
    failed = 0
    for i in range(n):
        ts = t0 + 1 + i * gap
        if fail_every and i % fail_every == 0:
            failed += 1
            lines.append({"type": "request", "id": f"{prefix}-{i}", "t_sent": ts, "t_first_token": None,
                          "t_end": ts + gap - 0.001, "complete": False, "error": "http_5xx", "http_status": 500,
                          "level": level, "round": 1, "output_tokens": 0, "phase": "measure"})
            continue
        lines.append({"type": "request", "id": f"{prefix}-{i}", "t_sent": ts, "t_first_token": ts + min(0.1, gap / 2),
                      "t_end": ts + gap - 0.001, "complete": True, "error": None, "http_status": 200, "level": level,
                      "round": 1, "output_tokens": 20, "finish_reason": "length", "phase": "measure"})
    lines.append({"type": "step", "t": t0 + 2 + n * gap, "event": "end", "level": level, "round": 1,
                  "mode": "closed", "phase": "measure", "requests": n, "completed": n - failed, "failed": failed,
                  "saturated": False})
    return lines


def write(path: Path, *runs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for run in runs for x in run))
    return path


def report_json(capsys, *argv) -> tuple[int, dict, str]:
    rc = main(["report", "--details", *argv, "--json"])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if cap.out.strip() else {}), cap.err


def lc_quality(path: Path, n=60, *, lc=60, model="test-model", same_server=False, settings=None) -> Path:
    """A quality result of n passing paired key-task cases and ``lc`` long-context ones at the suite's shares of the
    candidate server's context, each side's served model recorded, sealed (tests.support.quality_files).
    ``same_server``: the baseline is the candidate's own server (the same facts under another URL)."""
    rows = QF.key_rows(True, n) + (QF.lc_rows(True, lc) if lc else [])
    served = f"/models/{model}.gguf"
    same = {}
    if same_server:
        same = {"base_model": model, "base_served": served, "base_identity": QF.server_identity(served),
                "base_server": dict(QF.server_env(served), context_tokens=QF.CTX)}
    return QF.write_doc(path, QF.quality_doc(rows, rows, model=model, served=served, settings=settings,
                                             base_url="http://localhost:8000", **same))


# ------------------------------------------------------------------ honest input still passes


def test_honest_file_passes_report_and_accept_with_the_defaults(tmp_path, capsys):
    """The control: an honest 700-request run over 11+ minutes PASSes `report` (exit 0, no marks) and `accept`
    says ready with a budget and an acceptance-grade quality file (long context, same model, real baseline)."""
    rec = write(tmp_path / "run.jsonl", run_lines())
    rc, rep, _ = report_json(capsys, str(rec))
    assert rc == 0 and rep["measured"]["verdict"]["state"] == "PASS"
    assert rep["settings"] == {"changed_from_default": [], "not_acceptance_grade": []}
    assert main(["report", "--details", str(rec)]) == 0
    out = capsys.readouterr().out
    assert "verdict=PASS" in out and "not acceptance-grade" not in out and "settings not default" not in out
    q = lc_quality(tmp_path / "q.json")
    rc, doc, md, _ = accept(tmp_path, "--records", str(rec), "--quality", str(q), *BUDGET)
    assert rc == 0 and doc["conclusion"]["ready_for_traffic"] is True, doc["conclusion"]
    assert doc["quality"]["not_acceptance_grade"] == []
    tied = doc["quality"]["tied"]
    assert f"{rec} (served model /models/test-model.gguf, --model test-model, endpoint http://127.0.0.1:8000/v1)" in tied
    assert "tied to quality" in tied and "--model test-model, endpoint http://127.0.0.1:8000)" in tied


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_a_real_servewatch_run_appended_twice_is_judged_run_by_run(tmp_path, capsys):
    """`servewatch run --record` against the in-test fault server, twice into one file: each run's own verdict
    is its own (`run` judges the run it appended), `report` refuses the file without --run and judges each run
    with it; the weakened window is marked, not hidden."""
    from tests.support.fault_server import FaultServer

    rec = tmp_path / "run.jsonl"
    with FaultServer() as fs:
        for _ in range(2):
            # 20 ms to the first token: a request longer than the client's own send overhead (the server holds
            # the concurrency it is labelled with; tui.core.evidence)
            rc = main(["run", "--details", "--url", fs.url("ok", tokens=1, first_delay=0.02), "--model", "fault-model", "--concurrency", "1",
                       "--requests",
                       "100", "--no-gpu", "--record", str(rec), "--min-window-minutes", "0"])
            out = capsys.readouterr().out
            assert rc == 0, out
            assert "verdict=PASS (not acceptance-grade: window 0 min < 10 min)" in out
            assert re.search(r"measured requests=100\b", out), out  # this run's 100, never 200
    rc, _, err = report_json(capsys, str(rec), "--min-window-minutes", "0")
    assert rc == 2 and "holds 2 runs" in err and "run 1:" in err and "run 2:" in err
    for n in ("1", "2"):
        rc, rep, _ = report_json(capsys, str(rec), "--min-window-minutes", "0", "--run", n)
        assert rc == 0 and rep["measured"]["window"]["n"] == 100
        assert rep["settings"]["not_acceptance_grade"] == ["window 0 min < 10 min"]
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--run", "2", "--min-window-minutes", "0", *BUDGET)
    assert doc["measured"]["state"] == "PASS"  # the measured state is unchanged ...
    assert rc == 3 and doc["conclusion"]["ready_for_traffic"] is False  # ... but window 0 is never "ready"


# ------------------------------------------------------------------ finding 6: runs, rounds and models mixed


def test_two_runs_in_one_file_are_listed_and_refused_without_run(tmp_path, capsys):
    """Before: merged under the first header (a failing run of model B hidden behind model A's header)."""
    rec = write(tmp_path / "two.jsonl", run_lines(model="model-a", prefix="a"),
                run_lines(model="model-b", url="http://127.0.0.1:9/v1", t0=T0 + 5000, fail_every=2, prefix="b"))
    rc, _, err = report_json(capsys, str(rec))
    assert rc == 2
    assert "holds 2 runs" in err and "--run N" in err
    assert re.search(r"run 1: started_at \S+, model model-a, url http://127.0.0.1:8000/v1, levels 1, 700 request", err)
    assert re.search(r"run 2: .*model model-b, url http://127.0.0.1:9/v1, levels 1, 700 request", err)
    assert "Traceback" not in err
    rc, rep, _ = report_json(capsys, str(rec), "--run", "1")
    assert rc == 0 and rep["measured"]["window"]["n"] == 700 and rep["header"]["target"]["model"] == "model-a"
    rc, rep, _ = report_json(capsys, str(rec), "--run", "2")
    assert rc == 1 and rep["measured"]["window"]["n"] == 700 and rep["header"]["target"]["model"] == "model-b"
    rc, _, err = report_json(capsys, str(rec), "--run", "3")
    assert rc == 2 and "--run 3: the file holds 2 runs" in err


def test_run_n_keeps_the_files_own_line_numbers(tmp_path, capsys):
    a, b = run_lines(n=5, prefix="a"), run_lines(n=5, prefix="b", t0=T0 + 100)
    text = "".join(json.dumps(x) + "\n" for x in a) + "".join(json.dumps(x) + "\n" for x in b[:3])
    text += "{not json\n" + "".join(json.dumps(x) + "\n" for x in b[3:])
    rec = tmp_path / "f.jsonl"
    rec.write_text(text)
    bad_line = len(a) + 4
    rc, rep, err = report_json(capsys, str(rec), "--run", "2")
    assert rc == 3 and rep["measured"]["window"]["n"] == 5
    assert f"{rec}:{bad_line}:" in err or f"line {bad_line}" in err, err
    rc, rep, err = report_json(capsys, str(rec), "--run", "1")
    assert rep["input_problems"]["malformed"] == 0 and "not json" not in err.lower()  # run 2's bad line is not run 1's


def test_a_header_less_prefix_with_requests_is_a_run_of_its_own(tmp_path, capsys):
    rec = write(tmp_path / "p.jsonl", run_lines(n=5, header=False, prefix="p"), run_lines(n=7, t0=T0 + 100))
    rc, _, err = report_json(capsys, str(rec))
    assert rc == 2 and "run 1: no header" in err and "5 request records" in err and "7 request records" in err
    rc, rep, _ = report_json(capsys, str(rec), "--run", "2")
    assert rep["measured"]["window"]["n"] == 7
    # a prefix without requests (here a bad line) belongs to the first header's run: one run, no refusal
    rec2 = tmp_path / "q.jsonl"
    rec2.write_text("{oops\n" + "".join(json.dumps(x) + "\n" for x in run_lines(n=7)))
    rc, rep, _ = report_json(capsys, str(rec2))
    assert rc == 3 and rep["measured"]["window"]["n"] == 7 and rep["input_problems"]["malformed"] == 1


def test_compare_and_replay_refuse_a_file_of_several_runs(tmp_path, capsys):
    rec = write(tmp_path / "two.jsonl", run_lines(n=30, prefix="a"), run_lines(n=30, prefix="b", t0=T0 + 100))
    one = write(tmp_path / "one.jsonl", run_lines(n=30, prefix="c"))
    assert main(["compare", str(rec), str(one)]) == 2
    assert "holds 2 runs" in capsys.readouterr().err
    assert main(["compare", str(rec), str(one), "--base-run", "2", "--json"]) == 3  # 30 vs 30: not enough evidence
    res = json.loads(capsys.readouterr().out)
    assert res["levels"][0]["base"]["n"] == 30
    assert main(["replay", str(rec), "--max-speed"]) == 2
    err = capsys.readouterr().err
    assert "holds 2 runs" in err and "run 2:" in err


def test_run_splitter_keeps_one_run_and_counts_all():
    from tui.core.records import RequestRecord, RunHeader

    def req(i: int) -> RequestRecord:
        return RequestRecord(str(i), T0 + i, T0 + i + 1, True, T0 + i, level=2.0)

    items = [RunHeader({"run_id": "a"}), req(1), req(2), RunHeader({"run_id": "b"}), req(3)]
    for pick, ids in ((1, ["1", "2"]), (2, ["3"])):
        sp = RunSplitter(pick)
        kept = sp.feed(items[:2]) + sp.feed(items[2:])
        assert [x.id for x in kept if isinstance(x, RequestRecord)] == ids
        assert [r.requests for r in sp.runs] == [2, 1] and sp.runs[1].levels == {2.0}
    sp = RunSplitter(None)
    assert sp.feed(items) == items[:3]  # nothing of run 2 reaches the verdict
    with pytest.raises(ValueError, match="holds 2 runs"):
        sp.check("f")


def test_accept_counts_a_file_given_twice_once(tmp_path, capsys):
    """Before: `accept --records A A` said "2 rounds combined" on one run's evidence."""
    rec = write(tmp_path / "a.jsonl", run_lines(n=40))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(rec.read_bytes())
    link = tmp_path / "link.jsonl"
    link.symlink_to(rec)
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), str(rec), str(copy), str(link))
    out = capsys.readouterr().out
    assert doc["inputs"]["records"] == [str(rec)]
    assert doc["measured"]["judged"]["rounds"] == 1 and "rounds combined" not in doc["measured"]["reason"]
    assert f"{rec} given twice (same path as {rec}), counted once" in out
    assert f"{copy} given twice (identical content as {rec}), counted once" in out
    assert f"{link} given twice" in out and len(doc["inputs"]["notes"]) == 3


def test_accept_counts_the_same_run_id_once(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", run_lines(n=40, run_id="r-1"))
    b = write(tmp_path / "b.jsonl", run_lines(n=40, run_id="r-1")[:-1])  # a different file, the same run id
    rc, doc, _, _ = accept(tmp_path, "--records", str(a), str(b))
    assert doc["inputs"]["records"] == [str(a)]
    assert "the same run as" in capsys.readouterr().out
    assert run_identity({"started_at": 1.0, "target": {"url": "u", "model": "m"}}) == "started_at 1.0 url u model m"


def test_accept_refuses_files_of_different_models_unless_model_picks(tmp_path, capsys):
    """Before: a second file of another model and URL extended "ready" to its level."""
    a = write(tmp_path / "a.jsonl", run_lines(n=40, model="small", prefix="a"))
    b = write(tmp_path / "b.jsonl", run_lines(n=40, model="big", url="http://127.0.0.1:9/v1", level=8, prefix="b",
                                              t0=T0 + 5000))
    rc, doc, _, _ = accept(tmp_path, "--records", str(a), str(b))
    err = capsys.readouterr().err
    assert rc == 2 and not doc
    assert "different models" in err and f"{a}: model small" in err and f"{b}: model big" in err
    rc, doc, _, _ = accept(tmp_path, "--records", str(a), str(b), "--model", "small")
    assert doc["inputs"]["records"] == [str(a)] and doc["measured"]["judged"]["level"] == 1
    assert f"{b} left out: model big, not small" in capsys.readouterr().out
    c = write(tmp_path / "c.jsonl", run_lines(n=40, prefix="c", t0=T0 + 9000))
    d = write(tmp_path / "d.jsonl", run_lines(n=40, url="http://10.0.0.1:1/v1", prefix="d", t0=T0 + 9900))
    rc, doc, _, _ = accept(tmp_path, "--records", str(c), str(d), "--model", "test-model")
    err = capsys.readouterr().err
    assert rc == 2 and "different targets" in err  # one model at two URLs: --model cannot make them one target


# ------------------------------------------------------------------ finding 7: synthetic and weakened evidence


def test_synthetic_never_exits_0(tmp_path, capsys):
    """Before: `report sample_logs/seed.jsonl --min-window-minutes 0 --target 0.01` was PASS, exit 0; `compare`
    on a synthetic file NOT WORSE, exit 0. (A target below 0.5 is bad usage since issue 35: 0.5 here.)"""
    assert main(["report", "--details", str(sample_path("seed.jsonl")), "--target", "0.01"]) == 2  # issue 35: bad usage
    capsys.readouterr()
    syn = write(tmp_path / "syn.jsonl", run_lines(synthetic=True, prefix="s"))
    rc = main(["report", "--details", str(syn), "--min-window-minutes", "0", "--target", "0.5"])
    cap = capsys.readouterr()
    assert rc == 3
    assert "SYNTHETIC" in cap.err and "never exits 0" in cap.err
    assert "verdict=PASS" in cap.out and "never exits 0" in cap.out  # the verdict is shown, the exit says why
    syn = write(tmp_path / "syn.jsonl", run_lines(synthetic=True, prefix="s"))
    syn2 = write(tmp_path / "syn2.jsonl", run_lines(synthetic=True, prefix="t", t0=T0 + 5000, gap=1.001))
    real = write(tmp_path / "real.jsonl", run_lines(prefix="r"))
    real2 = write(tmp_path / "real2.jsonl", run_lines(prefix="q", t0=T0 + 5000, gap=1.001))
    assert main(["compare", str(real), str(real2), "--json"]) == 0  # the control: two real runs, NOT WORSE
    assert json.loads(capsys.readouterr().out)["verdict"] == "NOT WORSE"
    rc = main(["compare", str(syn), str(syn2)])
    cap = capsys.readouterr()
    assert rc == 3 and "NOT WORSE (SYNTHETIC input: never exits 0)" in cap.out and "never exits 0" in cap.err
    bad = write(tmp_path / "bad.jsonl", run_lines(synthetic=True, fail_every=2, prefix="f"))
    assert main(["report", "--details", str(bad)]) == 1  # FAIL is still FAIL


def test_synthetic_exit_helper():
    from tui.core.exitcodes import synthetic_exit

    assert synthetic_exit(0, True)[0] == 3 and synthetic_exit(1, True) == (1, None)
    assert synthetic_exit(3, True) == (3, None) and synthetic_exit(0, False) == (0, None)


def test_weakened_settings_are_named_and_marked(tmp_path, capsys):
    rec = write(tmp_path / "short.jsonl", run_lines(n=40, gap=0.1))  # 4 s of data: PASS only on weak settings
    rc = main(["report", "--details", str(rec), "--min-window-minutes", "0", "--alpha", "0.5", "--target", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0  # a quick check may still PASS ...
    assert "verdict=PASS (not acceptance-grade: window 0 min < 10 min, target 0.5 < 0.9, alpha 0.5 > 0.05)" in out
    assert "[settings not default: target 0.5, alpha 0.5, window 0 min]" in out


def test_accept_never_says_ready_on_weakened_settings(tmp_path, capsys):
    """Before: `accept ... --target 0.5 --alpha 0.5 --min-window-minutes 0 --min-requests 1` said "ready" on 20
    requests in 4 s."""
    rec = write(tmp_path / "short.jsonl", run_lines(n=20, gap=0.2))
    q = lc_quality(tmp_path / "q.json")
    rc, doc, md, _ = accept(tmp_path, "--records", str(rec), "--quality", str(q), "--target", "0.5", "--alpha",
                            "0.5", "--min-window-minutes", "0", "--min-requests", "1", *BUDGET)
    out = capsys.readouterr().out
    c = doc["conclusion"]
    assert doc["measured"]["state"] == "PASS" and doc["quality"]["state"] == "PASS"
    assert rc == 3 and c["ready_for_traffic"] is False and "NOT ready" in out
    assert c["not_acceptance_grade"] == ["window 0 min < 10 min", "target 0.5 < 0.9", "alpha 0.5 > 0.05",
                                         "min requests 1 < 3 (what the test needs)"]
    assert "[settings not default: target 0.5, alpha 0.5, window 0 min, min requests 1]" in out
    assert any(line.startswith("Settings: not acceptance-grade") for line in c["missing_or_failed"])


def test_acceptance_grade_floors():
    """Issue 35, "Floors": a window of at least the default 10 min, a target of at least 0.9, alpha at most the
    default 0.05 (before: alpha 0.1 and a 1-minute window were the floors, and the target had none)."""
    assert acceptance_grade(MonitorConfig()) == [] and changed_settings(MonitorConfig()) == []
    assert acceptance_grade(MonitorConfig(alpha=ALPHA_FLOOR)) == [] and ALPHA_FLOOR == 0.05
    assert acceptance_grade(MonitorConfig(alpha=0.051)) == ["alpha 0.051 > 0.05"]
    assert acceptance_grade(MonitorConfig(min_window_s=MIN_WINDOW_FLOOR_S)) == [] and MIN_WINDOW_FLOOR_S == 600
    assert acceptance_grade(MonitorConfig(min_window_s=599.4)) == ["window 9.99 min < 10 min"]
    assert acceptance_grade(MonitorConfig(target=0.9)) == []
    assert acceptance_grade(MonitorConfig(target=0.89)) == ["target 0.89 < 0.9"]
    assert changed_settings(MonitorConfig(slos=Slos(ttft_ms=500))) == ["SLO 500 ms"]


# ------------------------------------------------------------------ finding 8: quality on its own word


def test_accept_applies_its_own_quality_policy_not_the_files(tmp_path):
    """Before: a 3-case file with margin 0.9 and alpha 0.5 inside it gave "ready"."""
    rec = write(tmp_path / "run.jsonl", run_lines())
    weak = lc_quality(tmp_path / "weak.json", n=3, lc=3, settings={"margin": 0.9, "alpha": 0.5, "min_cases": 1})
    assert json.loads(weak.read_text())["verdict"]["state"] == "PASS"  # the file's own word
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(weak), *BUDGET)
    assert rc == 3 and doc["quality"]["state"] == "NO_EVIDENCE" and not doc["conclusion"]["ready_for_traffic"]
    assert any("are not used" in n for n in doc["quality"]["notes"])
    assert doc["quality"]["policy"] == {"margin": 0.05, "alpha": 0.05, "min_cases": 20}
    # accept's own flags may weaken it on purpose (same defaults as `quality`)
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(weak), "--quality-margin", "0.9",
                           "--quality-alpha", "0.5", "--quality-min-cases", "1", *BUDGET)
    assert doc["quality"]["state"] == "PASS"


@pytest.mark.parametrize("kw, why", [
    ({"lc": 0}, "no long-context case in the set"),
    ({"model": "other-model"}, "quality was run against the served model /models/other-model.gguf, the load "
                               "against /models/test-model.gguf"),
    ({"same_server": True}, "candidate and baseline are the same configuration by their servers' own facts"),
])
def test_quality_short_of_the_policy_is_not_acceptance_grade(tmp_path, kw, why):
    """Before: no long-context case, another model or candidate == baseline was at most a note beside "ready"."""
    rec = write(tmp_path / "run.jsonl", run_lines())
    q = lc_quality(tmp_path / "q.json", **kw)
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(q), *BUDGET)
    assert doc["quality"]["state"] == "PASS"
    assert rc == 3 and doc["conclusion"]["ready_for_traffic"] is False
    assert any(why in p for p in doc["quality"]["not_acceptance_grade"]), doc["quality"]["not_acceptance_grade"]
    assert any(ln.startswith("Quality: not acceptance-grade (") and why in ln
               for ln in doc["conclusion"]["missing_or_failed"])


# ------------------------------------------------------------------ finding 9: advice (accept side)


def test_accept_names_the_judged_levels_own_gap(tmp_path, capsys):
    """Before: on the (first) bundled run accept named level 1's gap ("need 22 more requests") while judging level 8."""
    default = str(TESTS / "fixtures" / "gemma_sweep_short.jsonl")
    rc, rep, _ = report_json(capsys, default)
    missing = rep["measured"]["verdict"]["missing"]
    assert rep["measured"]["level"] == 8 and missing
    rc, doc, _, _ = accept(tmp_path, "--records", default)
    assert doc["measured"]["judged"]["level"] == 8
    measured_line = next(ln for ln in doc["conclusion"]["missing_or_failed"] if ln.startswith("Measured:"))
    assert f"({missing})" in measured_line, (measured_line, missing)
    level1 = next(r["missing"] for r in doc["measured"]["levels"] if r["level"] == 1)
    assert level1 != missing and level1 not in measured_line


def test_import_of_a_synthetic_source_never_exits_0(tmp_path, capsys):
    """`import` of a file labelled synthetic converts it (the records are written) and exits 3, saying why."""
    root = TESTS / "fixtures" / "imports"
    syn = root / "from_source" / "aiperf" / "profile_export_from_source.jsonl"
    out = tmp_path / "run.jsonl"
    assert main(["import", str(syn), "--out", str(out)]) == 3
    assert "never exits 0" in capsys.readouterr().err and out.exists()


def test_replay_console_exit_of_synthetic_data_is_never_0(tmp_path, monkeypatch):
    """The console's own exit code (the verdict on screen) passes through the same rule."""
    from tui.cli import console as R
    from tui.core.records import RunHeader

    class FakeApp:
        def run(self) -> int:
            return 0  # the console closed on PASS

    monkeypatch.setattr(R, "build_app", lambda *a, **k: FakeApp())

    class Src:
        label = "syn"

        def stop(self) -> None:
            pass

    from tui.core.monitor import MonitorConfig
    from tui.sources.base import MonitorSink

    seen: dict = {}
    real_snapshot = MonitorSink.snapshot

    def snapshot(self):  # the sink as the console left it: a synthetic header was read
        if not seen:
            self.monitor.add(RunHeader({"type": "run", "schema_version": 1, "synthetic": True}))
            seen["x"] = 1
        return real_snapshot(self)

    monkeypatch.setattr(MonitorSink, "snapshot", snapshot)
    assert R.open_console(Src(), R.ConsoleFlags(), None, MonitorConfig()) == 3
