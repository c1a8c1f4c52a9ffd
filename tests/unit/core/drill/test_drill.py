"""The drill's judgement (issue 39, tui.core.drill) on drill files written as `servewatch drill` writes them
(tests/support/drill_files.py: the real Recorder, the generator's step records), read by the one reader path
(`report`, `accept`, `compare` use ``read_drill``): the recovery rule against a known recovery moment, the verdicts,
every request counted exactly once, the impact's arithmetic, and the honesty property: no edit of a drill file makes
its verdict more favourable unless the output names a detected problem (a seeded grammar of edits, rechained)."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import pytest

from tests.support.drill_files import CFG, fails_until, plan, recovers_at, write_drill
from tui.cli.drillopts import judge_file, read_drill
from tui.core.drill import DrillPlan, plan_from_header
from tui.core.drill.recovery import SentOrder, find_recovery, grid
from tui.core.phases import parse_duration, parse_spike
from tui.core.verdict_settings import JudgeAt
from tui.sources.recorder import Recorder


def judged(path: Path) -> dict:
    mon, col = read_drill(str(path), CFG, judge_at=JudgeAt())
    assert col.active
    return judge_file(mon, col)["drill"]


@pytest.mark.parametrize("at", [0.0, 2.5, 4.0, 7.3, 12.0])
def test_the_time_to_recover_brackets_the_known_recovery_moment(tmp_path, at):
    # requests are slow until `at` s after the spike ended, good after: the first window at the target starts
    # within (1 - target) x window of `at`, so the interval [point - step, point] holds `at` within that margin
    d = judged(write_drill(tmp_path / "d.jsonl", plan(), recovers_at(at)))
    ttr = d["time_to_recover_s"]
    margin = (1 - CFG.target) * 2.0 + 1e-9
    assert ttr["low"] - margin <= at <= ttr["high"] + 1e-9, (at, ttr)
    assert ttr["high"] - ttr["low"] <= 1.0 + 1e-9  # the step
    assert d["verdict"] == "RECOVERED" and d["exit_code"] == 0 and d["exit"]["code"] == 0, d["reason"]


def test_later_than_the_rto_is_not_recovered(tmp_path):
    d = judged(write_drill(tmp_path / "d.jsonl", plan(rto_s=5.0), recovers_at(9.0)))
    assert d["verdict"] == "NOT_RECOVERED" and d["exit"]["code"] == 1
    assert d["time_to_recover_s"]["low"] > 5.0 and "later than the RTO" in d["reason"]


def test_a_server_that_stays_degraded_is_not_recovered(tmp_path):
    d = judged(write_drill(tmp_path / "d.jsonl", plan("fault_cmd"), fails_until(math.inf)))
    assert d["verdict"] == "NOT_RECOVERED" and d["exit"]["code"] == 1
    assert d["time_to_recover_s"] is None and d["recovery_point"] is None
    assert d["overall"]["failed"]["by_class"] == {"connect": d["overall"]["failed"]["total"]}


def test_a_baseline_that_does_not_pass_is_insufficient(tmp_path):
    p = write_drill(tmp_path / "d.jsonl", plan(), stop_after_baseline=True, baseline=lambda t: "failed")
    d = judged(p)
    assert d["verdict"] == "INSUFFICIENT" and d["exit"]["code"] == 3
    assert "no steady state to recover to" in d["reason"] and "FAIL" in d["reason"]
    assert not d["evidence_problems"]  # the stop is recorded, supported by the baseline's own records


def test_a_stop_the_baseline_does_not_support_is_named(tmp_path):
    # the drill says it stopped because its baseline did not PASS, but the baseline's records PASS: later steps cut
    p = write_drill(tmp_path / "d.jsonl", plan(), stop_after_baseline=True)
    d = judged(p)
    assert d["verdict"] == "INSUFFICIENT"
    assert any("missing unexplained" in x for x in d["evidence_problems"]), d["evidence_problems"]


def test_a_baseline_held_back_by_its_delivered_load_explains_the_stop(tmp_path):
    # the baseline's requests are all good, but the client fell behind its schedule (every tenth request sent 0.5 s
    # late: a lateness spread far beyond one arrival gap); the drill stopped there because the baseline could not
    # PASS. The reader finds the load not reached itself, so the stop is explained (no "missing unexplained"), and
    # the drill is INSUFFICIENT with that reason
    p = write_drill(tmp_path / "d.jsonl", plan(), stop_after_baseline=True,
                    baseline_late=lambda k: 0.5 if k % 10 == 9 else 0.0)
    d = judged(p)
    assert d["verdict"] == "INSUFFICIENT" and d["exit"]["code"] == 3
    assert "no steady state to recover to" in d["reason"] and "not reached" in d["reason"], d["reason"]
    assert not any("missing unexplained" in x for x in d["evidence_problems"]), d["evidence_problems"]
    assert any("not reached" in x for x in d["evidence_problems"]), d["evidence_problems"]


def test_too_little_recovery_time_is_insufficient(tmp_path):
    # the hold (20 s) from any candidate cannot end inside a 10-s recovery phase
    d = judged(write_drill(tmp_path / "d.jsonl", plan(recovery_s=10.0), recovers_at(2.0)))
    assert d["verdict"] == "INSUFFICIENT" and "too little recovery time" in d["reason"]


def test_an_interval_that_straddles_the_rto_decides_nothing(tmp_path):
    d = judged(write_drill(tmp_path / "d.jsonl", plan(rto_s=3.5), recovers_at(3.5)))
    ttr = d["time_to_recover_s"]
    assert ttr["low"] <= 3.5 < ttr["high"]
    assert d["verdict"] == "INSUFFICIENT" and "straddles the RTO" in d["reason"]


@pytest.mark.parametrize("kind", ["spike", "fault_cmd", "fault_manual"])
def test_every_request_sent_is_in_exactly_one_phase(tmp_path, kind):
    p = write_drill(tmp_path / "d.jsonl", plan(kind), fails_until(3.0) if kind != "spike" else recovers_at(3.0))
    requests = [json.loads(x) for x in p.read_text().splitlines() if '"type":"request"' in x]
    d = judged(p)
    o = d["overall"]
    assert o["sent"] == len(requests) == sum(ph["sent"] for ph in d["phases"])
    assert o["sent"] == o["good"] + o["slow"] + o["failed"]["total"] + o["excluded"] + o["unjudged"]
    for key in ("good", "slow", "cancelled", "excluded"):
        assert o[key] == sum(ph[key] for ph in d["phases"])
    assert [ph["name"] for ph in d["phases"]] == ["baseline", "disturbance", "recovery"]
    if kind == "fault_manual":
        assert d["phases"][1]["sent"] == 0 and d["phases"][1]["start"] == d["phases"][1]["end"]
    assert not d["evidence_problems"], d["evidence_problems"]


def test_impact_and_the_error_budget_share(tmp_path):
    p = plan()
    d = judged(write_drill(tmp_path / "d.jsonl", p, recovers_at(4.0)))
    imp = d["impact"]
    # from the spike's start to the recovery point: the spike's 120 requests and the recovery's first ones, all slow
    sent_before_point = 120 + round((d["recovery_point"] - d["reference"]) * p.level)
    assert imp["requests"] == sent_before_point and imp["slow"] == sent_before_point and imp["failed"] == 0
    month = 10.0 * 30 * 24 * 3600  # the baseline's rate for 30 days
    assert imp["requests_per_month"] == pytest.approx(month)
    assert imp["error_budget_share"] == pytest.approx(sent_before_point / ((1 - CFG.target) * month))


def test_rollback_rules_replayed_say_when_they_fire(tmp_path):
    # every request fails from the fault on: the ticket rule (6x burn over 6h and 30m on a 10% budget: 60% bad) fires
    # once more than 60% of the drill's ended requests are bad; the page rule cannot fire at a 90% target
    d = judged(write_drill(tmp_path / "d.jsonl", plan("fault_cmd"), fails_until(math.inf)))
    rules = {r["name"]: r for r in d["rollback"]}
    assert rules["page"]["can_fire"] is False and rules["page"]["fires"] is False
    assert rules["ticket"]["fires"] is True and rules["ticket"]["after_disturbance_s"] > 0


def test_the_window_rule_on_the_grid():
    # 10 req/s; requests sent before t=5 are slow; the window from 4 holds 10 slow of 20: below 90%; from 5: all good
    ts = [i / 10 for i in range(300)]
    codes = [1 if t < 5 else 0 for t in ts]
    sent = SentOrder(ts, [t + 0.1 for t in ts], codes)
    f = find_recovery(sent, 0.0, 30.0, 2.0, 1.0, 10.0, 20.0, CFG)
    assert f.point == 5.0 and f.ttr(1.0) == (4.0, 5.0) and f.ttr(1.0, sent) == (4.0, 5.0)
    # sends 4 s apart: nothing observed between the last before the point and the first after it
    sparse = SentOrder([0.0, 4.0, 8.0], [0.1, 4.1, 8.1], [2, 0, 0])
    assert f.ttr(1.0, sparse) == (4.0, 8.0)
    assert grid(0.0, 1.0, 0.0, 30.0, 2.0)[-1] == 28.0


def test_the_queue_back_at_its_baseline_level():
    from tui.core.drill.recovery import queue_back

    # baseline samples 0-10 s (at most 2 waiting), the fault at 10 s, the queue grows and drains to 1 at 16 s
    ts = [float(t) for t in range(0, 25)]
    waiting = [1, 2, 1, 0, 2, 1, 1, 2, 0, 1, 1, 5, 9, 12, 8, 3, 1, 2, 0, 1, 0, 0, 1, 2, 1]
    back, level, note, low = queue_back(ts, waiting, 0.0, 10.0, 10.0, 24.0)
    assert (back, level, note, low) == (6.0, 2, None, 5.0)
    # a queue that rises above its level again later: back only from its last return
    w2 = [*waiting[:20], 3, 0, 0, 0, 0]
    assert queue_back(ts, w2, 0.0, 10.0, 10.0, 24.0)[0] == 11.0
    # still above at the end: not back, said
    back, level, note, _ = queue_back(ts, [*waiting[:20], 3, 4, 5, 6, 7], 0.0, 10.0, 10.0, 24.0)
    assert back is None and level == 2 and "still above its baseline level" in (note or "")
    # no samples: unknown, said (never a number)
    back, level, note, _ = queue_back([], [], 0.0, 10.0, 10.0, 24.0)
    assert back is None and level is None and "no queue" in (note or "")
    # the metrics silent from the fault (the server down) until 33 s after it: back by 33 s, when within the gap is
    # not known (an interval, said), never "after 33 s" as if it had been seen
    ts3 = [*ts[:10], 43.0, 44.0, 45.0]
    back, level, note, low = queue_back(ts3, [*waiting[:10], 0, 1, 0], 0.0, 10.0, 10.0, 45.0)
    assert (back, low) == (33.0, 0.0) and "no server queue sample from 0 s to 33 s" in (note or ""), note
    # one sample at the fault's start, then none while the server is down: the queue is not "back" at that first
    # sample (its state in the gap is unknown), only from the first sample after the gap
    back, level, note, low = queue_back([*ts[:10], 10.0, 20.0, 21.0], [*waiting[:10], 0, 0, 0], 0.0, 10.0, 10.0, 21.0)
    assert (back, low) == (10.0, 0.0) and "from 0 s to 10 s" in (note or ""), (back, low, note)


def test_durations_and_spikes_parse():
    assert parse_duration("120s") == 120 and parse_duration("2m") == 120 and parse_duration("90") == 90
    assert parse_duration("1.5min") == 90 and parse_duration("500ms") == 0.5
    assert parse_spike("3x:60s") == (3.0, 60.0) and parse_spike("2.5x2m") == (2.5, 120.0)
    for bad in ("", "0", "-3s", "3 hours", "1e999", "nan"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    for bad in ("1x:10s", "3x", "x:10s", "3:10s"):
        with pytest.raises(ValueError):
            parse_spike(bad)


def test_the_header_block_round_trips_and_edits_are_refused():
    p = plan("fault_cmd", fault_at_s=30.0)
    hdr = {"load": {"drill": p.block()}}
    assert plan_from_header(hdr) == p
    edited = json.loads(json.dumps(hdr))
    edited["load"]["drill"]["steps"][2]["round"] = 2  # the recovery relabelled as the disturbance's step
    with pytest.raises(ValueError, match="not the steps its settings plan"):
        plan_from_header(edited)
    with pytest.raises(ValueError):
        DrillPlan(kind="spike", level=4, mode="closed", baseline_s=10, recovery_s=20, spike_factor=1.1,
                  spike_s=5).validate()  # 1.1 x 4 in flight rounds to 4: no spike


# ------------------------------------------------------------------ the property: no favourable edit unnamed

#: more favourable = a better verdict (NOT_RECOVERED < INSUFFICIENT < RECOVERED), or the same verdict with an earlier
#: recovery point or a smaller impact
RANK = {"NOT_RECOVERED": 0, "INSUFFICIENT": 1, "RECOVERED": 2}


def _records(path: Path) -> list[dict]:
    """The file's records without their digest chain fields and seal."""
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        if d.get("type") == "seal":
            continue
        d.pop("chain", None)
        out.append(d)
    return out


