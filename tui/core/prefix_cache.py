"""The server's prefix-cache use, measured (issue 23): per request what the server says, per step its counters.

Two kinds of evidence, never mixed and never guessed:

- **per request** ``cached_tokens`` (prompt tokens the server says it served from its prefix cache; null when it
  did not say) and ``cached_tokens_source`` (``usage.prompt_tokens_details`` or ``llama.cpp timings.cache_n``),
  written by the load generator (``tui.sources.load.stream``). A level's *token hit rate* is
  ``sum(cached_tokens) / sum(input tokens)`` over its requests where both are known (input: the server's
  ``usage_input_tokens``, else ``input_tokens``). A request claiming more cached tokens than its prompt has is
  left out of the rate and counted (``inconsistent``);
- **per step** the step end record's ``prefix_cache`` block: the deltas over the step of vLLM's
  ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` counters (tokens), scraped at the step's
  start and end (``tui.sources.metrics.StepHistograms``). A counter that went down (a restart) or a family missing
  at one end gives a block with ``problem`` and no numbers; neither family at either end: no block.

When nothing is known the figures say "unknown (the server does not say)". Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tui.core.textfmt import fmt_level, fmt_pct

#: the counter families: (queries, hits, the block's ``source``), the current names first
COUNTER_NAMES = (
    ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits_total/queries_total"),
    ("vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total",
     "vllm:gpu_prefix_cache_hits_total/queries_total"),
)
MODEL_LABELS = ("model_name", "model")
UNKNOWN = "unknown (the server does not say)"


# ------------------------------------------------------------------ per request


class PrefixTally:
    """One level's requests: how many said their cached tokens, and the sums over those whose input is known too."""

    __slots__ = ("both", "cached", "inconsistent", "inputs", "known", "n", "sources")

    def __init__(self) -> None:
        self.n = 0  # requests seen
        self.known = 0  # of which cached_tokens known
        self.both = 0  # of which the input tokens are known too (and cached <= input): the rate's requests
        self.cached = 0
        self.inputs = 0
        self.inconsistent = 0  # cached_tokens above the prompt's tokens: left out of the rate
        self.sources: dict[str, int] = {}

    def add(self, cached: int | None, input_tokens: int | None, source: str | None = None) -> None:
        self.n += 1
        if cached is None:
            return
        self.known += 1
        if source:
            self.sources[source] = self.sources.get(source, 0) + 1
        if input_tokens is None:
            return
        if cached > input_tokens:
            self.inconsistent += 1
            return
        self.both += 1
        self.cached += cached
        self.inputs += input_tokens

    def add_record(self, r: Any) -> None:
        """A ``RequestRecord`` (or anything with its attributes)."""
        inp = r.usage_input_tokens
        self.add(r.cached_tokens, r.input_tokens if inp is None else inp, r.cached_tokens_source)

    def merge(self, other: PrefixTally) -> None:
        self.n += other.n
        self.known += other.known
        self.both += other.both
        self.cached += other.cached
        self.inputs += other.inputs
        self.inconsistent += other.inconsistent
        for k, v in other.sources.items():
            self.sources[k] = self.sources.get(k, 0) + v


# ------------------------------------------------------------------ per step: the server's counters


def counters(samples: Iterable[tuple[str, Mapping[str, Any], float]], model: str | None = None) -> dict | None:
    """``{"source", "queries", "hits"}`` (sums over the series; with ``model`` given and series labelled with it,
    only those), ``{"source", "problem"}`` when one family of a pair is there without the other, or None when the
    page has neither. ``samples``: (name, labels, value) triples (``tui.sources.metrics.parse_labeled``)."""
    rows = list(samples)
    for q_name, h_name, source in COUNTER_NAMES:
        mine = [(n, lab, v) for n, lab, v in rows if n == q_name or n == h_name]
        if not mine:
            continue
        if model:
            named = [r for r in mine if any(r[1].get(k) == model for k in MODEL_LABELS)]
            if named:
                mine = named
        q = [v for n, _l, v in mine if n == q_name]
        h = [v for n, _l, v in mine if n == h_name]
        if not q or not h:
            return {"source": source, "problem": f"{q_name if not q else h_name} missing from the page"}
        if not all(v == v and abs(v) != float("inf") for v in q + h):
            return {"source": source, "problem": "a counter is not a finite number"}
        return {"source": source, "queries": sum(q), "hits": sum(h)}
    return None


def _whole(v: float) -> int | float:
    return int(v) if v == int(v) else v


