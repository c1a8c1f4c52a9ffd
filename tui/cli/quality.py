"""`servewatch quality` (quality regression: candidate vs baseline).

Argparse glue around ``tui.core.quality`` and ``tui.sources.quality_runner`` (imported when the command runs).
Exit codes: 0 PASS, 1 FAIL, 3 no evidence or no baseline, 2 bad usage, an unusable endpoint or unreadable input.
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
from typing import Any

from tui import __version__
from tui.cli.options import (
    INPUT,
    OUTPUT,
    UsageError,
    add_http_arguments,
    epilog,
    extra_headers,
    fraction,
    margin_fraction,
    path_arg,
    positive_float,
    positive_int,
    url_credentials,
)
from tui.cli.quality_setup import SETTING_KEYS, baseline_spec, build_plan, config_of, server_context, setting
from tui.core import quality as Q
from tui.core.defaults import QUALITY_REPEAT
from tui.core.textsafe import term

QUALITY_EXIT_DOC = ("exit codes: 0 PASS (the non-inferiority test shows the drop is below the margin), 1 FAIL "
                    "(candidate worse than the baseline by more than the margin), 3 NO_EVIDENCE or no baseline, "
                    "2 bad usage, an endpoint that cannot be used (unreachable, TLS or HTTP error) or unreadable input")


def default_set_path() -> str | None:
    """The bundled STARTER set (``--set`` it explicitly; the default is the generated standard suite)."""
    from tui.resources import bundled_file

    p = bundled_file("quality", "starter.jsonl")
    return None if p is None else str(p)


def _err(msg: str) -> None:
    """A warning line on stderr (the command goes on); bad usage raises UsageError instead."""
    print(f"servewatch: {term(msg)}", file=sys.stderr)


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


# =====================================================================================
# quality
# =====================================================================================


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch quality`."""
    parser.description = (
        "Run a quality regression set against the candidate deployment (and a baseline endpoint, or compare "
        "with a saved baseline result) with deterministic sampling, and judge whether quality regressed. "
        "A failed request counts as a failed case."
    )
    parser.epilog = epilog("servewatch quality --url http://127.0.0.1:8080 --baseline-url http://127.0.0.1:8081",
                           "servewatch quality --url http://127.0.0.1:8080 --baseline quality-result.json --json",
                           codes=QUALITY_EXIT_DOC)
    parser.add_argument("--url", required=True, metavar="URL",
                        help="candidate endpoint (OpenAI-compatible base URL, with or without /v1; required, no default)")
    parser.add_argument("--model", default=None, metavar="NAME",
                        help="candidate model name (default: the first of /v1/models)")
    b = parser.add_mutually_exclusive_group()
    b.add_argument("--baseline-url", default=None, metavar="URL",
                   help="baseline endpoint: the set is run there too (default: none; without it or --baseline the "
                        "verdict is NO_BASELINE)")
    path_arg(b, "--baseline", role=INPUT, default=None, metavar="FILE",
                   help="a saved quality result (--out of an earlier run) whose candidate is the baseline (default: none)")
    parser.add_argument("--baseline-model", default=None, metavar="NAME",
                        help="model name on the baseline endpoint (default: the first of its /v1/models)")
    parser.add_argument("--suite", choices=("standard", "none"), default=None,
                        help="the generated regression suite (default: standard when no --set is given): standard (with --set "
                             "the team's cases are added to it), none (only --set)")
    parser.add_argument("--cases", type=positive_int, default=None, metavar="N",
                        help=f"cases of the standard suite, at least 10 (default {Q.SuiteSpec().cases}: 40%% of them "
                             "long-context)")
    parser.add_argument("--level", choices=Q.LEVELS, default=None,
                        help="difficulty of the standard suite: default (sized for small models; the default) or hard")
    parser.add_argument("--suite-seed", type=int, default=None, metavar="N",
                        help=f"the suite generator's seed (default {Q.SuiteSpec().seed}; recorded in the result)")
    path_arg(parser, "--set", role=INPUT, dest="set_path", default=None, metavar="FILE",
                        help="the team's regression set (JSON Lines, quality/README.md; default: none): replaces the "
                             "suite, or adds to it with --suite standard")
    parser.add_argument("--max-context", "--long-context-tokens", dest="max_context", type=positive_int, default=None,
                        metavar="TOKENS",
                        help="the context the long-context cases target: prompts at 25, 50 and 90%% of it (default: "
                             "the candidate server's, from /props or /v1/models; --long-context-tokens is the old name)")
    parser.add_argument("--required", action="append", default=None, metavar="NAME",
                        help="a category that must itself be non-inferior for an overall PASS (repeatable; the set's "
                             "required_categories line adds to them; default: none)")
    parser.add_argument("--repeat", type=positive_int, default=QUALITY_REPEAT, metavar="N",
                        help="attempts per case, 1 to 25; the majority is scored (default 1: decoding is deterministic)")
    parser.add_argument("--setting", type=setting, action="append", default=None, metavar="KEY=VALUE",
                        help="a fact about the candidate's configuration, for the advice (repeatable; keys: "
                             + ", ".join(SETTING_KEYS) + "; default: none, the server's own facts only)")
    parser.add_argument("--baseline-setting", type=setting, action="append", default=None, metavar="KEY=VALUE",
                        help="the same for the baseline (default: none; a saved baseline keeps the settings it was run with)")
    path_arg(parser, "--out", role=OUTPUT, default="quality-result.json", metavar="FILE",
                        help="write the result JSON here (default quality-result.json)")
    parser.add_argument("--json", action="store_true", help="print the result JSON instead of the text summary")
    parser.add_argument("--margin", type=margin_fraction, default=Q.DEFAULT_MARGIN, metavar="FRACTION",
                        help="largest acceptable drop in pass rate (default 0.05 = 5 points)")
    parser.add_argument("--alpha", type=fraction, default=Q.DEFAULT_ALPHA, metavar="FRACTION",
                        help="error level of the tests (default 0.05)")
    parser.add_argument("--min-cases", type=positive_int, default=Q.DEFAULT_MIN_CASES, metavar="N",
                        help="fewest usable paired cases with which PASS is possible (default 20; with every pair "
                             "concordant the test itself needs 59 at the default margin and alpha)")
    parser.add_argument("--concurrency", type=positive_int, default=1, metavar="N",
                        help="requests in flight at once, 1 to 64 (default 1: batching can perturb greedy decoding)")
    parser.add_argument("--timeout", type=positive_float, default=120.0, metavar="SECONDS",
                        help="read timeout per request in seconds (default 120)")
    parser.add_argument("--seed", type=int, default=Q.DEFAULT_SEED, metavar="N",
                        help="sampling seed sent with every request (default %(default)s)")
    c = add_http_arguments(parser, title="credentials, headers and TLS (both endpoints)")
    c.add_argument("--baseline-api-key-env", default=None, metavar="VAR",
                   help="API key variable for the baseline endpoint (default: --api-key-env)")
    c.add_argument("--baseline-url-credentials-env", default=None, metavar="VAR",
                   help="user:password for the baseline URL's Basic authentication, from environment variable VAR "
                        "(default: --url-credentials-env when the baseline is the same URL, else none)")
    k = parser.add_argument_group("integrity (the result's digest is written either way)")
    k.add_argument("--sign-key-env", metavar="VAR", default=None,
                   help="sign the result: its integrity field also carries an HMAC-SHA256 with the key in environment "
                        "variable VAR (the key is never recorded; the file names only a key id) (default: unsigned)")
    k.add_argument("--verify-key-env", metavar="VAR", default=None,
                   help="verify the --baseline FILE's signature with the key in environment variable VAR: a file not "
                        "signed with that key is refused (default: its digest is checked, its signature not)")


