"""The digest chain (tui/core/chain.py, docs/record-format.md "Digest chain"): written by the recorder, verified by
every reader; every kind of edit is found at the right lines; signing; a real `servewatch run` verifies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fault_server import FaultServer
from tests.support.paths import REPO
from tui.core.chain import ChainWriter, key_id, seal_line, verify_bytes
from tui.core.records import dumps, run_header
from tui.sources.recorder import Recorder

ROOT = REPO
KEY = b"correct horse battery staple 19"
BOUND_S = 60.0


def write_run(path: Path, *, key: bytes | None = None, levels=(1, 2), per_level: int = 6, t0: float = 1.7e9,
              ttft: float = 0.1) -> None:
    """One chained run through the real Recorder: header, per level a step start, requests, a step end; the seal
    at close."""
    with Recorder(str(path), ids_unique=True, sign_key=key) as rec:
        # test data; not SYNTHETIC so that compare may exit 0 on it; a run names its loop mode (or cannot PASS)
        rec.write(run_header(synthetic=False, load={"mode": "closed", "levels": list(levels)}))
        t = t0
        for lvl in levels:
            rec.write({"type": "step", "t": t, "event": "start", "level": lvl, "round": 1, "mode": "closed"})
            t_start = t
            for i in range(per_level):
                rec.write({"type": "request", "id": f"c{lvl}-{i:04d}", "t_sent": t, "t_first_token": t + ttft,
                           "t_end": t + lvl - 0.001, "complete": True, "level": lvl, "round": 1})  # lvl in flight
                t += 1.0
            # the counts a step end record carries (a load run's step is held against its requests: issue 35)
            rec.write({"type": "step", "t": t, "event": "end", "level": lvl, "round": 1, "mode": "closed",
                       "requests": per_level, "completed": per_level, "failed": 0,
                       "duration_s": round(t - t_start + lvl, 3)})


@pytest.fixture()
def chained(tmp_path) -> bytes:
    p = tmp_path / "run.jsonl"
    write_run(p)
    return p.read_bytes()


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def checkpoint_lines(data: bytes) -> list[int]:
    return [i + 1 for i, ln in enumerate(lines_of(data)) if b'"chain":{"lines"' in ln]


# ------------------------------------------------------------------ the format


def test_recorder_writes_the_documented_chain(chained):
    """Header starts the chain, every step record checkpoints the lines before it, a seal ends it: recomputed here
    from the rule in docs/record-format.md with plain hashlib (what another tool would do)."""
    import hashlib

    ls = lines_of(chained)
    head = json.loads(ls[0])
    assert head["chain"] == {"format": "servewatch.chain/1", "digest": "sha256", "checkpoints": ["step", "seal"]}
    cps = checkpoint_lines(chained)
    assert cps == [2, 9, 10, 17, 18] and json.loads(ls[-1])["type"] == "seal"
    for L in cps:
        ch = json.loads(ls[L - 1])["chain"]
        assert ch["lines"] == L - 1
        assert ch["digest"] == hashlib.sha256(b"".join(ls[:L - 1])).hexdigest()
    assert ls[-1] == seal_line(json.loads(ls[-1])["chain"], json.loads(ls[-1]).get("planned"))


def test_intact_file_verifies_whatever_the_block_size(chained):
    for block in (1, 7, 100, 4096, 1 << 20):
        ri = verify_bytes(chained, block=block)
        assert ri.state == "intact" and not ri.problems, block
        # the threat model's words: an unsigned chain detects damage and naive edits, never authorship (issue 36)
        assert ri.summary == ("digest chain intact, sealed (18 lines; detects accidental damage and naive edits; "
                              "not authorship)")
        assert "records verified" not in ri.summary


def test_file_without_digest_is_unverified_and_no_problem(tmp_path):
    p = tmp_path / "old.jsonl"
    write_run(p)
    old = b"".join(ln for ln in lines_of(p.read_bytes()) if b'"type":"seal"' not in ln)
    old = b"".join(dumps({k: v for k, v in json.loads(ln).items() if k != "chain"}).encode() for ln in lines_of(old))
    ri = verify_bytes(old)
    assert ri.state == "unverified" and not ri.problems
    assert ri.summary == "no digest chain: nothing verified (17 lines); judged on what the records hold"


# ------------------------------------------------------------------ every kind of edit, at the right lines


def test_one_byte_changed_is_found_between_the_checkpoints_around_it(chained):
    ls = lines_of(chained)
    ls[4] = ls[4].replace(b'"t_end":', b'"t_end": ', 1)  # line 5 (a request of level 1)
    ri = verify_bytes(b"".join(ls))
    assert ri.state == "broken"
    assert ri.problems[0].startswith("lines 2-9: the digest checkpointed in the step record at line 9 does not match")


def test_one_byte_changed_late_is_placed_after_the_last_good_checkpoint(chained):
    ls = lines_of(chained)
    ls[12] = ls[12].replace(b'"complete":true', b'"complete":fals')  # line 13, level 2
    ri = verify_bytes(b"".join(ls))
    assert ri.problems[0].startswith("lines 10-17: the digest checkpointed in the step record at line 17")


def test_a_line_removed_is_counted_and_placed(chained):
    ls = lines_of(chained)
    del ls[5]  # a request of level 1 (line 6)
    ri = verify_bytes(b"".join(ls))
    assert ri.state == "broken"
    assert "lines 2-8:" in ri.problems[0] and "1 line removed there" in ri.problems[0]


def test_two_lines_swapped_are_found(chained):
    ls = lines_of(chained)
    ls[11], ls[12] = ls[12], ls[11]  # two requests of level 2
    ri = verify_bytes(b"".join(ls))
    assert ri.problems[0].startswith("lines 10-17: the digest checkpointed in the step record at line 17")


def test_a_line_appended_after_the_seal_is_found(chained):
    extra = dumps({"type": "request", "id": "late", "t_sent": 1.0, "t_end": 2.0, "complete": True}).encode()
    ri = verify_bytes(chained + extra)
    assert ri.state == "broken"
    assert ri.problems == ("line 19: 1 line after the seal at line 18 with no new run header: appended after the "
                           "run ended",)


def test_a_second_run_appended_starts_its_own_chain(tmp_path):
    p = tmp_path / "two.jsonl"
    write_run(p)
    write_run(p, levels=(4,))  # a second recorder appends a second run
    data = p.read_bytes()
    ri = verify_bytes(data)
    assert ri.state == "intact" and [r["header_line"] for r in ri.runs] == [1, 19]
    # its header is line 19 and its first checkpoint counts from there
    assert json.loads(lines_of(data)[19])["chain"]["lines"] == 1
    # an edit in the second run is placed in the second run
    ls = lines_of(data)
    ls[21] = ls[21].replace(b'"complete":true', b'"complete":false')
    assert verify_bytes(b"".join(ls)).problems[0].startswith("lines 20-27:")


def test_two_chained_files_concatenated_verify_as_two_runs(chained):
    assert verify_bytes(chained + chained).state == "intact"


def test_the_header_removed_is_found(chained):
    ri = verify_bytes(b"".join(lines_of(chained)[1:]))
    assert ri.state == "broken" and ri.problems[0].startswith("line 1: a checkpoint before any run header")


def test_an_edited_seal_is_found(chained):
    ls = lines_of(chained)
    ls[-1] = ls[-1].replace(b'{"type":"seal",', b'{"type":"seal", ')
    assert verify_bytes(b"".join(ls)).problems[0].startswith("line 18: the seal record is not byte for byte")


@pytest.mark.parametrize("cut, verified_to, tail", [
    (-5, 17, 1),  # the seal cut short (a crash while writing it): the line is unverified
    (-1, 17, 1),  # only its newline missing
])
def test_a_truncated_file_verifies_up_to_the_last_checkpoint(chained, cut, verified_to, tail):
    ri = verify_bytes(chained[:cut])
    assert ri.state == "partial" and not ri.problems
    assert ri.details == (f"run at line 1: verified up to line {verified_to}; unverified: {tail} line after the last "
                          "checkpoint (no seal: the run was cut short, or its end removed)",)


def test_a_file_cut_mid_step_says_how_many_lines_are_unverified(chained):
    ls = lines_of(chained)
    ri = verify_bytes(b"".join(ls[:13]) + ls[13][:20])  # cut inside line 14, level 2 running
    assert ri.state == "partial" and "NO SEAL: 4 lines after it unverified: the run was cut short" in ri.summary
    assert "verified up to line 10; unverified: 4 lines after the last checkpoint" in ri.details[0]


def _signed() -> bytes:
    """A signed run (written once, at import: the hypothesis test draws plain or signed)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        write_run(p, key=KEY)
        return p.read_bytes()


