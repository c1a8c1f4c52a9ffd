"""Trace replay of a servewatch recording's sessions, turns, shared prefixes and dataset rows (issue 23).

A session run is recorded against the in-memory server of test_sessions.py, the record file replayed with
``--trace``, and the replay compared with the recording: the same sessions (turn counts, lengths asked, prefix
groups, think times, dataset rows and texts), the sessions starting at the recorded offsets, each turn's history
built from the answers the replay's server gave.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from tests.support.fault_server import FaultServer
from tests.unit.sources.load.test_sessions import Server, cfg
from tui.core.lengths import parse_lengths
from tui.core.thinktime import parse_think_time
from tui.sources.load import ConfigError, LoadConfig, SetupError, run_load
from tui.sources.load.dataset import example_path
from tui.sources.load.trace import Trace, load_trace

SESSIONS = dict(mode="open", levels=[40.0], arrival="poisson", turns=parse_lengths("uniform:1-4"),
                think_time=parse_think_time("uniform:0.01-0.03"), shared_prefix_tokens=16, prefix_groups=3,
                requests=6, input_tokens=(4, 40), input_lengths=parse_lengths("uniform:4-40"), output_tokens=(2, 6),
                output_lengths=parse_lengths("uniform:2-6"), seed=11)


async def record(server: Server, path: Path, **kw) -> list[dict]:
    out: list[dict] = []
    await run_load(cfg(**kw), out.append, transport=httpx.MockTransport(server.handler))
    path.write_text("".join(json.dumps(d) + "\n" for d in out))
    return out


def replay_cfg(trace: Trace, **kw) -> LoadConfig:
    return cfg(mode="open", levels=[trace.level], trace=trace, requests=None, input_tokens=trace.input_range,
               output_tokens=trace.output_range, ignore_eos=True, **kw)


async def replay(server: Server, trace: Trace, **kw) -> list[dict]:
    out: list[dict] = []
    await run_load(replay_cfg(trace, **kw), out.append, transport=httpx.MockTransport(server.handler))
    return out


def sessions(recs: list[dict]) -> list[dict]:
    """Per session, in order of its first turn's t_intended: its turns (sorted) and what they asked."""
    by: dict[str, list[dict]] = {}
    for d in recs:
        if d.get("type") == "request" and d.get("phase") == "measure":
            by.setdefault(d["session"], []).append(d)
    out = []
    for turns in by.values():
        turns.sort(key=lambda r: r["turn"])
        out.append({"start": turns[0]["t_intended"], "turns": [r["turn"] for r in turns],
                    "asked": [(r["input_tokens_asked"], r["output_tokens_asked"]) for r in turns],
                    "group": [r.get("prefix_group") for r in turns], "row": [r.get("dataset_row") for r in turns],
                    "think": [r.get("think_s") for r in turns], "ids": [r["id"] for r in turns]})
    out.sort(key=lambda s: s["start"])
    return out


def shape(ss: list[dict]) -> list[tuple]:
    return [(s["turns"], s["asked"], s["group"], s["row"], s["think"]) for s in ss]


def offsets(ss: list[dict]) -> list[float]:
    return [s["start"] - ss[0]["start"] for s in ss]


def bodies_by_id(server: Server) -> dict[str, tuple[dict, str | None]]:
    """request id -> (its body, the answer the server gave it)."""
    out = {}
    answers = iter(server.answers)
    for n, body in enumerate(server.bodies, 1):
        last = body["messages"][-1]["content"]
        rid = last.split("]")[0].lstrip("[") if last.startswith("[") else f"#{n}"
        out[rid] = (body, None if n in server.fail else next(answers))
    return out


# ------------------------------------------------------------------ sessions and prefixes


