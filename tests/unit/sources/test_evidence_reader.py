"""The one way in for evidence (tui.sources.evidence_reader): a path or standard input opened once, what it
holds decided once, the typed run handed to report, accept, compare and the watch replay alike."""

from __future__ import annotations

import builtins
import dataclasses
import io
import json
import math
import os
import sys
from pathlib import Path

import pytest

import tests.support.evidence_files as E
from tests.support.paths import REPO
from tui.cli import main
from tui.core import defaults as D
from tui.core.chain import verify_stream
from tui.core.monitor import MonitorConfig
from tui.core.records import LineIssue, RequestRecord
from tui.core.runs import SeveralRuns
from tui.sources.evidence_monitor import monitor_of
from tui.sources.evidence_probe import RECORDS, WATCH, probe_stream
from tui.sources.evidence_reader import IMPORT, LAST_RUN, ReadSettings, check_runs, open_evidence
from tui.sources.importing import ImportProblem

ROOT = REPO
FIX = ROOT / "tests" / "fixtures" / "imports"


def _records(tmp_path: Path, name: str = "run.jsonl", extra: str = "") -> Path:
    p = E.write(tmp_path / name, E.honest_closed(level=2, seconds=60.0))
    if extra:
        with open(p, "a", encoding="utf-8") as fh:
            fh.write(extra)
    return p


def _watch(tmp_path: Path) -> Path:
    from tui.core import watch as W

    lines = [json.dumps({"type": "run", "schema": "servewatch.record/1", "schema_version": 1, "synthetic": False,
                         "source": {"kind": "watch", "tool": "servewatch"}, "watch": {"scope": "one replica"}})]
    for k in range(3):
        ttft = ((0.5, 90.0), (1.0, 99.0), (math.inf, 100.0))
        w = W.Window(E.T0 + 30 * k, E.T0 + 30 * (k + 1), "vllm", "metrics", ttft=ttft, failed=0.0)
        lines.append(json.dumps(W.window_to_record(w)))
    p = tmp_path / "w.jsonl"
    p.write_text("\n".join(lines) + "\nnot json\n")
    return p


def _items(ev) -> list:
    return [it for block in ev.blocks() for it in block]


def test_the_reader_tells_records_a_watch_recording_and_an_export_apart(tmp_path):
    with open_evidence(str(_records(tmp_path))) as ev:
        assert ev.kind == RECORDS and ev.format in (None, "servewatch")
        items = _items(ev)
    assert sum(type(it) is RequestRecord for it in items) > 0 and ev.integrity is not None
    with open_evidence(str(_watch(tmp_path))) as ev:
        assert ev.kind == WATCH
    with open_evidence(str(_watch(tmp_path)), ReadSettings(watch=False)) as ev:  # accept, compare: records
        assert ev.kind == RECORDS
    export = FIX / "vllm" / "vllm_bench_appended_c1_c4_from_source.jsonl"
    with open_evidence(str(export)) as ev:
        assert ev.kind == IMPORT and ev.format == "vllm-bench"
        assert sum(type(it) is RequestRecord for it in _items(ev)) > 0


def test_a_bad_line_comes_back_with_its_file_and_line(tmp_path):
    p = _records(tmp_path, extra="this is not json\n")
    n = len(p.read_text().splitlines())
    with open_evidence(str(p)) as ev:
        issues = [it for it in _items(ev) if isinstance(it, LineIssue)]
    assert len(issues) == 1 and issues[0].line == n and issues[0].source == str(p)


def test_another_tools_summary_is_refused_in_one_line(tmp_path):
    summaries = [p for p in FIX.rglob("*") if p.is_file() and "summary" in p.name.lower()]
    if not summaries:
        pytest.skip("no summary fixture")
    refused = 0
    for p in summaries:
        try:
            open_evidence(str(p)).close()
        except ImportProblem as exc:
            assert str(exc).startswith(str(p)) and "\n" not in str(exc)
            refused += 1
    assert refused >= 1


