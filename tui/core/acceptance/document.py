"""The acceptance document: every section assembled, the three-part conclusion (section 8), the provenance banner
and the exit code; secrets scrubbed and non-finite floats made JSON-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NotRequired, TypedDict, cast

import tui.core.provenance as _prov
import tui.core.quality.vocab as Q
from tui.core.acceptance.cost import cost_section
from tui.core.acceptance.inputs import (
    NOT_READY,
    READY,
    SCHEMA,
    CostInputs,
    RunInput,
    _fmt_level,
    _jsonable,
    _str,
    provenance,
)
from tui.core.acceptance.measured_extra import memory_queue_section
from tui.core.acceptance.quality_section import QUALITY_PHRASES, quality_section, tied_text
from tui.core.acceptance.recovery import recovery_section
from tui.core.acceptance.rollback import default_rollback_rules
from tui.core.acceptance.sections import (
    BudgetSection,
    MeasuredSection,
    budget_section,
    environment_section,
    judged_missing,
    judged_problems,
    load_section,
    measured_section,
)
from tui.core.budgetview import server_capacity
from tui.core.defaults import ALPHA, MIN_WINDOW_S, SLO_TTFT_MS, TARGET
from tui.core.identity import evidence_identity, identity_of
from tui.core.quality.policy import QualityPolicy
from tui.core.redact import run_secrets, scrub
from tui.core.report import conclusion as three_part_conclusion
from tui.core.runs import target_of
from tui.core.slos import Slos
from tui.core.snapshot import FAIL, INSUFFICIENT_WINDOW, UNDECIDED, json_get

# ------------------------------------------------------------------ the document's type
# ``servewatch accept``'s acceptance.json, as ``TypedDict``s (the markdown, ``render.render_markdown``, reads it by
# these types): a misspelled key is a mypy error; tests/unit/core/acceptance/test_typed_documents.py checks these
# keys against what ``build_acceptance`` produces. Sections 1 and 4 are typed beside their builders
# (``sections.BudgetSection``, ``sections.MeasuredSection``); a section another module builds and owns (the
# environment, the identity, the quality, the cost) is ``dict[str, Any]``: its shape is its builder's.


class ProvenanceEntry(TypedDict):
    source: str
    provenance: str  # "measured", "synthetic", "imported", "unknown"
    data_from: str
    source_block: dict[str, Any] | None  # tui.core.provenance.source_block


class InputsDoc(TypedDict):
    records: list[str]
    quality: str | None
    budget: str | None
    rollback: str | None
    notes: list[str]


class SloBlock(TypedDict):
    """Every SLO in force (None: off), which TTFT is judged, the target, and the sentence (``slo_block``)."""

    ttft_ms: float | None
    tpot_ms: float | None
    itl_ms: float | None
    e2e_ms: float | None
    ttft_of: str
    in_force: list[str]
    text: str
    target: float
    alpha: float
    min_window_minutes: float
    good: str


class RollbackDoc(TypedDict):
    defaults: list[dict[str, Any]]  # tui.core.acceptance.rollback.default_rollback_rules
    user: list[str]
    user_source: str | None
    notes: list[str]


class AcceptConclusion(TypedDict):
    """Section 8: the three-part conclusion and the verdict."""

    budget: str
    budget_feasible: bool | None
    memory_only_candidate: int | None
    measured: str
    measured_capacity: float | None
    quality: str
    ready_for_traffic: bool
    verdict: str
    at_load: str | None
    missing_or_failed: list[str]
    settings_changed: list[str]
    not_acceptance_grade: list[str]
    rejudged_weaker: list[str]
    recovery: str  # issue 39: the drills given, or "no recovery evidence"


class AcceptanceDoc(TypedDict):
    """``acceptance.json`` (``build_acceptance``)."""

    schema: str
    generated_at: str | None
    generator: dict[str, Any]
    synthetic: bool
    provenance: list[ProvenanceEntry]
    banner: str | None
    inputs: InputsDoc
    slo: SloBlock
    verdict_settings: list[dict[str, Any]]  # per file: tui.core.verdict_settings.Resolution.to_dict
    budget: BudgetSection
    environment: dict[str, Any]  # sections.environment_section
    identity: dict[str, Any]  # tui.core.identity.evidence_identity
    load_configuration: list[dict[str, Any]]  # sections.load_section
    measured: MeasuredSection
    quality: dict[str, Any]  # quality_section.quality_section
    cost: dict[str, Any]  # cost.cost_section
    rollback: RollbackDoc
    recovery: dict[str, Any]  # issue 39: the drills given (tui.core.acceptance.recovery.recovery_section)
    conclusion: AcceptConclusion
    exit_code: int
    #: the command line (tui.cli.accept): each record file's digest-chain verification
    records_integrity: NotRequired[list[dict[str, Any]]]


def build_acceptance(
    *,
    runs: Sequence[RunInput],
    budget: Any = None,
    budget_source: str | None = None,
    quality: Mapping | None = None,
    quality_source: str | None = None,
    cost: CostInputs | None = None,
    rollback_rules: Sequence[str] = (),
    rollback_source: str | None = None,
    slo_ttft_ms: float = SLO_TTFT_MS,
    target: float = TARGET,
    alpha: float = ALPHA,
    min_window_s: float = MIN_WINDOW_S,
    required_level: float | None = None,
    generator: Mapping | None = None,
    generated_at: str | None = None,
    quality_policy: QualityPolicy | None = None,
    settings_changed: Sequence[str] = (),
    not_acceptance_grade: Sequence[str] = (),
    input_notes: Sequence[str] = (),
    slos: Slos | None = None,
    server_log: Mapping | None = None,
    quality_integrity: Any = None,
    verdict_settings: Sequence[Mapping] = (),
    rejudged_weaker: Sequence[str] = (),
    drills: Sequence[Mapping] = (),
) -> AcceptanceDoc:
    """The acceptance document (JSON-ready dict). ``quality`` must pass ``quality.recheck`` (SetError otherwise).

    ``settings_changed``: the acceptance settings that differ from their defaults (named in the verdict);
    ``not_acceptance_grade``: those weaker than a floor (``tui.core.grade``): never "ready"; ``input_notes``:
    what was done with the inputs (a file given twice, files of other models left out); ``slos``: every SLO in
    force (``MonitorConfig.slos``; not given: the TTFT SLO ``slo_ttft_ms`` alone), named in full in ``slo``;
    ``server_log``: the engine's startup-log figures (``tui.sources.server_log``), beside the budget;
    ``quality_integrity``: the quality file's verification (``tui.core.quality.digest.verify``, with the key given;
    None: verified here without a key). The identity (``tui.core.identity.evidence_identity``): a model claimed but
    not served, a budget of another model, a GPU budget for a run without a GPU: never "ready".
    ``verdict_settings``: per record file, what it was judged at (issue 35: ``Resolution.to_dict`` with its
    ``source``); ``rejudged_weaker``: the files re-judged at weaker settings than their runs' (never "ready",
    exit 3: ``tui.core.verdict_settings.settings_exit``)."""
    cost = cost or CostInputs()
    prov: list[ProvenanceEntry] = [{"source": r.source, "provenance": provenance(r.snapshot), "data_from": _prov.describe(r.snapshot.header),
             "source_block": _prov.source_block(r.snapshot.header)} for r in runs]
    synthetic = any(p["provenance"] == "synthetic" for p in prov) or bool(quality and quality.get("synthetic"))
    unknown: list[str] = [p["source"] for p in prov if p["provenance"] == "unknown"]
    banner_parts = []
    if synthetic:
        syn = [p["source"] for p in prov if p["provenance"] == "synthetic"]
        if quality and quality.get("synthetic"):
            syn.append(str(quality_source or "quality result"))
        banner_parts.append(f"SYNTHETIC: input labelled synthetic ({', '.join(syn)}); nothing in this report is a "
                            "measurement of a real deployment.")
    if unknown:
        banner_parts.append(f"PROVENANCE UNKNOWN: {', '.join(unknown)} has no run header; it may not be a real "
                            "measurement.")
    cap_header = next((r.snapshot.header for r in runs if server_capacity(r.snapshot.header)), None)
    views = [r.snapshot.budget_view for r in runs if r.snapshot.budget_view is not None]
    memory_hint = next((v.hint for v in views if v.hint and v.hint.startswith("budget unknown: the memory")), None)
    memory = next((v.memory for v in views if v.memory and v.origin == budget_source), None)
    bsec = budget_section(budget, budget_source, cap_header, hint=memory_hint if budget is None else None,
                          memory=memory, server_log=server_log)
    cand = bsec.get("memory_only_candidate")
    measured = measured_section(runs, cand, required_level)
    models = sorted({m for r in runs for m in [
        _str(json_get(r.snapshot.header, "target", "model"))
    ] if m})
    ident = evidence_identity([(r.source, r.snapshot.header) for r in runs],
                              None if bsec.get("teaching") else budget)  # the teaching case is an example
    qsec = quality_section(quality, quality_source, models, quality_policy,
                           load=[identity_of(r.snapshot.header) for r in runs], integrity=quality_integrity)
    if qsec["run"]:
        qsec["tied"] = tied_text(runs, qsec)
    measured["memory_queue"] = memory_queue_section(runs)
    tp = getattr(getattr(budget, "inputs", None), "tp", None)
    csec = cost_section(cost, measured, tp=tp if isinstance(tp, int) else None)
    drules, rnotes = default_rollback_rules(target, slo_ttft_ms)

    # 8. conclusion
    qstate = qsec["state"]
    q_arg = None if not qsec["run"] else ("PASS" if qstate == Q.PASS else QUALITY_PHRASES.get(qstate, qstate))
    if q_arg == "PASS" and qsec.get("not_acceptance_grade"):
        q_arg = f"not acceptance-grade ({'; '.join(qsec['not_acceptance_grade'])})"
    ready, lines = three_part_conclusion(bsec.get("fits"), measured["state"], q_arg, teaching=bool(bsec.get("teaching")))
    if measured["state"] in (INSUFFICIENT_WINDOW, UNDECIDED):
        miss = judged_missing(measured)  # the judged level's own gap, the same rule as `report`
        if miss:
            lines = [ln if not ln.startswith("Measured:") else f"{ln[:-1]} ({miss})." for ln in lines]
    problems = judged_problems(measured) if measured["state"] != FAIL else []
    if problems:
        lines.append(f"Measured: the record files do not support a PASS at the judged level: {problems[0]}"
                     + (f" (and {len(problems) - 1} more evidence problems)" if len(problems) > 1 else "") + ".")
    if ident["problems"]:
        lines.append("Identity: not acceptance-grade (" + "; ".join(ident["problems"]) + ").")
    if not_acceptance_grade:
        lines.append(f"Settings: not acceptance-grade ({', '.join(not_acceptance_grade)}): fine for a quick check, "
                     "never 'ready'; use the defaults or stricter.")
    for why in rejudged_weaker:
        lines.append(f"Settings: {why}: never 'ready' (exit 3).")
    if synthetic:
        lines.append("Provenance: synthetic inputs can check the arithmetic but can never show readiness; "
                     "measure the real deployment.")
    if unknown:
        lines.append("Provenance: record files without a run header cannot show readiness; record with "
                     "`servewatch run`.")
    if not runs:
        lines.append("Measured: no record files.")
    # issue 39: the drills given (optional: none is said, and does not block "ready")
    rsec = recovery_section(drills, {target_of(r.snapshot.header) for r in runs})
    lines += rsec["lines"]
    ready = ready and not synthetic and not unknown and bool(runs) and not not_acceptance_grade and not ident["problems"]
    ready = ready and not rsec["blocks_ready"] and not rsec["failed"]
    failed = (bsec.get("fits") is False) or measured["state"] == FAIL or qstate == Q.FAIL or rsec["failed"]
    exit_code = 0 if ready else (1 if failed else 3)
    if rejudged_weaker:  # the re-judged verdict is not the run's: its code only when at least as strict
        ready, exit_code = False, 3
    cap = measured["measured_capacity"]
    conclusion: AcceptConclusion = {
        "budget": "unknown" if not bsec.get("given") else ("feasible" if bsec["fits"] else "does not fit"),
        "budget_feasible": bsec.get("fits"),
        "memory_only_candidate": cand,
        "measured": measured["state"],
        "measured_capacity": cap,
        "quality": "not run" if not qsec["run"] else qstate,
        "ready_for_traffic": ready,
        "verdict": READY if ready else NOT_READY,
        "at_load": (None if not (ready and measured["has_measured_capacity"]) else
                    ("at the recorded load" if cap is None else f"up to {measured['unit']} {_fmt_level(cap)}")),
        "missing_or_failed": lines,
        "settings_changed": list(settings_changed),
        "not_acceptance_grade": list(not_acceptance_grade),
        "rejudged_weaker": list(rejudged_weaker),
        "recovery": rsec["text"],  # issue 39: the drills given, or "no recovery evidence"
    }
    doc: AcceptanceDoc = {
        "schema": SCHEMA,
        "generated_at": generated_at,
        "generator": dict(generator or {}),
        "synthetic": synthetic,
        "provenance": prov,
        "banner": " ".join(banner_parts) or None,
        "inputs": {"records": [r.source for r in runs], "quality": quality_source, "budget": budget_source,
                   "rollback": rollback_source, "notes": list(input_notes)},
        "slo": slo_block(_with_files_ttft(slos if slos is not None else Slos(ttft_ms=slo_ttft_ms), runs), target,
                         alpha, min_window_s),
        "verdict_settings": [dict(v) for v in verdict_settings],
        "budget": bsec,
        "environment": environment_section(runs, generator or {}),
        "identity": ident,
        "load_configuration": load_section(runs),
        "measured": measured,
        "quality": qsec,
        "cost": csec,
        "rollback": {"defaults": drules, "user": list(rollback_rules), "user_source": rollback_source, "notes": rnotes},
        "recovery": {k: v for k, v in rsec.items() if k not in ("lines", "blocks_ready", "failed", "text")},
        "conclusion": conclusion,
        "exit_code": exit_code,
    }
    secrets: list[str] = []
    for r in runs:
        secrets += run_secrets(r.snapshot.header)  # tui.core.redact: as report, export and the catalogue
    return cast(AcceptanceDoc, _jsonable(scrub(doc, secrets)))  # the same keys: secrets scrubbed, inf made JSON


def _with_files_ttft(slos: Slos, runs: Sequence) -> Slos:
    """``slos`` naming the TTFT the files hold when they are other tools' ("first chunk, as vllm bench measures"):
    one label when every imported run shares it, else a sentence saying each file's tool defines it."""
    labels = {r.snapshot.slos.ttft_label for r in runs if getattr(r.snapshot.slos, "ttft_label", None)}
    if not labels:
        return slos
    label = labels.pop() if len(labels) == 1 else "as each file's tool measures it"
    return replace(slos, ttft_label=label)


def good_text(slos: Slos) -> str:
    """What a good request met, naming every SLO in force: "client TTFT <= 1000 ms" for the answer TTFT alone
    (as ``report`` and ``compare`` say it), else ``Slos.describe()`` ("TTFT <= 1000 ms (answer), TPOT <= 50 ms")."""
    if slos.in_force() == ("TTFT",) and slos.ttft_of == "answer" and not slos.ttft_label:
        assert slos.ttft_ms is not None
        return f"client TTFT <= {slos.ttft_ms:g} ms"
    return slos.describe()


def slo_block(slos: Slos, target: float, alpha: float, min_window_s: float) -> SloBlock:
    """The document's ``slo`` block: every SLO in force (None: off), which TTFT is judged, and the sentence."""
    return cast(SloBlock, {**cast(Any, {k.json_key: v for k, v in zip(slos.table, slos.limits())}),  # the SLO table's keys
            "ttft_of": slos.ttft_shown(), "in_force": list(slos.in_force()), "text": slos.describe(),
            "target": target, "alpha": alpha, "min_window_minutes": min_window_s / 60.0,
            "good": f"completed AND {good_text(slos)}, over all measured requests"})
