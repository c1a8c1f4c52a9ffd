"""``--tokenizer PATH`` (issue 41, tui/sources/load/tokenizer.py): prompts cut to exactly the length asked, counted
with the model's own tokenizer, the file's SHA-256 in the run header; a bad path or file is bad usage (one line,
exit 2), never a download. The tokenizers here are built in the test (a word-level vocabulary with a BOS, and a
byte-level BPE), so every length is known without the network; the real model's tokenizer is tested against
llama-server in tests/integration/test_tokenizer_llama.py."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")

from tests.support.fault_server import FaultServer  # noqa: E402
from tui.cli import main  # noqa: E402
from tui.sources.load.errors import ConfigError  # noqa: E402
from tui.sources.load.prompts import PromptBuilder, prompt_prefix  # noqa: E402
from tui.sources.load.tokenizer import load_tokenizer  # noqa: E402


def word_level(path: Path, bos: bool = True) -> Path:
    """Every word and every run of punctuation one token; a <bos> the model adds to every prompt."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tk = Tokenizer(models.WordLevel(vocab={"<unk>": 0, "<bos>": 1, "time": 2}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos:
        tk.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    path.parent.mkdir(parents=True, exist_ok=True)
    tk.save(str(path))
    return path


def byte_bpe(path: Path) -> Path:
    """A byte-level BPE trained on the prompts' own filler: multi-word and sub-word tokens, cuts that matter."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    b = PromptBuilder()
    text = b.build(prompt_prefix("00000000-000001"), 2000)
    tk.train_from_iterator([text[i:i + 300] for i in range(0, len(text), 300)],
                           trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.save(str(path))
    return path


@pytest.mark.parametrize("make", [word_level, byte_bpe])
def test_every_length_asked_is_built_exactly(make, tmp_path):
    tok = load_tokenizer(str(make(tmp_path / "tokenizer.json")))
    b = PromptBuilder(tok)
    rng = random.Random(7)
    for n in [1, 2, 3, 16, 128, 1000, *(rng.randint(1, 3000) for _ in range(40))]:
        text, counted = b.build_counted(prompt_prefix(f"{rng.randrange(1 << 32):08x}-{n:06d}"), n)
        assert counted == n == tok.count(text), (n, counted)
        assert text.startswith("[")  # the unique prefix survives the cut


def test_the_header_block_names_the_file_by_its_sha256_and_the_bos_it_adds(tmp_path):
    f = word_level(tmp_path / "model" / "tokenizer.json")
    tok = load_tokenizer(str(tmp_path / "model"))  # a model folder holding one
    block = PromptBuilder(tok).describe()
    assert block["method"] == "tokenizer"
    assert block["tokenizer"]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert block["tokenizer"]["special_tokens_added"] == 1 and block["tokenizer"]["special_tokens"] == ["<bos>"]
    assert "adds 1 special token (<bos>)" in block["note"]
    assert PromptBuilder(load_tokenizer(str(word_level(tmp_path / "nobos.json", bos=False)))).describe()[
        "tokenizer"]["special_tokens_added"] == 0


def test_a_worker_refuses_a_tokenizer_file_that_changed(tmp_path):
    f = word_level(tmp_path / "tokenizer.json")
    state = PromptBuilder(load_tokenizer(str(f))).state()
    assert PromptBuilder.from_state(state).tokenizer.sha256 == state["tokenizer"]["sha256"]
    data = json.loads(f.read_text())
    data["model"]["vocab"]["year"] = 3
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="changed since the run started"):
        PromptBuilder.from_state(state)


@pytest.mark.slow  # starts a server or the CLI's load path against one
@pytest.mark.parametrize("what", ["missing", "empty folder", "not json", "json not a tokenizer", "a hub name"])
def test_a_bad_tokenizer_is_one_line_and_exit_2_before_any_request(what, tmp_path, capsys):
    p = {"missing": tmp_path / "nope.json", "empty folder": tmp_path, "a hub name": Path("google/gemma-3-270m"),
         "not json": tmp_path / "a.json", "json not a tokenizer": tmp_path / "b.json"}[what]
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text('{"model": 3}')
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=1), "--concurrency", "1", "--requests", "2", "--no-gpu",
                   "--tokenizer", str(p), "--record", str(tmp_path / "r.jsonl")])
        sent = fs.completions()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--tokenizer" in err[0] and "Traceback" not in err[0], err
    assert sent == [] and not (tmp_path / "r.jsonl").exists()


@pytest.mark.slow  # starts a server or the CLI's load path against one
def test_a_run_with_a_tokenizer_records_exact_lengths_and_the_counted_answer(tmp_path, capsys):
    f = word_level(tmp_path / "tokenizer.json")
    rec = tmp_path / "r.jsonl"
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=3), "--api", "completions", "--concurrency", "1",
                   "--requests", "6", "--warmup", "0", "--no-gpu", "--input-tokens", "10-60", "--output-tokens", "3",
                   "--tokenizer", str(f), "--record", str(rec)])
        prompts = {e["id"]: e["prompt"] for e in fs.completions()}
    out = capsys.readouterr().out
    assert rc in (0, 1, 3)
    lines = [json.loads(ln) for ln in rec.read_text().splitlines() if ln.strip()]
    assert lines[0]["load"]["prompt_builder"]["tokenizer"]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    tok = load_tokenizer(str(f))
    reqs = [d for d in lines if d.get("type") == "request"]
    assert len(reqs) == 6
    for r in reqs:
        assert r["input_tokens_counted"] == r["input_tokens_asked"] == tok.count(prompts[r["id"]])
        assert r["output_tokens_counted"] >= 1
    assert "(exact: tokenizer sha256 " in " ".join(out.split())  # the workload line says how the lengths were made


@pytest.mark.slow  # starts a server or the CLI's load path against one
def test_without_a_tokenizer_or_tokenize_the_report_labels_the_lengths_estimated(tmp_path, capsys):
    rec = tmp_path / "r.jsonl"
    with FaultServer() as fs:
        rc = main(["run", "--url", fs.url("ok", tokens=1), "--concurrency", "1", "--requests", "2", "--warmup", "0",
                   "--no-gpu", "--record", str(rec)])
    out = capsys.readouterr().out
    assert rc in (0, 1, 3)
    assert "input 128 (ESTIMATED: ~4 chars/token)" in " ".join(out.split())
