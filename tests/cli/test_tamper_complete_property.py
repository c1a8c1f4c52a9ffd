"""The property of issues 35 and 36 over this family of edits, seeded: no edit makes `report`'s verdict more
favourable than the honest one unless the output names a problem (an evidence problem, an integrity problem, or a
bad line); no edit exits 70. Favourable, in order: FAIL (1) < not enough evidence (3) < PASS (0); a refusal (exit 2,
e.g. a file of several runs without --run) is never favourable.

The family (docs/record-format.md, "What a file must hold to PASS"): delete the suffix after any step record, delete
any step record, change the type of a step record's field, remove the seal, append lines without a signature or a
header, prepend header-less lines, append a second run without a chain. Honest files: a signed run written in
process (FAIL at concurrency 4), judged with and without its key; the bundled real run (sample_logs/default.jsonl,
an unsigned chain, FAIL); a recorded sweep written before the chain (tests/fixtures/gemma_sweep_short.jsonl, FAIL
at its own 6-s window). The lead's tamper fuzzer (issue 35, "The property, tested") covers every part; this one
covers the parts of "complete or not PASS" and "a signature verifies a run, or nothing".

``SW_TAMPER_CASES`` (default 24 per honest file) scales it; a failing case prints its seed and edit."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tests.support import evidence_files as ef
from tests.support.load_runs import KEY, write_load_run
from tests.support.paths import REPO
from tui.cli import main

VAR = "SW_TAMPER_KEY"
CASES = int(os.environ.get("SW_TAMPER_CASES", "24"))
RANK = {1: 0, 3: 1, 0: 2}  # FAIL < not enough evidence < PASS


def _dump(d: dict) -> bytes:
    return (json.dumps(d, separators=(",", ":")) + "\n").encode()


def made_up(level: int = 8, header: bool = False) -> list[bytes]:
    """Lines that PASS on their own (a level of 660 s, every request good), without any chain."""
    recs = ef.honest_closed(level=level)
    recs[0]["run_id"] = "made-up"
    return [_dump(r) for r in (recs if header else recs[1:])]


def _retype(v: object) -> object:
    if isinstance(v, bool):
        return "true"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return 1
    if isinstance(v, dict):
        return [v]
    return "x"


def edit(lines: list[bytes], rng: random.Random, keyed: bool) -> tuple[str, list[bytes], int | None]:
    """One edit of the family: (what, the edited lines, the run to judge: None = the only one)."""
    steps = [i for i, ln in enumerate(lines) if b'"type":"step"' in ln]
    ends = [i for i in steps if b'"event":"end"' in lines[i]]
    kind = rng.choice(["cut", "drop_step", "retype", "drop_seal", "append", "prepend", "second_run"])
    if kind == "cut":
        i = rng.choice(steps)
        return f"cut after line {i + 1}", lines[:i + 1], None
    if kind == "drop_step":
        i = rng.choice(steps)
        return f"drop step line {i + 1}", lines[:i] + lines[i + 1:], None
    if kind == "retype":
        i = rng.choice(ends)
        d = json.loads(lines[i])
        field = rng.choice([k for k in ("requests", "completed", "failed", "errors", "ttft_p50_ms", "verdict",
                                        "duration_s", "send_overhead_p99_ms", "saturated") if k in d])
        d[field] = _retype(d[field])
        return f"retype {field} on line {i + 1}", lines[:i] + [_dump(d)] + lines[i + 1:], None
    if kind == "drop_seal":
        out = [ln for ln in lines if not ln.startswith(b'{"type":"seal"')]
        return "drop the seal", out, None
    if kind == "append":
        at = rng.choice([len(lines), len(lines) - 1])  # after the seal, or in its place
        extra = made_up(level=rng.choice([8, 16]))
        base = lines if at == len(lines) else lines[:-1] if lines[-1].startswith(b'{"type":"seal"') else lines
        return f"append {len(extra)} lines at {at}", base + extra, None
    if kind == "prepend":
        if rng.random() < 0.5:
            extra = made_up(level=8)[: rng.randint(1, 400)]  # requests: a run of its own ("no header")
            return f"prepend {len(extra)} header-less lines", extra + lines, 2
        extra = [_dump({"type": "queue", "t": ef.T0, "source": "llamacpp", "waiting": 0, "running": 1}),
                 lines[rng.choice(ends)]]  # samples and a copied step record: they belong to the first run
        return "prepend a sample and a copied step record", extra + lines, None
    extra = made_up(header=True)
    # with the key the added run is the one judged (it must not verify); without it, the honest run, judged alone
    return "append a second run without a chain", lines + extra, (2 if keyed else 1)


@pytest.fixture(scope="module")
def honest_files(tmp_path_factory) -> list[tuple[str, Path, tuple[str, ...], bool]]:
    d = tmp_path_factory.mktemp("honest")
    signed = write_load_run(d / "signed.jsonl", key=KEY)
    return [("signed, judged with its key", signed, (), True),
            ("signed, judged without a key", signed, (), False),
            ("the bundled run (unsigned chain)", REPO / "sample_logs" / "default.jsonl", (), False),
            ("a sweep written before the chain", REPO / "tests" / "fixtures" / "gemma_sweep_short.jsonl",
             ("--min-window-minutes", "0.1"), False)]


def judge(capsys, path: Path, extra: tuple[str, ...], keyed: bool, run: int | None) -> tuple[int, list[str]]:
    argv = ["report", "--details", str(path), "--json", *extra] + (["--verify-key-env", VAR] if keyed else []) + (
        ["--run", str(run)] if run else [])
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc != 70, argv
    if rc == 2:
        return -1, ["refused"]
    rep = json.loads(out)
    named = list(rep["evidence"]["problems"]) + list(rep["records_integrity"]["problems"])
    bad = rep["input_problems"]
    if bad["malformed"] or bad["truncated"] or bad["unknown_types"]:
        named.append("bad lines")
    return RANK[rc], named


def test_no_edit_of_the_family_improves_the_verdict_unnamed(honest_files, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(VAR, KEY.decode())
    failures = []
    tried = 0
    for which, (label, path, extra, keyed) in enumerate(honest_files):
        honest, named = judge(capsys, path, extra, keyed, None)
        assert honest == 0 and named == [], (label, named)  # each honest file FAILs, with nothing to name
        lines = path.read_bytes().splitlines(keepends=True)
        for case in range(CASES):
            seed = 3536 * 1000 + which * 100 + case
            what, edited, run = edit(lines, random.Random(seed), keyed)
            p = tmp_path / f"e{which}-{case}.jsonl"
            p.write_bytes(b"".join(edited))
            got, named = judge(capsys, p, extra, keyed, run)
            tried += 1
            if got > honest and not named:
                failures.append(f"seed {seed} ({label}): {what}: rank {got} > {honest}, nothing named")
    assert not failures, "\n".join(failures)
    assert tried == CASES * len(honest_files)
