"""Importers as descriptors (issue 38): each tool module exports one ``IMPORTER`` and everything iterates the list.

- A test-only tool, "Toybench", defined in this file and registered with ``tui.core.importers.register``, is
  detected, converted, held against its own summary (beside the file, read through its side-file globs), refused
  when given its summary, labelled in the verdict line, shown by ``servewatch import`` and named in its help,
  without one line of it anywhere in ``tui/``: adding a tool is its module plus one entry in the list.
- The README, docs/record-format.md and ``import --help`` name every registered tool (a new descriptor that is
  not documented fails here).
- The built-in descriptors agree with what their converters write (tool name of the summary, TTFT definition, the
  legitimate summary differences they declare).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tui.core.importers as I
import tui.core.importers.common as C
import tui.core.importers.crosscheck as X
from tests.support.paths import REPO
from tui.cli import main
from tui.core.importers.limits import ttft_of_label
from tui.sources.importing import import_file

FIX = REPO / "tests" / "fixtures" / "imports"

# ------------------------------------------------------------------------------------- the test-only importer

TOY = "toybench"
TOY_SUMMARY = "toybench_summary.json"
TOY_TTFT = "Toybench: its clock at the first streamed byte minus its clock before the POST (invented for this test)"


def _toy_looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "toybench_version" in obj and isinstance(obj.get("toy_requests"), list)


def _toy_summary_file(obj: Any) -> bool:
    return isinstance(obj, dict) and "toybench_version" in obj and "sent" in obj and "toy_requests" not in obj


def _toy_side(side: I.SideInput) -> tuple[dict, list[str]]:
    if not side.files:
        return {"summary_missing": f"{TOY_SUMMARY} is not beside the file"}, []
    name, d = side.files[0]
    if not isinstance(d, dict):
        raise ValueError("not an object")
    notes = [f"level (concurrency {d['concurrency']:g}) read from {name} beside the file"] if C.is_num(
        d.get("concurrency")) else []
    return {"summary": d, "level": C.num(d.get("concurrency"))}, notes


def _toy_convert(src: I.Source) -> I.ImportResult:
    doc = src.document()
    level = src.options.get("level")
    s = src.options.get("summary")
    ts = (X.missing("Toybench", src.options["summary_missing"]) if src.options.get("summary_missing") else
          X.summary("Toybench", f"{TOY_SUMMARY} beside the file", [X.entry(
              level=level, scope="level" if level else "run", label=X.level_label(level, "closed"),
              requests=s.get("sent"), completed=s.get("ok"), errors=s.get("failed"))]) if isinstance(s, dict)
          else None)
    info = C.source_block(tool=TOY, version=str(doc.get("toybench_version")), file=src.file, sha256=src.sha256,
                          derived=["t_sent = start", "t_first_token = first", "t_end = end"],
                          ttft_definition=TOY_TTFT, time_axis=C.AXIS_EPOCH, fmt=TOY)
    if ts is not None:
        info["tool_summary"] = ts
    res = I.ImportResult(format=TOY, header=C.header(info, started_at=None, load={"mode": "closed",
                                                                                   "levels": [level] if level else []}),
                         tool_summary=ts)
    recs = []
    for i, r in enumerate(doc["toy_requests"]):
        res.entries += 1
        try:
            ok = r.get("status") == 200
            recs.append(C.request(rid=f"toy-{i}", t_sent=r["start"], t_end=r["end"], t_first=r.get("first"),
                                  complete=ok, error=None if ok else C.classify_error(status=r.get("status")),
                                  http_status=r.get("status"), level=level))
            res.converted += 1
        except (KeyError, TypeError, ValueError) as exc:
            res.issues.append(C.entry_issue(src.label, f"entry {i}", str(exc)))
    res.records = C.add_steps(recs, level, "closed")
    return res


TOYBENCH = I.Importer(
    name=TOY, tool="Toybench", reads="Toybench toy_requests.json", looks_like=_toy_looks_like,
    convert=_toy_convert, ttft_definition=TOY_TTFT, ttft_label="first byte, as Toybench measures",
    sniff=(('"toybench_version"', '"toy_requests"'),),
    unusable=(I.Unusable("toybench-summary", _toy_summary_file,
                         f"a Toybench summary ({TOY_SUMMARY}): the per-request data is in toy_requests.json"),),
    side_files=I.SideFiles(globs=(TOY_SUMMARY,), options=_toy_side, label=TOY_SUMMARY),
    summary=I.SummaryRule(where=f"{TOY_SUMMARY} beside the file"),
)


@pytest.fixture
def toybench() -> Iterator[I.Importer]:
    I.register(TOYBENCH)
    try:
        yield TOYBENCH
    finally:
        I.unregister(TOY)


def _toy_run(folder: Path, n: int = 24, failed: tuple[int, ...] = (3, 11), summary: bool = True) -> Path:
    t0 = 1_767_225_600.0  # 2026-01-01
    reqs = [{"start": t0 + i * 0.5, "first": t0 + i * 0.5 + 0.2, "end": t0 + i * 0.5 + 1.0,
             "status": 500 if i in failed else 200} for i in range(n)]
    path = folder / "toy_requests.json"
    path.write_text(json.dumps({"toybench_version": "0.1", "toy_requests": reqs}, indent=1))
    if summary:
        (folder / TOY_SUMMARY).write_text(json.dumps({"toybench_version": "0.1", "sent": n, "ok": n - len(failed),
                                                      "failed": len(failed), "concurrency": 2}))
    return path


def _drop_entry(path: Path, index: int) -> None:
    doc = json.loads(path.read_text())
    del doc["toy_requests"][index]
    path.write_text(json.dumps(doc, indent=1))


def test_a_new_tool_is_detected_converted_checked_and_shown_by_import(toybench, tmp_path, capsys):
    path = _toy_run(tmp_path)
    assert I.detect_format(path.read_text()) == TOY
    out = tmp_path / "run.jsonl"
    assert main(["import", str(path), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"(toybench, format {TOY})" in text
    assert "this file: requests 24 (measured 24, warmup 0): completed 22, errors 2" in text
    assert "Toybench's own summary (toybench_summary.json beside the file):" in text
    assert "at concurrency 2: 24 requests: 22 completed, 2 errors" in text
    assert "checked: counts agree with Toybench's own summary" in text
    assert "note: level (concurrency 2) read from toybench_summary.json beside the file" in text
    assert f"TTFT as toybench defines it: {TOY_TTFT}" in text
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["source"]["format"] == TOY and lines[0]["source"]["tool_summary"]["tool"] == "Toybench"
    assert sum(x["type"] == "request" for x in lines) == 24
    assert ttft_of_label(lines[0]) == "first byte, as Toybench measures"  # the verdict line's TTFT label


def test_a_new_tool_is_held_against_its_own_summary_by_import_and_by_the_reader(toybench, tmp_path, capsys):
    path = _toy_run(tmp_path)
    _drop_entry(path, 3)  # a failed request deleted; the summary beside it still counts it
    assert main(["import", str(path), "--out", str(tmp_path / "run.jsonl"), "--json"]) == 3
    got = json.loads(capsys.readouterr().out)
    assert got["format"] == TOY and got["summary_check"]["agrees"] is False
    assert "Toybench's own summary (toybench_summary.json beside the file) counts 24 requests: 22 completed, " \
           "2 errors at concurrency 2; the file holds 23 requests" in got["summary_check"]["problems"][0]
    code = main(["report", str(path), "--json"])  # the reader converts it on the fly and refuses PASS
    rep = json.loads(capsys.readouterr().out)
    assert code == 3 and rep["measured"]["verdict"]["state"] != "PASS"
    assert any("Toybench's own summary (toybench_summary.json beside the file) counts 24 requests" in p
               for p in rep["evidence"]["problems"])


def test_a_new_tool_without_its_summary_is_not_checked_and_says_so(toybench, tmp_path, capsys):
    path = _toy_run(tmp_path, summary=False)
    assert main(["import", str(path), "--out", str(tmp_path / "run.jsonl")]) == 0
    assert "NOT CHECKED: Toybench's own summary is not there (toybench_summary.json is not beside the file)" in \
        capsys.readouterr().out
    (tmp_path / TOY_SUMMARY).write_text("[1, 2]")  # not an object: could not be read, said, summary missing
    res = import_file(str(path))
    assert "toybench_summary.json could not be read: level unknown" in res.notes
    assert res.tool_summary == X.missing("Toybench", "toybench_summary.json could not be read")


def test_a_new_tools_summary_is_refused_with_where_its_data_is(toybench, tmp_path, capsys):
    _toy_run(tmp_path)
    assert main(["import", str(tmp_path / TOY_SUMMARY)]) == 2
    assert "a Toybench summary (toybench_summary.json): the per-request data is in toy_requests.json" in \
        capsys.readouterr().err


def test_a_new_tool_cut_short_is_recognised_by_its_keys_and_reported(toybench, tmp_path, capsys):
    path = _toy_run(tmp_path)
    path.write_text(path.read_text()[:600])
    assert I.detect_format(path.read_text()) == TOY
    res = import_file(str(path))
    assert res.converted == 0 and res.issues[0].kind == "truncated"
    assert "Toybench document does not decode" in res.issues[0].reason


def test_a_new_tool_is_in_the_help_and_gone_when_unregistered(tmp_path, capsys):
    path = _toy_run(tmp_path)
    I.register(TOYBENCH)
    try:
        with pytest.raises(ValueError, match="already registered"):
            I.register(TOYBENCH)
        assert main(["import", "--help"]) == 0
        assert "Toybench toy_requests.json" in " ".join(capsys.readouterr().out.split())
        assert TOY in I.IMPORTABLE and I.TOOL_NAMES[TOY] == "Toybench" and "toybench-summary" in I.UNUSABLE
        assert TOY in I.DOCUMENT_FORMATS and TOY not in I.LINE_FORMATS
    finally:
        I.unregister(TOY)
    assert TOY not in I.IMPORTABLE and I.detect_format(path.read_text()) is None
    assert main(["import", str(path)]) == 2
    assert "not a format servewatch can import" in capsys.readouterr().err


def test_the_new_tool_lives_in_this_test_only():
    """Nothing under tui/ names it: detection, side files, conversion, the summary check and the output above
    went through the list alone."""
    hits = [str(p.relative_to(REPO)) for p in (REPO / "tui").rglob("*.py") if "oybench" in p.read_text()]
    assert hits == []


# ----------------------------------------------------------------------------------- the documents name them

def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = re.search(r"^## ", text[start + len(heading):], re.M)
    return text[start: start + len(heading) + nxt.start()] if nxt else text[start:]


def undocumented(importers: list[I.Importer]) -> list[str]:
    """What the README and docs/record-format.md do not say about the registered tools (``import --help`` and the
    "not a format" refusal are generated from the list; ``servewatch --help`` names none of them)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `servewatch import"))
    fmt_doc = (REPO / "docs" / "record-format.md").read_text(encoding="utf-8")
    format_row = next(line for line in fmt_doc.splitlines() if line.startswith("| `format` |"))
    importing = _section(fmt_doc, "## Importing other tools' runs")
    headings = [line for line in importing.splitlines() if line.startswith("### ")]
    summary_rows = [line for line in importing.splitlines() if line.strip().startswith("| ")]
    missing = []
    for imp in importers:
        if imp.tool not in row.replace("`", ""):
            missing.append(f"README.md's servewatch import row does not name {imp.tool}")
        missing += [f"docs/record-format.md's `format` row does not name `{f}`" for f in imp.formats
                    if f"`{f}`" not in format_row]
        if not any(imp.tool in h for h in headings):
            missing.append(f"docs/record-format.md has no '### {imp.tool} ...' section under Importing other tools' runs")
        if imp.summary is not None and not any(r.strip().startswith(f"| {imp.tool} |") for r in summary_rows):
            missing.append(f"docs/record-format.md's summary table has no row for {imp.tool}")
    return missing


