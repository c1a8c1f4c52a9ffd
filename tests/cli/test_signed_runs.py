"""Issue 36, "A signature verifies a run, or nothing" (findings 1 and 7): with `--verify-key-env`, PASS (and NOT WORSE,
ready) needs the JUDGED run signed from its header to its seal with that key, no unsigned or header-less line inside
it and no line of another run counted; integrity is per run; the first line of every output says what was verified
in the threat model's words, never "records verified" for an unsigned chain.

The signed runs are written in process by the real Recorder (tests/support/load_runs.py): concurrency 1 and 2 PASS,
4 FAILs, so the honest verdict is FAIL (exit 1). Each case below said "signature verified" and PASS, exit 0, on the
code before the change (1a6ea7a)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import evidence_files as ef
from tests.support.load_runs import KEY, lines_of, step_end_lines, write_load_run
from tests.support.paths import REPO
from tui.cli import main
from tui.core.chain import ChainVerifier, key_id, verify_bytes

VAR = "SW_TEST_SIGNING_KEY"
DEFAULT = REPO / "sample_logs" / "default.jsonl"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(VAR, KEY.decode())


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> bytes:
    return write_load_run(tmp_path_factory.mktemp("signed") / "signed.jsonl", key=KEY).read_bytes()


def report(capsys, path: Path, *extra: str, key: bool = True) -> tuple[int, dict, str]:
    argv = ["report", "--details", str(path), "--json", *extra] + (["--verify-key-env", VAR] if key else [])
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if cap.out.strip() else {}), cap.err


def text_report(capsys, path: Path, *extra: str) -> tuple[int, str]:
    rc = main(["report", "--details", str(path), *extra])
    return rc, capsys.readouterr().out


def lines(objs: list[dict]) -> bytes:
    return b"".join((json.dumps(d, separators=(",", ":")) + "\n").encode() for d in objs)


def made_up_passing_run() -> list[dict]:
    """A made-up run that PASSes (no chain): the lines someone without the key adds."""
    recs = ef.honest_closed()
    recs[0]["run_id"] = "made-up"
    return recs


def test_the_signed_run_is_judged_as_it_is(signed, tmp_path, capsys):
    p = tmp_path / "s.jsonl"
    p.write_bytes(signed)
    rc, rep, _ = report(capsys, p)
    ri = rep["records_integrity"]
    assert rc == 1 and ri["state"] == "intact" and ri["signature"] == "verified"
    assert ri["summary"].startswith(f"signed by key id {key_id(KEY)}, verified with the key in ${VAR}: every line "
                                    "from the run header to its seal")
    assert list(rep)[0] == "records_integrity"  # the JSON's first key says what was verified


def test_an_unchained_run_after_a_signed_one_is_not_signed(signed, tmp_path, capsys):
    """`ChainVerifier._start_run` returned for a header without a chain before it checked the key: the file read
    "signature verified" and `--run 2` PASSed."""
    p = tmp_path / "two.jsonl"
    p.write_bytes(signed + lines(made_up_passing_run()))
    first_of_2 = signed.count(b"\n") + 1
    rc, rep, _ = report(capsys, p, "--run", "2")
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    ri = rep["records_integrity"]
    assert ri["state"] == "broken" and ri["signature"] == "failed"
    assert ri["problems"][0].startswith(f"line {first_of_2:,}: the run is not signed (its header starts no digest "
                                        "chain)")
    # the signed run of the same file still verifies on its own: integrity is per run
    rc, rep, _ = report(capsys, p, "--run", "1")
    assert rc == 1 and rep["records_integrity"]["signature"] == "verified"
    # the class, not the instance: the verifier itself says so for the file
    ri = verify_bytes(p.read_bytes(), KEY, f"${VAR}")
    assert ri.state == "broken" and any("not signed" in x for x in ri.problems)


def test_made_up_requests_before_the_signed_run_are_not_signed(signed, tmp_path, capsys):
    """A header-less prefix of requests (run 1, "no header") before the signed run: `--run 1` PASSed."""
    made = made_up_passing_run()[1:]
    p = tmp_path / "prefix.jsonl"
    p.write_bytes(lines(made) + signed)
    rc, rep, _ = report(capsys, p, "--run", "1")
    assert rc == 3 and rep["records_integrity"]["problems"][0] == \
        f"lines 1-{len(made):,}: not signed (no run header, no digest chain)"
    rc, rep, _ = report(capsys, p, "--run", "2")  # the signed run, judged alone, as it is
    assert rc == 1 and rep["records_integrity"]["signature"] == "verified"


def test_lines_before_the_header_inside_the_judged_run_are_named(signed, tmp_path, capsys):
    """A header-less prefix without requests belongs to the first header's run: inside its span, not signed."""
    budget = {"type": "budget", "budget": {"schema": "servewatch.budget/1"}}
    p = tmp_path / "budget-first.jsonl"
    p.write_bytes(lines([budget]) + signed)
    rc, rep, _ = report(capsys, p)
    assert rc == 1  # a FAIL stands
    assert rep["records_integrity"]["problems"] == [
        "line 1: before the run header (line 2), not signed: added before the run"]
    rc, rep, _ = report(capsys, p, key=False)
    assert rep["records_integrity"]["problems"] == [
        "line 1: before the run header (line 2), not covered by its digest chain: added before the run"]


