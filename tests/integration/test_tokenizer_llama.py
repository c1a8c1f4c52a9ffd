"""Issue 41 against the real peer (llama-server + Gemma 3 270M, the shared session fixture):

- ``--tokenizer``: with a ``tokenizer.json`` converted from the served GGUF itself (tests/support/gguf_tokenizer.py,
  PyPI ``gguf`` + ``tokenizers``, no network), every prompt built is exactly the length asked: on
  ``/v1/completions`` llama-server's ``usage.prompt_tokens`` is the asked length plus the one BOS token the model
  adds (the run header says so); the server's /tokenize agrees with the tokenizer's count.
- ``--api embeddings``: a second llama-server started with ``--embeddings --pooling mean`` (that flag restricts it to
  embeddings answers); every request completes with the model's 640-dimension vector, judged on E2E (the default
  1000 ms SLO, or the one given), TTFT/TPOT/ITL said not judgeable.

Traffic: 8 completions of 1 token, 8 embeddings; bounded by --requests. No timing assertion.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gguf_tokenizer import cached_tokenizer
from tui.cli import main

pytestmark = pytest.mark.slow


def _records(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return lines[0], [d for d in lines if d.get("type") == "request"]


def test_prompt_tokens_are_the_asked_length_plus_bos_with_the_gguf_tokenizer(llama_server, tmp_path, capsys):
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    tok = cached_tokenizer(llama_server.model_path)
    rec = tmp_path / "r.jsonl"
    rc = main(["run", "--url", llama_server.base_url, "--api", "completions", "--concurrency", "2",
               "--requests", "8", "--warmup", "0", "--no-gpu", "--input-tokens", "5-700", "--output-tokens", "1",
               "--seed", "11", "--tokenizer", str(tok), "--record", str(rec), "--slo-ttft-ms", "off"])
    capsys.readouterr()
    assert rc in (0, 1, 3)
    header, reqs = _records(rec)
    pb = header["load"]["prompt_builder"]
    assert pb["method"] == "tokenizer" and pb["tokenizer"]["special_tokens"] == ["<bos>"]
    assert pb["check"]["tokenizer"] == pb["check"]["server_tokenize"] == pb["check"]["asked"]  # /tokenize agrees
    assert len(reqs) == 8 and len({r["input_tokens_asked"] for r in reqs}) > 3
    for r in reqs:
        assert r["complete"], r
        assert r["input_tokens_counted"] == r["input_tokens_asked"]
        assert r["usage_input_tokens"] == r["input_tokens_asked"] + 1, r  # + the BOS the model adds


def test_embeddings_run_against_an_embeddings_server(llama_server_factory, tmp_path, capsys):
    server = llama_server_factory(slots=2, extra_args=("--embeddings", "--pooling", "mean"))
    rec = tmp_path / "e.jsonl"
    rc = main(["run", "--url", server.base_url, "--api", "embeddings", "--concurrency", "2", "--requests", "8",
               "--warmup", "0", "--no-gpu", "--input-tokens", "64", "--slo-e2e-ms", "60000", "--record", str(rec)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc in (0, 1, 3)
    header, reqs = _records(rec)
    assert header["target"]["api"] == "embeddings" and header["target"]["endpoint"].endswith("/v1/embeddings")
    assert header["load"]["output_tokens"] is None
    assert len(reqs) == 8
    for r in reqs:
        assert r["complete"] and r["error"] is None, r
        assert r["embedding_dim"] == 640 and r["t_first_token"] is None and r["usage_input_tokens"] >= 1
    assert "TTFT, TPOT and ITL not judgeable" in out and "E2E <= 60000 ms" in out
    # a TTFT SLO with embeddings is bad usage: one line, exit 2, nothing sent
    assert main(["run", "--url", server.base_url, "--api", "embeddings", "--concurrency", "1", "--requests", "1",
                 "--no-gpu", "--slo-ttft-ms", "500"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
