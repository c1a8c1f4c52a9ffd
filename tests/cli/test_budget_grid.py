"""issue 40: `servewatch budget` with lists (the screening table) end to end: exit codes, --csv, --json, --out-dir,
--gpu names, --max-candidates, and comma lists refused by every other command."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest

from tests.support.paths import REPO
from tui.cli import main
from tui.core.screen import JSON_KEYS

GEMMA = str(REPO / "tests" / "configs" / "gemma-3-270m.json")
LLAMA = str(REPO / "tests" / "configs" / "llama-3-8b.json")
QWEN = str(REPO / "tests" / "configs" / "qwen2-7b.json")
SEED = str(REPO / "sample_logs" / "seed.jsonl")


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_the_teaching_grid_shows_15_and_7_and_exits_0():
    rc, out, err = run_cli(["budget", "--gpu-gib", "24", "--max-seq", "4096,8192"])
    assert rc == 0 and err == ""
    assert "Screening table: 2 candidates, 2 fit" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("  yes")]
    assert [ln.split()[-3] for ln in lines] == ["15", "7"]  # the candidate column, in order


def test_a_grid_where_nothing_fits_exits_1_and_says_why():
    rc, out, _ = run_cli(["budget", "--config", LLAMA, "--gpu-gib", "8,12", "--max-seq", "4096"])
    assert rc == 1
    assert out.count("weights alone exceed") == 2


def test_json_has_a_candidates_list_with_exactly_the_issues_keys():
    rc, out, _ = run_cli(["budget", "--config", LLAMA, "--config", QWEN, "--weights", "bf16,awq", "--tp", "1,3",
                          "--gpu", "L4,H100-SXM", "--json"])
    doc = json.loads(out)
    assert rc == 0 and doc["total"] == 16 and len(doc["candidates"]) == 16
    assert all(list(r) == list(JSON_KEYS) for r in doc["candidates"])
    tp3 = [r for r in doc["candidates"] if r["tp"] == 3]
    assert len(tp3) == 8 and not any(r["fits"] for r in tp3)
    assert all(r["reason"].startswith("TP does not divide the KV heads") for r in tp3)
    assert {r["device"] for r in doc["candidates"]} == {"L4-24GB", "H100-SXM-80GB"}
    assert doc["matched"] == ["--gpu L4: L4-24GB", "--gpu H100-SXM: H100-SXM-80GB"]


def test_csv_prints_only_the_csv():
    rc, out, err = run_cli(["budget", "--config", GEMMA, "--weights", "q4_k_m", "--max-seq", "2048,4096",
                            "--gpu-gib", "4", "--csv"])
    assert rc == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 and out.startswith("id,model,weights,kv_dtype,max_seq,tp,device,memory_gib,fits,reason")
    assert {r["max_seq"] for r in rows} == {"2048", "4096"}


def test_out_dir_writes_one_budget_per_fitting_row_that_budget_reloads(tmp_path):
    d = tmp_path / "budgets"
    rc, out, _ = run_cli(["budget", "--gpu-gib", "24", "--max-seq", "4096,65536", "--out-dir", str(d), "--json"])
    doc = json.loads(out)
    fitting = [r["id"] for r in doc["candidates"] if r["fits"]]
    assert rc == 0 and len(fitting) == 1
    assert sorted(p.name for p in d.iterdir()) == [f"{fitting[0]}.json"]
    rc2, out2, _ = run_cli(["budget", "--budget", str(d / f"{fitting[0]}.json"), "--json"])
    assert rc2 == 0 and json.loads(out2)["results"]["candidate"] == 15


def test_device_names_match_by_prefix_and_an_ambiguous_one_is_refused_with_the_matches():
    rc, out, _ = run_cli(["budget", "--params", "8B", "--gpu", "l4,rtx4090"])
    assert rc == 0 and "L4-24GB" in out and "RTX4090-24GB" in out
    rc, _, err = run_cli(["budget", "--params", "8B", "--gpu", "A100"])
    assert rc == 2 and "A100-SXM-80GB (80.00 GiB), A100-40GB (40.00 GiB)" in err
    rc, _, err = run_cli(["budget", "--params", "8B", "--gpu", "B9000"])
    assert rc == 2 and "no device of that name" in err


def test_unified_memory_rows_divide_the_assumed_share_and_say_it():
    rc, out, _ = run_cli(["budget", "--config", GEMMA, "--weights", "q4_k_m", "--gpu", "APPLE-M1", "--max-seq",
                          "2048,8192", "--margin-gib", "1"])
    assert rc == 0 and "10.67" in out and "ASSUMED usable by the GPU: 66.7%" in out


def test_this_machine_divides_its_own_memory_and_its_budget_is_held_against_the_runs_machine(tmp_path):
    """`--gpu this-machine` (CPU inference, the README's personal-device loop): the memory is psutil's total, the
    row is labelled a host, and the budget it writes is checked against a run header's host memory, never called a
    GPU budget for a run without a GPU; a run on a smaller machine contradicts it."""
    import psutil

    from tui.core.identity import budget_facts, budget_vs_served, identity_of
    from tui.sources.budget_files import load_budget

    total = psutil.virtual_memory().total
    d = tmp_path / "b"
    rc, out, err = run_cli(["budget", "--config", GEMMA, "--weights", "q4_k_m", "--max-seq", "2048", "--gpu",
                            "this-machine", "--margin-gib", "1", "--gpu-hour-usd", "this-machine=0.05", "--json",
                            "--out-dir", str(d)])
    assert rc == 0, err
    doc = json.loads(out)
    row, detail = doc["candidates"][0], doc["details"][0]
    assert row["device"] == "THIS-MACHINE" and row["fits"]
    assert abs(row["memory_gib"] - (total // 2**20) / 1024) < 0.01
    assert detail["usd_per_hour"] == 0.05 and "(host)" in detail["memory"] and "psutil" in detail["memory"]
    budget = load_budget(str(d / f"{row['id']}.json"))
    facts = budget_facts(budget)
    assert facts is not None and facts.unified

    def header(host_bytes: int) -> dict:
        return {"target": {"url": "http://127.0.0.1:8080", "model": "m"},
                "environment": {"gpu": {"gpu": "none", "reason": "NVML library not found",
                                        "host": {"memory_total": host_bytes}}}}

    assert budget_vs_served(identity_of(header(total)), facts).problems == ()
    small = budget_vs_served(identity_of(header(total // 4)), facts).problems
    assert small and "GiB of unified memory, the run's machine has" in small[0]


def test_a_grid_past_max_candidates_is_refused_with_its_count():
    rc, _, err = run_cli(["budget", "--gpu-gib", "16,24,48,80", "--tp", "1,2,4", "--max-seq", "1024,2048,4096",
                          "--max-candidates", "20"])
    assert rc == 2 and "the grid has 36 candidates" in err and "--max-candidates 20" in err


@pytest.mark.parametrize("argv, why", [
    (["budget", "--max-seq", "4096,8192"], "needs the memory"),
    (["budget", "--gpu-gib", "24,48", "--kv-cache-gib", "2"], "--kv-cache-gib"),
    (["budget", "--gpu-gib", "24,48", "--out", "x.json"], "--out-dir"),
    (["budget", "--gpu-gib", "24,x"], "numbers of GiB"),
    (["budget", "--gpu-gib", "24", "--tp", "1,0"], "whole numbers >= 1"),
    (["budget", "--gpu-gib", "24", "--weights", "bf16,fp3"], "unknown weight format"),
    (["budget", "--gpu-gib", "24,48", "--gpu-hour-usd", "H100=2"], "no --gpu device named H100"),
    (["budget", "--gpu-gib", "24,48", "--gpu-hour-usd", "80=2"], "not a memory of this grid"),
])
def test_bad_grid_usage_is_one_line_exit_2(argv, why):
    rc, out, err = run_cli(argv)
    assert rc == 2 and why in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--max-seq", "--tp", "--gpu-gib", "--weights", "--kv-dtype"])
def test_other_commands_take_one_value_per_budget_flag(flag):
    value = {"--weights": "bf16,awq", "--kv-dtype": "bf16,fp8"}.get(flag, "2,4")
    rc, _, err = run_cli(["report", SEED, flag, value])
    assert rc == 2 and "comma lists are `servewatch budget`'s" in err


def test_a_single_candidate_keeps_todays_budget_and_exit_codes():
    rc, out, _ = run_cli(["budget", "--json"])
    assert rc == 0 and json.loads(out)["results"]["candidate"] == 15
    rc, _, _ = run_cli(["budget", "--params", "70B", "--gpu-gib", "24"])
    assert rc == 1
    rc, _, _ = run_cli(["budget", "--config", GEMMA])
    assert rc == 3


def test_a_grid_of_params_without_geometry_says_so_in_every_row(capsys):
    """Assumed is labelled wherever it shows (issue 37's first-line rule for one budget, here for each row): a model
    given by --params alone gets the teaching case's KV geometry, and every row of the table, its JSON and its CSV
    say so; given its geometry, no row does."""
    assert main(["budget", "--params", "13B", "--gpu-gib", "24,48", "--max-seq", "4096", "--json"]) in (0, 1)
    rows = json.loads(capsys.readouterr().out)["candidates"]
    assert rows and all("TEACHING-CASE KV geometry" in r["model"] for r in rows)
    assert main(["budget", "--params", "13B", "--gpu-gib", "24,48", "--max-seq", "4096", "--csv"]) in (0, 1)
    assert all("TEACHING-CASE KV geometry" in ln for ln in capsys.readouterr().out.splitlines()[1:] if ln)
    assert main(["budget", "--params", "13B", "--layers", "40", "--kv-heads", "8", "--head-dim", "128",
                  "--gpu-gib", "24,48", "--max-seq", "4096", "--json"]) in (0, 1)
    assert not any("TEACHING" in r["model"] for r in json.loads(capsys.readouterr().out)["candidates"])
