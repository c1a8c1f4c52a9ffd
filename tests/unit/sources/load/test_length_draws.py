"""Per-request token lengths of the load generator: seeded, the same split over workers as in one process, the
old A-B draws kept, and what a run asks is what it records (against the in-test FaultServer)."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fault_server import FaultServer
from tui.core.lengths import parse_lengths
from tui.sources.load import LoadConfig, run_load
from tui.sources.load.arrivals import open_schedule, process_arrivals
from tui.sources.load.prompts import PromptBuilder
from tui.sources.load.runner import Clock, StepRunner
from tui.sources.load.steps import Step
from tui.sources.load.wire import split_count

FORMS = ["uniform:1-500", "normal:200,80[20-400]", "lognormal:300,0.7"]


def runner(seed, worker: int, workers: int, in_form: str, out_form: str) -> StepRunner:
    i, o = parse_lengths(in_form), parse_lengths(out_form)
    return StepRunner(None, Clock(), PromptBuilder(), "run", input_tokens=i.bounds, output_tokens=o.bounds,  # type: ignore[arg-type]
                      seed=seed, on_record=lambda d, r: None, worker=worker, workers=workers,
                      input_lengths=i, output_lengths=o)


def closed_sizes(seed, workers: int, n: int, in_form: str, out_form: str, steps: list[Step]) -> list[tuple]:
    """(step, index, n_in, n_out) of every request the runners of ``workers`` build for ``n`` requests a step (each
    runner its split_count share), in index order."""
    rs = [runner(seed, k, workers, in_form, out_form) for k in range(workers)]
    out = []
    for step in steps:
        for k, count in enumerate(split_count(n, workers)):
            for j in range(count):
                req = rs[k].new_req(step, 0.0)
                out.append((step.level, step.round, k + j * workers, req.in_asked, req.out_asked))
    return sorted(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(), st.integers(2, 5), st.integers(1, 40), st.sampled_from(FORMS), st.sampled_from(FORMS))
def test_closed_loop_lengths_split_over_workers_are_the_single_process_lengths(seed, workers, n, fin, fout):
    steps = [Step(2.0, 1, "warmup", "closed"), Step(2.0, 1, "measure", "closed"), Step(4.0, 2, "measure", "closed")]
    one = closed_sizes(seed, 1, n, fin, fout, steps)
    split = closed_sizes(seed, workers, n, fin, fout, steps)
    assert split == one


@settings(max_examples=40, deadline=None)
@given(st.integers(), st.integers(2, 5), st.integers(1, 60), st.sampled_from(FORMS))
def test_open_loop_lengths_split_over_workers_are_the_single_process_lengths(seed, workers, n, form):
    """Every W-th arrival of one schedule to each worker (as the coordinator deals them): arrival i asks the same
    lengths wherever it is sent, also in a second step after ids have run ahead unevenly."""
    def sizes(w: int) -> dict:
        got = {}
        rs = [runner(seed, k, w, form, form) for k in range(w)]
        for step in (Step(5.0, 1, "measure", "open"), Step(10.0, 1, "measure", "open")):
            for k in range(w):
                for a in process_arrivals(open_schedule("poisson", step.level, 1.0, seed, 1), n, k, w):
                    req = rs[k].new_req(step, a.offset, a.input_tokens, a.output_tokens, a.seq)
                    got[(step.level, a.seq)] = (req.in_asked, req.out_asked)
        return got

    one = sizes(1)
    assert len(one) == 2 * n and sizes(workers) == one


@settings(max_examples=40, deadline=None)
@given(st.integers(), st.integers(1, 200), st.integers(0, 300), st.integers(1, 300), st.integers(0, 300))
def test_the_old_a_b_form_draws_what_it_always_drew(seed, lo_in, span_in, lo_out, span_out):
    """``A-B`` keeps the sequential stream of before (random.Random(f"{seed}:lengths"), input then output), so a run
    with an old command line and seed asks the same lengths as it did."""
    fin, fout = f"{lo_in}-{lo_in + span_in}", f"{lo_out}-{lo_out + span_out}"
    r = runner(seed, 0, 1, fin, fout)
    step = Step(1.0, 1, "measure", "closed")
    got = [(q.in_asked, q.out_asked) for q in (r.new_req(step, 0.0) for _ in range(20))]
    old = random.Random(f"{seed}:lengths")
    want = []
    for _ in range(20):
        a = lo_in if span_in == 0 else old.randint(lo_in, lo_in + span_in)
        b = lo_out if span_out == 0 else old.randint(lo_out, lo_out + span_out)
        want.append((a, b))
    assert got == want


def test_without_a_distribution_the_pairs_mean_what_they_always_did():
    r = StepRunner(None, Clock(), PromptBuilder(), "run", input_tokens=(3, 9), output_tokens=(5, 5), seed=4,  # type: ignore[arg-type]
                   on_record=lambda d, q: None)
    assert r.input_lengths.sequential and r.output_lengths.kind == "fixed"
    step = Step(1.0, 1, "measure", "closed")
    old = random.Random("4:lengths")
    assert [r.new_req(step, 0.0).in_asked for _ in range(10)] == [old.randint(3, 9) for _ in range(10)]


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def cfg(url: str, **kw) -> LoadConfig:
    base = dict(url=url, model="m", mode="open", levels=[400.0], requests=300, metrics=False, gpu=False,
                api_key_env=None, progress_interval=0, workers=1, warmup=0, seed=11)
    base.update(kw)
    return LoadConfig(**base)


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_run_asks_the_drawn_lengths_and_they_follow_the_distribution(fs):
    """300 open-loop requests, input lognormal:120,0.5 and output normal:20,5[1-40] (seeded: the same numbers on every
    run): each record's asked lengths are the ones sent (max_tokens in the body the server got), the header records
    the distributions, and the sample median of the asked prompt lengths is within 4 standard errors of 120."""
    fin, fout = parse_lengths("lognormal:120,0.5"), parse_lengths("normal:20,5[1-40]")
    out: list[dict] = []
    before = len(fs.completions())
    await run_load(cfg(fs.url("ok", tokens=2), input_tokens=fin.bounds, output_tokens=fout.bounds,
                       input_lengths=fin, output_lengths=fout), out.append)
    header = out[0]
    assert header["type"] == "run"
    assert header["load"]["input_tokens"]["given"] == "lognormal:120,0.5"
    assert header["load"]["input_tokens"]["distribution"]["kind"] == "lognormal"
    assert header["load"]["output_tokens"]["distribution"] == {
        "kind": "normal", "mean": 20, "sd": 5, "min": 1, "max": 40, "clip": "rounded, then clamped to [min, max]",
        "draw": "per request from (seed, step, index): the same with any split over workers"}
    reqs = [d for d in out if d.get("type") == "request"]
    assert len(reqs) == 300
    sent = {e["id"]: e["body"] for e in fs.completions()[before:]}
    for d in reqs:
        assert sent[d["id"]]["max_tokens"] == d["output_tokens_asked"]
        assert 1 <= d["output_tokens_asked"] <= 40 and d["input_tokens_asked"] >= 1
    ins = [d["input_tokens_asked"] for d in reqs]
    se = 0.5 * math.sqrt(math.pi / 2) / math.sqrt(len(ins))
    assert abs(math.log(statistics.median(ins)) - math.log(120)) < 4 * se
    assert len(set(ins)) > 50  # drawn, not fixed


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_open_loop_lengths_of_three_workers_are_the_single_process_lengths(fs):
    """Mirrors test_workers.py's schedule test for lengths: the same seed in one process and in three worker
    processes asks the same lengths at the same intended times."""
    fin = parse_lengths("lognormal:60,0.6[4-400]")
    seqs = {}
    for workers in (1, 3):
        out: list[dict] = []
        await run_load(cfg(fs.url("ok", tokens=2), levels=[40.0], requests=40, workers=workers, seed=7,
                           input_tokens=fin.bounds, input_lengths=fin), out.append)
        reqs = sorted((d for d in out if d.get("type") == "request"), key=lambda d: d["t_intended"])
        assert len(reqs) == 40
        seqs[workers] = [(d["input_tokens_asked"], d["output_tokens_asked"]) for d in reqs]
    assert seqs[3] == seqs[1] and len(set(seqs[1])) > 10


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_a_worker_engine_process_or_ray_actor_draws_with_the_setups_distributions():
    """The Ray actor and the worker process both wrap WorkerEngine(setup): the distributions travel in the setup
    (pickled, as over a worker's pipe) and the engine's runner draws the single-process lengths with them."""
    import pickle

    from tui.sources.load.wire import WorkerSetup
    from tui.sources.load.worker import WorkerEngine

    fin, fout = parse_lengths("lognormal:300,0.7"), parse_lengths("uniform:5-50")
    setup = WorkerSetup(worker=1, workers=3, endpoint="http://127.0.0.1:9/v1/completions", query="", chat=False,
                        model="m", ignore_eos=False, connect_timeout=1.0, read_timeout=1.0, insecure=False,
                        token_offsets=False, headers={}, secrets=[], run_id="run", seed=5, input_tokens=fin.bounds,
                        output_tokens=fout.bounds, max_in_flight=8, prompts=PromptBuilder().state(), anchor=None,
                        input_lengths=fin, output_lengths=fout)
    engine = WorkerEngine(pickle.loads(pickle.dumps(setup)), out=None)  # type: ignore[arg-type]
    await engine.start()
    try:
        step = Step(3.0, 1, "measure", "closed")
        got = [(q.in_asked, q.out_asked) for q in (engine.runner.new_req(step, 0.0) for _ in range(5))]
        one = runner(5, 0, 1, "lognormal:300,0.7", "uniform:5-50")
        want = [(q.in_asked, q.out_asked) for q in (one.new_req(step, 0.0) for _ in range(16))][1::3]  # 1, 4, 7, ...
        assert got == want[:5]
    finally:
        await engine.close()


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_closed_loop_lengths_of_two_workers_are_the_single_process_lengths(fs):
    """Closed loop has no schedule (which loop sends which request is timing), but the set of lengths a step asks is
    the same: request k of the step asks (seed, step, k)'s lengths, and the workers' numbers partition 0..n-1."""
    fin, fout = parse_lengths("normal:80,30[8-200]"), parse_lengths("uniform:4-40")
    asked = {}
    for workers in (1, 2):
        out: list[dict] = []
        await run_load(cfg(fs.url("ok", tokens=2), mode="closed", levels=[4.0], requests=24, workers=workers,
                           input_tokens=fin.bounds, output_tokens=fout.bounds, input_lengths=fin,
                           output_lengths=fout), out.append)
        reqs = [d for d in out if d.get("type") == "request"]
        assert len(reqs) == 24
        asked[workers] = sorted((d["input_tokens_asked"], d["output_tokens_asked"]) for d in reqs)
    assert asked[2] == asked[1] and len(set(asked[1])) > 12
