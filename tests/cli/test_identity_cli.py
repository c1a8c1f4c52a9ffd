"""Issue 35, "Identity from the server, not the flag" (finding 7) and "Quality evidence held to the same standard"
(finding 8), through the commands, against in-test servers on 127.0.0.1 that describe themselves as llama.cpp, vLLM,
SGLang or TGI (tests.support.engine_pages; the real llama-server peer: tests/integration/test_identity_llama.py).

Each test here fails on 1a6ea7a: the served model was never recorded nor checked, accept tied load and quality by
``--model``, a budget of another model or a GPU budget for a run without a GPU fed "ready", quality compared URL
strings, and a quality file carried no digest.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.cli.test_accept import accept
from tests.cli.test_evidence_cli import run_lines, write
from tests.cli.test_plan_cli import _open_sweep
from tests.support import quality_files as QF
from tests.support.fake_openai import FakeOpenAI
from tests.support.fault_server import FaultServer
from tests.support.paths import TESTS
from tui.cli import main
from tui.core import quality as Q
from tui.core.quality.digest import seal

LLAMA3_8B = str(TESTS / "configs" / "llama-3-8b.json")
GEMMA = "/models/gemma-3-270m-q4_k_m.gguf"
GEMMA_SID = QF.server_identity(GEMMA)  # llama.cpp's meta: 268,098,176 parameters
KEY = "identity-test-signing-key"


def _records(path: Path, *, model: str = GEMMA, sid: dict | None = GEMMA_SID, gpu: dict | None = None) -> Path:
    """An honest 700-request run (past the default window) whose header says what the server serves, and no GPU."""
    lines = run_lines()
    lines[0]["target"]["model"] = model
    lines[0]["environment"] = {"python": "3.11", "server": QF.server_env(GEMMA),
                               "gpu": gpu or {"gpu": "none", "reason": "no GPU telemetry: NVML library not found"}}
    if sid is not None:
        lines[0]["server_identity"] = sid
    return write(path, lines)


def _quality(path: Path, **kw) -> Path:
    rows = QF.key_rows(True) + QF.lc_rows(True)
    return QF.write_doc(path, QF.quality_doc(rows, [dict(r) for r in rows], model=GEMMA, served=GEMMA, **kw))


# ------------------------------------------------------------------ finding 7: the served model, recorded and checked


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_flag_naming_another_model_is_recorded_beside_the_served_one_and_printed_at_start(tmp_path, capsys, command):
    rec = tmp_path / "run.jsonl"
    with FaultServer() as fs:
        # 20 ms to the first token: the server holds the concurrency the run is labelled with (tui.core.evidence)
        url = fs.url("ok", tokens=2, first_delay=0.02, engine="vllm", served="Qwen2.5-0.5B-Instruct")
        argv = [command, "--url", url, "--model", "gpt-4o-2024-08-06", "--concurrency", "1", "--requests", "100",
                "--no-gpu", "--record", str(rec), "--min-window-minutes", "0", "--warmup", "0"]
        main(argv)
    out, _err = capsys.readouterr()
    start = out.index("WARNING: the run claims model 'gpt-4o-2024-08-06' but the server said it serves "
                      "'Qwen2.5-0.5B-Instruct'")
    assert start < out.index("step 1/")  # at start, before any load; the run goes on
    hdr = json.loads(rec.read_text().splitlines()[0])
    sid = hdr["server_identity"]
    assert (sid["model"], sid["engine"], sid["build"], sid["source"]) == ("Qwen2.5-0.5B-Instruct", "vllm", "0.9.1",
                                                                         "/v1/models")
    assert hdr["target"]["model"] == "gpt-4o-2024-08-06"  # the flag, kept beside it
    if command == "run":  # its report marks the PASS: the evidence is about another model than the one named
        assert "not acceptance-grade: window 0 min < 10 min, the run claims model 'gpt-4o-2024-08-06'" in " ".join(
            out.split())  # the short report wraps its lines at 120
    assert main(["report", "--details", str(rec), "--min-window-minutes", "0"]) in (0, 1, 3)
    text = capsys.readouterr().out
    assert "identity: model Qwen2.5-0.5B-Instruct (served; gpt-4o-2024-08-06 claimed), engine vllm 0.9.1" in text
    assert "WARNING: the run claims model 'gpt-4o-2024-08-06'" in text


def test_accept_ties_load_and_quality_by_the_served_model_not_the_flag(tmp_path):
    """The load run named gpt-4o and the quality run named it too: the same flag, different served models."""
    rec = _records(tmp_path / "run.jsonl", model="gpt-4o-2024-08-06")
    other = QF.server_identity("/models/llama-3-8b-q4.gguf", params=8_030_261_248)
    q = QF.write_doc(tmp_path / "q.json", QF.quality_doc(
        QF.key_rows(True) + QF.lc_rows(True), QF.key_rows(True) + QF.lc_rows(True), model="gpt-4o-2024-08-06",
        served="/models/llama-3-8b-q4.gguf", cand_identity=other))
    rc, doc, md, _ = accept(tmp_path, "--records", str(rec), "--quality", str(q))
    assert rc == 3 and not doc["conclusion"]["ready_for_traffic"]
    why = " ".join(doc["quality"]["not_acceptance_grade"])
    assert f"served model /models/llama-3-8b-q4.gguf, the load against {GEMMA}" in why
    ident = " ".join(doc["identity"]["problems"])
    assert "the run claims model 'gpt-4o-2024-08-06' but the server said it serves" in ident
    assert any(x.startswith("Identity: not acceptance-grade (") for x in doc["conclusion"]["missing_or_failed"])
    assert "NOT acceptance-grade: the run claims model 'gpt-4o-2024-08-06'" in md  # readable (md() escapes only what markdown acts on)


def test_a_llama_3_8b_budget_for_a_gemma_270m_run_without_gpu_is_never_ready(tmp_path, capsys):
    """Finding 7: before, the budget fitted (8B bf16 on 24 GiB), the run PASSed, quality PASSed: "ready"."""
    rec = _records(tmp_path / "run.jsonl")
    q = _quality(tmp_path / "q.json")
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(q))  # no budget: unknown, not ready
    assert doc["quality"]["not_acceptance_grade"] == [] and doc["identity"]["problems"] == []
    rc, doc, md, _ = accept(tmp_path, "--records", str(rec), "--quality", str(q), "--config", LLAMA3_8B,
                           "--gpu-gib", "24")
    out = capsys.readouterr().out
    assert doc["conclusion"]["budget"] == "feasible" and doc["conclusion"]["measured"] == "PASS"
    assert doc["conclusion"]["quality"] == "PASS"
    assert rc == 3 and doc["conclusion"]["ready_for_traffic"] is False
    text = " ".join(doc["identity"]["problems"])
    assert "the budget's model has 8.03B parameters, the server states 268M" in text
    assert "a GPU budget (24 GiB) for a run whose header says no GPU was seen" in text
    assert "Identity: not acceptance-grade" in out and "not checked" not in text
    # the same run with the served model's own budget and its GPU recorded: ready
    gpu = {"gpu": "nvidia", "devices": [{"index": 0, "name": "NVIDIA L4", "memory_total": 24 * 2**30}]}
    rec2 = _records(tmp_path / "gpu.jsonl", gpu=gpu)
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec2), "--quality", str(q), "--config",
                           str(TESTS / "configs" / "gemma-3-270m.json"), "--gpu-gib", "24")
    assert rc == 0 and doc["conclusion"]["ready_for_traffic"] is True, doc["conclusion"]["missing_or_failed"]
    # a server that states no parameter count: "not checked", said, never guessed
    rec3 = _records(tmp_path / "vllm.jsonl", gpu=gpu, sid=dict(GEMMA_SID, params=None, engine="vllm"))
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec3), "--quality", str(q), "--config", LLAMA3_8B,
                           "--gpu-gib", "24")
    assert any("states no parameter or layer count" in n for n in doc["identity"]["budget"]["not_checked"])


def test_plan_refuses_a_budget_of_another_model_and_a_gpu_budget_without_gpu(tmp_path, capsys):
    sweep = _open_sweep(tmp_path)
    lines = [json.loads(x) for x in sweep.read_text().splitlines()]
    lines[0]["server_identity"] = dict(GEMMA_SID, model="m")
    lines[0]["environment"] = {"gpu": {"gpu": "none", "reason": "NVML library not found"}}
    sweep.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["plan", "--records", str(sweep), "--peak-rate", "10"]) == 0  # no budget: the plan stands
    capsys.readouterr()
    rc = main(["plan", "--records", str(sweep), "--peak-rate", "10", "--params", "8B", "--gpu-gib", "24", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 3 and doc["exit"]["code"] == 3
    assert "not acceptance-grade: the budget's model has 8B parameters, the server states 268M" in doc["exit"]["why"]
    assert "no GPU" in doc["exit"]["why"]


# ------------------------------------------------------------------ finding 8: quality held to the same standard


def _qset(n: int, ctx: int) -> Q.QualitySet:
    return Q.build_suite(Q.SuiteSpec(cases=n, context_tokens=ctx, chars_per_token=4.0))


def test_the_same_server_under_two_urls_with_long_context_at_230_tokens_is_never_ready(tmp_path, capsys):
    """Finding 8 as filed: --url http://127.0.0.1:P --baseline-url http://localhost:P, the suite sized for 256 tokens
    (long-context prompts of 64 to 230 tokens) on a 2,048-token server that fails every long-context case: PASS and
    "ready" before; now NO_EVIDENCE (the long-context category is required and has no evidence), not acceptance-grade
    (the same configuration by the servers' facts; long context short of the server's context)."""
    n = 150
    with FakeOpenAI(_qset(n, 256), n_ctx=2048, wrong=frozenset({"long_context"})) as srv:
        port = srv.url.rsplit(":", 1)[1]
        out = tmp_path / "q.json"
        rc = main(["quality", "--url", f"http://127.0.0.1:{port}", "--baseline-url", f"http://localhost:{port}",
                   "--cases", str(n), "--max-context", "256", "--out", str(out)])
    doc = json.loads(out.read_text())
    lc = doc["comparison"]["per_category"]["long_context"]
    assert lc["state"] == Q.NO_EVIDENCE and lc["required"] is True and lc["not_evidence"]["short"] == 60
    assert rc == 3 and doc["verdict"]["state"] == Q.NO_EVIDENCE
    why = " ".join(doc["acceptance_grade"]["problems"])
    assert "the same configuration by their servers' own facts" in why
    assert "below their declared share of the server's 2048-token context" in why
    assert doc["integrity"]["value"] and "not acceptance-grade" in capsys.readouterr().out
    rec = _records(tmp_path / "run.jsonl", model="fake-model", sid=QF.server_identity("fake-model"))
    rc, adoc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(out))
    assert rc == 3 and adoc["conclusion"]["quality"] == Q.NO_EVIDENCE and not adoc["conclusion"]["ready_for_traffic"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
def test_quality_records_each_engines_served_model_and_names_a_flag_it_does_not_serve(tmp_path, capsys, engine):
    qset = _qset(20, 2048)
    with FakeOpenAI(qset, engine=engine, served="served-model") as srv:
        out = tmp_path / "q.json"
        main(["quality", "--url", srv.url, "--model", "gpt-4o", "--cases", "20", "--max-context", "2048",
              "--out", str(out)])
    err = capsys.readouterr().err
    doc = json.loads(out.read_text())
    sid = doc["candidate"]["server_identity"]
    assert sid["engine"] == engine and sid["model"] == "served-model" and doc["candidate"]["target"]["model"] == "gpt-4o"
    assert "WARNING: candidate: it claims model 'gpt-4o' but the server said it serves 'served-model'" in err
    assert any("quality candidate: it claims model 'gpt-4o'" in p for p in doc["acceptance_grade"]["problems"])


def _saved_baseline(tmp_path: Path, monkeypatch, *, sign: bool) -> tuple[Path, Q.QualitySet]:
    qset = _qset(20, 2048)
    base = tmp_path / "base.json"
    monkeypatch.setenv("SW_Q_KEY", KEY)
    with FakeOpenAI(qset) as srv:
        main(["quality", "--url", srv.url, "--cases", "20", "--out", str(base), *(["--sign-key-env", "SW_Q_KEY"]
                                                                                 if sign else [])])
    return base, qset


def test_a_saved_baseline_is_verified_before_it_is_used(tmp_path, capsys, monkeypatch):
    base, qset = _saved_baseline(tmp_path, monkeypatch, sign=True)
    doc = json.loads(base.read_text())
    assert doc["integrity"]["key_id"] and KEY not in base.read_text()
    variants = {}
    flip = copy.deepcopy(doc)
    flip["candidate"]["cases"][0]["passed"] = not flip["candidate"]["cases"][0]["passed"]
    variants["edited"] = flip  # the digest no longer matches
    variants["redigested"] = seal(flip)  # a digest anyone can recompute: the signature is gone
    cut = copy.deepcopy(doc)
    del cut["candidate"]["cases"][5:]
    variants["rows dropped, redigested"] = seal(cut)
    with FakeOpenAI(qset) as srv:
        for name, bad in variants.items():
            p = tmp_path / "bad.json"
            p.write_text(json.dumps(bad))
            rc = main(["quality", "--url", srv.url, "--baseline", str(p), "--verify-key-env", "SW_Q_KEY",
                       "--out", str(tmp_path / "x.json")])
            err = capsys.readouterr().err
            assert rc == 2 and "Traceback" not in err, (name, err)
            if name == "rows dropped, redigested":  # without the key the rows' own checks still name it
                rc = main(["quality", "--url", srv.url, "--baseline", str(p), "--out", str(tmp_path / "x.json")])
                assert rc == 2 and "the candidate side holds 5 rows" in capsys.readouterr().err
        rc = main(["quality", "--url", srv.url, "--baseline", str(base), "--verify-key-env", "SW_Q_KEY",
                   "--out", str(tmp_path / "ok.json")])
    assert rc in (0, 3)
    ok = json.loads((tmp_path / "ok.json").read_text())
    assert ok["baseline"]["integrity"]["signature"] == "verified"


def test_accept_verifies_the_quality_files_digest_and_signature(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SW_Q_KEY", KEY)
    rec = _records(tmp_path / "run.jsonl", gpu={"gpu": "nvidia", "devices": [{"name": "L4", "memory_total": 24 << 30}]})
    signed = _quality(tmp_path / "signed.json", key=KEY.encode())
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(signed), "--params", "268M",
                           "--gpu-gib", "24")
    assert rc == 0 and doc["quality"]["integrity"]["signature"] == "not checked", doc["conclusion"]
    # the key checks the quality file's signature (and the record file's, unsigned here: not ready for that)
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(signed), "--verify-key-env", "SW_Q_KEY",
                           "--params", "268M", "--gpu-gib", "24")
    assert doc["quality"]["integrity"]["signature"] == "verified" and doc["quality"]["not_acceptance_grade"] == []
    for name, edit in (("row flipped", lambda d: d["candidate"]["cases"][3].update(passed=False)),
                       ("count changed", lambda d: d["set"].update(cases=200))):
        d = json.loads(signed.read_text())
        edit(d)
        for redigest in (False, True):
            p = tmp_path / "t.json"
            p.write_text(json.dumps(seal(d) if redigest else d))
            rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(p), "--params", "268M",
                                   "--gpu-gib", "24", "--verify-key-env", "SW_Q_KEY")
            why = " ".join(doc["quality"]["not_acceptance_grade"])
            assert rc in (1, 3) and doc["conclusion"]["quality"] != "PASS" or why, (name, redigest)
            assert ("not signed" in why) if redigest else ("edited after it was written" in why), (name, why)
    unsigned = _quality(tmp_path / "plain.json")
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(unsigned), "--params", "268M",
                           "--gpu-gib", "24", "--verify-key-env", "SW_Q_KEY")
    assert rc == 3 and any("is not signed" in p for p in doc["quality"]["not_acceptance_grade"])
    old = json.loads(unsigned.read_text())
    del old["integrity"]
    unsigned.write_text(json.dumps(old))
    rc, doc, _, _ = accept(tmp_path, "--records", str(rec), "--quality", str(unsigned), "--params", "268M",
                           "--gpu-gib", "24")
    assert rc == 3 and any("carries no digest" in p for p in doc["quality"]["not_acceptance_grade"])


def test_load_files_of_different_served_models_are_not_combined(tmp_path, capsys):
    """The same --model on two runs against two different servers: one verdict cannot combine them."""
    a = _records(tmp_path / "a.jsonl", model="prod")
    lines = [json.loads(x) for x in a.read_text().splitlines()]
    lines[0]["server_identity"] = QF.server_identity("/models/other.gguf")
    lines[0]["environment"]["server"] = QF.server_env("/models/other.gguf")
    lines[0]["run_id"] = "other-run"
    lines[0]["started_at"] += 5000
    for x in lines[1:]:
        for k in ("t", "t_sent", "t_first_token", "t_end"):
            if isinstance(x.get(k), float):
                x[k] += 5000
    b = write(tmp_path / "b.jsonl", lines)
    a = _records(tmp_path / "a.jsonl", model="prod", sid=QF.server_identity(GEMMA))
    rc = main(["accept", "--records", str(a), str(b), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "different served models" in err and "/models/other.gguf" in err
