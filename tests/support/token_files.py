"""Record files whose requests carry the counted-token fields (issue 21), built on tests/support/evidence_files.py:
the load generator's asked lengths, the server's usage counts and the client's chunk count."""

from __future__ import annotations

import tests.support.evidence_files as ef


def with_tokens(records: list[dict], *, asked_in: int = 128, asked_out: int = 64, server_in: int = 140,
                server_out: int = 64, chunks: int = 63, short_every: int = 10, short_chunks: int = 61) -> list[dict]:
    """Every request of ``records`` as the load generator writes it with usage: ``input_tokens`` is the server's
    prompt count; every ``short_every``-th request (0, 10, ...) saw ``short_chunks`` chunks (a disagreement)."""
    i = 0
    for d in records:
        if d.get("type") != "request":
            continue
        d.update(input_tokens_asked=asked_in, output_tokens_asked=asked_out, input_tokens=server_in,
                 usage_input_tokens=server_in, usage_output_tokens=server_out, output_tokens=server_out,
                 output_chunks=short_chunks if i % short_every == 0 else chunks)
        i += 1
    return records


def two_levels(seconds: float = 120.0) -> list[dict]:
    """Concurrency 2 then 4 (``seconds`` each), counted tokens on every request; level 4 is asked 256 tokens."""
    hdr = ef.header(levels=(2, 4), input_tokens={"min": 128, "max": 128}, output_tokens={"min": 64, "max": 64})
    t0 = ef.T0 + 10
    a = with_tokens(ef.closed_step(2, t0, seconds))
    b = with_tokens(ef.closed_step(4, t0 + seconds + 5, seconds), asked_in=256, server_in=270)
    sa, ea = ef.step_records(a, 2, "closed")
    sb, eb = ef.step_records(b, 4, "closed")
    return ef.assemble(hdr, [(sa, a, ea), (sb, b, eb)])