def test_every_registered_tool_is_documented():
    assert undocumented(list(I.IMPORTERS)) == []


def test_a_tool_not_documented_fails_the_documentation_check(toybench):
    missing = undocumented(list(I.IMPORTERS))
    assert any("README.md" in m and "Toybench" in m for m in missing)
    assert any("`toybench`" in m for m in missing)
    assert any("summary table" in m for m in missing)


def test_the_import_help_and_refusal_list_every_tool(capsys, tmp_path):
    assert main(["import", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    junk = tmp_path / "x.json"
    junk.write_text('{"hello": 1}')
    assert main(["import", str(junk)]) == 2
    refusal = capsys.readouterr().err
    for imp in I.IMPORTERS:
        assert imp.reads in help_text and imp.reads in refusal


# ------------------------------------------------------------------------ the descriptors and their converters

TOOL_MODULES = ("aiperf", "guidellm", "inference_perf", "llmperf", "vllm")


def test_every_tool_module_exports_one_importer_and_the_list_holds_them_all():
    import tui.core.importers as pkg

    found = {}
    for m in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"tui.core.importers.{m.name}")
        if hasattr(mod, "IMPORTER"):
            found[m.name] = mod.IMPORTER
    assert sorted(found) == sorted(TOOL_MODULES)
    assert [imp.name for imp in I.IMPORTERS] == [found[m].name for m in ("aiperf", "guidellm", "vllm", "llmperf",
                                                                          "inference_perf")]
    names = [f for imp in I.IMPORTERS for f in imp.formats + tuple(u.format for u in imp.unusable)]
    assert len(names) == len(set(names)) and I.SERVEWATCH not in names


def test_a_descriptor_refuses_what_would_break_the_registry():
    with pytest.raises(ValueError, match="line-based"):
        I.Importer(name="x", tool="X", reads="x", looks_like=bool, convert=TOYBENCH.convert, ttft_definition="",
                   ttft_label="", line_based=True)
    with pytest.raises(ValueError, match="empty sniff"):
        I.Importer(name="x", tool="X", reads="x", looks_like=bool, convert=TOYBENCH.convert, ttft_definition="",
                   ttft_label="", sniff=((),))
    with pytest.raises(ValueError, match="unknown summary differences"):
        I.SummaryRule(where="x", differences=("tolerance_5_percent",))


def _fixtures() -> list[Path]:
    return sorted(p for p in FIX.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")
                  and "variants" not in p.parts and I.unusable_reason(I.detect_format(p.read_text())) is None)


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: str(p.relative_to(FIX)))
def test_each_converter_writes_what_its_descriptor_declares(path: Path):
    res = import_file(str(path))
    imp = I.importer_for(res.format)
    assert imp is not None and res.format in imp.formats
    src = res.header["source"]
    assert src["ttft_definition"] == imp.ttft_definition and src["format"] == imp.name
    ts = res.tool_summary
    assert ts is not None and imp.summary is not None  # every built-in tool writes its own counts
    assert ts["tool"] == imp.tool
    flags = {k for e in ts.get("entries", []) for k in X.DIFFERENCES if e.get(k)}
    assert flags <= set(imp.summary.differences), (imp.name, flags)
    assert ttft_of_label(res.header) == imp.ttft_label


