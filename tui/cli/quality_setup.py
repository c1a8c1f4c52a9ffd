"""`servewatch quality`: what is run, decided before any case is sent.

The cases (the standard suite, the team's ``--set``, or both), the context the long-context cases target (``--max-
context``, else a saved baseline's, else the candidate server's own), the suite spec a saved baseline recorded (its
cases at its lengths), the configuration facts of each side (``--setting KEY=VALUE``) and the required categories.
Bad usage raises :class:`tui.cli.options.UsageError` (one line, exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tui.cli.declare import Settings, flag, path
from tui.cli.options import INPUT, UsageError, positive_int
from tui.core import quality as Q

#: configuration facts a side may state (the advice reads them): free text values
SETTING_KEYS = ("weights", "kv_cache", "engine", "model", "context_tokens", "quantization", "gpu", "notes")


def setting(text: str) -> tuple[str, str]:
    """argparse type of ``--setting KEY=VALUE``."""
    key, sep, value = str(text).partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (for example kv_cache=q8_0), got {text!r}")
    if key not in SETTING_KEYS:
        raise argparse.ArgumentTypeError(f"unknown setting {key!r}; use one of {', '.join(SETTING_KEYS)}")
    return key, value


def config_of(pairs: list[tuple[str, str]] | None, flag: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for key, value in pairs or []:
        v: Any = int(value) if key == "context_tokens" and value.isdigit() else value
        out[key] = {"value": v, "source": flag}
    return out


def server_context(server: Mapping) -> tuple[int | None, str]:
    """The context one sequence may use, as the server states it (llama.cpp /props n_ctx per slot, vLLM /v1/models
    max_model_len), with where it came from."""
    n = server.get("n_ctx_per_slot")
    if isinstance(n, int) and n > 0:
        return n, "server /props default_generation_settings.n_ctx"
    n = server.get("max_model_len")
    if isinstance(n, int) and n > 0:
        return n, "server /v1/models max_model_len"
    return None, ""


@dataclass(frozen=True, kw_only=True)
class SuiteFlags(Settings):
    """What `servewatch quality` runs: the generated suite, the team's set, the long-context target, the required
    categories (their flags sit with the command's own, no group of their own)."""

    suite: str | None = flag("--suite", choices=("standard", "none"), default=None,
                             help="the generated regression suite (default: standard when no --set is given): "
                                  "standard (with --set the team's cases are added to it), none (only --set)")
    cases: int | None = flag("--cases", type=positive_int, default=None, metavar="N",
                             help=f"cases of the standard suite, at least 10 (default {Q.SuiteSpec().cases}: 40%% of "
                                  "them long-context)")
    level: str | None = flag("--level", choices=Q.LEVELS, default=None,
                             help="difficulty of the standard suite: default (sized for small models; the default) "
                                  "or hard")
    suite_seed: int | None = flag("--suite-seed", type=int, default=None, metavar="N",
                                  help=f"the suite generator's seed (default {Q.SuiteSpec().seed}; recorded in the "
                                       "result)")
    set_path: str | None = path("--set", role=INPUT, default=None, metavar="FILE",
                                help="the team's regression set (JSON Lines, quality/README.md; default: none): "
                                     "replaces the suite, or adds to it with --suite standard")
    max_context: int | None = flag(
        "--max-context", "--long-context-tokens", type=positive_int, default=None, metavar="TOKENS",
        help="the context the long-context cases target: prompts at 25, 50 and 90%% of it (default: the candidate "
             "server's, from /props or /v1/models; --long-context-tokens is the old name)")
    required: list[str] | None = flag(
        "--required", action="append", default=None, metavar="NAME",
        help="a category that must itself be non-inferior for an overall PASS (repeatable; the set's "
             "required_categories line adds to them; default: none)")


@dataclass
class Plan:
    """What one run sends."""

    qset: Q.QualitySet
    set_source: str
    set_text: str | None
    spec: Q.SuiteSpec | None
    context_tokens: int | None
    context_source: str
    notes: list[str] = field(default_factory=list)


def baseline_spec(baseline_doc: Any) -> Q.SuiteSpec | None:
    """The suite a saved baseline result file (the whole document) ran (None when it ran no suite). UsageError when this servewatch cannot rebuild it."""
    if not isinstance(baseline_doc, Mapping) or not isinstance(baseline_doc.get("set"), Mapping):
        return None
    rec = baseline_doc["set"].get("suite")
    if not rec:
        return None
    try:
        return Q.SuiteSpec.from_dict(rec)
    except Q.SetError as exc:
        raise UsageError(f"the baseline's suite cannot be rebuilt: {exc}") from None


def wants_suite(suite: SuiteFlags, baseline: Q.SuiteSpec | None) -> bool:
    if suite.suite == "none":
        return False
    return suite.suite == "standard" or not suite.set_path or baseline is not None


def resolve_context(suite: SuiteFlags, baseline: Q.SuiteSpec | None, server: Mapping) -> tuple[int | None, str]:
    if suite.max_context is not None:
        return int(suite.max_context), "--max-context"
    if baseline is not None and baseline.context_tokens:
        return baseline.context_tokens, "the baseline file's suite (its lengths)"
    return server_context(server)


def build_plan(suite: SuiteFlags, *, team_text: str | None, team_source: str | None,
               baseline: Q.SuiteSpec | None, server: Mapping, chars_per_token: float, cpt_how: str) -> Plan:
    """The cases to run. UsageError on anything that would make the run mean something other than asked."""
    ctx, ctx_source = resolve_context(suite, baseline, server)
    notes: list[str] = []
    qset: Q.QualitySet | None = None
    spec: Q.SuiteSpec | None = None
    if wants_suite(suite, baseline):
        if baseline is not None:
            for flag, mine, theirs in (("--cases", suite.cases, baseline.cases), ("--level", suite.level, baseline.level),
                                       ("--suite-seed", suite.suite_seed, baseline.seed)):
                if mine is not None and mine != theirs:
                    raise UsageError(f"{flag} {mine} differs from the baseline's suite ({theirs}): the candidate "
                                     "runs the baseline's cases; drop the flag")
            if suite.max_context is not None and suite.max_context != baseline.context_tokens:
                raise UsageError(f"--max-context {suite.max_context} differs from the baseline's "
                                 f"{baseline.context_tokens}: the candidate runs the baseline's cases at its lengths")
            spec = baseline
        else:
            if ctx is None and Q.category_counts(suite.cases or Q.SuiteSpec().cases)["long_context"]:
                raise UsageError("the candidate server does not state its context length: pass --max-context TOKENS")
            try:
                spec = Q.SuiteSpec(seed=suite.suite_seed if suite.suite_seed is not None else Q.SuiteSpec().seed,
                                   cases=suite.cases if suite.cases is not None else Q.SuiteSpec().cases,
                                   level=suite.level or "default", context_tokens=ctx,
                                   chars_per_token=round(float(chars_per_token), 4), context_source=ctx_source)
            except Q.SetError as exc:
                raise UsageError(str(exc)) from None
        try:
            qset = Q.build_suite(spec)
        except Q.SetError as exc:
            raise UsageError(str(exc)) from None
        qset.long_context["estimate"] = cpt_how if baseline is None else "taken from the baseline file's suite"
    elif suite.cases is not None or suite.level is not None or suite.suite_seed is not None:
        raise UsageError("--cases, --level and --suite-seed size the standard suite: add --suite standard")
    source = "suite:standard" if spec is not None else ""
    if team_text is not None and team_source is not None:
        # a team generator line keeps its own "tokens" unless --max-context (the old --long-context-tokens) is given
        team = Q.parse_set(team_text, team_source, context_tokens=suite.max_context, chars_per_token=chars_per_token)
        if team.problems:
            raise UsageError(f"the set has {len(team.problems)} problem(s): {team.problems[0]}")
        if team.long_context:
            team.long_context["estimate"] = cpt_how
        qset = team if qset is None else Q.merge_sets(qset, team)
        source = team_source if not source else f"{source} + {team_source}"
        if qset.problems:
            raise UsageError(qset.problems[0])
    assert qset is not None
    cats = {c.category for c in qset.cases}
    unknown = [c for c in (suite.required or []) if c not in cats]
    if unknown:
        raise UsageError(f"--required {unknown[0]}: no case of that category (categories: {', '.join(sorted(cats))})")
    cand_ctx, _ = server_context(server)
    if cand_ctx is not None:
        long = [c for c in qset.cases if c.generated and isinstance(c.generated.get("target_tokens"), int)
                and c.generated["target_tokens"] + c.max_tokens > cand_ctx]
        if long:
            notes.append(f"{len(long)} long-context case(s) exceed the candidate's {cand_ctx}-token context: they are "
                         "sent and count as failed cases (never skipped)")
    return Plan(qset, source, team_text, spec, ctx, ctx_source, notes)