def step_block(start: Mapping[str, Any] | None, end: Mapping[str, Any] | None) -> dict | None:
    """The step end record's ``prefix_cache`` from the counters at the step's start and end (:func:`counters`
    outputs; None: not scraped or no family). ``{"source", "queries", "hits", "hit_rate"}`` (deltas; ``hit_rate``
    None when no query), or ``{"source", "queries": None, "hits": None, "hit_rate": None, "problem"}``; None when
    neither end had the counters."""
    if start is None and end is None:
        return None
    source = (start or end or {}).get("source")

    def problem(why: str) -> dict:
        return {"source": source, "queries": None, "hits": None, "hit_rate": None, "problem": why}

    for key, c in (("start", start), ("end", end)):
        if c is None:
            return problem(f"no prefix-cache counters at the step's {key}")
        if "problem" in c:
            return problem(f"at the step's {key}: {c['problem']}")
    assert start is not None and end is not None
    if start.get("source") != end.get("source"):
        return problem("the counters changed names during the step")
    dq = end["queries"] - start["queries"]
    dh = end["hits"] - start["hits"]
    if dq < 0 or dh < 0:
        return problem("a counter went down during the step (the server restarted?): no delta")
    if dh > dq:
        return problem("more hits than queries over the step: the counters contradict each other")
    return {"source": source, "queries": _whole(dq), "hits": _whole(dh), "hit_rate": dh / dq if dq > 0 else None}


def _step_numbers(block: Any) -> tuple[float, float] | None:
    """(queries, hits) of a step block read from a file, or None when it has none usable."""
    if not isinstance(block, Mapping):
        return None
    nums = []
    for key in ("queries", "hits"):
        v = block.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v < float("inf"):  # NaN fails too
            return None
        nums.append(float(v))
    return (nums[0], nums[1]) if nums[1] <= nums[0] else None


# ------------------------------------------------------------------ one level's summary


def level_summary(tally: PrefixTally | None, steps: Iterable[Any] = ()) -> dict[str, Any]:
    """What one level (or a set of rounds) says: the requests' figures and the server counters' (``steps``: the
    steps' ``prefix_cache`` blocks, None entries ignored), with a one-line ``text``."""
    t = tally or PrefixTally()
    blocks = [b for b in steps if b is not None]
    q = h = 0.0
    used = 0
    problems: list[str] = []
    source = None
    for b in blocks:
        nums = _step_numbers(b)
        if isinstance(b, Mapping):
            source = source or b.get("source")
        if nums is None:
            why = b.get("problem") if isinstance(b, Mapping) else None
            problems.append(str(why or "a step's prefix_cache block is not readable"))
            continue
        q += nums[0]
        h += nums[1]
        used += 1
    out: dict[str, Any] = {
        "requests": t.n, "cached_known": t.known, "rate_requests": t.both,
        "cached_tokens": t.cached, "input_tokens": t.inputs,
        "token_hit_rate": t.cached / t.inputs if t.both and t.inputs > 0 else None,
        "inconsistent": t.inconsistent, "sources": dict(sorted(t.sources.items())),
        "server": None if not blocks else {
            "source": source, "steps": used, "queries": _whole(q) if used else None,
            "hits": _whole(h) if used else None, "hit_rate": h / q if used and q > 0 else None,
            "problems": problems},
    }
    out["text"] = summary_text(out)
    return out


def is_known(s: Mapping[str, Any] | None) -> bool:
    """Whether a summary knows anything (a request's cached tokens or a server counter)."""
    if not s:
        return False
    srv = s.get("server") or {}
    return bool(s.get("cached_known")) or srv.get("queries") is not None or bool(srv.get("problems"))


def summary_text(s: Mapping[str, Any]) -> str:
    """"cached tokens said by 40/40 requests (llama.cpp timings.cache_n): token hit rate 71.2% (5,432 of 7,630
    prompt tokens); server counters: 70.9% (1,024 of 1,444 tokens, vllm:...)" or the unknown line."""
    if not is_known(s):
        return UNKNOWN
    parts = []
    n, k = s.get("requests") or 0, s.get("cached_known") or 0
    if k:
        src = ", ".join(s.get("sources") or {}) or "source not named"
        rate = s.get("token_hit_rate")
        part = f"cached tokens said by {k}/{n} requests ({src}): token hit rate "
        part += (f"{fmt_pct(rate, 1)} ({s['cached_tokens']:,} of {s['input_tokens']:,} prompt tokens"
                 f"{'' if s.get('rate_requests') == k else ', over ' + str(s.get('rate_requests')) + ' with input known'})"
                 if rate is not None else "unknown (no prompt token count beside them)")
        if s.get("inconsistent"):
            part += f"; {s['inconsistent']} claim more cached than prompt tokens (left out)"
        parts.append(part)
    else:
        parts.append(f"requests: {UNKNOWN} (0/{n} say cached tokens)")
    srv = s.get("server")
    if srv:
        if srv.get("queries") is not None:
            rate = srv.get("hit_rate")
            parts.append(f"server counters: {fmt_pct(rate, 1) if rate is not None else 'no queries'} "
                         f"({_num(srv['hits'])} of {_num(srv['queries'])} tokens, {srv.get('source')})")
        for p in srv.get("problems") or ():
            parts.append(f"server counters: {p}")
    return "; ".join(parts)


def _num(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:,.1f}" if isinstance(v, float) else "?"


