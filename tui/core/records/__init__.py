"""Record format v1: JSON Lines, one object per line, each with a ``"type"``.

Pure parsing and validation; no I/O beyond what the caller hands in. See ``docs/record-format.md`` for the
field-by-field description. The format's single definition, in modules along its seams:

- ``schema``: the schema name and version, record types, error classes, time range, ``RecordError``, ``LineIssue``;
- ``request``: the request record and the one outcome rule (good / slow / failed / excluded, the TTFT derivation);
- ``model``: the other record types and ``Record``, the union a reader yields;
- ``watch``: the watch record (``Window``, ``window_from_record``, ``window_to_record``);
- ``parse``: validation of one object, and the line and block parsers;
- ``reader``: streams and files -> records and issues;
- ``write``: request dicts, JSONL lines, the run header.

This ``__init__`` re-exports their public names for callers outside the package; the modules inside import each
other by module path, never through it.
"""

from __future__ import annotations

from tui.core.outcomes import CANCELLED, EXCLUDED, FAILED, GOOD, OUTCOMES, SLOW, Outcome
from tui.core.records.model import (
    BudgetRecord,
    GpuSample,
    HostSample,
    PhaseRecord,
    QueueSample,
    Record,
    RunHeader,
    SealRecord,
    StepRecord,
    UnknownRecord,
    WatchRecord,
)
from tui.core.records.parse import (
    BLOCK_BYTES,
    parse_block,
    parse_line,
    parse_lines,
    parse_object,
    parse_request,
)
from tui.core.records.reader import (
    iter_blocks,
    iter_file,
    iter_lines,
    not_a_record_file,
    read_file,
    scan_usable,
)
from tui.core.records.request import (
    BAD_FINISH_REASONS,
    RequestRecord,
    contradiction,
    outcome_rule,
    slo_microseconds,
)
from tui.core.records.schema import (
    ERROR_CLASSES,
    KNOWN_TYPES,
    PHASES,
    SCHEMA,
    SCHEMA_VERSION,
    T_MAX_EPOCH,
    T_MIN_EPOCH,
    LineIssue,
    RecordError,
)
from tui.core.records.watch import (
    Buckets,
    Window,
    window_from_record,
    window_to_record,
)
from tui.core.records.write import (
    dumps,
    request_to_dict,
    run_header,
    source_block,
)

__all__ = [
    "BAD_FINISH_REASONS",
    "BLOCK_BYTES",
    "Buckets",
    "BudgetRecord",
    "CANCELLED",
    "ERROR_CLASSES",
    "EXCLUDED",
    "FAILED",
    "GOOD",
    "GpuSample",
    "HostSample",
    "KNOWN_TYPES",
    "LineIssue",
    "OUTCOMES",
    "Outcome",
    "PhaseRecord",
    "PHASES",
    "QueueSample",
    "Record",
    "RecordError",
    "RequestRecord",
    "RunHeader",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SLOW",
    "SealRecord",
    "StepRecord",
    "T_MAX_EPOCH",
    "T_MIN_EPOCH",
    "UnknownRecord",
    "WatchRecord",
    "Window",
    "contradiction",
    "dumps",
    "iter_blocks",
    "iter_file",
    "iter_lines",
    "not_a_record_file",
    "outcome_rule",
    "parse_block",
    "parse_line",
    "parse_lines",
    "parse_object",
    "parse_request",
    "read_file",
    "request_to_dict",
    "run_header",
    "scan_usable",
    "slo_microseconds",
    "source_block",
    "window_from_record",
    "window_to_record",
]
