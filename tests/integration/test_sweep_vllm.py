"""`servewatch sweep` against the second real peer: vLLM 0.32 (CPU) + SmolLM2-135M, ``--max-num-seqs 4``.

Small and bounded (the session's one ``vllm_server``): ladder 2 -> 8, 16-token prompts, 24 output tokens, a lowered
target (0.5, at least 8 requests) so that a PASS needs few requests. The SLO is calibrated to this machine first,
as the llama.cpp sweep does (``tests/support/calibrate.py``): between 3 x the TTFT of a request served at once and
0.6 of a whole request's time, so a request that vLLM schedules at once meets it and one that waits behind a full
batch of 4 misses it. At 2 clients no request waits (2 <= 4 sequences); at 8, four of them wait for a sequence to
finish. The assertions read the records and the sweep table, never a wall-clock speed.
"""

from __future__ import annotations

import json

from tests.support.calibrate import measure_peer, slo_between
from tui.cli import main
from tui.core.chain import verify_bytes
from tui.core.records import QueueSample, RequestRecord, read_file

OUT = 24


def test_sweep_finds_the_level_where_vllm_queueing_breaks_the_gate(vllm_server, tmp_path, capsys):
    record = tmp_path / "sweep.jsonl"
    table = tmp_path / "sweep.json"
    speed = measure_peer(vllm_server.openai_url, prompt_words=16, output_tokens=OUT, model=vllm_server.model)
    slo_ms = slo_between(speed)
    step_s = min(300.0, max(60.0, 60.0 * max(speed.e2e_s)))  # a step ends when decided; this caps a slow one
    why = f"{speed}; SLO {slo_ms:.0f} ms; step cap {step_s:.0f} s"
    rc = main([
        "sweep", "--url", vllm_server.base_url, "--concurrency", "2,8", "--input-tokens", "16",
        "--output-tokens", str(OUT), "--ignore-eos", "--target", "0.5", "--min-requests", "8",
        "--slo-ttft-ms", f"{slo_ms:.0f}", "--min-window-minutes", "0", "--max-step-seconds", f"{step_s:.0f}",
        "--metrics-interval", "0.2", "--record", str(record), "--sweep-json", str(table), "--no-gpu",
        "--api-key-env", "SW_TEST_NO_KEY",
    ])
    out = capsys.readouterr().out
    s = json.loads(table.read_text())
    by_level = {row["level"]: row for row in s["levels"]}
    assert set(by_level) == {2.0, 8.0}, (by_level, why)
    items = list(read_file(str(record)))
    reqs = [r for r in items if isinstance(r, RequestRecord) and r.phase == "measure"]
    assert len({r.id for r in reqs}) == len(reqs)  # each request once
    assert verify_bytes(record.read_bytes()).state == "intact"  # the digest chain verifies
    for level, row in by_level.items():  # the verdicts follow from the records
        mine = [r for r in reqs if r.level == level]
        assert row["n"] == len(mine) > 0
        assert row["good_fraction"] == sum(r.is_good(round(slo_ms) / 1000.0) for r in mine) / len(mine)
    assert by_level[2.0]["verdict"] == "PASS", why
    assert by_level[8.0]["verdict"] in ("FAIL", "UNDECIDED"), why
    assert by_level[8.0]["good_fraction"] < by_level[2.0]["good_fraction"], why
    assert s["measured_capacity"] == 2.0 and rc == 0, why
    # vLLM queued requests during the step at 8 (its own gauge), and the sweep says so; none at 2
    assert by_level[8.0]["max_waiting"] and by_level[8.0]["max_waiting"] > 0, by_level[8.0]
    assert by_level[2.0]["max_waiting"] == 0, by_level[2.0]  # sampled, and never a request waiting
    assert any(isinstance(q, QueueSample) and q.source == "vllm" and q.waiting for q in items)
    assert "measured capacity: 2" in out and "memory-only candidate: unknown" in out
    assert "queueing" in " ".join(s["limits"]).lower()
