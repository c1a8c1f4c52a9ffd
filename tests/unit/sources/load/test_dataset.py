"""``--dataset FILE`` (tui/core/datasets.py, tui/sources/load/dataset.py): the three formats decided from the content,
bad rows FILE:LINE counted and refused past the share, unusable files in one line, the SHA-256 of the bytes read,
the seeded order (a permutation, the same split over workers), token counts through an in-test /tokenize
(httpx.MockTransport), the context and the too-long skip, the shipped examples, pickling."""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import REPO
from tui.core.datasets import COUNTS_ESTIMATE, COUNTS_TOKENIZE, Dataset, JsonListError, JsonListItems
from tui.sources.load.dataset import (
    EXAMPLE_DIR,
    EXAMPLE_SHA256,
    EXAMPLES,
    DatasetError,
    prepare_dataset,
    read_dataset,
)
from tui.sources.load.errors import ConfigError


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return str(p)


def jl(*rows: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def chat(*msgs: tuple[str, str]) -> dict:
    return {"messages": [{"role": r, "content": c} for r, c in msgs]}


# ------------------------------------------------------------------ formats


def test_jsonl_prompts_with_answers_output_tokens_and_bare_strings(tmp_path):
    path = write(tmp_path, "p.jsonl", jl(
        {"prompt": "What is a kettle?"},
        {"prompt": "Name three rivers.", "output_tokens": 40},
        {"prompt": "Say hi.", "answer": "Hi there, friend."},
        "a bare prompt",
        {"prompt": "Summarise.", "completion": "Done.", "system": "Be brief."},
    ))
    ds = read_dataset(path, max_bad_share=0.05)
    assert ds.format == "jsonl-prompts" and ds.rows == 5 and ds.bad_rows == 0 and len(ds) == 5
    rows = {c.row: c for c in ds.conversations}
    assert rows[1].turns[0].user == "What is a kettle?" and rows[1].turns[0].answer is None
    assert rows[2].turns[0].answer_tokens == 40
    assert rows[3].turns[0].answer == "Hi there, friend." and rows[3].turns[0].answer_tokens is None
    assert rows[4].turns[0].user == "a bare prompt"
    assert rows[5].system == "Be brief." and rows[5].turns[0].answer == "Done."


def test_jsonl_messages_system_turns_and_answers(tmp_path):
    path = write(tmp_path, "m.jsonl", jl(
        chat(("system", "You are terse."), ("user", "One?"), ("assistant", "Yes."), ("user", "Two?"),
             ("assistant", "No."), ("user", "Three?")),
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts "}, {"type": "text", "text": "joined"}]}]},
    ))
    ds = read_dataset(path, max_bad_share=0.05)
    assert ds.format == "jsonl-messages" and len(ds) == 2
    c = ds.conversations[0]
    assert c.row == 1 and c.system == "You are terse."
    assert [(t.user, t.answer) for t in c.turns] == [("One?", "Yes."), ("Two?", "No."), ("Three?", None)]
    assert ds.conversations[1].turns[0].user == "parts joined"


def test_sharegpt_list_and_sharegpt_jsonl(tmp_path):
    items = [{"_comment": "not a row"},
             {"conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "Hello?"},
                                {"from": "gpt", "value": "Hi."}]},
             {"conversations": [{"from": "human", "value": "Bye?"}]}]
    path = write(tmp_path, "s.json", json.dumps(items, indent=2))
    ds = read_dataset(path, max_bad_share=0.05)
    assert ds.format == "sharegpt" and ds.rows == 2 and len(ds) == 2
    assert [c.row for c in ds.conversations] == [2, 3]  # 1-based index in the list, the comment item included
    assert ds.conversations[0].system == "S" and ds.conversations[0].turns[0].answer == "Hi."
    lines = write(tmp_path, "s.jsonl", jl(*items))
    ds2 = read_dataset(lines, max_bad_share=0.05)
    assert ds2.format == "sharegpt" and [c.row for c in ds2.conversations] == [2, 3]  # lines


def test_comment_and_blank_lines_are_not_rows(tmp_path):
    path = write(tmp_path, "c.jsonl", jl({"_comment": "hello", "_by": "me"}) + "\n   \n" + jl({"prompt": "x"}))
    ds = read_dataset(path, max_bad_share=0.0)
    assert ds.rows == 1 and ds.bad_rows == 0 and ds.conversations[0].row == 4