def read_quality_file(path: str, key: bytes | None, what: str = "quality result") -> tuple[Any, Any]:
    """(document, its verification: ``tui.core.quality.digest.QualityIntegrity``) of a saved quality result.
    ValueError when it cannot be read or is not JSON (the caller makes it bad usage)."""
    from tui.core.quality.digest import verify

    doc = _read_json(path, what)
    try:
        return doc, verify(doc, key, name=path)
    except (RecursionError, ValueError, TypeError) as exc:
        raise ValueError(f"{what} {path} cannot be verified: {type(exc).__name__}") from None


def _checked_baseline(path: str, key: bytes | None) -> tuple[Any, dict]:
    """A saved baseline, verified (digest, signature with ``--verify-key-env``, rows against themselves): a
    broken, unsigned-with-a-key or self-contradicting file is refused (UsageError); a file without a digest is
    used, said (its rows cannot be shown to be the ones written) and recorded as unverified."""
    from tui.core.quality.filecheck import file_problems

    try:
        raw_doc, integrity = read_quality_file(path, key, "baseline file")
    except ValueError as exc:
        raise UsageError(exc) from None
    if integrity.problems:
        raise UsageError(f"{path}: {integrity.problems[0]}")
    problems = file_problems(raw_doc) if isinstance(raw_doc, dict) and "candidate" in raw_doc else []
    if problems:
        for pr in problems[1:20]:
            _err(f"{path}: {pr}")
        raise UsageError(f"{path}: {problems[0]} (a baseline that contradicts itself is not used)")
    return raw_doc, integrity.to_dict()


