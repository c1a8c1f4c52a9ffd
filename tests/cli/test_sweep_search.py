"""`servewatch sweep --search` end to end at compressed time, against a real queueing system whose capacity is known
(tests/support/virtual_slots.py: fixed slots, fixed service time, FIFO), through the real CLI, load generator,
record file and report (tests/support/virtual_server.py: the event loop's clock jumps to the next timer)."""

from __future__ import annotations

import json

import pytest

from tests.support.virtual_server import patched_for_virtual_time
from tests.support.virtual_slots import VirtualSlotServer


def _sweep(argv: list[str], server, monkeypatch, tmp_path, capsys) -> tuple[int, str, dict]:
    from tui.cli import build_parser

    monkeypatch.chdir(tmp_path)
    patched_for_virtual_time(monkeypatch, server)
    args = build_parser().parse_args(["sweep", "--url", "http://127.0.0.1:9", "--record", "rec.jsonl",
                                      "--sweep-json", "sweep.json", *argv])
    code = args.func(args)
    out = capsys.readouterr().out
    return code, out, json.loads((tmp_path / "sweep.json").read_text())


def _steps(tmp_path) -> list[dict]:
    out = []
    for line in (tmp_path / "rec.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d.get("type") == "step" and d.get("event") == "end":
            out.append(d)
    return out


def test_open_loop_search_brackets_the_known_capacity(monkeypatch, tmp_path, capsys):
    server = VirtualSlotServer(slots=3, service_s=0.37)  # capacity 8.11 req/s
    code, out, s = _sweep(["--rate", "1,2,4,8,16", "--arrival", "constant", "--search", "--precision", "10%",
                           "--min-window-minutes", "2"], server, monkeypatch, tmp_path, capsys)
    b = s["capacity_bracket"]
    assert code == 0, out[-3000:]
    assert b["unit"] == "req/s" and b["stopped_by"] == "precision", b
    assert b["low"] <= server.capacity_rps < b["high"], b
    assert (b["high"] - b["low"]) / b["low"] <= 0.1
    assert b["low_evidence"]["verdict"] == "PASS" and b["high_evidence"]["verdict"] != "PASS"
    assert b["low_evidence"]["n"] > 0 and b["high_evidence"]["n"] > 0
    probes = [p["level"] for p in b["probes"]]
    assert probes and all(1 < lv < 16 for lv in probes)
    # the probes are steps of the same record file, marked as probes; the ladder's are not
    steps = _steps(tmp_path)
    assert sorted(d["level"] for d in steps if d.get("search_probe")) == sorted(probes)
    assert {d["level"] for d in steps if not d.get("search_probe")} <= {1.0, 2.0, 4.0, 8.0, 16.0}
    assert "capacity bracket: req/s" in out and "search probe 1" in out
    # the probe levels are levels of the file for every reader
    assert {lv for lv in probes} <= {r["level"] for r in s["levels"]}
    assert {r["level"] for r in s["levels"] if r.get("search_probe")} == set(probes)
    # `report` and `accept` read the same file back: the same bracket, the probes as levels
    from tui.cli import main

    assert main(["report", "--details", "rec.jsonl", "--json", "--min-window-minutes", "2"]) == 1  # judged: the top level, 16
    rep = json.loads(capsys.readouterr().out)
    assert (rep["capacity_bracket"]["low"], rep["capacity_bracket"]["high"]) == (b["low"], b["high"])
    assert set(probes) <= {r["level"] for r in rep["levels"]}
    main(["report", "--details", "rec.jsonl", "--min-window-minutes", "2"])
    assert f"capacity bracket: req/s {b['low']:g} to {b['high']:g}" in capsys.readouterr().out
    main(["accept", "--records", "rec.jsonl", "--min-window-minutes", "2", "--out", "acc", "--no-html"])
    capsys.readouterr()
    doc = json.loads((tmp_path / "acc" / "acceptance.json").read_text())
    [ab] = doc["measured"]["capacity_brackets"]
    assert (ab["low"], ab["high"]) == (b["low"], b["high"])
    assert f"capacity bracket: req/s {b['low']:g} to {b['high']:g}" in (tmp_path / "acc" / "acceptance.md").read_text()


def test_closed_loop_search_brackets_the_known_concurrency(monkeypatch, tmp_path, capsys):
    server = VirtualSlotServer(slots=1, service_s=0.1)  # every request waits (c - 1) x 0.1 s: <= 0.55 s up to c = 6
    cap = server.closed_capacity(0.55)
    assert cap == 6
    code, out, s = _sweep(["--concurrency", "1,2,4,8,16", "--search", "--slo-ttft-ms", "550",
                           "--min-window-minutes", "1"], server, monkeypatch, tmp_path, capsys)
    b = s["capacity_bracket"]
    assert b["unit"] == "concurrency" and b["stopped_by"] == "precision", (b, out[-3000:])
    assert (b["low"], b["high"]) == (6.0, 7.0), b
    assert all(float(p["level"]).is_integer() for p in b["probes"])


def test_no_fail_in_the_ladder_means_no_search_and_says_the_capacity_is_above_the_top(monkeypatch, tmp_path,
                                                                                      capsys):
    server = VirtualSlotServer(slots=8, service_s=0.1)  # 80 req/s: the ladder never reaches it
    code, out, s = _sweep(["--rate", "1,2", "--arrival", "constant", "--search", "--min-window-minutes", "1"],
                          server, monkeypatch, tmp_path, capsys)
    b = s["capacity_bracket"]
    assert code == 0
    assert b["low"] is None and b["high"] is None and b["probes"] == [] and b["stopped_by"] == "no_fail"
    assert "above the top level" in out and "no search" in out


def test_the_budget_stops_the_search(monkeypatch, tmp_path, capsys):
    # probes capped at 200 s, a 5-min budget: a probe is started only while the probes so far plus 200 s fit
    server = VirtualSlotServer(slots=3, service_s=0.37)
    code, out, s = _sweep(["--rate", "1,4,16", "--arrival", "constant", "--search", "--precision", "0.01",
                           "--search-budget-minutes", "5", "--max-step-seconds", "200", "--min-window-minutes", "1"],
                          server, monkeypatch, tmp_path, capsys)
    b = s["capacity_bracket"]
    assert b["stopped_by"] == "budget", b
    assert b["probes"] and all(p["seconds"] <= 200 + 1 for p in b["probes"])
    assert b["search_seconds"] <= 300 < b["search_seconds"] + 200  # it stopped because the next could run past
    assert b["low"] <= server.capacity_rps < b["high"]


@pytest.mark.parametrize("bad", ["0", "150%", "x"])
def test_a_bad_precision_is_a_usage_error(bad, capsys):
    from tui.cli import main

    assert main(["sweep", "--url", "http://127.0.0.1:9", "--search", "--precision", bad]) == 2
    err = capsys.readouterr().err
    assert "--precision" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_search_bounds_without_search_are_a_usage_error(capsys):
    from tui.cli import main

    assert main(["sweep", "--url", "http://127.0.0.1:9", "--precision", "5%"]) == 2
    assert "give --search" in capsys.readouterr().err
