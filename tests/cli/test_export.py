"""`servewatch export` (issue 41): the per-request records as one flat table (CSV + PATH.meta.json, Parquet with
its metadata inside) and one step as an llm-d benchmark report v0.2, validated with llm-d's own package.

The round-trip property: per (level, round), the rows marked ``counted`` are the report's ``n`` and their
``outcome`` good / slow / failed are its ``good`` / ``slow`` / ``failed``; every request record is one row. Held on
the bundled run and on a generated family (failures, warmup, copied records, several levels and rounds)."""

from __future__ import annotations

import csv
import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest

import tests.support.evidence_files as ef
from tests.support.hostile import hostile_records, problems, write_jsonl
from tui.cli import main
from tui.core.export_rows import COLUMN_NAMES, COLUMNS
from tui.samples import sample_path

DEFAULT = sample_path("default.jsonl")
SEED = sample_path("seed.jsonl")
ROOT = Path(__file__).resolve().parents[2]


def _report(path, capsys, *extra) -> dict:
    main(["report", "--details", str(path), "--json", *extra])
    return json.loads(capsys.readouterr().out)


def _request_lines(path) -> int:
    n = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and json.loads(line).get("type") == "request":
                n += 1
    return n


def _csv_rows(path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _sums(rows, *, counted=lambda r: r["counted"] in (True, "true"), level=lambda r: float(r["level"]),
          rnd=lambda r: int(r["round"]), outcome=lambda r: r["outcome"]) -> dict:
    out: dict = {}
    for r in rows:
        if not counted(r):
            continue
        c = out.setdefault((level(r), rnd(r)), Counter())
        c["n"] += 1
        c[outcome(r)] += 1
    return {k: (v["n"], v["good"], v["slow"], v["failed"]) for k, v in out.items()}


def _report_sums(rep) -> dict:
    return {(float(r["level"]), int(r["round"])): (r["n"], r["good"], r["slow"], r["failed"]) for r in rep["levels"]}


def test_csv_round_trip_equals_the_report(tmp_path, capsys):
    out = tmp_path / "run.csv"
    assert main(["export", DEFAULT, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    rows = _csv_rows(out)
    assert list(rows[0].keys()) == list(COLUMN_NAMES)
    assert len(rows) == _request_lines(DEFAULT) == 1090
    assert f"{len(rows):,} rows x {len(COLUMNS)} columns" in said
    rep = _report(DEFAULT, capsys)
    assert _sums(rows) == _report_sums(rep)
    assert sum(1 for r in rows if r["phase"] == "warmup") == rep["warmup_total"]
    # the goodput the report gives is the counted good rows over the step's seconds
    for lv in rep["levels"]:
        good = sum(1 for r in rows if r["counted"] == "true" and r["outcome"] == "good"
                   and float(r["level"]) == lv["level"] and int(r["round"]) == lv["round"])
        assert good / lv["seconds"] == pytest.approx(lv["goodput_rps"], rel=1e-9)
    meta = json.loads((tmp_path / "run.csv.meta.json").read_text())
    assert meta["schema"] == "servewatch.export/1" and meta["synthetic"] is False and meta["label"] is None
    assert [c["name"] for c in meta["columns"]] == list(COLUMN_NAMES)
    assert meta["counts"]["rows"] == 1090 and meta["counts"]["counted"] == sum(r["n"] for r in rep["levels"])
    assert meta["run_header"]["type"] == "run" and meta["levels"][0]["n"] == rep["levels"][0]["n"]
    # SLO misses: a slow row names the SLO it missed, a good one none
    slow = [r for r in rows if r["outcome"] == "slow"]
    assert slow and all(r["misses"] and r["miss_ttft"] == "true" for r in slow if r["misses"] == "TTFT")
    assert all(not r["misses"] for r in rows if r["outcome"] == "good")


def test_parquet_round_trip_equals_the_report(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "run.parquet"
    assert main(["export", DEFAULT, "--format", "parquet", "--out", str(out)]) == 0
    capsys.readouterr()
    table = pq.read_table(out)
    assert table.column_names == list(COLUMN_NAMES) and table.num_rows == 1090
    assert table.schema.field("level").type == pa.float64() and table.schema.field("good").type == pa.bool_()
    assert table.schema.field("token_offsets").type == pa.list_(pa.float64())
    rows = table.to_pylist()
    rep = _report(DEFAULT, capsys)
    assert _sums(rows, level=lambda r: r["level"], rnd=lambda r: r["round"]) == _report_sums(rep)
    # the same values as the CSV (numbers exact)
    csv_out = tmp_path / "run.csv"
    assert main(["export", DEFAULT, "--out", str(csv_out)]) == 0
    capsys.readouterr()
    c = _csv_rows(csv_out)
    assert sum(float(r["e2e_ms"]) for r in c if r["e2e_ms"]) == pytest.approx(
        sum(r["e2e_ms"] for r in rows if r["e2e_ms"] is not None), rel=1e-12)
    meta = pq.read_metadata(out).metadata  # the file's key-value metadata (its footer)
    doc = json.loads(meta[b"servewatch"])
    assert meta[b"servewatch.synthetic"] == b"false" and doc["synthetic"] is False
    assert doc["counts"]["rows"] == 1090 and doc["format"] == "parquet"


def _generated(seed: int) -> list[dict]:
    """A run of one to three levels, up to two rounds, some failed and slow requests, warmup, and copied records
    (the same id again, or the same times under another id)."""
    rng = random.Random(seed)
    levels = tuple(sorted(rng.sample([1, 2, 4, 8], rng.randint(1, 3))))
    rounds = rng.randint(1, 2)
    hdr = ef.header("closed", levels, rounds=rounds)
    steps = []
    t = ef.T0 + 1.0
    fail_k = rng.choice([0, 3, 7])
    for lvl in levels:
        for rnd in range(1, rounds + 1):
            reqs = ef.closed_step(lvl, t, rng.uniform(20, 60), rnd=rnd, ttft=rng.choice([0.2, 0.2, 1.5]),
                                  fail=(lambda i, k=fail_k: bool(k) and i % k == 0))
            for r in reqs:
                if rng.random() < 0.1:
                    r["phase"] = "warmup"
                if rng.random() < 0.2:
                    r["t_first_token"] = r["t_sent"] + 1.4 if r["t_first_token"] else None
            start, end = ef.step_records(reqs, lvl, "closed", rnd)
            dups = [dict(reqs[j]) for j in rng.sample(range(len(reqs)), min(2, len(reqs)))]
            if dups:
                dups[-1]["id"] += "-copy"  # the same times under another id: a copy too
            steps.append((start, reqs + dups, end))
            t = end["t"] + 1.0
    return ef.assemble(hdr, steps)


@pytest.mark.parametrize("seed", range(6))
def test_round_trip_property_over_generated_runs(tmp_path, capsys, seed):
    path = ef.write(tmp_path / "gen.jsonl", _generated(seed))
    out = tmp_path / "gen.csv"
    rc = main(["export", str(path), "--out", str(out), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0, summary
    rows = _csv_rows(out)
    assert len(rows) == _request_lines(path) == summary["rows"]
    rep = _report(path, capsys)
    assert _sums(rows) == _report_sums(rep)
    assert summary["counts"]["duplicates"] == sum(1 for r in rows if r["duplicate"] == "true") > 0
    assert not any(r["counted"] == "true" for r in rows if r["duplicate"] == "true" or r["phase"] == "warmup")


IMPORTS = ROOT / "tests" / "fixtures" / "imports"


@pytest.mark.parametrize("name", ["aiperf/profile_export.jsonl", "guidellm/benchmarks.json",
                                  "vllm/vllm_bench_c2_from_source.json",
                                  "vllm/vllm_benchmark_serving_old_no_start_times_from_source.json",
                                  "llmperf/gemma_128_32_from_source_individual_responses.json",
                                  "inference_perf/per_request_lifecycle_metrics.json"])
def test_round_trip_of_other_tools_files(tmp_path, capsys, name):
    """Another tool's file is exported as servewatch reads it (its TTFT definition, its time axis): the same
    round trip (a file of several runs: its first)."""
    src = IMPORTS / name
    out = tmp_path / "x.csv"
    args = ["export", str(src), "--out", str(out), "--json"]
    rc = main(args)
    summary = json.loads(capsys.readouterr().out)
    assert rc in (0, 3), summary
    rows = _csv_rows(out)
    assert len(rows) == summary["rows"] > 0
    rep = _report(src, capsys)
    assert _sums(rows) == _report_sums(rep)
    meta = json.loads((tmp_path / "x.csv.meta.json").read_text())
    assert meta["run_header"]["source"]["kind"] == "import"


def test_synthetic_data_is_labelled_in_the_metadata_and_every_row(tmp_path, capsys):
    out = tmp_path / "seed.csv"
    assert main(["export", SEED, "--out", str(out)]) == 3  # SYNTHETIC: never 0
    captured = capsys.readouterr()
    assert captured.out.startswith("SYNTHETIC data: ") and "SYNTHETIC" in captured.err
    meta = json.loads((tmp_path / "seed.csv.meta.json").read_text())
    assert meta["synthetic"] is True and meta["label"].startswith("SYNTHETIC")
    rows = _csv_rows(out)
    assert rows and all(r["synthetic"] == "true" for r in rows)
    llmd = tmp_path / "seed.llmd.json"
    assert main(["export", SEED, "--format", "llmd", "--out", str(llmd)]) == 3
    doc = json.loads(llmd.read_text())
    assert "SYNTHETIC" in doc["run"]["keywords"] and doc["run"]["description"].startswith("SYNTHETIC")
    if pytest.importorskip("pyarrow"):
        import pyarrow.parquet as pq

        pqf = tmp_path / "seed.parquet"
        assert main(["export", SEED, "--format", "parquet", "--out", str(pqf)]) == 3
        md = pq.read_metadata(pqf).metadata
        assert md[b"servewatch.synthetic"] == b"true" and md[b"servewatch.label"].startswith(b"SYNTHETIC")


def test_llmd_report_validates_with_llmd_benchmark_report(tmp_path, capsys):
    core = pytest.importorskip("llmd_benchmark_report.core")
    jsonschema = pytest.importorskip("jsonschema")
    import llmd_benchmark_report

    schema = json.loads((Path(llmd_benchmark_report.__file__).parent / "br_v0_2_json_schema.json").read_text())
    rep = _report(DEFAULT, capsys)
    for row in rep["levels"]:
        out = tmp_path / f"l{row['level']:g}.llmd.json"
        assert main(["export", DEFAULT, "--format", "llmd", "--level", f"{row['level']:g}", "--out", str(out)]) == 0
        capsys.readouterr()
        doc = json.loads(out.read_text())
        jsonschema.validate(doc, schema)
        br = core.load_benchmark_report(doc)  # llm-d's pydantic model: raises on any schema violation
        assert br.version == "0.2"
        agg = doc["results"]["request_performance"]["aggregate"]
        assert agg["requests"]["total"] == row["n"] and agg["requests"]["failures"] == row["failed"]
        assert doc["scenario"]["load"]["standardized"]["concurrency"] == int(row["level"])
        native = doc["scenario"]["load"]["native"]["config"]["servewatch"]
        assert native["verdict"] == row["verdict"] and native["good"] == row["good"]
        ttft = agg["latency"]["time_to_first_token"]
        assert ttft["units"] == "s" and ttft["min"] <= ttft["mean"] <= ttft["max"]
        if row["n"] - row["failed"] >= 29:  # P90 needs 29 samples (docs/statistics.md)
            assert "p90" in ttft
    # no level given: the judged level
    out = tmp_path / "judged.llmd.json"
    assert main(["export", DEFAULT, "--format", "llmd", "--out", str(out)]) == 0
    judged = rep["judged"]["level"]
    assert json.loads(out.read_text())["scenario"]["load"]["native"]["config"]["servewatch"]["level"] == judged


def test_llmd_level_not_in_run_is_bad_usage(tmp_path, capsys):
    out = tmp_path / "x.llmd.json"
    assert main(["export", DEFAULT, "--format", "llmd", "--level", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "level 3 is not in the record file" in err and "Traceback" not in err and not out.exists()


def test_output_guard_never_overwrites_the_input_and_needs_force(tmp_path, capsys):
    src = tmp_path / "run.jsonl"
    src.write_bytes(Path(DEFAULT).read_bytes())
    before = src.read_bytes()
    assert main(["export", str(src), "--out", str(src)]) == 2
    assert main(["export", str(src), "--out", str(src), "--force"]) == 2
    # the CSV's metadata file would be the input
    side = tmp_path / "t.csv"
    meta_is_input = tmp_path / "t.csv.meta.json"
    meta_is_input.write_bytes(before)
    assert main(["export", str(meta_is_input), "--out", str(side), "--force"]) == 2
    assert src.read_bytes() == before and meta_is_input.read_bytes() == before
    capsys.readouterr()
    out = tmp_path / "out.csv"
    assert main(["export", str(src)]) == 0 and (tmp_path / "run.jsonl.csv").exists()  # the default name
    assert main(["export", str(src), "--out", str(out)]) == 0
    capsys.readouterr()
    out.write_text("keep me")
    assert main(["export", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "--force" in err and out.read_text() == "keep me"
    assert main(["export", str(src), "--out", str(out), "--force"]) == 0
    assert out.read_text().startswith("id,phase,level")
    # an output that is a symlink is refused, the file it points at untouched
    victim = tmp_path / "victim.txt"
    victim.write_text("victim")
    link = tmp_path / "link.csv"
    os.symlink(victim, link)
    assert main(["export", str(src), "--out", str(link), "--force"]) == 2
    assert victim.read_text() == "victim"
    assert src.read_bytes() == before


def test_bad_inputs_are_one_line_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for args in (["export", str(tmp_path / "missing.jsonl")], ["export", str(empty)], ["export", str(tmp_path)],
                 ["export", "-"]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.strip()
    assert not list(tmp_path.glob("*.csv"))


def test_hostile_strings_are_data_and_formula_cells_are_defused(tmp_path, capsys):
    recs = hostile_records(levels=(1,), n=40, fail_every=5)
    for r in recs:
        if r.get("type") == "request" and r.get("error_detail"):
            r["error_detail"] = "=HYPERLINK(\"http://evil.example\",\"x\") " + r["error_detail"]
    src = write_jsonl(tmp_path / "hostile.jsonl", recs)
    out = tmp_path / "h.csv"
    rc = main(["export", str(src), "--out", str(out)])
    captured = capsys.readouterr()
    assert rc in (0, 3) and not problems(captured.out) and not problems(captured.err)
    rows = _csv_rows(out)
    details = [r["error_detail"] for r in rows if r["error_detail"]]
    assert details and all(d.startswith("'=HYPERLINK") for d in details)
    meta = json.loads((tmp_path / "h.csv.meta.json").read_text())  # the header's strings kept as data
    assert "model:" in json.dumps(meta["run_header"])


def test_parquet_without_pyarrow_is_one_line(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *a, **kw):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("no pyarrow here")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    out = tmp_path / "x.parquet"
    assert main(["export", DEFAULT, "--format", "parquet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pyarrow" in err and "servewatch[parquet]" in err and not out.exists()


def test_docs_list_every_export_column():
    text = (ROOT / "docs" / "record-format.md").read_text()
    section = text.split("## The export's columns", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("|")[1].strip().strip("`") for line in section.splitlines()
              if line.startswith("| `")]
    assert listed == list(COLUMN_NAMES)


def test_no_time_axis_gives_no_rates_in_the_llmd_report(tmp_path, capsys):
    """LLMPerf records no send times (``source.time_axis`` none): a rate per second or a time span would be made
    up from stand-in times, so the llm-d report has none (and stays valid)."""
    core = pytest.importorskip("llmd_benchmark_report.core")
    src = IMPORTS / "llmperf" / "gemma_128_32_from_source_individual_responses.json"
    out = tmp_path / "x.llmd.json"
    assert main(["export", str(src), "--format", "llmd", "--out", str(out)]) in (0, 3)
    doc = json.loads(out.read_text())
    core.load_benchmark_report(doc)
    agg = doc["results"]["request_performance"]["aggregate"]
    assert "throughput" not in agg and "time" not in doc["run"] and "goodput N/A" in doc["run"]["description"]
    assert doc["scenario"]["load"]["native"]["config"]["servewatch"]["goodput_rps"] is None
    assert agg["requests"]["total"] == 30 and agg["latency"]["time_to_first_token"]["mean"] > 0
