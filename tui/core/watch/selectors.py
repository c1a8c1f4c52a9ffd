"""Label selectors (``k="v",k2!="w"``) and the model names a page shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tui.core.engines import ENGINES
from tui.core.watch.scrape import Sample


def parse_selector(text: str | None) -> list[tuple[str, str, str]]:
    """``k="v",k2!="w"`` -> [(k, op, v)]; ops ``=`` and ``!=``. Raises ValueError on anything else
    (regex matchers are left to Prometheus)."""
    out: list[tuple[str, str, str]] = []
    s = (text or "").strip().strip("{}").strip()
    i = 0
    while i < len(s):
        while i < len(s) and s[i] in " ,":
            i += 1
        if i >= len(s):
            break
        j = i
        while j < len(s) and (s[j].isalnum() or s[j] == "_"):
            j += 1
        key = s[i:j]
        if not key:
            raise ValueError(f"bad selector near {s[i:i + 20]!r}: expected label=\"value\"")
        if s.startswith("!=", j):
            op, j = "!=", j + 2
        elif s.startswith("=~", j) or s.startswith("!~", j):
            raise ValueError("regex matchers (=~, !~) work with --prometheus-url only")
        elif s.startswith("=", j):
            op, j = "=", j + 1
        else:
            raise ValueError(f"bad selector near {s[i:i + 20]!r}: expected label=\"value\"")
        if j >= len(s) or s[j] != '"':
            raise ValueError("selector values must be in double quotes, e.g. model_name=\"x\"")
        k = j + 1
        val = []
        while k < len(s) and s[k] != '"':
            if s[k] == "\\" and k + 1 < len(s):
                k += 1
            val.append(s[k])
            k += 1
        if k >= len(s):
            raise ValueError("unterminated quoted value in selector")
        out.append((key, op, "".join(val)))
        i = k + 1
    return out


def matches(labels: dict, matchers: Sequence[tuple[str, str, str]]) -> bool:
    for key, op, val in matchers:
        have = labels.get(key, "")
        if (op == "=" and have != val) or (op == "!=" and have == val):
            return False
    return True


def models_seen(samples: Iterable[Sample], engine: str) -> list[str]:
    """Model label values on the engine's TTFT / queue series (sorted)."""
    m = ENGINES[engine]
    prefixes = tuple(x for x in (m.ttft,) if x) + m.waiting + m.running
    found: set[str] = set()
    for name, labels, _v in samples:
        if not name.startswith(prefixes):
            continue
        for lab in m.model_labels:
            v = labels.get(lab)
            if v:
                found.add(v)
                break
    return sorted(found)
