"""The flat table of a run (`servewatch export`): one row per request record, one column per field (standard
library only; the file writers are ``tui.sources.export_files``).

Every request record of the run exported becomes a row, in file order: the record's own fields as recorded
(``tui.core.records.request.RequestRecord``), then what servewatch derives from it, by the same definitions the
report uses:

- the metrics (``tui.core.slos``: one derivation each): ``ttft_ms`` (the TTFT the TTFT SLO judges: the first
  answer token's, or any token's with ``ttft_of any``), ``ttft_any_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``;
- the outcome by the ONE outcome rule (``tui.core.slos.slo_rule``) at the settings the file is judged at (its run
  header's ``verdict_settings``, re-judged where a flag given differs: ``tui.core.verdict_settings.resolve``, as
  every reader judges it): ``outcome`` (good / slow / failed / excluded), ``good``, one ``miss_*`` column per SLO
  missed and one ``nojudge_*`` column per SLO the record lacks a field for, ``misses`` ("TTFT+E2E");
- ``duplicate``: a copy of an earlier record (the one duplicate rule, ``tui.core.evidence.Duplicates``: the same
  id, or the same three times under another id), never counted;
- ``counted``: the row is one of the report's measured requests at its level: a measured (not warmup) record,
  not a copy, of one of the first ``MAX_LEVELS`` levels, and not a cancellation or a client-side failure whose
  outcome was still open (those are shown, never judged). Per (level, round), the rows with ``counted`` true are
  the report's ``n``; of them, ``outcome`` good / slow / failed are its ``good`` / ``slow`` / ``failed`` (the
  round-trip tests hold the two equal);
- ``synthetic``: the run is labelled SYNTHETIC (every row says so, not only the metadata).

``COLUMNS`` is the one list (name, type, meaning): the CSV header, the Parquet schema and docs/record-format.md
("The export's columns", a test holds them equal) come from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import tui.core.provenance as provenance
from tui.core.evidence import FIRST, Duplicates
from tui.core.outcomes import CANCELLED, CLIENT, EXCLUDED, GOOD
from tui.core.records import RequestRecord, RunHeader
from tui.core.redact import run_secrets, scrub
from tui.core.slos import (
    MISS_BITS,
    NOJUDGE_SHIFT,
    SLO_NAMES,
    Slos,
    any_ttft_ms,
    combo_name,
    e2e_ms,
    itl_ms,
    slo_rule,
    tpot_ms,
)

SCHEMA: Final = "servewatch.export/1"

#: the column types (the Parquet schema's: ``tui.sources.export_files``)
STR, FLOAT, INT, BOOL, FLOATS = "string", "float", "int", "bool", "floats"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    meaning: str


#: the record's own fields, as recorded (docs/record-format.md, "Request records")
RECORD_COLUMNS: Final = (
    Column("id", STR, "the request's id (unique within the run)"),
    Column("phase", STR, "measure or warmup (warmup requests are never judged)"),
    Column("level", FLOAT, "the load level: concurrency (closed loop) or requests per second (open loop)"),
    Column("round", INT, "the round of the level (1-based; `--rounds` repeats each level)"),
    Column("t_intended", FLOAT, "when the schedule meant to send it (epoch seconds)"),
    Column("t_sent", FLOAT, "when it was sent (epoch seconds)"),
    Column("t_first_token", FLOAT, "first token of any kind (epoch seconds; empty: none arrived)"),
    Column("t_first_answer", FLOAT, "first answer token, when the stream carried reasoning (epoch seconds)"),
    Column("t_first_reasoning", FLOAT, "first reasoning token (epoch seconds; empty: none)"),
    Column("t_last_token", FLOAT, "last token of any kind (epoch seconds)"),
    Column("t_end", FLOAT, "when the request ended: its last byte, its error or its cancellation (epoch seconds)"),
    Column("complete", BOOL, "the response completed"),
    Column("http_status", INT, "the HTTP status (empty: none received)"),
    Column("error", STR, "the error class (empty: none): cancelled, client, timeout, http, ..."),
    Column("error_detail", STR, "the error in words (scrubbed of secrets when recorded)"),
    Column("finish_reason", STR, "the server's finish reason"),
    Column("retried", INT, "times the request was re-sent before any byte left (connection setup failures)"),
    Column("input_tokens", INT, "prompt tokens (the server's count when it gave one)"),
    Column("output_tokens", INT, "output tokens (the server's count when it gave one, else the client's)"),
    Column("input_tokens_asked", INT, "the prompt length the load generator asked for"),
    Column("output_tokens_asked", INT, "the output length it asked for (max_tokens)"),
    Column("usage_input_tokens", INT, "usage.prompt_tokens as the server reported it"),
    Column("usage_output_tokens", INT, "usage.completion_tokens as the server reported it"),
    Column("usage_reasoning_tokens", INT, "usage.completion_tokens_details.reasoning_tokens"),
    Column("output_chunks", INT, "token-carrying chunks seen (reasoning + answer)"),
    Column("reasoning_chunks", INT, "of which reasoning"),
    Column("itl_max_ms", FLOAT, "the largest gap between two consecutive tokens, as recorded (ms)"),
    Column("itl_p50_ms", FLOAT, "the request's median gap between tokens (ms)"),
    Column("itl_p95_ms", FLOAT, "the request's P95 gap between tokens (ms)"),
    Column("token_offsets", FLOATS, "each token's arrival after t_sent (seconds; CSV: a JSON list)"),
    Column("session", STR, "the conversation this request is a turn of (session workloads)"),
    Column("turn", INT, "its turn (1-based)"),
    Column("context_tokens", INT, "tokens of the whole prompt as sent (prefix + history + this message)"),
    Column("cached_tokens", INT, "prompt tokens the server says it served from its prefix cache"),
    Column("cached_tokens_source", STR, "where that figure came from"),
)

#: what servewatch derives from each record (the report's definitions)
DERIVED_COLUMNS: Final = (
    Column("seq", INT, "the row's place among the run's request records (1-based, file order)"),
    Column("ttft_ms", FLOAT, "the TTFT the TTFT SLO judges (ttft_of: the first answer token's, or any token's) (ms)"),
    Column("ttft_any_ms", FLOAT, "time to the first token of any kind, reasoning or answer (ms)"),
    Column("tpot_ms", FLOAT, "time per output token: (last token - first token) / (tokens - 1) (ms)"),
    Column("itl_ms", FLOAT, "the largest inter-token gap: itl_max_ms, else from token_offsets (ms)"),
    Column("e2e_ms", FLOAT, "request sent to last token (t_end without a last-token time) (ms)"),
    Column("outcome", STR, "good, slow, failed or excluded: the one outcome rule at the settings judged at"),
    Column("good", BOOL, "completed and every SLO in force met (outcome good)"),
    *(Column(f"miss_{n.lower()}", BOOL, f"the {n} SLO was in force and missed") for n in SLO_NAMES),
    *(Column(f"nojudge_{n.lower()}", BOOL, f"the {n} SLO was in force and the record lacks what it needs")
      for n in SLO_NAMES),
    Column("misses", STR, "the SLOs missed, joined with + (TTFT+E2E); empty: none"),
    Column("duplicate", BOOL, "a copy of an earlier record (same id, or same times under another id): never counted"),
    Column("counted", BOOL, "one of the report's measured requests at its level (its n)"),
    Column("synthetic", BOOL, "the run is labelled SYNTHETIC (made up, not measured)"),
)

COLUMNS: Final = RECORD_COLUMNS + DERIVED_COLUMNS
COLUMN_NAMES: Final = tuple(c.name for c in COLUMNS)
_RECORD_FIELDS: Final = tuple(c.name for c in RECORD_COLUMNS)


def _miss_flags(misses: int) -> tuple[bool, ...]:
    return (tuple(bool(misses & b) for b in MISS_BITS)
            + tuple(bool((misses >> NOJUDGE_SHIFT) & b) for b in MISS_BITS))


class FlatRows:
    """Turns the run's items (records and line problems, block by block, as a Monitor reads them) into rows.

    ``add(items, slos, levels)``: ``slos`` the SLOs judged at (the Monitor's, once it has settled its settings at
    the run header), ``levels`` the (level, round) keys the Monitor judges (a measured record of a level beyond its
    ``MAX_LEVELS`` is not counted); call it after the Monitor has taken the same block. Counts what it saw."""

    def __init__(self, synthetic: bool = False) -> None:
        self.synthetic = synthetic
        self._dups = Duplicates()
        self._header_seen = False
        self.rows = 0
        self.measured = 0
        self.warmup = 0
        self.duplicates = 0
        self.counted = 0

    def add(self, items: Iterable[Any], slos: Slos, levels: Any) -> list[tuple[Any, ...]]:
        rule = slo_rule(slos)
        answer = slos.ttft_of == "answer"
        out: list[tuple[Any, ...]] = []
        for it in items:
            if type(it) is not RequestRecord:
                if isinstance(it, RunHeader) and not self._header_seen:
                    self._header_seen = True
                    self.synthetic = self.synthetic or it.data.get("synthetic") is True
                    # a file without a time axis: equal durations by rounding are not copies (the Monitor's rule)
                    self._dups.times = (provenance.source_block(it.data) or {}).get("time_axis") != "none"
                continue
            out.append(self._row(it, rule, answer, levels))
        return out

    def _row(self, r: RequestRecord, rule: Any, answer: bool, levels: Any) -> tuple[Any, ...]:
        self.rows += 1
        dup = self._dups.check(r.id, r.t_sent, r.t_first_token, r.t_end) != FIRST
        outcome, ttft, misses = rule(r)
        measured = r.phase == "measure"
        if dup:
            self.duplicates += 1
        elif measured:
            self.measured += 1
        else:
            self.warmup += 1
        counted = (measured and not dup and (r.level, r.round) in levels
                   and not (outcome == EXCLUDED and r.error in (CANCELLED, CLIENT)))
        if counted:
            self.counted += 1
        values = [getattr(r, name) for name in _RECORD_FIELDS]
        return (*values, self.rows, ttft, any_ttft_ms(r), tpot_ms(r), itl_ms(r), e2e_ms(r), outcome,
                outcome == GOOD, *_miss_flags(misses), combo_name(misses & 15), dup, counted, self.synthetic)

    def counts(self) -> dict[str, int]:
        return {"rows": self.rows, "measured": self.measured, "warmup": self.warmup, "duplicates": self.duplicates,
                "counted": self.counted}


def csv_cell(v: Any) -> Any:
    """A value as a CSV cell: empty for None, ``true``/``false`` for booleans, a JSON list for a list, else
    the value (numbers as Python writes them: ``repr``-exact floats)."""
    if v is None:
        return ""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, list):
        return json.dumps(v)
    return v


def level_summary(levels: Sequence[dict]) -> list[dict[str, Any]]:
    """The report's level rows, in short (the export's metadata: what the rows add up to)."""
    keep = ("level", "round", "mode", "verdict", "n", "good", "slow", "failed", "completed", "good_fraction",
            "goodput_rps", "throughput_rps", "seconds")
    return [{k: row.get(k) for k in keep} for row in levels]


def export_meta(*, fmt: str, source: str, header: dict, report: Mapping[str, Any], counts: dict[str, int],
                synthetic: bool, integrity: dict | None, judged_at: str, run: int | None) -> dict[str, Any]:
    """The export's metadata: the run header, what it was judged at, the report's level rows, the counts, the
    column list and the SYNTHETIC label (the sidecar ``PATH.meta.json`` of a CSV; the file metadata of a Parquet
    file). Scrubbed of what the header may carry unredacted (``tui.core.redact.run_secrets``), as the report is."""
    return scrub({
        "schema": SCHEMA,
        "format": fmt,
        "synthetic": synthetic,
        "label": "SYNTHETIC: made-up data, not a measurement" if synthetic else None,
        "source": {"file": source, "run": run, "provenance": provenance.describe(header)},
        "records_integrity": integrity,
        "judged_at": judged_at,
        "verdict_settings": report.get("verdict_settings"),
        "judged": report.get("judged"),
        "levels": level_summary(report.get("levels") or []),
        "counts": counts,
        "columns": [{"name": c.name, "type": c.type, "meaning": c.meaning} for c in COLUMNS],
        "run_header": header,
    }, run_secrets(header))
