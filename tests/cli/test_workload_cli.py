"""The workload line in `report`, `compare` and `accept`, compare's refusal of two runs whose workloads differ
(and --allow-different-workload), and the report's per-turn table (issue 23). Hand-written record files in the
record schema (tests/support/evidence_files.py, tests/support/session_files.py)."""

from __future__ import annotations

import json

import tests.support.evidence_files as ef
import tests.support.session_files as sf
from tui.cli import main
from tui.core.lengths import header_block, parse_lengths

PLAIN = {"input_tokens": header_block(parse_lengths("256")), "output_tokens": header_block(parse_lengths("64")),
         "ignore_eos": False, "cache_policy": {"cache_prompt": False, "why": "prefix caches cannot hide prefill"}}
PLAIN_LINE = "single requests; input 256; output 64; prompt cache off"
PREFIX = {**PLAIN, "shared_prefix": {"tokens": 1024, "groups": 4},
          "cache_policy": {"cache_prompt": True, "why": "shared prefixes"}}


def run_file(tmp_path, name: str, load: dict) -> str:
    recs = ef.another_run(ef.honest_closed(), seed=sum(map(ord, name)))  # each file its own run
    recs[0]["load"].update(load)
    return str(ef.write(tmp_path / name, recs))


def compare(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["compare", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_report_prints_the_workload_line(tmp_path, capsys):
    path = run_file(tmp_path, "a.jsonl", PLAIN)
    assert main(["report", "--details", path]) == 0
    assert f"workload: {PLAIN_LINE}\n" in capsys.readouterr().out
    main(["report", "--details", path, "--json"])
    assert json.loads(capsys.readouterr().out)["workload"] == {"text": PLAIN_LINE}


def test_compare_of_the_same_workload_compares(tmp_path, capsys):
    a, b = run_file(tmp_path, "a.jsonl", PLAIN), run_file(tmp_path, "b.jsonl", PLAIN)
    rc, res = compare(capsys, a, b)
    assert rc == 0 and res["verdict"] == "NOT WORSE"
    assert res["workload"]["differences"] == [] and res["workload"]["comparable"] is True
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert f"- base workload: {PLAIN_LINE}\n" in out and f"- candidate workload: {PLAIN_LINE}\n" in out


def test_compare_refuses_different_workloads(tmp_path, capsys):
    a, b = run_file(tmp_path, "a.jsonl", PLAIN), run_file(tmp_path, "b.jsonl", PREFIX)
    rc, res = compare(capsys, a, b)
    assert rc == 3 and res["verdict"] == "NOT ENOUGH EVIDENCE"  # the records alone would say NOT WORSE
    assert res["reason"].startswith("not comparable: the workloads differ (shared prefix: none vs 4 shared "
                                    "1,024-token system prompts; prompt cache: off vs on)")
    assert [r["verdict"] for r in res["levels"]] == ["NOT ENOUGH EVIDENCE"]
    assert [r["verdict_if_comparable"] for r in res["levels"]] == ["NOT WORSE"]
    assert res["workload"]["comparable"] is False
    assert main(["compare", a, b]) == 3
    out = capsys.readouterr().out
    assert "- candidate workload: single requests; input 256; output 64; 4 shared 1,024-token system prompts; " \
           "prompt cache on" in out
    assert "--allow-different workload compares them anyway" in out


def test_compare_with_the_flag_compares_and_warns(tmp_path, capsys):
    a, b = run_file(tmp_path, "a.jsonl", PLAIN), run_file(tmp_path, "b.jsonl", PREFIX)
    rc, res = compare(capsys, a, b, "--allow-different-workload")
    assert rc == 0 and res["verdict"] == "NOT WORSE"
    assert res["workload"]["allowed"] is True
    assert any(w.startswith("the workloads differ (compared anyway: --allow-different workload): shared prefix")
               for w in res["warnings"])
    assert main(["compare", a, b, "--allow-different-workload"]) == 0
    assert "> WARNING: the workloads differ (compared anyway" in capsys.readouterr().out


def test_accept_prints_each_runs_workload(tmp_path, capsys):
    path = run_file(tmp_path, "a.jsonl", PLAIN)
    assert main(["accept", "--records", path, "--out", str(tmp_path / "acc"), "--no-html"]) in (0, 3)
    out = capsys.readouterr().out
    assert f"  workload of {path}: {PLAIN_LINE}\n" in out
    md = (tmp_path / "acc" / "acceptance.md").read_text()
    assert f"Workload of `{path}`: {PLAIN_LINE}" in md
    doc = json.loads((tmp_path / "acc" / "acceptance.json").read_text())
    assert doc["load_configuration"][0]["workload"] == PLAIN_LINE


def test_report_per_turn_table(tmp_path, capsys):
    # turn 1 fast, turns 2+ slow past the 1000 ms SLO on every third session: the table shows it per turn
    recs = sf.closed_sessions(4, turns=(3, 3), ttft=lambda k: 0.2 if k == 1 else 0.6)
    for r in recs:
        if r["type"] == "request" and r["turn"] == 3 and int(r["session"].rsplit("s", 1)[1]) % 3 == 0:
            r["t_first_token"] = r["t_sent"] + min(1.5, r["t_end"] - r["t_sent"])
    path = ef.write(tmp_path / "turns.jsonl", recs)
    main(["report", "--details", str(path), "--json"])
    rep = json.loads(capsys.readouterr().out)
    rows = rep["measured"]["turns"]
    assert [t["turn"] for t in rows] == [1, 2, 3]
    reqs = [r for r in recs if r["type"] == "request"]
    for t in rows:
        mine = [r for r in reqs if r["turn"] == t["turn"]]
        assert t["n"] == len(mine)
        assert t["mean_context_tokens"] == sum(r["context_tokens"] for r in mine) / len(mine)
        assert t["mean_input_tokens"] == sum(r["input_tokens"] for r in mine) / len(mine)
    assert rows[0]["good_fraction"] == 1.0 and rows[1]["good_fraction"] == 1.0
    slow3 = sum(1 for r in reqs if r["turn"] == 3 and r["t_first_token"] - r["t_sent"] > 1.0)
    assert slow3 > 0 and rows[2]["good"] == rows[2]["n"] - slow3
    assert round(rows[0]["ttft_ms"]["p50"]) == 200 and round(rows[1]["ttft_ms"]["p95"]) == 600
    # the verdict still judges all turns together: the level's good fraction is over every request
    w = rep["measured"]["window"]
    assert w["n"] == len(reqs) and w["good"] == len(reqs) - slow3
    main(["report", "--details", str(path)])
    out = capsys.readouterr().out
    assert "per turn (session workload" in out
    assert "turn  requests   good%  TTFT P50 ms  TTFT P95 ms  mean context tokens  mean input tokens" in out
    # the header (tests/support/session_files.py) names the turns and no lengths, ignore_eos or cache policy
    assert ("workload: chat sessions, 3 turns, no think time; input unknown; output unknown; ignore_eos unknown; "
            "prompt cache unknown\n") in out


def test_report_without_turns_has_no_table(tmp_path, capsys):
    main(["report", "--details", run_file(tmp_path, "a.jsonl", PLAIN), "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["measured"]["turns"] is None and all(lv["turns"] is None for lv in rep["levels"])


def test_report_of_the_bundled_real_session_recording_says_what_its_workload_was(capsys):
    from tests.support.paths import REPO

    rc = main(["report", "--details", str(REPO / "sample_logs" / "traces" / "sessions-llama.jsonl")])
    out = capsys.readouterr().out
    assert rc == 3  # 90 s of a 10-min window: not enough to judge
    assert ("workload: chat sessions, 2-3 turns, think uniform:1-3 s; dataset example-chat.jsonl (jsonl-messages, "
            "sha256 10f4da57, SYNTHETIC: the example servewatch ships)") in out
    assert "dataset: 60 usable of 60 rows (0 bad; 0 skipped as too long for the 2,048-token context" in out
    assert "  dataset note: servewatch's example dataset (SYNTHETIC" in out
    assert "load delivered: achieved 0.635 sessions/s (label 0.6)" in out  # measured in sessions, not requests
    assert "per turn (session workload" in out
    assert "Prefix cache" in out and "llama.cpp timings.cache_n" in out  # what the server said it served