async def test_a_session_recording_replays_its_sessions_turns_prefixes_and_think_times(tmp_path):
    rec = tmp_path / "rec.jsonl"
    original = await record(Server(), rec, **SESSIONS)
    trace = load_trace(str(rec))
    assert trace.replay is not None and trace.replay.sessions_mode and len(trace) == 6
    srv = Server()
    out = await replay(srv, trace)
    a, b = sessions(original), sessions(out)
    assert len(a) == 6 and any(len(s["turns"]) > 1 for s in a)
    assert shape(b) == shape(a)  # the same turns, lengths asked, prefix groups and think times
    assert offsets(b) == pytest.approx(offsets(a), abs=1e-6)  # sessions start at the recorded offsets
    hdr = out[0]["load"]
    assert hdr["level_unit"] == "sessions/s" and hdr["sessions"]["turns"]["given"] == "uniform:1-4"
    assert hdr["shared_prefix"] == {"tokens": 16, "groups": 3} and hdr["cache_policy"]["cache_prompt"] is True
    rb = hdr["trace"]["replay"]
    assert (rb["sessions"], rb["turns"], rb["anomalies"]) == (6, sum(len(s["turns"]) for s in a), 0)
    assert rb["prefix_groups"] == sorted({s["group"][0] for s in a})
    end = [d for d in out if d["type"] == "step" and d["event"] == "end"][0]
    assert end["sessions"] == {"started": 6, "completed": 6, "ended_by_failure": 0, "cut_at_step_end": 0, "cancelled": 0}
    # histories: turn k carries the earlier user messages and exactly the answers the replay's server gave
    bodies = bodies_by_id(srv)
    systems: dict[int, set[str]] = {}
    for s in b:
        for k, rid in enumerate(s["ids"]):
            body, _ = bodies[rid]
            msgs = body["messages"]
            assert msgs[0]["role"] == "system"
            systems.setdefault(s["group"][0], set()).add(msgs[0]["content"])
            for j in range(k):
                earlier_body, earlier_answer = bodies[s["ids"][j]]
                assert msgs[1 + 2 * j]["content"] == earlier_body["messages"][-1]["content"]
                assert msgs[2 + 2 * j] == {"role": "assistant", "content": earlier_answer}
    assert all(len(v) == 1 for v in systems.values()) and len({next(iter(v)) for v in systems.values()}) == len(
        systems)  # one system prompt per group, different across groups


async def test_speed_divides_the_session_starts_and_the_think_times(tmp_path):
    rec = tmp_path / "rec.jsonl"
    original = await record(Server(), rec, **SESSIONS)
    fast = load_trace(str(rec), speed=2.0)
    out = await replay(Server(), fast)
    a, b = sessions(original), sessions(out)
    assert offsets(b) == pytest.approx([x / 2 for x in offsets(a)], abs=1e-6)
    assert [[None if t is None else round(t / 2, 6) for t in s["think"]] for s in a] == [
        [None if t is None else round(t, 6) for t in s["think"]] for s in b]


async def test_a_window_keeps_the_sessions_starting_in_it(tmp_path):
    rec = tmp_path / "rec.jsonl"
    original = await record(Server(), rec, **SESSIONS)
    a = sessions(original)
    mid = (a[2]["start"] - a[0]["start"] + a[3]["start"] - a[0]["start"]) / 2
    trace = load_trace(str(rec), window=(mid, None))
    assert len(trace) == 3  # sessions 4-6 start after the window's start, with every turn of theirs
    assert shape(sessions(await replay(Server(), trace))) == shape(a[3:])


async def test_a_prefix_only_recording_replays_each_requests_group(tmp_path):
    rec = tmp_path / "rec.jsonl"
    srv0 = Server()
    original = await record(srv0, rec, mode="open", levels=[50.0], arrival="constant", shared_prefix_tokens=24,
                            prefix_groups=4, requests=12)
    trace = load_trace(str(rec))
    assert trace.replay is not None and not trace.replay.sessions_mode
    srv = Server()
    out = await replay(srv, trace)
    recs = sorted((d for d in out if d["type"] == "request"), key=lambda d: d["t_intended"])
    orig = sorted((d for d in original if d["type"] == "request"), key=lambda d: d["t_intended"])
    assert [d["prefix_group"] for d in recs] == [d["prefix_group"] for d in orig]
    assert all("session" not in d for d in recs) and out[0]["load"]["sessions"] is None
    assert out[0]["load"]["level_unit"] == "req/s"
    # the same system prompt text per group as the recording's (regenerated, deterministic)
    first_sys = {}
    for body in srv0.bodies:
        first_sys.setdefault(body["messages"][-1]["content"].split("]")[0], body["messages"][0]["content"])
    by_group_orig = {d["prefix_group"]: first_sys["[" + d["id"]] for d in orig}
    replay_sys = {}
    for body in srv.bodies:
        replay_sys[body["messages"][-1]["content"].split("]")[0]] = body["messages"][0]["content"]
    assert {d["prefix_group"]: replay_sys["[" + d["id"]] for d in recs} == by_group_orig


