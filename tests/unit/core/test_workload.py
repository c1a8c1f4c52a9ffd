"""The one-line workload description and its differences (issue 23, tui.core.workload): read from hand-written
run headers' load blocks in the schema of docs/record-format.md and the issue-23 contract."""

from __future__ import annotations

import tests.support.evidence_files as ef
from tui.core.lengths import header_block, parse_lengths
from tui.core.workload import compare_block, describe, describe_header, differences, unchecked


def lengths(text: str) -> dict:
    return header_block(parse_lengths(text))


def plain(**over) -> dict:
    load = {"mode": "closed", "levels": [4], "input_tokens": lengths("256"), "output_tokens": lengths("64"),
            "ignore_eos": False, "seed": 1, "cache_policy": {"cache_prompt": False, "why": "prefix caches cannot "
                                                                                     "hide prefill time"}}
    load.update(over)
    return load


SESSIONS = {"turns": lengths("2-6"), "think_time": {"given": "5"},
            "history": "each turn sends the whole conversation so far, with the answers the server gave"}
DATASET = {"name": "example-chat.jsonl", "format": "jsonl-messages", "sha256": "1a2b3c4d" + "0" * 56, "rows": 40,
           "bad_rows": 0, "usable": 40, "skipped_too_long": 0, "context_tokens": 4096,
           "context_source": "server /props", "token_counts": "server /tokenize", "output_tokens": "dataset answers",
           "example": True, "note": ""}


def test_plain_workload():
    assert describe(plain()) == "single requests; input 256; output 64; prompt cache off"


def test_sessions_prefix_and_lengths_as_given():
    load = plain(sessions=SESSIONS, input_tokens=lengths("lognormal:400,0.6"), output_tokens=lengths("128"),
                 shared_prefix={"tokens": 1024, "groups": 4}, cache_policy={"cache_prompt": True, "why": "x"})
    assert describe(load) == ("chat sessions, 2-6 turns, think 5 s; input lognormal:400,0.6; output 128; "
                              "4 shared 1,024-token system prompts; prompt cache on")


def test_think_time_forms():
    assert "think uniform:2-8 s" in describe(plain(sessions={**SESSIONS, "think_time": {"given": "uniform:2-8"}}))
    assert "3 turns, no think time" in describe(plain(sessions={"turns": lengths("3"), "think_time": None}))
    assert "think 0.5 s" in describe(plain(sessions={"turns": lengths("3"), "think_time": 0.5}))
    assert "think time unknown" in describe(plain(sessions={"turns": lengths("3"), "think_time": {"x": 1}}))


def test_one_shared_prefix_is_singular():
    assert "1 shared 512-token system prompt;" in describe(plain(shared_prefix={"tokens": 512, "groups": 1}))


def test_dataset_with_short_sha_and_example_label():
    line = describe(plain(dataset=DATASET))
    assert ("dataset example-chat.jsonl (jsonl-messages, sha256 1a2b3c4d, SYNTHETIC: the example servewatch ships); "
            "input the dataset's prompts; output the dataset's answer lengths") in line
    own = describe(plain(dataset={**DATASET, "example": False, "output_tokens": "--output-tokens"}))
    assert "the example" not in own and "output 64" in own


def test_trace_replay():
    trace = {"file": "requests.jsonl", "sha256": "deadbeef" * 8, "format": "servewatch", "speed": 1.0,
             "window": None, "rows": 10, "skipped": 0}
    line = describe(plain(arrival="trace", trace=trace, input_tokens={"min": 12, "max": 800},
                          output_tokens={"min": 5, "max": 300}, ignore_eos=True))
    assert line == ("single requests; trace replay of requests.jsonl (sha256 deadbeef); input as traced (12-800); "
                    "output as traced (5-300); ignore_eos; prompt cache off")


def test_old_header_reads_as_what_it_was():
    """Before issue 23: {"min", "max"} lengths, no sessions / prefix / dataset / cache policy keys (every request
    then carried cache_prompt: false)."""
    old = {"mode": "closed", "levels": [1, 2], "input_tokens": {"min": 100, "max": 200},
           "output_tokens": {"min": 64, "max": 64}, "ignore_eos": False}
    assert describe(old) == "single requests; input 100-200; output 64; prompt cache off"
    assert differences(old, plain(input_tokens=lengths("100-200"))) == []


def test_unknown_and_synthetic_are_labelled():
    imported = {"type": "run", "schema": "servewatch.record/1", "load": {"mode": "open", "levels": [2.0]},
                "synthetic": False, "source": {"kind": "import", "tool": "guidellm"}}
    assert describe_header(imported) == ("workload not stated by guidellm (an imported file): request shape, lengths "
                                         "and prompt cache unknown")
    hdr = ef.header(**plain())
    hdr["synthetic"] = True
    assert describe_header(hdr) == "SYNTHETIC: single requests; input 256; output 64; prompt cache off"
    assert "ignore_eos unknown" in describe({"input_tokens": lengths("8"), "output_tokens": lengths("8")})
    assert describe({"cache_policy": {"cache_prompt": None, "why": "rejected"}}).endswith(
        "prompt cache: the server's default (cache_prompt not sent)")


