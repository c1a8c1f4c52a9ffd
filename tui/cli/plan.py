"""`servewatch plan`: from one replica's sweep records to a fleet: replicas needed at the peak (from the capacity
bracket, re-judged at the SLO given), spares, GPUs, cost, an autoscaling schedule for a trace, the anchor rule
beside it and the `servewatch run` command that checks the plan. Argparse glue around ``tui.core.plan``.

Exit codes: 0 the plan stands on the evidence; 1 no level met the SLO; 3 evidence missing (SYNTHETIC, settings
not acceptance-grade, no level decided, non-monotonic); 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import Any

import tui.core.defaults as D
from tui.cli.options import (
    INPUT,
    UsageError,
    add_acceptance_arguments,
    add_budget_arguments,
    add_run_argument,
    epilog,
    non_negative_float,
    non_negative_int,
    path_arg,
    positive_float,
    positive_int,
)
from tui.core.textsafe import term

PLAN_EXIT_DOC = ("exit codes: 0 the plan stands on the evidence, 1 no level met the SLO, 3 evidence missing "
                 "(SYNTHETIC, settings not acceptance-grade: a window under 10 min, a target under 0.9, alpha above "
                 "0.05; re-judged weaker than a run's settings; no level decided), 2 bad usage or unreadable input")
FLEET_URL = "FLEET_URL"  # the placeholder of the check command without --fleet-url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch plan`."""
    parser.description = (
        "Plan a fleet from one replica's sweep records: the replicas a peak demand needs (from the capacity "
        "bracket re-judged at the SLO given), spares, GPUs and cost; a trace gives an autoscaling schedule. "
        "The anchor rule ceil(1.2 x peak / max throughput) is shown beside it.")
    parser.epilog = epilog("servewatch plan --records sweep.jsonl --peak-rate 40 --spare 1 --gpus 1 "
                           "--gpu-hour-usd 2.5",
                           "servewatch plan --records sweep.jsonl --trace azure.csv --demand-window-minutes 15 --json",
                           codes=PLAN_EXIT_DOC)
    path_arg(parser, "--records", role=INPUT, nargs="+", required=True, metavar="FILE",
                        help="sweep record files of ONE replica (required, no default; - reads standard input)")
    d = parser.add_argument_group("demand (one of)")
    d.add_argument("--peak-rate", type=positive_float, default=None, metavar="RATE",
                   help="the peak demand in requests per second (default: none; or --trace)")
    path_arg(d, "--trace", role=INPUT, default=None, metavar="FILE",
                   help="a trace whose arrival rate over windows gives the demand over time: any format `run "
                        "--trace` reads (default: none; or --peak-rate)")
    d.add_argument("--demand-window-minutes", type=positive_float, default=D.DEMAND_WINDOW_MINUTES,
                   metavar="MINUTES",
                   help=f"the window over which a trace's arrival rate is taken (default {D.DEMAND_WINDOW_MINUTES:g})")
    f = parser.add_argument_group("fleet and cost")
    f.add_argument("--spare", type=non_negative_int, default=D.PLAN_SPARE, metavar="N",
                   help=f"replicas beyond those the peak needs (N+{D.PLAN_SPARE}: one can fail or be drained; "
                        f"default {D.PLAN_SPARE})")
    f.add_argument("--gpus", type=positive_int, default=None, metavar="N",
                   help="GPUs per replica (default: --tp when given, else 1)")
    f.add_argument("--gpu-hour-usd", type=non_negative_float, default=None, metavar="USD",
                   help="price of one GPU-hour in USD (default: none, no cost figures)")
    f.add_argument("--fleet-url", default=None, metavar="URL",
                   help=f"the balancer's URL written into the check command (default: the placeholder {FLEET_URL})")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON (default: text)")
    add_run_argument(parser, several_files=True)
    add_acceptance_arguments(parser)
    add_budget_arguments(parser)
    from tui.cli.chainopts import add_verify_key_argument

    add_verify_key_argument(parser)


# ------------------------------------------------------------------ reading the evidence


def _read_runs(args: argparse.Namespace, cfg: Any, budget: Any, origin: str | None) -> list[tuple[str, Any]]:
    """(source, snapshot) of each record file, read as `accept` reads them (a file or a run given twice counted
    once, said on standard error). Raises UsageError."""
    from tui.cli.evidence_files import files_judge_at, judged_monitors
    from tui.core.importers.limits import limit_snapshot

    notes: list[str] = []
    out = []
    for mon, _tap in judged_monitors(args, cfg, budget, origin, notes, judge_at=files_judge_at(args)):
        snap = limit_snapshot(mon.snapshot())
        for issue in snap.malformed_examples:
            print(f"servewatch: {term(issue)}", file=sys.stderr)
        out.append((mon.source, snap))
    for note in notes:
        print(f"servewatch: input: {term(note)}", file=sys.stderr)
    return out