def test_a_plain_recording_has_no_replay_workload(tmp_path):
    rec = tmp_path / "rec.jsonl"
    import asyncio

    asyncio.run(record(Server(), rec, mode="open", levels=[50.0], arrival="constant", requests=4))
    trace = load_trace(str(rec))
    assert trace.replay is None and "replay" not in trace.header_block()


# ------------------------------------------------------------------ anomalies


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


async def test_incomplete_sessions_are_replayed_as_sent_and_counted_file_line(tmp_path):
    rec = tmp_path / "rec.jsonl"
    await record(Server(), rec, **{**SESSIONS, "turns": parse_lengths("3"), "requests": 4})
    lines = _lines(rec)
    reqs = [i for i, d in enumerate(lines) if d["type"] == "request"]
    by: dict[str, dict[int, int]] = {}
    for i in reqs:
        by.setdefault(lines[i]["session"], {})[lines[i]["turn"]] = i
    s1, s2, s3, _s4 = sorted(by, key=lambda s: lines[by[s][1]]["t_intended"])
    drop = by[s1][2]  # session 1: its turn 2 missing
    dup = dict(lines[by[s2][3]])  # session 2: turn 3 recorded twice
    fail = lines[by[s3][2]]  # session 3: turn 2 failed, turn 3 not sent
    fail.update(complete=False, error="http_5xx", turns_not_sent=1)
    out = [d for i, d in enumerate(lines) if i not in (drop, by[s3][3])] + [dup]
    rec.write_text("".join(json.dumps(d) + "\n" for d in out))
    trace = load_trace(str(rec))
    rp = trace.replay
    assert rp is not None and rp.anomaly_count == 3
    text = "\n".join(rp.anomalies)
    n_lines = len(out)
    assert f"{rec}:{n_lines}: session {s2} turn 3 recorded twice" in text
    assert f"session {s1}: turn 2 missing" in text and f"session {s3} turn 2 failed" in text
    turns = {it.session: [t.turn for t in it.turns] for it in rp.items}
    assert turns[s1] == [1, 3] and turns[s2] == [1, 2, 3] and turns[s3] == [1, 2]
    assert trace.header_block()["replay"]["anomalies"] == 3 and trace.source["anomalies"] == 3
    assert any("3 session anomalies" in n for n in trace.notes)
    srv = Server()
    recs = await replay(srv, trace)
    got = {tuple(s["asked"]) for s in sessions(recs)}
    assert len(got) == 4 and len([d for d in recs if d["type"] == "request"]) == 2 + 3 + 2 + 3


def test_a_bad_session_field_is_a_bad_row(tmp_path):
    rec = tmp_path / "rec.jsonl"
    import asyncio

    asyncio.run(record(Server(), rec, **SESSIONS))
    lines = _lines(rec)
    k = next(i for i, d in enumerate(lines) if d["type"] == "request")
    lines[k]["prefix_group"] = 7  # the header says 3 groups
    rec.write_text("".join(json.dumps(d) + "\n" for d in lines))
    trace = load_trace(str(rec))
    assert trace.source["skipped"] == 1
    assert trace.problems == [f"{rec}:{k + 1}: prefix_group 7 is not one of the header's 3 groups"]


# ------------------------------------------------------------------ datasets


