"""Delivered load from what cannot be forged cheaply, and the one duplicate rule (issue 35 finding 3 and the
duplicate rule of findings 5, and issue 36 finding 5).

Each test builds the file a reviewer might receive (tests/support/evidence_files.py, the bundled real run, an AIPerf
export), edits it the way the finding did, and judges it through the command (`servewatch report` / `compare`, in
process): the edit never makes the verdict better unless the output names what was done. Every test here fails on
1a6ea7a: the edited file PASSed (or compared NOT WORSE) there without a word."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import tests.support.evidence_files as ef
import tests.support.session_files as sf
import tui.core.evidence as evidence
from tests.support.paths import REPO
from tui.cli import main

#: how favourable an exit code is (FAIL 1 < not enough evidence 3 < PASS 0)
RANK = {1: 0, 3: 1, 0: 2}


def report(capsys, path, *extra: str) -> tuple[int, dict]:
    rc = main(["report", "--details", str(path), "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def problems(rep: dict) -> str:
    return " | ".join(rep["evidence"]["problems"])


def requests(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r["type"] == "request"]


def step_end(recs: list[dict], level: float | None = None) -> dict:
    return next(r for r in recs if r["type"] == "step" and r["event"] == "end"
                and (level is None or r["level"] == level))


def _honest_passes(capsys, tmp_path, recs) -> None:
    rc, rep = report(capsys, ef.write(tmp_path / "honest.jsonl", recs))
    assert rc == 0 and rep["evidence"]["problems"] == [], rep["evidence"]


# ---------------------------------------------------------------- finding 3: t_intended moved earlier

def _bundled_level_one() -> list[dict]:
    """The bundled real run's concurrency-1 level alone (its requests, step records, and the queue and host samples
    taken while it ran): a level that PASSes with one request in flight."""
    recs = [json.loads(line) for line in (REPO / "sample_logs" / "default.jsonl").read_text().splitlines()]
    lv1 = [r for r in recs if r.get("type") == "request" and r.get("level") == 1.0]
    t0, t1 = min(r["t_sent"] for r in lv1), max(r["t_end"] for r in lv1)
    keep = []
    for r in recs:
        t = r.get("type")
        if t == "run":
            r = dict(r, load=dict(r["load"], levels=[1.0]))
            r.pop("chain", None)  # a part of a chained file: judged unchained
            keep.append(r)
        elif (t in ("request", "step") and r.get("level") == 1.0) or (t in ("queue", "host") and t0 - 5 <= r["t"] <= t1 + 5):
            keep.append(r)
    return keep


def test_finding3_one_in_flight_relabelled_eight_with_t_intended_moved_earlier(tmp_path, capsys):
    """1a6ea7a: "mean 8.20 requests in flight (concurrency 8)", PASS, exit 0 on a level that held one request."""
    honest = _bundled_level_one()
    rc_h, rep_h = report(capsys, ef.write(tmp_path / "honest.jsonl", honest))
    assert rep_h["evidence"]["judged_level_delivered"] == "mean 1.00 requests in flight (concurrency 1)"
    forged = [dict(r) for r in honest]
    for r in forged:
        if r["type"] == "run":
            r["load"] = dict(r["load"], levels=[8.0])
        if r.get("level") == 1.0:
            r["level"] = 8.0
        if r["type"] == "request":  # each request "dispatched" 7.2 latencies before it was sent
            r["t_intended"] = r["t_sent"] - 7.2 * (r["t_end"] - r["t_sent"])
    rc, rep = report(capsys, ef.write(tmp_path / "forged.jsonl", forged))
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    text = problems(rep)
    assert "not reached: mean 1.00 requests in flight (concurrency 8), more than 20% below it" in text
    assert "the queue samples say mean 1.00 requests in flight" in text
    assert "t_intended precedes t_sent by more than the step's own send overhead p99" in text
    assert RANK[rc] <= RANK[rc_h]


@pytest.mark.parametrize("edit", ["removed", "sideways", "header only sideways"])
def test_finding3_a_run_without_a_known_loop_mode_cannot_pass(tmp_path, capsys, edit):
    """1a6ea7a: removing the loop mode (or writing "sideways") skipped the delivered-load check: PASS."""
    honest = ef.honest_closed(level=4, idle=6.0)  # labelled 4, one request in flight on average: not reached
    rc_h, rep_h = report(capsys, ef.write(tmp_path / "honest.jsonl", honest))
    assert rc_h == 3 and "not reached" in problems(rep_h)
    for r in honest:
        if r["type"] == "run":
            if edit == "removed":
                r["load"].pop("mode")
            else:
                r["load"]["mode"] = "sideways"
        elif r["type"] == "step" and edit != "header only sideways":
            r.pop("mode")
    rc, rep = report(capsys, ef.write(tmp_path / "nomode.jsonl", honest))
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "UNDECIDED"
    said = "names no loop mode" if edit == "removed" else "names loop mode 'sideways'"
    assert said in problems(rep) and "the delivered load cannot be checked" in problems(rep)


def test_a_step_mode_that_contradicts_the_header_cannot_pass(tmp_path, capsys):
    recs = ef.honest_closed()
    _honest_passes(capsys, tmp_path, recs)
    for r in recs:
        if r["type"] == "step":
            r["mode"] = "open"
    rc, rep = report(capsys, ef.write(tmp_path / "mixed.jsonl", recs))
    assert rc == 3 and "the step record says 'open' loop, the run header 'closed'" in problems(rep)


def test_more_in_flight_than_the_label_is_named(tmp_path, capsys):
    """Every request copied under a new id a quarter second later (the step record's counts edited to match): twice
    the requests in flight of a closed loop of 4, which no honest closed loop can hold."""
    recs = ef.honest_closed(level=4)
    _honest_passes(capsys, tmp_path, recs)
    copies = []
    for r in requests(recs):
        c = dict(r, id=r["id"] + "-b")
        for k in ("t_intended", "t_sent", "t_first_token", "t_end"):
            c[k] = r[k] + 0.25
        copies.append(c)
    end = step_end(recs)
    end["requests"] *= 2
    end["completed"] *= 2
    rc, rep = report(capsys, ef.write(tmp_path / "twice.jsonl", recs[:-1] + copies + [end]))
    assert rc == 3 and "more in flight than the label: mean 8.00 requests in flight (concurrency 4)" in problems(rep)


def test_records_compressed_in_time_break_littles_law_with_the_steps_clock(tmp_path, capsys):
    """A concurrency-4 run of 44 minutes squeezed into 11 (each request keeps its latency, sent 4x sooner) and
    labelled 16: the intervals now overlap 16 deep, but the step's own clock says 44 minutes."""
    recs = ef.honest_closed(level=4, seconds=2640.0)
    t0 = ef.T0 + 1.0
    for r in recs:
        if r.get("level") == 4:
            r["level"] = 16
        if r["type"] == "run":
            r["load"]["levels"] = [16]
        if r["type"] == "request":
            shift = (r["t_sent"] - t0) * 0.75
            for k in ("t_intended", "t_sent", "t_first_token", "t_end"):
                if r[k] is not None:
                    r[k] -= shift
    rc, rep = report(capsys, ef.write(tmp_path / "squeezed.jsonl", recs))
    assert rep["evidence"]["judged_level_delivered"] == "mean 16.00 requests in flight (concurrency 16)"  # 16 deep ...
    assert rc == 3 and "Little's law broken: the step's" in problems(rep)  # ... the step's clock does not
    # the step's duration edited too: the queue samples the run took (4 in flight every 2 s) still say 4
    end = step_end(recs)
    reqs = requests(recs)
    end["duration_s"] = round(max(r["t_end"] for r in reqs) - min(r["t_sent"] for r in reqs), 3)
    queue = [{"type": "queue", "t": t0 + 2.0 * k, "source": "client", "client_in_flight": 4} for k in range(1320)]
    rc, rep = report(capsys, ef.write(tmp_path / "squeezed2.jsonl", recs[:1] + queue + recs[1:]))
    assert "the records hold" not in problems(rep)  # the step's clock now agrees with the records ...
    assert "but the queue samples say 4.00 in flight over the step" in problems(rep)  # ... its queue samples do not
    assert rc == 3 and "the queue samples say mean 4.00 requests in flight" in problems(rep)
    assert "more than 20% below concurrency 16" in problems(rep)


def test_t_intended_after_t_sent_is_named(tmp_path, capsys):
    recs = ef.honest_closed()
    for r in requests(recs):
        r["t_intended"] = r["t_sent"] + 0.5
    rc, rep = report(capsys, ef.write(tmp_path / "after.jsonl", recs))
    assert rc == 3 and "t_intended after t_sent on" in problems(rep)


def test_open_loop_lateness_hidden_by_moving_t_intended_later(tmp_path, capsys):
    """Open loop: every request sent 5 s late (not reached); t_intended rewritten to t_sent hides it from the records,
    not from the step record's own lateness p99 (1a6ea7a: PASS); the step's p99 removed too: named."""
    recs = ef.honest_open(late=5.0)
    rc_h, _ = report(capsys, ef.write(tmp_path / "late.jsonl", recs))
    assert rc_h == 3
    for r in requests(recs):
        r["t_intended"] = r["t_sent"]
    rc, rep = report(capsys, ef.write(tmp_path / "hidden.jsonl", recs))
    assert rc == 3 and "dispatch lateness p99 5000 ms exceeds 1000 ms" in problems(rep)
    assert "the records' dispatch lateness p99 0.0 ms is below the 5000.0 ms the step recorded" in problems(rep)
    step_end(recs).pop("lateness_p99_ms")
    rc, rep = report(capsys, ef.write(tmp_path / "hidden2.jsonl", recs))
    assert rc == 3 and "the step record carries no dispatch lateness p99" in problems(rep)


def test_sessions_lengthened_by_moving_their_first_dispatch_earlier(tmp_path, capsys):
    """Closed-loop sessions, 2 loops at a level of 4 (not reached); each first turn's t_intended moved a session's
    length earlier doubled the sessions in flight on 1a6ea7a (PASS). Sessions now start at their first t_sent."""
    recs = sf.closed_sessions(4, loops=2)
    rc_h, _ = report(capsys, ef.write(tmp_path / "half.jsonl", recs))
    assert rc_h == 3
    for r in requests(recs):
        if r["turn"] == 1:
            r["t_intended"] = r["t_sent"] - 8.0
    rc, rep = report(capsys, ef.write(tmp_path / "longer.jsonl", recs))
    assert rc == 3 and rep["evidence"]["judged_level_not_reached"].startswith("not reached: mean 2.0")


# ---------------------------------------------------------------- the one duplicate rule

def test_identical_times_under_new_ids_are_counted_once_and_named(tmp_path, capsys):
    recs = ef.honest_closed(level=4)
    _honest_passes(capsys, tmp_path, recs)
    n = len(requests(recs))
    copies = [dict(r, id=r["id"] + "-copy") for r in requests(recs)]
    rc, rep = report(capsys, ef.write(tmp_path / "copied.jsonl", recs + copies))
    assert rep["requests_total"] == n and rep["input_problems"]["duplicate_request_ids"] == n
    assert rep["evidence"]["judged_level_delivered"] == "mean 4.00 requests in flight (concurrency 4)"
    assert rc == 3 and f"{n:,} duplicates of {n:,} requests" in problems(rep)
    assert "send, first-token and end times of an earlier request under another id" in problems(rep)


def test_one_request_copied_5000_times_counts_once_in_report_and_compare(tmp_path, capsys):
    """1a6ea7a: report counted it once (and said nothing that forbids PASS), compare counted n = 5000."""
    base = ef.write(tmp_path / "base.jsonl", ef.another_run(ef.honest_closed(level=4), seed=1))  # another run
    recs = ef.honest_closed(level=4)
    one = requests(recs)[10]
    cand = ef.write(tmp_path / "cand.jsonl", recs + [dict(one) for _ in range(5000)])
    rc, rep = report(capsys, cand)
    assert rc == 3 and "5,000 duplicates of 1 request (5,000 with a request id seen before)" in problems(rep)
    n = len(requests(recs))
    rc = main(["compare", str(base), str(cand), "--json"])
    doc = json.loads(capsys.readouterr().out)
    row = doc["levels"][0]
    assert row["cand"]["n"] == n == row["base"]["n"]  # counted once, as report counts it
    assert doc["candidate"]["duplicates"] == 5000
    assert rc == 3 and doc["verdict"] == "NOT ENOUGH EVIDENCE"
    assert "candidate: 5,000 duplicates of 1 request" in row["reason"]


def test_compare_applies_the_rule_to_requests_it_is_given():
    """compare's own counting (``level_stats``: what the replay's baseline pane and any caller use) applies the
    same rule: a list holding one request 5,000 times counts it once."""
    from tui.core.compare import compare, level_stats
    from tui.core.records import parse_object

    recs = requests(ef.honest_closed(level=4))
    rr = [parse_object(r) for r in recs]
    one = rr[10]
    dups = evidence.Duplicates()
    lv = level_stats(rr + [one] * 5000, 1.0, dups=dups)
    assert lv[4].n == len(rr) and dups.copies == 5000 and dups.originals == 1
    hdr = ef.header("closed", (4,))
    doc = compare({"label": "b", "header": hdr, "requests": rr}, {"label": "c", "header": hdr,
                  "requests": rr + [one] * 5000}, slo_ttft_ms=1000.0)
    assert doc["verdict"] == "NOT ENOUGH EVIDENCE" and doc["candidate"]["duplicates"] == 5000
    assert doc["levels"][0]["cand"]["n"] == len(rr)


def _aiperf_line(i: int, start_ns: int, *, rid: str) -> dict:
    ttft_ms, lat_ms = 180.0 + (i % 7), 1900.0 + (i % 11)
    return {"metadata": {"session_num": i, "x_request_id": rid, "request_start_ns": start_ns,
                         "request_end_ns": start_ns + int(lat_ms * 1e6), "benchmark_phase": "profiling",
                         "was_cancelled": False},
            "metrics": {"time_to_first_token": {"value": ttft_ms, "unit": "ms"},
                        "request_latency": {"value": lat_ms - 1.0, "unit": "ms"},
                        "output_sequence_length": {"value": 32, "unit": "tokens"},
                        "input_sequence_length": {"value": 64, "unit": "tokens"}}}


def _aiperf_files(folder: Path, doubled: bool) -> Path:
    """An AIPerf export at concurrency 1 (its summary beside it says so): 330 requests back to back, 11 minutes."""
    folder.mkdir()
    start = 1_796_075_646_000_000_000
    lines = []
    for i in range(330):
        line = _aiperf_line(i, start, rid=f"req-{i:04d}")
        lines.append(line)
        if doubled:  # the same record again under a new id
            lines.append(json.loads(json.dumps(line)) | {"metadata": line["metadata"] | {"x_request_id": f"dup-{i:04d}"}})
        start = line["metadata"]["request_end_ns"] + 2_000_000
    path = folder / "profile_export.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "profile_export_aiperf.json").write_text(json.dumps(  # its own counts too (the import holds them)
        {"aiperf_version": "0.13.0", "input_config": {"phases": [{"name": "profiling", "kind": "profiling",
                                                                  "type": "concurrency", "concurrency": 1}]},
         "request_count": {"unit": "requests", "avg": 330}, "error_request_count": {"unit": "requests", "avg": 0}}))
    return path


