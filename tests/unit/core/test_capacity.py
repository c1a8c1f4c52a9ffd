"""One capacity function: the console's sweep pane (through the snapshot), `servewatch sweep` and `accept`
agree on the same record file, and the rule itself (rounds combine per level; primary mode) holds."""

from __future__ import annotations

import json

from tui.cli import main
from tui.cli.evidence_files import analyse_file
from tui.core.budget import teaching_case
from tui.core.capacity import CapRow, measure_capacity, snapshot_rows
from tui.core.levels import judge_level, mode_tables
from tui.core.monitor import MonitorConfig
from tui.core.snapshot import FAIL, PASS
from tui.core.sweep import sweep_summary

T0 = 1_767_225_600.0


def _round(level: float, rnd: int, start: float, slow_every: int | None, n: int = 200) -> list[dict]:
    """n requests 1 s apart at ``level``, each ``level`` s long; every ``slow_every``-th one slow (TTFT 1.5 s > the
    1 s SLO)."""
    out = []
    for i in range(n):
        slow = slow_every is not None and i % slow_every == 0
        ts = start + i
        tf = ts + (1.5 if slow else 0.2)
        # each lasts ``level`` s: one sent a second keeps ``level`` in flight (the load the label claims)
        out.append({"type": "request", "id": f"{level:g}-{rnd}-{i}", "t_sent": ts, "t_first_token": tf,
                    "t_end": ts + level - 0.001, "complete": True, "error": None, "level": level, "round": rnd,
                    "phase": "measure", "output_tokens": 16})
    return out


def ramp_file(tmp_path) -> str:
    """Closed-loop ramp 1, 2, 4 in two rounds: 1 and 2 PASS in both rounds; 4 FAILs in round 1 and PASSes in
    round 2 (a later passing round must not undo the FAIL)."""
    recs = []
    t = T0
    for rnd in (1, 2):
        for level in (1.0, 2.0, 4.0):
            recs += _round(level, rnd, t, 2 if (level == 4.0 and rnd == 1) else None)
            t += 300
    header = {"type": "run", "schema_version": 1, "synthetic": True, "load": {"mode": "closed"}}
    p = tmp_path / "ramp.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [header, *recs]) + "\n")
    return str(p)


def test_pane_sweep_and_accept_agree_on_one_ramp(tmp_path):
    path = ramp_file(tmp_path)
    budget = teaching_case()
    snap = analyse_file(path, MonitorConfig(min_window_s=0), budget).snapshot()
    per_round = {(r.level, r.round): r.verdict.state for r in snap.levels}
    assert per_round == {(1.0, 1): PASS, (2.0, 1): PASS, (4.0, 1): FAIL,
                         (1.0, 2): PASS, (2.0, 2): PASS, (4.0, 2): PASS}
    # the console: the sweep pane renders Snapshot.capacity, computed by the core
    pane = snap.capacity
    assert pane is not None and pane.capacity == 2.0 and pane.has_capacity and pane.unit == "concurrency"
    assert [(s.level, s.state, s.rounds) for s in pane.tables[0].levels] == [
        (1.0, PASS, 2), (2.0, PASS, 2), (4.0, FAIL, 2)]
    assert pane.candidate == budget.candidate == 15 and pane.axis_candidate == 15
    assert "below the memory-only candidate (15): latency limits" in pane.limits[0]
    assert pane.limits[1].startswith("At concurrency 4: slow first tokens: 100 of 400 requests")
    # `servewatch sweep` (its summary, and the command on the same file through `report`-style analysis)
    s = sweep_summary(snap, budget, path)
    assert s["measured_capacity"] == 2.0 and s["exit_code"] == 0
    assert s["limits"] == [*pane.limits, *pane.notes]
    # `servewatch accept` on the same file
    out = tmp_path / "acc"
    rc = main(["accept", "--records", path, "--out", str(out), "--teaching", "--min-window-minutes", "0", "--no-html"])
    doc = json.loads((out / "acceptance.json").read_text())
    m = doc["measured"]
    assert rc == 1, "the judged level (the highest, 4) FAILs"
    assert m["measured_capacity"] == 2.0 and m["has_measured_capacity"] and m["state"] == FAIL
    assert m["capacity_vs_memory"] == list(pane.limits)
    assert [(x["level"], x["state"], x["rounds"]) for x in m["by_mode"][0]["levels"]] == [
        (1.0, PASS, 2), (2.0, PASS, 2), (4.0, FAIL, 2)]
    assert m["judged"]["measured_capacity"] == 2.0
    md = (out / "acceptance.md").read_text()
    assert "**Measured capacity:** concurrency 2" in md


def test_the_pane_shows_the_same_capacity_and_limits():
    import tempfile
    from pathlib import Path

    from tui.widgets.sweep import sweep_markup

    with tempfile.TemporaryDirectory() as d:
        path = ramp_file(Path(d))
        snap = analyse_file(path, MonitorConfig(min_window_s=0), teaching_case()).snapshot()
    text = sweep_markup(snap, 120)
    assert "measured capacity 2 " in text
    assert "measured capacity 4" not in text
    assert snap.capacity.limits[0].split(":")[0] in " ".join(text.split())


def test_capacity_rule_primary_mode_and_required_passes():
    # mixed modes: the closed-loop table decides; open-loop levels are not on its axis
    rows = [(1.0, "closed", PASS), (2.0, "closed", FAIL), (8.0, "open", PASS)]
    t = mode_tables(rows)
    assert [x.mode for x in t] == ["closed", "open"] and t[0].capacity == 1.0 and t[1].capacity == 8.0
    j = judge_level(rows)
    assert j is not None and j.level == 2.0 and j.state == FAIL and j.capacity == 1.0
    # an undecided round keeps a level from being the capacity
    assert mode_tables([(1.0, None, PASS), (2.0, None, PASS), (2.0, None, "UNDECIDED")])[0].capacity == 1.0
    # no rows: no capacity, nothing made up
    c = measure_capacity([], 15)
    assert c.capacity is None and not c.has_capacity and c.limits == () and c.axis_candidate == 15


def test_candidate_off_the_axis_is_explained():
    c = measure_capacity([], None)
    assert c.axis_candidate is None and c.axis_candidate_note == "no budget given"
    c = measure_capacity([], 0, False)
    assert c.axis_candidate is None and c.axis_candidate_note == "budget does not fit"


def test_snapshot_rows_carry_the_header_mode(tmp_path):
    snap = analyse_file(ramp_file(tmp_path), MonitorConfig(min_window_s=0)).snapshot()
    rows = snapshot_rows(snap)
    assert rows and all(isinstance(r, CapRow) and r.mode == "closed" for r in rows)
    assert snap.capacity.candidate is None and snap.capacity.axis_candidate_note == "no budget given"
