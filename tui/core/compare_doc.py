"""The compare document's shape: what ``servewatch compare --json`` prints, as ``TypedDict``s.

``tui.core.compare.compare`` builds a :class:`CompareDoc` (re-exported there) and ``compare.to_markdown`` reads it
by these types: a misspelled key is a mypy error; ``tests/unit/core/test_typed_documents.py`` checks that the keys
declared are the keys ``compare`` produces for the committed samples. The module is the document's types only (no
code), split from ``compare.py`` to keep that under the 700-line rule. A block another module builds (the workload,
the identity, the prefix cache) is ``dict[str, Any]``: its shape is its builder's.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from tui.core.stats import LatencyDoc


class ComparePercentile(TypedDict):
    value: float | None
    n: int
    supported: bool
    n_needed: int


class LevelSummary(TypedDict):
    """One side of one matched level (``LevelStats.summary``)."""

    level: float | None
    mode: str | None
    n: int
    good: int
    good_fraction: float | None
    wilson_95: list[float | None]
    excluded_cancelled_open: int
    not_judgeable: int
    client_limited: int
    ttft_ms: dict[str, ComparePercentile]  # "P50", "P95", "P99"
    tpot_ms_p50: float | None
    latency: dict[str, LatencyDoc]  # per tui.core.compare.LATENCY_KEYS
    goodput_per_s: float | None
    seconds: float | None
    vif: float | None
    n_eff: float


class CompareLevel(TypedDict):
    """One matched level: both sides, the verdict on the difference of their good fractions, and why."""

    level_base: float | None
    level_cand: float | None
    base: LevelSummary
    cand: LevelSummary
    # the interval, when both sides had requests to judge (``judge``)
    difference: NotRequired[float]
    interval: NotRequired[list[float]]
    confidence_one_sided: NotRequired[float]
    margin: NotRequired[float]
    vif_base: NotRequired[float]
    vif_cand: NotRequired[float]
    n_eff_base: NotRequired[float]
    n_eff_cand: NotRequired[float]
    verdict: str
    reason: str
    latency: dict[str, dict[str, float | None]]  # per metric, candidate minus base per percentile
    prefix_cache: NotRequired[dict[str, Any]]  # tui.core.prefix_cache.compare_block
    verdict_if_comparable: NotRequired[str]  # a refused comparison: what it would have said
    reason_if_comparable: NotRequired[str]


class CompareSide(TypedDict):
    file: str
    tool: str
    ttft_definition: str
    time_axis: bool
    source: dict[str, Any] | None  # tui.core.importers.limits.source_of
    issues: int
    duplicates: int


class Unmatched(TypedDict):
    base: list[float | None]
    candidate: list[float | None]


class CompareDoc(TypedDict):
    """``servewatch compare --json`` (``compare``)."""

    records_integrity: NotRequired[dict[str, Any]]  # the command line: each side's digest-chain verification
    schema: str
    base: CompareSide
    candidate: CompareSide
    slo_ttft_ms: float
    margin: float
    alpha: float
    slos: str
    levels: list[CompareLevel]
    unmatched: Unmatched
    warnings: list[str]
    verdict: str
    workload: dict[str, Any]  # tui.core.workload.compare_block
    identity: dict[str, Any]  # tui.core.compare_guard.identity_block, less its reasons
    same_run: str | None
    refusals: list[str]
    allowed_different: list[str]
    allowed: list[str]
    verdict_note: str | None
    reason: str
    synthetic: bool
    exit_code: int
    # the command line (tui.cli.compare): what each run was judged at, and an exit the settings set
    verdict_settings: NotRequired[dict[str, Any]]
    settings_exit: NotRequired[str]
