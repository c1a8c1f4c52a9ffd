"""`servewatch plan`: the JSON shape, the exit codes (3 for SYNTHETIC or not-acceptance-grade evidence), bad usage
(one line, exit 2), Little's law on closed-loop evidence, the anchor rule's numbers and a trace's schedule.

The record files are built in memory (tests/support/evidence_files.py) with known verdicts: an open-loop sweep at
1, 2 and 4 req/s whose first two levels meet the 1000 ms TTFT SLO and whose third does not, 11 minutes a level
(the default 10-minute window: acceptance-grade), so the capacity bracket is [2, 4] req/s per replica."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.support import evidence_files as E
from tests.support.paths import REPO
from tui.cli import main

STEP_S = 660.0


def _open_sweep(tmp: Path, name: str = "open.jsonl", synthetic: bool = False, url: str | None = None,
                output: int = 32) -> Path:
    steps = []
    t = E.T0 + 1.0
    for rate, ttft, dur in ((1.0, 0.2, 1.0), (2.0, 0.2, 1.0), (4.0, 2.0, 3.0)):
        reqs = E.open_step(rate, t, STEP_S, ttft=ttft, dur=dur)
        start, end = E.step_records(reqs, rate, "open")
        steps.append((start, reqs, end))
        t += STEP_S + 10.0
    hdr = E.header("open", (1.0, 2.0, 4.0), arrival="constant", input_tokens={"min": 100, "max": 100},
                   output_tokens={"min": output, "max": output}, ignore_eos=True)
    hdr["synthetic"] = synthetic
    hdr["run_id"] = f"test-{name}"  # one run per file (a copy of one run is counted once, like accept)
    if url:
        hdr["target"]["url"] = url
    return E.write(tmp / name, E.assemble(hdr, steps))


def _closed_sweep(tmp: Path) -> Path:
    """Concurrency 1, 2, 4, every request 2 s long: throughput L / 2 s (Little's law); 4 misses the SLO."""
    steps = []
    t = E.T0 + 1.0
    for level, ttft in ((1, 0.2), (2, 0.2), (4, 1.5)):
        reqs = E.closed_step(level, t, STEP_S, ttft=ttft, dur=2.0)
        start, end = E.step_records(reqs, level, "closed")
        steps.append((start, reqs, end))
        t += STEP_S + 10.0
    hdr = E.header("closed", (1, 2, 4), input_tokens={"min": 100, "max": 100}, output_tokens={"min": 32, "max": 32})
    return E.write(tmp / "closed.jsonl", E.assemble(hdr, steps))


def _azure(tmp: Path, rates: list[tuple[float, float]]) -> Path:
    """An Azure-format trace: (seconds, req/s) segments of evenly spaced arrivals."""
    t0 = datetime(2026, 1, 1)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    t = 0.0
    for seconds, rate in rates:
        n = int(seconds * rate)
        for i in range(n):
            ts = t0 + timedelta(seconds=t + i / rate)
            lines.append(f"{ts.strftime('%Y-%m-%d %H:%M:%S.%f')},100,32")
        t += seconds
    p = tmp / "trace.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def _plan(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    return {"open": _open_sweep(d), "closed": _closed_sweep(d), "synthetic": _open_sweep(d, "syn.jsonl", True),
            "other": _open_sweep(d, "other.jsonl", url="http://127.0.0.1:10"),
            "longer": _open_sweep(d, "longer.jsonl", output=256), "dir": d}


