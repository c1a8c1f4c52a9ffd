"""What `select` checks before it ranks anything (issue 40): the candidates measured the same thing, so their costs
can be set side by side. The vocabulary is `compare`'s (``tui.core.compare_guard``): a field that differs is
refused as NOT ENOUGH EVIDENCE (exit 3) naming it, unless ``--allow-different FIELD[,FIELD]`` names it, and then it
is printed beside the choice. The model, engine, build, context and slots may differ: they are what is chosen.

The fields, each read from every run header of every candidate (a candidate's own files must agree too):

- ``workload``: the one-line workload (``tui.core.workload``: request shape, lengths, dataset, shared prefixes, the
  prompt cache the requests asked for); a header that states no workload is unknown, refused as in `compare`;
- ``slos``: the SLOs the runs were judged at (``verdict_settings``, else the older ``slo`` block), and those
  `accept` judged each candidate at;
- ``target``: the good-fraction target, read the same way;
- ``arrival``: the arrival process (closed loop; open loop with its arrival law and burstiness; a trace replay);
- ``tokenizer``: where a header records one (``server_identity.tokenizer`` or ``vocab_size``): a token counted by
  two tokenizers is not one unit of cost; not recorded: not checked, said;
- ``cache_policy``: the server's prefix caching (vLLM's ``enable_prefix_caching``, recorded in
  ``server_capacity.prefix_caching``); not recorded: not checked, said (the requests' own ``cache_prompt`` is part
  of the workload).

A run that is evidence of two candidates (the same run id) is refused, never allowed. Also the quality evidence: the quality files must share one baseline by the servers' facts
(``tui.core.identity.server_facts``), and each candidate's quality file must have measured the configuration its
load files measured (facts both state that differ: the quality verdict is of another configuration).
Pure, standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tui.core.compare_guard import parse_allow as _parse_allow
from tui.core.identity import fact_differences, server_facts
from tui.core.runs import run_identity
from tui.core.workload import describe_header, differences, parts

__all__ = ["ALLOWABLE", "FIELD_NAMES", "comparability", "parse_allow", "quality_baseline_facts",
           "quality_tie_problems", "run_facts", "shared_baseline", "shared_runs"]

#: the fields `select` compares, in the order printed (each may be named by ``--allow-different``)
ALLOWABLE = ("workload", "slos", "target", "arrival", "tokenizer", "cache_policy")
FIELD_NAMES = {"workload": "workload", "slos": "SLOs", "target": "target", "arrival": "arrival process",
               "tokenizer": "tokenizer", "cache_policy": "cache policy (server prefix caching)"}
UNKNOWN = None


def parse_allow(values: Iterable[str] | None) -> frozenset[str]:
    """The fields of ``--allow-different`` (comma lists); ValueError naming an unknown field."""
    return _parse_allow([str(v).replace("-", "_") for v in values or ()], ALLOWABLE)


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _settings_block(header: Mapping[str, Any]) -> Mapping[str, Any]:
    vs = header.get("verdict_settings")
    return vs if isinstance(vs, Mapping) else _map(header.get("slo"))


def _slos(block: Mapping[str, Any]) -> tuple[str, Any] | None:
    if not any(k in block for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")):
        return None
    vals = tuple(_num(block.get(k)) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"))
    names = ("TTFT", "TPOT", "ITL", "E2E")
    text = ", ".join(f"{n} <= {v:g} ms" for n, v in zip(names, vals) if v is not None) or "no SLO"
    of = block.get("ttft_of") if isinstance(block.get("ttft_of"), str) else "answer"
    if vals[0] is not None:
        text += f" ({of})"
    return text, (vals, of if vals[0] is not None else None)


def _arrival(load: Mapping[str, Any]) -> tuple[str, Any] | None:
    mode = load.get("mode")
    if mode not in ("closed", "open"):
        return None
    if load.get("arrival") == "trace" or isinstance(load.get("trace"), Mapping):
        tr = _map(load.get("trace"))
        sha = str(tr["sha256"]) if isinstance(tr.get("sha256"), str) else "unknown"
        return f"trace replay (sha256 {sha[:8]})", ("trace", sha)
    if mode == "closed":
        return "closed loop (each client sends its next request when the last ends)", ("closed",)
    law = load.get("arrival") if isinstance(load.get("arrival"), str) else "unknown"
    burst = _num(load.get("burstiness"))
    text = f"open loop, {law} arrivals" + (f" (burstiness {burst:g})" if law == "gamma" and burst is not None else "")
    return text, ("open", law, burst if law == "gamma" else None)


def _tokenizer(header: Mapping[str, Any]) -> tuple[str, Any] | None:
    for block in (_map(header.get("server_identity")), _map(_map(header.get("environment")).get("server"))):
        tok = block.get("tokenizer")
        if isinstance(tok, str) and tok.strip():
            return tok.strip()[:200], tok.strip()[:200]
        vs = block.get("vocab_size")
        if isinstance(vs, int) and not isinstance(vs, bool) and vs > 0:
            return f"vocabulary of {vs:,} tokens", vs
    return None


def _cache_policy(header: Mapping[str, Any]) -> tuple[str, Any] | None:
    pc = _map(header.get("server_capacity")).get("prefix_caching")
    if isinstance(pc, bool):
        return ("server prefix caching on" if pc else "server prefix caching off"), pc
    return None


def run_facts(header: Mapping[str, Any] | None) -> dict[str, tuple[str, Any] | None]:
    """Each field's (text, key) in one run header; None: the header does not state it."""
    h = _map(header)
    block = _settings_block(h)
    target = _num(block.get("target"))
    wl = parts(h)
    return {
        "workload": (describe_header(h), tuple((n, k) for n, _t, k in wl)) if wl else None,
        "slos": _slos(block),
        "target": (f"{target:g}", target) if target is not None else None,
        "arrival": _arrival(_map(h.get("load"))),
        "tokenizer": _tokenizer(h),
        "cache_policy": _cache_policy(h),
    }