def test_report_opens_the_file_once(tmp_path, monkeypatch, capsys):
    """Before the reader, `report FILE` opened the file three times (a watch probe, a format probe, the read)."""
    p = str(_records(tmp_path))
    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file, *a, **k):
        if os.fspath(file) == p if isinstance(file, (str, os.PathLike)) else False:
            opened.append(p)
        return real_open(file, *a, **k)

    real_os_open = os.open

    def counting_os_open(file, *a, **k):  # tui.sources.infiles opens regular files with os.open (O_NONBLOCK)
        if isinstance(file, (str, os.PathLike)) and os.fspath(file) == p:
            opened.append(p)
        return real_os_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(os, "open", counting_os_open)
    main(["report", "--details", p, "--min-window-minutes", "0"])
    assert "verdict=" in capsys.readouterr().out
    assert opened == [p]


def test_standard_input_is_read_once_and_judged_like_the_file(tmp_path, monkeypatch, capsys):
    p = _records(tmp_path)
    data = p.read_bytes()
    assert main(["report", "--details", str(p), "--json", "--min-window-minutes", "0"]) in (0, 1, 3)
    from_file = json.loads(capsys.readouterr().out)

    class OneShot(io.BytesIO):
        reads = 0

        def read(self, n=-1):
            if self.tell() >= len(data) and n != 0:
                OneShot.reads += 1
                assert OneShot.reads <= 1, "standard input read again after its end"
            return super().read(n)

    class Stdin:
        buffer = OneShot(data)

    monkeypatch.setattr(sys, "stdin", Stdin())
    assert main(["report", "--details", "-", "--json", "--min-window-minutes", "0"]) in (0, 1, 3)
    from_stdin = json.loads(capsys.readouterr().out)
    assert from_stdin["measured"]["verdict"] == from_file["measured"]["verdict"]
    assert from_stdin["measured"]["window"]["n"] == from_file["measured"]["window"]["n"]


