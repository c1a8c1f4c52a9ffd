"""`servewatch accept`: the acceptance report (acceptance.md, .json, .html) from record files, a quality result
and the budget.  Its settings and the document are ``tui.cli.acceptance_doc`` (shared with `select`).

Exit codes: 0 ready for real traffic, 1 something failed, 3 evidence missing, 2 bad usage or unreadable input.
"""

from __future__ import annotations

import json
from pathlib import Path

from tui.cli.acceptance_doc import (
    REPORT_FILES,
    AcceptSettings,
    QualityPolicyFlags,
    accept_chart_data,
    acceptance_document,
)
from tui.cli.options import UsageError
from tui.core import acceptance as A
from tui.core.textsafe import term

__all__ = ["REPORT_FILES", "AcceptSettings", "QualityPolicyFlags", "run"]


def run(settings: AcceptSettings) -> int:
    """`servewatch accept`."""
    a = acceptance_document(settings)
    doc, runs, samplers, cfg, input_notes, integrity = a.doc, a.runs, a.samplers, a.cfg, a.input_notes, a.integrity
    settings_docs = a.settings_docs
    out_dir = Path(settings.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
    md = A.render_markdown(doc)
    page = None
    if not settings.no_html:
        from tui.html import accept_html

        page = accept_html(doc, accept_chart_data(doc, runs, samplers, cfg))
    contents = (md, json.dumps(doc, indent=2) + "\n", page)
    files = [(out_dir / name, text) for name, text in zip(REPORT_FILES, contents, strict=True)]
    from tui.sources.outfiles import OutputRefused, SetIncomplete, write_set

    try:  # one set: all written first, then renamed together; never this run's md beside another run's html
        removed = write_set(files)
    except (OutputRefused, SetIncomplete) as exc:
        raise UsageError(f"cannot write the report into {out_dir}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write the report into {out_dir}: {exc.strerror or exc}; nothing was replaced (the "
                         "report files there, if any, are still the previous run's, whole)") from None
    written = [str(p) for p, text in files if text is not None]
    c = doc["conclusion"]
    for src, ri in integrity:  # the first lines: what was verified, in the threat model's words (issue 36)
        print(term(f"records {src}: {ri.summary}"))
    if doc.get("banner"):
        print(term(doc["banner"]))
    for note in input_notes:
        print(f"  input: {term(note)}")
    changed = ("  [settings not default: " + ", ".join(c["settings_changed"]) + "]") if c.get("settings_changed") else ""
    print(term(f"acceptance: {c['verdict']}  (budget: {c['budget']}, measured: {c['measured']}, quality: {c['quality']})"
               + changed))
    for x in doc.get("load_configuration") or ():  # issue 23: each run's workload, one line
        if x.get("workload"):
            print(term(f"  workload of {x['source']}: {x['workload']}"))
    for x in doc["identity"]["runs"]:
        print(term(f"  identity of {x['source']}: {x['line']}"))
    if doc["quality"].get("tied"):
        print(f"  {term(doc['quality']['tied'])}")
    if doc["quality"].get("integrity"):
        print(f"  {term(doc['quality']['integrity']['summary'])}")
    if doc["measured"].get("judged"):
        print(f"  {term(doc['measured']['judged']['text'])}")
    for vs in settings_docs:  # what each file was judged at (issue 35)
        for line in vs["lines"]:
            print(term(f"  {vs['source']}: {line.strip()}"))
    if doc["budget"].get("capacity_vs_server"):
        print(f"  {term(doc['budget']['capacity_vs_server'])}")
    for x in (doc.get("recovery") or {}).get("drills") or ():  # issue 39: each drill in one line
        print(term(f"  drill {x['source']}: {x['verdict']}: {x['reason']}"))
    for line in c["missing_or_failed"]:
        print(f"  {term(line)}")
    if c.get("recovery") and not any(str(x).startswith("Recovery:") for x in c["missing_or_failed"]):
        print(f"  {term(c['recovery'])}")
    print(term("wrote " + ", ".join(written)))
    for old in removed:  # --no-html: the previous run's page must not stand beside this run's report
        print(term(f"removed {old} (the previous run's; this run wrote no page)"))
    return int(doc["exit_code"])