def _evidence_problems(rows: list) -> list[str]:
    """The problems the records show against the whole run (a broken digest chain, an edited or merged file, a
    signature that does not verify): those on every level row, and any about the records' integrity, once each.
    A level whose own load was not delivered, or whose client saturated, is already never a bracket end (the search
    rule), so it alone does not stop a plan."""
    sets = [tuple(c.row.problems) for c in rows]
    if not sets:
        return []
    common = [pr for pr in sets[0] if all(pr in s for s in sets[1:])]
    chain = [pr for s in sets for pr in s if pr.startswith(("records integrity", "signature"))]
    return list(dict.fromkeys(common + chain))


def _one_replica(runs: list[tuple[str, Any]]) -> None:
    """Refuse files of different targets, models, loop modes or workloads (one line, exit 2)."""
    from tui.core.runs import target_of
    from tui.core.workload import differences

    models = {target_of(s.header)[0] for _, s in runs} - {None}
    urls = {target_of(s.header)[1] for _, s in runs} - {None}
    if len(models) > 1 or len(urls) > 1:
        what = ", ".join(f"{src}: {target_of(s.header)[0] or 'unknown'} at {target_of(s.header)[1] or 'unknown'}"
                         for src, s in runs)
        raise UsageError(f"the record files are of different targets ({what}): a plan reads the evidence of ONE "
                         "replica")
    from tui.core.identity import identity_of, same_model

    served = [(src, identity_of(s.header).served_model) for src, s in runs]
    known = [(src, m) for src, m in served if m]
    if any(not same_model(m, known[0][1]) for _src, m in known[1:]):
        raise UsageError("the record files are of different served models ("
                         + ", ".join(f"{src}: {m}" for src, m in known) + "): a plan reads the evidence of ONE replica")
    modes = {str(m) for _, s in runs if (m := (s.header.get("load") or {}).get("mode")) is not None}
    if len(modes) > 1:
        raise UsageError("the record files mix loop modes (" + ", ".join(sorted(modes)) + "): give the sweep "
                         "files of one mode")
    first_src, first = runs[0]
    for src, s in runs[1:]:
        diff = differences(first.header, s.header)
        if diff:
            raise UsageError(f"the record files are of different workloads ({first_src} vs {src}: "
                             + "; ".join(diff) + "): one capacity cannot combine them")
    for src, s in runs:
        if isinstance((s.header.get("load") or {}).get("sessions"), dict):
            raise UsageError(f"{src}: a session workload (levels count sessions, not requests): plan needs "
                             "request-level evidence")


# ------------------------------------------------------------------ the check command


def _flag_ms(v: float | None) -> str:
    return "off" if v is None else f"{v:g}"


def check_command(header: dict, peak: float, cfg: Any, url: str) -> str:
    """The exact `servewatch run` that checks the plan: the peak rate, the evidence's workload, this SLO."""
    from tui.core.lengths import format_lengths, from_header
    from tui.core.runs import target_of

    load = header.get("load") or {}
    target = header.get("target") or {}
    cmd = ["servewatch", "run", "--url", url, "--rate", f"{peak:g}"]
    model = target_of(header)[0]
    if model:
        cmd += ["--model", str(model)]
    if target.get("api") in ("chat", "completions") and target.get("api") != D.LOAD_API:
        cmd += ["--api", str(target["api"])]
    if load.get("mode") == "open" and load.get("arrival") in ("poisson", "constant", "gamma"):
        if load["arrival"] != D.ARRIVAL:
            cmd += ["--arrival", str(load["arrival"])]
        b = load.get("burstiness")
        if load["arrival"] == "gamma" and isinstance(b, (int, float)):
            cmd += ["--burstiness", f"{b:g}"]
    ds = load.get("dataset") if isinstance(load.get("dataset"), dict) else None
    if ds is not None:
        cmd += ["--dataset", str(ds.get("name") or "DATASET_FILE")]
    for flag, key in (("--input-tokens", "input_tokens"), ("--output-tokens", "output_tokens")):
        if ds is not None and key == "input_tokens":
            continue
        dist = from_header(load.get(key))
        if dist is not None:
            cmd += [flag, dist.given or format_lengths(dist)]
    if load.get("ignore_eos") is True:
        cmd.append("--ignore-eos")
    sp = load.get("shared_prefix") if isinstance(load.get("shared_prefix"), dict) else None
    if sp is not None and isinstance(sp.get("tokens"), int):
        cmd += ["--shared-prefix-tokens", str(sp["tokens"]), "--prefix-groups", str(sp.get("groups") or 1)]
    cmd += ["--slo-ttft-ms", _flag_ms(cfg.slos.ttft_ms)]
    for flag, v in (("--slo-tpot-ms", cfg.slos.tpot_ms), ("--slo-itl-ms", cfg.slos.itl_ms),
                    ("--slo-e2e-ms", cfg.slos.e2e_ms)):
        if v is not None:
            cmd += [flag, f"{v:g}"]
    if cfg.slos.ttft_of != "answer":
        cmd += ["--ttft-of", cfg.slos.ttft_of]
    cmd += ["--target", f"{cfg.target:g}", "--alpha", f"{cfg.alpha:g}",
            "--min-window-minutes", f"{cfg.min_window_s / 60.0:g}"]
    if cfg.min_requests is not None:
        cmd += ["--min-requests", str(cfg.min_requests)]
    return shlex.join(cmd)