def test_a_pipe_that_cannot_seek_gets_back_the_bytes_the_probe_read(tmp_path):
    p = _records(tmp_path)
    data = p.read_bytes()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: the whole file into the pipe, then gone
        os.close(r)
        with os.fdopen(w, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        probe, stream = probe_stream(fh, None)
        assert probe.kind == RECORDS
        assert stream.read() == data
    os.waitpid(pid, 0)


def test_the_last_run_is_the_one_appended_and_several_runs_are_never_merged(tmp_path):
    one = E.honest_closed(level=2, seconds=60.0)
    two = E.honest_closed(level=4, seconds=60.0)
    two[0] = dict(two[0], run_id="second-run")
    p = E.write(tmp_path / "two.jsonl", one + two)
    with pytest.raises(SeveralRuns):
        check_runs(str(p), None)
    with open_evidence(str(p), ReadSettings(pick_run=LAST_RUN)) as ev:
        mon = monitor_of(ev, MonitorConfig(min_window_s=0))
    assert {lv for lv, _rnd in mon.levels} == {4.0}
    with pytest.raises(Exception, match="standard input"):
        _items(open_evidence("-", ReadSettings(pick_run=LAST_RUN)))


def test_the_chain_is_verified_in_the_same_pass_as_the_read(tmp_path):
    from tests.unit.core.test_chain import write_run

    p = tmp_path / "chained.jsonl"
    write_run(p)
    with open(p, "rb") as fh:
        expected = verify_stream(fh)
    with open_evidence(str(p)) as ev:
        _items(ev)
    # the run judged (issue 36: per run), here the file's only run: lines 1-18
    assert ev.integrity.span == (1, 18)
    assert dataclasses.replace(ev.integrity, span=None) == expected and ev.integrity.state == "intact"
    export = FIX / "vllm" / "vllm_bench_appended_c1_c4_from_source.jsonl"
    with open(export, "rb") as fh:
        expected = verify_stream(fh)
    with open_evidence(str(export), ReadSettings(verify_imported=True)) as ev:  # compare shows it
        _items(ev)
    assert ev.integrity == expected


def test_a_watch_recording_is_judged_and_verified_in_one_pass(tmp_path):
    from tui.core.watch import WatchConfig
    from tui.sources.evidence_watch import read_watch

    p = _watch(tmp_path)
    with open_evidence(str(p)) as ev:
        got = read_watch(ev, WatchConfig(min_window_s=0))
    with open(p, "rb") as fh:
        assert got.integrity == verify_stream(fh)
    assert got.engine == "vllm" and got.judgement.windows == 3
    assert got.problems == [f"{p}:5: invalid JSON: Expecting value: line 1 column 1 (char 0)"]


def test_watch_settings_take_their_defaults_from_the_one_home():
    from tui.sources.watch_setup import WatchSettings

    s = WatchSettings(metrics_url="http://127.0.0.1:9/metrics")
    cfg = s.watch_config()
    assert (cfg.slo_ttft_ms, cfg.target, cfg.alpha, cfg.min_window_s) == (D.SLO_TTFT_MS, D.TARGET, D.ALPHA,
                                                                          D.MIN_WINDOW_S)
    assert s.scrape_interval == D.WATCH_METRICS_INTERVAL_S
    assert WatchSettings(prometheus_url="http://127.0.0.1:9").scrape_interval == D.WATCH_PROMETHEUS_INTERVAL_S
    assert WatchSettings(interval=2.0).scrape_interval == 2.0


def test_the_watch_command_line_builds_the_settings_the_sources_take():
    from tui.cli import build_parser
    from tui.cli.watch import settings_from_args

    args = build_parser().parse_args(["watch", "--metrics-url", "http://127.0.0.1:9/metrics", "--header", "X-A: b",
                                      "--slo-ttft-ms", "750"])
    s = settings_from_args(args)
    assert s.metrics_url == "http://127.0.0.1:9/metrics" and s.headers == (("X-A", "b"),)
    assert s.slo_ttft_ms == 750.0 and s.request_headers() == {"X-A": "b"}


def test_the_version_is_the_installed_distributions(monkeypatch):
    import importlib
    import importlib.metadata as md

    import tui

    try:
        installed = md.version("servewatch")
    except md.PackageNotFoundError:
        installed = "0+unknown"
    assert tui.__version__ == installed

    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "version", missing)
    try:
        assert importlib.reload(tui).__version__ == "0+unknown"  # honest, never a made-up number
    finally:
        monkeypatch.undo()
        importlib.reload(tui)


def test_the_replays_one_pass_check_says_what_the_line_by_line_check_said(tmp_path, monkeypatch):
    from tui.sources.evidence_reader import replay_check
    from tui.sources.replay import validate_record_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "junk.jsonl").write_text('{"a": 1}\nnot json\n\n[1, 2]\n')
    (tmp_path / "empty.jsonl").write_text("")
    _records(tmp_path, "good.jsonl", extra="not json\n")
    for name in ("junk.jsonl", "./junk.jsonl", "empty.jsonl", "good.jsonl"):
        assert replay_check(name, None) == validate_record_file(name), name
    assert replay_check("good.jsonl", None) is None and replay_check("junk.jsonl", None) is not None


def test_a_line_that_only_contains_the_words_is_not_a_watch_recording(tmp_path, capsys):
    """Found by the report fuzz test: the bytes ``"type":"watch"`` alone (not a JSON object) made the file a watch
    recording "without usable watch records"; it is not a record file at all."""
    from tui.cli import main
    from tui.sources.evidence_probe import is_watch_head

    assert not is_watch_head([b'"type":"watch"'])
    assert not is_watch_head([b'{"note": "\\"type\\":\\"watch\\""}'])
    assert is_watch_head([b'{"type": "watch", "t": 1}'])
    assert is_watch_head([b'{"type":"run","kind":"watch"}'])
    p = tmp_path / "f.jsonl"
    p.write_bytes(b'"type":"watch"')
    assert main(["report", "--details", str(p)]) == 2
    assert "not a servewatch record file (0 of 1" in capsys.readouterr().err