def _rewrite(records: list[dict], path: Path) -> Path:
    """The records written again by the real Recorder: a new digest chain and seal (an edit by someone who knows the
    format: the chain proves nothing against it, so the checks must)."""
    path.unlink(missing_ok=True)
    with Recorder(str(path), ids_unique=False, chain=True) as rec:
        for d in records:
            rec.write(d)
    return path


def _raw_edit(lines: list[str], edited: list[dict], original: list[dict], path: Path) -> Path:
    """The edit made in the file's own lines, the chain left as it was (a value edit without recomputing it): each
    record the edit changed is rewritten with its old checkpoint fields, the others keep their bytes."""
    chained = [ln for ln in lines if '"type":"seal"' not in ln]
    seal = [ln for ln in lines if '"type":"seal"' in ln]
    by_id = {id(d): i for i, d in enumerate(original)}
    out = []
    for d in edited:
        i = by_id.get(id(d))
        if i is not None:
            out.append(chained[i])
        else:  # a changed record: its new fields, the chain object it had (now wrong)
            old = json.loads(chained[d.pop("_at")])
            if "chain" in old:
                d["chain"] = old["chain"]
            out.append(json.dumps(d, separators=(",", ":")))
    path.write_text("\n".join(out + seal) + "\n")
    return path


#: edits of the threat model (issue 35): structural ones (records removed, relabelled, the end cut) with or without
#: recomputing the chain; value edits (a time, a TTFT, a setting up or down) without recomputing it
STRUCTURAL = ("drop_requests", "relabel", "drop_phase", "drop_step", "drop_tail")
VALUES = ("good_again", "phase_time", "header", "move_sent")


