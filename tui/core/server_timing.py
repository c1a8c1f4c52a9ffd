"""Client timing beside the server's own: the server-side percentile brackets of one load step.

Where the server exports latency histograms (vLLM, SGLang, TensorRT-LLM, Dynamo: names in ``tui.core.engines``),
the load generator scrapes ``/metrics`` at the start and at the end of each step and the step end record carries
both (``server_histograms``, see docs/record-format.md)::

    {"engine": "vllm", "t_start": ..., "t_end": ...,
     "start": {"ttft": {"name": "vllm:time_to_first_token_seconds", "le": [0.05, ..., "+Inf"],
                        "counts": [...cumulative...], "count": 412.0, "sum": 20.5}, "itl": {...}, ...},
     "end": {...}, "problems": ["vllm:request_queue_time_seconds: series missing", ...]}

The difference end - start per bucket is what the server observed during the step. A percentile from buckets
is not a point: it is the bucket that holds it, ``(lower, upper]`` (nearest rank, no interpolation). Beside it
the client's own percentile of the same step: the difference is the client's overhead plus the network. A
client TTFT or end-to-end percentile BELOW the server's bracket cannot happen for the same requests (the
client cannot see a first token before the server made it), so it is flagged, with what would explain it
(other traffic in the server's counts, a server that counts from a later moment, a measurement error).

Standard library only; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

INF = math.inf
METRICS: tuple[str, ...] = ("ttft", "itl", "tpot", "e2e", "queue")
TITLES = {"ttft": "TTFT", "itl": "inter-token", "tpot": "TPOT (per request)", "e2e": "end-to-end",
          "queue": "queue time"}
#: the client figure set beside each server histogram. The server's inter-token histogram has one observation
#: per token gap; the client's ITL in a report is the LARGEST gap of each request, another measure: it is not set
#: beside it (checked live on vLLM 0.32: per-gap P50 100-150 ms beside a largest-gap P50 of 769 ms). TPOT is one
#: figure per request on both sides, (last token - first token) / (tokens - 1), as vLLM's
#: request_time_per_output_token_seconds is.
CLIENT_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}
ITL_NOTE = ("inter-token: the server's histogram has one observation per token gap; the client's ITL is the "
            "largest gap per request (another measure), so no client figure is set beside it")
QUANTS: tuple[tuple[str, float], ...] = (("P50", 0.5), ("P95", 0.95), ("P99", 0.99))
# metrics whose client figure bounds the server's from above, request by request: a client percentile below
# the server's bracket is impossible for the same requests. Inter-token gaps are not (the network batches
# tokens: two that left the server apart can reach the client together), queue time has no client figure.
FLAGGED = ("ttft", "e2e")
IMPOSSIBLE = ("which cannot happen for the same requests: the client cannot see a token before the server "
              "produced it")

Buckets = tuple[tuple[float, float], ...]


def _le(v: object) -> float | None:
    if v == "+Inf" or v == "inf":
        return INF
    if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v):
        return float(v)
    return None


def buckets_of(h: object) -> tuple[Buckets | None, str | None]:
    """Cumulative ``((le, count), ...)`` from one recorded histogram ``{"le": [...], "counts": [...]}``, or
    (None, why)."""
    if not isinstance(h, dict):
        return None, "not an object"
    les, counts = h.get("le"), h.get("counts")
    if not isinstance(les, list) or not isinstance(counts, list) or len(les) != len(counts) or not les:
        return None, "'le' and 'counts' must be lists of one length"
    out: list[tuple[float, float]] = []
    for le_v, c in zip(les, counts):
        le = _le(le_v)
        if le is None or isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
            return None, "a bucket bound or count is not a number"
        out.append((le, float(c)))
    out.sort()
    if not math.isinf(out[-1][0]):
        return None, "no +Inf bucket"
    for (_a, ca), (_b, cb) in zip(out, out[1:]):
        if cb + 1e-9 < ca:
            return None, "buckets not cumulative"
    return tuple(out), None


def delta(a: Buckets, b: Buckets) -> tuple[Buckets | None, str | None]:
    """``b - a`` per bound, or (None, why): another bucket layout, or a count that went down (a restart)."""
    da = dict(a)
    if set(da) != {le for le, _ in b}:
        return None, "the bucket layout changed during the step (the server restarted?)"
    out = []
    for le, cb in b:
        d = cb - da[le]
        if d < -1e-9:
            return None, "a count went down during the step (the server restarted?)"
        out.append((le, max(0.0, d)))
    return tuple(out), None


def bracket(b: Buckets, q: float) -> tuple[float, float] | None:
    """The bucket ``(lower, upper]`` (seconds) holding the nearest-rank q-quantile; None when empty."""
    n = b[-1][1]
    if n <= 0:
        return None
    rank = max(1.0, math.ceil(q * n - 1e-9))
    prev = 0.0
    for le, c in b:
        if c >= rank - 1e-9:
            return prev, le
        prev = le
    return prev, INF


def _hist_dict(sh: object) -> dict | None:
    if not isinstance(sh, dict):
        return None
    inner = sh.get("server_histograms")
    if isinstance(inner, dict):
        return inner
    return sh if "start" in sh or "end" in sh else None


def server_brackets(step: object) -> dict[str, Any]:
    """The server-side brackets of one step from its ``server_histograms`` (or a step end record / info dict
    holding it): ``{"engine", "seconds", "metrics": {key: {"name", "n", "P50": [lo_ms, hi_ms|None], ...}},
    "problems": [...]}``; ``{}`` when the step carries no server histograms."""
    sh = _hist_dict(step)
    if sh is None:
        return {}
    problems = [str(p) for p in (sh.get("problems") or []) if isinstance(p, str)][:10]
    start, end = sh.get("start"), sh.get("end")
    engine = sh.get("engine") if isinstance(sh.get("engine"), str) else None
    t0, t1 = _le(sh.get("t_start")), _le(sh.get("t_end"))
    out: dict[str, Any] = {"engine": engine, "seconds": (t1 - t0) if t0 is not None and t1 is not None
                           and math.isfinite(t0) and math.isfinite(t1) else None, "metrics": {}, "problems": problems}
    if not isinstance(start, dict) or not isinstance(end, dict):
        out["problems"].append("the step has no start or no end scrape of the server's histograms")
        return out
    for key in METRICS:
        if key not in start and key not in end:
            continue
        ha, hb = start.get(key), end.get(key)
        name = (hb.get("name") if isinstance(hb, dict) else None) or (ha.get("name") if isinstance(ha, dict) else None)
        label = name if isinstance(name, str) else key
        if ha is None or hb is None:
            out["problems"].append(f"{label}: scraped at only one end of the step")
            continue
        a, why_a = buckets_of(ha)
        b, why_b = buckets_of(hb)
        if a is None or b is None:
            out["problems"].append(f"{label}: unusable histogram ({why_a or why_b})")
            continue
        d, why = delta(a, b)
        if d is None:
            out["problems"].append(f"{label}: {why}")
            continue
        m: dict[str, Any] = {"name": label, "n": d[-1][1]}
        for lab, q in QUANTS:
            br = bracket(d, q)
            m[lab] = None if br is None else [br[0] * 1000.0, None if math.isinf(br[1]) else br[1] * 1000.0]
        out["metrics"][key] = m
    return out


def _client_value(v: object) -> float | None:
    if isinstance(v, dict):
        v = v.get("value")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def client_from_level(level: dict) -> dict[str, dict[str, float | None]]:
    """The client's percentiles (ms) of one report level: ``{"ttft": {"P50": ..}, "tpot": .., "e2e": ..}``.
    Reads ``ttft_ms`` as ``{"P50": {"value": ..}}`` or ``{"p50": ..}``, and ``tpot_ms`` / ``e2e_ms`` alike (the
    client's ``itl_ms``, the largest gap per request, is not the server's per-gap measure: ``CLIENT_KEYS``)."""
    out: dict[str, dict[str, float | None]] = {}
    for key, field in CLIENT_KEYS.items():
        d = level.get(field)
        if not isinstance(d, dict):
            continue
        got = {lab: _client_value(d.get(lab, d.get(lab.lower()))) for lab, _q in QUANTS}
        if any(v is not None for v in got.values()):
            out[key] = got
    return out


def _ms(v: float | None) -> str:
    if v is None:
        return "+Inf"
    return f"{v:.0f} ms" if v >= 10 else f"{v:.3g} ms"


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.3g}"


def _fmt_br(br: list | None) -> str:
    if br is None:
        return "N/A"
    lo, hi = br
    return f"> {_ms(lo)}" if hi is None else f"{_num(lo)}..{_num(hi)} ms"


def server_json(brackets: dict, client: dict | None = None, client_n: int | None = None) -> dict[str, Any]:
    """The JSON of one level: per metric and percentile the server's bracket ``[lo_ms, hi_ms]``
    (``hi_ms`` null: above the last finite bound), the client's value, ``client_minus_server_ms`` (a range), and
    ``below_server_bracket`` (true: impossible for the same requests, see ``flags``)."""
    client = client or {}
    out: dict[str, Any] = {"engine": brackets.get("engine"), "seconds": brackets.get("seconds"), "client_n": client_n,
                           "metrics": {}, "flags": [], "problems": list(brackets.get("problems") or []),
                           "note": ("server-side: from arrival at the server, buckets not points; the difference to "
                                    "the client's figure is the client's overhead plus the network")}
    if "itl" in (brackets.get("metrics") or {}):
        out["itl_note"] = ITL_NOTE
    for key, m in (brackets.get("metrics") or {}).items():
        row: dict[str, Any] = {"name": m.get("name"), "n": m.get("n")}
        for lab, _q in QUANTS:
            br = m.get(lab)
            cv = (client.get(key) or {}).get(lab)
            cell: dict[str, Any] = {"server_ms": br, "client_ms": cv, "client_minus_server_ms": None,
                                    "below_server_bracket": None}
            if br is not None and cv is not None:
                lo, hi = br
                cell["client_minus_server_ms"] = [None if hi is None else cv - hi, cv - lo]
                if key in FLAGGED:
                    below = cv < lo - 1e-9
                    cell["below_server_bracket"] = below
                    if below:
                        out["flags"].append(_flag_text(key, lab, cv, br, m.get("n"), client_n))
            row[lab] = cell
        out["metrics"][key] = row
    return out


def _flag_text(key: str, lab: str, cv: float, br: list, server_n: object, client_n: int | None) -> str:
    why = "a server that starts its clock later than arrival, or a measurement error"
    if isinstance(server_n, (int, float)) and client_n is not None and server_n > client_n:
        why = (f"other traffic in the server's counts ({server_n:.0f} observations, {client_n} client requests), "
               + why)
    return (f"client {TITLES[key]} {lab} {_ms(cv)} is below the server's bracket {_fmt_br(br)}, {IMPOSSIBLE}: "
            f"check for {why}")


def server_lines(brackets: dict, client_percentiles: dict | None = None, client_n: int | None = None) -> list[str]:
    """Text lines of one level: the server's brackets beside the client's percentiles, then the flags."""
    if not brackets:
        return []
    j = server_json(brackets, client_percentiles, client_n)
    secs = j.get("seconds")
    head = (f"server-side timing ({j.get('engine') or 'unknown engine'}, histograms scraped at the step's start "
            f"and end" + (f", {secs:.1f} s" if isinstance(secs, (int, float)) else "") + "; buckets, not points):")
    lines = [head]
    for key in METRICS:
        row = j["metrics"].get(key)
        if row is None:
            continue
        cells = []
        for lab, _q in QUANTS:
            c = row[lab]
            s = f"{lab} {_fmt_br(c['server_ms'])}"
            if c["client_ms"] is not None:
                s += f" (client {_ms(c['client_ms'])}" + (" BELOW" if c["below_server_bracket"] else "") + ")"
            cells.append(s)
        n = row.get("n")
        lines.append(f"  {TITLES[key]} (server n={n:.0f}): " + ", ".join(cells) if isinstance(n, (int, float))
                     else f"  {TITLES[key]}: " + ", ".join(cells))
    if "itl_note" in j:
        lines.append(f"  note: {j['itl_note']}")
    for f in j["flags"]:
        lines.append(f"  FLAG: {f}")
    for p in j["problems"]:
        lines.append(f"  server histograms: {p}")
    return lines


def attach(rep: dict, rows: Any) -> None:
    """Adds ``server_timing`` to each level of a report dict (``rep["levels"]``, built from ``rows`` in order)
    and to ``rep["measured"]`` for the judged row, where the row's step carried server histograms."""
    levels = rep.get("levels") or []
    measured = rep.get("measured") or {}
    for lv, row in zip(levels, rows):
        sh = getattr(row, "server_histograms", None)
        if not sh:
            continue
        br = server_brackets(sh)
        if not br:
            continue
        n = lv.get("n")
        st = server_json(br, client_from_level(lv), n if isinstance(n, int) else None)
        st["lines"] = server_lines(br, client_from_level(lv), n if isinstance(n, int) else None)
        lv["server_timing"] = st
        if measured.get("level") == lv.get("level") and measured.get("round") == lv.get("round"):
            measured["server_timing"] = st


def report_lines(rep: Mapping[str, Any]) -> list[str]:
    """The text of every level's server-side timing (indented for the report's Measured section)."""
    out: list[str] = []
    for lv in rep.get("levels") or []:
        st = lv.get("server_timing")
        if not isinstance(st, dict):
            continue
        lines = list(st.get("lines") or [])
        if not lines:
            continue
        lvl = lv.get("level")
        name = "-" if lvl is None else f"{lvl:g}" if isinstance(lvl, (int, float)) else str(lvl)
        out.append(f"  level {name} round {lv.get('round')}: {lines[0]}")
        out.extend("  " + line for line in lines[1:])
    return out