def _workload_detail(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    d = differences(a, b)
    return "; ".join(d) if d else "the workload lines differ"


def comparability(cands: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], allow: frozenset[str] = frozenset(),
                  judged: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The candidates' fields side by side: ``cands`` (name, run headers); ``judged`` per name the ``slo`` block
    `accept` judged it at. Returns ``{"fields": [{"field", "name", "values": {cand: text}, "state", "detail"}],
    "refused": [reason...], "allowed": [field...], "unchecked": [sentence...]}``; ``state``: same, differs (refused),
    allowed (differs, allowed), unknown (a workload not stated: refused unless allowed) or not recorded."""
    fields: list[dict[str, Any]] = []
    refused: list[str] = []
    allowed: list[str] = []
    unchecked: list[str] = []
    facts = [(name, [run_facts(h) for h in headers], list(headers)) for name, headers in cands]
    for field in ALLOWABLE:
        label = FIELD_NAMES[field]
        values: dict[str, str] = {}
        keys: list[tuple[str, Any, Mapping[str, Any]]] = []
        missing: list[str] = []
        for name, per_run, headers in facts:
            seen = [(f[field], h) for f, h in zip(per_run, headers)]
            known = [(fv, h) for fv, h in seen if fv is not None]
            if len(known) < len(seen):
                missing.append(name)
            texts = list(dict.fromkeys(fv[0] for fv, _ in known))
            values[name] = " | ".join(texts) if texts else "not recorded"
            keys += [(name, fv[1], h) for fv, h in known]
        distinct = list(dict.fromkeys(repr(k) for _n, k, _h in keys))
        differs = len(distinct) > 1
        detail = ""
        if differs:
            first = keys[0]
            other = next(k for k in keys if repr(k[1]) != repr(first[1]))
            if field == "workload":
                detail = f"{first[0]} vs {other[0]}: {_workload_detail(first[2], other[2])}"
            else:
                detail = f"{first[0]}: {values[first[0]]}; {other[0]}: {values[other[0]]}"
        state = "same"
        if field == "workload" and missing:
            state = "allowed" if field in allow else "unknown"
            why = (f"the workload of {', '.join(missing)} is not stated (another tool's file or an old header): "
                   "its cost cannot be set beside the others'")
            if field in allow:
                allowed.append(field)
            else:
                refused.append(f"not comparable: {why}; --allow-different workload ranks them anyway")
            detail = why
        elif differs:
            state = "allowed" if field in allow else "differs"
            if field in allow:
                allowed.append(field)
            else:
                refused.append(f"not comparable: the {label} differs ({detail}); --allow-different {field} ranks "
                               "them anyway")
        elif missing and not keys:
            state = "not recorded"
            unchecked.append(f"{label}: not recorded by any candidate's files (not checked)")
        elif missing:
            unchecked.append(f"{label}: not recorded for {', '.join(missing)} (checked only where recorded)")
        fields.append({"field": field, "name": label, "values": values, "state": state, "detail": detail})
    if judged:
        judged_texts = {n: (_slos(_map(b)) or ("unknown", None))[0] + f", target {_map(b).get('target')}"
                        for n, b in judged.items()}
        if len(set(judged_texts.values())) > 1 and "slos" not in allow:
            refused.append("not comparable: the candidates were judged at different settings ("
                           + "; ".join(f"{n}: {t}" for n, t in judged_texts.items()) + "); --allow-different slos "
                           "ranks them anyway")
    refused = shared_runs(cands) + refused
    return {"fields": fields, "refused": list(dict.fromkeys(refused)), "allowed": list(dict.fromkeys(allowed)),
            "unchecked": unchecked}


def shared_runs(cands: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    """Runs that are evidence of two candidates (the same run id in both): one measurement cannot be two
    configurations; never allowed."""
    owner: dict[str, str] = {}
    out = []
    for name, headers in cands:
        for h in headers:
            rid = run_identity(h)
            if rid is None:
                continue
            if rid in owner and owner[rid] != name:
                out.append(f"the same run ({rid}) is evidence of {owner[rid]} and of {name}: one measurement "
                           "cannot be two candidates")
            owner.setdefault(rid, name)
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------ the quality files


def _side_facts(side: Mapping[str, Any]) -> dict[str, str]:
    return server_facts(_map(side.get("server")), _map(side.get("server_identity")))


def quality_baseline_facts(doc: Mapping[str, Any]) -> dict[str, str] | None:
    """The baseline's configuration in a quality file, by its server's facts (None: the file has no baseline)."""
    base = doc.get("baseline")
    return _side_facts(base) if isinstance(base, Mapping) else None


def run_server_facts(header: Mapping[str, Any]) -> dict[str, str]:
    return server_facts(_map(_map(header.get("environment")).get("server")), _map(header.get("server_identity")))


def quality_tie_problems(doc: Mapping[str, Any], headers: Sequence[Mapping[str, Any]]) -> list[str]:
    """The quality candidate's server facts against each load run's: a fact both state that differs means the
    quality verdict is of another configuration than the load evidence (a different context, slot count, build)."""
    q = _side_facts(_map(doc.get("candidate")))
    out = []
    for h in headers:
        differ, _same = fact_differences(q, run_server_facts(h))
        if differ:
            out.append("the quality file measured another configuration than the load files ("
                       + ", ".join(f"{k} {q[k]} in quality vs {run_server_facts(h)[k]} under load" for k in differ)
                       + "): its verdict is not this candidate's")
    return list(dict.fromkeys(out))


def shared_baseline(docs: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, dict[str, str] | None], list[str]]:
    """(per candidate its quality baseline's facts, the problems): the quality files must share one baseline by the
    servers' facts; a fact two baselines both state that differs is a different baseline."""
    facts = {n: quality_baseline_facts(d) for n, d in docs.items()}
    problems: list[str] = []
    named = [(n, f) for n, f in facts.items() if f is not None]
    for n, f in named[1:]:
        n0, f0 = named[0]
        differ, _same = fact_differences(f0, f)
        if differ:
            problems.append(f"the quality files do not share one baseline: {n0}'s and {n}'s baselines differ by their "
                            "servers' facts (" + ", ".join(f"{k} {f0[k]} vs {f[k]}" for k in differ) + ")")
    return facts, problems
