"""What an imported source cannot support, applied to the verdict.

- No start times (``source.time_axis == "none"``): there is no observation window, so every verdict is
  INSUFFICIENT_WINDOW with that reason (never a guessed time axis).
- A sampled per-request list (``source.sample``): the statistics describe the sample; no verdict on the
  whole run (UNDECIDED with that reason).

Pure; works on a ``Snapshot`` (frozen dataclasses are replaced, not mutated).
"""

from __future__ import annotations

from dataclasses import replace

from tui.core.importers.registry import importer_for
from tui.core.snapshot import Snapshot, Verdict
from tui.core.states import INSUFFICIENT_WINDOW, UNDECIDED, VerdictState


def source_of(header: dict | None) -> dict:
    src = (header or {}).get("source")
    return src if isinstance(src, dict) else {}


def verdict_limit(header: dict | None) -> tuple[VerdictState, str] | None:
    """(state, reason) the source forces, or None when the data can carry a verdict."""
    src = source_of(header)
    tool = src.get("tool") or "the source"
    if src.get("time_axis") == "none":
        return INSUFFICIENT_WINDOW, (f"no observation window: {tool} saves no request start times, so there is no "
                                     "time axis to judge (imported from "
                                     f"{src.get('file') or 'a file'})")
    sample = src.get("sample")
    if isinstance(sample, dict) and sample:
        return UNDECIDED, (f"a sample: {tool} listed {sample.get('listed')} of {sample.get('total')} requests; "
                           "no verdict on the whole run")
    return None


def _limit(v: Verdict, state: VerdictState, reason: str) -> Verdict:
    if v.state == state and v.reason == reason:
        return v
    return replace(v, state=state, reason=reason, missing=reason, decided_at_n=None)


def limit_snapshot(snap: Snapshot) -> Snapshot:
    """The snapshot with every verdict limited by what its source supports (unchanged when nothing is)."""
    lim = verdict_limit(snap.header)
    if lim is None:
        return snap
    state, reason = lim
    levels = tuple(replace(r, verdict=_limit(r.verdict, state, reason)) for r in snap.levels)
    notes = tuple(snap.notes) + (reason,) if reason not in snap.notes else tuple(snap.notes)
    return replace(snap, verdict=_limit(snap.verdict, state, reason), levels=levels, notes=notes)


def ttft_definition(header: dict | None) -> str:
    src = source_of(header)
    if src.get("kind") == "import":
        return str(src.get("ttft_definition") or f"{src.get('tool')}: not recorded")
    return ("servewatch: arrival of the first SSE event carrying non-empty generated content minus the time "
            "the request was written to the connection")


def ttft_of_label(header: dict | None) -> str | None:
    """What the TTFT of an imported file is ("first chunk, as vllm bench measures": its tool's definition, never
    servewatch's "answer"); None for servewatch's own files."""
    src = source_of(header)
    if src.get("kind") != "import":
        return None
    imp = importer_for(str(src.get("format")))  # the tool's IMPORTER.ttft_label
    return imp.ttft_label if imp is not None else f"as {src.get('tool') or 'the other tool'} measures it"


def tool_of(header: dict | None) -> str:
    src = source_of(header)
    if src.get("kind") == "import":
        return str(src.get("tool") or "unknown")
    return str((header or {}).get("tool") or "servewatch")


def describe_source(header: dict | None) -> str | None:
    """One line saying where imported data came from (None for servewatch's own runs)."""
    src = source_of(header)
    if src.get("kind") != "import":
        return None
    axis = {"epoch": "wall-clock start times", "relative": "relative start times (clock origin unknown)",
            "none": "NO start times (no observation window)"}.get(str(src.get("time_axis")), "time axis unknown")
    s = (f"source: imported from {src.get('file')} ({src.get('tool')}{' ' + str(src['version']) if src.get('version') else ''}"
         f", sha256 {str(src.get('sha256'))[:12]}); {axis}; TTFT as {src.get('tool')} defines it")
    if src.get("sample"):
        s += f"; a SAMPLE of {src['sample'].get('listed')} of {src['sample'].get('total')} requests"
    return s
