"""Token-length distributions (tui.core.lengths): the forms, the round trip, the bounds, the seeded draws."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tui.core.defaults as defaults
from tui.core.lengths import (
    LengthDist,
    draw_at,
    draw_from,
    format_lengths,
    from_header,
    header_block,
    parse_lengths,
)

bounds = st.tuples(st.integers(1, 5000), st.integers(0, 5000)).map(lambda t: (t[0], t[0] + t[1]))


@st.composite
def dists(draw) -> LengthDist:
    kind = draw(st.sampled_from(["fixed", "legacy", "uniform", "normal", "lognormal"]))
    lo, hi = draw(bounds)
    if kind == "fixed":
        return parse_lengths(str(lo))
    if kind == "legacy":
        return parse_lengths(f"{lo}-{hi}")
    if kind == "uniform":
        return parse_lengths(f"uniform:{lo}-{hi}")
    a = draw(st.floats(0.5, 1e5, allow_nan=False))
    b = draw(st.floats(0.0, 1e4 if kind == "normal" else 3.0, allow_nan=False))
    clip = draw(st.booleans())
    return parse_lengths(f"{kind}:{a!r},{b!r}" + (f"[{lo}-{hi}]" if clip else ""))


def test_each_form_parses_to_its_kind_parameters_and_bounds():
    assert parse_lengths("128") == LengthDist("fixed", 128, 128, 128, 128, given="128")
    assert parse_lengths("5-5").kind == "fixed"
    old = parse_lengths("100-200")
    assert (old.kind, old.bounds, old.sequential) == ("uniform", (100, 200), True)
    new = parse_lengths("uniform:100-200")
    assert (new.kind, new.bounds, new.sequential) == ("uniform", (100, 200), False)
    n = parse_lengths("normal:400,100")
    assert (n.kind, n.a, n.b, n.bounds) == ("normal", 400, 100, (defaults.LENGTH_CLIP_MIN, defaults.LENGTH_CLIP_MAX))
    ln = parse_lengths("lognormal:400,0.6[50-800]")
    assert (ln.kind, ln.a, ln.b, ln.bounds, ln.given) == ("lognormal", 400, 0.6, (50, 800), "lognormal:400,0.6[50-800]")


@pytest.mark.parametrize("bad", ["", "0", "-3", "abc", "3-1", "0-4", "1.5", "uniform:4", "uniform:5-2",
                                 "normal:400", "normal:400,100,3", "normal:-1,5", "normal:400,-1",
                                 "lognormal:0,0.5", "lognormal:400,nan", "lognormal:400,0.5[9-3]",
                                 "lognormal:400,0.5[1-x]", "poisson:4", "normal:400,100[50-800", "normal:inf,1"])
def test_a_bad_form_is_refused_with_one_line(bad):
    with pytest.raises(ValueError) as e:
        parse_lengths(bad)
    msg = str(e.value)
    assert msg and "\n" not in msg


@settings(max_examples=300, deadline=None)
@given(dists())
def test_format_then_parse_is_the_same_distribution(d):
    back = parse_lengths(format_lengths(d))
    assert (back.kind, back.a, back.b, back.lo, back.hi, back.legacy) == (d.kind, d.a, d.b, d.lo, d.hi, d.legacy)


@pytest.mark.slow  # more than a few seconds on 2 cores (issue 38: the quickest loop stays under 2 minutes)
@settings(max_examples=300, deadline=None)
@given(dists(), st.integers(), st.lists(st.integers(0, 10**6), min_size=1, max_size=30))
def test_every_draw_lies_in_the_bounds_and_depends_only_on_seed_and_key(d, seed, keys):
    first = [draw_at(d, seed, f"k{k}") for k in keys]
    assert all(isinstance(x, int) and d.lo <= x <= d.hi for x in first)
    assert [draw_at(d, seed, f"k{k}") for k in reversed(keys)] == first[::-1]  # no hidden state, any order


@settings(max_examples=200, deadline=None)
@given(dists(), st.floats(5e-324, 1.0), st.floats(0.0, 1.0, exclude_max=True))
def test_the_extreme_uniforms_stay_in_the_bounds(d, u1, u2):
    assert d.lo <= draw_from(d, u1, u2) <= d.hi


def test_another_seed_asks_other_lengths():
    d = parse_lengths("lognormal:400,0.6")
    a = [draw_at(d, 1, f"k{i}") for i in range(50)]
    b = [draw_at(d, 2, f"k{i}") for i in range(50)]
    assert a != b and len(set(a)) > 40


def test_the_seeded_samples_follow_their_distributions():
    """n draws of each kind (seeded: the same numbers every run): the sample median of a lognormal and the mean of a
    normal within 4 standard errors, a uniform covering its range with each value about 1/k of the time."""
    n = 4000
    ln = parse_lengths("lognormal:400,0.6")
    xs = [draw_at(ln, 7, f"i{i}") for i in range(n)]
    se_log_median = 0.6 * math.sqrt(math.pi / 2) / math.sqrt(n)  # the sample median's standard error, log scale
    assert abs(math.log(statistics.median(xs)) - math.log(400)) < 4 * se_log_median
    sd_log = statistics.stdev(math.log(x) for x in xs)
    assert abs(sd_log - 0.6) < 4 * 0.6 / math.sqrt(2 * n)
    nm = parse_lengths("normal:400,100")
    ys = [draw_at(nm, 7, f"i{i}") for i in range(n)]
    assert abs(statistics.fmean(ys) - 400) < 4 * 100 / math.sqrt(n)
    un = parse_lengths("uniform:1-4")
    counts = [0] * 5
    for i in range(n):
        counts[draw_at(un, 7, f"i{i}")] += 1
    assert counts[0] == 0 and all(abs(c - n / 4) < 4 * math.sqrt(n * 0.25 * 0.75) for c in counts[1:])


def test_clipping_clamps_to_the_stated_bounds():
    d = parse_lengths("normal:400,1000[50-800]")
    xs = [draw_at(d, 3, f"i{i}") for i in range(2000)]
    assert min(xs) == 50 and max(xs) == 800  # a wide normal reaches both bounds and never passes them
    wide = parse_lengths("lognormal:1000,5")
    ys = [draw_at(wide, 3, f"i{i}") for i in range(2000)]
    assert max(ys) == defaults.LENGTH_CLIP_MAX and min(ys) == defaults.LENGTH_CLIP_MIN


def test_the_header_block_keeps_the_old_min_max_and_adds_the_given_text_and_the_distribution():
    blk = header_block(parse_lengths("lognormal:400,0.6[50-800]"))
    assert (blk["min"], blk["max"], blk["given"]) == (50, 800, "lognormal:400,0.6[50-800]")
    assert blk["distribution"] == {"kind": "lognormal", "median": 400, "sigma": 0.6, "min": 50, "max": 800,
                                   "clip": "rounded, then clamped to [min, max]",
                                   "draw": "per request from (seed, step, index): the same with any split over workers"}
    assert header_block(parse_lengths("128")) == {"min": 128, "max": 128, "given": "128",
                                                  "distribution": {"kind": "fixed", "min": 128, "max": 128}}


@settings(max_examples=200, deadline=None)
@given(dists())
def test_a_header_block_reads_back_as_its_distribution(d):
    back = from_header(header_block(d))
    assert back is not None and format_lengths(back) == format_lengths(d)


def test_old_headers_still_read():
    assert format_lengths(from_header({"min": 100, "max": 200})) == "100-200"  # type: ignore[arg-type]
    assert format_lengths(from_header({"min": 128, "max": 128})) == "128"  # type: ignore[arg-type]
    assert format_lengths(from_header([1, 4])) == "1-4"  # type: ignore[arg-type]
    assert format_lengths(from_header(64)) == "64"  # type: ignore[arg-type]
    for junk in (None, "x", {"min": 0, "max": 3}, {"min": 5, "max": 2}, [True, 3], {"min": 1.5, "max": 3}):
        assert from_header(junk) is None