async def _dataset_recording(tmp_path: Path) -> tuple[Path, list[dict], Server]:
    rec = tmp_path / "rec.jsonl"
    srv = Server()
    original = await record(srv, rec, mode="open", levels=[40.0], arrival="constant", turns=parse_lengths("uniform:1-3"),
                            dataset=str(example_path()), requests=5, seed=3)
    return rec, original, srv


def _user_texts(server: Server) -> list[tuple[str, ...]]:
    """Per request sent: its conversation's user messages in order (turn k: k of them), sorted."""
    return sorted(tuple(m["content"] for m in b["messages"] if m["role"] == "user") for b in server.bodies)


async def test_a_dataset_recording_replays_its_rows_and_texts_with_the_same_file(tmp_path):
    rec, original, srv0 = await _dataset_recording(tmp_path)
    trace = load_trace(str(rec))
    assert trace.replay is not None and trace.replay.dataset is not None
    assert trace.replay.dataset["sha256"] == original[0]["load"]["dataset"]["sha256"]
    srv = Server()
    out = await replay(srv, trace, dataset=str(example_path()))
    a, b = sessions(original), sessions(out)
    assert [s["row"] for s in b] == [s["row"] for s in a] and all(r is not None for s in a for r in s["row"])
    assert shape(b) == shape(a)
    texts = _user_texts(srv)
    assert texts == _user_texts(srv0)  # each turn's user text (and its history's): the recording's
    from tui.sources.load.dataset import read_dataset

    ds = read_dataset(str(example_path()))
    expected = sorted(tuple(t.user for t in ds.by_row(s["row"][0]).turns[:k]) for s in a
                      for k in range(1, len(s["turns"]) + 1))
    assert texts == expected  # that row's turns, from the dataset file
    assert out[0]["load"]["dataset"]["sha256"] == trace.replay.dataset["sha256"]


async def test_a_dataset_replay_refuses_a_missing_or_different_file(tmp_path):
    rec, _original, _srv = await _dataset_recording(tmp_path)
    trace = load_trace(str(rec))
    with pytest.raises(ConfigError, match=r"recorded with the dataset example-chat\.jsonl .*--dataset FILE"):
        replay_cfg(trace).validate()
    other = tmp_path / "other.jsonl"
    shutil.copy(example_path(), other)
    other.write_bytes(other.read_bytes() + b"\n")
    with pytest.raises(SetupError, match="sha256"):
        await replay(Server(), trace, dataset=str(other))
    assert trace.replay is not None
    with pytest.raises(ConfigError, match="has sha256 .* recorded with example-chat.jsonl sha256"):
        trace.replay.check_dataset_file(str(other), "rec.jsonl")


# ------------------------------------------------------------------ worker processes


def _sessions_of(recs: list[dict]) -> list[tuple]:
    return sorted(shape(sessions(recs)))


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_replay_over_two_workers_sends_the_recorded_sessions(tmp_path):
    rec = tmp_path / "rec.jsonl"
    with FaultServer() as fs:
        url = fs.url("ok", tokens=2)
        base = {k: v for k, v in SESSIONS.items()}
        original: list[dict] = []
        await run_load(cfg(url=url, **base), original.append)
        rec.write_text("".join(json.dumps(d) + "\n" for d in original))
        trace = load_trace(str(rec))
        runs = {}
        for workers in (1, 2):
            out: list[dict] = []
            await run_load(replay_cfg(trace, url=url, workers=workers), out.append)
            reqs = [d for d in out if d.get("type") == "request"]
            assert len({r["id"] for r in reqs}) == len(reqs) and len({r["session"] for r in reqs}) == 6
            end = [d for d in out if d.get("type") == "step" and d.get("event") == "end"][0]
            assert end["sessions"]["started"] == 6 and end["sessions"]["completed"] == 6
            assert offsets(sessions(out)) == pytest.approx(offsets(sessions(original)), abs=1e-6)
            runs[workers] = _sessions_of(out)
    assert runs[1] == runs[2] == _sessions_of(original)