SIGNED = _signed()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), signed=st.booleans())
def test_any_edit_is_detected_or_leaves_the_bytes_unchanged(chained, data, signed):
    """Random edits (bytes replaced, removed, inserted; whole lines removed, duplicated, moved) of a plain file, or
    of a signed one verified with its key: the result is never "intact" unless the bytes are exactly those
    written."""
    if signed:
        chained = SIGNED
    buf = bytearray(chained)
    kind = data.draw(st.sampled_from(["replace", "delete", "insert", "drop_line", "dup_line", "move_line"]))
    if kind in ("replace", "delete", "insert"):
        at = data.draw(st.integers(0, len(buf) - 1))
        n = data.draw(st.integers(1, 8))
        junk = data.draw(st.binary(min_size=1, max_size=8))
        if kind == "replace":
            buf[at:at + len(junk)] = junk
            del buf[len(chained):]
        elif kind == "delete":
            del buf[at:at + n]
        else:
            buf[at:at] = junk
    else:
        ls = lines_of(chained)
        i = data.draw(st.integers(0, len(ls) - 1))
        if kind == "drop_line":
            del ls[i]
        elif kind == "dup_line":
            ls.insert(data.draw(st.integers(0, len(ls))), ls[i])
        else:
            ln = ls.pop(i)
            ls.insert(data.draw(st.integers(0, len(ls))), ln)
        buf = bytearray(b"".join(ls))
    edited = bytes(buf)
    ri = verify_bytes(edited, KEY if signed else None, block=data.draw(st.sampled_from([64, 1 << 20])))
    if edited != chained:
        assert ri.state != "intact", (kind, ri.summary)
    else:
        assert ri.state == "intact"


