#!/usr/bin/env python3
"""The tamper fuzzer's long run (issue 35): thousands of seeded cases of tests/support/tamper.py.

    python3 bench/tamper_fuzz.py --cases 3000 --seed 1            # counts per input x reader, failures, time
    python3 bench/tamper_fuzz.py --seed 123 --cases 1 -v          # replay one case: its edits and both outcomes

Exit 1 when a case breaks the property (more favourable than the honest outcome without a new problem named, a PASS
the honest evidence does not give, or exit 70), 0 otherwise. The CI test (tests/cli/test_tamper_fuzzer.py) runs 300.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import tamper  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1, help="first seed (cases use seed, seed+1, ...)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    a = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        cases, failed = tamper.fuzz(a.cases, a.seed, Path(d))
    dt = time.perf_counter() - t0
    if a.verbose:
        for c in cases:
            print(f"{c.replay()}\n  honest exit {c.honest.code} (capacity {c.honest.capacity}), edited exit "
                  f"{c.edited.code} (capacity {c.edited.capacity}); new problems: "
                  f"{sorted(c.edited.problems - c.honest.problems)[:3]}")
    print(f"{len(cases)} cases in {dt:.1f} s ({len(cases) / dt:.1f} cases/s), seeds {a.seed}..{a.seed + a.cases - 1}, "
          f"fingerprint {tamper.digest(cases)}")
    by = Counter((c.input, c.reader) for c in cases)
    moved = Counter((c.input, c.reader) for c in cases if c.edited.code != c.honest.code)
    for k in sorted(by):
        print(f"  {k[0]:<14} {k[1]:<8} {by[k]:>5} cases, {moved[k]:>4} with another exit code")
    codes = Counter((c.honest.code, c.edited.code) for c in cases)
    print("  honest -> edited exit codes: " + ", ".join(f"{a}->{b}: {n}" for (a, b), n in sorted(codes.items())))
    print(f"{len(failed)} cases break the property")
    for c in failed[:50]:
        print(f"  FAIL {c.replay()} :: {c.failed()}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