# ------------------------------------------------------------------ bad rows


BAD = [
    ("{not json", "not JSON"),
    (json.dumps({"prompt": "   "}), "empty prompt"),
    (json.dumps({"messages": [{"role": "assistant", "content": "hi"}]}), "assistant message before any user"),
    (json.dumps({"messages": [{"role": "system", "content": "only a system prompt"}]}), "no user message"),
    (json.dumps({"messages": [{"role": "robot", "content": "x"}]}), "role 'robot'"),
    (json.dumps({"prompt": "x", "output_tokens": 0}), "output_tokens"),
    (json.dumps([1, 2]), "a JSON list"),
    (json.dumps({"text": "x"}), "no 'prompt'"),
    (json.dumps({"conversations": [{"from": "human", "value": "x"}]}), "a sharegpt row after jsonl-messages rows"),
]


def test_bad_rows_are_reported_file_line_with_the_reason_and_counted(tmp_path):
    good = [json.dumps(chat(("user", f"question {i}?"))) for i in range(200)]
    lines = good[:3] + [b for b, _ in BAD] + good[3:]
    path = write(tmp_path, "bad.jsonl", "\n".join(lines) + "\n")
    ds = read_dataset(path, max_bad_share=0.05)
    assert ds.rows == 200 + len(BAD) and ds.bad_rows == len(BAD) and len(ds) == 200
    for k, (_line, why) in enumerate(BAD):
        assert ds.problems[k].startswith(f"{path}:{4 + k}: "), ds.problems[k]
        assert why in ds.problems[k], (why, ds.problems[k])


def test_past_the_share_the_file_is_refused_with_the_count(tmp_path):
    lines = [json.dumps({"prompt": f"p{i}"}) for i in range(18)] + ["nope", "{}"]
    path = write(tmp_path, "r.jsonl", "\n".join(lines))  # no final newline: the last line still counts
    with pytest.raises(DatasetError) as ei:
        read_dataset(path, max_bad_share=0.05)
    msg = str(ei.value)
    assert isinstance(ei.value, ConfigError) and "\n" not in msg
    assert "2 of 20 rows are bad" in msg and f"{path}:19:" in msg
    assert len(read_dataset(path, max_bad_share=0.10)) == 18  # 10% is allowed at 0.10


def test_sharegpt_bad_item_names_its_index_and_line(tmp_path):
    items = [{"conversations": [{"from": "human", "value": "a"}]}, {"conversations": [{"from": "dog", "value": "b"}]}]
    items += [{"conversations": [{"from": "human", "value": f"q{i}"}]} for i in range(30)]
    path = write(tmp_path, "s.json", "[\n" + ",\n".join(json.dumps(i) for i in items) + "\n]")
    ds = read_dataset(path, max_bad_share=0.05)
    assert ds.bad_rows == 1 and ds.problems[0].startswith(f"{path}:3: item 2: ") and "'dog'" in ds.problems[0]


def test_sharegpt_list_syntax_error_is_one_line(tmp_path):
    path = write(tmp_path, "broken.json", '[\n{"conversations": []},\n{"conversations": [\n')
    with pytest.raises(DatasetError) as ei:
        read_dataset(path, max_bad_share=0.5)
    assert "\n" not in str(ei.value) and "not a JSON list" in str(ei.value) and f"{path}:" in str(ei.value)


@pytest.mark.parametrize("content, why", [
    (b"", "is empty"),
    (b"  \n\n\t\n", "is empty"),
    (b'{"prompt": "caf\xe9"}\n', "not UTF-8"),
    (json.dumps({"_comment": "x"}).encode() + b"\n", "no usable row"),
    (b'"   "\n', "all bad"),
])
def test_unusable_files_are_one_clean_line(tmp_path, content, why):
    path = write(tmp_path, "f.jsonl", content)
    with pytest.raises(DatasetError) as ei:
        read_dataset(path, max_bad_share=0.05)
    assert why in str(ei.value) and "\n" not in str(ei.value)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        read_dataset(str(tmp_path / "nope.jsonl"), max_bad_share=0.05)
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        read_dataset(str(tmp_path), max_bad_share=0.05)  # a directory


