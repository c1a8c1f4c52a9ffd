"""What was measured about memory and queueing, per run and per level, in the report's words (issue 25).

Peak GPU memory (NVML samples) against the budget's predicted ceiling, the engine's own KV use against the
predicted KV space, and the server queue per level (peak and time-averaged depth). Every figure a record file does
not carry is "not recorded", never a guess. Pure, standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tui.core.acceptance.inputs import RunInput
from tui.core.levels import fmt_level


def _r(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(float(v), digits)


def _gpu_part(snap: Any) -> dict:
    g = snap.gpu
    devs = [d for d in g.devices if d.peak_used_gib is not None]
    peak = max((d.peak_used_gib for d in devs), default=None)
    total = max((d.total_gib for d in devs if d.total_gib is not None), default=None)
    out: dict[str, Any] = {
        "nvml_available": bool(g.available and devs),
        "peak_used_gib": _r(peak), "total_gib": _r(total),
        "ceiling_gib": _r(g.ceiling_gib), "gpu_gib": _r(g.gpu_gib),
        "peak_share_of_total": None if peak is None or not total else round(peak / total, 4),
        "peak_vs_ceiling": None if peak is None or not g.ceiling_gib else round(peak / g.ceiling_gib, 4),
        "engine_kv_label": g.engine_kv_label,
        "engine_kv_peak_gib": _r(g.engine_kv_peak_gib), "engine_kv_allocated_gib": _r(g.engine_kv_allocated_gib),
        "engine_kv_peak_usage": _r(g.engine_kv_peak_usage, 4), "engine_kv_samples": g.engine_kv_samples,
        "kv_ceiling_gib": _r(g.kv_ceiling_gib),
    }
    out["text"] = _gpu_text(out, g.note)
    return out


def _gpu_text(p: dict, note: str) -> str:
    parts: list[str] = []
    if p["nvml_available"]:
        s = f"peak GPU memory {p['peak_used_gib']:.2f} GiB (NVML)"
        if p["total_gib"]:
            s += f" of {p['total_gib']:.2f} GiB ({p['peak_share_of_total']:.1%})"
        s += (f", predicted ceiling {p['ceiling_gib']:.2f} GiB ({p['peak_vs_ceiling']:.0%} of it)" if p["ceiling_gib"]
              else ", predicted ceiling unknown (no budget)")
        parts.append(s)
    else:
        parts.append("GPU memory: not recorded" + (f" ({note})" if note else " (no NVML samples)"))
    if p["engine_kv_peak_usage"] is not None:
        s = f"engine KV peak {p['engine_kv_peak_usage']:.1%} in use"
        if p["engine_kv_peak_gib"] is not None:
            s += f" ({p['engine_kv_peak_gib']:.2f} GiB of {p['engine_kv_allocated_gib']:.2f} GiB allocated)"
        if p["kv_ceiling_gib"] is not None:
            s += f", predicted KV space {p['kv_ceiling_gib']:.2f} GiB"
        parts.append(s + f" over {p['engine_kv_samples']} samples")
    else:
        parts.append("engine KV use: not recorded")
    return "; ".join(parts)


def memory_queue_section(runs: Sequence[RunInput]) -> dict:
    """Per run: the GPU / engine KV peak against the predicted ceiling, the queue source and where requests first
    waited at the server (``summary``: one line). The per-level figures (peak and time-averaged queue depth, KV and
    GPU peaks) are in the level rows themselves (``max_waiting``, ``mean_waiting``, ``queue_samples``,
    ``peak_kv_usage``, ``peak_gpu_gib``)."""
    out_runs = []
    for r in runs:
        snap = r.snapshot
        gpu = _gpu_part(snap)
        rows = list(snap.levels)
        qsrc = snap.queue.source
        peak_q = max((x.max_waiting for x in rows if x.max_waiting is not None), default=None)
        first_q = next((x for x in rows if x.max_waiting), None)
        if qsrc is None or not any(x.queue_samples for x in rows):
            qtext = "server queue: not recorded (no server metrics)"
        elif not peak_q:
            qtext = f"server queue ({qsrc}): never above 0 waiting"
        else:
            assert first_q is not None
            qtext = (f"server queue ({qsrc}): requests first waited at level {fmt_level(first_q.level)} "
                     f"(peak {first_q.max_waiting:g}, mean {first_q.mean_waiting or 0:.2f}); run peak {peak_q:g}")
        out_runs.append({"source": r.source, "gpu": gpu, "queue_source": qsrc, "queue_text": qtext,
                         "summary": f"{gpu['text']}; {qtext}"})
    return {"runs": out_runs}
