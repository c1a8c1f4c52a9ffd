"""`servewatch import FILE [--out run.jsonl]`: another tool's run converted to record format v1.

Thin glue around ``tui.sources.importing`` (file, hash, YAML) and ``tui.core.importers`` (conversion).
Exit codes: 0 converted (problem entries, if any, are listed and counted), 2 bad usage, unreadable file,
or nothing importable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import tui.core.textsafe as textsafe
from tui.core.exitcodes import UsageError
from tui.core.textsafe import term


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tui.core.importers import formats_read

    parser.description = (f"Convert another load tool's per-request output ({formats_read()}) to a servewatch "
                          "record file. The format is recognised by content, not by file name.")
    from tui.cli.options import epilog

    parser.epilog = epilog("servewatch import profile_export.jsonl --out run.jsonl",
                           codes="exit codes: 0 converted, 3 converted but SYNTHETIC, or the file disagrees with its "
                                 "tool's own summary (never 0), 2 bad usage, unreadable or not importable")
    from tui.cli.options import INPUT, OUTPUT, path_arg

    path_arg(parser, "file", role=INPUT, help="the other tool's output file")
    path_arg(parser, "--out", role=OUTPUT, metavar="FILE", default=None, default_from=default_out,
             help="record file to write (default: FILE with .servewatch.jsonl appended); an existing file is "
                  "refused unless --force is given")
    parser.add_argument("--force", action="store_true",
                        help="replace the --out file when it exists (default: refuse, exit 2: a record file, "
                             "perhaps a signed one, is never replaced silently)")
    parser.add_argument("--json", action="store_true", help="print the import summary as JSON")


def default_out(args: argparse.Namespace) -> str | None:
    """The record file written: ``--out``, else FILE with ``.servewatch.jsonl`` appended."""
    out = getattr(args, "out", None)
    file = getattr(args, "file", None)
    return out or (file + ".servewatch.jsonl" if isinstance(file, str) else None)


def run(args: argparse.Namespace) -> int:
    from tui.sources.importing import ImportProblem, import_file, write_records

    path = args.file
    out = default_out(args) or path + ".servewatch.jsonl"
    if os.path.lexists(out) and not getattr(args, "force", False):  # before the import is read: at once
        raise UsageError(f"{out} exists: refusing to replace it (a record file, perhaps a signed one, is never "
                         "replaced silently); give another --out, or --force to replace it")
    if not os.path.exists(path):
        raise UsageError(f"cannot read {path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"{path} is a folder; give the per-request file inside it")
    try:
        res = import_file(path)
    except ImportProblem as exc:
        raise UsageError(exc) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    for issue in res.issues[:20]:
        print(f"servewatch: {term(issue)}", file=sys.stderr)
    if len(res.issues) > 20:
        print(f"servewatch: ... and {len(res.issues) - 20} more problem entries", file=sys.stderr)
    if res.converted == 0:
        raise UsageError(f"{path}: nothing importable (0 of {res.entries} entries usable)")
    try:
        lines = write_records(res, out)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    src = res.header.get("source", {})
    summary = {"file": path, "format": res.format, "tool": src.get("tool"), "out": out, "lines_written": lines,
               "entries": res.entries, "converted": res.converted, "problems": len(res.issues),
               "counts": res.counts(), "tool_summary": res.tool_summary,
               "summary_check": {"agrees": not res.summary_problems, "problems": res.summary_problems,
                                 "notes": res.summary_notes},
               "time_axis": src.get("time_axis"), "sample": src.get("sample"),
               "ttft_definition": src.get("ttft_definition"), "notes": res.notes}
    from tui.core.exitcodes import synthetic_exit

    code, synthetic_why = synthetic_exit(0, bool(res.header.get("synthetic")))  # SYNTHETIC never exits 0
    summary["synthetic"] = bool(res.header.get("synthetic"))
    if synthetic_why:
        print(f"servewatch: {synthetic_why}", file=sys.stderr)
    from tui.core.importers.crosscheck import describe, is_missing

    unchecked = is_missing(res.tool_summary)  # the tool's summary is not there: said; the readers refuse PASS
    summary["summary_check"]["checked"] = not unchecked
    if res.summary_problems and not unchecked:  # the file disagrees with its own tool's counts: never exit 0
        code = 3
        for p in res.summary_problems:
            print(f"servewatch: {textsafe.term(p)}", file=sys.stderr)
    summary["exit_code"] = code
    if getattr(args, "json", False):
        print(json.dumps(summary, indent=2))
        return code
    c = res.counts()
    print(f"imported {textsafe.term(path)} ({src.get('tool')}, format {res.format}) -> {textsafe.term(out)}")
    print(f"  entries {res.entries}: converted {res.converted}, problems {len(res.issues)} (listed above)")
    print(f"  this file: requests {c['requests']} (measured {c['measured']}, warmup {c['warmup']}): completed "
          f"{c['completed']}, errors {c['errors']}, cancelled {c['cancelled']}")
    for line in describe(res.tool_summary):
        print(f"  {textsafe.term(line)}")
    for p in res.summary_problems:
        print(f"  {'NOT CHECKED' if unchecked else 'MISMATCH'}: {textsafe.term(p)}")
    for n in res.summary_notes:
        print(f"  checked: {textsafe.term(n)}")
    print(term(f"  time axis: {src.get('time_axis')}; TTFT as {src.get('tool')} defines it: {src.get('ttft_definition')}"))
    for n in res.notes:
        print(f"  note: {textsafe.term(n)}")
    if res.summary_problems and not unchecked:
        print(f"  exit {code}: the file disagrees with its tool's own summary (no PASS can stand on it)")
    return code