# ------------------------------------------------------------------ streaming and the hash


def test_sha256_is_over_the_bytes_and_tiny_chunks_read_the_same(tmp_path):
    body = "\ufeff" + jl(*[chat(("user", f"naïve café № {i} ✓"), ("assistant", "ok")) for i in range(50)])
    path = write(tmp_path, "u.jsonl", body)
    whole = Path(path).read_bytes()
    a = read_dataset(path, max_bad_share=0.0)
    b = read_dataset(path, max_bad_share=0.0, chunk_bytes=3)  # multi-byte characters split across chunks
    assert a.sha256 == b.sha256 == hashlib.sha256(whole).hexdigest()
    assert a.conversations == b.conversations and len(a) == 50 and a.conversations[0].turns[0].user == "naïve café № 0 ✓"


def test_sharegpt_list_read_item_by_item_in_tiny_chunks(tmp_path):
    items = [{"conversations": [{"from": "human", "value": f"q {i} ✓"}, {"from": "gpt", "value": "a" * i}]}
             for i in range(40)]
    path = write(tmp_path, "s.json", json.dumps(items, indent=1))
    a = read_dataset(path, max_bad_share=0.0)
    b = read_dataset(path, max_bad_share=0.0, chunk_bytes=5)
    assert a.conversations == b.conversations and len(a) == 40 and a.sha256 == hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_json_list_items_gives_each_items_line_and_refuses_garbage():
    text = '[\n {"a": 1},\n\n {"b": [1,\n 2]}, 7\n]'
    out = []
    splitter = JsonListItems()
    for ch in text:
        out += splitter.feed(ch)
    out += splitter.feed("", final=True)
    assert out == [(1, 2, {"a": 1}), (2, 4, {"b": [1, 2]}), (3, 5, 7)]
    with pytest.raises(JsonListError):
        JsonListItems().feed('{"not": "a list"}', final=True)
    with pytest.raises(JsonListError):
        JsonListItems().feed('[{"a": 1} {"b": 2}]', final=True)


# ------------------------------------------------------------------ the seeded order


def small_dataset(n: int) -> Dataset:
    from tui.core.datasets import Conversation, DatasetTurn

    convs = tuple(Conversation(row=i + 1, system=None, turns=(DatasetTurn(f"u{i}", 1, None),)) for i in range(n))
    return Dataset(name="t", path="t", format="jsonl-prompts", sha256="0", rows=n, bad_rows=0, conversations=convs)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 10**6), workers=st.integers(1, 5), cycles=st.integers(1, 3))
def test_the_order_is_a_permutation_per_cycle_and_the_same_split_over_workers(n, seed, workers, cycles):
    ds = small_dataset(n)
    total = n * cycles
    one = [ds.at(seed, k).row for k in range(total)]
    for c in range(cycles):
        assert sorted(one[c * n:(c + 1) * n]) == list(range(1, n + 1))
    # each worker asks its own indices, in its own copy (a pickled one, as a worker process gets it)
    split: dict[int, int] = {}
    for w in range(workers):
        mine = pickle.loads(pickle.dumps(ds))
        for k in range(w, total, workers):
            split[k] = mine.at(seed, k).row
    assert [split[k] for k in range(total)] == one
    # asked out of order, the answers are the same
    assert [ds.at(seed, k).row for k in reversed(range(total))] == one[::-1]


def test_the_order_depends_on_the_seed_and_cycles_differ():
    ds = small_dataset(50)
    a = [ds.at(1, k).row for k in range(100)]
    b = [ds.at(2, k).row for k in range(50)]
    assert a[:50] != b and a[:50] != a[50:]
    with pytest.raises(ValueError):
        ds.at(1, -1)


def test_pickle_round_trip_is_small_and_drops_the_cache(tmp_path):
    ds = read_dataset(str(EXAMPLE_DIR / "example-chat.jsonl"), max_bad_share=0.0)
    before = len(pickle.dumps(ds))
    ds.at(7, 0)
    ds.at(7, 200)  # two cycles cached
    data = pickle.dumps(ds)
    assert len(data) == before  # the cached permutations do not travel
    back = pickle.loads(data)
    assert back.conversations == ds.conversations and back.header_block() == ds.header_block()
    assert [back.at(7, k) for k in range(130)] == [ds.at(7, k) for k in range(130)]
    assert ds.by_row(2) == ds.conversations[0] and ds.by_row(1) is None  # line 1 is the comment
    assert len(pickle.dumps(ds)) == before  # nor does the row index


