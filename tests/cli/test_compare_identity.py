"""Issue 35, "compare knows what it compares" (finding 6). Before (1a6ea7a): `compare` of a run with itself (the
same path, or a byte-identical copy) said NOT WORSE, exit 0; so did a candidate whose header claimed another model,
engine and 8 GPUs over identical request timings; neither side's model or machine was printed; an imported file's
unknown workload was a warning. Now: the same file, the same run id or the same request data on both sides is NOT
ENOUGH EVIDENCE (exit 3) with the reason; both sides' model (claimed and served), engine, build, GPU and host are
printed (tui.core.identity); a different served model or engine is refused naming the field unless
`--allow-different model,engine` (the allowed field printed beside the verdict); the workload of an import is the
lengths it received, and an unknown workload is NOT ENOUGH EVIDENCE without `--allow-different workload`
(`--allow-different-workload` its alias). The HTML page says the same."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

import tests.support.evidence_files as ef
import tests.support.import_files as F
from tui.cli import main
from tui.core import compare_guard as G
from tui.core.records import RequestRecord


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["compare", *argv])
    return code, out.getvalue(), err.getvalue()


def cjson(*argv: str) -> tuple[int, dict]:
    code, out, _ = cli(*argv, "--json")
    return code, json.loads(out)


SERVER = {"engine": "llamacpp", "build": "b6000", "model": "gemma-3-270m", "models": ["gemma-3-270m"]}


def run_file(path: Path, seed: int, *, server: dict | None = None, gpu: dict | None = None,
             model: str = "gemma-3-270m") -> Path:
    """An honest closed-loop run (tests/support/evidence_files.py), another run per seed, saying what it measured."""
    recs = ef.another_run(ef.honest_closed(), seed=seed)
    recs[0]["target"]["model"] = model
    recs[0]["environment"] = {"server": {**SERVER, **(server or {})}, "gpu": gpu or {"gpu": "none"},
                              "hostname": "bench-1", "os": "Linux", "machine": "x86_64"}
    return ef.write(path, recs)


@pytest.fixture()
def base(tmp_path) -> Path:
    return run_file(tmp_path / "base.jsonl", 1)


def test_the_control_two_runs_of_one_server_compare(tmp_path, base):
    cand = run_file(tmp_path / "cand.jsonl", 2)
    code, doc = cjson(str(base), str(cand))
    assert code == 0 and doc["verdict"] == "NOT WORSE" and doc["same_run"] is None and doc["refusals"] == []
    ident = doc["identity"]
    assert ident["base"]["line"] == ("model gemma-3-270m (served), engine llamacpp b6000, GPU none, host bench-1")
    assert ident["differences"] == [] and doc["verdict_note"] is None


# ------------------------------------------------------------------ the same run on both sides


def test_the_same_path_is_not_enough_evidence(base):
    code, doc = cjson(str(base), str(base))
    assert code == 3 and doc["verdict"] == "NOT ENOUGH EVIDENCE"  # before: NOT WORSE, exit 0
    assert doc["same_run"].startswith("the same file on both sides (same path as")
    assert doc["reason"].startswith("the same file on both sides")
    assert [r["verdict_if_comparable"] for r in doc["levels"]] == ["NOT WORSE"]
    code, md, _ = cli(str(base), str(base))
    assert code == 3 and "**the same run on both sides**" in md


def test_a_byte_identical_copy_is_not_enough_evidence(tmp_path, base):
    copy = tmp_path / "copy.jsonl"
    shutil.copy(base, copy)
    code, doc = cjson(str(base), str(copy))
    assert code == 3 and doc["same_run"].startswith("the same file on both sides (identical content as")
    link = tmp_path / "link.jsonl"
    link.symlink_to(base)
    assert cjson(str(base), str(link))[1]["same_run"].startswith("the same file on both sides")


def test_the_same_run_id_in_another_file_is_not_enough_evidence(tmp_path, base):
    lines = base.read_text().splitlines()
    other = tmp_path / "trimmed.jsonl"
    other.write_text("\n".join(lines[:-3] + lines[-1:]) + "\n")  # a few requests less: not byte-identical
    code, doc = cjson(str(base), str(other))
    assert code == 3 and doc["same_run"] == "the same run on both sides (run_id test-run-1)"


def test_the_same_request_data_under_another_header_is_refused_and_both_identities_printed(tmp_path, base):
    """The issue's case: a candidate claiming another model, engine and 8 GPUs over identical request timings."""
    recs = [json.loads(x) for x in base.read_text().splitlines()]
    h = recs[0]
    h["run_id"], h["started_at"] = "a-new-id", h["started_at"] + 86400
    h["target"]["model"] = "gpt-4o-2024-08-06"
    h["environment"]["server"] = {"engine": "vllm", "build": "0.9.1", "model": "meta-llama/Llama-3.1-70B"}
    h["environment"]["gpu"] = {"devices": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}
    cand = ef.write(tmp_path / "claims.jsonl", recs)
    code, doc = cjson(str(base), str(cand))
    assert code == 3 and doc["verdict"] == "NOT ENOUGH EVIDENCE"  # before: NOT WORSE, exit 0
    assert doc["same_run"].startswith("the same request data on both sides: every measured request with identical "
                                      "send, first-token and end times")
    ident = doc["identity"]
    assert ident["candidate"]["line"] == ("model meta-llama/Llama-3.1-70B (served; gpt-4o-2024-08-06 claimed), engine "
                                          "vllm 0.9.1, GPU 8 x NVIDIA H100 80GB HBM3, host bench-1")
    assert ident["refused"] == ["model", "engine"] and "gpu" in ident["differences"]
    assert any("the served model differs (base gemma-3-270m, candidate meta-llama/Llama-3.1-70B)" in r
               for r in doc["refusals"])
    # allowing the model and engine does not make one run's data two runs
    code, doc = cjson(str(base), str(cand), "--allow-different", "model,engine")
    assert code == 3 and doc["same_run"] and doc["verdict_note"] == \
        "different served model, engine allowed (--allow-different model,engine)"
    code, md, _ = cli(str(base), str(cand))
    assert "- base measured: model gemma-3-270m (served)" in md
    assert "- candidate measured: model meta-llama/Llama-3.1-70B" in md and "GPU 8 x NVIDIA H100" in md