def _headers_for(url: str, env_var: str | None, extra: dict[str, str],
                 credentials: str | None = None) -> tuple[dict[str, str], list[str]]:
    """(headers, secrets) as `run` builds them: Bearer from the key variable, else Basic from ``credentials``
    (``--url-credentials-env``) or the URL's user info."""
    from tui.sources.openai_http import auth_headers

    return auth_headers(url, os.environ.get(env_var) if env_var else None, list(extra.items()), credentials=credentials)


def _check_url(url: str, flag: str) -> None:
    from urllib.parse import urlsplit

    p = urlsplit(str(url).strip())
    if p.scheme not in ("http", "https") or not p.hostname:
        raise ValueError(f"{flag} must be an http(s) URL")


def _read_json(path: str, what: str) -> Any:
    """A quality result (``--quality``, ``--baseline``): a regular file of at most ``MAX_QUALITY_FILE_BYTES``,
    JSON nested no deeper than ``MAX_JSON_DEPTH``; ValueError (one line) otherwise."""
    from tui.core.bounds import MAX_JSON_DEPTH, MAX_QUALITY_FILE_BYTES, json_too_deep
    from tui.sources.infiles import read_input

    try:
        text = read_input(path, MAX_QUALITY_FILE_BYTES, what).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{what} {path} is not valid JSON: {str(exc)[:80]}") from None
    if json_too_deep(doc):
        raise ValueError(f"{what} {path} is nested deeper than {MAX_JSON_DEPTH} levels")
    return doc


def _progress(label: str):
    def cb(done: int, total: int, row: dict) -> None:
        mark = "pass" if row.get("passed") else ("ERROR " + str(row.get("error")) if row.get("error") else "fail")
        print(term(f"  [{label} {done}/{total}] {row['id']}: {mark}"), file=sys.stderr)

    return cb


