"""Issue 35: now that a reader judges a file at the settings its header states, the header's settings are evidence
too. The property: no edit of the settings a file states makes `report`'s outcome more favourable (FAIL < not
enough evidence < PASS) unless the output names a detected problem, and no edit exits 70.

The family, as `servewatch run` writes a file: the header's ``verdict_settings`` (every field weakened,
strengthened, set to null, to a wrong type, removed; the whole block removed or replaced by a list), the older
``slo`` block beside it (its SLO and target edited, removed), and both header blocks edited alike. Each step end
record states the settings its step was judged at: an edit of the header alone disagrees with them (named, no
PASS). Editing every copy alike (header and every step record) is what the step record's own verdict, compared
with the recomputation at the run's settings, and the digest chain are for (the record-format checks of #35)."""

from __future__ import annotations

import copy
import json
import random

import pytest

from tests.support import evidence_files as E
from tui.cli import main
from tui.core.slos import Slos
from tui.core.slos import header_block as slo_block
from tui.core.verdict_settings import FIELDS, VerdictSettings, header_block

FAVOUR = {1: 0, 3: 1, 0: 2}  # FAIL < not enough evidence < PASS

HONEST = {
    # FAIL at its own settings: TTFT 200 ms against 50 ms
    "fail": VerdictSettings(slos=Slos(ttft_ms=50.0), target=0.99, min_window_s=60.0),
    # not enough evidence: 11 minutes of data for a 20-minute window (PASS at any shorter one)
    "short": VerdictSettings(min_window_s=1200.0),
    # not enough evidence: 1,320 requests for a minimum of 5,000
    "few": VerdictSettings(min_requests=5000),
    # FAIL: every request sent TPOT 50 ms against 40 ms (the E2E SLO on too)
    "tpot": VerdictSettings(slos=Slos(ttft_ms=1000.0, tpot_ms=40.0, e2e_ms=5000.0)),
}


def _records(vs: VerdictSettings) -> list[dict]:
    recs = E.honest_closed(level=4, seconds=660.0)
    for r in recs:
        if r.get("type") == "request" and r.get("t_first_token") is not None:
            r["t_last_token"] = r["t_first_token"] + 1.55  # 32 tokens: TPOT 50 ms
            r["output_chunks"] = 32
    recs[0]["verdict_settings"] = header_block(vs)
    recs[0]["slo"] = slo_block(vs.slos, vs.target)
    for r in recs:
        if r.get("type") == "step" and r.get("event") == "end":
            r["verdict_settings"] = header_block(vs)  # as `run` writes its step end records
    return recs


def _weaker(name, v):
    return {"ttft_ms": None if v is None else v * 20, "tpot_ms": None, "itl_ms": None, "e2e_ms": None,
            "ttft_of": "any", "target": 0.5, "min_window_s": 0.0, "min_requests": 1, "alpha": 0.5,
            "required_level": 4.0}[name]


def _stricter(name, v):
    return {"ttft_ms": 1.0, "tpot_ms": 1.0, "itl_ms": 1.0, "e2e_ms": 1.0, "ttft_of": "answer", "target": 0.999,
            "min_window_s": 100000.0, "min_requests": 10 ** 6, "alpha": 0.001, "required_level": 2.0}[name]


def _edits(rng: random.Random):
    """One edit of the family: (description, function of the header)."""
    name = rng.choice(FIELDS)
    kind = rng.choice(["weaker", "stricter", "null", "type", "remove", "block", "slo", "both"])

    def apply(h):
        vs = h.get("verdict_settings")
        if kind == "block":
            choice = rng.choice(["del", "list", "del-both"])
            if choice == "list":
                h["verdict_settings"] = [1]
            else:
                h.pop("verdict_settings", None)
                if choice == "del-both":
                    h.pop("slo", None)
            return f"block {choice}"
        if kind == "slo":
            slo = h.get("slo") or {}
            key = rng.choice(["ttft_ms", "target", "ttft_of", "tpot_ms", "del"])
            if key == "del":
                h.pop("slo", None)
            else:
                slo[key] = {"ttft_ms": 100000.0, "target": 0.5, "ttft_of": "any", "tpot_ms": None}[key]
            return f"slo {key}"
        if not isinstance(vs, dict):
            return "nothing"
        if kind == "remove":
            vs.pop(name, None)
        elif kind == "null":
            vs[name] = None
        elif kind == "type":
            vs[name] = str(vs.get(name))
        elif kind in ("weaker", "both"):
            vs[name] = _weaker(name, vs.get(name))
            if kind == "both" and isinstance(h.get("slo"), dict) and name in h["slo"]:
                h["slo"][name] = vs[name]  # the older block edited alike
        else:
            vs[name] = _stricter(name, vs.get(name))
        return f"{kind} {name}"

    return apply


def _report(path) -> tuple[int, dict]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["report", str(path), "--json"])
    return rc, (json.loads(out.getvalue()) if rc != 2 else {})


@pytest.mark.parametrize("honest", sorted(HONEST))
def test_no_edit_of_the_stated_settings_is_more_favourable_unless_detected(tmp_path, honest):
    base = _records(HONEST[honest])
    path = E.write(tmp_path / "honest.jsonl", base)
    rc0, rep0 = _report(path)
    assert rc0 in (1, 3) and not rep0["evidence"]["problems"], (honest, rc0)
    rng = random.Random(f"settings-{honest}")
    for case in range(60):
        recs = copy.deepcopy(base)
        done = [_edits(rng)(recs[0]) for _ in range(rng.randint(1, 3))]
        E.write(path, recs)
        rc, rep = _report(path)
        assert rc not in (2, 70), (honest, case, done, rc)
        detected = [p for p in rep["evidence"]["problems"] if "settings" in p or "slo block" in p]
        if FAVOUR[rc] > FAVOUR[rc0]:
            assert detected, (honest, case, done, rc, rep["evidence"]["problems"])
            assert rep["measured"]["verdict"]["state"] != "PASS"  # a detected problem forbids PASS
