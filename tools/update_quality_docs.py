"""Write the cases-needed table (computed by ``tui.core.quality.sizing``) between the
``<!-- cases-needed:begin -->`` / ``<!-- cases-needed:end -->`` markers of quality/README.md and docs/acceptance.md.
``--check`` exits 1 when a file differs from the code (tests/docs/test_quality_docs.py runs the same check)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = (ROOT / "quality" / "README.md", ROOT / "docs" / "acceptance.md")
BEGIN, END = "<!-- cases-needed:begin -->", "<!-- cases-needed:end -->"


def rendered(text: str, table: str) -> str:
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:a] + "\n" + table + "\n" + text[b:]


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from tui.core.quality.sizing import cases_needed_table

    table = cases_needed_table()
    stale = []
    for f in FILES:
        text = f.read_text(encoding="utf-8")
        new = rendered(text, table)
        if new != text:
            stale.append(f)
            if "--check" not in argv:
                f.write_text(new, encoding="utf-8")
    if "--check" in argv and stale:
        print("stale cases-needed table in: " + ", ".join(str(f.relative_to(ROOT)) for f in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
