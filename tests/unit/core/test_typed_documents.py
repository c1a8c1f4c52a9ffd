"""The documents' types (issue 38): the report, compare, acceptance and chart-data documents are ``TypedDict``s
declared beside their builders. Two properties: the keys declared are the keys the builders produce (every required
key present, no key undeclared, at every depth a ``TypedDict`` describes), checked on real documents; and mypy
catches a misspelled key in a reader typed with them (a snippet with one, type-checked here)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import types
import typing
from contextlib import redirect_stdout
from typing import Any, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from tests.support.paths import REPO
from tests.unit.core.test_compare import run, run_records
from tui.cli import main
from tui.core import chartdata as CD
from tui.core import compare as K
from tui.core.acceptance.document import AcceptanceDoc
from tui.core.compare_doc import CompareDoc
from tui.core.monitor import Monitor, MonitorConfig
from tui.core.records import LineIssue, read_file
from tui.core.report import build_report
from tui.core.report_doc import ReportDoc
from tui.core.slos import Slos

SAMPLES = REPO / "sample_logs"


def _keys(td: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's fields (their types) and its required keys. ``__required_keys__`` is not used: under
    ``from __future__ import annotations`` Python 3.11 cannot see ``NotRequired`` in a string annotation."""
    hints = get_type_hints(td, include_extras=True)
    fields, required = {}, set()
    for k, tp in hints.items():
        origin = get_origin(tp)
        if origin is NotRequired or origin is Required:
            tp = get_args(tp)[0]
        if origin is not NotRequired:
            required.add(k)
        fields[k] = tp
    return fields, frozenset(required)


def shape_errors(value: Any, tp: Any, where: str = "$") -> list[str]:
    """Where ``value`` (a JSON document) departs from ``tp``'s keys: a required key missing, a key undeclared, an
    object where the type says a list. Scalars are not checked (the JSON is the golden files' business)."""
    if tp is Any or tp is object:
        return []
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, declared {tp.__name__}"]
        fields, required = _keys(tp)
        errs = [f"{where}: missing {k!r} ({tp.__name__})" for k in sorted(required - value.keys())]
        errs += [f"{where}: undeclared {k!r} ({tp.__name__})" for k in sorted(value.keys() - fields.keys())]
        for k, v in value.items():
            if k in fields:
                errs += shape_errors(v, fields[k], f"{where}.{k}")
        return errs
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        arms = get_args(tp)
        results = [shape_errors(value, a, where) for a in arms if a is not type(None)]
        if value is None and type(None) in arms:
            return []
        return [] if not results or any(not r for r in results) else min(results, key=len)
    if origin in (list, tuple, typing.Sequence) and isinstance(value, list):
        args = get_args(tp)
        item = args[0] if args else Any
        return [e for i, v in enumerate(value) for e in shape_errors(v, item, f"{where}[{i}]")]
    if origin is dict and isinstance(value, dict):
        args = get_args(tp)
        item = args[1] if len(args) == 2 else Any
        return [e for k, v in value.items() for e in shape_errors(v, item, f"{where}.{k}")]
    return []


def test_the_checker_itself_finds_a_missing_an_undeclared_and_a_nested_key():
    good = json.loads(json.dumps(K.compare(run(run_records(0.98, 400, seed=1)), run(run_records(0.98, 400, seed=2)),
                                           slo_ttft_ms=1000)))
    assert shape_errors(good, CompareDoc) == []
    bad = dict(good, verdcit="x")
    del bad["levels"]
    bad["warnings"] = good["warnings"]
    errs = shape_errors(bad, CompareDoc)
    assert any("missing 'levels'" in e for e in errs) and any("undeclared 'verdcit'" in e for e in errs), errs
    nested = json.loads(json.dumps(good))
    nested["levels"][0]["basee"] = nested["levels"][0].pop("base")
    assert any(e.startswith("$.levels[0]") for e in shape_errors(nested, CompareDoc))


def _records(name: str) -> list:
    return [r for r in read_file(str(SAMPLES / name)) if not isinstance(r, LineIssue)]


@pytest.mark.parametrize("name", ["seed.jsonl", "default.jsonl"])
def test_report_doc_declares_what_build_report_and_report_json_produce(name):
    mon = Monitor(MonitorConfig())
    mon.add_many(_records(name))
    built = json.loads(json.dumps(build_report(mon.snapshot()), default=str))
    assert shape_errors(built, ReportDoc) == []
    out = io.StringIO()
    with redirect_stdout(out):
        main(["report", str(SAMPLES / name), "--json"])
    printed = json.loads(out.getvalue())  # with the keys the command line adds (declared NotRequired)
    assert shape_errors(printed, ReportDoc) == []


def test_compare_doc_declares_what_compare_produces_worse_and_not_worse():
    for p_cand in (0.98, 0.90):
        c = K.compare(run(run_records(0.98, 3000, seed=3)), run(run_records(p_cand, 3000, seed=4)), slo_ttft_ms=1000)
        assert shape_errors(json.loads(json.dumps(c)), CompareDoc) == []


def test_acceptance_doc_declares_the_golden_acceptance_json():
    golden = json.loads((REPO / "tests" / "golden" / "acceptance_seed.json").read_text())
    assert shape_errors(golden, AcceptanceDoc) == []


def test_chart_bundle_declares_what_report_bundle_produces_with_a_sampler():
    cfg = MonitorConfig()
    mon, sampler = Monitor(cfg), CD.RunSampler(cfg.slos)
    items = _records("seed.jsonl")
    mon.add_many(items)
    sampler.add_many(items)
    snap = mon.snapshot()
    rep = build_report(snap)
    bundle = CD.report_bundle(rep["levels"], judged=rep["judged"], candidate=None, slos=Slos(), target=0.95,
                              timeline=CD.timeline_rows(snap.timeline), sampler=sampler)
    assert bundle["judged"] is not None and bundle["queue"] is not None
    assert shape_errors(json.loads(json.dumps(bundle, default=str)), CD.ChartBundle) == []


SNIPPET = '''
from tui.core.report import ReportDoc
from tui.core.compare import CompareDoc
from tui.core.acceptance.document import AcceptanceDoc
from tui.core.chartdata import ChartBundle


def reads(rep: ReportDoc, cmp: CompareDoc, acc: AcceptanceDoc, charts: ChartBundle) -> list[object]:
    return [rep["judged"], rep["verdcit"], cmp["levles"], acc["conclusoin"], charts["marks"]["candidat"]]
'''


@pytest.mark.slow
def test_mypy_catches_a_misspelled_key_in_each_document(tmp_path):
    """mypy, with the project's settings, on a reader that misspells one key of each document: four errors, one per
    misspelling, and none for the keys spelled right. Marked slow: a cold mypy reads the whole core (~1 min)."""
    snippet = tmp_path / "reader.py"
    snippet.write_text(SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), "--no-error-summary",
         "--follow-imports=silent", "--cache-dir", str(REPO / ".mypy_cache"), str(snippet)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    errors = [ln for ln in proc.stdout.splitlines() if ": error:" in ln]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for key in ("verdcit", "levles", "conclusoin", "candidat"):
        assert any(f'"{key}"' in ln for ln in errors), (key, proc.stdout)
    assert len(errors) == 4, proc.stdout
    assert not any('"judged"' in ln or '"marks"' in ln for ln in errors)
