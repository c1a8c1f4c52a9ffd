"""Sessions with --workers 2 (issue 23): each session runs where it started, the ids stay unique, the step's sessions
block is the workers' sum, and the sessions ask what they ask in one process (the same seeded draws)."""

from __future__ import annotations

import pytest

from tests.support.fault_server import FaultServer
from tui.core.lengths import parse_lengths
from tui.sources.load import LoadConfig, run_load

# every test here starts a process or a listening server (tests/conftest.py checks it)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


def cfg(url: str, **kw) -> LoadConfig:
    base = dict(url=url, model="m", mode="closed", levels=[2.0], requests=6, metrics=False, gpu=False, warmup=0,
                api_key_env=None, progress_interval=0, turns=parse_lengths("uniform:1-3"), seed=5,
                input_tokens=(4, 40), input_lengths=parse_lengths("uniform:4-40"), output_tokens=(2, 6),
                output_lengths=parse_lengths("uniform:2-6"), shared_prefix_tokens=16, prefix_groups=3)
    base.update(kw)
    return LoadConfig(**base)


def sessions_of(out: list[dict]) -> list[tuple]:
    """Per session: (turns planned, prefix group, (input asked, output asked) of each turn in order), sorted."""
    by: dict[str, list[dict]] = {}
    for d in out:
        if d.get("type") == "request":
            by.setdefault(d["session"], []).append(d)
    rows = []
    for turns in by.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))  # every turn, once, in its session
        assert len({r["prefix_group"] for r in turns}) == 1  # one prefix per session
        rows.append((turns[0]["turns_planned"], turns[0]["prefix_group"],
                     tuple((r["input_tokens_asked"], r["output_tokens_asked"]) for r in turns)))
    return sorted(rows)


@pytest.mark.parametrize("mode", ["closed", "open"])
async def test_workers_ask_what_one_process_asks_and_sum_their_sessions(fs, mode):
    runs = {}
    for workers in (1, 2):
        out: list[dict] = []
        kw = dict(mode="open", levels=[20.0], arrival="constant") if mode == "open" else {}
        await run_load(cfg(fs.url("ok", tokens=2), workers=workers, **kw), out.append)
        reqs = [d for d in out if d.get("type") == "request"]
        assert len({r["id"] for r in reqs}) == len(reqs)
        assert len({r["session"] for r in reqs}) == 6
        end = [d for d in out if d.get("type") == "step" and d.get("event") == "end"][0]
        assert end["sessions"]["started"] == 6 and end["sessions"]["completed"] == 6
        runs[workers] = sessions_of(out)
    assert runs[2] == runs[1]
