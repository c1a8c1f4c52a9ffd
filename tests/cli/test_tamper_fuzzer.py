"""Issue 35: no edit of the evidence makes the verdict better unless the edit is detected, tested as a property.

The seeded tamper fuzzer (tests/support/tamper.py) edits committed honest files by a grammar that follows the
threat model and runs `report`, `accept`, `compare` (edited vs honest) and `plan` in process. Each case must not
be more favourable than the honest outcome (FAIL < not enough evidence < PASS; a higher measured capacity; fewer
replicas) unless it names a problem the honest output does not, must never PASS where the honest evidence does
not, and must never exit 70. SERVEWATCH_TAMPER_CASES / SERVEWATCH_TAMPER_SEED change the run (bench/tamper_fuzz.py
runs thousands). A failing case is printed with its seed and edits: replay it with
``python3 bench/tamper_fuzz.py --seed S --cases 1 -v``."""

from __future__ import annotations

import os

from tests.support import tamper

CASES = int(os.environ.get("SERVEWATCH_TAMPER_CASES", "300"))
SEED = int(os.environ.get("SERVEWATCH_TAMPER_SEED", "20261206"))


def test_no_edit_of_the_evidence_makes_the_verdict_better_unless_detected(tmp_path):
    cases, failed = tamper.fuzz(CASES, SEED, tmp_path)
    assert len(cases) == CASES
    # the generator reaches every input and every reader (a fuzzer that never edits the signed run proves nothing)
    assert {c.input for c in cases} == {"bundled", "sweep-fixture", "signed", "aiperf", "vllm"}
    assert {c.reader for c in cases} == {"report", "accept", "compare", "plan"}
    assert sum(1 for c in cases if c.edits) > 0.9 * CASES
    assert not failed, "\n".join(f"{c.replay()} :: {c.failed()}" for c in failed[:20])


def test_the_fuzzer_catches_a_favourable_edit_the_readers_would_miss(tmp_path, monkeypatch):
    """Negative control: with the readers' evidence checks switched off (Monitor.finish and the digest chain's
    verdict no-ops), cutting the bundled run after its first level's step record turns its FAIL into a PASS, and the
    property check says so."""
    from tui.core.monitor import Monitor

    monkeypatch.setattr(Monitor, "finish", lambda self: None)
    monkeypatch.setattr(Monitor, "set_records_integrity", lambda self, integrity: None)
    h = {x.name: x for x in tamper.honest_inputs(tmp_path)}["bundled"]
    lines = h.path.read_bytes().splitlines(keepends=True)
    steps = [i for i, ln in enumerate(lines) if b'"type":"step"' in ln and b'"event":"end"' in ln]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[: steps[0] + 1]))
    honest, edited = tamper.report(h.path), tamper.report(cut)
    case = tamper.Case(0, "bundled", "report", [f"cut after line {steps[0] + 1}"], honest, edited)
    assert (honest.code, edited.code) == (1, 0)
    assert case.failed() is not None