# ------------------------------------------------------------------ signing


def test_a_mac_with_non_ascii_characters_is_a_failed_signature_not_a_crash(tmp_path):
    """Found by the random-edit test: hmac.compare_digest raised TypeError on a str mac with non-ASCII text."""
    p = tmp_path / "signed.jsonl"
    write_run(p, key=KEY)
    lines = lines_of(p.read_bytes())
    step = json.loads(lines[1])  # the first checkpoint (a step record)
    step["chain"]["mac"] = "\u00e9" * 64
    lines[1] = (json.dumps(step, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    ri = verify_bytes(b"".join(lines), KEY, "$SW_KEY")
    assert ri.state == "broken" and "signature" in ri.problems[0]


def test_signed_file_verifies_with_the_key_and_fails_with_another(tmp_path):
    p = tmp_path / "signed.jsonl"
    write_run(p, key=KEY)
    data = p.read_bytes()
    assert KEY not in data and KEY.decode() not in data.decode()
    assert json.loads(lines_of(data)[0])["chain"]["key_id"] == key_id(KEY)
    ok = verify_bytes(data, KEY, "$SW_KEY")
    assert ok.state == "intact" and ok.signature == "verified"
    assert ok.summary.startswith(f"signed by key id {key_id(KEY)}, verified with the key in $SW_KEY: every line "
                                 "from the run header to its seal (18 lines)")
    no_key = verify_bytes(data)
    assert no_key.state == "intact" and no_key.signature == "not checked"
    bad = verify_bytes(data, b"another key", "$SW_KEY")
    assert bad.state == "broken" and bad.signature == "failed" and "signed with another key" in bad.problems[0]


def test_a_rechained_forgery_passes_integrity_but_not_the_signature(tmp_path):
    """Someone without the key edits a TTFT and recomputes every digest (the threat model's limit of a keyless
    chain): integrity then holds, the signature does not."""
    p = tmp_path / "signed.jsonl"
    write_run(p, key=KEY)
    ls = lines_of(p.read_bytes())
    ls[4] = ls[4].replace(b'"complete":true', b'"complete":false')
    forged, w = [], ChainWriter(None)
    for ln in ls:
        obj = json.loads(ln)
        if obj["type"] == "run":
            w.start()
        elif "chain" in obj:
            ch = w.checkpoint()
            ch["mac"] = obj["chain"]["mac"]  # the old MACs kept: the forger cannot make new ones
            obj["chain"] = ch
            ln = seal_line(ch) if obj["type"] == "seal" else dumps(obj).encode()
        forged.append(ln)
        w.add(ln)
    data = b"".join(forged)
    assert verify_bytes(data).state == "intact"
    ri = verify_bytes(data, KEY, "$SW_KEY")
    assert ri.state == "broken" and "does not verify with the key in $SW_KEY" in ri.problems[0]


def test_verify_key_on_an_unsigned_file_cannot_verify_authorship(chained):
    ri = verify_bytes(chained, KEY, "$K")
    assert ri.state == "broken" and "not signed" in ri.problems[0]


# ------------------------------------------------------------------ the readers


def _report(path: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tui", "report", "--details", str(path), "--min-window-minutes", "0.02",
                           "--slo-ttft-ms", "1000", "--target", "0.5", *extra], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=BOUND_S)


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def _servewatch_run(fs, rec: Path, *extra: str, env: dict | None = None, url: str | None = None):
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    # 120 requests of 2 tokens 40 ms apart at concurrency 2: ~2.4 s, past the 1.2-s window: a PASS
    return subprocess.run([sys.executable, "-m", "tui", "run", "--details", "--url", url or fs.url("ok", tokens=2, delay=0.04),
                           "--model", "m", "--concurrency", "2", "--requests", "120", "--no-gpu", "--record", str(rec),
                           "--slo-ttft-ms", "1000", "--target", "0.5", "--min-window-minutes", "0.02", *extra],
                          cwd=ROOT, env=e, capture_output=True, text=True, timeout=BOUND_S)


@pytest.mark.slow
def test_a_real_run_is_recorded_chained_signed_and_judged_as_before(fs, tmp_path):
    """`servewatch run --sign-key-env` against the fault server: the file verifies intact (and with the key), the
    report's verdict is that of the same file without the chain, the key is nowhere; an edited copy cannot PASS."""
    rec = tmp_path / "run.jsonl"
    key = "s3cret-key-for-the-test-19"
    p = _servewatch_run(fs, rec, "--sign-key-env", "SW_TEST_KEY", env={"SW_TEST_KEY": key})
    assert p.returncode in (0, 3), p.stderr
    data = rec.read_bytes()
    assert key.encode() not in data and key not in p.stdout + p.stderr
    assert "digest chain intact, sealed (" in p.stdout and "records verified" not in p.stdout
    ok = _report(rec, "--json", "--verify-key-env", "SW_TEST_KEY", env={"SW_TEST_KEY": key})
    rep = json.loads(ok.stdout)
    assert rep["records_integrity"]["state"] == "intact" and rep["records_integrity"]["signature"] == "verified"
    assert key not in ok.stdout + ok.stderr
    verdict = rep["measured"]["verdict"]["state"]
    # the same records without the chain: judged the same
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"".join(dumps({k: v for k, v in json.loads(ln).items() if k != "chain"}).encode()
                               for ln in lines_of(data) if b'"type":"seal"' not in ln))
    rp = json.loads(_report(plain, "--json").stdout)
    assert rp["records_integrity"]["state"] == "unverified"
    assert rp["measured"]["verdict"]["state"] == verdict
    # wrong key: cannot PASS, said, exit 3 (or FAIL stands)
    bad = _report(rec, "--verify-key-env", "SW_TEST_KEY", env={"SW_TEST_KEY": "wrong"})
    assert "records integrity FAILED" in bad.stdout and "signed with another key" in bad.stdout
    assert bad.returncode == (1 if verdict == "FAIL" else 3) and "verdict=PASS" not in bad.stdout
    # missing variable: one line, exit 2
    miss = _report(rec, "--verify-key-env", "SW_NO_SUCH_VAR_19")
    assert miss.returncode == 2 and miss.stderr.strip().count("\n") == 0 and "SW_NO_SUCH_VAR_19" in miss.stderr