def test_finding5_aiperf_records_written_twice_under_new_ids(tmp_path, capsys):
    """1a6ea7a: PASS, "mean 2.00 requests in flight (concurrency 1)", not flagged."""
    rc_h, rep_h = report(capsys, _aiperf_files(tmp_path / "honest", doubled=False))
    assert rc_h == 0 and rep_h["evidence"]["problems"] == []
    rc, rep = report(capsys, _aiperf_files(tmp_path / "doubled", doubled=True))
    assert rep["requests_total"] == rep_h["requests_total"] == 330
    assert rep["evidence"]["judged_level_delivered"] == "mean 1.00 requests in flight (concurrency 1)"
    assert rc == 3 and "330 duplicates of 330 requests" in problems(rep)


def test_without_a_time_axis_equal_times_are_not_duplicates(tmp_path, capsys):
    """LLMPerf keeps no start times: every request at one instant, its other times derived from latencies rounded
    to the millisecond, so two requests with equal latencies are not copies; the file gets no verdict and no
    delivered-load figure made of that instant."""
    rows = [{"error_code": None, "error_msg": "", "ttft_s": 0.35, "end_to_end_latency_s": 1.2, "inter_token_latency_s": 0.02,
             "request_output_throughput_token_per_s": 26.0, "number_input_tokens": 128, "number_output_tokens": 32}
            for _ in range(6)]
    path = tmp_path / "x_individual_responses.json"
    path.write_text(json.dumps(rows))
    rc, rep = report(capsys, path)
    assert rep["requests_total"] == 6 and rep["input_problems"]["duplicate_request_ids"] == 0
    assert "duplicates" not in problems(rep)
    assert rc == 3 and rep["measured"]["verdict"]["state"] == "INSUFFICIENT_WINDOW"


