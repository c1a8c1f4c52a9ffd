"""The report document's shape: what ``servewatch report --json`` prints, as ``TypedDict``s.

``tui.core.report.build_report`` builds a :class:`ReportDoc` (re-exported there); the command line adds the keys
marked "the command line" (``tui.cli.report``). A reader typed with these (``format_report``,
``report_short.format_short``) has a misspelled key caught by mypy; ``tests/unit/core/test_typed_documents.py``
checks that the keys declared are the keys the builders produce for the committed samples. The module is the
report's types only (no code), split from ``report.py`` to keep that under the 700-line rule.

A block another module builds and owns (the provenance, the budget view, the token tally, the server's timing, the
prefix cache, the capacity bracket) is ``dict[str, Any]`` here: its shape is its builder's.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from tui.core.stats import LatencyDoc


class PercentileDoc(TypedDict):
    """One TTFT percentile, the detailed reading (``"P95": {...}``)."""

    value: float | str | None  # ms; "inf" in the failures-as-inf reading
    n: int
    supported: bool
    n_needed: int
    approximate: bool


class PercentileInfDoc(TypedDict):
    """One percentile of the failures-as-+inf reading."""

    value: float | str | None
    n: int
    supported: bool


class TtftDoc(LatencyDoc, total=False):
    """TTFT: the detailed reading by label and the flat one (``p50``, ``p95``, ``p99``, ``n``) side by side."""

    P50: PercentileDoc
    P95: PercentileDoc
    P99: PercentileDoc


class TtftInfDoc(TypedDict, total=False):
    P50: PercentileInfDoc
    P95: PercentileInfDoc
    P99: PercentileInfDoc


class BothTtftsDoc(TypedDict, total=False):
    """With reasoning in the records: the answer TTFT and the any-token TTFT, and which one ``ttft_ms`` is."""

    ttft_answer_ms: LatencyDoc
    ttft_any_ms: LatencyDoc
    ttft_judged: str


class WindowDoc(TypedDict):
    """One window's numbers (the judged level's ``measured.window``; every row of ``levels`` carries them too)."""

    n: int
    good: int
    good_fraction: float | None
    wilson_95_descriptive: list[float | None]
    completed: int
    failed: int
    slow: int
    ttft_ms: TtftDoc
    #: with reasoning in the records: both TTFTs and which one ``ttft_ms`` is (``both_ttfts_dict``)
    ttft_answer_ms: NotRequired[LatencyDoc]
    ttft_any_ms: NotRequired[LatencyDoc]
    ttft_judged: NotRequired[str]
    tpot_ms: LatencyDoc
    itl_ms: LatencyDoc
    e2e_ms: LatencyDoc
    misses: dict[str, int]
    miss_combos: dict[str, int]
    unjudgeable: dict[str, int]
    goodput_rps: float | None
    goodput_tok_s: float | None
    throughput_rps: float | None
    ttft_ms_failures_as_inf: TtftInfDoc
    req_per_s: float | None
    output_tok_per_s: float | None
    goodput_per_s: float | None
    tpot_ms_p50: float | None
    seconds: float


class SlosDoc(TypedDict):
    ttft_ms: float | None
    tpot_ms: float | None
    itl_ms: float | None
    e2e_ms: float | None
    ttft_of: str


class SloDoc(TypedDict):
    ttft_ms: float
    target: float
    alpha: float
    slos: SlosDoc
    in_force: list[str]
    text: str


class IdentityDoc(TypedDict):
    line: str
    claimed_model: str | None
    served_model: str | None
    engine: str | None
    build: str | None
    gpu: str | None
    host: str | None
    not_acceptance_grade: list[str]


class JudgedDoc(TypedDict):
    """The judged level (``tui.core.levels.judge_level``): the level, its state and why it is the one judged."""

    level: float | None
    mode: str | None
    unit: str
    state: str
    why: str
    rounds: int
    measured_capacity: float | None
    has_measured_capacity: bool
    levels_present: list[float | None]
    text: str


class VerdictDoc(TypedDict):
    state: str
    reason: str
    missing: str | None
    n: int
    minutes: float
    need_requests: int
    need_seconds: float
    e_pass: float | str | None
    e_fail: float | str | None
    threshold: float
    vif: float
    n_eff: float
    bursty: bool
    decided_at_n: int | None
    episodes: int
    longest_episode_s: float
    unseen_episode_period_s: float | None
    minutes_more: float | None


class MeasuredDoc(TypedDict):
    """The judged level's row (its last round) and its verdict."""

    level: float | None
    round: int | None
    cancelled_open: int
    client_limited: int
    good_fraction: float | None
    latency_success_gate: bool | None
    window: WindowDoc
    verdict: VerdictDoc
    # added after the row is built (``report.attach_level_blocks``): the judged row's blocks
    server_timing: NotRequired[dict[str, Any]]  # tui.core.server_timing.server_json
    tokens: NotRequired[dict[str, Any] | None]  # tui.core.token_counts.TokenTally.summary
    turns: NotRequired[list[dict[str, Any]] | None]  # tui.core.turns.TurnTable.rows
    prefix_cache: NotRequired[dict[str, Any] | None]  # tui.core.prefix_cache.level_summary


