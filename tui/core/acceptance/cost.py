"""Section 6 of the acceptance report: the cost at the judged level (N/A without a price or a sound window).

The price is per GPU-hour x the GPUs the deployment actually uses: ``--gpus`` (GPUs per replica), else the budget's
tensor-parallel degree ``--tp``, else one GPU, said as assumed. The basis is the judged level when it PASSes, else
the measured capacity (the highest level that PASSes), else none. A cost is never computed from a window the file
does not support: the level's own evidence problems, a throughput that disagrees with its request count and
duration, or output tokens per request beyond what the records received refuse it, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tui.core.acceptance.inputs import CostInputs
from tui.core.levels import fmt_level
from tui.core.states import PASS

#: how far a level's throughput x duration may drift from its request count before the window is called broken
THROUGHPUT_TOLERANCE = 0.5


def _window_problems(rows: Sequence[Mapping]) -> list[str]:
    """What makes these level rows an unsound basis for a cost (empty: sound)."""
    out: list[str] = []
    for r in rows:
        where = f"`{r['source']}` round {r['round']}"
        for p in r.get("evidence_problems") or ():
            out.append(f"{where}: {p}")
        n, rps = r.get("n") or 0, r.get("req_per_s")
        minutes = (r.get("window") or {}).get("minutes")
        if not n or not isinstance(minutes, (int, float)) or not minutes > 0:
            out.append(f"{where}: no measured window")
            continue
        if isinstance(rps, (int, float)) and rps > 0:
            implied = rps * minutes * 60.0
            if abs(implied - n) > THROUGHPUT_TOLERANCE * n:
                out.append(f"{where}: throughput {rps:.3g} req/s over {minutes:.3g} min implies {implied:.0f} "
                           f"requests, the window holds {n}")
            tok = r.get("output_tok_per_s")
            top = r.get("output_tokens_received_max")
            if isinstance(tok, (int, float)) and isinstance(top, (int, float)) and top > 0 and tok / rps > 1.5 * top:
                out.append(f"{where}: {tok / rps:.0f} output tokens per request, the records received at most {top:g}")
    return out


def cost_section(cost: CostInputs, measured: Mapping, tp: int | None = None) -> dict:
    price = cost.gpu_hour_usd
    tp = cost.tp if cost.tp is not None else tp
    if cost.gpus is not None:
        gpus, gpus_from = cost.gpus, "--gpus"
    elif tp is not None and tp > 1:
        gpus, gpus_from = tp, f"--tp {tp} (one replica of {tp} GPUs; pass --gpus if it differs)"
    else:
        gpus, gpus_from = 1, "1 GPU assumed: pass --gpus"
    out: dict[str, Any] = {
        "gpu_hour_usd": price,
        "gpus": gpus,
        "gpus_from": gpus_from,
        "gpus_assumed": cost.gpus is None and not (tp is not None and tp > 1),
        "usd_per_hour": None if price is None else price * gpus,
        "basis_level": None,
        "basis_state": None,
        "capacity_level": measured.get("measured_capacity"),
        "output_tok_per_s": None,
        "goodput_per_s": None,
        "usd_per_1m_output_tokens": None,
        "usd_per_1000_good_requests": None,
        "refused": [],
        "status": "",
        "basis": ("throughput at the basis level, the slowest round there (conservative); assumes the deployment is "
                  "kept busy at that load: idle time raises the real cost"),
    }
    if price is None:
        out["status"] = "N/A: no price given (--gpu-hour-usd)"
        return out
    judged = measured.get("judged") or {}
    if judged.get("state") == PASS:
        level, why = judged.get("level"), "the judged level"
    elif measured.get("has_measured_capacity"):
        level, why = measured.get("measured_capacity"), "the measured capacity, as the judged level does not PASS"
    else:
        out["status"] = "N/A: no level PASSes, so no load is known to be served within the SLO"
        return out
    out["basis_level"], out["basis_state"] = level, why
    rows = [r for r in measured["levels"] if r["mode"] == measured["primary_mode"] and r["level"] == level]
    problems = _window_problems(rows)
    if problems:
        out["refused"] = problems
        out["status"] = (f"refused: the window at {measured.get('unit') or 'level'} {fmt_level(level)} does not support "
                         f"a cost ({problems[0]}" + (f"; and {len(problems) - 1} more" if len(problems) > 1 else "") + ")")
        return out
    toks = [r["output_tok_per_s"] for r in rows if r["output_tok_per_s"]]
    good = [r["goodput_per_s"] for r in rows if r["goodput_per_s"]]
    out["output_tok_per_s"] = min(toks) if toks else None
    out["goodput_per_s"] = min(good) if good else None
    per_hour = price * gpus
    if toks:
        out["usd_per_1m_output_tokens"] = per_hour / (min(toks) * 3600.0) * 1e6
    if good:
        out["usd_per_1000_good_requests"] = per_hour / (min(good) * 3600.0) * 1000.0
    out["status"] = "computed" if toks and good else "partly N/A: throughput not recorded at the basis level"
    return out