def _edit(rng: random.Random, recs: list[dict]) -> tuple[list[dict], str]:
    """One edit: the records after it (changed records are new dicts carrying ``_at``, their index)."""
    reqs = [i for i, d in enumerate(recs) if d.get("type") == "request"]
    phases = [i for i, d in enumerate(recs) if d.get("type") == "phase"]
    steps = [i for i, d in enumerate(recs) if d.get("type") == "step"]
    kind = rng.choice(STRUCTURAL + VALUES)
    out = list(recs)

    def change(i: int) -> dict:
        d = dict(out[i], _at=i) if out[i] is recs[i] else out[i]
        out[i] = d
        return d

    if kind == "drop_requests":  # the slow or failed requests of the disturbance removed
        bad = [i for i in reqs if recs[i]["t_first_token"] is None or recs[i]["t_first_token"] - recs[i]["t_sent"] > 1]
        gone = set(rng.sample(bad, k=min(len(bad), rng.randint(1, 60))))
        return [d for i, d in enumerate(out) if i not in gone], f"{kind} {len(gone)}"
    if kind == "relabel":  # requests given to another step
        for i in rng.sample(reqs, k=rng.randint(1, 40)):
            d = change(i)
            d["round"], d["level"] = rng.choice([1, 2]), rng.choice([10.0, 30.0])
        return out, kind
    if kind == "drop_phase":
        i = rng.choice(phases)
        return out[:i] + out[i + 1:], f"{kind} {recs[i]['name']} {recs[i]['event']}"
    if kind == "drop_step":
        i = rng.choice(steps)
        return out[:i] + out[i + 1:], f"{kind} {recs[i]['event']} {recs[i]['level']} {recs[i]['round']}"
    if kind == "drop_tail":
        cut = rng.randint(len(out) // 2, len(out) - 1)
        return out[:cut], f"{kind} at {cut} of {len(out)}"
    if kind == "good_again":  # slow requests made fast (their TTFT edited)
        for i in rng.sample(reqs, k=rng.randint(1, 80)):
            if recs[i]["t_first_token"] is not None:
                d = change(i)
                d["t_first_token"] = d["t_sent"] + 0.05
        return out, kind
    if kind == "phase_time":
        i = rng.choice(phases)
        d = change(i)
        d["t"] += rng.choice([-6.0, -2.0, 2.0, 6.0])
        return out, f"{kind} {d['name']} {d['event']}"
    if kind == "header":
        d = change(0)
        drill = json.loads(json.dumps(d["load"]["drill"]))
        key = rng.choice(["rto_s", "recovery_window_s", "step_s", "hold_s"])
        drill[key] = drill[key] * rng.choice([0.25, 0.5, 2.0, 4.0])
        d["load"] = {**d["load"], "drill": drill}
        return out, f"{kind} {key}={drill[key]}"
    for i in rng.sample(reqs, k=rng.randint(1, 40)):  # move_sent: requests' times shifted
        d = change(i)
        dt = rng.uniform(-10, 10)
        for f in ("t_sent", "t_intended", "t_first_token", "t_end"):
            if d.get(f) is not None:
                d[f] += dt
    return out, kind


def _favourable(edited: dict, honest: dict) -> bool:
    a, b = RANK[edited["verdict"]], RANK[honest["verdict"]]
    if a != b:
        return a > b
    if edited["verdict"] != "RECOVERED":
        return False
    bad = lambda d: (d["impact"].get("failed") or 0) + (d["impact"].get("slow") or 0)  # noqa: E731
    return (edited["time_to_recover_s"]["high"] < honest["time_to_recover_s"]["high"] - 1e-9
            or bad(edited) < bad(honest))


@pytest.mark.parametrize("honest_at", [4.0, 10.0])
def test_no_edit_of_a_drill_file_is_more_favourable_unless_named(tmp_path, honest_at):
    # honest: RECOVERED in 3-4 s (RTO 8 s), or NOT RECOVERED (recovers at 10 s, later than the RTO)
    src = write_drill(tmp_path / "honest.jsonl", plan(rto_s=8.0), recovers_at(honest_at))
    honest = judged(src)
    assert honest["verdict"] == ("RECOVERED" if honest_at < 8 else "NOT_RECOVERED")
    recs = _records(src)
    lines = src.read_text().splitlines()
    rng = random.Random(int(os.environ.get("DRILL_FUZZ_SEED", "39")))
    for case in range(int(os.environ.get("DRILL_FUZZ_CASES", "60"))):
        edited, what = _edit(rng, recs)
        rechain = what.split()[0] in STRUCTURAL and rng.random() < 0.5
        if rechain:
            p = _rewrite([{k: v for k, v in d.items() if k != "_at"} for d in edited], tmp_path / f"e{case}.jsonl")
        else:
            p = _raw_edit(lines, edited, recs, tmp_path / f"e{case}.jsonl")
        d = judged(p)
        assert not (_favourable(d, honest) and not d["evidence_problems"]), (
            case, what, "rechained" if rechain else "chain kept", d["verdict"], d["reason"])
