"""`servewatch export`'s files: one run of a file of evidence as a CSV file with its metadata beside it
(``PATH.meta.json``), a Parquet file carrying its metadata inside, or one step as an llm-d benchmark report
(JSON, schema v0.2).

The file is read once (``tui.sources.run_document.judge_run``: the report's own reading and judgement); each
block's request records become rows (``tui.core.export_rows.FlatRows``) as the Monitor takes them, streamed to
temporary files beside the outputs, which are renamed into place together at the end
(``tui.sources.outfiles.staged_set``: never half a file, never through a link). Memory stays bounded for CSV and
Parquet (rows are written in batches); the llm-d report keeps the value lists of the measured steps
(``array``, 8 bytes a value).

Parquet needs ``pyarrow`` (the optional ``parquet`` extra): without it :class:`NeedsPyarrow` is raised before
anything is read.
"""

from __future__ import annotations

import csv
import io
import json
import os
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import tui.core.export_rows as X
import tui.core.llmd as llmd
from tui.core.chain import RecordsIntegrity
from tui.core.monitor import Monitor
from tui.core.outcomes import FAILED
from tui.core.verdict_settings import JudgeAt
from tui.sources.outfiles import staged_set, write_text_atomic
from tui.sources.run_document import JudgedRun, judge_run

__all__ = ["FORMATS", "ExportRequest", "ExportResult", "NeedsPyarrow", "StepNotInRun", "export_run",
           "pyarrow_problem", "sidecar_of"]

CSV, PARQUET, LLMD = "csv", "parquet", "llmd"
FORMATS = (CSV, PARQUET, LLMD)
SUFFIX = {CSV: ".csv", PARQUET: ".parquet", LLMD: ".llmd.json"}
BATCH = 8192  # rows handed to the writer at a time
#: characters that make a spreadsheet read a CSV cell as a formula: such a text cell is written with a leading '
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

_I = {name: i for i, name in enumerate(X.COLUMN_NAMES)}


class NeedsPyarrow(RuntimeError):
    """--format parquet without pyarrow installed (bad usage: the one line says how to install it)."""


class StepNotInRun(ValueError):
    """--format llmd: the step asked (or judged) has no measured request in the run (bad input)."""


def pyarrow_problem() -> str | None:
    """Why Parquet cannot be written here (pyarrow missing), else None."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return ("--format parquet needs pyarrow, an optional extra: pip install 'servewatch[parquet]' (or pip "
                "install pyarrow); CSV needs nothing")
    return None


def sidecar_of(out: str) -> str:
    """The CSV's metadata file: ``PATH.meta.json``."""
    return out + ".meta.json"


@dataclass(frozen=True)
class ExportRequest:
    """What to export: ``path`` (a record file or another tool's export), ``fmt`` (``FORMATS``), ``out``; which
    run of a file of several (``pick_run``), what the reader's flags ask (``judge_at``; None: the file's own
    settings), the level the llm-d report is of (``required_level``; None: the level the report judges) and the
    key that checks a signed digest chain."""

    path: str
    fmt: str
    out: str
    pick_run: int | None = None
    judge_at: JudgeAt | None = None
    required_level: float | None = None
    verify_key: bytes | None = None
    key_name: str = "the key given"


@dataclass
class ExportResult:
    out: str
    files: list[str]
    counts: dict[str, int]
    synthetic: bool
    judged: JudgedRun
    step: dict | None = None
    notes: list[str] = field(default_factory=list)


def _text_cell(v: Any) -> Any:
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return X.csv_cell(v)


class _Sink:
    """Rows to their file: CSV (text) or Parquet (pyarrow, in row groups of ``BATCH``)."""

    def __init__(self, fmt: str, fh: IO[bytes] | None) -> None:
        self.fmt = fmt
        self.pending: list[tuple[Any, ...]] = []
        self._csv: Any = None
        self._text: io.TextIOWrapper | None = None
        self._pq: Any = None
        self._schema: Any = None
        if fmt == CSV and fh is not None:
            self._text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=False)
            self._csv = csv.writer(self._text, lineterminator="\n")
            self._csv.writerow(X.COLUMN_NAMES)
        elif fmt == PARQUET and fh is not None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            kinds = {X.STR: pa.string(), X.FLOAT: pa.float64(), X.INT: pa.int64(), X.BOOL: pa.bool_(),
                     X.FLOATS: pa.list_(pa.float64())}
            self._schema = pa.schema([pa.field(c.name, kinds[c.type]) for c in X.COLUMNS])
            self._pq = pq.ParquetWriter(fh, self._schema, compression="zstd")

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        if self._csv is not None:
            cell = _text_cell
            self._csv.writerows([cell(v) for v in row] for row in rows)
        elif self._pq is not None:
            self.pending.extend(rows)
            if len(self.pending) >= BATCH:
                self._flush_parquet()

    def _flush_parquet(self) -> None:
        import pyarrow as pa

        if not self.pending:
            return
        cols = list(zip(*self.pending))
        arrays = [pa.array(list(col), type=f.type) for col, f in zip(cols, self._schema)]
        self._pq.write_table(pa.Table.from_arrays(arrays, schema=self._schema))
        self.pending = []

    def close(self, meta: dict) -> None:
        if self._text is not None:
            self._text.flush()
            self._text.detach()  # the handle stays open for the staged set to sync and rename
        if self._pq is not None:
            self._flush_parquet()
            self._pq.add_key_value_metadata({"servewatch": json.dumps(meta, default=str),
                                             "servewatch.synthetic": "true" if meta["synthetic"] else "false",
                                             "servewatch.label": meta["label"] or ""})
            self._pq.close()


