"""`servewatch quality` (quality regression) and `servewatch accept` (the acceptance report).

Argparse glue around ``tui.core.quality``, ``tui.core.acceptance`` and
``tui.sources.quality_runner``. Exit codes: 0 PASS / ready, 1 FAIL, 3 no evidence,
no baseline or not ready for lack of evidence, 2 bad usage, an unusable endpoint or unreadable input.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import hashlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from tui import __version__
from tui.core import quality as Q

EXIT_USAGE = 2

QUALITY_EXIT_DOC = ("exit codes: 0 PASS (the non-inferiority test shows the drop is below the margin), 1 FAIL "
                    "(candidate worse than the baseline by more than the margin), 3 NO_EVIDENCE or no baseline, "
                    "2 bad usage, an endpoint that cannot be used (unreachable, TLS or HTTP error) or unreadable input")
ACCEPT_EXIT_DOC = ("exit codes: 0 ready for real traffic, 1 something failed (budget, measured load or quality), "
                   "3 evidence missing, 2 bad usage or unreadable input")


def default_set_path() -> str | None:
    from tui.resources import bundled_file

    p = bundled_file("quality", "starter.jsonl")
    return None if p is None else str(p)


def _err(msg: str) -> None:
    print(f"servewatch: {msg}", file=sys.stderr)


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


# =====================================================================================
# quality
# =====================================================================================


def add_quality_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a quality regression set against the candidate deployment (and a baseline endpoint, or compare "
        "with a saved baseline result) with deterministic sampling, and judge whether quality regressed. "
        "A failed request counts as a failed case."
    )
    parser.epilog = QUALITY_EXIT_DOC
    parser.add_argument("--url", required=True, help="candidate endpoint (OpenAI-compatible base URL, with or without /v1)")
    parser.add_argument("--model", default=None, help="candidate model name (default: the first of /v1/models)")
    b = parser.add_mutually_exclusive_group()
    b.add_argument("--baseline-url", default=None, help="baseline endpoint: the set is run there too")
    b.add_argument("--baseline", default=None, metavar="FILE",
                   help="a saved quality result (--out of an earlier run) whose candidate is the baseline")
    parser.add_argument("--baseline-model", default=None, help="model name on the baseline endpoint")
    parser.add_argument("--set", dest="set_path", default=None, metavar="FILE",
                        help="regression set (JSON Lines; default: the bundled STARTER set quality/starter.jsonl)")
    parser.add_argument("--out", default="quality-result.json", metavar="FILE",
                        help="write the result JSON here (default quality-result.json)")
    parser.add_argument("--json", action="store_true", help="print the result JSON instead of the text summary")
    parser.add_argument("--long-context-tokens", type=int, default=None, metavar="N",
                        help="filler length of the generated long-context cases (default: the set's value)")
    parser.add_argument("--margin", type=float, default=Q.DEFAULT_MARGIN,
                        help="largest acceptable drop in pass rate (default 0.05 = 5 points)")
    parser.add_argument("--alpha", type=float, default=Q.DEFAULT_ALPHA, help="error level of the tests (default 0.05)")
    parser.add_argument("--min-cases", type=int, default=Q.DEFAULT_MIN_CASES,
                        help="fewest usable paired cases with which PASS is possible (default 20; with every pair "
                             "concordant the test itself needs 59 at the default margin and alpha)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="requests in flight at once (default 1: batching can perturb greedy decoding)")
    parser.add_argument("--timeout", type=float, default=120.0, help="read timeout per request in seconds (default 120)")
    parser.add_argument("--seed", type=int, default=Q.DEFAULT_SEED, help="sampling seed sent with every request")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                        help="environment variable holding the API key, sent as Authorization: Bearer (never written)")
    parser.add_argument("--baseline-api-key-env", default=None, metavar="VAR",
                        help="API key variable for the baseline endpoint (default: --api-key-env)")
    parser.add_argument("--header", action="append", default=[], metavar="'K: V'",
                        help="extra request header for both endpoints (repeatable; values never written)")
    parser.add_argument("--insecure", action="store_true",
                        help="do not verify TLS certificates (as in `run`; SSL_CERT_FILE / SSL_CERT_DIR add trusted CAs)")


def _parse_headers(raw: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for h in raw:
        name, sep, value = str(h).partition(":")
        name = name.strip()
        if not sep or not name or any(c in name for c in " \t\r\n"):
            raise ValueError("--header must look like 'Name: value'")
        out[name] = value.strip()
    return out


def _headers_for(url: str, env_var: str | None, extra: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(headers, secrets) as `run` builds them: Bearer from the key variable, else Basic from the URL's user info."""
    from tui.sources.openai_http import auth_headers

    return auth_headers(url, os.environ.get(env_var) if env_var else None, list(extra.items()))


