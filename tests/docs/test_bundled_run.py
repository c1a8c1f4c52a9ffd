"""What a newcomer sees on the bundled run (README "Quick start" and "The teaching case", sample_logs/README.md):
the lowest level PASSes on a full 10-minute window, a higher level FAILs on evidence, the server starts queueing at
a level the file shows, and the measured capacity sits far below the memory-only candidate (issue 25). The README's
sentences are checked against what `report` computes from the file, so neither can drift from the other."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.paths import REPO
from tui.cli import main
from tui.cli.replay import _sample_speed
from tui.core.records import read_file
from tui.samples import default_sample

BUNDLED = Path(default_sample())


def report_json(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["report", str(BUNDLED), "--json", *argv])
    return rc, json.loads(capsys.readouterr().out)


def lesson(rep: dict) -> dict:
    levels = {lv["level"]: lv for lv in rep["levels"]}
    queue_at = min((lvl for lvl, lv in levels.items() if (lv.get("max_waiting") or 0) > 0), default=None)
    return {"verdicts": {lvl: lv["verdict"] for lvl, lv in sorted(levels.items())}, "levels": levels,
            "capacity": rep["judged"]["measured_capacity"], "candidate": rep["budget_view"]["memory_only_candidate"],
            "queue_at": queue_at}


def verdict_sentence(verdicts: dict) -> str:
    """"concurrency 1 PASS, 2 PASS, 4 FAIL, ...": the form the README and sample_logs/README.md use."""
    return "concurrency " + ", ".join(f"{lvl:g} {v}" for lvl, v in verdicts.items())


def test_the_bundled_run_is_a_real_sweep_with_the_central_lesson(capsys):
    rc, rep = report_json(capsys)
    assert rep["synthetic"] is False and rep["provenance"] != "synthetic"
    les = lesson(rep)
    lowest = min(les["levels"])
    low = les["levels"][lowest]
    assert low["verdict"] == "PASS" and low["seconds"] >= 600.0  # a full 10-minute window, the defaults
    higher_fail = [lvl for lvl, v in les["verdicts"].items() if lvl > lowest and v == "FAIL"]
    assert higher_fail, les["verdicts"]
    assert les["queue_at"] is not None and les["queue_at"] > les["capacity"]  # the server starts queueing later
    assert les["candidate"] >= 4 * les["capacity"]  # far below the memory-only candidate
    assert rc == 1  # the judged (highest) level FAILs
    # the budget is the file's own budget record, not a default standing in for it
    assert rep["budget_view"]["known"] and "record" in (rep["budget_view"]["origin"] or "")


def test_the_readmes_say_what_the_file_shows(capsys):
    _, rep = report_json(capsys)
    les = lesson(rep)
    sentence = verdict_sentence(les["verdicts"])
    for doc in (REPO / "README.md", REPO / "sample_logs" / "README.md"):
        text = re.sub(r"\s+", " ", doc.read_text(encoding="utf-8"))
        assert sentence in text, f"{doc.name} does not say: {sentence}"
        assert f"measured capacity {les['capacity']:g}" in text, doc.name
        assert f"memory-only candidate {les['candidate']}" in text, doc.name
        assert f"queueing from concurrency {les['queue_at']:g}" in text, doc.name


def test_the_quick_start_plays_it_within_a_minute():
    times = [getattr(r, "t_end", None) or getattr(r, "t", None) for r in read_file(str(BUNDLED))]
    times = [t for t in times if isinstance(t, float)]
    span = max(times) - min(times)
    assert span > 1200  # a long real run: 20 minutes and more
    assert span / _sample_speed(BUNDLED) <= 45.0


def test_accept_on_the_bundled_run_measures_memory_and_queueing(tmp_path, capsys):
    rc = main(["accept", "--records", str(BUNDLED), "--out", str(tmp_path), "--gpu-hour-usd", "1.0", "--no-html"])
    doc = json.loads((tmp_path / "acceptance.json").read_text())
    md = (tmp_path / "acceptance.md").read_text()
    assert rc == 1 and doc["measured"]["state"] == "FAIL"
    assert "### Memory and queueing (measured)" in md and "requests first waited at level" in md
    mq = {x["level"]: x for x in doc["measured"]["levels"]}
    assert mq[min(mq)]["max_waiting"] == 0 and max(x["max_waiting"] or 0 for x in mq.values()) > 0
    cost = doc["cost"]
    assert cost["basis_level"] == doc["measured"]["measured_capacity"] and cost["usd_per_1m_output_tokens"] > 0
    assert "1 GPU assumed" in md


def test_accept_cost_counts_the_gpus_of_tp(tmp_path, capsys):
    main(["accept", "--records", str(BUNDLED), "--out", str(tmp_path), "--gpu-hour-usd", "2", "--tp", "4", "--no-html"])
    cost = json.loads((tmp_path / "acceptance.json").read_text())["cost"]
    assert cost["gpus"] == 4 and cost["usd_per_hour"] == 8.0 and not cost["gpus_assumed"]


def test_the_docs_do_not_say_the_bundled_replay_has_no_budget():
    """issue 37: README and docs/console.md said the bundled replay has "budget unknown" while it shows its own budget
    record (memory-only candidate 24)."""
    from tui.core.records import BudgetRecord

    assert any(isinstance(x, BudgetRecord) for x in read_file(str(default_sample())))
    readme = (REPO / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `servewatch` |"))
    assert "budget unknown" not in row and "candidate 24" in row
    console = (REPO / "docs" / "console.md").read_text()
    line = next(x for x in console.splitlines() if x.startswith("servewatch ") and "bundled" in x)
    assert "budget unknown" not in line
