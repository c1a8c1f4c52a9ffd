"""Benchmark: the standard library hashes the digest chain could use (issue 19; docs/record-format.md, "Choice of
hash"): MB/s over 1 MiB updates (the reader: one update per block of whole lines, best of 3) and microseconds per
300-byte line update (the recorder: one update per line written). SYNTHETIC input (one request record repeated).

    python bench/bench_chain_hashes.py
"""

from __future__ import annotations

import hashlib
import json
import time

LINE = (json.dumps({"type": "request", "id": "c1-r1-000001", "t_intended": 1767225600.10, "t_sent": 1767225600.10,
                    "t_first_token": 1767225600.31, "t_end": 1767225601.40, "input_tokens": 151, "output_tokens": 64,
                    "finish_reason": "length", "http_status": 200, "complete": True, "error": None,
                    "error_detail": None, "phase": "measure", "level": 1, "round": 1},
                   separators=(",", ":")) + "\n").encode()
BLOCK = (LINE * ((1 << 20) // len(LINE) + 1))[:1 << 20]


def main() -> None:
    for name in ("sha256", "blake2b", "blake2s", "sha1", "md5", "sha512"):
        best = 0.0
        for _ in range(3):
            h = hashlib.new(name)
            t = time.perf_counter()
            for _ in range(200):
                h.update(BLOCK)
            best = max(best, 200 / (time.perf_counter() - t))
        h = hashlib.new(name)
        t = time.perf_counter()
        for _ in range(200_000):
            h.update(LINE)
        per_line = (time.perf_counter() - t) / 200_000 * 1e6
        print(f"{name:8s} {best:7.0f} MB/s (1 MiB updates)  {per_line:.2f} us per {len(LINE)}-byte line update")


if __name__ == "__main__":
    main()
