"""Multi-turn sessions and shared prefixes in the load engine (issue 23), against an in-memory server.

The server (an httpx.MockTransport handler) answers every chat or completions request with an answer text unique to
that request and remembers each request body, so a test can check that turn k carried turns 1..k-1's user messages
and exactly the answers the server gave.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fault_server import FaultServer
from tui.core.lengths import parse_lengths
from tui.core.records import parse_object
from tui.core.thinktime import draw_think, header_block, parse_think_time
from tui.sources.load import ConfigError, LoadConfig, run_load
from tui.sources.load.executor import Req
from tui.sources.load.prompts import PromptBuilder
from tui.sources.load.runner import Clock, StepRunner
from tui.sources.load.steps import Step
from tui.sources.load.workload import Workload


class Server:
    """An in-memory OpenAI-style server: answer i is ``"answer-<i> ..."``; ``fail``: 1-based request numbers that get
    HTTP 500."""

    def __init__(self, fail: tuple[int, ...] = (), chat: bool = True) -> None:
        self.bodies: list[dict] = []
        self.answers: list[str] = []
        self.fail = set(fail)
        self.chat = chat

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})
        if request.method != "POST" or not path.endswith("completions"):
            return httpx.Response(404, json={"error": "not here"})
        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(self.bodies)
        if n in self.fail:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        answer = f"answer-{n} said {'ab' * (n % 3)}"
        self.answers.append(answer)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=httpx.ByteStream(self._sse(answer)))

    def _sse(self, answer: str) -> bytes:
        out = b""
        for piece in (answer[:7], answer[7:]):  # two chunks: the kept text is the pieces joined
            if self.chat:
                d = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            else:
                d = {"choices": [{"index": 0, "text": piece}]}
            out += b"data: " + json.dumps(d).encode() + b"\n\n"
        fin = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 2}}
        return out + b"data: " + json.dumps(fin).encode() + b"\n\ndata: [DONE]\n\n"


def cfg(**kw) -> LoadConfig:
    base = dict(url="http://127.0.0.1:9/v1", model="m", levels=[1], requests=2, metrics=False, gpu=False,
                progress_interval=0, api_key_env=None, read_timeout=5.0, connect_timeout=2.0, warmup=0,
                input_tokens=(8, 8), output_tokens=(4, 4))
    base.update(kw)
    return LoadConfig(**base)


async def run(server: Server, **kw) -> list[dict]:
    out: list[dict] = []
    await run_load(cfg(**kw), out.append, transport=httpx.MockTransport(server.handler))
    for d in out:
        parse_object(json.loads(json.dumps(d)))  # every record parses with the core reader
    return out


def reqs(recs: list[dict]) -> list[dict]:
    return [d for d in recs if d["type"] == "request"]


def step_end(recs: list[dict]) -> dict:
    (end,) = [d for d in recs if d["type"] == "step" and d["event"] == "end"]
    return end


# ------------------------------------------------------------------ history


async def test_each_turn_carries_the_earlier_user_messages_and_the_exact_answers():
    srv = Server()
    recs = await run(srv, turns=parse_lengths("3"), requests=2, levels=[1])
    rs = reqs(recs)
    assert len(rs) == 6 and len(srv.bodies) == 6
    by_body = list(zip(rs, srv.bodies, strict=True))  # closed loop at 1: one request at a time, in order
    for i, (r, body) in enumerate(by_body):
        k = r["turn"]
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant"] * (k - 1) + ["user"]
        first = i - (k - 1)  # the session's first request
        for j in range(k - 1):
            earlier = srv.bodies[first + j]["messages"][-1]["content"]
            assert msgs[2 * j]["content"] == earlier  # the earlier user message as sent
            assert msgs[2 * j + 1]["content"] == srv.answers[first + j]  # the answer exactly as returned
        assert body["cache_prompt"] is True
    assert [r["turn"] for r in rs] == [1, 2, 3, 1, 2, 3]
    assert len({r["session"] for r in rs}) == 2 and all(r["turns_planned"] == 3 for r in rs)
    ctx = [r["context_tokens"] for r in rs[:3]]
    assert ctx[0] < ctx[1] < ctx[2]  # the context grows by the earlier turns
    assert all("think_s" in r for r in rs if r["turn"] >= 2) and all("think_s" not in r for r in rs if r["turn"] == 1)
    h = recs[0]["load"]
    assert h["level_unit"] == "sessions" and h["sessions"]["turns"]["given"] == "3"
    assert h["cache_policy"]["cache_prompt"] is True and h["shared_prefix"] is None
    assert step_end(recs)["sessions"] == {"started": 2, "completed": 2, "ended_by_failure": 0, "cut_at_step_end": 0, "cancelled": 0}


async def test_completions_join_the_history_as_text():
    srv = Server(chat=False)
    recs = await run(srv, api="completions", turns=parse_lengths("2"), requests=1)
    assert len(reqs(recs)) == 2
    p1, p2 = srv.bodies[0]["prompt"], srv.bodies[1]["prompt"]
    assert p2.startswith(p1 + "\n\n" + srv.answers[0] + "\n\n")


async def test_a_failed_turn_ends_its_session_and_the_next_starts():
    srv = Server(fail=(2,))  # the first session's second turn fails
    recs = await run(srv, turns=parse_lengths("3"), requests=2)
    rs = reqs(recs)
    assert [(r["turn"], r["complete"]) for r in rs] == [(1, True), (2, False), (1, True), (2, True), (3, True)]
    assert rs[1]["turns_not_sent"] == 1 and all("turns_not_sent" not in r for r in rs if r["complete"])
    assert rs[2]["session"] != rs[1]["session"]
    assert step_end(recs)["sessions"] == {"started": 2, "completed": 1, "ended_by_failure": 1, "cut_at_step_end": 0, "cancelled": 0}


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_closed_loop_holds_n_sessions_in_flight():
    with FaultServer() as fs:  # a real local server: requests overlap in time
        recs: list[dict] = []
        await run_load(cfg(url=fs.url("ok", tokens=3, delay=0.01), model=None, turns=parse_lengths("2"),
                           requests=6, levels=[3]), recs.append)
    rs = reqs(recs)
    assert len(rs) == 12 and len({r["session"] for r in rs}) == 6
    spans: dict[str, list[float]] = {}
    for r in rs:
        s = spans.setdefault(r["session"], [r["t_sent"], r["t_end"]])
        s[0], s[1] = min(s[0], r["t_sent"]), max(s[1], r["t_end"])
    edges = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()],
                   key=lambda x: (x[0], x[1]))
    depth = peak = 0
    for _, d in edges:
        depth += d
        peak = max(peak, depth)
    assert peak == 3  # three sessions at once, never more


async def test_open_loop_arrivals_start_sessions():
    srv = Server()
    recs = await run(srv, mode="open", levels=[50.0], arrival="constant", turns=parse_lengths("2"), requests=3)
    rs = reqs(recs)
    assert len(rs) == 6 and len({r["session"] for r in rs}) == 3
    assert recs[0]["load"]["level_unit"] == "sessions/s"
    assert step_end(recs)["sessions"]["completed"] == 3


async def test_a_step_ended_by_duration_cuts_the_sessions_in_their_think_time():
    srv = Server()
    recs = await run(srv, turns=parse_lengths("3"), think_time=parse_think_time("30"), requests=None, duration=0.5)
    rs = reqs(recs)
    assert [r["turn"] for r in rs] == [1]  # its next turn would come after the step's end
    assert step_end(recs)["sessions"] == {"started": 1, "completed": 0, "ended_by_failure": 0, "cut_at_step_end": 1, "cancelled": 0}


# ------------------------------------------------------------------ shared prefixes and the cache policy


async def test_shared_prefix_bodies_are_identical_within_a_group_and_differ_across_groups():
    srv = Server()
    recs = await run(srv, shared_prefix_tokens=64, prefix_groups=3, requests=24, levels=[2])
    rs = reqs(recs)
    assert len(rs) == 24
    by_id = {}
    for body in srv.bodies:
        sys_msg, user = body["messages"]
        assert sys_msg["role"] == "system" and user["role"] == "user"
        by_id[user["content"].split("]")[0]] = sys_msg["content"]
        assert body["cache_prompt"] is True
    groups: dict[int, set[str]] = {}
    for r in rs:
        groups.setdefault(r["prefix_group"], set()).add(by_id["[" + r["id"]])
        assert "session" not in r and "context_tokens" in r
    assert set(groups) == {0, 1, 2}
    assert all(len(v) == 1 for v in groups.values())  # one system prompt per group
    texts = [next(iter(v)) for v in groups.values()]
    assert len(set(texts)) == 3 and len({t[:20] for t in texts}) == 3  # different from their first words
    h = recs[0]["load"]
    assert h["shared_prefix"] == {"tokens": 64, "groups": 3} and h["cache_policy"]["cache_prompt"] is True
    assert h["sessions"] is None and h["level_unit"] == "concurrency"


async def test_plain_workload_sends_cache_prompt_false_and_one_user_message():
    srv = Server()
    recs = await run(srv, requests=2)
    assert all(b["cache_prompt"] is False and len(b["messages"]) == 1 for b in srv.bodies)
    h = recs[0]["load"]
    assert h["cache_policy"]["cache_prompt"] is False
    assert (h["sessions"], h["shared_prefix"], h["dataset"]) == (None, None, None)
    assert all("session" not in r and "prefix_group" not in r for r in reqs(recs))
    assert "sessions" not in step_end(recs)


# ------------------------------------------------------------------ datasets (a stand-in for the datasets seam)


@dataclass(frozen=True)
class _Turn:
    user: str
    user_tokens: int | None
    answer_tokens: int | None


@dataclass(frozen=True)
class _Conv:
    row: int
    system: str | None
    turns: tuple[_Turn, ...]


class _Dataset:
    def __init__(self) -> None:
        self.convs = [_Conv(1, "be brief", (_Turn("hello one", 3, 5), _Turn("and two", 2, None))),
                      _Conv(2, None, (_Turn("only turn", 2, 7),))]

    def at(self, seed: object, n: int) -> _Conv:
        return self.convs[n % len(self.convs)]

    def header_block(self) -> dict:
        return {"name": "stand-in"}

    def __len__(self) -> int:
        return len(self.convs)


def _runner(workload: Workload, worker: int = 0, workers: int = 1) -> StepRunner:
    return StepRunner(None, Clock(), PromptBuilder(), "r", input_tokens=(8, 8), output_tokens=(4, 4),  # type: ignore[arg-type]
                      seed=workload.seed, on_record=lambda d, r: None, worker=worker, workers=workers,
                      workload=workload, input_lengths=parse_lengths("uniform:1-500"),
                      output_lengths=parse_lengths("normal:100,30"))


def test_dataset_turns_ask_their_text_lengths_and_answer_lengths():
    wl = Workload(seed=1, turns=parse_lengths("5"), dataset=_Dataset())
    r = _runner(wl)
    step = Step(1.0, 1, "measure", "closed")
    plan = r.session_plan(step, 0)
    assert plan.turns == 2 and plan.system == "be brief"  # capped by the conversation's turns
    req, user, n = r.new_turn(step, 0.0, plan, 1, "s", [], 0, 0.0)
    assert (user, n, req.out_asked, req.turn.fields["dataset_row"]) == ("hello one", 3, 5, 1)
    req2, user2, _ = r.new_turn(step, 0.0, plan, 2, "s", [("hello one", "hi")], 3 + 4, 0.0)
    assert user2 == "and two" and req2.out_asked >= 1  # no answer length in the row: drawn
    assert req2.turn.fields["context_tokens"] == 2 + 7 + 2  # system (estimated) + history + this message


def test_a_counted_system_message_counts_in_the_context_as_the_server_counted_it():
    from tui.core.datasets import Conversation, DatasetTurn

    class _Counted(_Dataset):
        def __init__(self) -> None:
            self.convs = [Conversation(row=1, system="be brief please", turns=(DatasetTurn("hi", 1, 4),),
                                       system_tokens=37)]

    r = _runner(Workload(seed=1, turns=parse_lengths("1"), dataset=_Counted()))
    step = Step(1.0, 1, "measure", "closed")
    plan = r.session_plan(step, 0)
    assert plan.system_tokens == 37  # the server's count, not the ~4 chars/token estimate (4)
    req, _user, _n = r.new_turn(step, 0.0, plan, 1, "s", [], 0, 0.0)
    assert req.turn.fields["context_tokens"] == 37 + 1  # system as counted + the message


# ------------------------------------------------------------------ split over workers


def _session_draws(wl: Workload, runner: StepRunner, step: Step, index: int) -> tuple:
    plan = runner.session_plan(step, index)
    out = [plan.turns, plan.group]
    for k in range(1, plan.turns + 1):
        req, _u, n_in = runner.new_turn(step, 0.0, plan, k, "s", [], 0, 0.0)
        out.append((n_in, req.out_asked, round(wl.think_at(plan.where, k), 9) if k > 1 else None))
    return tuple(out)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), workers=st.integers(2, 5), n=st.integers(1, 12))
def test_a_split_over_workers_asks_what_one_process_asks(seed, workers, n):
    mk = lambda: Workload(seed=seed, turns=parse_lengths("uniform:1-4"),  # noqa: E731
                          think=parse_think_time("lognormal:2,0.5"), prefix_tokens=16, prefix_groups=4)
    step = Step(2.0, 1, "measure", "closed")
    one = _runner(mk())
    alone = [_session_draws(one.workload, one, step, one.closed_index(step)) for _ in range(n)]
    split: dict[int, tuple] = {}
    runners = [_runner(mk(), k, workers) for k in range(workers)]
    for k, r in enumerate(runners):  # each worker's closed-loop indices: k, k + W, k + 2W, ...
        for _ in range(len(range(k, n, workers))):
            i = r.closed_index(step)
            split[i] = _session_draws(r.workload, r, step, i)
    assert [split[i] for i in range(n)] == alone


def test_session_ids_are_unique_over_workers():
    ids = set()
    for k in range(3):
        r = _runner(Workload(seed=0, turns=parse_lengths("2")), k, 3)
        for _ in range(5):
            ids.add(r.next_session_id())
    assert len(ids) == 15


# ------------------------------------------------------------------ think times and validation


def test_think_time_forms_draws_and_bounds():
    assert parse_think_time("2.5").a == 2.5 and draw_think(parse_think_time("2.5"), 1, "k") == 2.5
    d = parse_think_time("lognormal:5,0.8[1-20]")
    xs = [draw_think(d, 7, f"k{i}") for i in range(2000)]
    assert all(1 <= x <= 20 for x in xs) and xs == [draw_think(d, 7, f"k{i}") for i in range(2000)]
    xs.sort()
    assert 4.0 < xs[1000] < 6.0  # the median near 5 (seeded: exact for this seed)
    e = parse_think_time("exponential:3")
    mean = sum(draw_think(e, 3, f"k{i}") for i in range(4000)) / 4000
    assert 2.7 < mean < 3.3
    u = parse_think_time("uniform:1-2")
    assert all(1 <= draw_think(u, 0, str(i)) <= 2 for i in range(200))
    assert header_block(d)["distribution"]["kind"] == "lognormal"
    for bad in ("-1", "x", "uniform:3-1", "normal:1", "gamma:1,2", "lognormal:0,1"):
        with pytest.raises(ValueError):
            parse_think_time(bad)


@pytest.mark.parametrize(("kw", "msg"), [
    (dict(think_time=parse_think_time("1")), "--think-time needs --turns"),
    (dict(prefix_groups=3), "--prefix-groups needs --shared-prefix-tokens"),
    (dict(shared_prefix_tokens=0), "--shared-prefix-tokens"),
    (dict(dataset_max_bad_share=1.5), "--dataset-max-bad-share"),
])
def test_bad_workload_configs_are_refused(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        cfg(**kw).validate()


def test_req_of_a_plain_request_has_no_turn():
    r = Req("x", "measure", 1.0, 1, None, 1, 1, "p", 0.0)
    assert r.turn is None and r.answer is None


async def test_a_dataset_seam_feeds_the_requests_and_the_header(monkeypatch):
    import tui.sources.load.dataset as dataset_mod

    seen = {}

    def read_dataset(path, *, max_bad_share):
        seen["read"] = (path, max_bad_share)
        return _Dataset()

    async def prepare_dataset(ds, client, root, *, tokenize_form, max_context, server, output_tokens_default,
                              output_tokens_given, say, tokenizer=None):
        seen["prepare"] = (max_context, output_tokens_default)
        return ds

    monkeypatch.setattr(dataset_mod, "read_dataset", read_dataset)
    monkeypatch.setattr(dataset_mod, "prepare_dataset", prepare_dataset)
    srv = Server()
    recs = await run(srv, dataset="d.jsonl", max_context=99, requests=2)
    assert seen == {"read": ("d.jsonl", 0.05), "prepare": (99, 4)}
    assert recs[0]["load"]["dataset"] == {"name": "stand-in"}
    assert [b["messages"][-1]["content"] for b in srv.bodies] == ["hello one", "only turn"]
    assert srv.bodies[0]["messages"][0] == {"role": "system", "content": "be brief"}
    assert [r["dataset_row"] for r in reqs(recs)] == [1, 2]
    assert [r["output_tokens_asked"] for r in reqs(recs)] == [5, 7]  # the dataset's answer lengths
