"""`servewatch import` of every committed file under tests/fixtures/imports gives exactly the outputs recorded in
tests/golden/import_outputs.json (exit code, stdout, stderr, the record file's bytes, the --json summary).

Recorded from main before the importers became descriptors (issue 38), so the reshape is shown to change nothing a
user sees. A deliberate output change rewrites it: ``python3 -m tests.support.import_outputs --write`` (and
``--dump DIR`` before and after shows the difference in full).
"""

from __future__ import annotations

import json

import pytest

from tests.support import import_outputs as O
from tests.support.paths import REPO


def test_every_committed_import_fixture_gives_the_recorded_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    golden = json.loads(O.GOLDEN.read_text(encoding="utf-8"))
    got = O.collect()
    assert len(got) >= 40  # every fixture, summaries and variants included
    assert O.differences(golden, got) == []


def test_the_check_sees_a_changed_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    golden = json.loads(O.GOLDEN.read_text(encoding="utf-8"))
    rel = next(k for k, v in golden.items() if v["exit"] == 0)
    edited = {k: dict(v) for k, v in golden.items()}
    edited[rel]["records_sha256"] = "0" * 64
    edited.pop(next(iter(k for k in golden if k != rel)))
    diff = O.differences(edited, golden)
    assert f"{rel}: records_sha256 differs" in diff
    assert any("a new fixture" in d for d in diff)
