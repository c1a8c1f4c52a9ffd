"""Every string from outside is data (issue 36, finding 3): a hostile server and a hostile record file through every
command and every output format.

The payloads (tests/support/hostile.py) carry ESC sequences that clear the screen and set the window title, an OSC-8
link, CR/LF that forge a line, 8-bit CSI, bidi overrides, Rich/Textual markup and a trailing ``[``, ``<img onerror>``,
``<svg onload>``, ``<script>``, ``<!--`` and ``</script>``, markdown links, images and table pipes. They sit in every
free-text field of a record file (url, model, GPU name, dataset name, source fields, server facts, error_detail ...)
and in everything the in-test server says about itself (model id, ``/props`` build string, ``/metrics`` labels,
error bodies). Asserted for each output: no control or format character (terminal text, markdown, JSON as text), no
line starting with the forged marker, markdown that a renderer (markdown-it, HTML on, GFM tables) turns into no tag,
attribute, link or image from the input and no extra table cell, HTML pages whose chart data parses as JSON and
whose body holds no tag or attribute from the input, JSON output that parses and keeps the raw value (not
double-escaped), and never exit 70.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.support.hostile import (
    ALL,
    T0,
    HostileServer,
    control_bytes,
    forged_lines,
    hostile_records,
    payload,
    problems,
    write_jsonl,
)
from tui.cli import main
from tui.core import quality as Q
from tui.core.exitcodes import ExitCode

SCRIPT_DATA = re.compile(r'<script type="application/json" id="chart-data">(.*?)</script>', re.S)
#: tags and attributes a renderer acts on: none may come from the input
ACTIVE_TAGS = {"img", "svg", "script", "iframe", "object", "embed", "style", "link", "meta", "a", "video", "audio",
               "form", "input", "base"}


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # pragma: no cover - main never raises it
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.comments: list[str] = []
        self.cells: list[int] = []  # cells per table row
        self._row = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "tr":
            self._row = 0
        elif tag in ("td", "th"):
            self._row += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self.cells.append(self._row)

    def handle_comment(self, data):
        self.comments.append(data)


def _tags(html_text: str) -> _Tags:
    p = _Tags()
    p.feed(html_text)
    p.close()
    return p


def terminal_problems(text: str) -> list[str]:
    return problems(text)


def markdown_problems(text: str, *, allowed_links: tuple[str, ...] = ()) -> list[str]:
    """What a markdown renderer (markdown-it, raw HTML allowed, GFM tables) would act on in ``text``."""
    out = problems(text)
    rendered = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)
    tags = _tags(rendered)
    for tag, attrs in tags.tags:
        if tag in ACTIVE_TAGS and not (tag == "a" and any(dict(attrs).get("href", "").startswith(x) for x in allowed_links)):
            out.append(f"markdown renders <{tag} {attrs}>")
        out += [f"markdown renders the attribute {k} on <{tag}>" for k, _ in attrs if k.lower().startswith("on")]
    if tags.comments:
        out.append(f"markdown renders an HTML comment {tags.comments[0][:40]!r}")
    for table in re.findall(r"<table>.*?</table>", rendered, re.S):  # no extra cell from a pipe in a value
        cells = _tags(table).cells
        if len(set(cells)) > 1:
            out.append(f"a table row has another number of cells than its header: {cells}")
    for em in re.findall(r"<(?:em|strong|s|code)>(.*?)</", rendered):
        if "markup" in em or "evil" in em or "code" == em or "em" == em:
            out.append(f"markdown emphasis or code from the input: {em!r}")
    return out


def page_problems(html_text: str) -> list[str]:
    """A page: its chart data is valid JSON (and says what the input said), its body has no tag from the input."""
    out = [f"control {c!r}" for c in sorted(set(control_bytes(html_text.replace("\t", " "))))]
    m = SCRIPT_DATA.search(html_text)
    if m is None:
        out.append("no chart data")
    else:
        try:
            json.loads(m.group(1))
        except ValueError as exc:
            out.append(f"chart data is not valid JSON: {exc}")
        if "<" in m.group(1):
            out.append("a '<' in the chart data's script element")
    if html_text.count("<script") != 3:
        out.append(f"{html_text.count('<script')} script elements (the chart data, the library, the start-up: 3)")
    body = re.sub(r"<script[^>]*>.*?</script>", "", html_text, flags=re.S)
    tags = _tags(body)
    for tag, attrs in tags.tags:
        if tag in ACTIVE_TAGS - {"meta", "style", "a"}:
            out.append(f"page body has <{tag}>")
        if tag == "a" and "evil" in str(attrs):
            out.append(f"page body has a link from the input {attrs}")
        out += [f"page body has the attribute {k} on <{tag}>" for k, _ in attrs if k.lower().startswith("on")]
    if tags.comments:
        out.append("page body has an HTML comment")
    return out


def json_problems(text: str, *, raw_kept: bool = True) -> list[str]:
    """JSON output: parses, printable ASCII (ensure_ascii), and the value kept as it was (escaped once, by JSON)."""
    out = problems(text)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return out + [f"not JSON: {exc}"]
    if raw_kept and not any("\x1b[2J" in v for v in _strings(doc)):
        out.append("the JSON does not carry the raw value (escaped twice?)")
    return out


def _strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from _strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x)


# ------------------------------------------------------------------ the hostile files


def _quality_result(path: Path) -> Path:
    """A quality result whose categories, case ids, set name and target carry the payloads (60 passing pairs)."""
    rows = [{"id": payload(f"case{i}"), "category": "long_context" if i < 3 else payload("category"),
             "fingerprint": f"f{i}", "passed": True} for i in range(60)]
    doc = Q.build_result(
        qset=Q.QualitySet([], []), set_source=payload("set-source"), set_sha256=None,
        candidate=Q.run_section(rows, target={"url": payload("q-url"), "model": payload("q-model")},
                                notes=[payload("q-note")]),
        baseline=Q.run_section([dict(r) for r in rows], target={"url": payload("qb-url"), "model": payload("qb-model")}),
        notes=[payload("q-doc-note")],
    )
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile")
    (d / "rules.txt").write_text(payload("rollback-rule") .replace("\n", " ") + "\n" + "p99 > 5 s <b>x</b> [l](http://evil.example)\n")
    (d / "config.json").write_text(json.dumps({
        "_name_or_path": payload("config-name"), "model_type": "llama", "architectures": [payload("arch")],
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "vocab_size": 32000,
        "intermediate_size": 14336}))
    return {
        "dir": d,
        "rec": write_jsonl(d / "hostile.jsonl", hostile_records(fail_every=40)),
        "rec2": write_jsonl(d / "hostile2.jsonl", hostile_records(fail_every=50, started_at=T0 + 5000)),
        "quality": _quality_result(d / "quality.json"),
        "rules": d / "rules.txt",
        "config": d / "config.json",
    }


def _assert_no(found: dict[str, list[str]]) -> None:
    bad = {k: v[:4] for k, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)


LOW = ("--min-window-minutes", "0")


# ------------------------------------------------------------------ a hostile record file, every command and format


def test_report_text_json_and_page(files):
    rc, out, err = run(["report", "--details", str(files["rec"]), *LOW])
    rcj, outj, errj = run(["report", "--details", str(files["rec"]), "--json", *LOW])
    page = files["dir"] / "report.html"
    rch, outh, errh = run(["report", "--details", str(files["rec"]), "--html", str(page), *LOW])
    assert ExitCode.INTERNAL not in (rc, rcj, rch) and rc == rcj == rch
    assert "model-id" in out or "model:" in out  # the values are shown (escaped), not dropped
    assert "\\x1b[2J" in out and "gpu-sample:" in out
    _assert_no({"text": terminal_problems(out), "stderr": terminal_problems(err + errj + errh),
                "--json": json_problems(outj), "--html stdout": terminal_problems(outh),
                "page": page_problems(page.read_text())})


def test_accept_every_output(files):
    out_dir = files["dir"] / "acc"
    rc, out, err = run(["accept", "--records", str(files["rec"]), "--quality", str(files["quality"]),
                        "--rollback", str(files["rules"]), "--config", str(files["config"]), "--gpu-gib", "80",
                        "--out", str(out_dir), *LOW])
    assert rc != ExitCode.INTERNAL, err
    md = (out_dir / "acceptance.md").read_text()
    doc_text = (out_dir / "acceptance.json").read_text()
    assert "gpu-name:" in md and "rollback-rule:" in md and "q-model:" in md and "dataset-name:" in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md  # shown as text, inert
    _assert_no({"stdout": terminal_problems(out), "stderr": terminal_problems(err), "acceptance.md": markdown_problems(md),
                "acceptance.json": json_problems(doc_text, raw_kept=False),
                "acceptance.html": page_problems((out_dir / "acceptance.html").read_text())})
    assert any(x.startswith("model:\x1b[2J") for x in _strings(json.loads(doc_text)))  # kept raw in the JSON


def test_compare_markdown_json_and_page(files):
    args = ["compare", str(files["rec"]), str(files["rec2"]), "--allow-different-workload"]
    rc, out, err = run(args)
    rcj, outj, errj = run([*args, "--json"])
    page = files["dir"] / "compare.html"
    rch, outh, errh = run([*args, "--html", str(page)])
    assert ExitCode.INTERNAL not in (rc, rcj, rch)
    assert "hostile.jsonl" in out
    _assert_no({"markdown": markdown_problems(out), "stderr": terminal_problems(err + errj + errh),
                "--json": json_problems(outj, raw_kept=False), "--html stdout": terminal_problems(outh),
                "page": page_problems(page.read_text())})


def test_plan_text_and_json(files):
    rc, out, err = run(["plan", "--records", str(files["rec"]), "--peak-rate", "3", *LOW])
    rcj, outj, errj = run(["plan", "--records", str(files["rec"]), "--peak-rate", "3", "--json", *LOW])
    assert ExitCode.INTERNAL not in (rc, rcj)
    _assert_no({"text": terminal_problems(out), "stderr": terminal_problems(err + errj),
                "--json": json_problems(outj, raw_kept=False)})


def test_budget_from_a_hostile_config(files):
    rc, out, err = run(["budget", "--config", str(files["config"]), "--gpu-gib", "80"])
    rcj, outj, errj = run(["budget", "--config", str(files["config"]), "--gpu-gib", "80", "--json"])
    assert ExitCode.INTERNAL not in (rc, rcj)
    _assert_no({"text": terminal_problems(out), "stderr": terminal_problems(err + errj),
                "--json": json_problems(outj, raw_kept=False)})


def test_import_of_a_hostile_export(files, tmp_path):
    from tests.support.paths import REPO

    src = REPO / "tests" / "fixtures" / "imports" / "aiperf" / "profile_export.jsonl"
    lines = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    for i, d in enumerate(lines):
        md = d["metadata"]
        md["x_request_id"] = payload(f"req{i}")
        md["worker_id"] = payload("worker")
        md["conversation_id"] = payload("conv")
        if i % 5 == 0:
            d["error"] = {"code": 500, "type": payload("err-type"), "message": payload("err-msg")}
    bad = json.dumps({"metadata": {"request_start_ns": payload("bad")}, "metrics": {}, "error": None})
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in lines) + bad + "\n" + ALL + "\n")
    rc, out, err = run(["import", str(path), "--out", str(tmp_path / "out.jsonl")])
    rcj, outj, errj = run(["import", str(path), "--out", str(tmp_path / "out2.jsonl"), "--json"])
    assert ExitCode.INTERNAL not in (rc, rcj)
    rcr, outr, errr = run(["report", "--details", str(tmp_path / "out.jsonl"), *LOW])
    assert rcr != ExitCode.INTERNAL
    _assert_no({"text": terminal_problems(out), "stderr": terminal_problems(err + errj + errr),
                "--json": json_problems(outj, raw_kept=False), "report": terminal_problems(outr)})


def test_usage_error_lines_stay_one_line(tmp_path):
    """A bad-usage line that quotes outside text (a file name here) is still one line with no control byte."""
    name = tmp_path / ("x\x1b]0;t\x07\n" + "FORGED: PASS")
    rc, out, err = run(["report", "--details", str(name)])
    assert rc == ExitCode.USAGE
    assert err.count("\n") == 1 and not control_bytes(err) and not forged_lines(err)


# ------------------------------------------------------------------ the hostile server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("served")
    with HostileServer() as hs:
        yield hs, d


def test_run_against_a_hostile_server(served):
    hs, d = served
    rec = d / "run.jsonl"
    rc, out, err = run(["run", "--details", "--url", hs.url, "--concurrency", "1,2", "--requests", "10", "--record", str(rec),
                        "--no-gpu", *LOW])
    assert rc != ExitCode.INTERNAL, err
    assert "model-id:" in out and "\\x1b" in out  # the server's model id, shown as data
    header = json.loads(rec.read_text().splitlines()[0])
    assert header["environment"]["server"]["build"] == payload("build")  # the record keeps the raw value
    details = [json.loads(x).get("error_detail") for x in rec.read_text().splitlines()]
    assert any(d and "error-body:" in d for d in details)
    out_dir = d / "acc"
    rca, outa, erra = run(["accept", "--records", str(rec), "--out", str(out_dir), *LOW])
    rcr, outr, errr = run(["report", "--details", str(rec), "--html", str(d / "r.html"), *LOW])
    assert ExitCode.INTERNAL not in (rca, rcr)
    _assert_no({"run": terminal_problems(out), "stderr": terminal_problems(err + erra + errr),
                "accept": terminal_problems(outa), "report": terminal_problems(outr),
                "acceptance.md": markdown_problems((out_dir / "acceptance.md").read_text()),
                "acceptance.html": page_problems((out_dir / "acceptance.html").read_text()),
                "report page": page_problems((d / "r.html").read_text())})


def test_quality_against_a_hostile_server(served):
    hs, d = served
    qset = d / "set.jsonl"
    cases = [{"id": payload(f"id{i}"), "category": payload("cat"), "max_tokens": 8,
              "messages": [{"role": "user", "content": payload("prompt")}],
              "checks": [{"type": ["contains", "not_contains", "exact", "number"][i % 4],
                          "value": 7 if i % 4 == 3 else payload("want")}]} for i in range(8)]
    qset.write_text("".join(json.dumps(c) + "\n" for c in cases))
    args = ["quality", "--url", hs.url, "--suite", "none", "--set", str(qset), "--min-cases", "1"]
    rc, out, err = run([*args, "--out", str(d / "q.json")])
    rcj, outj, errj = run([*args, "--json", "--out", str(d / "q2.json")])
    assert ExitCode.INTERNAL not in (rc, rcj), err
    assert "model-id:" in out
    _assert_no({"text": terminal_problems(out), "stderr": terminal_problems(err + errj),
                "--json": json_problems(outj)})
    out_dir = d / "qacc"
    rca, outa, erra = run(["accept", "--records", str(files_rec(d)), "--quality", str(d / "q.json"), "--out",
                           str(out_dir), *LOW])
    assert rca != ExitCode.INTERNAL, erra
    _assert_no({"accept": terminal_problems(outa + erra),
                "acceptance.md": markdown_problems((out_dir / "acceptance.md").read_text())})


def files_rec(d: Path) -> Path:
    return write_jsonl(d / "plain.jsonl", hostile_records(n=20))


def test_watch_a_hostile_metrics_page(served):
    hs, _d = served
    base = ["watch", "--metrics-url", hs.url + "/metrics", "--once", "--window-minutes", "0.01"]
    rc, out, err = run(base)
    rcj, outj, errj = run([*base, "--json"])
    assert ExitCode.INTERNAL not in (rc, rcj)
    _assert_no({"text": terminal_problems(out), "stderr": terminal_problems(err + errj),
                "--json": json_problems(outj, raw_kept=False)})


# ------------------------------------------------------------------ the one output guard (tui/cli/safeout.py)


def test_the_output_guard_shows_what_any_print_forgot(monkeypatch):
    """A writer that forgot ``term`` still puts no control byte on the terminal: main() runs every command inside the
    guard; JSON (ensure_ascii) passes unchanged."""
    import sys

    import tui.cli as cli

    doc = {"model": "\x1b[2J\x9b31m\u202e"}

    def forgetful(argv):
        print("raw \x1b]0;title\x07 \r" + ALL)
        sys.stderr.write("err \x1b[31m\n")
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0

    monkeypatch.setattr(cli, "_dispatch", forgetful)
    rc, out, err = run(["report", "--details", "x"])
    assert rc == 0
    assert not control_bytes(out) and not control_bytes(err)
    assert "raw \\x1b]0;title\\x07 \\x0d" in out and "err \\x1b[31m" in err
    assert json.loads(out.splitlines()[-1]) == doc  # JSON: the value kept, escaped once (by json.dumps)


def test_an_internal_error_message_is_shown_safe(monkeypatch, tmp_path):
    import tui.cli as cli

    def boom(argv):
        raise RuntimeError("bad \x1b]0;owned\x07 value")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cli, "_dispatch", boom)
    rc, out, err = run(["report", "--details", "x"])
    assert rc == ExitCode.INTERNAL
    assert not control_bytes(err) and "\\x1b]0;owned\\x07" in err