def run(args: argparse.Namespace) -> int:
    """`servewatch quality`."""
    from tui.sources.quality_runner import ProbeError, QualityRunner

    # ---- usage checks (the value types refuse nan, inf, negatives and fractions outside 0..1)
    try:
        _check_url(args.url, "--url")
        if args.baseline_url:
            _check_url(args.baseline_url, "--baseline-url")
    except ValueError as exc:
        raise UsageError(exc) from None
    if args.concurrency > 64:
        raise UsageError("--concurrency must be from 1 to 64")
    if args.repeat > 25:
        raise UsageError("--repeat must be from 1 to 25")
    extra = dict(extra_headers(args))  # --header, --header-file, --header-env
    creds = url_credentials(args)
    base_creds = url_credentials(args, "baseline_url_credentials_env", "--baseline-url-credentials-env")
    if base_creds is None and not args.baseline_url:
        base_creds = creds  # the baseline is the same URL
    for flag, url, given in (("--url-credentials-env", args.url, creds),
                             ("--baseline-url-credentials-env", args.baseline_url, base_creds)):
        if given and url and ("@" in url.split("://", 1)[-1].split("/", 1)[0]):
            raise UsageError(f"{flag}: the URL carries user:password too; give the credentials once")
    team_text: str | None = None
    set_sha: str | None = None
    if args.set_path:
        try:
            from tui.core.bounds import MAX_QUALITY_FILE_BYTES
            from tui.sources.infiles import read_input

            raw = read_input(args.set_path, MAX_QUALITY_FILE_BYTES, "quality set")
            team_text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the set {args.set_path}: {getattr(exc, 'strerror', None) or exc}") from None
        set_sha = hashlib.sha256(raw).hexdigest()
        probe = Q.parse_set(team_text, args.set_path, context_tokens=args.max_context)
        if probe.problems:
            for p in probe.problems[:20]:
                _err(p)
            raise UsageError(f"the set has {len(probe.problems)} problem(s); fix them (a partial set is never run)")
    elif args.suite == "none":
        raise UsageError("--suite none needs --set FILE (nothing to run)")
    from tui.cli.chainopts import key_from_env

    sign = key_from_env(args.sign_key_env, "--sign-key-env")
    verify_key = key_from_env(args.verify_key_env, "--verify-key-env")
    if verify_key is not None and not args.baseline:
        raise UsageError("--verify-key-env verifies a saved baseline: give --baseline FILE")
    baseline_doc = None
    base_spec = None
    base_integrity = None
    if args.baseline:
        raw_doc, base_integrity = _checked_baseline(args.baseline, verify_key)
        try:
            baseline_doc = Q.baseline_from_result(raw_doc)
        except Q.SetError as exc:
            raise UsageError(f"{args.baseline}: {exc}") from None
        except ValueError as exc:
            raise UsageError(exc) from None
        base_spec = baseline_spec(raw_doc)
        if base_spec is None and not args.set_path:
            raise UsageError(f"the baseline {args.baseline} ran no standard suite: pass the set it ran (--set FILE)")
        if base_spec is not None and args.suite == "none":
            raise UsageError("the baseline ran the standard suite: drop --suite none (the candidate runs its cases)")
        if base_integrity["state"] == "unverified":
            _err(f"{base_integrity['summary']}; the comparison is not acceptance-grade")

    cand_headers, cand_secrets = _headers_for(args.url, args.api_key_env, extra, creds)
    base_headers, base_secrets = _headers_for(args.baseline_url or args.url,
                                              args.baseline_api_key_env or args.api_key_env, extra, base_creds)
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
        raise UsageError(f"quality: {exc}") from None
    from tui.core.identity import identity_of, model_mismatch
    from tui.core.textsafe import term

    for name, runner in (("candidate", cand), ("baseline", base)):
        if runner is not None:  # printed at start; the run goes on, its verdict is not acceptance-grade
            why = model_mismatch(identity_of({"target": runner.target, "server_identity": runner.identity,
                                              "environment": {"server": runner.server}}))
            if why:
                _err(term(f"WARNING: {name}: {why.replace('the run claims', 'it claims', 1)}; not acceptance-grade"))

    lc_given = (baseline_doc or {}).get("long_context") or {}
    cpt_saved = lc_given.get("chars_per_token")
    if isinstance(cpt_saved, (int, float)) and not isinstance(cpt_saved, bool):
        cpt, how = float(cpt_saved), "taken from the baseline file (identical long-context prompts)"
    elif cand.chars_per_token:
        cpt, how = cand.chars_per_token, "measured with the candidate server's /tokenize"
    else:
        cpt, how = Q.DEFAULT_CHARS_PER_TOKEN, "estimate of 4 characters per token (the server has no /tokenize)"
    plan = build_plan(args, team_text=team_text, team_source=args.set_path, baseline=base_spec, server=cand.server,
                      chars_per_token=cpt, cpt_how=how)
    qset, notes = plan.qset, list(plan.notes)
    for runner in (cand, base):
        if runner is not None:
            n, src = server_context(runner.server)
            if n is not None:
                runner.server["context_tokens"], runner.server["context_source"] = n, src
    if plan.context_tokens is not None:
        qset.long_context["context_source"] = plan.context_source

    async def go() -> tuple[list[dict], list[dict] | None]:
        print(term(f"servewatch quality: {len(qset.cases)} cases ({plan.set_source}) against {cand.label}"
                   + (f" and baseline {base.label}" if base else "")
                   + (f", {args.repeat} attempts each" if args.repeat > 1 else "")), file=sys.stderr)
        cand_rows = await cand.run(qset.cases, progress=_progress("candidate"), repeat=args.repeat)
        base_rows = None
        if base is not None:
            base_rows = await base.run(qset.cases, progress=_progress("baseline"), repeat=args.repeat)
        return cand_rows, base_rows

    cand_rows, base_rows = asyncio.run(go())  # Ctrl-C: 130 from main()

    def side(runner, rows, config) -> dict:
        return Q.run_section(rows, target=runner.target, server=runner.server, headers=runner.headers,
                             started_at=runner.started_at, seconds=runner.seconds, notes=runner.notes, config=config,
                             server_identity=runner.identity)

    candidate = side(cand, cand_rows, config_of(args.setting, "--setting"))
    baseline = None
    if base is not None and base_rows is not None:
        baseline = side(base, base_rows, config_of(args.baseline_setting, "--baseline-setting"))
    elif baseline_doc is not None:
        baseline = dict(baseline_doc)
        baseline["source"] = f"file: {args.baseline}"
        baseline["integrity"] = base_integrity  # what was verified when it was read (accept reads it)
        if args.baseline_setting:
            baseline["config"] = {**(baseline.get("config") or {}), **config_of(args.baseline_setting,
                                                                              "--baseline-setting")}
    if candidate["failed_requests"] == len(cand_rows):
        notes.append("every candidate request failed: check --url, the model name and credentials")
    if baseline is not None and base is not None and baseline["failed_requests"] == len(base_rows or []):
        notes.append("every baseline request failed: check --baseline-url, --baseline-model and credentials")
    sampling = dict(cand.sampling)
    for k in cand._dropped:
        sampling.pop(k, None)
    doc = Q.build_result(
        qset=qset, set_source=plan.set_source, set_sha256=set_sha, candidate=candidate, baseline=baseline,
        margin=args.margin, alpha=args.alpha, min_cases=args.min_cases, sampling=sampling,
        generated_at=_now_iso(), tool_version=__version__, notes=notes, required=args.required or (),
        decoding=Q.decoding_of(sampling, args.repeat),
    )
    doc["environment"] = {"servewatch": __version__, "python": platform.python_version(), "httpx": _httpx_version()}
    doc["insecure"] = insecure  # TLS verification was off (--insecure), as `run` records it in its header
    doc = scrub_doc(doc, secrets)
    doc["acceptance_grade"] = acceptance_block(doc)
    from tui.core.quality.digest import seal

    doc = seal(doc, sign)  # the integrity field: the digest of the canonical content (and the MAC with a key)
    text = json.dumps(doc, indent=2)  # ensure_ascii: no raw control, C1 or bidi character in the file or on the terminal
    if args.out:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(args.out, text + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    if args.json:
        print(text)
    else:
        print(Q.format_result_text(doc), end="")
        if args.out:
            print(f"result written to {args.out}")
    return int(doc["verdict"]["exit_code"])


def acceptance_block(doc: dict) -> dict:
    """Whether this result can count towards "ready" as `accept` judges it (its default policy, no load runs): the
    problems found in the document itself (the same configuration on both sides, a model claimed but not served,
    long-context cases short of the server's context, a required category without a PASS). Informational: accept
    recomputes everything from the rows."""
    from tui.core.quality.policy import QualityPolicy, configuration_problems, policy_problems

    try:
        problems = policy_problems(doc, QualityPolicy(), check_integrity=False)
    except Q.SetError as exc:
        problems = [str(exc)]
    return {"acceptance_grade": not problems, "problems": problems, "notes": configuration_problems(doc)[1],
            "policy": "accept's defaults (margin 0.05, alpha 0.05, min cases 20); recomputed by accept"}


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
