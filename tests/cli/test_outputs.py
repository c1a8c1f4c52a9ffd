"""Issue 36 "Outputs" (finding 5): a command's outputs are one run's, written whole, never onto an input, never
through a link.

- every path flag of every command is declared with its role (``tui.cli.declare.path``), the one list the
  own-input guard reads: a generated family, every (input flag, output flag) pair of every command given the same
  file, is refused before anything runs (``--dataset`` and ``--server-log`` were missed: ``run --dataset X
  --record X`` appended records to the dataset, ``report --server-log L --html L`` overwrote the engine log);
- accept's acceptance.md, .json and .html are one set: a full disk part-way (ENOSPC injected into the writer) leaves
  the previous set whole (it left new md/json saying FAIL beside the old html saying PASS), a failure while the set
  is renamed leaves no set at all and says so, and ``--no-html`` removes the previous run's page and says so;
- ``import --out`` onto an existing file (a signed record file was replaced silently, exit 0) needs ``--force``;
- a symlink planted where an output goes is refused (accept wrote through one), for every writer; a symlinked
  output folder is followed (the user's choice of folder, documented).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tui.cli import COMMANDS, build_parser, main, settings_of
from tui.cli.guard import command_parser, inputs_of, outputs_of, own_input_refusal, path_actions
from tui.cli.options import APPEND, INPUT, OUTPUT, OUTPUT_DIR, PATH_ROLES

SEED = REPO / "sample_logs" / "seed.jsonl"
DEFAULT = REPO / "sample_logs" / "default.jsonl"
AIPERF = REPO / "tests" / "fixtures" / "imports" / "aiperf" / "profile_export.jsonl"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


# ====================================================================== one list of path flags


def test_every_path_flag_of_every_command_has_a_role():
    top = build_parser()
    parsers = {"(console)": top, **_subparsers(top)}
    assert set(COMMANDS) <= set(parsers)
    checked = 0
    for name, p in parsers.items():
        for a in p._actions:
            if isinstance(a, (argparse._SubParsersAction, argparse._HelpAction, argparse._VersionAction)):
                continue
            path_like = a.metavar in ("FILE", "DIR") or not a.option_strings
            role = getattr(a, "path_role", None)
            if path_like:
                checked += 1
                assert role in PATH_ROLES, f"{name} {a.option_strings or a.dest}: a path flag without a role"
            else:
                assert role is None, f"{name} {a.option_strings}: a role on a flag that is no path"
    assert checked >= 40


#: the fewest flags each command needs to parse (the guard runs right after parsing, before anything else)
_BASE = {"run": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
         "measure": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
         "live": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
         "sweep": ["--url", "http://127.0.0.1:9", "--concurrency", "1"],
         "quality": ["--url", "http://127.0.0.1:9"], "watch": ["--metrics-url", "http://127.0.0.1:9/metrics"],
         "plan": ["--peak-rate", "1"],
         "drill": ["--url", "http://127.0.0.1:9", "--concurrency", "1", "--spike", "3x:10s"]}


def _argv(command: str, parser: argparse.ArgumentParser, given: dict[argparse.Action, str]) -> list[str]:
    base = _BASE.get(command, [])
    if any("--trace" in a.option_strings for a in given):  # --trace is the load itself: not with --concurrency
        base = [x for x in base if x not in ("--concurrency", "1")]
    argv = [command, *base]
    for a in path_actions(parser):  # required positionals and --records get a harmless other file
        if a in given:
            continue
        if not a.option_strings or a.required:
            argv += ([] if not a.option_strings else [a.option_strings[0]]) + [str(SEED)]
    for a, value in given.items():
        argv += ([] if not a.option_strings else [a.option_strings[0]]) + [value]
    return argv


def test_every_input_flag_against_every_output_flag_is_refused(tmp_path):
    """The family: for every command, every (input, output) pair of its path flags naming the same file."""
    top = build_parser()
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(SEED.read_bytes())
    folder = tmp_path / "folder"
    folder.mkdir()
    pairs = 0
    for command, sub in _subparsers(top).items():
        actions = path_actions(sub)
        ins = [a for a in actions if getattr(a, "path_role", None) == INPUT]
        outs = [a for a in actions if getattr(a, "path_role", None) in (OUTPUT, APPEND, OUTPUT_DIR)]
        for i in ins:
            for o in outs:
                if getattr(o, "path_role", None) == OUTPUT_DIR:
                    files = getattr(o, "path_files", ())
                    if not files:
                        continue  # a folder of generated names (the console's --export-dir): no file to collide
                    inside = folder / files[0]
                    inside.write_bytes(SEED.read_bytes())
                    given = {i: str(inside), o: str(folder)}
                else:
                    given = {i: str(victim), o: str(victim)}
                argv = _argv(command, sub, given)
                args = top.parse_args(argv)
                assert command_parser(top, args) is sub
                refusal = own_input_refusal(settings_of(argv))
                assert refusal and "refusing to write onto an input" in refusal, (argv, refusal)
                pairs += 1
    assert pairs >= 30  # the generator did not silently test nothing


@pytest.mark.parametrize("argv", [
    ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--dataset", "{f}", "--record", "{f}"],
    ["sweep", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--dataset", "{f}", "--record", "{f}"],
    ["report", str(SEED), "--server-log", "{f}", "--html", "{f}"],
    ["accept", "--records", str(SEED), "--server-log", "{d}/acceptance.html", "--out", "{d}"],
    ["quality", "--url", "http://127.0.0.1:9", "--set", "{f}", "--out", "{f}"],
    ["replay", "{f}", "--baseline", str(SEED)],  # no output: nothing refused
])
def test_the_missed_inputs_are_refused_end_to_end(tmp_path, argv):
    f = tmp_path / "data.jsonl"
    f.write_bytes(SEED.read_bytes())
    (tmp_path / "acceptance.html").write_bytes(SEED.read_bytes())
    before = f.read_bytes()
    argv = [a.replace("{f}", str(f)).replace("{d}", str(tmp_path)) for a in argv]
    if argv[0] == "replay":
        assert own_input_refusal(settings_of(argv)) is None
        return
    rc, _out, err = run_cli(argv)
    assert rc == 2 and len(err.splitlines()) == 1 and "refusing to write onto an input" in err, err
    assert f.read_bytes() == before and (tmp_path / "acceptance.html").read_bytes() == before


def test_outputs_and_inputs_come_from_the_roles():
    settings = settings_of(["import", "x.json"])
    assert outputs_of(settings) == [("--out", "x.json.servewatch.jsonl")]  # the derived default
    assert inputs_of(settings) == [("FILE", "x.json")]
    settings = settings_of(["accept", "--records", "a", "b", "--out", "d", "--no-html"])
    assert [p for _, p in outputs_of(settings)] == [os.path.join("d", n) for n in
                                                     ("acceptance.md", "acceptance.json", "acceptance.html")]
    assert [p for _, p in inputs_of(settings)] == ["a", "b"]


# ====================================================================== accept's output set


def _accept(out: Path, records: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["accept", "--records", str(records), "--out", str(out), *extra])


def _set(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_a_full_disk_part_way_leaves_the_previous_set_whole(tmp_path, monkeypatch):
    out = tmp_path / "report"
    rc, _o, err = _accept(out, SEED)
    assert sorted(_set(out)) == ["acceptance.html", "acceptance.json", "acceptance.md"], err
    before = _set(out)
    for fail_at in (1, 2, 3):  # the disk fills while the 1st, 2nd or 3rd file of the new set is written
        calls = {"n": 0}
        real_fsync = os.fsync

        def fsync(fd, calls=calls, fail_at=fail_at, real_fsync=real_fsync):
            calls["n"] += 1
            if calls["n"] == fail_at:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        rc, _o, err = _accept(out, DEFAULT)
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert rc == 2 and "No space left on device" in err and "previous run's" in err, err
        assert _set(out) == before, f"a mix of two runs after a full disk at file {fail_at}"


def test_a_failure_while_the_set_is_renamed_leaves_no_set_and_says_so(tmp_path, monkeypatch):
    out = tmp_path / "report"
    _accept(out, SEED)
    real_replace = os.replace
    calls = {"n": 0}

    def replace(a, b):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", replace)
    rc, _o, err = _accept(out, DEFAULT)
    monkeypatch.setattr(os, "replace", real_replace)
    assert rc == 2 and "every file of the set was removed" in err and "never a mix" in err, err
    assert list(out.iterdir()) == []


def test_no_html_removes_the_previous_page_and_says_so(tmp_path):
    out = tmp_path / "report"
    _accept(out, SEED)
    rc, stdout, _err = _accept(out, DEFAULT, "--no-html")
    assert sorted(_set(out)) == ["acceptance.json", "acceptance.md"]
    assert f"removed {out / 'acceptance.html'}" in stdout


def test_compare_writes_its_json_and_page_together(tmp_path, monkeypatch):
    js, page = tmp_path / "c.json", tmp_path / "c.html"
    run_cli(["compare", str(SEED), str(DEFAULT), "--out", str(js), "--html", str(page)])
    before = (js.read_bytes(), page.read_bytes())
    real_fsync = os.fsync
    calls = {"n": 0}

    def fsync(fd):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    rc, _o, err = run_cli(["compare", str(DEFAULT), str(SEED), "--out", str(js), "--html", str(page)])
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert rc == 2 and "No space left" in err
    assert (js.read_bytes(), page.read_bytes()) == before


# ====================================================================== import --out onto an existing file


def test_import_onto_an_existing_file_needs_force(tmp_path):
    from tui.sources.recorder import Recorder

    signed = tmp_path / "signed.jsonl"
    rec = Recorder(str(signed), sign_key=b"k" * 32)
    rec.write({"type": "run", "schema_version": 1})
    rec.close()
    before = signed.read_bytes()
    src = tmp_path / "profile_export.jsonl"
    src.write_bytes(AIPERF.read_bytes())
    rc, _o, err = run_cli(["import", str(src), "--out", str(signed)])
    assert rc == 2 and len(err.splitlines()) == 1 and "exists" in err and "--force" in err
    assert signed.read_bytes() == before
    default = Path(str(src) + ".servewatch.jsonl")
    default.write_text("an earlier conversion\n")
    rc, _o, err = run_cli(["import", str(src)])
    assert rc == 2 and default.read_text() == "an earlier conversion\n"
    rc, _o, _err = run_cli(["import", str(src), "--out", str(signed), "--force"])
    assert rc in (0, 3) and signed.read_bytes() != before


# ====================================================================== no writing through a link


def test_a_link_planted_in_accepts_output_folder_is_refused_before_reading(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "acceptance.html").symlink_to(victim)
    rc, _o, err = _accept(out, SEED)
    assert rc == 2 and len(err.splitlines()) == 1 and "symbolic link" in err, err
    assert victim.read_text() == "precious" and (out / "acceptance.html").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["acceptance.html"]


@pytest.mark.parametrize("argv", [
    ["report", str(SEED), "--html", "{link}"],
    ["compare", str(SEED), str(DEFAULT), "--out", "{link}"],
    ["compare", str(SEED), str(DEFAULT), "--html", "{link}"],
    ["budget", "--out", "{link}"],
    ["import", str(AIPERF), "--out", "{link}", "--force"],
    ["run", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--requests", "1", "--record", "{link}"],
])
def test_every_writer_refuses_a_symlinked_output(tmp_path, argv):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out.link"
    link.symlink_to(victim)
    rc, _o, err = run_cli([a.replace("{link}", str(link)) for a in argv])
    assert rc == 2 and "symbolic link" in err, err
    assert victim.read_text() == "precious" and link.is_symlink()


def test_a_symlinked_output_folder_is_followed(tmp_path):
    real = tmp_path / "shared"
    real.mkdir()
    link = tmp_path / "report"
    link.symlink_to(real, target_is_directory=True)
    rc, _o, err = _accept(link, SEED)
    assert rc in (0, 1, 3), err
    assert sorted(p.name for p in real.iterdir()) == ["acceptance.html", "acceptance.json", "acceptance.md"]
    doc = json.loads((real / "acceptance.json").read_text())
    assert doc["inputs"]["records"] == [str(SEED)]