def test_the_seal_removed_and_a_level_appended_after_the_last_checkpoint(signed, tmp_path, capsys):
    body = b"".join(signed.splitlines(keepends=True)[:-1])  # the seal removed
    extra = ef.honest_closed(level=8)[1:]  # a made-up level that PASSes, its step records included
    p = tmp_path / "appended.jsonl"
    p.write_bytes(body + lines(extra))
    last_cp = body.count(b"\n")
    rc, rep, _ = report(capsys, p)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    assert rep["records_integrity"]["problems"][0] == (
        f"after the last checkpoint (line {last_cp:,}): {len(extra):,} lines unsigned, and no seal: the run was cut "
        "short, or its end removed or replaced")


def test_a_signed_run_cut_at_a_checkpoint_hides_no_failing_level(signed, tmp_path, capsys):
    ls = signed.splitlines(keepends=True)
    cut_at = step_end_lines(ls)[1] + 1  # after concurrency 2's step end record: concurrency 4 (FAIL) gone
    p = tmp_path / "cut.jsonl"
    p.write_bytes(b"".join(ls[:cut_at]))
    rc, rep, _ = report(capsys, p)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    assert rep["records_integrity"]["problems"][0] == (
        f"no seal after the last checkpoint (line {cut_at:,}): the run was cut short, or its end removed or replaced")
    assert "incomplete: level 4 planned, not present" in " ".join(rep["evidence"]["problems"])


def test_two_signed_runs_judge_either_with_run_n(tmp_path, capsys):
    p = tmp_path / "two.jsonl"
    write_load_run(p, key=KEY, run_id="first")  # FAILs at 4
    write_load_run(p, key=KEY, levels=(1, 2), fail=(), run_id="second", t0=ef.T0 + 86400)  # PASSes
    assert main(["report", "--details", str(p), "--verify-key-env", VAR]) == 2  # several runs: never merged
    capsys.readouterr()
    rc1, rep1, _ = report(capsys, p, "--run", "1")
    rc2, rep2, _ = report(capsys, p, "--run", "2")
    assert (rc1, rc2) == (1, 0)
    for rep in (rep1, rep2):
        assert rep["records_integrity"]["signature"] == "verified" and not rep["records_integrity"]["problems"]
        assert "(the run judged: lines" in rep["records_integrity"]["summary"]
    # run 1 edited (its own chain broken): run 2 is still judged on its own integrity, run 1 cannot PASS
    ls = lines_of(p)
    i = next(i for i, ln in enumerate(ls) if b'"type":"request"' in ln)
    ls[i] = ls[i].replace(b'"complete":true', b'"complete":false', 1)
    p.write_bytes(b"".join(ls))
    rc1, rep1, _ = report(capsys, p, "--run", "1")
    rc2, rep2, _ = report(capsys, p, "--run", "2")
    assert rep1["records_integrity"]["state"] == "broken" and rc1 in (1, 3)
    assert rc2 == 0 and rep2["records_integrity"]["state"] == "intact"


