"""The declared CLI after the merge of issue 38's CLI with select, export, index, history and the tokens flags:
each flag writes its own setting, and the flags a command shares with another reach it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from tui.cli import COMMANDS, settings_of
from tui.cli.declare import Settings, block, build, flag


def test_no_two_flags_of_a_command_share_a_destination():
    for name, command in COMMANDS.items():
        cls, _run = command.load()
        p = build(argparse.ArgumentParser(prog=name), cls)  # build refuses a shared destination
        dests = [a.dest for a in p._actions if a.dest != argparse.SUPPRESS]
        assert len(dests) == len(set(dests)), name


def test_a_shared_destination_is_refused_when_the_parser_is_built():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Inner(Settings):
        alpha: float = flag("--inner-alpha", type=float, default=0.5)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Outer(Settings):
        alpha: float = flag("--alpha", type=float, default=0.05)
        inner: Inner = block(Inner)

    with pytest.raises(ValueError, match="share a destination: alpha"):
        build(argparse.ArgumentParser(), Outer)


def test_accepts_quality_alpha_leaves_the_verdict_alpha_alone():
    s = settings_of(["accept", "--records", "run.jsonl", "--quality-alpha", "0.2"])
    assert s.acceptance.alpha == 0.05 and s.quality_policy.quality_alpha == 0.2
    s = settings_of(["accept", "--records", "run.jsonl", "--alpha", "0.01"])
    assert s.acceptance.alpha == 0.01 and s.quality_policy.quality_alpha == 0.05


def test_select_passes_the_verdict_flags_given_and_only_those_to_accept():
    from tui.cli.select import _shared_argv

    s = settings_of(["select", "--candidate", "a=a.jsonl", "--slo-ttft-ms", "500", "--slo-e2e-ms", "off",
                     "--min-window-minutes", "5", "--quality-alpha", "0.1"])
    argv = _shared_argv(s)
    assert argv == ["--slo-ttft-ms", "500", "--slo-e2e-ms", "off", "--min-window-minutes", "5",
                    "--quality-alpha", "0.1"]
    assert _shared_argv(settings_of(["select", "--candidate", "a=a.jsonl"])) == []


@pytest.mark.parametrize("cmd", ["report", "replay", "run", "live", "sweep", "accept", "watch", "compare", "measure"])
def test_percentiles_is_a_declared_setting_of_the_reading_and_load_commands(cmd):
    from tui.cli import PERCENTILE_COMMANDS

    assert cmd in PERCENTILE_COMMANDS
    base = {"report": ["f.jsonl"], "replay": ["f.jsonl"], "accept": ["--records", "f.jsonl"],
            "compare": ["a.jsonl", "b.jsonl"], "watch": ["--metrics-url", "http://127.0.0.1:1/metrics"]}
    load = ["--url", "http://127.0.0.1:1", "--concurrency", "1"]
    argv = [cmd, *base.get(cmd, load), "--percentiles", "50,90,99.9"]
    from tui.core.stats import parse_percentiles

    assert settings_of(argv).percentiles == parse_percentiles("50,90,99.9")


def test_budget_lists_only_on_budget_and_one_value_elsewhere():
    from tui.cli.budgetflags import given_fields

    b = settings_of(["budget", "--config", "a.json", "--config", "b.json", "--max-seq", "4096,8192"]).budget
    assert b.config == ["a.json", "b.json"] and b.max_seq == "4096,8192"
    r = settings_of(["report", "f.jsonl", "--max-seq", "4096,8192"]).budget
    with pytest.raises(ValueError, match="takes one value here"):
        given_fields(r)


def test_export_default_out_and_tokenizer_and_embeddings_are_declared():
    from tui.cli.export import default_out

    assert default_out(settings_of(["export", "run.jsonl", "--format", "parquet"])) == "run.jsonl.parquet"
    s = settings_of(["run", "--url", "http://127.0.0.1:1", "--concurrency", "1", "--tokenizer", "tok.json",
                     "--api", "embeddings"])
    assert s.load.tokenizer == "tok.json" and s.target.api == "embeddings"
