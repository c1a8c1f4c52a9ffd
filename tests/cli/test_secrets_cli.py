"""Issue 36, finding 6, "Secrets": credentials that never need the command line, and scrubbed wherever they could
show.

- ``--header-env NAME=VAR``, ``--header-file FILE`` (refused when other users may read it) and
  ``--url-credentials-env VAR`` (user:password for Basic) send what ``--header`` and ``user:password@`` in the URL
  sent, without putting it where ``ps`` shows it; a missing variable or a bad file is one line, exit 2, no value;
- an in-test server on 127.0.0.1 echoes every credential URL-encoded, base64-encoded (alone and as part of an
  encoded header line) and JSON-escaped (once and twice) into its error bodies: none of these reach the record file,
  the report (text and JSON), the quality JSON or the crash log;
- the crash log and every error line lose URL user info and query values.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support.fault_server import ECHO_FORMS, FaultServer, echo_form
from tui.cli import ExitCode, main

KEY = 'Kz9/Q+w=r"t\\y&p%4!abc-key'
TOKEN = 'tok/Fr4g+m3nt=Z9"x-42'
FILE_TOKEN = "fIle+T0ken/with=padding?&"
USER, PASSWORD = "alice-user", 'p@ss/w0rd+Z="q'


@pytest.fixture(scope="module")
def fs():
    with FaultServer() as server:
        yield server


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("SW_TEST_KEY", KEY)
    monkeypatch.setenv("SW_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("SW_TEST_CREDS", f"{USER}:{PASSWORD}")


def header_file(tmp_path, text=f"# team token\nX-File-Token: {FILE_TOKEN}\n\n", mode=0o600):
    p = tmp_path / "headers.txt"
    p.write_text(text)
    p.chmod(mode)
    return p


def forbidden(sent_headers: dict[str, str]) -> set[str]:
    """Every credential the server was sent, and every form echo_forms repeats it in."""
    out = {KEY, TOKEN, FILE_TOKEN, PASSWORD, f"{USER}:{PASSWORD}"}
    for name, value in sent_headers.items():
        if name == "authorization" or name.startswith("x-"):
            vals = [value] + ([value.partition(" ")[2]] if name == "authorization" else [])
            for v in vals:
                out |= {echo_form(f, name, v) for f in ECHO_FORMS}
                out.add(v)
    return out


def assert_clean(blob: str, bad: set[str], where: str) -> None:
    for b in bad:
        assert b not in blob, (where, b)


# ------------------------------------------------------------------ credentials without the command line


def test_header_env_header_file_and_url_credentials_env_are_sent_and_never_recorded(fs, env, tmp_path, capsys):
    rec = tmp_path / "run.jsonl"
    hf = header_file(tmp_path)
    argv = ["run", "--url", fs.url("ok", tokens=2), "--concurrency", "1", "--requests", "2", "--warmup", "0",
            "--no-gpu", "--record", str(rec), "--api-key-env", "SW_UNSET_KEY_VAR",
            "--header-env", "X-Team-Token=SW_TEST_TOKEN", "--header-file", str(hf),
            "--url-credentials-env", "SW_TEST_CREDS"]
    assert main(argv) in (0, 3)
    out = capsys.readouterr()
    import base64

    sent = fs.completions()[-1]["headers"]
    assert sent["x-team-token"] == TOKEN and sent["x-file-token"] == FILE_TOKEN
    assert sent["authorization"] == "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    header = json.loads(rec.read_text().splitlines()[0])
    assert header["headers"] == {"Authorization": "<redacted>", "X-Team-Token": "<redacted>",
                                 "X-File-Token": "<redacted>"}
    assert_clean(rec.read_text() + out.out + out.err, forbidden(sent), "record file and output")


@pytest.mark.parametrize(("mode", "text", "needle"), [
    (0o644, "X-File-Token: v4lue-secret\n", "readable or writable by every user (mode 0644): chmod 600"),
    (0o602, "X-File-Token: v4lue-secret\n", "readable or writable by every user"),
    (0o600, "X-File-Token: ok\nthis line v4lue-secret has no colon\n", "headers.txt:2: expected 'Name: value'"),
])
def test_a_header_file_others_may_read_or_that_is_malformed_is_refused(fs, tmp_path, capsys, mode, text, needle):
    hf = header_file(tmp_path, text, mode)
    argv = ["run", "--url", fs.url("ok"), "--concurrency", "1", "--requests", "1", "--no-gpu",
            "--record", str(tmp_path / "r.jsonl"), "--header-file", str(hf)]
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert needle in err and "v4lue-secret" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()


def test_a_fifo_as_header_file_is_refused_at_once(fs, tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    assert main(["run", "--url", fs.url("ok"), "--concurrency", "1", "--no-gpu", "--record", str(tmp_path / "r.jsonl"),
                 "--header-file", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "needle"), [
    (["--header-env", "X-T=SW_NOT_SET_ANYWHERE"], "--header-env SW_NOT_SET_ANYWHERE: the environment variable"),
    (["--url-credentials-env", "SW_NOT_SET_ANYWHERE"], "--url-credentials-env SW_NOT_SET_ANYWHERE: the environment"),
    (["--url-credentials-env", "SW_TEST_KEY"], "expected user:password in SW_TEST_KEY"),
    (["--header-env", "no-equals-sign"], "expected NAME=VAR"),
])
def test_a_missing_or_bad_variable_is_one_line_exit_2_without_a_value(fs, env, tmp_path, capsys, flags, needle):
    assert main(["run", "--url", fs.url("ok"), "--concurrency", "1", "--no-gpu",
                 "--record", str(tmp_path / "r.jsonl"), *flags]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert needle in err and KEY not in err


def test_credentials_in_the_url_and_from_a_variable_are_refused(fs, env, tmp_path, capsys):
    url = fs.url("ok").replace("http://", "http://bob:pw-in-url@")
    assert main(["run", "--url", url, "--concurrency", "1", "--no-gpu", "--record", str(tmp_path / "r.jsonl"),
                 "--url-credentials-env", "SW_TEST_CREDS"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "give the credentials once" in err and "pw-in-url" not in err


# ------------------------------------------------------------------ echoed in every form: records, report, quality


def test_echoed_credentials_never_reach_the_record_the_report_or_the_quality_json(fs, env, tmp_path, capsys):
    rec = tmp_path / "run.jsonl"
    hf = header_file(tmp_path)
    common = ["--header-env", "X-Team-Token=SW_TEST_TOKEN", "--header-file", str(hf)]
    assert main(["run", "--url", fs.url("echo_forms"), "--concurrency", "1", "--requests", str(2 * len(ECHO_FORMS)),
                 "--warmup", "0", "--no-gpu", "--record", str(rec), "--api-key-env", "SW_UNSET_KEY_VAR",
                 "--url-credentials-env", "SW_TEST_CREDS", "--min-window-minutes", "0", *common]) in (1, 3)
    sent_run = fs.completions()[-1]["headers"]
    assert {e["echoed"].split()[1] for e in fs.completions()[-len(ECHO_FORMS):]}  # the server did echo them
    assert main(["report", str(rec), "--min-window-minutes", "0"]) in (1, 3)
    assert main(["report", str(rec), "--json", "--min-window-minutes", "0"]) in (1, 3)
    out_run = capsys.readouterr()
    details = [json.loads(x).get("error_detail") for x in rec.read_text().splitlines()]
    assert sum(1 for d in details if d and "<redacted>" in d) == 2 * len(ECHO_FORMS)
    qjson = tmp_path / "quality.json"
    assert main(["quality", "--url", fs.url("echo_forms"), "--api-key-env", "SW_TEST_KEY", "--max-context", "4096",
                 "--out", str(qjson), *common]) == 3
    out_q = capsys.readouterr()
    sent_q = fs.completions()[-1]["headers"]
    assert sent_q["authorization"] == f"Bearer {KEY}"
    bad = forbidden(sent_run) | forbidden(sent_q)
    assert_clean(rec.read_text(), bad, "record file")
    assert_clean(out_run.out + out_run.err, bad, "run and report output")
    assert_clean(qjson.read_text() + out_q.out + out_q.err, bad, "quality JSON and output")


# ------------------------------------------------------------------ the crash log and error lines


def test_the_crash_log_holds_no_credential_url_user_info_or_query_value(fs, env, tmp_path, monkeypatch, capsys):
    import tui.cli.report as R

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    hf = header_file(tmp_path)
    forms = [echo_form(f, "x-team-token", TOKEN) for f in ECHO_FORMS] + [echo_form("b64", "a", KEY)]

    def boom(*_a, **_k):
        raise RuntimeError("boom at http://carol:crash-pw-77@h:1/v1?api_key=q-token-88 with " + " ".join(forms))

    monkeypatch.setattr(R, "report_at_settings", boom)
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"type": "request", "id": "a", "t_sent": 1.8e9, "t_end": 1.8e9 + 1, "complete": True,
                                "t_intended": 1.8e9, "t_first_token": 1.8e9 + 0.5}) + "\n")
    argv = ["report", str(seed), "--verify-key-env", "SW_TEST_KEY", "--header-env", "X-Team-Token=SW_TEST_TOKEN",
            "--header-file", str(hf), "--url-credentials-env", "SW_TEST_CREDS",
            "--server-log", "http://dave:argv-pw-99@h/?token=argv-tok-11"]
    from tui.cli.crash import report_internal_error

    try:
        boom()
    except RuntimeError as exc:
        assert report_internal_error(exc, argv=argv) == 70
    line = capsys.readouterr().err
    (log,) = (tmp_path / "cache" / "servewatch").glob("crash-*.log")
    text = log.read_text()
    assert "Traceback" in text
    bad = {KEY, TOKEN, FILE_TOKEN, PASSWORD, "crash-pw-77", "q-token-88", "argv-pw-99", "argv-tok-11", *forms}
    assert_clean(text + line, bad, "crash log and line")
    assert "http://<redacted>@h:1/v1?api_key=<redacted>" in text


def test_an_error_line_naming_a_url_loses_its_user_info_and_query(tmp_path, capsys):
    assert main(["report", "http://erin:line-pw-31@h/run.jsonl?token=line-tok-32"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "line-pw-31" not in err and "line-tok-32" not in err and "erin" not in err


def test_the_header_file_mode_rule_is_documented():
    from tests.support.paths import REPO

    text = (REPO / "docs" / "live-load.md").read_text()
    assert "--header-file" in text and "chmod 600" in text and "--url-credentials-env" in text