def test_a_copy_with_its_times_moved_is_the_same_data(tmp_path, base):
    recs = [json.loads(x) for x in base.read_text().splitlines()]
    recs[0]["run_id"] = "moved"
    for r in recs[1:]:
        for k in ("t", "t_intended", "t_sent", "t_first_token", "t_end"):
            if isinstance(r.get(k), float):
                r[k] += 3600.0
        if r.get("type") == "request":
            r["id"] = "x" + r["id"]
    cand = ef.write(tmp_path / "moved.jsonl", recs[:1] + recs[1:400] + recs[-1:])
    code, doc = cjson(str(base), str(cand))
    assert code == 3 and doc["same_run"].startswith("the same request data on both sides: 398 of the candidate's")


def test_shared_requests_counts_exact_times_only():
    a = [RequestRecord(id=f"a{i}", t_sent=1.8e9 + i, t_end=1.8e9 + i + 1, complete=True, t_intended=1.8e9 + i,
                       t_first_token=1.8e9 + i + 0.2, level=1.0) for i in range(100)]
    b = [RequestRecord(id=f"b{i}", t_sent=1.8e9 + i, t_end=1.8e9 + i + 1, complete=True, t_intended=1.8e9 + i,
                       t_first_token=1.8e9 + i + 0.2 + 1e-5, level=1.0) for i in range(100)]
    assert G.shared_requests(a, a) == (100, 100, 100)
    assert G.shared_requests(a, b) == (0, 100, 100)  # 10 us apart: two runs
    assert G.same_run({"header": {}, "requests": a}, {"header": {}, "requests": b}) is None


# ------------------------------------------------------------------ a different served model or engine


def test_a_different_served_model_is_refused_unless_allowed(tmp_path, base):
    cand = run_file(tmp_path / "cand.jsonl", 2, server={"model": "qwen2.5-0.5b", "models": ["qwen2.5-0.5b"]},
                    model="qwen2.5-0.5b")
    code, doc = cjson(str(base), str(cand))
    assert code == 3 and doc["identity"]["refused"] == ["model"]  # before: NOT WORSE, exit 0
    assert doc["reason"] == ("not comparable: the served model differs (base gemma-3-270m, candidate qwen2.5-0.5b); "
                             "--allow-different model compares them anyway")
    code, doc = cjson(str(base), str(cand), "--allow-different", "model")
    assert code == 0 and doc["verdict"] == "NOT WORSE" and doc["identity"]["allowed"] == ["model"]
    assert doc["verdict_note"] == "different served model allowed (--allow-different model)"
    code, md, _ = cli(str(base), str(cand), "--allow-different", "model")
    assert "# servewatch compare: NOT WORSE (different served model allowed (--allow-different model))" in md.splitlines()