def test_an_unreadable_run_summary_beside_readable_stage_reports_claims_no_stage_rate(tmp_path):
    """inference-perf: when a side file cannot be read, the notes say so and no longer claim what was discarded
    (before, "stage rates ... read" stayed beside "levels are stage numbers")."""
    src = FIX / "from_source" / "inference_perf"
    (tmp_path / "per_request_lifecycle_metrics.json").write_text(
        (src / "per_request_lifecycle_metrics_from_source.json").read_text())
    (tmp_path / "stage_0_lifecycle_metrics.json").write_text((src / "stage_0_lifecycle_metrics.json").read_text())
    (tmp_path / "summary_lifecycle_metrics.json").write_text("{")
    res = import_file(str(tmp_path / "per_request_lifecycle_metrics.json"))
    assert "summary_lifecycle_metrics.json could not be read: level unknown" in res.notes
    assert not any(n.startswith("stage rates (load_summary.requested_rate) read") for n in res.notes)
    assert res.summary_problems and "could not be read" in res.summary_problems[0]


def test_a_per_request_format_wins_over_any_summary_and_the_list_order_breaks_ties():
    vllm_detailed = {"ttfts": [0.1], "itls": [[]], "errors": [""]}
    aiperf_summary = {"input_config": {}, "aiperf_version": "0.13.0"}
    assert I.detect_object({**aiperf_summary, **vllm_detailed}) == "vllm-bench"  # per-request data: converted
    aiperf_line = {"metadata": {"request_start_ns": 1}, "metrics": {}}
    assert I.detect_object({**vllm_detailed, **aiperf_line}) == "aiperf"  # both per-request: the list's order
    assert I.detect_object({**aiperf_summary, "load_summary": {}}) == "aiperf-summary"