@pytest.mark.slow
def test_an_edited_passing_run_cannot_pass(fs, tmp_path):
    rec = tmp_path / "run.jsonl"
    p = _servewatch_run(fs, rec)
    assert p.returncode == 0 and "verdict=PASS" in p.stdout, p.stdout[-2000:]
    ls = lines_of(rec.read_bytes())
    i = next(i for i, ln in enumerate(ls) if b'"type":"request"' in ln)
    ls[i] = ls[i].replace(b'"round":1', b'"round":1 ', 1)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"".join(ls))
    r = _report(edited)
    assert r.returncode == 3 and "verdict=UNDECIDED" in r.stdout
    assert "the digest checkpointed in the step record at line" in r.stdout and "cannot PASS: records integrity" in r.stdout


def test_sign_key_env_missing_is_bad_usage_before_anything_runs(fs, tmp_path):
    rec = tmp_path / "run.jsonl"
    p = _servewatch_run(fs, rec, "--sign-key-env", "SW_NO_SUCH_VAR_19")
    assert p.returncode == 2 and "SW_NO_SUCH_VAR_19" in p.stderr and "Traceback" not in p.stderr
    assert not rec.exists()


def test_sigterm_still_leaves_a_sealed_chain(fs, tmp_path):
    """SIGTERM mid-step of a run with worker processes (the coordinator writes every record): the recorder's close()
    writes the seal; the file verifies intact, the cancelled requests included."""
    rec = tmp_path / "run.jsonl"
    n_before = len(fs.completions())
    proc = subprocess.Popen([sys.executable, "-m", "tui", "run", "--url", fs.url("stall"), "--model", "m",
                             "--concurrency", "2", "--duration", "600", "--workers", "2", "--no-gpu",
                             "--record", str(rec)],
                            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + BOUND_S
    while len(fs.completions()) - n_before < 2:  # both requests are at the server
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=BOUND_S)
    # issue 37: 143 after SIGTERM (the record sealed and the partial verdict printed first)
    assert "interrupted" in out and "internal error" not in out and proc.returncode == 143, (proc.returncode, out[-600:])
    data = rec.read_bytes()
    assert lines_of(data)[-1].startswith(b'{"type":"seal"')
    ri = verify_bytes(data)
    assert ri.state == "intact", ri.summary