def _check_url(url: str, flag: str) -> None:
    from urllib.parse import urlsplit

    p = urlsplit(str(url).strip())
    if p.scheme not in ("http", "https") or not p.hostname:
        raise ValueError(f"{flag} must be an http(s) URL")


def _read_json(path: str, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} {path} is not valid JSON: {str(exc)[:80]}") from None


def _progress(label: str):
    def cb(done: int, total: int, row: dict) -> None:
        mark = "pass" if row.get("passed") else ("ERROR " + str(row.get("error")) if row.get("error") else "fail")
        print(f"  [{label} {done}/{total}] {row['id']}: {mark}", file=sys.stderr)

    return cb


def cmd_quality(args: argparse.Namespace) -> int:
    from tui.sources.quality_runner import ProbeError, QualityRunner

    # ---- usage checks
    try:
        _check_url(args.url, "--url")
        if args.baseline_url:
            _check_url(args.baseline_url, "--baseline-url")
        if not 0 <= args.margin < 1:
            raise ValueError("--margin must be >= 0 and < 1 (a fraction, e.g. 0.05)")
        if not 0 < args.alpha < 1:
            raise ValueError("--alpha must be between 0 and 1")
        if args.min_cases < 1:
            raise ValueError("--min-cases must be >= 1")
        if args.concurrency < 1 or args.concurrency > 64:
            raise ValueError("--concurrency must be from 1 to 64")
        if not args.timeout > 0:
            raise ValueError("--timeout must be > 0")
        if args.long_context_tokens is not None and args.long_context_tokens < 16:
            raise ValueError("--long-context-tokens must be >= 16")
        extra = _parse_headers(args.header)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_USAGE
    set_path = args.set_path or default_set_path()
    if set_path is None:
        _err("no regression set: pass --set FILE (the bundled starter set was not found)")
        return EXIT_USAGE
    try:
        raw = Path(set_path).read_bytes()
        set_text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _err(f"cannot read the set {set_path}: {getattr(exc, 'strerror', None) or exc}")
        return EXIT_USAGE
    set_sha = hashlib.sha256(raw).hexdigest()
    probe = Q.parse_set(set_text, set_path, long_context_tokens=args.long_context_tokens)
    if probe.problems:
        for p in probe.problems[:20]:
            _err(p)
        _err(f"the set has {len(probe.problems)} problem(s); fix them (a partial set is never run)")
        return EXIT_USAGE
    baseline_doc = None
    if args.baseline:
        try:
            baseline_doc = Q.baseline_from_result(_read_json(args.baseline, "baseline file"))
        except Q.SetError as exc:
            _err(f"{args.baseline}: {exc}")
            return EXIT_USAGE
        except ValueError as exc:
            _err(str(exc))
            return EXIT_USAGE

    cand_headers, cand_secrets = _headers_for(args.url, args.api_key_env, extra)
    base_headers, base_secrets = _headers_for(args.baseline_url or args.url,
                                              args.baseline_api_key_env or args.api_key_env, extra)
    secrets = cand_secrets + base_secrets + list(cand_headers.values()) + list(base_headers.values())
    insecure = bool(getattr(args, "insecure", False))
    cand = QualityRunner(args.url, model=args.model, headers=cand_headers, concurrency=args.concurrency,
                         timeout=args.timeout, seed=args.seed, extra_secrets=secrets, insecure=insecure)
    base = None
    if args.baseline_url:
        base = QualityRunner(args.baseline_url, model=args.baseline_model, headers=base_headers,
                             concurrency=args.concurrency, timeout=args.timeout, seed=args.seed, extra_secrets=secrets,
                             insecure=insecure)

    async def probe_all() -> None:
        """Both endpoints answer before any case is sent (as `run` checks before load)."""
        lc_given = (baseline_doc or {}).get("long_context") or {}
        calibrate = not isinstance(lc_given.get("chars_per_token"), (int, float))
        jobs = [cand.probe(calibrate=calibrate)] + ([base.probe(calibrate=False)] if base is not None else [])
        results = await asyncio.gather(*jobs, return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res

    try:
        asyncio.run(probe_all())
    except ProbeError as exc:
        _err(f"quality: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130

    async def go() -> tuple[Q.QualitySet, dict, list[dict], list[dict] | None, list[str]]:
        notes: list[str] = []
        lc_given = (baseline_doc or {}).get("long_context") or {}
        cpt_saved = lc_given.get("chars_per_token")
        if isinstance(cpt_saved, (int, float)) and not isinstance(cpt_saved, bool):
            cpt, how = float(cpt_saved), "taken from the baseline file (identical long-context prompts)"
        elif cand.chars_per_token:
            cpt, how = cand.chars_per_token, "measured with the candidate server's /tokenize"
        else:
            cpt, how = Q.DEFAULT_CHARS_PER_TOKEN, "estimate of 4 characters per token (no /tokenize)"
        qset = Q.parse_set(set_text, set_path, long_context_tokens=args.long_context_tokens, chars_per_token=cpt)
        if qset.long_context:
            qset.long_context["estimate"] = how
            n_ctx = cand.server.get("n_ctx_per_slot") or cand.server.get("max_model_len")
            if isinstance(n_ctx, int):
                worst = max(qset.long_context["target_tokens"])
                if worst + 64 > n_ctx:
                    notes.append(f"long-context cases of ~{worst} tokens exceed the candidate's {n_ctx}-token context: "
                                 "they will fail (pass --long-context-tokens to size them to your deployment)")
        print(f"servewatch quality: {len(qset.cases)} cases against {cand.label}"
              + (f" and baseline {base.label}" if base else ""), file=sys.stderr)
        cand_rows = await cand.run(qset.cases, progress=_progress("candidate"))
        base_rows = None
        if base is not None:
            base_rows = await base.run(qset.cases, progress=_progress("baseline"))
        return qset, {"chars_per_token": cpt}, cand_rows, base_rows, notes

    try:
        qset, _lc, cand_rows, base_rows, notes = asyncio.run(go())
    except KeyboardInterrupt:
        return 130

    def side(runner, rows) -> dict:
        return Q.run_section(rows, target=runner.target, server=runner.server, headers=runner.headers,
                             started_at=runner.started_at, seconds=runner.seconds, notes=runner.notes)

    candidate = side(cand, cand_rows)
    baseline = None
    if base is not None and base_rows is not None:
        baseline = side(base, base_rows)
    elif baseline_doc is not None:
        baseline = dict(baseline_doc)
        baseline["source"] = f"file: {args.baseline}"
    if candidate["failed_requests"] == len(cand_rows):
        notes.append("every candidate request failed: check --url, the model name and credentials")
    if baseline is not None and base is not None and baseline["failed_requests"] == len(base_rows or []):
        notes.append("every baseline request failed: check --baseline-url, --baseline-model and credentials")
    sampling = dict(cand.sampling)
    for k in cand._dropped:
        sampling.pop(k, None)
    doc = Q.build_result(
        qset=qset, set_source=set_path, set_sha256=set_sha, candidate=candidate, baseline=baseline,
        margin=args.margin, alpha=args.alpha, min_cases=args.min_cases, sampling=sampling,
        generated_at=_now_iso(), tool_version=__version__, notes=notes,
    )
    doc["environment"] = {"servewatch": __version__, "python": platform.python_version(), "httpx": _httpx_version()}
    doc["insecure"] = insecure  # TLS verification was off (--insecure), as `run` records it in its header
    doc = scrub_doc(doc, secrets)
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    if args.out:
        try:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            _err(f"cannot write {args.out}: {exc.strerror or exc}")
            return EXIT_USAGE
    if args.json:
        print(text)
    else:
        print(Q.format_result_text(doc), end="")
        if args.out:
            print(f"result written to {args.out}")
    return int(doc["verdict"]["exit_code"])


def _httpx_version() -> str | None:
    try:
        import httpx

        return httpx.__version__
    except Exception:
        return None


def scrub_doc(obj: Any, secrets: list[str]) -> Any:
    """Every string in ``obj`` scrubbed by the one scrubber (belt and braces over the runner's scrubbing)."""
    from tui.core.redact import scrub

    return scrub(obj, secrets)


# =====================================================================================
# accept
# =====================================================================================


def add_accept_arguments(parser: argparse.ArgumentParser) -> None:
    from tui.budget_cli import add_budget_arguments
    from tui.report_cli import add_acceptance_arguments

    parser.description = (
        "Write the acceptance report (acceptance.md, acceptance.json, acceptance.html): budget, environment, load "
        "configuration, measured results per level, quality, cost basis, rollback conditions and the three-part "
        "conclusion. 'Ready for real traffic' only when the budget fits, the load test PASSes and quality PASSes."
    )
    parser.epilog = ACCEPT_EXIT_DOC
    parser.add_argument("--records", nargs="+", required=True, metavar="FILE", help="record files (JSON Lines, v1)")
    parser.add_argument("--quality", default=None, metavar="FILE", help="result JSON of `servewatch quality`")
    parser.add_argument("--rollback", default=None, metavar="FILE",
                        help="extra rollback conditions: one rule per line, or a JSON list")
    parser.add_argument("--out", default=".", metavar="DIR", help="directory for the report files (default: .)")
    parser.add_argument("--gpu-hour-usd", type=float, default=None, metavar="X", help="price of one GPU-hour in USD")
    parser.add_argument("--gpus", type=int, default=None, metavar="N", help="GPUs the deployment uses (default 1)")
    parser.add_argument("--no-html", action="store_true", help="do not write acceptance.html")
    from tui.argtypes import positive_float
    from tui.budget_cli import add_teaching_argument
    from tui.report_cli import add_required_level_argument

    add_required_level_argument(parser, positive_float)
    add_acceptance_arguments(parser)
    add_budget_arguments(parser)
    add_teaching_argument(parser)


def read_rollback_file(path: str) -> list[str]:
    """User rollback rules: a JSON list (strings or objects) or one rule per line (# comments). Raises ValueError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read rollback file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    from tui.core.acceptance import parse_rollback_rules

    return parse_rollback_rules(text, path)


def cmd_accept(args: argparse.Namespace) -> int:
    from tui.budget_cli import view_budget
    from tui.core import acceptance as A
    from tui.report_cli import (
        analyse_file,
        input_problem,
        monitor_config_from_args,
        not_record_file_problem,
    )

    try:
        cfg = monitor_config_from_args(args)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_USAGE
    try:
        budget, budget_origin = view_budget(args, args.records)
    except (ValueError, OSError) as exc:
        _err(f"bad budget: {exc}")
        return EXIT_USAGE
    if args.gpu_hour_usd is not None and not (args.gpu_hour_usd >= 0 and args.gpu_hour_usd < 1e9):
        _err("--gpu-hour-usd must be a price >= 0")
        return EXIT_USAGE
    if args.gpus is not None and args.gpus < 1:
        _err("--gpus must be >= 1")
        return EXIT_USAGE
    user_rules: list[str] = []
    if args.rollback:
        try:
            user_rules = read_rollback_file(args.rollback)
        except ValueError as exc:
            _err(str(exc))
            return EXIT_USAGE
    quality_doc = None
    if args.quality:
        try:
            quality_doc = _read_json(args.quality, "quality result")
            Q.recheck(quality_doc)
        except (ValueError, Q.SetError) as exc:
            _err(f"{args.quality}: {exc}")
            return EXIT_USAGE
    runs = []
    if args.records.count("-") > 1:
        _err("standard input (-) can be read once")
        return EXIT_USAGE
    record_budget = None
    for path in args.records:
        problem = input_problem(path)
        if problem:
            _err(problem)
            return EXIT_USAGE
        try:
            mon = analyse_file(path, cfg, budget, budget_origin)
        except OSError as exc:
            _err(f"cannot read {path}: {exc.strerror or exc}")
            return EXIT_USAGE
        problem = not_record_file_problem(mon)
        if problem:
            _err(problem)
            return EXIT_USAGE
        snap = mon.snapshot()
        for issue in snap.malformed_examples:
            _err(str(issue))
        if budget is None and snap.budget is not None and record_budget is None:
            record_budget = (snap.budget, f"budget record in {mon.source}")
        runs.append(A.RunInput(source=mon.source, snapshot=snap))
    if budget is None and record_budget is not None:  # the first file's budget record (verified on load)
        budget, budget_origin = record_budget
    out_dir = Path(args.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _err(f"cannot create {out_dir}: {exc.strerror or exc}")
        return EXIT_USAGE
    try:
        A.measured_section(runs, None, args.required_level)  # a level not in the files: exit 2 before writing
    except A.LevelNotInFile as exc:
        _err(str(exc))
        return EXIT_USAGE
    doc = A.build_acceptance(
        runs=runs,
        budget=budget,
        budget_source=budget_origin,
        quality=quality_doc,
        quality_source=args.quality,
        cost=A.CostInputs(gpu_hour_usd=args.gpu_hour_usd, gpus=args.gpus),
        rollback_rules=user_rules,
        rollback_source=args.rollback,
        slo_ttft_ms=cfg.slo_ttft_ms,
        target=cfg.target,
        alpha=cfg.alpha,
        min_window_s=cfg.min_window_s,
        required_level=args.required_level,
        generator={"servewatch": __version__, "python": platform.python_version(), "httpx": _httpx_version()},
        generated_at=_now_iso(),
    )
    md = A.render_markdown(doc)
    written = []
    try:
        for name, content in (("acceptance.md", md), ("acceptance.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")):
            (out_dir / name).write_text(content, encoding="utf-8")
            written.append(str(out_dir / name))
        if not args.no_html:
            (out_dir / "acceptance.html").write_text(A.render_html(doc, md), encoding="utf-8")
            written.append(str(out_dir / "acceptance.html"))
    except OSError as exc:
        _err(f"cannot write the report into {out_dir}: {exc.strerror or exc}")
        return EXIT_USAGE
    c = doc["conclusion"]
    if doc.get("banner"):
        print(doc["banner"])
    print(f"acceptance: {c['verdict']}  (budget: {c['budget']}, measured: {c['measured']}, quality: {c['quality']})")
    if doc["measured"].get("judged"):
        print(f"  {doc['measured']['judged']['text']}")
    if doc["budget"].get("capacity_vs_server"):
        print(f"  {doc['budget']['capacity_vs_server']}")
    for line in c["missing_or_failed"]:
        print(f"  {line}")
    print("wrote " + ", ".join(written))
    return int(doc["exit_code"])
