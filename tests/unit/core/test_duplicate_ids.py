"""A request id seen again is an input problem: counted and shown, never counted twice.

Found by trying to make the verdict lie: 30 good requests, each repeated ten times in the file, reached PASS
on 300 "measured requests"."""

from __future__ import annotations

import json

from tui.cli import main
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import RequestRecord

T0 = 1_767_225_600.0


def _req(i: int, t: float) -> dict:
    return {"type": "request", "id": f"r{i}", "t_sent": t, "t_first_token": t + 0.2, "t_end": t + 1.0,
            "complete": True, "output_tokens": 10, "level": 1, "round": 1, "phase": "measure"}


def _write(path, reqs) -> str:
    lines = [json.dumps({"type": "run", "schema_version": 1, "synthetic": True, "started_at": T0})]
    lines += [json.dumps(r) for r in reqs]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_repeated_requests_do_not_reach_pass(tmp_path, capsys):
    unique = [_req(i, T0 + i * 40.0) for i in range(30)]  # 30 requests over 20 minutes
    repeated = [r for r in unique for _ in range(10)]
    path = _write(tmp_path / "dup.jsonl", repeated)
    rc = main(["report", "--details", path, "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["input_problems"]["duplicate_request_ids"] == 270
    assert rep["requests_total"] == 30
    assert rep["measured"]["verdict"]["state"] != "PASS" and rc != 0
    assert any("'r0' appears again" in e for e in rep["input_problems"]["examples"])
    # the same 300 requests with distinct ids are enough for PASS: the duplicates are what changed the answer
    distinct = [dict(r, id=f"{r['id']}-{k}", t_sent=r["t_sent"] + k * 4.0, t_first_token=r["t_first_token"] + k * 4.0,
                     t_end=r["t_end"] + k * 4.0) for r in unique for k in range(10)]
    assert main(["report", "--details", _write(tmp_path / "distinct.jsonl", distinct)]) == 3  # PASS; SYNTHETIC never exits 0
    out = capsys.readouterr().out
    assert "verdict=PASS" in out


def test_the_report_text_names_the_repeated_ids(tmp_path, capsys):
    reqs = [_req(i, T0 + i) for i in range(5)]
    main(["report", "--details", _write(tmp_path / "d.jsonl", reqs + reqs[:2])])
    out = capsys.readouterr().out
    assert "2 repeated request ids (counted once)" in out and "request id 'r0' appears again" in out


def test_the_check_can_be_turned_off_for_unique_by_construction_sources():
    on, off = Monitor(MonitorConfig()), Monitor(MonitorConfig(check_duplicate_ids=False))
    r = RequestRecord(id="a", t_sent=T0, t_end=T0 + 1, complete=True, t_intended=T0, t_first_token=T0 + 0.1,
                      output_tokens=1, level=1, round=1, phase="measure")
    for m in (on, off):
        m.add(r)
        m.add(r)
    assert on.snapshot().requests_total == 1 and on.snapshot().duplicates == 1
    assert off.snapshot().requests_total == 2