def short_text(s: Mapping[str, Any] | None) -> str:
    """A few words for the console: "71% of prompt tokens (40/40 req said); server 70%" or the unknown line."""
    if not is_known(s):
        return UNKNOWN
    assert s is not None
    bits = []
    if s.get("cached_known"):
        rate = s.get("token_hit_rate")
        bits.append(f"{fmt_pct(rate, 0) if rate is not None else '?'} of prompt tokens "
                    f"({s['cached_known']}/{s['requests']} req said)")
    srv = s.get("server") or {}
    if srv.get("queries") is not None:
        rate = srv.get("hit_rate")
        bits.append(f"server {fmt_pct(rate, 0) if rate is not None else 'no queries'}")
    elif srv.get("problems"):
        bits.append("server counters unusable")
    return "; ".join(bits)


# ------------------------------------------------------------------ report and compare


def attach(rep: dict, rows: Any) -> None:
    """Adds ``prefix_cache`` (a :func:`level_summary`) to each level of a report dict (``rep["levels"]``, built
    from the snapshot's ``rows`` in order) and to ``rep["measured"]`` for the judged row."""
    measured = rep.get("measured") or {}
    for lv, row in zip(rep.get("levels") or [], rows):
        pc = getattr(row, "prefix_cache", None)
        lv["prefix_cache"] = pc
        if measured.get("level") == lv.get("level") and measured.get("round") == lv.get("round"):
            measured["prefix_cache"] = pc


def report_lines(rep: Mapping[str, Any]) -> list[str]:
    """The report's "Prefix cache" section: one line per level and round; the unknown line when no level knows."""
    levels = [lv for lv in rep.get("levels") or [] if isinstance(lv.get("prefix_cache"), Mapping)]
    if not levels:
        return []
    out = ["", "Prefix cache (what the server says it served from its cache; measured, never assumed)"]
    if not any(is_known(lv["prefix_cache"]) for lv in levels):
        return out + [f"  {UNKNOWN}: no request said cached tokens and no step has prefix-cache counters"]
    for lv in levels:
        out.append(f"  level {fmt_level(lv.get('level'))} round {lv.get('round')}: {lv['prefix_cache']['text']}")
    return out


def by_level(tallies: Mapping[tuple, PrefixTally], steps: Mapping[tuple, Any]) -> dict[Any, dict]:
    """Rounds merged: ``{level: level_summary}`` from per-(level, round) tallies and step blocks."""
    merged: dict[Any, PrefixTally] = {}
    blocks: dict[Any, list] = {}
    for (level, _rnd), t in tallies.items():
        merged.setdefault(level, PrefixTally()).merge(t)
        blocks.setdefault(level, []).append(steps.get((level, _rnd)))
    return {lv: level_summary(t, blocks.get(lv, ())) for lv, t in merged.items()}


def compare_block(base: Mapping[str, Any] | None, cand: Mapping[str, Any] | None) -> dict[str, Any]:
    """One matched level's prefix cache, side by side (descriptive: the verdict is on the good fraction)."""
    def rate(s: Mapping[str, Any] | None, key: str) -> float | None:
        if not s:
            return None
        v = s.get("token_hit_rate") if key == "tokens" else (s.get("server") or {}).get("hit_rate")
        return v if isinstance(v, (int, float)) else None

    return {"base": base, "cand": cand,
            "token_hit_rate_change": None if rate(base, "tokens") is None or rate(cand, "tokens") is None
            else rate(cand, "tokens") - rate(base, "tokens"),  # type: ignore[operator]
            "server_hit_rate_change": None if rate(base, "server") is None or rate(cand, "server") is None
            else rate(cand, "server") - rate(base, "server")}  # type: ignore[operator]


def compare_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """compare's "Prefix cache" table (levels whose runs carry it); none when neither run says anything."""
    have = [r for r in rows if isinstance(r.get("prefix_cache"), Mapping)]
    if not have or not any(is_known(r["prefix_cache"].get(k)) for r in have for k in ("base", "cand")):
        if have:
            return ["Prefix cache: " + UNKNOWN + " (neither run's records say cached tokens)", ""]
        return []
    out = ["Prefix cache (descriptive; the verdict is on the good fraction)", "",
           "| level | run | cached tokens said | token hit rate | server counters hit rate |", "|---|---|---|---|---|"]
    for r in have:
        for name, key in (("base", "base"), ("cand", "cand")):
            s = r["prefix_cache"].get(key) or {}
            lvl = r.get("level_base") if key == "base" else r.get("level_cand")
            srv = s.get("server") or {}
            out.append(f"| {fmt_level(lvl)} | {name} | {s.get('cached_known', 0)}/{s.get('requests', 0)} | "
                       f"{fmt_pct(s['token_hit_rate'], 1) if s.get('token_hit_rate') is not None else UNKNOWN} | "
                       f"{fmt_pct(srv['hit_rate'], 1) if srv.get('hit_rate') is not None else UNKNOWN} |")
    return out + [""]
