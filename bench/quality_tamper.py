"""The quality-file tamper property, long run (issue 35, finding 8): the CI test's edit grammar
(tests/unit/core/quality/test_quality_integrity.py) over N seeded cases per signing mode; prints the case count, the
favourable edits found (each with its seed, case and edit: replayable) and the time. Asserts nothing; exit 1 when a
favourable edit was found.

    python3 bench/quality_tamper.py [CASES_PER_MODE] [SEED]      # default 1500 9000
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.core import test_quality_integrity as T  # noqa: E402
from tui.core.quality.digest import seal  # noqa: E402


def main() -> int:
    per_mode = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 9000
    t0 = time.perf_counter()
    cases = bad = 0
    for signed in (False, True):
        key = T.KEY if signed else None
        starts = [(name, seal(d, key)) for name, d in T._honest_docs()]
        honest = {name: T.outcome(d, key)[0] for name, d in starts}
        rng = random.Random(seed + signed)
        for case in range(per_mode):
            name, doc = starts[case % len(starts)]
            edited, op = T._edit(doc, rng)
            redigest = signed or (op in T.STRUCTURAL and rng.random() < 0.5)
            if redigest:
                edited = seal(edited)
            got, problems = T.outcome(edited, key)
            cases += 1
            if not (got <= honest[name] or problems):
                bad += 1
                print(f"FAVOURABLE: seed {seed + signed} case {case}: {name} {op} redigest={redigest} -> {got}")
    print(f"{cases} cases, {bad} favourable, {time.perf_counter() - t0:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
