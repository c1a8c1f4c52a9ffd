"""Issue 35, "Complete or not PASS" (findings 2 and 4): a servewatch load run's file must hold its planned levels and
rounds in order (or a recorded stop), well-formed step records that agree with their request records (counts,
percentiles, verdict), and its seal; otherwise no PASS and no exit 0, whatever the chain or the signature says.

Each test edits a committed honest file (sample_logs/default.jsonl: a real, chained, multi-level run that FAILs at
concurrency 4 and above) or a run written in process by the real Recorder (tests/support/load_runs.py), and fails
on the code before the change (1a6ea7a). docs/record-format.md, "What a file must hold to PASS"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.load_runs import KEY, lines_of, step_end_lines, without_chain, write_load_run
from tests.support.paths import REPO
from tui.cli import main
from tui.core import completeness
from tui.core.chain import ChainWriter, planned_of, seal_line
from tui.core.records import RecordError, parse_line

DEFAULT = REPO / "sample_logs" / "default.jsonl"


def report(capsys, path: Path, *extra: str) -> tuple[int, dict, str]:
    rc = main(["report", "--details", str(path), "--json", *extra])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if cap.out.strip() else {}), cap.err


def problems(rep: dict) -> str:
    return " | ".join(rep["evidence"]["problems"] + rep["records_integrity"]["problems"])


def rechained(lines: list[bytes], *, seal: bool = True) -> list[bytes]:
    """Every digest recomputed, as someone without a key can (the threat model's limit of an unsigned chain),
    and a fresh seal at the end."""
    out: list[bytes] = []
    w = ChainWriter(None)
    for ln in lines:
        d = json.loads(ln)
        if d.get("type") == "seal":
            continue
        if d.get("type") == "run":
            w.start()
        elif "chain" in d:
            d["chain"] = w.checkpoint()
        ln = (json.dumps(d, separators=(",", ":")) + "\n").encode()
        out.append(ln)
        w.add(ln)
    if seal:
        out.append(seal_line(w.checkpoint(), planned_of(json.loads(lines[0]))))
    return out


# ------------------------------------------------------------------ finding 2: a run cut short


def test_the_bundled_run_fails_and_says_what_it_verified(capsys):
    """The control: the honest file FAILs (exit 1) with no evidence problem; its step records agree with the
    recomputation (counts, percentiles, verdicts) and its planned levels are all there."""
    rc, rep, _ = report(capsys, DEFAULT)
    assert rc == 1 and rep["measured"]["verdict"]["state"] == "FAIL"
    assert problems(rep) == ""


@pytest.mark.parametrize("reseal", [False, True])
def test_deleting_every_line_after_an_earlier_levels_step_record_is_not_a_pass(tmp_path, capsys, reseal):
    """The run cut after concurrency 1's step end record (line 1,046): before, PASS exit 0 ("no seal: the run was cut
    short", or, resealed with a recomputed digest, "records verified, chain intact"); now the levels planned and not
    present are named and nothing PASSes."""
    ls = lines_of(DEFAULT)[:1046]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(rechained(ls) if reseal else ls))
    rc, rep, _ = report(capsys, cut)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    assert "incomplete: levels 2-32 planned, not present (1 of 6 planned steps present" in problems(rep)
    if not reseal:
        assert "incomplete: no seal" in problems(rep)
    else:
        assert rep["records_integrity"]["state"] == "intact"  # the chain proves nothing against a rechained edit...
        assert rep["records_integrity"]["summary"].startswith("digest chain intact, sealed")  # ...and says so
        assert "not authorship" in rep["records_integrity"]["summary"]
    assert rep["measured"].get("capacity") in (None, {}) or "concurrency 1" not in json.dumps(rep["measured"]["capacity"])


def test_a_signed_run_cut_at_a_checkpoint_is_not_a_pass_signed_or_not(tmp_path, capsys, monkeypatch):
    """A signed run that FAILs at concurrency 4, cut right after concurrency 2's step record (a checkpoint): FAIL
    exit 1 before the cut; after it, with and without the key, never PASS."""
    monkeypatch.setenv("SW_TEST_KEY", KEY.decode())
    run = write_load_run(tmp_path / "signed.jsonl", key=KEY)
    rc, rep, _ = report(capsys, run, "--verify-key-env", "SW_TEST_KEY")
    assert rc == 1 and rep["records_integrity"]["signature"] == "verified" and problems(rep) == ""
    ls = lines_of(run)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(ls[:step_end_lines(ls)[1] + 1]))
    for extra in ((), ("--verify-key-env", "SW_TEST_KEY")):
        rc, rep, _ = report(capsys, cut, *extra)
        assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED", extra
        assert "incomplete: level 4 planned, not present (2 of 3 planned steps present" in problems(rep)


def test_a_step_checkpoint_made_into_a_seal_does_not_seal_a_cut_run(tmp_path, capsys, monkeypatch):
    """The seal "covers fewer lines than the run": cut after concurrency 2 and seal the cut with the checkpoint that
    the next step's start record carries (its digest and MAC cover exactly the lines kept). Unsigned: the chain holds
    (anyone can do this) but the missing level is named; signed: the seal's MAC is in its own domain and does not
    verify."""
    monkeypatch.setenv("SW_TEST_KEY", KEY.decode())
    for key in (None, KEY):
        run = write_load_run(tmp_path / f"run-{key is None}.jsonl", key=key)
        ls = lines_of(run)
        at = step_end_lines(ls)[1] + 1  # the step start of concurrency 4: its checkpoint covers lines 1..at
        ch = json.loads(ls[at])["chain"]
        forged = tmp_path / f"forged-{key is None}.jsonl"
        forged.write_bytes(b"".join(ls[:at]) + seal_line(ch))
        extra = () if key is None else ("--verify-key-env", "SW_TEST_KEY")
        rc, rep, _ = report(capsys, forged, *extra)
        assert rc == 3 and "incomplete: level 4 planned, not present" in problems(rep)
        if key is not None:
            assert rep["records_integrity"]["state"] == "broken"
            assert "the signature of the seal does not verify" in problems(rep)


def test_a_seal_whose_planned_levels_disagree_with_the_header_breaks_the_chain(tmp_path, capsys):
    run = write_load_run(tmp_path / "run.jsonl", fail=())
    ls = lines_of(run)
    seal = json.loads(ls[-1])
    assert seal["planned"] == {"levels": [1, 2, 4], "rounds": 1}  # the recorder repeats the header's plan
    seal["planned"]["levels"] = [1, 2]
    ls[-1] = seal_line(seal["chain"], seal["planned"])
    run.write_bytes(b"".join(ls))
    rc, rep, _ = report(capsys, run)
    assert rc == 3 and rep["records_integrity"]["state"] == "broken"
    assert "the seal's planned levels and rounds" in rep["records_integrity"]["problems"][0]


def test_a_stop_on_fail_sweep_records_its_stop_and_stays_complete(tmp_path, capsys):
    """Legitimate: `sweep` (stop on fail) stops at the first FAIL and says so in that step's record; the levels after
    it are not missing. The same file without the recorded stop (written before stops were recorded) is read by
    the generator's own rule. A stop recorded on a step whose records do not FAIL explains nothing."""
    run = write_load_run(tmp_path / "sweep.jsonl", levels=(1, 2, 4, 8), fail=(4,), stop_on_fail=True)
    ls = lines_of(run)
    ends = [json.loads(ls[i]) for i in step_end_lines(ls)]
    assert [e["level"] for e in ends] == [1, 2, 4] and ends[-1]["stop"]["cause"] == "stop_on_fail"
    rc, rep, _ = report(capsys, run)
    assert rc == 1 and problems(rep) == ""
    old = tmp_path / "old.jsonl"
    old.write_bytes(b"".join(ln.replace(b',"stop":{"cause":"stop_on_fail","text":"this step FAILED: the ladder '
                                        b'stopped here (--stop-on-fail)"}', b"") for ln in without_chain(ls)))
    assert b'"stop"' not in old.read_bytes()
    rc, rep, _ = report(capsys, old)
    assert rc == 1 and problems(rep) == ""
    # the failing level's records rewritten as good (the chain stripped, its step record kept): the stop is not
    # supported, and the step record's own verdict disagrees
    lied = tmp_path / "lied.jsonl"
    out = []
    for ln in without_chain(ls):
        d = json.loads(ln)
        if d.get("type") == "request" and d.get("level") == 4:
            d.update(complete=True, error=None, http_status=200, t_first_token=d["t_sent"] + 0.1, output_tokens=32,
                     finish_reason="length")
        out.append((json.dumps(d, separators=(",", ":")) + "\n").encode())
    lied.write_bytes(b"".join(out))
    rc, rep, _ = report(capsys, lied, "--min-window-minutes", "1")
    assert rc == 3, problems(rep)
    assert "the step record counts 360 requests, 360 failed" in problems(rep) or "failed" in problems(rep)


def test_sweep_search_probes_after_the_ladder_are_not_missing_steps(tmp_path, capsys):
    run = write_load_run(tmp_path / "search.jsonl", levels=(1, 4), fail=(4,), stop_on_fail=True, probes=(2,))
    rc, rep, _ = report(capsys, run)
    assert problems(rep) == "" and rc == 1
    # a probe in a run that planned no search: a planned step relabelled
    ls = [ln.replace(b',"search":{"precision":0.1,"budget_s":1800.0,"probe_cap_s":720.0}', b"")
          for ln in without_chain(lines_of(run))]
    (tmp_path / "nosearch.jsonl").write_bytes(b"".join(ls))
    rc, rep, _ = report(capsys, tmp_path / "nosearch.jsonl")
    assert "marked as a capacity-search probe in a run whose header plans no search" in problems(rep)


def test_planned_rounds_are_held_in_order(tmp_path, capsys):
    run = write_load_run(tmp_path / "rounds.jsonl", levels=(1, 2), fail=(), rounds=2, pass_seconds=660.0)
    rc, rep, _ = report(capsys, run)
    assert rc == 0 and problems(rep) == ""
    ls = without_chain(lines_of(run))
    ends = step_end_lines(ls)
    (tmp_path / "short.jsonl").write_bytes(b"".join(ls[:ends[2] + 1]))  # round 2 of concurrency 2 missing
    rc, rep, _ = report(capsys, tmp_path / "short.jsonl")
    assert rc == 3 and "incomplete: 1 of 4 steps (concurrency 2 round 2) planned, not present" in problems(rep)


# ------------------------------------------------------------------ finding 4: step records checked, not skipped


def test_every_step_record_removed_cannot_pass(tmp_path, capsys):
    """Before: "PASS (with a note)". A file written before the chain (nothing else to catch it)."""
    run = write_load_run(tmp_path / "ok.jsonl", levels=(1, 2), fail=())
    ls = without_chain(lines_of(run))
    (tmp_path / "plain.jsonl").write_bytes(b"".join(ls))
    rc, rep, _ = report(capsys, tmp_path / "plain.jsonl")
    assert rc == 0 and problems(rep) == ""
    (tmp_path / "nosteps.jsonl").write_bytes(b"".join(ln for ln in ls if b'"type":"step"' not in ln))
    rc, rep, _ = report(capsys, tmp_path / "nosteps.jsonl")
    assert rc == 3 and "incomplete: levels 1, 2 planned, not present (no step record at all" in problems(rep)


def test_a_step_end_field_of_the_wrong_type_is_a_bad_line_not_a_skipped_check(tmp_path, capsys):
    """`"requests": "370"` (a string) on concurrency 2's step end record (line 2,141 of the bundled run): a bad line
    with its file and line, counted; the step is then missing, so a request record deleted beside it cannot PASS."""
    ls = without_chain(lines_of(DEFAULT))
    i = next(i for i, ln in enumerate(ls) if b'"event":"end","level":2.0' in ln)
    ls[i] = ls[i].replace(b'"requests":370', b'"requests":"370"')
    with pytest.raises(RecordError, match="field 'requests' of a step must be a whole number"):
        parse_line(ls[i])
    (tmp_path / "typed.jsonl").write_bytes(b"".join(ls))
    rc, rep, err = report(capsys, tmp_path / "typed.jsonl")
    assert f"typed.jsonl:{i + 1}: field 'requests' of a step must be a whole number" in err
    assert rep["input_problems"]["malformed"] == 1
    assert "concurrency 2 round 1: 370 request records but no step end record" in problems(rep)
    # other wrong types: each a bad line
    for old, new in ((b'"completed":370', b'"completed":"370"'), (b'"failed":0', b'"failed":false'),
                     (b'"errors":{}', b'"errors":[]'), (b'"ttft_p50_ms":724.02', b'"ttft_p50_ms":"724"'),
                     (b'"verdict":"UNDECIDED"', b'"verdict":1')):
        bad = lines_of(DEFAULT)[i].replace(old, new)
        assert bad != lines_of(DEFAULT)[i], old
        with pytest.raises(RecordError):
            parse_line(bad)


def test_step_counts_that_contradict_each_other_are_a_bad_line():
    ln = lines_of(DEFAULT)[1045]  # concurrency 1's end: 432 requests, 432 completed, 0 failed
    with pytest.raises(RecordError, match="432 requests but 431 completed and 0 failed"):
        parse_line(ln.replace(b'"completed":432', b'"completed":431'))


def test_a_step_records_own_verdict_and_percentiles_are_compared(tmp_path, capsys):
    """A run whose concurrency 2 is slow (TTFT 1.5 s: FAIL, its step record says so), written before the chain; every
    first token of that level edited to 200 ms after its send: the counts stand. Before: PASS, exit 0. Now the step
    record's verdict and TTFT p50 disagree with the recomputation, both values named, and nothing PASSes there."""
    run = write_load_run(tmp_path / "slow.jsonl", levels=(1, 2), fail=(), slow=(2,), chain=False)
    rc, rep, _ = report(capsys, run)
    assert rc == 1 and problems(rep) == ""
    out = []
    for ln in lines_of(run):
        d = json.loads(ln)
        if d.get("type") == "request" and d.get("level") == 2:
            d["t_first_token"] = d["t_sent"] + 0.2
        out.append((json.dumps(d, separators=(",", ":")) + "\n").encode())
    run.write_bytes(b"".join(out))
    rc, rep, _ = report(capsys, run)
    text = problems(rep)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED", text
    assert ("concurrency 2 round 1: the step record's verdict is FAIL; recomputed from its request records at TTFT <= "
            "1000 ms (answer), target 95%, window 10 min, alpha 0.05: PASS: records altered") in text
    assert "concurrency 2 round 1: the step record's ttft_p50_ms is 1500.000 ms; recomputed from its request " \
           "records: 200.000 ms: records altered" in text


def test_step_percentiles_agree_on_honest_files_past_the_exact_cap():
    """The recomputation uses the generator's own algorithm: past 50,000 values both sides use its histogram, and
    an honest step agrees within the documented tolerance (here the same values, perturbed by the epoch rounding)."""
    import random

    from tui.core.stepstats import StepQuantiles

    rng = random.Random(35)
    vals = [rng.lognormvariate(-1.0, 0.5) for _ in range(60_000)]
    gen = StepQuantiles()
    for v in vals:
        gen.add(v)
    end = {"requests": 60_000, "completed": 60_000, "failed": 0, "errors": {},
           "ttft_p50_ms": round(gen.quantiles((0.5,))[0] * 1e3, 2), "send_overhead_p50_ms": 0.0,
           "send_overhead_p99_ms": 0.0, "percentiles_rel_error": 0.01}
    over = completeness.StepValues()
    for v in vals[50_000:]:
        over.add_ttft(v + rng.uniform(-5e-7, 5e-7))
    exact = [v + rng.uniform(-5e-7, 5e-7) for v in vals[:50_000]]
    got = completeness.step_problems("concurrency 4 round 1", end, (60_000, 0, 0), {}, [0.0] * 50_000,
                                     exact, over, None, "")
    assert got == []
    end["ttft_p50_ms"] *= 1.1
    got = completeness.step_problems("concurrency 4 round 1", end, (60_000, 0, 0), {}, [0.0] * 50_000,
                                     exact, over, None, "")
    assert len(got) == 1 and "ttft_p50_ms" in got[0]


def test_the_load_generator_records_why_the_ladder_stopped(tmp_path, capsys):
    """A real `sweep` (stop on fail) against the in-test fault server (127.0.0.1, a few requests, seconds): concurrency
    1 FAILs its 100-ms TTFT SLO, the ladder stops, and that step's end record says why; the file is complete (FAIL,
    exit 1, nothing named) and its seal repeats the header's plan."""
    from tests.support.fault_server import FaultServer

    rec = tmp_path / "sweep.jsonl"
    flags = ["--slo-ttft-ms", "100", "--min-window-minutes", "0.02"]
    with FaultServer() as fs:
        rc = main(["sweep", "--url", fs.url("ok", tokens=2, first_delay=0.3), "--model", "m", "--concurrency", "1,2,4",
                   *flags, "--max-step-seconds", "20", "--no-gpu", "--record", str(rec)])
    capsys.readouterr()
    assert rc == 1
    ls = lines_of(rec)
    ends = [json.loads(ls[i]) for i in step_end_lines(ls)]
    assert len(ends) == 1 and ends[0]["verdict"] == "FAIL"
    assert ends[0]["stop"] == {"cause": "stop_on_fail", "text": "this step FAILED: the ladder stopped here "
                                                                "(--stop-on-fail)"}
    assert json.loads(ls[-1])["planned"] == {"levels": [1.0, 2.0, 4.0], "rounds": 1}
    rc, rep, _ = report(capsys, rec, *flags)
    assert rc == 1 and problems(rep) == ""
