"""Issue 35, findings 7 and 8, against the real llama-server serving Gemma 3 270M (127.0.0.1; a few requests of a
few tokens: the machine has 2 cores):

- `run --model gpt-4o-2024-08-06` records what the server says it serves (the GGUF, its 268,098,176 parameters and
  2,048-token slot context from /v1/models and /props) beside the flag, prints the mismatch at start, and `accept`
  with a Llama-3-8B budget on a 24 GiB GPU is not acceptance-grade (exit 3) and says why;
- `quality --url http://127.0.0.1:P --baseline-url http://localhost:P` (the same server twice) is the same
  configuration by the servers' own facts, and a long-context case far below the server's context is no evidence.
"""

from __future__ import annotations

import json

from tests.support.paths import TESTS
from tui.cli import main
from tui.core import quality as Q

GEMMA_PARAMS = 268_098_176  # the GGUF's n_params as llama-server states it


def test_a_run_naming_another_model_records_the_served_one_and_accept_refuses_another_models_budget(
        llama_server, tmp_path, capsys):
    rec = tmp_path / "run.jsonl"
    rc = main(["run", "--url", llama_server.base_url, "--model", "gpt-4o-2024-08-06", "--concurrency", "1",
               "--requests", "2", "--input-tokens", "16", "--output-tokens", "4", "--warmup", "0",
               "--read-timeout", "120", "--record", str(rec), "--min-window-minutes", "0"])
    out = capsys.readouterr().out
    assert rc in (0, 1, 3), out
    assert "WARNING: the run claims model 'gpt-4o-2024-08-06' but the server said it serves" in out
    hdr = json.loads(rec.read_text().splitlines()[0])
    sid = hdr["server_identity"]
    assert sid["model"] == str(llama_server.model_path) and sid["engine"] == "llamacpp"
    assert sid["params"] == GEMMA_PARAMS and sid["context"] == llama_server.ctx // llama_server.slots
    assert sid["source"] == "/v1/models (meta)" and hdr["target"]["model"] == "gpt-4o-2024-08-06"
    no_gpu = (hdr["environment"].get("gpu") or {}).get("gpu") == "none"
    rc = main(["accept", "--records", str(rec), "--config", str(TESTS / "configs" / "llama-3-8b.json"),
               "--gpu-gib", "24", "--min-window-minutes", "0", "--out", str(tmp_path / "acc")])
    doc = json.loads((tmp_path / "acc" / "acceptance.json").read_text())
    problems = " ".join(doc["identity"]["problems"])
    # never ready: exit 3 for the identity, or 1 when the short run also FAILed its SLO on a busy 2-core machine
    assert rc in (1, 3) and not doc["conclusion"]["ready_for_traffic"]
    assert any(x.startswith("Identity: not acceptance-grade") for x in doc["conclusion"]["missing_or_failed"])
    assert "the run claims model 'gpt-4o-2024-08-06'" in problems
    assert "the budget's model has 8.03B parameters, the server states 268M" in problems
    if no_gpu:  # this machine has no NVIDIA GPU: the header says so, and the server runs here (127.0.0.1)
        assert "a GPU budget (24 GiB) for a run whose header says no GPU was seen" in problems


def test_the_same_server_under_two_urls_is_the_same_configuration(llama_server, tmp_path, capsys):
    port = llama_server.port
    team = tmp_path / "set.jsonl"
    team.write_text(
        '{"id": "add", "category": "arithmetic", "messages": [{"role": "user", "content": "What is 2 + 3? Answer '
        'with the number only."}], "max_tokens": 8, "checks": [{"type": "number", "value": 5}]}\n'
        '{"generate": "long_context", "id": "code", "fact": "The access code is 7319.", "question": "What is the '
        'access code? Answer with the number only.", "answer": "7319", "depths": [0.5], "tokens": 200}\n')
    out = tmp_path / "q.json"
    rc = main(["quality", "--url", f"http://127.0.0.1:{port}", "--baseline-url", f"http://localhost:{port}",
               "--set", str(team), "--timeout", "120", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert rc == 3 and doc["verdict"]["state"] in (Q.NO_EVIDENCE, Q.FAIL)
    for side in ("candidate", "baseline"):
        assert doc[side]["server_identity"]["model"] == str(llama_server.model_path)
    why = " ".join(doc["acceptance_grade"]["problems"])
    assert "the same configuration by their servers' own facts" in why and "engine llamacpp" in why
    # a 200-token "long-context" case on a server with 2048 tokens per slot is short of every declared share
    assert "below their declared share of the server's 2048-token context" in why
    assert doc["integrity"]["format"] == "servewatch.quality-digest/1"
