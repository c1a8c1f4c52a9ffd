"""The console's ``Snapshot`` of a watch: the verdict with the server-side label and scope in its reason, the
last window and the span since the start as the pessimistic end with the bracket beside it, the queue, and the
canary's requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import tui.core.snapshot as S
from tui.core.records.watch import Window, finite
from tui.core.severity import fraction_severity
from tui.core.watch.histogram import good_bracket
from tui.core.watch.judge import WatchJudgement, WatchVerdict, canary_outcome
from tui.core.watch.notes import COMPLETION_NOTE, SERVER_TTFT_LABEL


def build_snapshot(*, seq: int, label: str, judgement: WatchJudgement, last: Window | None, has_ttft: bool,
                   engine: str | None, scope: str, canary: Sequence[dict] = (), waiting_series: Sequence[float] = (),
                   running_series: Sequence[float] = (), good_series: Sequence[float] = (), gap: str | None = None,
                   header: dict | None = None, canary_line: str | None = None,
                   verdict: WatchVerdict | None = None, watched_s: float | None = None) -> S.Snapshot:
    """A console ``Snapshot`` of a watch: the verdict (with the server-side label and scope in its
    reason), the good fraction of the last window (rolling) and since the start (cumulative) as
    the pessimistic end with the bracket beside it, the queue, and the canary's requests. ``watched_s``: how long
    the watch has been running (the header's clock; the judged window's length until given).
    Server-side TTFT percentiles are not points (buckets): they stay N/A in the TTFT pane and the
    bracket is in the verdict reason."""
    cfg = judgement.cfg
    v = verdict if verdict is not None else judgement.verdict(has_ttft=has_ttft)
    extra = []
    if v.blocked:
        extra.append("PASS blocked: " + "; ".join(v.blocked))
    if gap:
        extra.append(f"gap: {gap}")
    if judgement.resets:
        extra.append(judgement.resets[-1])
    if canary_line:
        extra.append(canary_line)
    reason = " · ".join([v.reason] + extra + [SERVER_TTFT_LABEL, f"scope: {scope}", COMPLETION_NOTE])
    console_verdict = S.Verdict(
        state=v.state, reason=reason, missing=v.missing, n=int(v.n), good=int(v.good_lo), elapsed_s=v.elapsed_s,
        need_requests=0, need_seconds=0.0, e_pass=1.0, e_fail=1.0, threshold=1.0 / cfg.alpha, vif=1.0,
        n_eff=float(v.n), bursty=False, target=cfg.target, alpha=cfg.alpha, slos=cfg.slos.describe(),
    )

    def wstat(name: str, w: Window | None, good_lo: float, good_hi: float, n: float,
              n_hi: float | None = None) -> S.WindowStat:
        # the upper end over the total rounded down (n_hi; tui.core.watch.judge), the lower over it rounded up
        frac = good_lo / n if n else None
        d_hi = n if n_hi is None else n_hi
        hi = (min(1.0, good_hi / d_hi) if d_hi else 1.0) if n else None
        fs = S.FractionStat(good=int(good_lo), n=int(n), fraction=frac, lo=frac,
                            hi=hi, severity=fraction_severity(frac, cfg.target))
        secs = w.seconds if w is not None else 0.0
        return S.WindowStat(label=name, good=fs, ttft=(), ttft_fail_inf=(), completed=int(n), failed=0, slow=0,
                            req_per_s=(n / secs if secs > 0 else None), output_tok_per_s=None, goodput_per_s=None,
                            tpot_ms_p50=None, seconds=secs)

    if last is not None and last.ttft is not None:
        br = good_bracket(last.ttft, cfg.slo_s, last.failed)
        rolling = wstat(f"last window {last.seconds:.0f} s · pessimistic end (bracket in brackets)", last,
                        math.floor(br.good_lo + 1e-6), math.ceil(br.good_hi - 1e-6), math.ceil(br.total - 1e-6),
                        math.floor(br.total + 1e-6))
    else:
        rolling = wstat("last window: gap" if last is not None else "no window yet", last, 0, 0, 0)
    cumulative = wstat(f"since the watch started · {SERVER_TTFT_LABEL}", judgement.span,
                       judgement.good_lo, judgement.good_hi, judgement.n, judgement.n_opt)
    q = S.QueueState(
        source=f"{engine} (server)" if engine else None,
        waiting=None if last is None else last.waiting_end, running=None if last is None else last.running,
        kv_cache_usage=None if last is None else last.kv_cache, client_in_flight=None,
        waiting_series=tuple(waiting_series), running_series=tuple(running_series),
        max_waiting=max(waiting_series) if waiting_series else None,
    )
    rows = []
    for r in list(canary)[-200:]:
        t_sent, t_end = r.get("t_sent"), r.get("t_end")
        if not (finite(t_sent) and finite(t_end)):
            continue
        outcome, ttft_ms = canary_outcome(r, cfg.slos)  # the one outcome rule (tui.core.slos.slo_rule)
        rows.append(S.RequestRow(id=str(r.get("id")), level=r.get("level"), round=int(r.get("round") or 1),
                                 phase="canary", ttft_ms=ttft_ms,
                                 output_tokens=r.get("output_tokens"), outcome=outcome, error=r.get("error"),
                                 latency_ms=(t_end - t_sent) * 1000.0, t_end=t_end))
    gpu = S.GpuState(available=False, devices=(), predicted_gib=None, ceiling_gib=None, gpu_gib=None,
                     note="watch mode: GPU memory is not read from the servers")
    notes = tuple(v.notes) + ((f"gap: {gap}",) if gap else ())
    return S.Snapshot(
        seq=seq, source=label, synthetic=False, header=dict(header or {}),
        run_elapsed_s=v.elapsed_s if watched_s is None else max(0.0, watched_s),
        current_level=None, current_round=1, cumulative=cumulative, rolling=rolling, verdict=console_verdict, levels=(),
        recent=tuple(rows), good_series=tuple(good_series), p95_series=(), target=cfg.target,
        slos=cfg.slos, queue=q, gpu=gpu, errors_by_class={}, requests_total=len(rows),
        warmup_total=0, malformed=0, malformed_examples=(), unknown_types=0, truncated=0, notes=notes,
    )