class LevelDoc(WindowDoc):
    """One row of ``levels``: a level and round, its verdict, and its window's numbers."""

    level: float | None
    round: int
    mode: str | None
    verdict: str
    saturated: bool
    lateness_p99_ms: float | None
    max_waiting: float | None
    peak_gpu_gib: float | None
    cancelled_open: int
    client_limited: int
    client_limited_kinds: dict[str, int] | None
    delivered: str | None
    not_reached: str | None
    evidence_problems: list[str]
    search_probe: NotRequired[bool]
    server_timing: NotRequired[dict[str, Any]]
    tokens: NotRequired[dict[str, Any] | None]
    turns: NotRequired[list[dict[str, Any]] | None]
    prefix_cache: NotRequired[dict[str, Any] | None]


class EvidenceDoc(TypedDict):
    problems: list[str]
    judged_level_problems: list[str]
    judged_level_delivered: str | None
    judged_level_not_reached: str | None


class CancelledDoc(TypedDict):
    open_not_judged: int
    past_slo_counted_failed: int
    note: str | None


class InputProblemsDoc(TypedDict):
    malformed: int
    truncated: int
    unknown_types: int
    duplicate_request_ids: int
    records_of_levels_over_cap: int
    examples: list[str]


class ConclusionDoc(TypedDict):
    ready_for_traffic: bool
    missing_or_failed: list[str]
    budget: str | None
    measured: str
    quality: str


class TimelineDoc(TypedDict):
    """One verdict state change a watcher re-checking after each measured request would have seen."""

    level: float | None
    round: int
    state: str
    n: int
    t: float


class WorkloadDoc(TypedDict):
    text: str
    dataset: NotRequired[str]
    dataset_note: NotRequired[str]


class EngineKvDoc(TypedDict):
    label: str | None
    samples: int
    allocated_gib: float | None
    peak_used_gib: float | None
    last_used_gib: float | None
    peak_usage: float | None
    last_usage: float | None
    series_gib: list[float]


class NvmlDeviceDoc(TypedDict):
    device: int
    name: str | None
    peak_used_gib: float | None
    total_gib: float | None


class MemoryDoc(TypedDict):
    nvml: list[NvmlDeviceDoc]
    nvml_note: str | None
    engine_kv: EngineKvDoc | None
    predicted_kv_ceiling_gib: float | None
    budget_memory: str | None
    peak_vs_ceiling: str | None


class BudgetDoc(TypedDict):
    origin: str | None
    teaching: bool
    weights_gib: float
    margin_gib: float
    kv_per_seq_gib: float
    cache_budget_gib: float
    memory_only_candidate: int
    fits: bool
    assumptions_not_measured: list[str]
    memory: str | None
    kv_space_gib: float | None
    title: NotRequired[str]  # the command line: the budget's one-line title


class ExitDoc(TypedDict):
    code: int
    synthetic: str | None
    settings: str | None


class ReportDoc(TypedDict):
    """``servewatch report --json``."""

    records_integrity: NotRequired[dict[str, Any]]  # the command line: tui.core.chain.RecordsIntegrity.to_dict
    schema: str
    source: str
    provenance: dict[str, Any]  # tui.core.provenance.as_dict
    synthetic: bool
    header: dict[str, Any]  # the run header as the file holds it
    slo: SloDoc
    identity: IdentityDoc
    budget: BudgetDoc | None
    budget_view: dict[str, Any]  # tui.core.budgetview.BudgetView.as_dict
    judged: JudgedDoc | None
    measured: MeasuredDoc
    levels: list[LevelDoc]
    evidence: EvidenceDoc
    requests_total: int
    warmup_total: int
    errors_by_class: dict[str, int]
    cancelled: CancelledDoc
    input_problems: InputProblemsDoc
    quality: str
    conclusion: ConclusionDoc
    notes: list[str]
    timeline: list[TimelineDoc]
    timeline_omitted: int
    exit_code: int
    capacity_bracket: NotRequired[dict[str, Any]]  # a `sweep --search` file: tui.core.search.capacity_bracket
    tokens: NotRequired[dict[str, Any] | None]  # run-wide counted tokens: TokenTally.summary
    workload: NotRequired[WorkloadDoc]
    memory: NotRequired[MemoryDoc]
    # the command line (tui.cli.report): the settings judged at, the run's own, the exit code and why
    settings: NotRequired[dict[str, Any]]
    verdict_settings: NotRequired[dict[str, Any]]
    exit: NotRequired[ExitDoc]