# ------------------------------------------------------------------ counting and the context


def tokenize_server(accepts: set[str], seen: list[dict], stats: dict | None = None, props: dict | None = None,
                    models: dict | None = None) -> httpx.MockTransport:
    """/tokenize: one token per whitespace-separated word; /props and /v1/models as given (else 404)."""
    stats = stats if stats is not None else {}

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            return httpx.Response(200, json=props) if props is not None else httpx.Response(404)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=models) if models is not None else httpx.Response(404)
        body = json.loads(request.content)
        key = "content" if "content" in body else "prompt"
        if request.url.path != "/tokenize" or key not in accepts:
            return httpx.Response(404 if request.url.path != "/tokenize" else 400)
        seen.append(body)
        stats["now"] = stats.get("now", 0) + 1
        stats["max"] = max(stats.get("max", 0), stats["now"])
        await asyncio.sleep(0)  # let the other calls in (a yield, not a wait)
        stats["now"] -= 1
        return httpx.Response(200, json={"tokens": list(range(len(body[key].split())))})

    return httpx.MockTransport(handler)


async def prepared(ds: Dataset, transport: httpx.MockTransport, **kw) -> tuple[Dataset, list[str]]:
    said: list[str] = []
    args = {"tokenize_form": None, "max_context": None, "server": {}, "output_tokens_default": 16}
    args.update(kw)
    async with httpx.AsyncClient(transport=transport) as client:
        out = await prepare_dataset(ds, client, "http://127.0.0.1:1", say=said.append, **args)
    return out, said


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def sized(tmp_path: Path) -> Dataset:
    rows = [chat(("system", words(10)), ("user", words(20)), ("assistant", words(30))),  # 10 + 20 + 30 = 60
            chat(("user", words(100)), ("assistant", words(5))),                         # 100 + 5 = 105
            chat(("user", words(5)))]                                                      # 5 + default 16 = 21
    return read_dataset(write(tmp_path, "sized.jsonl", jl(*rows)), max_bad_share=0.0)


async def test_tokenize_counts_every_text_and_keeps_the_form(tmp_path):
    ds = sized(tmp_path)
    seen: list[dict] = []
    stats: dict = {}
    out, said = await prepared(ds, tokenize_server({"prompt"}, seen, stats), concurrency=2)
    c0, c1, c2 = out.conversations
    assert c0.system_tokens == 10 and c0.turns[0].user_tokens == 20 and c0.turns[0].answer_tokens == 30
    assert c1.turns[0].user_tokens == 100 and c1.turns[0].answer_tokens == 5
    assert c2.turns[0].answer_tokens is None and c0.turns[0].answer is None  # the answer text dropped once counted
    # 5 texts: words(5) is both an answer and a user message, counted once
    assert out.token_counts == COUNTS_TOKENIZE and all("prompt" in s for s in seen) and len(seen) == 5
    assert 1 <= stats["max"] <= 2  # bounded concurrency
    assert out.context_tokens is None and out.skipped_too_long == 0 and len(out) == 3
    assert "context unknown" in out.note and "nothing skipped" in out.note
    assert out.header_block()["usable"] == 3 and out.header_block()["context_source"] is None
    assert any("3 usable" in s for s in said)


async def test_the_given_form_only_and_the_row_cap_scales_the_rest(tmp_path):
    lines = [json.dumps({"prompt": " ".join(["ab"] * (8 + i))}) for i in range(30)]  # 3 chars a token
    ds = read_dataset(write(tmp_path, "many.jsonl", "\n".join(lines)), max_bad_share=0.0)
    seen: list[dict] = []
    out, _ = await prepared(ds, tokenize_server({"content"}, seen), tokenize_form="content", max_counted_rows=10)
    assert len(seen) == 10 and all("content" in s for s in seen)
    assert "first 10 rows" in out.token_counts and "estimated" in out.token_counts
    assert "the other 20 rows estimated at the measured" in out.note
    # beyond the cap: chars x the measured tokens/char (not the 4 chars/token guess)
    counted = {c.row: c.turns[0].user_tokens for c in out.conversations}
    assert counted[1] == 8
    assert abs(counted[30] - 37) <= 1, counted[30]  # ~4 chars/token would say 28