def test_the_duplicate_rule_is_one_rule():
    dups = evidence.Duplicates()
    assert dups.check("a", 1.0, 1.1, 2.0) == evidence.FIRST
    assert dups.check("a", 5.0, 5.1, 6.0) == evidence.SAME_ID
    assert dups.check("b", 1.0, 1.1, 2.0) == evidence.SAME_TIMES
    assert dups.check("c", 1.0, None, 2.0) == evidence.FIRST  # not the same times
    assert dups.problem() == ("2 duplicates of 2 requests (1 with a request id seen before; 1 with the send, "
                              "first-token and end times of an earlier request under another id): each counted "
                              "once; a file holding copies is not evidence of the load it claims")
    untimed = evidence.Duplicates(times=False)
    assert untimed.check("a", 0.0, 0.3, 1.0) == untimed.check("b", 0.0, 0.3, 1.0) == evidence.FIRST


# ---------------------------------------------------------------- the property, over the family

def _edits(rng: random.Random, recs: list[dict]) -> tuple[list[dict], list[str]]:
    """1-3 edits drawn from the family of finding 3 and the duplicate rule (the forger's recipes among them: each
    t_intended moved earlier by some latencies, the good records copied); returns the records and what was done."""
    recs = [json.loads(json.dumps(r)) for r in recs]
    done = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choices(["shift_intended", "fill", "relabel_up", "drop", "duplicate", "copy_new_id",
                            "copy_shifted", "mode"], weights=[3, 3, 1, 1, 1, 1, 1, 2])[0]
        reqs = [i for i, r in enumerate(recs) if r["type"] == "request"]
        if kind == "shift_intended":
            by = rng.choice([-1, 1]) * rng.uniform(0.001, 30.0)
            share = rng.choice([0.01, 0.3, 1.0])
            for i in reqs:
                if rng.random() < share:
                    recs[i]["t_intended"] += by
            done.append(f"t_intended {by:+.3f} s on {share:.0%}")
        elif kind == "fill":  # finding 3's recipe: each request "dispatched" k latencies before it was sent
            k = rng.choice([1, 3, 7])
            for i in reqs:
                r = recs[i]
                r["t_intended"] = r["t_sent"] - k * (r["t_end"] - r["t_sent"])
            done.append(f"t_intended {k} latencies earlier")
        elif kind == "relabel_up":
            k = rng.choice([2, 4, 8])
            for r in recs:
                if r["type"] in ("request", "step") and r.get("level") is not None:
                    r["level"] = r["level"] * k
                elif r["type"] == "run":
                    r["load"]["levels"] = [lv * k for lv in r["load"]["levels"]]
            done.append(f"levels x{k}")
        elif kind == "drop":
            gone = set(rng.sample(reqs, k=max(1, len(reqs) // rng.choice([2, 10, 100]))))
            recs = [r for i, r in enumerate(recs) if i not in gone]
            done.append(f"dropped {len(gone)}")
        elif kind in ("duplicate", "copy_new_id", "copy_shifted"):
            good = [i for i in reqs if recs[i]["complete"]]  # copies of the good ones help a forger most
            picked = rng.sample(good, k=max(1, len(good) // rng.choice([1, 5, 50])))
            extra = []
            for i in picked:
                c = dict(recs[i])
                if kind != "duplicate":
                    c["id"] = f"{c['id']}-n{len(extra)}"
                if kind == "copy_shifted":
                    d = rng.uniform(0.01, 1.0)
                    for key in ("t_intended", "t_sent", "t_first_token", "t_end"):
                        if c[key] is not None:
                            c[key] += d
                extra.append(c)
            at = rng.randrange(1, len(recs))
            recs = recs[:at] + extra + recs[at:]
            done.append(f"{kind} x{len(extra)}")
        else:
            how = rng.choice(["remove", "sideways", "flip"])
            for r in recs:
                if r["type"] == "run":
                    if how == "remove":
                        r["load"].pop("mode", None)
                    elif how == "sideways":
                        r["load"]["mode"] = "sideways"
                    else:
                        r["load"]["mode"] = "open" if r["load"].get("mode") == "closed" else "closed"
                elif r["type"] == "step" and how != "flip":
                    r.pop("mode", None)
            done.append(f"mode {how}")
    return recs, done


HONEST = {  # a PASS, a FAIL, and levels not reached (UNDECIDED) that an edit could lift to PASS
    "closed pass": lambda: ef.honest_closed(level=2, seconds=660.0),
    "closed fail": lambda: ef.honest_closed(level=2, seconds=660.0, fail=lambda i: i % 5 == 0),
    "closed not reached": lambda: ef.honest_closed(level=4, seconds=660.0, idle=4.0),
    "open not reached": lambda: ef.honest_open(rate=1.0, seconds=660.0, late=3.0),
    "sessions not reached": lambda: sf.closed_sessions(4, loops=2, seed=3),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_no_edit_of_the_family_improves_the_verdict_unseen(tmp_path, capsys, name):
    """Seeded: the verdict of an edited file is never more favourable than the honest one's unless the report names
    a problem (an evidence problem, or duplicates)."""
    honest = HONEST[name]()
    rc_h, _ = report(capsys, ef.write(tmp_path / "honest.jsonl", honest))
    rng = random.Random(f"delivered-{name}")
    for case in range(6):
        recs, done = _edits(rng, honest)
        rc, rep = report(capsys, ef.write(tmp_path / f"edit{case}.jsonl", recs))
        named = bool(rep["evidence"]["problems"]) or rep["input_problems"]["duplicate_request_ids"] > 0
        assert rc != 70
        assert RANK[rc] <= RANK[rc_h] or named, (name, case, done, rc, rep["evidence"])


def _reference(recs) -> list[int]:
    """The rule written the obvious way: what each record is."""
    ids, times, out = set(), set(), []
    for r in recs:
        key = (r.t_sent, r.t_first_token, r.t_end)
        if r.id in ids:
            out.append(evidence.SAME_ID)
        elif key in times:
            out.append(evidence.SAME_TIMES)
        else:
            ids.add(r.id)
            times.add(key)
            out.append(evidence.FIRST)
    return out


@pytest.mark.parametrize("order", ["sent", "end", "shuffled", "shuffled long", "each copy next, long"])
def test_the_monitors_inlined_rule_is_the_rule(order):
    """The Monitor inlines ``Duplicates.check`` on its hot path (a file in send order, in end order, in no order, and
    one long enough in no order to switch to hashes): it counts exactly what the rule and the obvious reference do."""
    from tui.core.monitor import Monitor, MonitorConfig
    from tui.core.records import RequestRecord

    rng = random.Random(order)
    n = 3000 if "long" in order else 400
    base = []
    for i in range(n):
        t = ef.T0 + i * 0.5 + rng.random() * 0.1
        first = None if i % 9 == 0 else t + 0.2
        base.append(RequestRecord(id=f"r{i}", t_sent=t, t_end=t + 0.5 + rng.random() * 3, complete=first is not None,
                                  t_intended=t, t_first_token=first, level=1.0, round=1))
    copies = []
    if order == "each copy next, long":  # every record followed by its copy (another id, the same times): the rule
        # turns to hashes on a copy, and the records after it must be found by hash (an import in completion order)
        recs = [x for r in sorted(base, key=lambda r: r.t_end) for x in (r, RequestRecord(
            id=r.id + "-c", t_sent=r.t_sent, t_end=r.t_end, complete=r.complete, t_intended=r.t_intended,
            t_first_token=r.t_first_token, level=1.0, round=1))]
        copies = recs[1::2]
    for r in ([] if copies else rng.sample(base, n // 10)):  # by id (other times), by times (another id), and both
        how = rng.randrange(3)
        c = RequestRecord(id=r.id if how != 1 else r.id + "-c", t_sent=r.t_sent + (0.01 if how == 0 else 0.0),
                          t_end=r.t_end, complete=r.complete, t_intended=r.t_intended, t_first_token=r.t_first_token,
                          level=1.0, round=1)
        copies.append(c)
    recs = recs if order == "each copy next, long" else base + copies
    if order == "sent":
        recs.sort(key=lambda r: r.t_sent)
    elif order == "end":
        recs.sort(key=lambda r: r.t_end)
    elif order != "each copy next, long":
        rng.shuffle(recs)
    want = _reference(recs)
    dups = evidence.Duplicates()
    assert [dups.check(r.id, r.t_sent, r.t_first_token, r.t_end) for r in recs] == want
    assert dups.hashed == ("long" in order)
    mon = Monitor(MonitorConfig())
    i = 0
    while i < len(recs):  # blocks of any size, as the readers give them
        k = rng.randint(1, 200)
        mon.add_many(recs[i:i + k])
        i += k
    md = mon._dups
    assert md is not None and md.hashed == dups.hashed
    assert mon.requests_total == want.count(evidence.FIRST)
    assert (mon.duplicates, md.by_id, md.by_times) == (dups.copies, dups.by_id, dups.by_times)
    assert md.problem() == dups.problem() and dups.copies == len(copies)
