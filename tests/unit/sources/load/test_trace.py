"""Arrivals from a trace: the four formats, bad rows, window and speed, the CLI's bad usage, and a short
replay against the fault server (tests/support/fault_server.py) whose requests follow the trace."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServer
from tests.support.paths import REPO
from tui.cli import main
from tui.core.records import parse_object
from tui.sources.load import ConfigError, LoadConfig, run_load
from tui.sources.load.trace import BAD_ROWS_FLOOR, MAX_LISTED, load_trace, parse_window, trace_schedule

ROOT = REPO
TRACES = ROOT / "sample_logs" / "traces"
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BURST_HEAD = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def offsets(trace) -> list[float]:
    return [round(x, 6) for x in trace.offsets]


def open_loop_record(tmp_path: Path, *, mode: str = "open", headers: int = 1) -> Path:
    """A tiny hand-written servewatch record file: two open-loop steps written as requests ended (unsorted)."""
    head = {"type": "run", "schema": "servewatch.record/1", "schema_version": 1, "synthetic": False,
            "load": {"mode": mode, "levels": [2, 4]}}
    lines = [head] * headers
    reqs = [  # (t_intended, level, phase, asked in/out or None)
        (100.0, 1, "warmup", (16, 8)),
        (101.0, 2, "measure", (100, 10)),
        (101.5, 2, "measure", (110, 11)),
        (101.2, 2, "measure", (120, 12)),  # written after a later arrival (records are written as requests end)
        (102.0, 4, "measure", None),  # no *_asked: input_tokens / output_tokens are used
        (102.25, 4, "measure", (140, 14)),
    ]
    for i, (t, level, phase, asked) in enumerate(reqs):
        t += 1_767_225_500.0  # record times are wall-clock epoch seconds (the offsets below are what is kept)
        r = {"type": "request", "id": f"r{i}", "t_intended": t, "t_sent": t + 0.001, "t_first_token": t + 0.1,
             "t_end": t + 0.2, "complete": True, "error": None, "phase": phase, "level": level, "round": 1,
             "input_tokens": 130, "output_tokens": 13}
        if asked:
            r["input_tokens_asked"], r["output_tokens_asked"] = asked
        lines.append(r)
    lines.append({"type": "step", "t": 103.0, "event": "end", "level": 4, "round": 1, "mode": mode})
    p = tmp_path / "rec.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return p


# ---------------------------------------------------------------- formats


def test_azure_seven_fractional_digits_comment_and_sha256(tmp_path):
    p = write(tmp_path, "az.csv", "# synthetic excerpt\n" + AZURE_HEAD
              + "2023-11-16 18:15:46.6805900,374,44\n"
              + "2023-11-16 18:15:47.1805900,1024,0\n"  # a length of 0: sent as 1 token, counted
              + "2023-11-16 18:15:50.6805901,12,300\n")
    t = load_trace(str(p))
    assert offsets(t) == [0.0, 0.5, 4.0]
    assert list(t.input_tokens) == [374, 1024, 12] and list(t.output_tokens) == [44, 1, 300]
    s = t.source
    assert (s["kind"], s["format"], s["file"], s["rows"], s["kept"], s["skipped"], s["clamped"]) == (
        "trace", "azure", "az.csv", 3, 3, 0, 1)
    assert s["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert s["comment"] == "synthetic excerpt" and s["speed"] == 1.0 and s["window"] is None
    assert t.level == round(2 / 4.0, 3)
    assert any("length of 0" in n for n in t.notes)


def test_azure_bad_rows_reported_with_file_and_line_and_counted(tmp_path):
    rows = ["2023-11-16T23:59:59.5Z,10,10",  # line 2: T and Z accepted
            "2023-11-17 00:00:00.5,10,10",  # line 3: across midnight
            "yesterday,10,10",  # 4
            "2023-11-17 00:00:01,ten,10",  # 5
            "2023-11-17 00:00:02,10",  # 6: a field short
            "2023-11-17 00:00:03,-4,10",  # 7: negative
            "2023-11-17 25:00:03,4,10",  # 8: no such hour
            "2023-11-17 00:00:04,10,10"]
    p = write(tmp_path, "az.csv", AZURE_HEAD + "\n".join(rows) + "\n")
    t = load_trace(str(p))
    assert offsets(t) == [0.0, 1.0, 4.5]
    assert t.source["rows"] == 8 and t.source["skipped"] == 5 and t.source["kept"] == 3
    lines = [x.split(": ")[0] for x in t.problems]
    assert lines == [f"{p}:{n}" for n in (4, 5, 6, 7, 8)]
    assert "ContextTokens is not a number" in t.problems[1] and "negative" in t.problems[3]


def test_crlf_bom_bytes_that_are_not_utf8_and_files_that_are_not_traces(tmp_path):
    p = tmp_path / "az.csv"
    p.write_bytes(b"\xef\xbb\xbf" + AZURE_HEAD.encode() + b"2023-11-16 18:15:46.0,10,10\r\n"
                  b"2023-11-16 18:15:47.\xff\xfe,10,10\r\n" + b"2023-11-16 18:15:48.0,20,20\r\n")
    t = load_trace(str(p))
    assert offsets(t) == [0.0, 2.0] and t.source["skipped"] == 1 and t.problems[0].startswith(f"{p}:3: TIMESTAMP")
    assert t.header_block()["problems"][0].startswith("az.csv:3: ")  # the header names the file, not its path
    gz = tmp_path / "trace.csv.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)
    with pytest.raises(ConfigError, match="not a trace servewatch reads"):
        load_trace(str(gz))
    with pytest.raises(ConfigError, match="not a plain file"):
        load_trace("/dev/null")


def test_burstgpt_extra_columns_unsorted_rows_sorted_and_counted(tmp_path):
    p = write(tmp_path, "b.csv", BURST_HEAD
              + "10,ChatGPT,100,20,120,Conversation log\n"
              + "5,GPT-4,50,0,50,API log\n"  # out of order; a failed request (0 response tokens)
              + "\n"  # a blank line is not a row
              + "12.5,ChatGPT,70,30,100,Conversation log\n")
    t = load_trace(str(p))
    assert offsets(t) == [0.0, 5.0, 7.5]
    assert list(t.input_tokens) == [50, 100, 70] and list(t.output_tokens) == [1, 20, 30]
    assert t.source["out_of_order"] == 1 and t.source["clamped"] == 1 and t.source["rows"] == 3
    assert any("out of time order" in n for n in t.notes)


def test_mooncake_milliseconds_and_bad_lines(tmp_path):
    p = write(tmp_path, "m.jsonl",
              '{"timestamp": 0, "input_length": 500, "output_length": 20, "hash_ids": [1, 2]}\n'
              '{"timestamp": 250, "input_length": 600, "output_length": 30}\n'
              'not json\n'
              '{"timestamp": 300, "input_length": true, "output_length": 30}\n'
              '{"timestamp": 1000, "input_length": 700.0, "output_length": 40}\n')
    t = load_trace(str(p))
    assert offsets(t) == [0.0, 0.25, 1.0] and list(t.input_tokens) == [500, 600, 700]
    assert t.source["format"] == "mooncake" and t.source["skipped"] == 2
    assert [x.split(": ")[0] for x in t.problems] == [f"{p}:3", f"{p}:4"]


def test_bundled_synthetic_excerpts_load_and_say_so():
    readme = (TRACES / "README.md").read_text().lower()
    assert "synthetic" in readme and "not excerpts of the real traces" in readme
    formats = {}
    for f in sorted(TRACES.iterdir()):
        if f.name == REAL_RECORDING:
            continue  # the one real recording (below)
        if f.suffix in (".csv", ".jsonl"):
            assert "synthetic" in f.name
            t = load_trace(str(f))
            assert 20 <= t.source["rows"] <= 200 and t.source["skipped"] == 0
            formats[t.source["format"]] = t
            if f.suffix == ".csv":  # the CSVs also say so in their leading comment line
                assert "synthetic" in t.source["comment"]
    assert set(formats) == {"azure", "burstgpt", "mooncake"}


REAL_RECORDING = "sessions-llama.jsonl"


def test_the_bundled_session_recording_is_real_said_so_and_replays_its_sessions():
    readme = (TRACES / "README.md").read_text()
    assert f"`{REAL_RECORDING}` | a servewatch record file: a REAL recording (not synthetic)" in readme
    t = load_trace(str(TRACES / REAL_RECORDING))
    assert t.source["format"] == "servewatch" and t.source["skipped"] == 0 and not t.problems
    rp = t.replay
    assert rp is not None and rp.sessions_mode and len(rp.items) == len(t) == 56  # 56 session starts, 102 turns
    assert sum(len(item.turns) for item in rp.items) == 102
    assert rp.prefix_tokens == 64 and rp.dataset is not None and rp.dataset["example"] is True


# ---------------------------------------------------------------- servewatch records


def test_servewatch_open_loop_record_all_measured_steps_in_order(tmp_path):
    t = load_trace(str(open_loop_record(tmp_path)))
    assert t.source["format"] == "servewatch"
    assert offsets(t) == [0.0, 0.2, 0.5, 1.0, 1.25]  # warmup left out; sorted by t_intended across both steps
    assert list(t.input_tokens) == [100, 120, 110, 130, 140]  # asked, else the recorded input_tokens
    assert list(t.output_tokens) == [10, 12, 11, 13, 14]
    assert t.source["skipped"] == 0 and not t.problems
    assert any("warmup" in n for n in t.notes) and any("2 recorded steps" in n for n in t.notes)
    assert not any("out of time order" in n for n in t.notes)  # records are written as they end: not a problem


def test_closed_loop_and_ambiguous_records_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="closed-loop recording.*no arrival process"):
        load_trace(str(open_loop_record(tmp_path, mode="closed")))
    with pytest.raises(ConfigError, match="more than one run"):
        load_trace(str(open_loop_record(tmp_path, headers=2)))
    with pytest.raises(ConfigError, match="closed-loop"):  # the bundled real run is closed loop
        load_trace(str(ROOT / "sample_logs" / "default.jsonl"))
    p = write(tmp_path, "nohead.jsonl", open_loop_record(tmp_path).read_text().split("\n", 1)[1])
    with pytest.raises(ConfigError, match="no run header"):
        load_trace(str(p))


# ---------------------------------------------------------------- window and speed


def test_window_before_speed_rebased_to_the_first_kept_arrival(tmp_path):
    p = write(tmp_path, "b.csv", BURST_HEAD + "".join(f"{100 + 10 * i},m,10,10,20,x\n" for i in range(10)))
    t = load_trace(str(p), window="20-50", speed=2)  # trace seconds 20, 30, 40 (END excluded)
    assert offsets(t) == [0.0, 5.0, 10.0]
    assert t.source["window"] == [20.0, 50.0] and t.source["speed"] == 2.0 and t.source["kept"] == 3
    assert t.level == 0.2  # (3 - 1) arrivals / 10 s
    assert offsets(load_trace(str(p), window=(60.0, None))) == [0.0, 10.0, 20.0, 30.0]
    assert list(trace_schedule(t)) == [(0.0, 10, 10), (5.0, 10, 10), (10.0, 10, 10)]
    with pytest.raises(ConfigError, match="keeps no arrival"):
        load_trace(str(p), window="95-")
    with pytest.raises(ConfigError, match="two arrivals"):
        load_trace(str(p), window="0-5")


@pytest.mark.parametrize("text", ["60", "-5-10", "a-b", "180-60", "60-60", "1-inf", ""])
def test_bad_windows_are_one_line(text):
    with pytest.raises(ConfigError) as exc:
        parse_window(text)
    assert "\n" not in str(exc.value) and "--trace-window" in str(exc.value)


def test_windows():
    assert parse_window("60-180") == (60.0, 180.0) and parse_window("1.5-") == (1.5, None)


# ---------------------------------------------------------------- refusals


def test_too_many_bad_rows_or_none_usable_refuse_with_one_line(tmp_path):
    good = "".join(f"{i},m,10,10,20,x\n" for i in range(20))
    bad = "".join("x,m,10,10,20,x\n" for _ in range(BAD_ROWS_FLOOR + 1))
    with pytest.raises(ConfigError, match=r"11 of 31 rows are bad \(first: .*b.csv:2: "):
        load_trace(str(write(tmp_path, "b.csv", BURST_HEAD + bad + good)))
    t = load_trace(str(write(tmp_path, "ok.csv", BURST_HEAD + bad[: bad.index("\n") + 1] * 3 + good)))
    assert t.source["skipped"] == 3 and t.source["kept"] == 20
    with pytest.raises(ConfigError, match="no usable rows"):
        load_trace(str(write(tmp_path, "none.csv", BURST_HEAD + "x,m,1,1,2,x\n")))
    for name, text, words in (("empty.csv", "", "is empty"), ("comments.csv", "# only\n\n", "is empty"),
                              ("other.csv", "a,b,c\n1,2,3\n", "not a trace servewatch reads"),
                              ("other.jsonl", '{"a": 1}\n', "not a trace servewatch reads")):
        with pytest.raises(ConfigError, match=words) as exc:
            load_trace(str(write(tmp_path, name, text)))
        assert "\n" not in str(exc.value) and name in str(exc.value)


def test_problems_listed_are_bounded_but_all_counted(tmp_path):
    good = "".join(f"{i},m,10,10,20,x\n" for i in range(1000))
    bad = "x,m,10,10,20,x\n" * (MAX_LISTED + 5)
    t = load_trace(str(write(tmp_path, "b.csv", BURST_HEAD + bad + good)))
    assert len(t.problems) == MAX_LISTED and t.source["skipped"] == MAX_LISTED + 5


def test_speed_must_be_positive(tmp_path):
    p = write(tmp_path, "b.csv", BURST_HEAD + "0,m,1,1,2,x\n1,m,1,1,2,x\n")
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="--trace-speed"):
            load_trace(str(p), speed=bad)


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize("extra, words", [
    (["--concurrency", "2"], "not allowed with argument --trace"),
    (["--rate", "2"], "not allowed with argument --trace"),
    (["--arrival", "constant"], "--arrival cannot be given with it"),
    (["--input-tokens", "12"], "--input-tokens cannot be given with it"),
    (["--output-tokens", "12"], "--output-tokens cannot be given with it"),
    (["--rounds", "2"], "--rounds cannot be given with it"),
    (["--trace-window", "9-3"], "END must be after START"),
    (["--trace-speed", "0"], "must be > 0"),
])
@pytest.mark.parametrize("command", ["run", "live"])
def test_cli_bad_usage_with_trace_is_one_line_exit_2(command, extra, words, capsys):
    argv = [command, "--url", "http://127.0.0.1:9", "--trace", str(TRACES / "azure-synthetic.csv"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_cli_bad_trace_files_name_the_file(tmp_path, capsys):
    rec = open_loop_record(tmp_path, mode="closed")
    for path, words in ((tmp_path / "missing.csv", "no such file"), (tmp_path, "is a directory"),
                        (rec, "closed-loop recording"), (ROOT / "README.md", "not a trace")):
        assert main(["run", "--url", "http://127.0.0.1:9", "--trace", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(path) in err and words in err, err
    assert main(["run", "--url", "http://127.0.0.1:9", "--rate", "1", "--trace-window", "0-10"]) == 2
    assert "--trace-window needs --trace" in capsys.readouterr().err
    assert main(["sweep", "--url", "http://127.0.0.1:9", "--trace", str(TRACES / "azure-synthetic.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --trace" in err


def test_config_from_the_flags(tmp_path):
    from tui.cli import settings_of
    from tui.cli.loadtest import config_from_args

    p = write(tmp_path, "b.csv", BURST_HEAD + "".join(f"{10 * i},m,{5 + i},{7 + i},0,x\n" for i in range(5)))
    parse = settings_of
    cfg = config_from_args(parse(["run", "--url", "http://127.0.0.1:9", "--trace", str(p), "--trace-speed", "4"]))
    assert (cfg.mode, cfg.levels, cfg.rounds, cfg.until_decided, cfg.ignore_eos) == ("open", [0.4], 1, False, True)
    assert cfg.input_tokens == (5, 9) and cfg.output_tokens == (7, 11) and cfg.step_requests is None
    cfg = config_from_args(parse(["run", "--url", "http://127.0.0.1:9", "--trace", str(p), "--no-ignore-eos",
                                  "--requests", "3"]))
    assert cfg.ignore_eos is False and cfg.step_requests == 3
    plain = config_from_args(parse(["run", "--url", "http://127.0.0.1:9", "--rate", "1"]))
    assert (plain.ignore_eos, plain.input_tokens, plain.arrival, plain.burstiness, plain.trace) == (
        False, (128, 128), "poisson", 1.0, None)
    with pytest.raises(ConfigError, match="mean rate"):
        LoadConfig(url="http://127.0.0.1:9", mode="open", levels=[1.0], trace=cfg.trace).validate()


# ---------------------------------------------------------------- a replay against a real (test) server


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
async def test_replay_follows_the_trace_offsets_and_lengths(fs, tmp_path):
    rows = [(0.0, 30, 3), (0.05, 40, 4), (0.05, 50, 5), (0.2, 60, 6), (0.35, 70, 7), (0.5, 80, 8)]
    p = write(tmp_path, "m.jsonl", "".join(json.dumps({"timestamp": t * 1000 * 2, "input_length": i,
                                                       "output_length": o}) + "\n" for t, i, o in rows))
    trace = load_trace(str(p), speed=2.0)  # the file's gaps are twice those above
    cfg = LoadConfig(url=fs.url("ok", tokens=2), mode="open", levels=[trace.level], trace=trace, ignore_eos=True,
                     metrics=False, gpu=False, progress_interval=0, api_key_env=None, read_timeout=5.0,
                     connect_timeout=2.0, until_decided=False)
    out: list[dict] = []
    await run_load(cfg, out.append)
    for d in out:
        parse_object(json.loads(json.dumps(d)))
    hdr = out[0]
    assert hdr["type"] == "run" and hdr["synthetic"] is False
    assert hdr["source"]["kind"] == "trace" and hdr["source"]["file"] == "m.jsonl"
    assert hdr["source"]["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert hdr["source"]["format"] == "mooncake"
    assert hdr["load"]["arrival"] == "trace" and hdr["load"]["trace"]["arrivals"] == 6
    assert hdr["load"]["input_tokens"] == {"min": 30, "max": 80} and hdr["load"]["ignore_eos"] is True
    reqs = sorted((d for d in out if d["type"] == "request"), key=lambda d: d["id"])
    assert len(reqs) == len(rows)  # the step ended when the trace was exhausted
    t0 = reqs[0]["t_intended"]
    for r, (t, n_in, n_out) in zip(reqs, rows, strict=True):
        assert r["t_intended"] - t0 == pytest.approx(t, abs=1e-6)  # the schedule is the trace's
        assert r["t_sent"] >= r["t_intended"]  # sent no earlier (the lateness is recorded in the step)
        assert (r["input_tokens_asked"], r["output_tokens_asked"]) == (n_in, n_out)
        assert r["level"] == trace.level and r["phase"] == "measure"
    bodies = {e["id"]: e["body"] for e in fs.completions()}
    assert [bodies[r["id"]]["max_tokens"] for r in reqs] == [o for _, _, o in rows]
    assert all(bodies[r["id"]]["ignore_eos"] is True for r in reqs)
    start = next(d for d in out if d["type"] == "step" and d["event"] == "start")
    end = next(d for d in out if d["type"] == "step" and d["event"] == "end")
    assert start["arrival"] == "trace" and end["requests"] == len(rows) and "lateness_p99_ms" in end


@pytest.mark.slow  # starts a process or a listening server (tests/conftest.py checks it)
def test_run_trace_through_the_command_line_and_its_report(fs, tmp_path, capsys):
    src = open_loop_record(tmp_path)
    rec = tmp_path / "replay.jsonl"
    code = main(["run", "--url", fs.url("ok", tokens=2), "--trace", str(src), "--trace-speed", "10", "--no-gpu",
                 "--metrics-interval", "60", "--record", str(rec), "--min-window-minutes", "0"])
    out = capsys.readouterr().out
    assert code in (0, 1, 3), out
    assert "one step replaying trace rec.jsonl (servewatch" in out and "trace: 1 warmup requests" in out
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    hdr = lines[0]
    assert hdr["source"]["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    asked = [d["output_tokens_asked"] for d in sorted((d for d in lines if d["type"] == "request"),
                                                      key=lambda d: d["id"])]
    assert asked == [10, 12, 11, 13, 14]
    assert main(["report", str(rec)]) in (0, 1, 3)
    rep = capsys.readouterr().out
    assert "replayed from a trace" in rep and "rec.jsonl" in rep
