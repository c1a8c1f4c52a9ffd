"""A FAIL made of the few request lines the reader could read is UNDECIDED (exit 3) in every view, with the count."""

import json

from tui.cli import main

T0 = 1_767_225_600.0
REASON = "400 request lines unreadable: counted as good they would change this FAIL"


def _req(i, t, ok):
    return {"type": "request", "id": f"r{i}", "t_intended": t, "t_sent": t, "t_first_token": t + 0.2 if ok else None,
            "t_end": t + 0.7, "input_tokens": 16, "output_tokens": 8 if ok else 0, "finish_reason": "length" if ok
            else None, "http_status": 200 if ok else 500, "complete": ok, "error": None if ok else "http_5xx",
            "phase": "measure", "level": 4, "round": 1}


def _write(path, refused=True):
    lines = [{"type": "run", "schema_version": 1, "started_at": T0, "synthetic": False}]
    lines += [_req(i, T0 + 12.0 * i, False) for i in range(11)]  # 11 readable requests over 120 s, all failed
    for i in range(400):  # 400 good requests the reader refuses (a string where a time must be)
        d = _req(100 + i, T0 + 1.0 + 0.3 * i, True)
        if refused:
            d["t_end"] = "soon"
        lines.append(d)
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return path


def test_report_exit_3_and_the_reason_line(tmp_path, capsys):
    p = _write(tmp_path / "r.jsonl")
    rc = main(["report", "--details", str(p), "--min-window-minutes", "1"])
    out = capsys.readouterr().out
    assert rc == 3
    assert "verdict=UNDECIDED" in out and REASON in out and "400 malformed" in out
    rc = main(["report", "--details", str(p), "--min-window-minutes", "1", "--json"])
    v = json.loads(capsys.readouterr().out)["measured"]["verdict"]
    assert rc == 3 and v["state"] == "UNDECIDED" and v["reason"].startswith(REASON)


def test_the_same_file_without_the_refused_lines_fails(tmp_path, capsys):  # the control
    p = tmp_path / "f.jsonl"
    p.write_text("".join(line for line in _write(tmp_path / "r.jsonl").read_text().splitlines(True)
                         if '"soon"' not in line))
    assert main(["report", "--details", str(p), "--min-window-minutes", "1"]) == 1


def test_accept_is_not_a_fail_either(tmp_path, capsys):
    p = _write(tmp_path / "r.jsonl")
    out = tmp_path / "acc"
    rc = main(["accept", "--records", str(p), "--out", str(out), "--min-window-minutes", "1"])
    capsys.readouterr()
    assert rc == 3
    text = "\n".join(f.read_text() for f in out.iterdir() if f.suffix in (".md", ".json"))
    assert REASON in text


def test_compare_counts_the_unreadable_lines_of_a_file(tmp_path, capsys):
    from tui.sources.evidence_monitor import compare_run
    from tui.sources.evidence_reader import ReadSettings, open_evidence

    run = compare_run(open_evidence(str(_write(tmp_path / "r.jsonl")), ReadSettings()), 1000.0)
    assert run["unreadable"] == {4: 400}
