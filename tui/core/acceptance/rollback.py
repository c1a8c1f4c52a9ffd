"""Section 7 of the acceptance report: the default multi-window burn-rate rollback rules on the acceptance SLO, and
the user's own rules read from text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from tui.core.acceptance.inputs import _pct
from tui.core.bounds import MAX_JSON_DEPTH, json_too_deep

#: Default multi-window burn-rate rules: (name, long window, short window, burn rate, action).
DEFAULT_BURN_RULES = (
    ("page", "1h", "5m", 14.4, "page the on-call engineer and roll back to the previous deployment"),
    ("ticket", "6h", "30m", 6.0, "open a ticket; roll back if the burn continues"),
)
_WINDOW_HOURS = {"1h": 1.0, "5m": 5 / 60, "6h": 6.0, "30m": 0.5}
SLO_PERIOD_HOURS = 30 * 24  # the error budget period the burn rates are calibrated for


def default_rollback_rules(target: float, slo_ttft_ms: float) -> tuple[list[dict], list[str]]:
    """Multi-window burn-rate rules on the acceptance SLO (error budget = 1 - target)."""
    budget = 1.0 - target
    rules, notes = [], []
    for name, long_w, short_w, burn, action in DEFAULT_BURN_RULES:
        thr = burn * budget
        spent = burn * _WINDOW_HOURS[long_w] / SLO_PERIOD_HOURS
        rule = {
            "name": name,
            "long_window": long_w,
            "short_window": short_w,
            "burn_rate": burn,
            "error_budget": budget,
            "bad_fraction_threshold": min(1.0, thr),
            "budget_spent_in_long_window": spent,
            "condition": (f"the share of bad requests (failed, or TTFT over {slo_ttft_ms:g} ms) over the last "
                          f"{long_w} AND over the last {short_w} both exceed {_pct(min(1.0, thr))} "
                          f"({burn:g}x the {_pct(budget)} error budget)"),
            "action": action,
            "can_fire": thr < 1.0,
        }
        if thr >= 1.0:
            notes.append(f"the {name} rule needs more than 100% bad requests at target {target:g}: it can never fire; "
                         "use a lower burn rate for such a loose target")
        rules.append(rule)
    return rules, notes


def parse_rollback_rules(text: str, source: str = "<rollback>") -> list[str]:
    """User rollback rules: a JSON list (strings, or objects rendered as 'key: value; ...') or one rule per line
    (blank lines and # comments ignored). Raises ValueError on a malformed JSON list."""
    s = text.strip()
    if not s:
        return []
    if s.startswith("["):
        try:
            items = json.loads(s)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{source}: not a valid JSON list: {str(exc)[:80]}") from None
        if not isinstance(items, list):
            raise ValueError(f"{source}: expected a JSON list")
        if json_too_deep(items):
            raise ValueError(f"{source}: nested deeper than {MAX_JSON_DEPTH} levels")
        out = []
        for i, it in enumerate(items, 1):
            if isinstance(it, str) and it.strip():
                out.append(" ".join(it.split()))
            elif isinstance(it, Mapping) and it:
                if isinstance(it.get("rule"), str):
                    out.append(" ".join(it["rule"].split()))
                else:
                    out.append("; ".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in it.items()))
            else:
                raise ValueError(f"{source}: item {i} is neither a rule string nor an object")
        return out
    return [" ".join(line.split()) for line in s.splitlines() if line.strip() and not line.strip().startswith("#")]