async def test_without_tokenize_the_estimate_is_labelled(tmp_path):
    ds = sized(tmp_path)
    out, _ = await prepared(ds, tokenize_server(set(), []))
    assert out.token_counts == COUNTS_ESTIMATE and "~4 chars/token" in out.note
    assert out.conversations[1].turns[0].user_tokens == round(len(words(100)) / 4)


@pytest.mark.parametrize("kw, ctx, source", [
    ({"server": {"n_ctx_per_slot": 100}}, 100, "server /props"),
    ({"server": {"max_model_len": 100}}, 100, "server /v1/models"),
    ({"max_context": 100}, 100, "--max-context"),
    ({"props": {"default_generation_settings": {"n_ctx": 100}}}, 100, "server /props"),
    ({"models": {"data": [{"id": "m", "max_model_len": 100}]}}, 100, "server /v1/models"),
])
async def test_the_context_skips_the_long_conversations(tmp_path, kw, ctx, source):
    ds = sized(tmp_path)
    props, models = kw.pop("props", None), kw.pop("models", None)
    out, _ = await prepared(ds, tokenize_server({"content"}, [], props=props, models=models), **kw)
    assert out.context_tokens == ctx and out.context_source == source
    assert out.skipped_too_long == 1 and [c.row for c in out.conversations] == [1, 3]
    assert "1 conversation(s) skipped" in out.note and "rows 2" in out.note
    assert out.header_block()["skipped_too_long"] == 1 and out.header_block()["usable"] == 2


async def test_the_servers_context_wins_over_max_context_and_output_tokens_flag(tmp_path):
    ds = sized(tmp_path)
    out, _ = await prepared(ds, tokenize_server({"content"}, []), server={"n_ctx_per_slot": 120}, max_context=50,
                            output_tokens_given=True, output_tokens_default=40)
    # with --output-tokens 40: 60 -> 30+40=70, 105 -> 100+40 = 140 (skipped), 21 -> 5+40=45
    assert out.context_source == "server /props" and "--max-context 50 not used" in out.note
    assert out.output_tokens == "--output-tokens" and out.skipped_too_long == 1


async def test_nothing_fits_is_refused(tmp_path):
    ds = sized(tmp_path)
    with pytest.raises(DatasetError, match="no conversation fits the 10-token context"):
        await prepared(ds, tokenize_server({"content"}, []), max_context=10)


# ------------------------------------------------------------------ the shipped examples


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_examples_parse_with_no_bad_row_and_are_marked(name, tmp_path):
    path = EXAMPLE_DIR / name
    ds = read_dataset(str(path), max_bad_share=0.0)
    assert ds.bad_rows == 0 and len(ds) >= 20 and ds.example
    assert ds.sha256 == EXAMPLE_SHA256[name] == hashlib.sha256(path.read_bytes()).hexdigest()
    copy = tmp_path / "renamed.jsonl"
    copy.write_bytes(path.read_bytes())
    assert read_dataset(str(copy), max_bad_share=0.0).example  # by its hash
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"prompt": "x"}) + "\n", encoding="utf-8")
    assert not read_dataset(str(other), max_bad_share=0.0).example


def test_the_chat_example_has_turns_answers_and_systems():
    ds = read_dataset(str(EXAMPLE_DIR / "example-chat.jsonl"), max_bad_share=0.0)
    assert ds.format == "jsonl-messages" and len(ds) == 60
    assert {len(c.turns) for c in ds.conversations} == {1, 2, 3, 4}
    assert all(t.answer for c in ds.conversations for t in c.turns)
    assert 10 < sum(c.system is not None for c in ds.conversations) < 50
    assert (EXAMPLE_DIR / "README.md").read_text(encoding="utf-8").count("SYNTHETIC") >= 1


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_the_examples_are_what_the_generator_writes():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "make_example_datasets.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
