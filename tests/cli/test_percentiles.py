"""``--percentiles`` (issue 41): the latency percentiles read and shown by every reading and load command, with
docs/statistics.md's n-support rule (1 - q^n >= 0.95: P90 29, P99.9 2,995) and the one mark, in the text, the JSON
(keys p50, p90, p99.9), the HTML and the console's latency pane; the default unchanged; a bad list one line, exit 2.
The support boundary is checked on seeded samples at n-1 and n for each quantile."""

from __future__ import annotations

import json
import math
import random

import pytest

from tests.unit.core.test_slos import _monitor, rec
from tui.cli import PERCENTILE_COMMANDS, build_parser, main
from tui.core import stats
from tui.core.slos import Slos
from tui.widgets.latency import all_markup, metric_markup

SEED = "sample_logs/seed.jsonl"
ASKED = "50,90,95,99,99.9"


def test_the_n_needed_rule_for_p90_and_p99_9():
    assert stats.n_needed(0.9) == 29 and stats.n_needed(0.999) == 2995
    assert stats.n_needed(0.95) == 59 and stats.n_needed(0.99) == 299 and stats.n_needed(0.5) == 5


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_supported_exactly_from_n_needed_on_seeded_samples(q):
    rng = random.Random(int(q * 1000))
    need = stats.n_needed(q)
    assert (1 - q ** need) >= 0.95 > (1 - q ** (need - 1))
    for n, ok in ((need - 1, False), (need, True)):
        xs = sorted(rng.lognormvariate(5, 1) for _ in range(n))
        (p,) = stats.percentiles(xs, (q,))
        assert p.supported is ok and p.n_needed == need and p.value_ms == xs[max(1, math.ceil(q * n - 1e-12)) - 1]
        block = stats.latency_json([p])
        key = stats.qkey(q)
        assert (block.get(key) is not None) is ok and (key in block.get("insufficient_n", {})) is (not ok)


def test_every_reading_and_load_command_takes_it():
    for name in PERCENTILE_COMMANDS - {"measure"}:
        sub = build_parser(only=[name])._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr]
        assert any("--percentiles" in a.option_strings for a in sub._actions), name


def test_report_text_json_and_html_carry_the_asked_percentiles(tmp_path, capsys):
    assert main(["report", SEED, "--percentiles", ASKED]) in (0, 1, 3)
    short = capsys.readouterr().out
    assert "TTFT P50      P90      P95      P99    P99.9" in short
    assert main(["report", SEED, "--percentiles", ASKED, "--details"]) in (0, 1, 3)
    text = capsys.readouterr().out
    assert "P99.9=" in text and "P99.9 2,995" in text and "P90 29" in text  # the mark's legend, with the n needed
    assert main(["report", SEED, "--percentiles", ASKED, "--json"]) in (0, 1, 3)
    d = json.loads(capsys.readouterr().out)
    flat = d["measured"]["window"]["tpot_ms"]
    assert set(flat) >= {"p50", "p90", "p95", "p99", "p99.9", "n"}
    ttft = d["measured"]["window"]["ttft_ms"]
    assert ttft["P99.9"]["n_needed"] == 2995 and ttft["P90"]["n_needed"] == 29 and "p99.9" in ttft
    page = tmp_path / "r.html"
    assert main(["report", SEED, "--percentiles", ASKED, "--html", str(page)]) in (0, 1, 3)
    capsys.readouterr()
    html = page.read_text()
    assert "TTFT P90 ms" in html and "TTFT P99.9 ms" in html


def test_the_default_is_unchanged_and_the_choice_does_not_leak(capsys):
    assert main(["report", SEED, "--details"]) in (0, 1, 3)
    plain = capsys.readouterr().out
    assert main(["report", SEED, "--details", "--percentiles", "50,95,99"]) in (0, 1, 3)
    assert capsys.readouterr().out == plain
    assert main(["report", SEED, "--percentiles", ASKED]) in (0, 1, 3)
    capsys.readouterr()
    assert stats.selected() == stats.QUANTILES  # restored after the command
    assert "P90" not in plain and "P99.9" not in plain


@pytest.mark.parametrize("bad", ["", "abc", "0", "100", "50,,95", "-5", "nan", "inf"])
def test_a_bad_list_is_one_line_exit_2(bad, capsys):
    assert main(["report", SEED, "--percentiles", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--percentiles" in err[0] and "Traceback" not in err[0]


def test_the_console_latency_pane_shows_the_asked_percentiles():
    prev = stats.set_selected(stats.parse_percentiles(ASKED))
    try:
        snap = _monitor(Slos(ttft_ms=500.0), [rec(i) for i in range(40)]).snapshot()
        pane = all_markup(snap, 100)
        big = metric_markup(snap, "e2e", 100)
    finally:
        stats.set_selected(prev)
    assert "P90" in pane and "P99.9" in pane and "P99.9" in big
    assert "P99.9 2995" in pane  # the one mark's needs line: 40 requests do not support P99.9
    assert "P90 29" not in pane  # ... and do support P90