def test_accept_and_compare_report_the_chain(tmp_path, capsys):
    """accept: a "Records integrity" section in acceptance.md and the entries in acceptance.json; compare: both
    sides' results in its JSON, and NOT WORSE needs intact chains (an edited candidate: NOT ENOUGH EVIDENCE, 3)."""
    from tui.cli import main

    base, cand = tmp_path / "base.jsonl", tmp_path / "cand.jsonl"
    write_run(base, levels=(1,), per_level=1500)
    write_run(cand, levels=(1,), per_level=1500, t0=1.7e9 + 5000, ttft=0.1013)  # another run, not a copy
    wl = "--allow-different=workload"  # these records carry no lengths: the workload is unknown (allowed here)
    assert main(["compare", str(base), str(cand), "--json", wl]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "NOT WORSE"
    assert {s: d["state"] for s, d in doc["records_integrity"].items()} == {"base": "intact", "candidate": "intact"}
    ls = lines_of(cand.read_bytes())
    ls[100] = ls[100].replace(b'"complete":true', b'"complete":false')
    cand.write_bytes(b"".join(ls))
    assert main(["compare", str(base), str(cand), "--json", wl]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "NOT ENOUGH EVIDENCE" and doc["reason"].startswith("cannot say NOT WORSE: records integrity")
    out = tmp_path / "acc"
    assert main(["accept", "--records", str(cand), "--out", str(out), "--no-html"]) in (1, 3)
    md = (out / "acceptance.md").read_text()
    assert "## Records integrity (digest chain)" in md and "records integrity FAILED: lines 2-1,503" in md
    acc = json.loads((out / "acceptance.json").read_text())
    assert acc["records_integrity"][0]["state"] == "broken"


def test_a_watch_record_file_is_verified_and_an_edit_blocks_its_pass(tmp_path, capsys):
    """`report` on a `watch --record` file: the chain checkpointed in every window; an edited window: no PASS."""
    from tui.cli import main
    from tui.core import watch as W

    p = tmp_path / "w.jsonl"
    with Recorder(str(p), ids_unique=True) as rec:
        rec.write({"type": "run", "schema_version": 1, "source": {"kind": "watch"}})
        for k in range(20):
            w = W.Window(k * 30.0, (k + 1) * 30.0, "vllm", "metrics",
                         ttft=((0.1, 300.0), (0.5, 300.0), (1.0, 300.0), (float("inf"), 301.0)),
                         waiting_start=0, waiting_end=0)
            rec.write(W.window_to_record(w))
    assert main(["report", "--details", str(p), "--min-window-minutes", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("digest chain intact, sealed (22 lines; detects accidental damage and naive edits; "
                          "not authorship)\n"), out[:300]
    ls = lines_of(p.read_bytes())
    ls[5] = ls[5].replace(b'"waiting_end":0', b'"waiting_end":0.0')
    assert ls[5] != lines_of(p.read_bytes())[5]
    p.write_bytes(b"".join(ls))
    assert main(["report", "--details", str(p), "--min-window-minutes", "1"]) == 3
    out = capsys.readouterr().out
    assert "verdict: UNDECIDED: cannot PASS: records integrity: lines 6-7:" in out  # line 6 edited, checkpointed at 7


def test_the_replay_console_gets_the_verification_at_the_end_of_the_file(chained, tmp_path):
    """ReplaySource verifies the raw chunks it reads and hands the result to the sink at the end of the file: the
    snapshot carries it (the console header's label) and a broken chain is an evidence problem."""
    import threading

    from tui.core.monitor import Monitor
    from tui.sources.base import MonitorSink
    from tui.sources.replay import ReplaySource

    def replay(data: bytes):
        p = tmp_path / "r.jsonl"
        p.write_bytes(data)
        sink = MonitorSink(Monitor())
        src = ReplaySource(str(p), max_speed=True, chunk_size=256)
        src.start(sink)
        deadline = time.monotonic() + BOUND_S
        while not src.finished and time.monotonic() < deadline:
            threading.Event().wait(0.005)  # the source thread runs; its state is what we wait on
        src.stop()
        return sink.snapshot()

    snap = replay(chained)
    assert snap.records_integrity.state == "intact"
    assert snap.records_integrity.short == "digest intact (not authorship)"
    ls = lines_of(chained)
    ls[3] = ls[3].replace(b'"complete":true', b'"complete":false')
    snap = replay(b"".join(ls))
    assert snap.records_integrity.state == "broken" and snap.records_integrity.short == "chain BROKEN"
    assert any(p.startswith("records integrity: lines 2-9") for p in snap.evidence_problems)


def test_the_console_header_shows_the_core_label_and_nothing_for_unverified(chained):
    import dataclasses

    from tui.core.monitor import Monitor
    from tui.widgets.bars import HeaderBar

    base = Monitor().snapshot()
    for data, label in ((chained, "digest intact (not authorship)"), (chained[:-3], "no seal: verified in part")):
        snap = dataclasses.replace(base, records_integrity=verify_bytes(data))
        assert label in HeaderBar._header_line("x.jsonl", "REPLAY x1", snap, "servewatch", compact=False, width=200)
    snap = dataclasses.replace(base, records_integrity=verify_bytes(b'{"type":"run","schema_version":1}\n'))
    line = HeaderBar._header_line("x.jsonl", "REPLAY x1", snap, "servewatch", compact=False, width=200)
    assert "unverified" not in line and "chain" not in line


def test_a_run_appended_after_a_crash_mid_line_starts_a_clean_chain(tmp_path):
    """The first run was cut inside a line (kill -9): the next recorder ends that line before its header, so the
    second run verifies intact and the first verifies up to its last checkpoint."""
    p = tmp_path / "crash.jsonl"
    write_run(p)
    p.write_bytes(p.read_bytes()[:-40])  # the seal cut short
    write_run(p, levels=(4,))
    ri = verify_bytes(p.read_bytes())
    assert ri.state == "partial" and not ri.problems
    assert [r["header_line"] for r in ri.runs] == [1, 19]
    assert ri.runs[1]["sealed_at"] is not None and ri.runs[0]["sealed_at"] is None


def test_an_unchained_run_appended_after_a_seal_is_its_own_unverified_run(chained, tmp_path):
    """An older servewatch (or an import) appending a run without a digest after a sealed one: not a break; that
    run is unverified and judged on what it holds."""
    old = (dumps({"type": "run", "schema_version": 1, "synthetic": True})
           + dumps({"type": "request", "id": "o1", "t_sent": 1.0, "t_end": 2.0, "complete": True})).encode()
    for data, first in ((chained + old, 19), (old + chained, 1)):
        ri = verify_bytes(data)
        assert ri.state == "partial" and not ri.problems, ri.summary
        unchained = [r for r in ri.runs if not r["chained"]]
        assert [(r["header_line"], r["lines"], r["note"]) for r in unchained] == [(first, 2, "no digest")]