class _Steps:
    """The value lists of each measured step (the llm-d report's statistics), and its first send / last end."""

    def __init__(self) -> None:
        self.series: dict[tuple, dict[str, array]] = {}
        self.span: dict[tuple, list[float]] = {}

    def add(self, rows: Sequence[tuple[Any, ...]]) -> None:
        i_counted, i_outcome, i_level, i_round = _I["counted"], _I["outcome"], _I["level"], _I["round"]
        i_in, i_out, i_ttft, i_tpot, i_e2e = (_I["input_tokens"], _I["output_tokens"], _I["ttft_ms"], _I["tpot_ms"],
                                              _I["e2e_ms"])
        i_sent, i_end = _I["t_sent"], _I["t_end"]
        for row in rows:
            if not row[i_counted]:
                continue
            key = (row[i_level], row[i_round])
            sp = self.span.get(key)
            if sp is None:
                self.span[key] = [row[i_sent], row[i_end]]
                self.series[key] = {k: array("d") for k in llmd.SERIES}
            else:
                sp[0] = min(sp[0], row[i_sent])
                sp[1] = max(sp[1], row[i_end])
            if row[i_outcome] == FAILED:
                continue
            s = self.series[key]
            for name, i, scale in (("input_length", i_in, 1.0), ("output_length", i_out, 1.0),
                                   ("ttft_s", i_ttft, 1e-3), ("tpot_s", i_tpot, 1e-3), ("e2e_s", i_e2e, 1e-3)):
                v = row[i]
                if v is not None:
                    s[name].append(v * scale)


def _pick_step(rep: Mapping[str, Any], level: float | None) -> tuple[dict, int]:
    """The level row the llm-d report is of (the judged level and round, or ``level``'s last round) and its
    place among the run's steps."""
    rows = list(rep.get("levels") or [])
    measured = rep.get("measured") or {}
    want = level if level is not None else measured.get("level")
    picked = [i for i, r in enumerate(rows) if r.get("level") == want]
    if not picked:
        tested = ", ".join(f"{r.get('level'):g}" for r in rows if isinstance(r.get("level"), (int, float)))
        raise StepNotInRun(f"no measured requests at level {want} in this run (levels: {tested or 'none'})")
    rnd = measured.get("round") if level is None else None
    at = next((i for i in picked if rows[i].get("round") == rnd), picked[-1])
    return rows[at], at


def export_run(req: ExportRequest) -> ExportResult:
    """Read, judge and write (see the module's docstring). Raises what ``judge_run`` raises, OSError /
    ``OutputRefused`` / ``SetIncomplete`` when writing fails (nothing is left half-written), ``NeedsPyarrow``,
    ``StepNotInRun``."""
    if req.fmt == PARQUET:
        problem = pyarrow_problem()
        if problem:
            raise NeedsPyarrow(problem)
    flat = X.FlatRows()
    steps = _Steps() if req.fmt == LLMD else None
    files = [req.out, sidecar_of(req.out)] if req.fmt == CSV else [req.out]
    if req.fmt == LLMD:
        judged = judge_run(req.path, pick_run=req.pick_run, judge_at=req.judge_at, verify_key=req.verify_key,
                           key_name=req.key_name, tap=lambda mon, items: steps.add(_rows(flat, mon, items)),  # type: ignore[union-attr]
                           required_level=req.required_level)
        return _write_llmd(req, judged, flat, steps)  # type: ignore[arg-type]
    with staged_set(files) as handles:
        sink = _Sink(req.fmt, handles[0])
        judged = judge_run(req.path, pick_run=req.pick_run, judge_at=req.judge_at, verify_key=req.verify_key,
                           key_name=req.key_name, tap=lambda mon, items: sink.add(_rows(flat, mon, items)),
                           required_level=req.required_level)
        synthetic = flat.synthetic or judged.synthetic
        meta = X.export_meta(fmt=req.fmt, source=req.path, header=judged.header, report=judged.report,
                             counts=flat.counts(), synthetic=synthetic, integrity=_integrity(judged.integrity),
                             judged_at=judged.monitor.cfg.slos.describe(), run=req.pick_run)
        sink.close(meta)
        if req.fmt == CSV:
            handles[1].write((json.dumps(meta, indent=2, default=str) + "\n").encode("utf-8"))
    return ExportResult(out=req.out, files=files, counts=flat.counts(), synthetic=synthetic, judged=judged)


def _rows(flat: X.FlatRows, mon: Monitor, items: Sequence[Any]) -> list[tuple[Any, ...]]:
    return flat.add(items, mon.cfg.slos, mon.levels)


def _integrity(ri: RecordsIntegrity | None) -> dict | None:
    return None if ri is None else ri.to_dict()


def _write_llmd(req: ExportRequest, judged: JudgedRun, flat: X.FlatRows, steps: _Steps) -> ExportResult:
    rep = judged.report
    step, stage = _pick_step(rep, req.required_level)
    key = (step.get("level"), step.get("round"))
    synthetic = flat.synthetic or judged.synthetic
    found = steps.span.get(key)
    span: tuple[float | None, float | None] = (found[0], found[1]) if found else (None, None)
    header = judged.header
    run_key = str(header.get("run_id") or os.path.abspath(req.path)) + f"#{req.pick_run or 1}"
    doc = llmd.llmd_report(header=header, step=step, stage=stage, series=steps.series.get(key) or {},
                           span=span, slos_text=judged.monitor.cfg.slos.describe(),
                           settings=rep.get("verdict_settings"), synthetic=synthetic, run_key=run_key,
                           source_file=req.path, steps_in_run=len(rep.get("levels") or []))
    write_text_atomic(req.out, json.dumps(doc, indent=2, default=str) + "\n")
    return ExportResult(out=req.out, files=[req.out], counts=flat.counts(), synthetic=synthetic, judged=judged,
                        step=step)
