"""Issue 35, finding 1 ("the reader's defaults replace the run's own settings") and finding 9 ("weak settings pass as
acceptance-grade"), through the commands.

Before (1a6ea7a): `run --slo-ttft-ms 50 --target 0.99 --min-window-minutes 1` FAILed while `report` of the same file
judged at 1000 ms / 95% / 10 min and said PASS; `accept` said "measured: PASS"; a header whose `slo` block said
300 ms / 0.99 was judged at the defaults; `--min-window-minutes 1` gave a plan that "stands on the evidence" and
`--target 0.01` had no floor. Now every reader judges a servewatch file at its run's settings (`verdict_settings`,
else an older `slo` block for what it states), a flag that differs re-judges and says so, and the exit code is the
re-judged verdict only when at least as strict on every setting (else 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import evidence_files as E
from tests.support.fault_server import FaultServer
from tui.cli import main
from tui.core.slos import Slos
from tui.core.slos import header_block as slo_block
from tui.core.verdict_settings import VerdictSettings, header_block

#: what the run of finding 1 was judged at
RUN50 = VerdictSettings(slos=Slos(ttft_ms=50.0), target=0.99, min_window_s=60.0)


def _file(tmp: Path, name: str, vs: VerdictSettings | None = None, slo: dict | None = None, ttft: float = 0.2,
          run_id: str | None = None) -> str:
    """An 11-minute closed-loop run at concurrency 4 (TTFT ``ttft`` s, every request complete), its header stating
    ``vs`` (verdict_settings and the matching slo block, as `run` writes them) or an older ``slo`` block alone."""
    recs = E.honest_closed(level=4, seconds=660.0, ttft=ttft)
    hdr = recs[0]
    hdr["run_id"] = run_id or f"run-{name}"
    if vs is not None:
        hdr["verdict_settings"] = header_block(vs)
        hdr["slo"] = slo_block(vs.slos, vs.target)
    if slo is not None:
        hdr["slo"] = slo
    return str(E.write(tmp / name, recs))


def _report(capsys, *argv) -> tuple[int, dict, str]:
    rc = main(["report", "--details", *argv, "--json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out), cap.err


def _text(capsys, *argv) -> tuple[int, str]:
    rc = main(["report", "--details", *argv])
    return rc, capsys.readouterr().out


# ------------------------------------------------------------------ finding 1


def test_a_real_run_is_judged_by_report_at_the_settings_it_was_run_at(tmp_path, capsys):
    """`run` against the in-test server (TTFT >= 150 ms) at a 50 ms SLO FAILs; its header carries verdict_settings;
    `report` of the file, with no flag, FAILs too (before: judged at the defaults' 10-min window, exit 3), and a
    1000 ms flag re-judges it, says so, and exits 3 (weaker), never 0."""
    rec = tmp_path / "run.jsonl"
    judge = ["--slo-ttft-ms", "50", "--target", "0.99", "--min-window-minutes", "0"]
    with FaultServer() as fs:
        rc = main(["run", "--details", "--url", fs.url("ok", tokens=2, first_delay=0.15), "--model", "m", "--concurrency", "2",
                   "--requests", "24", "--no-gpu", "--record", str(rec), *judge])
    out = capsys.readouterr().out
    assert rc == 1 and "verdict=FAIL" in out, out
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    hdr = lines[0]
    vs = hdr["verdict_settings"]
    ends = [x for x in lines if x.get("type") == "step" and x.get("event") == "end"]
    assert ends and all(x["verdict_settings"] == vs for x in ends)  # each step states what it was judged at
    assert (vs["ttft_ms"], vs["target"], vs["min_window_s"], vs["alpha"], vs["min_requests"], vs["ttft_of"]) == \
        (50.0, 0.99, 0.0, 0.05, None, "answer")
    rc, rep, _ = _report(capsys, str(rec))
    assert rc == 1 and rep["measured"]["verdict"]["state"] == "FAIL"
    assert rep["slo"]["ttft_ms"] == 50.0 and rep["slo"]["target"] == 0.99
    assert rep["verdict_settings"]["origin"] == "verdict_settings" and not rep["verdict_settings"]["rejudged"]
    rc, out = _text(capsys, str(rec), "--slo-ttft-ms", "1000")
    assert rc == 3
    assert "re-judged at TTFT <= 1000 ms (the flags given); the run was judged at TTFT <= 50 ms: FAIL" in out
    assert "re-judged at weaker settings than the run's (TTFT 1000 ms > 50 ms): exit 3" in out
    head = out.split("Budget")[0]  # the header block, before the first section
    assert "re-judged at TTFT <= 1000 ms" in head
    capsys.readouterr()
    rc = main(["accept", "--records", str(rec), "--out", str(tmp_path / "acc"), "--no-html"])
    out = capsys.readouterr().out
    assert rc == 1 and "measured: FAIL" in out and "TTFT <= 50 ms" in out


def test_report_and_accept_judge_a_file_at_its_own_settings_not_the_defaults(tmp_path, capsys):
    """The 11-minute file of a run at 50 ms / 0.99 / 1 min (TTFT 200 ms): FAIL at its settings. Before: `report`
    said PASS, exit 0, `accept` "measured: PASS", neither mentioning 50 ms."""
    f = _file(tmp_path, "run50.jsonl", RUN50)
    rc, rep, _ = _report(capsys, f)
    assert rc == 1 and rep["measured"]["verdict"]["state"] == "FAIL"
    assert rep["verdict_settings"]["run"]["ttft_ms"] == 50.0 and rep["verdict_settings"]["judged_at"]["target"] == 0.99
    rc, out = _text(capsys, f)
    assert rc == 1 and "judged at TTFT <= 50 ms (answer), target 0.99, window 1 min" in out
    assert "(the run's own, its verdict_settings)" in out
    rc = main(["accept", "--records", f, "--out", str(tmp_path / "acc"), "--no-html", "--params", "7e9",
               "--gpu-gib", "24"])
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "acc" / "acceptance.json").read_text())
    assert rc == 1 and "measured: FAIL" in out and "TTFT <= 50 ms" in out
    assert doc["slo"]["ttft_ms"] == 50.0 and doc["slo"]["target"] == 0.99
    assert doc["verdict_settings"][0]["origin"] == "verdict_settings"
    md = (tmp_path / "acc" / "acceptance.md").read_text()
    assert "judged at TTFT <= 50 ms (answer), target 0.99" in md


def test_an_older_slo_block_is_judged_at_what_it_states(tmp_path, capsys):
    """A header whose slo block says 300 ms / 0.99 (no verdict_settings): judged at 300 ms and 0.99 (TTFT 400 ms:
    FAIL), the window and alpha at the flags, said. Before: judged at the defaults (1000 ms, 0.95), PASS, silent."""
    f = _file(tmp_path, "old.jsonl", slo={"ttft_ms": 300.0, "target": 0.99}, ttft=0.4)
    rc, out = _text(capsys, f)
    assert rc == 1 and "verdict=FAIL" in out
    assert "the run's slo block states TTFT <= 300 ms (answer), target 0.99" in out
    assert "window, min requests, alpha, required level: not stated there, the flags given" in out
    rc, rep, _ = _report(capsys, f, "--slo-ttft-ms", "500")
    assert rc == 3 and rep["verdict_settings"]["weaker"] and rep["verdict_settings"]["run_verdict"] == "FAIL"
    assert rep["measured"]["verdict"]["state"] == "PASS" and rep["exit"]["settings"].startswith("re-judged at weaker")


def test_a_file_with_no_settings_is_judged_at_the_flags_said_so(tmp_path, capsys):
    f = _file(tmp_path, "bare.jsonl")
    rc, out = _text(capsys, f, "--slo-ttft-ms", "100")
    assert rc == 1 and "judged at TTFT <= 100 ms (answer), target 0.95, window 10 min" in out
    assert "the flags given (the file records no verdict settings" in out
    rc, rep, _ = _report(capsys, f, "--slo-ttft-ms", "5000")  # no run's settings to weaken: the verdict's own code
    assert rc == 0 and rep["verdict_settings"]["origin"] == "none" and not rep["verdict_settings"]["weaker"]


# ------------------------------------------------------------------ the exit rule, through report

PASSING = VerdictSettings(slos=Slos(ttft_ms=1000.0), target=0.95, min_window_s=600.0, min_requests=500)


@pytest.mark.parametrize("flags, weaker", [
    ((), False),
    (("--slo-ttft-ms", "1000"), False),  # equal: no re-judgement
    (("--slo-ttft-ms", "500"), False),
    (("--slo-ttft-ms", "1500"), True),
    (("--slo-ttft-ms", "off"), True),
    (("--slo-e2e-ms", "9000"), False),  # switched on
    (("--ttft-of", "any"), True),
    (("--target", "0.99"), False),
    (("--target", "0.9"), True),
    (("--min-window-minutes", "10.5"), False),
    (("--min-window-minutes", "5"), True),
    (("--min-requests", "1000"), False),
    (("--min-requests", "100"), True),
    (("--alpha", "0.01"), False),
    (("--alpha", "0.1"), True),
    (("--required-level", "4"), False),
])
def test_the_exit_code_is_the_re_judged_verdict_only_when_at_least_as_strict(tmp_path, capsys, flags, weaker):
    f = _file(tmp_path, "pass.jsonl", PASSING)
    rc, rep, _ = _report(capsys, f, *flags)
    vs = rep["verdict_settings"]
    assert vs["weaker"] is weaker
    state = rep["measured"]["verdict"]["state"]
    own = {"PASS": 0, "FAIL": 1}.get(state, 3)
    assert rc == (3 if weaker else own), (flags, state, vs["lines"])
    if flags and flags[0] != "--required-level" and flags != ("--slo-ttft-ms", "1000"):
        assert vs["rejudged"] and vs["run_verdict"] == "PASS" and len(vs["changes"]) == 1
    if weaker:
        assert rep["exit"]["settings"].startswith("re-judged at weaker settings than the run's")


# ------------------------------------------------------------------ files of different settings meet


def test_compare_judges_both_runs_at_one_stated_setting(tmp_path, capsys):
    """Two runs judged at 50 ms and 1000 ms: both are compared at 50 ms (the strictest), said for each side; a
    weaker flag exits 3."""
    a = _file(tmp_path, "a.jsonl", RUN50, ttft=0.03)
    b = _file(tmp_path, "b.jsonl", PASSING, ttft=0.03)
    rc = main(["compare", a, b, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict_settings"]["judged_at"] == "TTFT <= 50 ms (answer)"
    assert doc["verdict_settings"]["candidate"]["changes"][0]["by"] == "common"
    assert not doc["verdict_settings"]["base"]["rejudged"] and rc == doc["exit_code"]
    main(["compare", a, b])
    md = capsys.readouterr().out
    assert "- candidate re-judged at TTFT <= 50 ms (the one setting of the files judged together)" in md
    rc = main(["compare", a, b, "--slo-ttft-ms", "2000", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 3 and doc["exit_code"] == 3 and "re-judged at weaker settings" in doc["settings_exit"]


def test_accept_of_files_of_different_settings_judges_all_at_the_strictest(tmp_path, capsys):
    a = _file(tmp_path, "a.jsonl", PASSING)
    b = _file(tmp_path, "b.jsonl", VerdictSettings(slos=Slos(ttft_ms=100.0), min_window_s=600.0))
    rc = main(["accept", "--records", a, b, "--out", str(tmp_path / "acc"), "--no-html"])
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "acc" / "acceptance.json").read_text())
    assert doc["slo"]["ttft_ms"] == 100.0 and doc["measured"]["state"] == "FAIL" and rc == 1
    assert f"{a}: re-judged at TTFT <= 100 ms, min requests 500 (the one setting of the files judged together)" \
        not in out  # min requests 500 is a's own: b is judged at it
    assert f"{a}: re-judged at TTFT <= 100 ms (the one setting of the files judged together)" in out
    assert f"{b}: re-judged at min requests 500 (the one setting of the files judged together)" in out


# ------------------------------------------------------------------ finding 9: floors


def test_target_below_one_half_is_bad_usage_everywhere(tmp_path, capsys):
    f = _file(tmp_path, "r.jsonl")
    for argv in (["report", "--details", f], ["replay", f], ["accept", "--records", f], ["plan", "--records", f, "--peak-rate",
                 "1"], ["run", "--details", "--url", "http://127.0.0.1:9", "--concurrency", "1"],
                 ["sweep", "--url", "http://127.0.0.1:9"], ["live", "--url", "http://127.0.0.1:9", "--concurrency", "1"],
                 ["watch", "--metrics-url", "http://127.0.0.1:9/metrics"]):
        rc = main([*argv, "--target", "0.49"])
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "at least 0.5" in err, (argv, err)
    assert main(["report", "--details", f, "--target", "0.5", "--min-window-minutes", "0"]) in (0, 1, 3)


def test_accept_and_plan_need_acceptance_grade_evidence(tmp_path, capsys):
    """A run PASSing at a 1-minute window: `report` PASSes (exit 0, marked); `accept` is not "ready" and `plan`
    does not "stand on the evidence" (exit 3, "not acceptance-grade: window 1 min < 10 min"). Before: the
    1-minute floor made both acceptance-grade."""
    f = _file(tmp_path, "one.jsonl", VerdictSettings(min_window_s=60.0))
    rc, out = _text(capsys, f)
    assert rc == 0 and "verdict=PASS (not acceptance-grade: window 1 min < 10 min)" in out
    rc = main(["accept", "--records", f, "--out", str(tmp_path / "acc"), "--no-html", "--params", "7e9",
               "--gpu-gib", "24"])
    out = capsys.readouterr().out
    assert rc == 3 and "NOT ready" in out and "not acceptance-grade (window 1 min < 10 min)" in out
    assert main(["report", "--details", f, "--min-window-minutes", "10"]) == 0  # the same file at the floor: acceptance-grade
    capsys.readouterr()
    sweep = _open_sweep(tmp_path)
    rc = main(["plan", "--records", str(sweep), "--peak-rate", "3", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["exit"]["why"] == "the plan stands on the evidence"  # the control: 10-min evidence
    rc = main(["plan", "--records", str(sweep), "--peak-rate", "3", "--min-window-minutes", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 3 and "not acceptance-grade: window 1 min < 10 min" in doc["exit"]["why"]
    assert "stands on the evidence" not in json.dumps(doc)
    for flags, why in ((("--target", "0.85"), "target 0.85 < 0.9"), (("--alpha", "0.1"), "alpha 0.1 > 0.05")):
        rc = main(["plan", "--records", str(sweep), "--peak-rate", "3", *flags, "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 3 and why in doc["exit"]["why"], doc["exit"]


def _open_sweep(tmp: Path) -> Path:
    """An open-loop sweep at 1, 2, 4 req/s, 11 minutes a level, the last missing the SLO (tests/cli/test_plan_cli)."""
    steps = []
    t = E.T0 + 1.0
    for rate, ttft, dur in ((1.0, 0.2, 1.0), (2.0, 0.2, 1.0), (4.0, 2.0, 3.0)):
        reqs = E.open_step(rate, t, 660.0, ttft=ttft, dur=dur)
        start, end = E.step_records(reqs, rate, "open")
        steps.append((start, reqs, end))
        t += 670.0
    hdr = E.header("open", (1.0, 2.0, 4.0), arrival="constant", input_tokens={"min": 100, "max": 100},
                   output_tokens={"min": 32, "max": 32}, ignore_eos=True)
    hdr["run_id"] = "sweep"
    return E.write(tmp / "sweep.jsonl", E.assemble(hdr, steps))


def test_the_runs_required_level_is_judged_and_one_not_in_the_file_never_exits_0(tmp_path, capsys):
    f = _file(tmp_path, "lv4.jsonl", VerdictSettings(required_level=4.0))
    rc, rep, _ = _report(capsys, f)
    assert rc == 0 and rep["judged"]["level"] == 4 and rep["verdict_settings"]["judged_at"]["required_level"] == 4
    f = _file(tmp_path, "lv8.jsonl", VerdictSettings(required_level=8.0))  # the file holds level 4 only
    rc, rep, _ = _report(capsys, f)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "PASS"
    assert rep["exit"]["settings"].startswith("the run's required level 8 is not in the file")
    rc, out = _text(capsys, f)
    assert rc == 3 and "the run's required level 8 is not in the file" in out
    assert main(["report", "--details", f, "--required-level", "16"]) == 2  # a flag naming a level not there: bad usage
    capsys.readouterr()
    rc = main(["accept", "--records", f, "--out", str(tmp_path / "acc"), "--no-html", "--params", "7e9",
               "--gpu-gib", "24"])
    out = capsys.readouterr().out
    assert rc == 3 and "the runs' required level 8 is not in the files" in out and "NOT ready" in out
