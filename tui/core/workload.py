"""The workload a run sent, in one line, and what differs between two runs' workloads (issue 23).

Read from the run header's ``load`` block only: what each request (or session) looked like, not how many were sent
or how fast (the mode and the levels are matched by ``compare`` level by level, and are no part of it):

- the shape: single requests, or chat sessions (``load.sessions``: turns per session, think time; each turn sends
  the conversation so far), and a trace replay (``load.trace``: the trace file's name and SHA-256);
- the input and output lengths as the header gives them (``tui.core.lengths.from_header``: the user's text, else
  the canonical form), or the dataset's prompts / answers, or the trace's lengths; ``ignore_eos`` when on; how the
  prompt lengths were made when that is not the server's /tokenize (``lengths_method``: exact by ``--tokenizer``,
  with its SHA-256, or ESTIMATED at ~4 chars/token); an ``--api embeddings`` run (its header's ``target.api``) is
  "embeddings requests" with no output length;
- shared prefixes (``load.shared_prefix``: G system prompts of P tokens);
- the dataset (``load.dataset``: its name, format and the first 8 hex digits of its SHA-256; the example dataset
  servewatch ships is said to be one);
- the prompt cache policy (``load.cache_policy``: what the requests carried).

An old header (none of the keys of issue 23) reads as what it was: single requests, the lengths it names, the
prompt cache off (servewatch always sent ``cache_prompt: false`` before). A header that names no lengths at all
(another tool's export) says the workload is not stated; such parts are never guessed, and ``differences`` leaves
them out (``unchecked`` names them). ``compare_block`` then compares the lengths the two runs' requests received
(``received``: medians and quartiles of ``input_tokens`` / ``output_tokens``); a run that states no workload and
whose requests carry no lengths has an unknown workload (not comparable unless allowed). A header labelled synthetic
prefixes the line with SYNTHETIC.
Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from tui.core.lengths import LengthDist, format_lengths, from_header

__all__ = ["UNKNOWN", "compare_block", "describe", "describe_header", "differences", "lengths_method", "parts", "received",
           "received_differences", "received_text", "unchecked"]

#: the key of a part the header does not state (never equal to anything, never compared)
UNKNOWN = "unknown"

#: the parts in the order the line lists them, with the name a difference is said under
PART_NAMES = {"shape": "request shape", "trace": "trace replay", "dataset": "dataset", "input": "input",
              "output": "output", "ignore_eos": "ignore_eos", "prefix": "shared prefix", "cache": "prompt cache"}

Part = tuple[str, str | None, Any]  # (name, text in the line or None: left out of the line, comparable key)


def _map(v: Any) -> Mapping[str, Any] | None:
    return v if isinstance(v, Mapping) else None


def _unwrap(m: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """(load block, header or None): a run header is accepted for its load block."""
    if m is None:
        return {}, None
    if m.get("type") == "run" or ("schema" in m and _map(m.get("load")) is not None):
        return _map(m.get("load")) or {}, m
    return m, None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num_text(v: float) -> str:
    return f"{v:g}"


def _dist_key(d: LengthDist) -> tuple:
    return (d.kind, d.lo, d.hi, d.a, d.b)  # the A-B form and uniform:A-B are one distribution


def _dist_text(d: LengthDist) -> str:
    return d.given or format_lengths(d)


def _think(v: Any) -> tuple[str, Any]:
    """(text, key) of ``load.sessions.think_time``: None / 0 no think time; a number of seconds; a block with the
    form as given (``given``), else ``seconds``."""
    if v is None:
        return "no think time", 0.0
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ("no think time", 0.0) if v == 0 else (f"think {_num_text(float(v))} s", float(v))
    m = _map(v)
    if m is not None:
        given = m.get("given")
        if isinstance(given, str) and given.strip():
            g = given.strip()
            try:
                secs = float(g)
            except ValueError:
                return f"think {g} s", g
            return ("no think time", 0.0) if secs == 0 else (f"think {_num_text(secs)} s", secs)
        secs = m.get("seconds", m.get("value"))
        if isinstance(secs, (int, float)) and not isinstance(secs, bool):
            return _think(secs)
    return "think time unknown", UNKNOWN


def _sessions(s: Mapping[str, Any]) -> tuple[str, Any]:
    d = from_header(s.get("turns"))
    turns_text = "unknown number of" if d is None else _dist_text(d)
    think_text, think_key = _think(s.get("think_time"))
    turns_key = UNKNOWN if d is None else _dist_key(d)
    return f"chat sessions, {turns_text} turns, {think_text}", ("sessions", turns_key, think_key)


def _short_sha(v: Any) -> str:
    return str(v)[:8] if isinstance(v, str) and v else "unknown"


def _cache(load: Mapping[str, Any]) -> tuple[str, Any]:
    cp = _map(load.get("cache_policy"))
    if cp is None:
        if any(load.get(k) is not None for k in ("sessions", "shared_prefix", "dataset")):
            return "prompt cache unknown", UNKNOWN  # a header of issue 23 that does not say
        return "prompt cache off", False  # before issue 23 every servewatch request carried cache_prompt: false
    v = cp.get("cache_prompt")
    if v is True:
        return "prompt cache on", True
    if v is False:
        return "prompt cache off", False
    if v is None and "cache_prompt" in cp:
        return "prompt cache: the server's default (cache_prompt not sent)", None
    return "prompt cache unknown", UNKNOWN


def _lengths_part(name: str, v: Any, how: str = "") -> Part:
    d = from_header(v)
    if d is None:
        return (name, f"{name} unknown", UNKNOWN)
    return (name, f"{name} {_dist_text(d)}{how}", _dist_key(d))


def lengths_method(load: Mapping[str, Any] | None) -> str:
    """How the prompt lengths asked were made, as the input part of the line says it (the header's
    ``load.prompt_builder``): " (exact: tokenizer sha256 1a2b3c4d)" with ``--tokenizer``, " (ESTIMATED: ~4
    chars/token)" when neither a tokenizer nor the server's /tokenize counted them, "" when the server's /tokenize
    sized them (or the header does not say: older files, other tools)."""
    pb = _map((load or {}).get("prompt_builder"))
    if pb is None:
        return ""
    method = pb.get("method")
    if method == "tokenizer":
        tok = _map(pb.get("tokenizer")) or {}
        return f" (exact: tokenizer sha256 {_short_sha(tok.get('sha256'))})"
    if method == "estimate":
        return " (ESTIMATED: ~4 chars/token)"
    return ""


def _api(header: Mapping[str, Any] | None) -> str | None:
    tgt = _map((header or {}).get("target"))
    api = tgt.get("api") if tgt is not None else None
    return api if isinstance(api, str) else None


#: the request shape of an ``--api embeddings`` run, as the line says it
EMBEDDINGS_SHAPE = "embeddings requests (no tokens streamed: TTFT, TPOT and ITL not judgeable; E2E judged)"


def _stated(load: Mapping[str, Any]) -> bool:
    """Whether the block states a workload at all (servewatch's own headers name the lengths)."""
    return any(k in load for k in ("input_tokens", "output_tokens", "sessions", "dataset", "trace",
                                   "shared_prefix", "cache_policy"))


def parts(load: Mapping[str, Any] | None, *, header: Mapping[str, Any] | None = None) -> list[Part]:
    """The workload's parts, in the line's order: (name, text or None, key). ``load``: a run header's ``load`` block
    (or the header itself). Empty when the block states no workload."""
    load, hdr = _unwrap(load)
    header = header if header is not None else hdr
    if not _stated(load):
        return []
    out: list[Part] = []
    sess = _map(load.get("sessions"))
    embeddings = _api(header) == "embeddings"
    if sess is not None:
        text, key = _sessions(sess)
        out.append(("shape", text, key))
    elif embeddings:
        out.append(("shape", EMBEDDINGS_SHAPE, "embeddings"))
    else:
        out.append(("shape", "single requests", "single"))
    trace = _map(load.get("trace")) if load.get("arrival") == "trace" or _map(load.get("trace")) else None
    if trace is not None:
        win = trace.get("window")
        out.append(("trace", f"trace replay of {trace.get('file') or 'an unnamed file'} "
                             f"(sha256 {_short_sha(trace.get('sha256'))})",
                    (trace.get("sha256") or UNKNOWN, tuple(win) if isinstance(win, list) else win)))
    else:
        out.append(("trace", None, None))
    ds = _map(load.get("dataset"))
    if ds is not None:
        extra = ", SYNTHETIC: the example servewatch ships" if ds.get("example") is True else ""
        counts = ds.get("token_counts")
        if isinstance(counts, str) and counts.startswith("estimate"):
            extra += ", token counts estimated"  # no /tokenize: the lengths and the context skip are estimates
        fmt = f"{ds['format']}, " if isinstance(ds.get("format"), str) else ""
        out.append(("dataset", f"dataset {ds.get('name') or 'unnamed'} ({fmt}sha256 {_short_sha(ds.get('sha256'))}"
                               f"{extra})", (ds.get("sha256") or UNKNOWN, ds.get("format"))))
    else:
        out.append(("dataset", None, None))
    if ds is not None:
        out.append(("input", "input the dataset's prompts", "dataset"))
    elif trace is not None:
        d = from_header(load.get("input_tokens"))
        out.append(("input", "input as traced" + ("" if d is None else f" ({d.lo}-{d.hi})"), "trace"))
    else:
        out.append(_lengths_part("input", load.get("input_tokens"), lengths_method(load)))
    if embeddings:
        out.append(("output", None, "none"))  # an embeddings answer generates no tokens
    elif ds is not None and ds.get("output_tokens") == "dataset answers":
        out.append(("output", "output the dataset's answer lengths", "dataset"))
    elif trace is not None and ds is None:
        d = from_header(load.get("output_tokens"))
        out.append(("output", "output as traced" + ("" if d is None else f" ({d.lo}-{d.hi})"), "trace"))
    else:
        out.append(_lengths_part("output", load.get("output_tokens")))
    eos = load.get("ignore_eos")
    if isinstance(eos, bool):
        out.append(("ignore_eos", "ignore_eos" if eos else None, eos))
    else:
        out.append(("ignore_eos", "ignore_eos unknown", UNKNOWN))
    sp = _map(load.get("shared_prefix"))
    if sp is not None:
        p, g = _int(sp.get("tokens")), _int(sp.get("groups"))
        if p is None:
            out.append(("prefix", "shared prefix of unknown length", UNKNOWN))
        else:
            g = 1 if g is None else g
            noun = "system prompt" if g == 1 else "system prompts"
            out.append(("prefix", f"{g} shared {p:,}-token {noun}", (p, g)))
    else:
        out.append(("prefix", None, None))
    text, key = _cache(load)
    out.append(("cache", text, key))
    return out


def describe(load: Mapping[str, Any] | None, *, header: Mapping[str, Any] | None = None) -> str:
    """One line: "chat sessions, 2-6 turns, think 5 s; input lognormal:400,0.6; output 128; 4 shared 1,024-token
    system prompts; prompt cache on"; "single requests; input 256; output 64; prompt cache off". ``load``: the
    header's ``load`` block (or the whole header, whose ``synthetic`` and ``source`` are then read too)."""
    load, hdr = _unwrap(load)
    header = header if header is not None else hdr
    ps = parts(load, header=header)
    if ps:
        line = "; ".join(t for _, t, _ in ps if t)
    else:
        src = _map((header or {}).get("source")) or {}
        if src.get("kind") == "import":
            line = (f"workload not stated by {src.get('tool') or 'the source'} (an imported file): request shape, "
                    "lengths and prompt cache unknown")
        else:
            line = "workload unknown: the header's load block names no lengths"
    if header is not None and header.get("synthetic") is True:
        line = "SYNTHETIC: " + line
    return line


def describe_header(header: Mapping[str, Any] | None) -> str:
    """``describe`` of a run header (its load block, its synthetic label, where it came from)."""
    h = header or {}
    return describe(_map(h.get("load")) or {}, header=h)


def dataset_line(header: Mapping[str, Any] | None) -> str | None:
    """The report's line on a run's ``--dataset`` (its ``load.dataset`` block): rows used, bad and skipped, the
    context they were held against (or that it was unknown, so nothing was skipped), how tokens were counted; None
    without a dataset."""
    load = _map((header or {}).get("load")) or {}
    ds = _map(load.get("dataset"))
    if ds is None:
        return None

    def n(key: str) -> str:
        v = ds.get(key)
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else "?"

    ctx = ds.get("context_tokens")
    if isinstance(ctx, int) and not isinstance(ctx, bool):
        where = f"the {ctx:,}-token context ({ds.get('context_source') or 'source not stated'})"
        skipped = f"{n('skipped_too_long')} skipped as too long for {where}"
    else:
        skipped = "context UNKNOWN: nothing skipped, a prompt too long fails at the server"
    counts = ds.get("token_counts") or "token counts not stated"
    return (f"dataset: {n('usable')} usable of {n('rows')} rows ({n('bad_rows')} bad; {skipped}); token counts: "
            f"{counts}; output lengths: {ds.get('output_tokens') or 'not stated'}")


def differences(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """The parts two workloads both state and that differ, in words ("input: 256 vs lognormal:400,0.6"; "prompt
    cache: off vs on"); [] when they agree on every part both state. ``a``/``b``: load blocks or run headers."""
    pa, pb = {n: (t, k) for n, t, k in parts(a)}, {n: (t, k) for n, t, k in parts(b)}
    out = []
    for name, label in PART_NAMES.items():
        if name not in pa or name not in pb:
            continue
        (ta, ka), (tb, kb) = pa[name], pb[name]
        if ka == UNKNOWN or kb == UNKNOWN or ka == kb:
            continue
        out.append(f"{label}: {_bare(name, ta, ka)} vs {_bare(name, tb, kb)}")
    return out


def unchecked(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """The parts not compared because a side does not state them (a whole workload not stated: "workload")."""
    pa, pb = parts(a), parts(b)
    if not pa or not pb:
        return ["workload"]
    ka, kb = {n: k for n, _, k in pa}, {n: k for n, _, k in pb}
    return [PART_NAMES[n] for n in PART_NAMES if ka.get(n) == UNKNOWN or kb.get(n) == UNKNOWN]


def _bare(name: str, text: str | None, key: Any) -> str:
    """A part's text without its own name ("input 256" -> "256"), "none" for a part absent, "off" for ignore_eos."""
    if name == "ignore_eos":
        return "on" if key is True else "off"
    if text is None:
        return "none"
    for prefix in ("input ", "output ", "prompt cache "):
        if name in ("input", "output", "cache") and text.startswith(prefix):
            return text[len(prefix):].lstrip(": ")
    return text


#: received lengths differ when their medians differ by more than this share of the larger, and by more than
#: ``RECEIVED_TOKENS`` tokens (a chat template's few tokens, or the server's count beside the tool's, are no difference)
RECEIVED_SHARE = 0.15
RECEIVED_TOKENS = 4


def _quartiles(vals: list[int]) -> dict[str, Any]:
    s = sorted(vals)
    n = len(s)

    def q(p: float) -> int:
        return s[min(n - 1, max(0, math.ceil(p * n) - 1))]

    return {"p25": q(0.25), "p50": q(0.5), "p75": q(0.75), "n": n}


def received(requests: Iterable[Any]) -> dict[str, Any] | None:
    """The lengths a run's requests received, for a workload its header does not state (another tool's export):
    ``input_tokens`` of its measured requests and ``output_tokens`` of those completed, each as quartiles and a count;
    None when no measured request carries either."""
    ins: list[int] = []
    outs: list[int] = []
    for r in requests:
        if getattr(r, "phase", "measure") != "measure":
            continue
        i, o = getattr(r, "input_tokens", None), getattr(r, "output_tokens", None)
        if isinstance(i, int) and not isinstance(i, bool) and i >= 0:
            ins.append(i)
        if (isinstance(o, int) and not isinstance(o, bool) and o >= 0 and getattr(r, "complete", False)
                and getattr(r, "error", None) is None):
            outs.append(o)
    if not ins and not outs:
        return None
    return {"input": _quartiles(ins) if ins else None, "output": _quartiles(outs) if outs else None}


def received_text(rcv: Mapping[str, Any] | None) -> str:
    """"lengths received: input 87 (87-87), output 32 (32-32) tokens, medians (quartiles)"."""
    if not rcv:
        return "no lengths received"
    parts = []
    for name in ("input", "output"):
        q = rcv.get(name)
        parts.append(f"{name} unknown" if not q else f"{name} {q['p50']} ({q['p25']}-{q['p75']}, n {q['n']})")
    return "lengths received: " + ", ".join(parts) + " tokens, median (quartiles)"


def received_differences(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """(differences, unknown): the received lengths whose medians differ ("input received: median 87 vs 512"), and
    those a side does not carry."""
    diffs: list[str] = []
    unknown: list[str] = []
    for name in ("input", "output"):
        qa, qb = (a or {}).get(name), (b or {}).get(name)
        if not qa or not qb:
            unknown.append(f"{name} lengths")
            continue
        ma, mb = qa["p50"], qb["p50"]
        if abs(ma - mb) > max(RECEIVED_TOKENS, RECEIVED_SHARE * max(ma, mb)):
            diffs.append(f"{name} received: median {ma} vs {mb} tokens")
    return diffs, unknown


#: what received lengths cannot tell about a workload (said, never guessed)
NOT_IN_LENGTHS = ["request shape", "dataset", "shared prefix", "prompt cache"]


def compare_block(base: Mapping[str, Any] | None, cand: Mapping[str, Any] | None, *,
                  allow_different: bool = False, received_base: Mapping[str, Any] | None = None,
                  received_cand: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What ``compare`` says about the two runs' workloads: both lines, the differences, the parts not checked,
    ``comparable`` (False: they differ, or one is unknown, and ``allow_different`` was not given) and ``allowed``
    (they differ or one is unknown, and it was). ``basis``: ``declared`` (both headers state the workload),
    ``received`` (a header does not: the lengths both runs' requests received are compared, ``received_*``), or
    ``unknown`` (a header states none and its requests carry no lengths: ``unknown`` names the side)."""
    if parts(base) and parts(cand):
        diff = differences(base, cand)
        return {"base": describe_header(base), "candidate": describe_header(cand), "differences": diff,
                "unchecked": unchecked(base, cand), "comparable": not diff or allow_different,
                "allowed": bool(diff) and allow_different, "basis": "declared", "unknown": []}
    lines = []
    for hdr, rcv in ((base, received_base), (cand, received_cand)):
        line = describe_header(hdr)
        lines.append(line if parts(hdr) else f"{line}; {received_text(rcv)}")
    unknown = [side for side, hdr, rcv in (("base", base, received_base), ("candidate", cand, received_cand))
               if not parts(hdr) and not rcv]
    diff, missing = ([], []) if unknown else received_differences(received_base, received_cand)
    if unknown:
        basis = "unknown"
        unchecked_parts = ["workload"]
    else:
        basis = "received"
        unchecked_parts = NOT_IN_LENGTHS + missing
    bad = bool(diff) or bool(unknown)
    return {"base": lines[0], "candidate": lines[1], "differences": diff, "unchecked": unchecked_parts,
            "comparable": not bad or allow_different, "allowed": bad and allow_different, "basis": basis,
            "unknown": unknown, "received": {"base": received_base, "candidate": received_cand}}
