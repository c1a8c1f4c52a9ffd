"""Generate a large SYNTHETIC record file for benchmarks (labelled synthetic in its run header).

    python bench/gen_records.py OUT.jsonl --requests 1000000 [--rate 200] [--seed 1] [--stream-fields]

``--stream-fields``: also the per-request stream fields the load generator writes since the full SLOs (last token,
chunks, the server's usage, gap statistics), as a file from ``servewatch run`` has them.
"""

from __future__ import annotations

import argparse
import json
import random


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=200.0, help="requests per second of record time")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stream-fields", action="store_true", help="also write the stream fields of a servewatch run")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t0 = 1_767_225_600.0
    with open(a.out, "w") as fh:
        fh.write(json.dumps({"type": "run", "schema_version": 1, "schema": "servewatch.record/1", "tool": "servewatch",
                             "synthetic": True, "started_at": t0,
                             "description": "SYNTHETIC benchmark data from bench/gen_records.py"}) + "\n")
        levels = [1, 2, 4, 8]
        per = a.requests // len(levels)
        t = t0
        for i in range(a.requests):
            level = levels[min(i // per, len(levels) - 1)]
            t += rng.expovariate(a.rate)
            ttft = rng.lognormvariate(-1.2, 0.5 + 0.1 * level)
            fail = rng.random() < 0.01
            out_tokens = 64 if not fail else rng.randint(0, 10)
            t_first = t + ttft
            t_end = t_first + (0.0 if fail else 64 * 0.015)
            rec = {"type": "request", "id": f"b{i}", "t_intended": t, "t_sent": t, "t_first_token": t_first,
                   "t_end": t_end, "input_tokens": 128, "output_tokens": out_tokens,
                   "finish_reason": None if fail else "length", "http_status": 200, "complete": not fail,
                   "error": "stream_reset" if fail else None, "error_detail": None, "phase": "measure",
                   "level": level, "round": 1}
            if a.stream_fields and not fail:
                rec.update({"t_last_token": t_end, "output_chunks": 64, "reasoning_chunks": 0,
                            "usage_output_tokens": 64, "usage_input_tokens": 128, "itl_max_ms": 15.0 + 30 * rng.random(),
                            "itl_p50_ms": 15.0, "itl_p95_ms": 15.0, "input_tokens_asked": 128,
                            "output_tokens_asked": 64})
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            if i % 1000 == 0:
                fh.write(json.dumps({"type": "queue", "t": t, "source": "vllm", "waiting": rng.randint(0, level),
                                     "running": level, "kv_cache_usage": 0.3, "client_in_flight": level},
                                    separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
