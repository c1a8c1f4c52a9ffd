"""What `servewatch import` makes of every committed file under tests/fixtures/imports: exit code, stdout, stderr,
the record file's bytes, and the `--json` summary. Kept in tests/golden/import_outputs.json so that a reshape of
the importers (issue 38: importers as descriptors) is shown to change none of it.

    python3 -m tests.support.import_outputs --check       # compare with the golden file (what the test does)
    python3 -m tests.support.import_outputs --write       # rewrite the golden file (a deliberate output change)
    python3 -m tests.support.import_outputs --dump DIR    # every output in full, one folder per file, to diff

Run from the repository root (the paths in the outputs are relative to it). The record files and `--json` output
are compared by SHA-256 (the full bytes are in ``--dump``); the one field normalised is the header's
``tool_version`` (servewatch's own version, so a release does not rewrite the golden file).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.paths import REPO

FIXTURES = Path("tests") / "fixtures" / "imports"
GOLDEN = REPO / "tests" / "golden" / "import_outputs.json"
NOT_DATA = (".md", ".py", ".sh")
_VERSION = re.compile(rb'"tool_version": ?"[^"]*"')


def fixture_files() -> list[str]:
    """Every committed data file under tests/fixtures/imports (per-request files, summaries, variants), relative."""
    root = REPO / FIXTURES
    return sorted(str(p.relative_to(REPO)) for p in root.rglob("*") if p.is_file() and p.suffix not in NOT_DATA)


def _run(argv: list[str]) -> tuple[int, str, str]:
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _normal(data: bytes) -> bytes:
    return _VERSION.sub(b'"tool_version": "<servewatch version>"', data)


def outputs_of(rel: str, work: Path) -> dict[str, Any]:
    """One file's outputs (``work``: an empty folder for the record files)."""
    full: dict[str, Any] = {}
    for mode, extra in (("text", []), ("json", ["--json"])):
        out = work / f"{mode}.servewatch.jsonl"
        code, stdout, stderr = _run(["import", rel, "--out", str(out), *extra])
        stdout, stderr = stdout.replace(str(out), "<OUT>"), stderr.replace(str(out), "<OUT>")
        full[mode] = {"exit": code, "stdout": stdout, "stderr": stderr,
                      "records": _normal(out.read_bytes()).decode("utf-8") if out.exists() else None}
    return full


def summary_of(full: dict[str, Any]) -> dict[str, Any]:
    """The golden entry: text mode in words, the record bytes and the JSON output by SHA-256."""
    def sha(s: str | None) -> str | None:
        return None if s is None else hashlib.sha256(s.encode("utf-8")).hexdigest()

    t, j = full["text"], full["json"]
    return {"exit": t["exit"], "stdout": t["stdout"], "stderr": t["stderr"], "records_sha256": sha(t["records"]),
            "json_exit": j["exit"], "json_stdout_sha256": sha(j["stdout"]), "json_stderr": j["stderr"],
            "json_records_sha256": sha(j["records"])}


def collect(dump: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every fixture's golden entry (run from the repository root); ``dump``: also write every output in full."""
    got: dict[str, dict[str, Any]] = {}
    for rel in fixture_files():
        with tempfile.TemporaryDirectory(prefix="servewatch-import-outputs-") as tmp:
            full = outputs_of(rel, Path(tmp))
        got[rel] = summary_of(full)
        if dump is not None:
            d = dump / rel.replace(os.sep, "__")
            d.mkdir(parents=True, exist_ok=True)
            for mode, o in full.items():
                for k in ("stdout", "stderr", "records"):
                    if o[k] is not None:
                        (d / f"{mode}.{k}").write_text(o[k], encoding="utf-8")
                (d / f"{mode}.exit").write_text(f"{o['exit']}\n", encoding="utf-8")
    return got


def differences(golden: dict[str, dict[str, Any]], got: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for rel in sorted(set(golden) | set(got)):
        if rel not in got:
            out.append(f"{rel}: in the golden file, no longer a fixture")
        elif rel not in golden:
            out.append(f"{rel}: a new fixture, not in the golden file (--write after checking its output)")
        else:
            out.extend(f"{rel}: {k} differs" for k in golden[rel] if golden[rel][k] != got[rel].get(k))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true")
    g.add_argument("--write", action="store_true")
    g.add_argument("--dump", metavar="DIR")
    args = ap.parse_args(argv)
    os.chdir(REPO)
    got = collect(Path(args.dump) if args.dump else None)
    if args.write:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN.relative_to(REPO)}: {len(got)} files")
        return 0
    if args.dump:
        print(f"dumped {len(got)} files under {args.dump}")
        return 0
    diff = differences(json.loads(GOLDEN.read_text(encoding="utf-8")), got)
    for line in diff:
        print(line)
    print(f"{len(got)} files, {len(diff)} differences")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