def _trace_command(path: str, url: str, model: str | None, cfg: Any) -> str:
    cmd = ["servewatch", "run", "--url", url, "--trace", path]
    if model:
        cmd += ["--model", model]
    cmd += ["--slo-ttft-ms", _flag_ms(cfg.slos.ttft_ms), "--target", f"{cfg.target:g}", "--alpha", f"{cfg.alpha:g}",
            "--min-window-minutes", f"{cfg.min_window_s / 60.0:g}"]
    return shlex.join(cmd)


def _length_mean(header: dict, key: str) -> float | None:
    from tui.core.lengths import from_header

    d = from_header((header.get("load") or {}).get(key))
    if d is None or d.kind not in ("fixed", "uniform"):
        return None
    return (d.lo + d.hi) / 2.0


# ------------------------------------------------------------------ the command


def run(args: argparse.Namespace) -> int:
    """`servewatch plan`."""
    from tui.cli.budget import budget_from_args, budget_given, budget_source
    from tui.cli.report import monitor_config_from_args
    from tui.core import plan as P
    from tui.core.budget.memory import MemoryMissing
    from tui.core.capacity import budget_candidate, measure_capacity, snapshot_rows
    from tui.core.exitcodes import synthetic_exit
    from tui.core.grade import acceptance_grade
    from tui.core.identity import evidence_identity
    from tui.core.runs import target_of

    if args.peak_rate is None and args.trace is None:
        raise UsageError("no demand: give --peak-rate RATE or --trace FILE")
    if args.peak_rate is not None and args.trace is not None:
        raise UsageError("give one demand: --peak-rate or --trace, not both")
    if args.gpu_hour_usd is not None and not args.gpu_hour_usd < 1e9:
        raise UsageError("--gpu-hour-usd must be a price >= 0")
    if args.peak_rate is not None and not args.peak_rate < 1e12:
        raise UsageError("--peak-rate must be a finite rate")
    try:
        cfg = monitor_config_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    gpus, gpus_from = args.gpus, "--gpus"
    if gpus is None:
        tp = getattr(args, "tp", None)
        try:
            gpus, gpus_from = (int(str(tp)), "--tp") if tp is not None else (1, "default 1")
        except ValueError:
            raise UsageError(f"--tp must be a whole number, got {tp!r}") from None
        if gpus < 1:
            raise UsageError(f"--tp must be >= 1, got {tp!r}")
    # demand first: a bad trace is refused before the records are read
    windows = trace_lengths = None
    trace_synthetic = False
    window_s = args.demand_window_minutes * 60.0
    if args.trace is not None:
        from tui.sources.load.errors import ConfigError
        from tui.sources.load.trace import load_trace

        try:
            trace = load_trace(args.trace)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot read {args.trace}: {exc.strerror or exc}") from None
        try:
            windows = P.demand_windows(list(trace.offsets), window_s)
        except ValueError as exc:
            raise UsageError(f"{args.trace}: {exc}") from None
        for p in trace.problems:
            print(f"servewatch: {term(p)}", file=sys.stderr)
        peak = math.ceil(max(w.rate for w in windows) * 1000.0) / 1000.0  # req/s, up to a whole 0.001
        peak_from = (f"trace {args.trace} ({trace.source.get('format', 'trace')}, {len(trace)} arrivals over "
                     f"{trace.span_s:g} s): the busiest window of {window_s:g} s")
        trace_lengths = (sum(trace.input_tokens) / len(trace), sum(trace.output_tokens) / len(trace))
        trace_synthetic = trace.synthetic_reason is not None  # the trace's own word (one rule with the run header)
    else:
        peak, peak_from = float(args.peak_rate), "--peak-rate"
    budget, origin = None, None
    try:
        if budget_given(args):
            budget, origin = budget_from_args(args), budget_source(args)
    except (ValueError, OSError) as exc:
        raise UsageError(f"bad budget: {exc}") from None
    pending = isinstance(budget, MemoryMissing)
    runs = _read_runs(args, cfg, budget, origin)
    if not runs:
        raise UsageError("no record file left to read")
    _one_replica(runs)
    from tui.cli.accept import judged_settings

    # issue 35: the files judged at their runs' settings, the flags given, or one common setting; the plan's SLO,
    # target and window (and its check command) are those
    cfg, _level, settings_docs, weaker = judged_settings(runs, cfg, None)
    snap_budget = next((s.budget for _, s in runs if s.budget is not None), None)
    shown_budget = snap_budget if (budget is None or pending) else budget
    mem_origin = origin if (budget is not None and not pending) else ("the records' budget" if snap_budget else None)
    cand, fits = budget_candidate(shown_budget)
    rows = [r for src, s in runs for r in snapshot_rows(s, src)]
    cap = measure_capacity(rows, cand, fits)
    if not cap.tables or cap.mode not in ("open", "closed"):
        raise UsageError("the records hold no level of a closed- or open-loop sweep: nothing to plan from")
    levels = P.level_evidence(rows, cap)
    primary = [c.row for c in rows if c.mode == cap.mode]
    bracket = P.search_bracket(primary, levels, cap.mode, cap.unit)
    header = runs[0][1].header
    url = args.fleet_url or FLEET_URL
    from tui.core.workload import describe_header

    synthetic = any(s.synthetic for _, s in runs)
    inputs = P.PlanInputs(
        levels=levels, bracket=bracket, peak_rate=peak, peak_from=peak_from, spare=args.spare,
        gpus_per_replica=gpus, gpus_from=gpus_from, gpu_hour_usd=args.gpu_hour_usd, windows=windows,
        window_s=window_s if windows is not None else None, memory_candidate=cand, memory_origin=mem_origin,
        capacity_limits=tuple(cap.limits[:1]), workload=describe_header(header), slos=cfg.slos.describe(),
        target=cfg.target, trace_lengths=trace_lengths,
        evidence_lengths=(_length_mean(header, "input_tokens"),
                          (bracket.lo.output_tok_per_req if bracket.lo else None)
                          or _length_mean(header, "output_tokens")),
        synthetic=synthetic, synthetic_demand=trace_synthetic, not_acceptance_grade=acceptance_grade(cfg),
        check_command=check_command(header, peak, cfg, url),
        trace_command=(_trace_command(args.trace, url, target_of(header)[0], cfg) if args.trace else None),
        sources=[src for src, _ in runs], evidence_problems=_evidence_problems(rows),
        identity_problems=evidence_identity([(src, s.header) for src, s in runs], shown_budget)["problems"])
    doc = P.build_plan(inputs)
    doc["verdict_settings"] = settings_docs
    if weaker:  # re-judged at weaker settings than a run's: never a plan to act on (exit 3)
        doc["exit"]["code"] = 3
        doc["exit"]["why"] = "; ".join(weaker)
    from tui.core.search import capacity_bracket as searched

    found = searched(primary, header, cap.unit, cap.mode)  # None: the sweep was no `--search`
    if found is not None:
        doc["capacity_per_replica"]["search"] = {
            "probes": len(found["probes"]), "search_seconds": found["search_seconds"],
            "stopped_by": found["stopped_by"], "why": found["why"], "precision": found["precision"]}
    code, synthetic_why = synthetic_exit(doc["exit"]["code"], synthetic or trace_synthetic)
    doc["exit"]["code"] = code
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        for vs in settings_docs:  # what each file was judged at (issue 35), first
            for line in vs["lines"]:
                sys.stdout.write(f"{vs['source']}: {line.strip()}\n")
        sys.stdout.write(P.format_plan(doc))
    if synthetic_why:
        print(f"servewatch: {synthetic_why}", file=sys.stderr)
    return code
