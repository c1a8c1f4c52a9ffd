"""One test per way an error could be disguised: an internal error says so (exit 70, one line, the traceback in a log
file or with --debug) and is never disguised as bad input or FAIL; no command writes onto one of its own
inputs (path, symlink, hard link); output files appear whole or not at all; an unknown theme and a console
without a terminal are one line and exit 2 before the UI; the console takes no snapshots once the replay has
ended with nothing new."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tui.cli import ExitCode, main
from tui.core.exitcodes import UsageError

REPO = REPO
SEED = REPO / "sample_logs" / "seed.jsonl"
AIPERF = REPO / "tests" / "fixtures" / "imports" / "aiperf" / "profile_export.jsonl"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """The user's cache folder for this test (the crash log goes under it)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


def _err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


# ====================================================================== internal errors


def _boom(*_a, **_k):
    raise ValueError("cannot convert float NaN to integer (key sk-abcdef1234567890)")


def test_a_bug_in_a_command_is_exit_70_with_one_line_and_a_log_file(cache, monkeypatch, capsys, tmp_path):
    import tui.core.report as R  # report_at_settings (tui.core.report) calls build_report

    monkeypatch.setattr(R, "build_report", _boom)
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(SEED)]) == ExitCode.INTERNAL == 70
    lines = _err_lines(capsys)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("servewatch: internal error")
    assert " at tui/core/report.py:report_at_settings:" in line  # the failing place: the innermost servewatch frame
    assert "ValueError: cannot convert float NaN to integer" in line
    assert "sk-abcdef1234567890" not in line  # scrubbed
    logs = list((cache / "servewatch").glob("crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in line
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text and "sk-abcdef1234567890" not in text
    assert not list(tmp_path.glob("crash-*"))  # never in the current folder


def test_debug_prints_the_traceback_and_writes_no_log(cache, monkeypatch, capsys):
    import tui.core.report as R  # report_at_settings (tui.core.report) calls build_report

    monkeypatch.setattr(R, "build_report", _boom)
    assert main(["--debug", "report", str(SEED)]) == 70
    assert main(["report", str(SEED), "--debug"]) == 70  # a global flag: anywhere on the line
    err = capsys.readouterr().err
    assert err.count("Traceback (most recent call last)") == 2 and "traceback above" in err
    assert not (cache / "servewatch").exists() or not list((cache / "servewatch").glob("crash-*.log"))


@pytest.mark.parametrize("argv", [["report", str(SEED)], ["accept", "--records", str(SEED), "--no-html"]])
def test_a_value_error_from_a_bug_in_the_reading_path_is_not_bad_input(cache, monkeypatch, capsys, tmp_path, argv):
    """Issue 18: "a NaN reaching a format in another path is reported as bad input (exit 2)"."""
    from tui.core.monitor import Monitor

    monkeypatch.setattr(Monitor, "add_many", _boom)
    if argv[0] == "accept":
        argv = [*argv, "--out", str(tmp_path / "acc")]
    assert main(argv) == 70
    assert "internal error" in capsys.readouterr().err


def test_compare_and_replay_baseline_do_not_disguise_a_bug_as_bad_input(cache, monkeypatch, capsys):
    import tui.sources.evidence_reader as reader

    monkeypatch.setattr(reader, "iter_blocks", _boom)  # the one reader that compare and the baseline go through
    assert main(["compare", str(SEED), str(SEED)]) == 70
    from tui.cli.replay import load_baseline

    with pytest.raises(ValueError, match="NaN"):
        load_baseline(str(SEED), 1000.0)


def test_bad_usage_and_bad_input_still_exit_2(capsys, tmp_path):
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json at all\n")
    assert main(["report", str(bad)]) == 2
    assert main(["budget", "--params", "nonsense"]) == 2
    lines = _err_lines(capsys)
    assert lines and not any("internal error" in x for x in lines)


def test_a_usage_error_raised_by_a_command_is_still_exit_2(monkeypatch, capsys):
    import tui.core.report as R  # report_at_settings (tui.core.report) calls build_report

    def refuse(*_a, **_k):
        raise UsageError("a one-line reason")

    monkeypatch.setattr(R, "build_report", refuse)
    assert main(["report", str(SEED)]) == 2
    assert _err_lines(capsys) == ["servewatch: a one-line reason"]


def test_exit_70_is_documented_in_the_readme_and_the_help():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "**70**" in readme
    from tui.core.exitcodes import EXIT_CODES_DOC

    assert "70 internal error" in EXIT_CODES_DOC
    assert ExitCode.INTERNAL not in (0, 1, 2, 3, 130, 141)


# ====================================================================== never onto an input


def _converted(tmp_path) -> Path:
    src = tmp_path / "profile_export.jsonl"
    src.write_bytes(AIPERF.read_bytes())
    return src


def test_import_onto_its_own_input_is_refused_and_the_input_kept(tmp_path, capsys):
    src = _converted(tmp_path)
    before = src.read_bytes()
    assert main(["import", str(src), "--out", str(src)]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "refusing to write onto an input" in lines[0]
    assert src.read_bytes() == before


@pytest.mark.parametrize("link", ["symlink", "hardlink", "relative"])
def test_import_onto_its_input_through_a_link_is_refused(tmp_path, capsys, monkeypatch, link):
    src = _converted(tmp_path)
    before = src.read_bytes()
    out = tmp_path / "other-name.jsonl"
    if link == "symlink":
        out.symlink_to(src)
    elif link == "hardlink":
        os.link(src, out)
    else:
        monkeypatch.chdir(tmp_path)
        out = Path("./sub/../profile_export.jsonl")
        (tmp_path / "sub").mkdir()
    assert main(["import", str(src), "--out", str(out)]) == 2
    assert len(_err_lines(capsys)) == 1
    assert src.read_bytes() == before


def test_every_output_flag_is_checked_against_the_inputs(tmp_path, capsys):
    rec = tmp_path / "run.jsonl"
    rec.write_bytes(SEED.read_bytes())
    before = rec.read_bytes()
    acc = tmp_path / "acc"
    acc.mkdir()
    (acc / "acceptance.json").write_bytes(before)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2}))
    cases = [
        ["compare", str(rec), str(SEED), "--out", str(rec)],
        ["accept", "--records", str(acc / "acceptance.json"), "--out", str(acc)],
        ["budget", "--config", str(cfg), "--out", str(cfg)],
        ["run", "--url", "http://127.0.0.1:9", "--trace", str(rec), "--record", str(rec)],
        ["sweep", "--url", "http://127.0.0.1:9", "--record", str(rec), "--sweep-json", str(rec)],
        ["quality", "--url", "http://127.0.0.1:9", "--baseline", str(rec), "--out", str(rec)],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        lines = _err_lines(capsys)
        assert len(lines) == 1 and ("input" in lines[0] or "one file" in lines[0]), (argv, lines)
    assert rec.read_bytes() == before and (acc / "acceptance.json").read_bytes() == before


# ====================================================================== whole or not at all


def test_an_output_interrupted_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    from tui.sources.outfiles import atomic_text, write_text_atomic

    out = tmp_path / "report.json"
    out.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_text(out) as fh:
        fh.write("half of a new rep")
        raise RuntimeError("crash in the middle")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    write_text_atomic(out, "new\n")
    assert out.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_full_disk_while_importing_keeps_the_previous_output(tmp_path, monkeypatch, capsys):
    src = _converted(tmp_path)
    out = tmp_path / "run.jsonl"
    out.write_text("previous conversion\n")
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert main(["import", str(src), "--out", str(out), "--force"]) == 2  # an existing --out needs --force
    assert "No space left on device" in capsys.readouterr().err
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert out.read_text() == "previous conversion\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile_export.jsonl", "run.jsonl"]