def test_json_shape_and_the_numbers(sweeps, capsys):
    code, out, _ = _plan(capsys, "--records", str(sweeps["open"]), "--peak-rate", "10", "--gpus", "2",
                         "--gpu-hour-usd", "3", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["exit"]["code"] == 0, doc["exit"]
    c = doc["capacity_per_replica"]
    assert (c["lo_rate"], c["hi_rate"]) == (2.0, 4.0) and c["lo"]["state"] == "PASS" and c["hi"]["state"] == "FAIL"
    assert doc["replicas_needed"] == {"low": 3, "high": 5}  # ceil(10 / 4), ceil(10 / 2)
    assert doc["spare"] == 1 and doc["replicas_total"] == {"low": 4, "high": 6}
    assert doc["gpus_per_replica"] == 2 and doc["gpus_total"] == {"low": 8, "high": 12}
    cost = doc["cost"]
    assert cost["per_hour_usd"] == {"low": 24.0, "high": 36.0}
    assert cost["per_month_usd"] == {"low": 24.0 * 730, "high": 36.0 * 730} and cost["hours_per_month"] == 730
    # 10 req/s x 32 output tokens x 3600 s = 1.152 M tokens an hour
    assert cost["per_1m_output_tokens_usd"]["high"] == pytest.approx(36.0 / 1.152, rel=1e-3)
    assert doc["memory_only_candidate"]["per_replica"] == "unknown"
    assert any("even balancing" in a for a in doc["assumptions"])
    assert any("does not change with the fleet" in a for a in doc["assumptions"])
    cmd = doc["check"]["command"]
    assert cmd.startswith("servewatch run --url FLEET_URL --rate 10 ") and "--arrival constant" in cmd
    assert "--input-tokens 100 --output-tokens 32 --ignore-eos" in cmd and "--slo-ttft-ms 1000" in cmd
    assert "schedule" not in doc


def test_text_says_the_same(sweeps, capsys):
    code, out, _ = _plan(capsys, "--records", str(sweeps["open"]), "--peak-rate", "10", "--spare", "2")
    assert code == 0
    assert "replicas_needed at the peak: low 3, high 5" in out
    assert "replicas_total: low 5, high 7" in out and "N+2" in out
    assert "no --gpu-hour-usd given" in out and "$ servewatch run --url FLEET_URL --rate 10" in out


def test_anchor_rule_numbers(sweeps, capsys):
    code, out, _ = _plan(capsys, "--records", str(sweeps["open"]), "--peak-rate", "9", "--json")
    doc = json.loads(out)
    a = doc["anchor_rule"]
    # the highest throughput measured is at 4 req/s (where the SLO failed): ceil(1.2 x 9 / ~4) = 3, while the
    # SLO-judged plan needs ceil(9 / 4) = 3 to ceil(9 / 2) = 5
    assert a["at_level"] == 4.0 and a["state_there"] == "FAIL" and a["good_fraction_there"] == 0.0
    assert a["throughput_per_replica"] == pytest.approx(4.0, rel=0.02)
    assert a["replicas"] == math.ceil(1.2 * 9 / a["throughput_per_replica"]) == 3
    assert doc["replicas_needed"] == {"low": 3, "high": 5}
    assert "falls short of the 5 the evidence supports" in a["why_different"]
    assert f"{a['throughput_per_replica'] / 2.0:.2f}x" in a["why_different"]  # peak throughput / highest PASS rate


def test_closed_loop_evidence_goes_through_littles_law(sweeps, capsys):
    code, out, _ = _plan(capsys, "--records", str(sweeps["closed"]), "--peak-rate", "4.5", "--json")
    doc = json.loads(out)
    c = doc["capacity_per_replica"]
    assert c["mode"] == "closed" and "Little's law" in c["conversion"]
    # concurrency 2 of 2 s requests: 1 req/s; concurrency 4: 2 req/s
    assert c["lo"]["level"] == 2 and c["lo_rate"] == pytest.approx(1.0, rel=0.02)
    assert c["hi"]["level"] == 4 and c["hi_rate"] == pytest.approx(2.0, rel=0.02)
    assert doc["replicas_needed"] == {"low": 3, "high": 5}
    assert any("closed-loop evidence" in a for a in doc["assumptions"])
    assert any("Little's law at the lower end: concurrency 2" in n for n in c["notes"])
    # a converted rate was never judged as an arrival rate: printed, never a plan to act on
    assert code == 3 and doc["exit"]["why"].startswith("closed-loop evidence") and "--rate" in doc["exit"]["why"]


def test_synthetic_evidence_exits_3_and_still_prints(sweeps, capsys):
    code, out, err = _plan(capsys, "--records", str(sweeps["synthetic"]), "--peak-rate", "10", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["synthetic"] is True and doc["replicas_needed"] == {"low": 3, "high": 5}
    assert "SYNTHETIC" in " ".join(doc["warnings"]) and "SYNTHETIC" in doc["exit"]["why"]


def test_not_acceptance_grade_exits_3_and_still_prints(sweeps, capsys):
    code, out, _ = _plan(capsys, "--records", str(sweeps["open"]), "--peak-rate", "10", "--min-window-minutes", "0.5")
    assert code == 3
    assert "not acceptance-grade" in out and "replicas_needed at the peak" in out and "plan: exit 3" in out


def test_a_stricter_slo_re_judges_the_evidence(sweeps, capsys):
    # TTFT 200 ms everywhere below 4 req/s: an SLO of 100 ms fails every level -> exit 1, no replica count
    code, out, _ = _plan(capsys, "--records", str(sweeps["open"]), "--peak-rate", "10", "--slo-ttft-ms", "100",
                         "--json")
    doc = json.loads(out)
    assert code == 1 and doc["replicas_needed"]["high"] is None and doc["capacity_per_replica"]["lo"] is None


@pytest.mark.parametrize("args, words", [
    ([], "no demand"),
    (["--peak-rate", "3", "--trace", "x.csv"], "not both"),
])
def test_bad_usage_is_one_line(sweeps, capsys, args, words):
    code, out, err = _plan(capsys, "--records", str(sweeps["open"]), *args)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_bad_trace_is_one_line(sweeps, capsys):
    bad = sweeps["dir"] / "bad.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    code, out, err = _plan(capsys, "--records", str(sweeps["open"]), "--trace", str(bad))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "bad.csv" in err


@pytest.mark.parametrize("other, words", [("other", "different targets"), ("longer", "different workloads")])
def test_mixed_targets_or_workloads_are_refused(sweeps, capsys, other, words):
    code, out, err = _plan(capsys, "--records", str(sweeps["open"]), str(sweeps[other]), "--peak-rate", "3")
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_trace_gives_a_schedule(sweeps, capsys):
    trace = _azure(sweeps["dir"], [(60.0, 2.0), (60.0, 7.0)])
    code, out, _ = _plan(capsys, "--records", str(sweeps["open"]), "--trace", str(trace), "--demand-window-minutes",
                         "1", "--gpu-hour-usd", "1", "--json")
    doc = json.loads(out)
    assert code == 0, doc["exit"]
    s = doc["schedule"]
    # the last window ends at the last arrival (60 s - 1/7 s long)
    assert [w["arrivals"] for w in s["windows"]] == [120, 420]
    assert [w["replicas_needed"]["high"] for w in s["windows"]] == [1, 4]  # ceil(2 / 2), ceil(7.02 / 2)
    assert [w["replicas_total"] for w in s["windows"]] == [2, 5]
    assert doc["demand"]["peak_rate"] == pytest.approx(7.0, rel=0.01) and doc["replicas_total"]["high"] == 5
    assert s["cost_usd"]["schedule"] < s["cost_usd"]["static_peak"]
    assert doc["check"]["trace_command"].startswith("servewatch run --url FLEET_URL --trace ")


def test_worked_example_on_the_bundled_files(capsys):
    """docs/planning.md's example: the bundled record (closed loop) and the bundled Azure-format trace (SYNTHETIC):
    only the shape is checked, not the numbers (the bundled record will be replaced by a longer run)."""
    code, out, _ = _plan(capsys, "--records", str(REPO / "sample_logs" / "default.jsonl"), "--trace",
                         str(REPO / "sample_logs" / "traces" / "azure-synthetic.csv"), "--demand-window-minutes",
                         "0.25", "--gpu-hour-usd", "2.5", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["synthetic_demand"] is True  # the trace is labelled synthetic
    assert doc["capacity_per_replica"]["mode"] == "closed"
    assert len(doc["schedule"]["windows"]) == 4
    assert set(doc["replicas_needed"]) == {"low", "high"} and set(doc["replicas_total"]) == {"low", "high"}
    assert doc["anchor_rule"]["rule"].startswith("ceil(1.2")


def test_an_edited_record_file_is_no_plan(tmp_path, capsys):
    """A record file is a claim: one TTFT edited in the bundled run breaks its digest chain; the plan says so and
    exits 3, instead of planning (or answering "no replica count carries this demand") from an edited file."""
    lines = (REPO / "sample_logs" / "default.jsonl").read_text(encoding="utf-8").splitlines()
    for i, ln in enumerate(lines):
        d = json.loads(ln)
        if d.get("type") == "request" and d.get("level") == 4.0 and d.get("phase") == "measure":
            d["t_first_token"] = d["t_sent"] + 0.1  # a slow first token made fast
            lines[i] = json.dumps(d)
            break
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = _plan(capsys, "--records", str(edited), "--peak-rate", "5", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["exit"]["why"].startswith("the records do not support a plan: records integrity")


def test_a_copy_of_the_same_run_is_counted_once(sweeps, tmp_path, capsys):
    """A record file given twice under another name (a copy, a merge) must not double the evidence of its levels."""
    copy = tmp_path / "copy.jsonl"  # the same run, not the same bytes (a blank line added): its run id tells
    copy.write_text(sweeps["open"].read_text(encoding="utf-8") + "\n", encoding="utf-8")
    _, once, _ = _plan(capsys, "--records", str(sweeps["open"]), "--peak-rate", "10", "--json")
    code, twice, err = _plan(capsys, "--records", str(sweeps["open"]), str(copy), "--peak-rate", "10", "--json")
    a, b = json.loads(once), json.loads(twice)
    n = lambda d: [lv["n"] for lv in d["capacity_per_replica"]["levels"]]  # noqa: E731
    assert n(a) == n(b) and "counted once" in err