def test_a_different_engine_is_refused_unless_allowed_and_builds_gpus_hosts_are_printed(tmp_path, base):
    cand = run_file(tmp_path / "cand.jsonl", 2, server={"engine": "vllm", "build": "0.9.1"})
    code, doc = cjson(str(base), str(cand))
    assert code == 3 and doc["identity"]["refused"] == ["engine"] and "the engine differs (base llamacpp, candidate " \
        "vllm)" in doc["reason"]
    assert cjson(str(base), str(cand), "--allow-different=engine")[0] == 0
    newer = run_file(tmp_path / "newer.jsonl", 3, server={"build": "b6100"}, gpu={"name": "NVIDIA L4"})
    code, doc = cjson(str(base), str(newer))  # another build on another GPU: what compare is for
    assert code == 0 and doc["identity"]["differences"] == ["build", "gpu"] and doc["identity"]["refused"] == []


def test_the_flag_family_and_its_alias(tmp_path, capsys):
    a, b = str(run_file(tmp_path / "a.jsonl", 1)), str(run_file(tmp_path / "b.jsonl", 2))
    assert main(["compare", a, b, "--allow-different", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown field 'gpu' (one of model, engine, workload)" in err
    _, doc1 = cjson(a, b, "--allow-different-workload")
    _, doc2 = cjson(a, b, "--allow-different", "workload")
    assert doc1["allowed_different"] == doc2["allowed_different"] == ["workload"]
    _, doc = cjson(a, b, "--allow-different", "model", "--allow-different", "engine,workload")
    assert doc["allowed_different"] == ["engine", "model", "workload"]


# ------------------------------------------------------------------ the workload of an import


def test_an_imports_workload_is_the_lengths_it_received(tmp_path):
    a = F.vllm(tmp_path / "a", errors=0, seed=2)
    b = F.vllm(tmp_path / "b", errors=0, seed=3)
    code, doc = cjson(str(a), str(b))
    assert code == 0 and doc["workload"]["basis"] == "received" and doc["workload"]["differences"] == []
    assert "lengths received: input 64 (64-64, n 1100), output 32 (32-32, n 1100)" in doc["workload"]["base"]
    longer = json.loads(b.read_text())
    longer["input_lens"] = [1024] * len(longer["input_lens"])
    b.write_text(json.dumps(longer))
    code, doc = cjson(str(a), str(b))
    assert code == 3 and doc["workload"]["differences"] == ["input received: median 64 vs 1024 tokens"]
    assert doc["reason"].startswith("not comparable: the workloads differ (input received: median 64 vs 1024 tokens)")
    assert cjson(str(a), str(b), "--allow-different", "workload")[0] == 0


def test_an_unknown_workload_is_not_enough_evidence_without_the_flag(tmp_path):
    a = F.vllm(tmp_path / "a", errors=0, seed=2)
    b = F.vllm(tmp_path / "b", errors=0, seed=3)
    for p in (a, b):
        doc = json.loads(p.read_text())
        doc["input_lens"] = [None] * len(doc["input_lens"])
        doc["output_lens"] = [None] * len(doc["output_lens"])
        p.write_text(json.dumps(doc))
    code, doc = cjson(str(a), str(b))
    assert code == 3 and doc["workload"]["unknown"] == ["base", "candidate"]  # before: a warning, NOT WORSE
    assert "the workload is unknown" in doc["reason"] and "--allow-different workload" in doc["reason"]
    code, doc = cjson(str(a), str(b), "--allow-different-workload")
    assert code == 0 and doc["verdict_note"] == "different workload allowed (--allow-different workload)"


# ------------------------------------------------------------------ the HTML page says the same


def test_the_html_page_shows_the_same_run_and_both_identities(tmp_path, base):
    out = tmp_path / "same.html"
    assert main(["compare", str(base), str(base), "--html", str(out)]) == 3
    page = out.read_text()
    assert "the same file on both sides (same path as" in page and "can only show no difference" in page
    assert "base measured: model gemma-3-270m (served), engine llamacpp b6000, GPU none, host bench-1" in page
    cand = run_file(tmp_path / "cand.jsonl", 2, server={"model": "qwen2.5-0.5b", "models": ["qwen2.5-0.5b"]},
                    model="qwen2.5-0.5b")
    out2 = tmp_path / "model.html"
    assert main(["compare", str(base), str(cand), "--html", str(out2), "--allow-different", "model"]) == 0
    page = out2.read_text()
    assert "candidate measured: model qwen2.5-0.5b (served)" in page
    assert "different served model allowed (--allow-different model)" in page
