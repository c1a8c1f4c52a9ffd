"""Quality regression: the regression-set format, the checks, scoring and the regression verdict.

Pure domain, standard library only. The HTTP side lives in ``tui.sources.quality_runner``;
the command line in ``tui.cli.quality``. Format and method: ``docs/acceptance.md`` and
``quality/README.md``.

A regression set is JSON Lines. Each line is either one *case*::

    {"id": "arith-add", "category": "arithmetic",
     "messages": [{"role": "user", "content": "What is 17 + 25? Answer with the number only."}],
     "max_tokens": 16,
     "checks": [{"type": "number", "value": 42}]}

(``prompt`` instead of ``messages`` sends a plain completion), or a *generator* line that
expands into several long-context cases::

    {"generate": "long_context", "id": "lc-code", "fact": "The access code is 7319.",
     "question": "What is the access code? Answer with the number only.", "answer": "7319",
     "depths": [0.1, 0.5, 0.9], "tokens": 3000}

A case passes when every one of its checks passes. A request that failed is a failed case.

The regression verdict compares the candidate with a baseline on the SAME cases (paired by id,
and only when both sides ran the same case content). A pair is *usable* when both sides got an
HTTP answer: a pair where either side had a transport error (no answer at all: refused, TLS,
connect timeout; :data:`TRANSPORT_ERRORS`) or the baseline failed to answer (any request error) is
dropped and counted, never scored. A candidate that took the request and then timed out or reset
the stream failed that case (:data:`CANDIDATE_FAILURES`): it is scored, not dropped. Over the n usable pairs let n10 be the cases
the baseline passed and the candidate failed, n01 the reverse, and ``delta = (n10 - n01) / n``
the drop in pass rate. With margin m and error level alpha:

- NO_EVIDENCE when there is nothing to judge: no usable pair; the candidate answered no usable
  case (every request failed); the baseline passed no usable case (then the candidate has nothing
  to lose, and no set of pairs can show a regression).
- FAIL: the candidate is worse by more than m, with evidence: the one-sided exact McNemar
  test (H0: not worse) rejects at alpha AND the paired score test (Tango / Nam) rejects
  H0: delta <= m at alpha.
- PASS only from the non-inferiority test: n >= min_cases AND the paired score test rejects
  H0: delta >= m at alpha AND the exact guard P(Bin(n, m) <= n10 - n01) < alpha (the score test
  alone is slightly liberal when nearly every pair is concordant: 6.8% instead of 5% at 52 pairs).
  "Lost no more cases than it gained" is not evidence: with every pair concordant PASS needs
  ``pairs_needed(m, alpha)`` usable pairs (59 at m = 0.05, alpha = 0.05).
- NO_EVIDENCE otherwise: fewer usable pairs than min_cases, or too little evidence either way.
- NO_BASELINE: nothing to compare with; absolute pass rates only (never PASS).

The package, along those seams (each module imports the ones above it by module path, never this ``__init__``):

- ``vocab``: the result schema, verdict states, exit codes, check types, defaults, sampling, error classes,
  :class:`SetError`;
- ``cases``: :class:`Case`, :class:`QualitySet`, check and field validation, :func:`parse_case`;
- ``long_context``: filler prose, the fact placed at a depth, :func:`expand_long_context`;
- ``sets``: :func:`parse_set` (the JSON Lines set file), :func:`merge_sets` (the suite plus the team's set);
- ``suite``: the generated standard suite (:class:`SuiteSpec`, :func:`build_suite`, :func:`category_counts`);
- ``checks``: the checks on one answer, :func:`evaluate`, :func:`case_result`, :func:`majority_row` (K attempts);
- ``lctable``: long-context recall by prompt length and needle depth (:func:`long_context_table`);
- ``advice``: the next configuration to try, from what was compared (:func:`fallback_advice`);
- ``scoring``: pass rates with Wilson intervals (:func:`summarize`);
- ``regression``: the paired tests and the regression verdict (:func:`compare`), overall and per category, with
  the required categories;
- ``results``: the result document, baselines read back, :func:`recheck`, :func:`format_result_text`;
- ``policy``: ``accept``'s own quality policy (recomputed with accept's settings; acceptance-grade or not).

The set format, the checks and the verdict form one contract with the result file (the verdict is re-checked
from the file's cases by ``accept``), so they live in one package; this ``__init__`` re-exports the public names
for callers outside it (``import tui.core.quality as Q``).
"""