def test_differences_in_words():
    a = plain()
    b = plain(sessions=SESSIONS, input_tokens=lengths("normal:400,100[50-800]"), ignore_eos=True,
              shared_prefix={"tokens": 1024, "groups": 4}, cache_policy={"cache_prompt": True, "why": "x"})
    assert differences(a, b) == [
        "request shape: single requests vs chat sessions, 2-6 turns, think 5 s",
        "input: 256 vs normal:400,100[50-800]",
        "ignore_eos: off vs on",
        "shared prefix: none vs 4 shared 1,024-token system prompts",
        "prompt cache: off vs on",
    ]
    assert differences(a, plain(seed=99, levels=[1, 2, 8], mode="open")) == []  # seed, mode, levels: not the workload


def test_differences_see_what_the_line_shortens():
    a = plain(dataset=DATASET)
    b = plain(dataset={**DATASET, "sha256": "1a2b3c4d" + "f" * 56})  # same name and short sha, other bytes
    assert differences(a, b) == ["dataset: dataset example-chat.jsonl (jsonl-messages, sha256 1a2b3c4d, SYNTHETIC: "
                                 "the example servewatch ships) vs dataset example-chat.jsonl (jsonl-messages, "
                                 "sha256 1a2b3c4d, SYNTHETIC: the example servewatch ships)"]
    # the A-B form and uniform:A-B are one distribution
    assert differences(plain(input_tokens=lengths("100-200")), plain(input_tokens=lengths("uniform:100-200"))) == []


def test_parts_a_side_does_not_state_are_unchecked_not_different():
    imported = {"type": "run", "schema": "servewatch.record/1", "load": {"mode": "open", "levels": [2.0]},
                "source": {"kind": "import", "tool": "vllm"}}
    ours = ef.header(**plain())
    assert differences(ours, imported) == []
    assert unchecked(ours, imported) == ["workload"]
    no_eos = ef.header(**{k: v for k, v in plain().items() if k != "ignore_eos"})
    assert unchecked(ours, no_eos) == ["ignore_eos"]
    blk = compare_block(ours, ef.header(**plain(shared_prefix={"tokens": 64, "groups": 2})))
    assert blk["comparable"] is False and blk["allowed"] is False
    assert blk["differences"] == ["shared prefix: none vs 2 shared 64-token system prompts"]
    blk = compare_block(ours, ef.header(**plain(shared_prefix={"tokens": 64, "groups": 2})), allow_different=True)
    assert blk["comparable"] is True and blk["allowed"] is True


def test_turn_table_pools_the_last_row_and_follows_the_outcome():
    from tui.core.turns import TurnTable

    t = TurnTable(cap=3)
    for turn in (1, 2, 3, 4, 9):
        t.add(turn, good=turn != 9, ttft_ms=100.0 * turn, context_tokens=10 * turn, input_tokens=None)
    t.add(1, good=False, ttft_ms=None, context_tokens=None, input_tokens=50)  # a failed first turn
    rows = t.rows()
    assert [r["label"] for r in rows] == ["1", "2", "3+"]
    assert (rows[0]["n"], rows[0]["good"], rows[0]["ttft_ms"]["n"]) == (2, 1, 1)
    assert rows[0]["mean_context_tokens"] == 10 and rows[0]["mean_input_tokens"] == 50
    assert rows[1]["mean_input_tokens"] is None
    assert (rows[2]["n"], rows[2]["good"]) == (3, 2) and rows[2]["mean_context_tokens"] == (30 + 40 + 90) / 3
    assert rows[2]["ttft_ms"]["supported_p95"] is False  # 3 values support no P95


def test_a_dataset_counted_by_estimate_says_so_in_the_line():
    line = describe(plain(dataset={**DATASET, "example": False, "token_counts": "estimate (~4 chars/token)"}))
    assert "token counts estimated" in line and "SYNTHETIC" not in line
    assert "token counts estimated" not in describe(plain(dataset=DATASET))


def test_the_report_line_of_a_dataset_says_what_was_skipped_and_an_unknown_context():
    from tui.core.workload import dataset_line

    known = dataset_line({"load": plain(dataset={**DATASET, "skipped_too_long": 3})})
    assert known == ("dataset: 40 usable of 40 rows (0 bad; 3 skipped as too long for the 4,096-token context "
                     "(server /props)); token counts: server /tokenize; output lengths: dataset answers")
    unknown = dataset_line({"load": plain(dataset={**DATASET, "context_tokens": None, "context_source": None})})
    assert unknown is not None and "context UNKNOWN: nothing skipped" in unknown
    assert dataset_line({"load": plain()}) is None
