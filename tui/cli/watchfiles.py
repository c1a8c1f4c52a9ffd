"""A `servewatch watch --record` file read back: `report` judges it as the watch did (``report_watch``) and
`replay` opens the console on its windows (``replay_watch_file``). Shared by those commands and `watch` itself
(``slo_lines``, ``watch_config``). Thin glue: the judgement is ``tui.core.watch``, the reading
``tui.sources.evidence_watch``.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, TextIO

from tui.cli.options import Acceptance, UsageError
from tui.core.report import exit_code
from tui.core.textsafe import term

EXIT_INSUFFICIENT = 3


def watch_ttft_slo(acceptance: Acceptance) -> float:
    """The watch judges the TTFT SLO: ``--slo-ttft-ms off`` is bad usage here (not judged silently at a default)."""
    if acceptance.slos.ttft_ms is None:
        raise UsageError("watch judges the TTFT SLO: --slo-ttft-ms off is not supported here")
    return float(acceptance.slos.ttft_ms)


def watch_config(acceptance: Acceptance) -> Any:
    """The judgement's settings of a watch (``tui.core.watch.WatchConfig``) from the acceptance flags."""
    from tui.core.slos import Slos
    from tui.core.watch import WatchConfig

    slos = acceptance.slos
    try:
        return WatchConfig(slos=Slos(ttft_ms=watch_ttft_slo(acceptance), tpot_ms=slos.tpot_ms, itl_ms=slos.itl_ms,
                                     e2e_ms=slos.e2e_ms), target=acceptance.target, alpha=acceptance.alpha,
                           min_window_s=acceptance.min_window_minutes * 60.0, min_requests=acceptance.min_requests)
    except (AttributeError, ValueError) as exc:
        raise UsageError(exc) from None


def slo_lines(v: Any) -> list[str]:
    """Several SLOs: each one's share bracket and the Fréchet bound on all, with which end decides what."""
    if not v.slos:
        return []
    out = ["  SLOs (share of requests meeting each, server-side histograms, bracket):"]
    for row in v.slos:
        lo, hi = row.get("share_lo"), row.get("share_hi")
        rng = "N/A" if lo is None or hi is None else f"{100 * lo:.1f}-{100 * hi:.1f}%"
        if row["slo"] == "all":
            out.append(f"    all of them: {rng} (Fréchet bound: lower max(0, sum p_i - (k - 1)), upper min p_i; "
                       "PASS judged on the lower end, FAIL on the upper)")
        else:
            bad = row.get("unjudgeable_windows") or 0
            out.append(f"    {row['slo']} <= {row['limit_ms']:g} ms: {rng}"
                       + (f" (not judgeable in {bad} window(s))" if bad else ""))
    return out


def json_default(o: Any) -> str:
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    return str(o)


def replay_watch_file(path: str, acceptance: Acceptance, theme: str | None) -> int:
    """`servewatch replay` of a watch record file: the console on the recorded windows."""
    from tui.sources.watch_console import WatchFileSource, WatchSink

    cfg = watch_config(acceptance)
    source = WatchFileSource(path, cfg)
    sink = WatchSink(source)
    from tui.app import build_app

    app = build_app(source, sink, None, theme=theme)
    code = app.run()
    return 3 if code is None else int(code)


def judge_watch_file(path: str, cfg: Any) -> tuple[Any, Any, Any, Any]:
    """(WatchJudgement, engine, header, problems) from a watch record file; never raises on content."""
    from tui.sources.evidence_reader import ReadSettings, open_evidence
    from tui.sources.evidence_watch import read_watch

    with open_evidence(path, ReadSettings(watch=False)) as ev:
        got = read_watch(ev, cfg)
    return got.judgement, got.engine, got.header, got.problems


def report_watch(ev: Any, acceptance: Acceptance, as_json: bool, out: TextIO | None = None) -> int:
    """`servewatch report` on a watch recording (``ev``, opened by the evidence reader): the same judgement as
    the live watch; a broken digest chain forbids PASS."""
    from tui.core.watch import ENGINES, describe_window
    from tui.sources.evidence_watch import read_watch, verdict_with_integrity

    out = out or sys.stdout
    path = ev.name
    cfg = watch_config(acceptance)
    got = read_watch(ev, cfg)
    j, engine, header, problems = got.judgement, got.engine, got.header, got.problems
    for p in problems[:5]:
        print(f"servewatch: {term(p)}", file=sys.stderr)
    if len(problems) > 5:
        print(f"servewatch: ... and {len(problems) - 5} more problem lines", file=sys.stderr)
    if engine is None:
        raise UsageError(f"{path}: a watch file without usable watch records (0 windows)")
    integrity = got.integrity
    assert integrity is not None  # read_watch verified the chain while it read
    has_ttft = bool(ENGINES[engine].ttft)
    canary = not has_ttft and bool(got.canary)  # judged on the canary's requests, as the watch did
    from tui.core.watch import canary_verdict

    v = verdict_with_integrity(canary_verdict(got.canary, cfg) if canary else j.verdict(has_ttft=has_ttft), integrity)
    src = (header.get("source") or {}) if isinstance(header, dict) else {}
    w = j.span or j.last
    if as_json:
        out.write(json.dumps({"source": src, "engine": engine, "windows": j.windows, "verdict": v.to_dict(),
                              "window": describe_window(w, cfg) if w else None, "problems": len(problems),
                              "records_integrity": integrity.to_dict()},
                             indent=2, default=json_default) + "\n")
    else:
        out.write(f"{term(integrity.summary)}\n")  # the first line: what was verified (issue 36)
        out.write(term(f"servewatch report (watch record, source kind {src.get('kind', 'unknown')}): {path}") + "\n")
        out.write(term(f"  engine {engine}, {j.windows} windows, scope: "
                       f"{(header.get('watch') or {}).get('scope', 'unknown')}") + "\n")
        for line in slo_lines(v):
            out.write(term(line) + "\n")
        out.write(term(f"verdict: {v.state}: {v.reason}") + "\n")
        for b in v.blocked:
            out.write(f"  PASS blocked: {term(b)}\n")
        for note in v.notes:
            out.write(f"  note: {term(note)}\n")
    return exit_code(v.state) if has_ttft or canary else EXIT_INSUFFICIENT