from __future__ import annotations

from tui.core.quality.advice import (
    NOTHING_KNOWN,
    advice_text,
    fallback_advice,
    with_advice,
)
from tui.core.quality.cases import (
    Case,
    QualitySet,
    parse_case,
)
from tui.core.quality.checks import (
    case_result,
    clean_answer,
    evaluate,
    excerpt,
    majority_row,
    numbers_in,
    run_check,
)
from tui.core.quality.lctable import (
    is_long_context,
    long_context_table,
)
from tui.core.quality.long_context import (
    expand_long_context,
    filler_text,
    place_fact,
)
from tui.core.quality.regression import (
    binom_cdf,
    category_pairs_needed,
    compare,
    mcnemar_one_sided,
    pairs_needed,
    restricted_p01,
    score_z,
    usable_pairs,
)
from tui.core.quality.results import (
    baseline_from_result,
    build_result,
    decoding_of,
    format_result_text,
    long_context_reached,
    recheck,
    required_of,
    run_section,
)
from tui.core.quality.scoring import (
    rate,
    summarize,
)
from tui.core.quality.sets import (
    merge_sets,
    parse_set,
)
from tui.core.quality.suite import (
    CATEGORIES,
    LEVELS,
    SUITE_NAME,
    SUITE_VERSION,
    SuiteSpec,
    build_suite,
    category_counts,
    default_spec,
    reference_answers,
)
from tui.core.quality.vocab import (
    CANDIDATE_FAILURES,
    CHECK_TYPES,
    DEFAULT_ALPHA,
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_DEPTHS,
    DEFAULT_LONG_CONTEXT_TOKENS,
    DEFAULT_MARGIN,
    DEFAULT_MIN_CASES,
    DEFAULT_SEED,
    ERROR_CLASSES,
    EXCERPT_CHARS,
    EXIT_CODES,
    FAIL,
    LOW_PASS_RATE,
    MAX_TOKENS_LIMIT,
    NO_BASELINE,
    NO_EVIDENCE,
    PASS,
    RESULT_SCHEMA,
    SAMPLING,
    TRANSPORT_ERRORS,
    QualityState,
    SetError,
)

__all__ = [
    "CATEGORIES",
    "LEVELS",
    "SUITE_NAME",
    "SUITE_VERSION",
    "SuiteSpec",
    "build_suite",
    "category_counts",
    "default_spec",
    "merge_sets",
    "reference_answers",
    "CANDIDATE_FAILURES",
    "CHECK_TYPES",
    "Case",
    "DEFAULT_ALPHA",
    "DEFAULT_CHARS_PER_TOKEN",
    "DEFAULT_DEPTHS",
    "DEFAULT_LONG_CONTEXT_TOKENS",
    "DEFAULT_MARGIN",
    "DEFAULT_MIN_CASES",
    "DEFAULT_SEED",
    "ERROR_CLASSES",
    "EXCERPT_CHARS",
    "EXIT_CODES",
    "FAIL",
    "LOW_PASS_RATE",
    "MAX_TOKENS_LIMIT",
    "NOTHING_KNOWN",
    "NO_BASELINE",
    "NO_EVIDENCE",
    "PASS",
    "QualitySet",
    "QualityState",
    "RESULT_SCHEMA",
    "SAMPLING",
    "SetError",
    "TRANSPORT_ERRORS",
    "advice_text",
    "baseline_from_result",
    "binom_cdf",
    "build_result",
    "case_result",
    "category_pairs_needed",
    "clean_answer",
    "compare",
    "decoding_of",
    "evaluate",
    "excerpt",
    "expand_long_context",
    "fallback_advice",
    "filler_text",
    "format_result_text",
    "is_long_context",
    "long_context_reached",
    "long_context_table",
    "majority_row",
    "mcnemar_one_sided",
    "numbers_in",
    "pairs_needed",
    "parse_case",
    "parse_set",
    "place_fact",
    "rate",
    "recheck",
    "required_of",
    "restricted_p01",
    "run_check",
    "run_section",
    "score_z",
    "summarize",
    "usable_pairs",
    "with_advice",
]
