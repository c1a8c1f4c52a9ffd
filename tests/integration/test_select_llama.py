"""issue 40: `servewatch select` on runs made here against real llama-servers (Gemma 3 270M) of different slot
counts and context sizes: the candidates are compared, each judged as `accept` judges it, and the short windows of a
test are not acceptance-grade, so no choice is made (exit 3, the floors named); a candidate of another workload is
refused before anything is ranked. The choice itself on acceptance-grade windows: tests/cli/test_select_cli.py
(runs recorded once, committed)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from tui.cli import main

pytestmark = [pytest.mark.peer, pytest.mark.slow]


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _run(url: str, record, input_tokens: int = 16, levels: str = "1,2") -> None:
    """A short real run (a few requests per level: the test's time is bounded; never acceptance-grade)."""
    rc, out, err = run_cli(["run", "--url", url, "--concurrency", levels, "--requests", "4", "--input-tokens",
                            input_tokens, "--output-tokens", "4", "--ignore-eos", "--slo-ttft-ms", "5000",
                            "--min-window-minutes", "0.05", "--record", record])
    assert rc in (0, 1, 3), err
    assert record.exists()


@pytest.fixture(scope="module")
def runs(llama_server_factory, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("select-runs")
    one = llama_server_factory(slots=1, ctx=2048, extra_args=("-t", "1"))
    two = llama_server_factory(slots=2, ctx=8192, extra_args=("-t", "1"))  # 2 slots of 4096 tokens
    out = {"one": tmp / "one.jsonl", "two": tmp / "two.jsonl", "long-prompts": tmp / "long.jsonl"}
    _run(one.base_url, out["one"])
    _run(two.base_url, out["two"])
    _run(one.base_url, out["long-prompts"], input_tokens=64, levels="1")
    return out


def test_candidates_of_different_slots_and_contexts_are_compared_and_short_windows_never_choose(runs):
    rc, out, _ = run_cli(["select", "--candidate", f"one={runs['one']}", "--candidate", f"two={runs['two']}",
                          "--json"])
    doc = json.loads(out)
    assert rc == 3 and doc["choice"] is None
    assert any("window 0.05 min < 10 min" in g for g in doc["not_acceptance_grade"])
    rows = {r["name"]: r for r in doc["candidates"]}
    assert rows["one"]["ready"] is False and rows["two"]["ready"] is False
    for r in rows.values():  # each as accept says it, with the command that reproduces it
        assert any(x.startswith("Settings: not acceptance-grade") for x in r["reasons"])
        assert r["accept_command"].startswith("servewatch accept --records")
    states = {f["field"]: f["state"] for f in doc["comparability"]["fields"]}
    assert states["workload"] == states["slos"] == states["arrival"] == "same"


def test_a_candidate_of_another_workload_is_refused_naming_it(runs):
    rc, out, _ = run_cli(["select", "--candidate", f"one={runs['one']}", "--candidate",
                          f"long={runs['long-prompts']}"])
    assert rc == 3 and "not comparable: the workload differs" in out and "input: 16 vs 64" in out