def test_a_symlinked_output_is_refused_and_the_file_it_points_to_kept(tmp_path):
    """Issue 36 finding 5: a link planted where an output goes redirected the report onto another file (it was
    written through). Now refused, one line; the file it points to is untouched."""
    from tui.sources.outfiles import OutputRefused, write_text_atomic

    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(OutputRefused, match="symbolic link"):
        write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


# ====================================================================== the console


def test_an_unknown_theme_is_one_line_and_exit_2_before_the_ui(monkeypatch, capsys):
    from tui.app import ServewatchApp

    def no_ui(self, *a, **k):
        raise AssertionError("the UI started")

    monkeypatch.setattr(ServewatchApp, "run", no_ui)
    assert main(["--theme", "no-such-theme"]) == 2
    assert main(["replay", str(SEED), "--theme", "no-such-theme"]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 2 and all("unknown theme 'no-such-theme'" in x for x in lines)
    assert "dark" in lines[0] and "light" in lines[0] and "high-contrast" in lines[0]  # the themes it knows


def test_the_console_without_a_terminal_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    monkeypatch.setattr(sys.__stdin__, "isatty", lambda: False)
    assert main(["replay", str(SEED)]) == 2
    lines = _err_lines(capsys)
    assert len(lines) == 1 and "needs a terminal" in lines[0] and "standard input" in lines[0]


@pytest.mark.parametrize("stdin", ["devnull", "pipe"])
def test_the_console_without_a_terminal_exits_at_once_instead_of_spinning(stdin):
    """`servewatch < /dev/null` and `servewatch | tail -2`: the real console process, bounded in time."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TEXTUAL_DRIVER", None)
    r = subprocess.run([sys.executable, "-m", "tui", "--max-speed"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=60,
                       stdin=subprocess.DEVNULL if stdin == "devnull" else subprocess.PIPE)
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(r.stderr.splitlines()) == 1 and "needs a terminal" in r.stderr


async def test_after_the_replay_ended_a_tick_takes_no_snapshot(tmp_path):
    from tests.console.test_app import SIZE, make_app, settled

    app, src, sink = make_app(SEED, tmp_path=tmp_path, max_speed=True)
    calls = []
    real = sink.snapshot

    def counted():
        calls.append(time.monotonic())
        return real()

    sink.snapshot = counted  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, app, src, sink)
        app.console_screen.tick()  # the first tick after the end may still render the final snapshot
        before, idle_before = len(calls), app.console_screen.idle_ticks
        for _ in range(20):
            app.console_screen.tick()
        assert len(calls) == before  # nothing new: no snapshot taken
        assert app.console_screen.idle_ticks == idle_before + 20
        app.console_screen.tick(force=True)  # a forced tick (a key, a resize) still renders
        assert len(calls) == before + 1
        assert "end" in app.console_screen.mode_badge


def test_a_crash_inside_the_console_is_raised_not_returned_as_no_decision(monkeypatch, tmp_path):
    """Textual shows an unhandled exception and returns no value, which the command line read as exit 3
    ("no decision"); the app raises it again so the boundary says internal error (70)."""
    from tests.console.test_app import make_app
    from tui.app import ServewatchApp

    def broken(self):
        raise RuntimeError("a bug in a pane")

    monkeypatch.setattr(ServewatchApp, "on_mount", broken)
    app, _src, _sink = make_app(SEED, tmp_path=tmp_path, max_speed=True)
    with pytest.raises(RuntimeError, match="a bug in a pane"):
        app.run(headless=True, size=(120, 40))
