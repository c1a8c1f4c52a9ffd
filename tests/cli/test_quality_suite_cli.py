"""`servewatch quality` with the standard suite against an in-test OpenAI-compatible server (exact answers on
demand): the suite is the default, its context is read from the server (else --max-context, else a usage error),
a saved baseline's cases run at the baseline's lengths (too long for the candidate: sent and failed, never
skipped), a failing category is named with advice, required categories gate PASS, and --repeat scores the majority."""

from __future__ import annotations

import json

import pytest

from tests.support.fake_openai import FakeOpenAI
from tui.cli import main
from tui.core import quality as Q

# every test here starts a process or a listening server (tests/conftest.py checks it)
pytestmark = pytest.mark.slow

N = 80


def _qset(ctx: int = 2048, n: int = N) -> Q.QualitySet:
    return Q.build_suite(Q.SuiteSpec(cases=n, context_tokens=ctx, chars_per_token=4.0))


def _rc(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own refusals
        return int(exc.code or 0)


def _run(tmp_path, name, *argv) -> tuple[int, dict]:
    out = tmp_path / f"{name}.json"
    rc = main(["quality", *argv, "--out", str(out)])
    return rc, json.loads(out.read_text())


def test_suite_is_the_default_context_from_the_server_and_same_config_passes(tmp_path):
    n = 150  # 60 long-context cases: the required long_context category can PASS on its own (59 pairs needed)
    with FakeOpenAI(_qset(n=n)) as srv:
        rc, base = _run(tmp_path, "base", "--url", srv.url, "--cases", str(n), "--setting", "kv_cache=f16")
        assert rc == 3 and base["verdict"]["state"] == Q.NO_BASELINE
        assert base["set"]["suite"]["context_tokens"] == 2048 and base["set"]["suite"]["cases"] == n
        assert base["candidate"]["server"]["context_tokens"] == 2048
        assert "n_ctx" in base["candidate"]["server"]["context_source"]
        assert base["candidate"]["overall"]["passed"] == n  # the fake answers every case right
        assert base["decoding"]["deterministic"] is True and base["decoding"]["repeat"] == 1
        rc, same = _run(tmp_path, "same", "--url", srv.url, "--baseline", str(tmp_path / "base.json"))
    assert rc == 0 and same["verdict"]["state"] == Q.PASS
    assert same["set"]["fingerprint"] == base["set"]["fingerprint"]
    assert set(same["comparison"]["per_category"]) == set(Q.CATEGORIES)
    assert same["set"]["required"] == ["long_context"] and same["comparison"]["per_category"]["long_context"]["state"] == Q.PASS
    # the same server against itself: the regression verdict PASSes, and it is not acceptance-grade (issue 35)
    why = " ".join(same["acceptance_grade"]["problems"])
    assert same["acceptance_grade"]["acceptance_grade"] is False
    assert "the same configuration by their servers' own facts" in why


def test_short_context_candidate_fails_long_context_sent_not_skipped(tmp_path):
    with FakeOpenAI(_qset()) as srv:
        _run(tmp_path, "base", "--url", srv.url, "--cases", str(N))
    with FakeOpenAI(_qset(), n_ctx=512) as short:
        rc, doc = _run(tmp_path, "short", "--url", short.url, "--baseline", str(tmp_path / "base.json"))
        sent = short.requests
    assert sent == N  # every case sent, the too-long ones included
    assert rc == 1 and doc["verdict"]["state"] == Q.FAIL and "long_context" in doc["verdict"]["failed_categories"]
    assert doc["candidate"]["long_context_reached"]["rejected_too_long"] > 0
    assert any("exceed the candidate's 512-token context" in n for n in doc["notes"])
    assert "context" in json.dumps(doc["verdict"]["advice"])
    by_len = {r["target_tokens"]: r for r in doc["long_context"]["by_length"]}
    assert by_len[512]["candidate_passed"] == 0 and by_len[1843]["baseline_passed"] == by_len[1843]["n"]


def test_a_failing_required_category_and_the_kv_advice(tmp_path):
    with FakeOpenAI(_qset()) as srv:
        _run(tmp_path, "base", "--url", srv.url, "--cases", str(N), "--setting", "kv_cache=f16")
    with FakeOpenAI(_qset(), wrong=frozenset({"extraction"})) as bad:
        rc, doc = _run(tmp_path, "bad", "--url", bad.url, "--baseline", str(tmp_path / "base.json"),
                       "--setting", "kv_cache=q4_0", "--required", "extraction")
    per = doc["comparison"]["per_category"]
    assert per["extraction"]["required"] is True and per["extraction"]["state"] != Q.PASS
    assert doc["verdict"]["state"] != Q.PASS and rc != 0
    assert "extraction" in json.dumps(doc["verdict"])


def test_repeat_scores_the_majority_and_is_recorded(tmp_path):
    with FakeOpenAI(_qset()) as srv:
        rc, doc = _run(tmp_path, "rep", "--url", srv.url, "--cases", str(N), "--repeat", "3")
        assert srv.requests == 3 * N
    assert doc["decoding"]["repeat"] == 3 and all(r["repeats"]["k"] == 3 for r in doc["candidate"]["cases"])


@pytest.mark.parametrize("argv, needle", [
    (["--cases", "5"], "--cases"),
    (["--repeat", "40"], "--repeat"),
    (["--required", "nope"], "--required nope"),
    (["--setting", "colour=blue"], "unknown setting"),
    (["--setting", "novalue"], "KEY=VALUE"),
    (["--suite", "none"], "--suite none needs --set"),
])
def test_bad_usage_is_one_line_exit_2(tmp_path, capsys, argv, needle):
    with FakeOpenAI(_qset()) as srv:
        rc = _rc(["quality", "--url", srv.url, "--out", str(tmp_path / "x.json"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3


def test_server_without_context_needs_max_context(tmp_path, capsys):
    with FakeOpenAI(_qset(), n_ctx=None) as srv:
        rc = _rc(["quality", "--url", srv.url, "--out", str(tmp_path / "x.json")])
        assert rc == 2 and "--max-context" in capsys.readouterr().err
        assert srv.requests == 0
        rc, doc = _run(tmp_path, "given", "--url", srv.url, "--cases", str(N), "--long-context-tokens", "2048")
    assert doc["set"]["suite"]["context_tokens"] == 2048 and doc["set"]["suite"]["context_source"] == "--max-context"
    assert rc == 3


def test_a_baseline_that_ran_a_team_set_needs_that_set(tmp_path, capsys):
    base = tmp_path / "team-base.json"
    base.write_text(json.dumps({"schema": "servewatch.quality/1", "set": {"suite": None},
                                "candidate": {"cases": [{"id": "a", "passed": True, "category": "x"}]}}))
    with FakeOpenAI(_qset()) as srv:
        rc = _rc(["quality", "--url", srv.url, "--baseline", str(base), "--out", str(tmp_path / "x.json")])
        assert srv.requests == 0
    assert rc == 2 and "ran no standard suite" in capsys.readouterr().err