def test_compare_and_accept_need_the_judged_run_signed(signed, tmp_path, capsys):
    honest = tmp_path / "honest.jsonl"
    write_load_run(honest, key=KEY, levels=(1, 2), fail=())
    two = tmp_path / "two.jsonl"
    two.write_bytes(honest.read_bytes() + lines(made_up_passing_run()))
    assert main(["compare", str(honest), str(two), "--cand-run", "2", "--verify-key-env", VAR, "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "NOT ENOUGH EVIDENCE" and "not signed" in doc["reason"]
    out = tmp_path / "acc"
    rc = main(["accept", "--records", str(two), "--run", "2", "--out", str(out), "--no-html",
               "--verify-key-env", VAR])
    assert rc in (1, 3)
    acc = json.loads((out / "acceptance.json").read_text())
    assert acc["conclusion"]["ready_for_traffic"] is False
    assert "not signed" in acc["records_integrity"][0]["problems"][0]


# ------------------------------------------------------------------ finding 7: the first line says what was verified


def test_an_unsigned_chain_never_reads_records_verified(tmp_path, capsys):
    """An unsigned chain edited and re-hashed read "records verified (... chain intact)": it proves nothing against
    a deliberate edit, and now says so on the first line of every output."""
    rc, out = text_report(capsys, DEFAULT)
    first = out.splitlines()[0]
    assert first == ("digest chain intact, sealed (2,692 lines; detects accidental damage and naive edits; not "
                     "authorship)")
    assert "records verified" not in out
    rc, rep, _ = report(capsys, DEFAULT, key=False)
    assert rep["records_integrity"]["summary"] == first
    # compare: its first line, both sides
    assert main(["compare", str(DEFAULT), str(DEFAULT)]) in (0, 1, 3)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("base: digest chain intact, sealed") and "candidate: digest chain intact" in first
    # accept: its first printed line
    main(["accept", "--records", str(DEFAULT), "--out", str(tmp_path / "acc"), "--no-html"])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"records {DEFAULT}: digest chain intact, sealed") and "not authorship" in first
    md = (tmp_path / "acc" / "acceptance.md").read_text().splitlines()
    assert md[0].startswith("> Records ") and "digest chain intact, sealed" in md[0]


def test_a_signed_run_says_by_which_key_on_the_first_line(signed, tmp_path, capsys):
    p = tmp_path / "s.jsonl"
    p.write_bytes(signed)
    rc, out = text_report(capsys, p, "--verify-key-env", VAR)
    assert out.splitlines()[0].startswith(f"signed by key id {key_id(KEY)}, verified with the key in ${VAR}")
    rc, out = text_report(capsys, p)  # no key given: the chain is checked, the signature is not
    n = signed.count(b"\n")
    assert out.splitlines()[0] == (
        f"digest chain intact, sealed ({n:,} lines; detects accidental damage and naive edits; not authorship); "
        f"signed by key id {key_id(KEY)}, signature NOT checked (no --verify-key-env)")


def test_the_replay_console_header_says_what_was_verified(signed):
    from tui.core.monitor import Monitor
    from tui.widgets.bars import HeaderBar

    base = Monitor().snapshot()
    import dataclasses

    for data, key, label in ((signed, KEY, f"signed {key_id(KEY)}, verified"),
                             (signed, None, "digest intact (not authorship)")):
        v = ChainVerifier(key, f"${VAR}")
        v.feed(data)
        snap = dataclasses.replace(base, records_integrity=v.finish())
        assert label in HeaderBar._header_line("x.jsonl", "REPLAY x1", snap, "servewatch", compact=False, width=240)
