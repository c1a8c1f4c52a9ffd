"""Section 6 of the acceptance report: the cost basis at the measured capacity (N/A without a price or a capacity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tui.core.acceptance.inputs import CostInputs


def cost_section(cost: CostInputs, measured: Mapping) -> dict:
    price = cost.gpu_hour_usd
    gpus = cost.gpus if cost.gpus is not None else 1
    out: dict[str, Any] = {
        "gpu_hour_usd": price,
        "gpus": gpus,
        "gpus_assumed": cost.gpus is None,
        "usd_per_hour": None if price is None else price * gpus,
        "capacity_level": measured.get("measured_capacity"),
        "output_tok_per_s": None,
        "goodput_per_s": None,
        "usd_per_1m_output_tokens": None,
        "usd_per_1000_good_requests": None,
        "status": "",
        "basis": ("throughput at the measured capacity, the slowest round there (conservative); assumes the "
                  "deployment is kept busy at that load: idle time raises the real cost"),
    }
    if price is None:
        out["status"] = "N/A: no price given (--gpu-hour-usd)"
        return out
    if not measured.get("has_measured_capacity"):
        out["status"] = "N/A: no measured capacity (no level PASSes)"
        return out
    cap = measured.get("measured_capacity")
    rows = [r for r in measured["levels"] if r["mode"] == measured["primary_mode"] and r["level"] == cap]
    toks = [r["output_tok_per_s"] for r in rows if r["output_tok_per_s"]]
    good = [r["goodput_per_s"] for r in rows if r["goodput_per_s"]]
    out["output_tok_per_s"] = min(toks) if toks else None
    out["goodput_per_s"] = min(good) if good else None
    per_hour = price * gpus
    if toks:
        out["usd_per_1m_output_tokens"] = per_hour / (min(toks) * 3600.0) * 1e6
    if good:
        out["usd_per_1000_good_requests"] = per_hour / (min(good) * 3600.0) * 1000.0
    out["status"] = "computed" if toks and good else "partly N/A: throughput not recorded at the measured capacity"
    return out
