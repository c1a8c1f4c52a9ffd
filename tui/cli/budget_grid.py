"""`servewatch budget` with lists: the screening table (issue 40). Declared flags (``Screening``) around ``tui.core.screen``; the functions take the ``budget`` command's
settings (``budget``: :class:`BudgetListFlags`, ``grid``: :class:`Screening`, ``teaching``, ``json``, ``out``).

    servewatch budget --config llama.json --config qwen.json --weights bf16,awq --max-seq 4096,8192 --gpu L4,H100-SXM
    servewatch budget --params 7B --tp 1,2,3 --gpu-gib 24,48,80 --csv
    servewatch budget --config model/config.json --gpu-gib 24 --max-seq 2048,4096 --out-dir budgets/

The lists: ``--config`` repeated (one model each), and comma lists for ``--weights``, ``--kv-dtype``, ``--max-seq``,
``--tp``, ``--gpu-gib`` and ``--gpu`` (names of the device table, ``tui/data/devices.toml``). The other budget flags
take one value and apply to every row. A grid needs its memory (``--gpu-gib`` or ``--gpu``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.cli.budgetflags import GEOMETRY_NOTE_PREFIX, BudgetFlags, BudgetListFlags, given_fields
from tui.cli.declare import Settings, flag, path, switch
from tui.cli.options import OUTPUT_DIR
from tui.core.budget.inputs import MAX_GIB, BudgetInputs
from tui.core.budget.vocab import BudgetError
from tui.core.devices import THIS_MACHINE, Device, DeviceError, DeviceTable, parse_devices, resolve, this_machine
from tui.core.exitcodes import UsageError
from tui.core.screen import DEFAULT_MAX_CANDIDATES, Axes, GridTooLarge, Memory, ModelSpec

#: the flags that take a comma list in `budget` (attribute, flag)
LIST_FLAGS = (("weights", "--weights"), ("kv_dtype", "--kv-dtype"), ("max_seq", "--max-seq"), ("tp", "--tp"),
              ("gpu_gib", "--gpu-gib"))
#: what a grid cannot be combined with (attribute, flag, why)
NOT_IN_GRID = (("budget", "--budget", "loads one saved budget"),
               ("kv_cache_gib", "--kv-cache-gib", "predicts one engine's allocation"),
               ("max_num_batched_tokens", "--max-num-batched-tokens", "belongs to --kv-cache-gib"),
               ("out", "--out", "saves one budget: give --out-dir DIR for one file per fitting row"))


@dataclass(frozen=True, kw_only=True)
class Screening(Settings):
    """The screening table's own flags (`budget` only)."""

    GROUP = ("screening table (lists: --config repeated; comma lists for --weights, --kv-dtype, --max-seq, --tp, "
             "--gpu-gib, --gpu; one row per combination)")

    gpu: list[str] | None = flag(
        "--gpu", action="append", default=None, metavar="LIST",
        help="devices of the device table (tui/data/devices.toml), a comma list such as L4,RTX4090,H100-SXM: a "
             "case-insensitive prefix of one name (or of several of equal memory) is enough; unified-memory devices "
             "divide the GPU's assumed share; this-machine: the memory of the machine it runs on, for CPU inference "
             "(default: none)")
    gpu_hour_usd: list[str] | None = flag(
        "--gpu-hour-usd", action="append", default=None, metavar="USD",
        help="price of one GPU-hour for the cost per hour: USD for every memory, or NAME=USD[,NAME=USD] per device "
             "(default: none, no cost; the device table ships no price)")
    csv: bool = switch("--csv", help="print the table as CSV (only the CSV on standard output)")
    out_dir: str | None = path("--out-dir", role=OUTPUT_DIR, default=None, metavar="DIR",
                               help="write one budget JSON per fitting row into DIR, named by its row id (default: "
                                    "none)")
    max_candidates: int = flag("--max-candidates", type=int, default=DEFAULT_MAX_CANDIDATES, metavar="N",
                               help=f"refuse a larger grid, with its count (default {DEFAULT_MAX_CANDIDATES})")


def _split(raw: Any) -> list[str]:
    if raw is None:
        return []
    values = raw if isinstance(raw, list) else [raw]
    return [p.strip() for v in values for p in str(v).split(",") if p.strip()]


def list_values(b: BudgetListFlags) -> dict[str, list[str]]:
    """The list flags given, split on commas (a flag not given: absent)."""
    out = {}
    values = vars(b)
    for attr, _flag in LIST_FLAGS:
        raw = values[attr]
        if raw is not None:
            out[attr] = _split(raw)
    return out


def grid_requested(settings: Any) -> bool:
    """True when `budget` is asked for the screening table: several models or list values, a device, --csv,
    --out-dir or a price."""
    configs = _split(settings.budget.config)
    if len(configs) > 1:
        return True
    if any(len(v) > 1 for v in list_values(settings.budget).values()):
        return True
    g: Screening = settings.grid
    return any((g.gpu, g.csv, g.out_dir, g.gpu_hour_usd))


def single_values(b: BudgetListFlags) -> BudgetFlags:
    """The one-budget path's flags, one value each (a list of one: its value; ``--config`` once)."""
    configs = _split(b.config)
    one: dict[str, Any] = {f.name: getattr(b, f.name) for f in dataclasses.fields(BudgetFlags)}
    one["config"] = configs[0] if configs else None
    for attr, values in list_values(b).items():
        if len(values) == 1:
            one[attr] = values[0]
        elif not values:
            raise UsageError(f"budget: --{attr.replace('_', '-')} needs a value")
    return BudgetFlags(**one)


def _whole(flag: str, text: str) -> int:
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        raise UsageError(f"budget: {flag} must be whole numbers, got {text!r}") from None
    if not math.isfinite(v) or not v.is_integer() or v < 1:
        raise UsageError(f"budget: {flag} must be whole numbers >= 1, got {text!r}")
    return int(v)


def _gib(flag: str, text: str) -> float:
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        raise UsageError(f"budget: {flag} must be numbers of GiB, got {text!r}") from None
    if not math.isfinite(v) or not 0 < v <= MAX_GIB:
        raise UsageError(f"budget: {flag} must be > 0 and <= {MAX_GIB:g} GiB, got {text!r}")
    return v


def _unique(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def device_table() -> DeviceTable:
    """The shipped device table (``tui/data/devices.toml``); a table that cannot be read is a bug of the install."""
    from tui.resources import device_table_path

    path = device_table_path()
    return parse_devices(path.read_text(encoding="utf-8"), source=str(path))


def _prices(grid: Screening, memories: list[Memory], table: DeviceTable | None) -> list[Memory]:
    """The memories with the price each gets from ``--gpu-hour-usd`` (a number for all, NAME=USD per device or per
    --gpu-gib value)."""
    from dataclasses import replace

    every: float | None = None
    named: dict[str, float] = {}
    for part in _split(grid.gpu_hour_usd):
        name, sep, value = part.partition("=")
        text = value if sep else name
        try:
            usd = float(text)
        except ValueError:
            raise UsageError(f"budget: --gpu-hour-usd must be USD or NAME=USD, got {part!r}") from None
        if not math.isfinite(usd) or not 0 <= usd < 1e9:
            raise UsageError(f"budget: --gpu-hour-usd must be a price >= 0, got {part!r}")
        if not sep:
            every = usd
            continue
        label = None
        try:
            label = f"{_gib('--gpu-hour-usd', name):g} GiB"
        except UsageError:
            if name.strip().lower() == THIS_MACHINE.lower():
                label = THIS_MACHINE
            elif table is None:
                raise UsageError(f"budget: --gpu-hour-usd {part}: no --gpu device named {name}") from None
            else:
                try:
                    label = resolve(table, [name])[0].device.name
                except DeviceError as exc:
                    raise UsageError(f"budget: --gpu-hour-usd {part}: {exc}") from None
        if label not in {m.label for m in memories}:
            raise UsageError(f"budget: --gpu-hour-usd {part}: {label} is not a memory of this grid")
        named[label] = usd
    return [replace(m, usd_per_gpu_hour=named.get(m.label, every)) for m in memories]


def _this_machine() -> Device:
    """``--gpu this-machine``: the memory of the machine this runs on (psutil's total, the figure a run header
    records as the host's ``memory_total``)."""
    try:
        import psutil

        total, how = int(psutil.virtual_memory().total), "psutil's virtual_memory().total"
    except Exception as exc:  # psutil absent or failing: said, never guessed
        total, how = 0, f"psutil: {type(exc).__name__}"
    try:
        return this_machine(total, how)
    except DeviceError as exc:
        raise UsageError(f"budget: {exc}") from None


def memories_from_args(settings: Any) -> tuple[list[Memory], list[str], DeviceTable | None]:
    """(the memories, the notes on how each --gpu name matched, the device table when --gpu was given)."""
    mems: list[Memory] = []
    notes: list[str] = []
    table = None
    for text in _unique(list_values(settings.budget).get("gpu_gib", [])):
        g = _gib("--gpu-gib", text)
        mems.append(Memory(f"{g:g} GiB", g))
    queries = _split(settings.grid.gpu)
    if any(q.lower() == THIS_MACHINE.lower() for q in queries):
        queries = [q for q in queries if q.lower() != THIS_MACHINE.lower()]
        here = _this_machine()
        mems.append(Memory(here.name, here.usable_gib, here))
    if queries:
        table = device_table()
        try:
            matches = resolve(table, queries)
        except DeviceError as exc:
            raise UsageError(f"budget: {exc}") from None
        for m in matches:
            if m.note:
                notes.append(m.note)
            mems.append(Memory(m.device.name, m.device.usable_gib, m.device))
    return _prices(settings.grid, mems, table), notes, table


def _model_specs(b: BudgetListFlags, fixed: dict[str, Any]) -> list[ModelSpec]:
    """One ModelSpec per --config (or one for the flags), each building its inputs with ``fixed`` (the one-value
    flags) and the row's list values."""
    from tui.core.budget.hf_config import inputs_from_hf_config
    from tui.sources.budget_files import load_hf_config

    def overrides(fields: dict[str, Any]) -> dict[str, Any]:
        return {**fixed, **{k: v for k, v in fields.items() if v is not None}}

    specs = []
    for config_path in _unique(_split(b.config)):
        try:
            cfg = load_hf_config(config_path)
        except (BudgetError, OSError) as exc:
            raise UsageError(f"budget: {exc}") from None
        parent, stem = Path(config_path).resolve().parent.name, Path(config_path).stem
        key = parent if stem == "config" and parent else stem
        name = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) else None
        label = f"{key} ({name})" if name and name != key else key

        def make(cfg: dict = cfg, label: str = label, **fields: Any) -> BudgetInputs:
            return inputs_from_hf_config(cfg, **overrides(fields)).replace(model=label)

        specs.append(ModelSpec(key, label, make))
    if not specs:
        notes: tuple[str, ...] = ()
        if fixed and not {"layers", "kv_heads", "head_dim"} & set(fixed):
            d = BudgetInputs()
            notes = (f"{GEOMETRY_NOTE_PREFIX}: teaching-case defaults used ({d.layers} layers, {d.kv_heads} KV heads, "
                     f"head_dim {d.head_dim}); give --layers, --kv-heads, --head-dim or --config for your model",)
        params = fixed.get("params", BudgetInputs().params)
        label = f"{params / 1e9:g}B params" if fixed else "teaching case (7B)"
        if notes and params != BudgetInputs().params:  # its KV per sequence is the teaching case's, said in each row
            label += " [TEACHING-CASE KV geometry]"

        def make_flags(**fields: Any) -> BudgetInputs:
            return BudgetInputs(**overrides(fields), model=label, notes=notes)

        specs.append(ModelSpec(f"{params / 1e9:g}B" if fixed else "teaching-7B", label, make_flags))
    return specs


def axes_from_args(settings: Any) -> tuple[Axes, list[Memory], list[str]]:
    """The grid the flags describe (raises UsageError)."""
    from tui.core.budget.formats import normalize_kv_dtype, normalize_weights

    b: BudgetListFlags = settings.budget
    given = {"budget": b.budget, "kv_cache_gib": b.kv_cache_gib, "max_num_batched_tokens": b.max_num_batched_tokens,
             "out": settings.out}
    for attr, shown, why in NOT_IN_GRID:
        if given[attr] is not None:
            raise UsageError(f"budget: {shown} {why}; it cannot be combined with the screening table's lists")
    if settings.teaching:
        raise UsageError("budget: --teaching shows the teaching case's one budget; the screening table needs "
                         "--gpu-gib or --gpu")
    lists = list_values(b)
    mems, notes, _table = memories_from_args(settings)
    if not mems:
        raise UsageError("budget: the screening table needs the memory: --gpu-gib G[,G...] or --gpu NAME[,NAME...]")
    rest = BudgetFlags(**{f.name: (None if f.name in dict(LIST_FLAGS) or f.name == "config" else getattr(b, f.name))
                          for f in dataclasses.fields(BudgetFlags)})
    try:
        fixed = given_fields(rest)
        weights = _unique([normalize_weights(w) for w in lists.get("weights", [])]) or (None,)
        kvs = _unique([normalize_kv_dtype(k) for k in lists.get("kv_dtype", [])]) or (None,)
    except (ValueError, BudgetError) as exc:
        raise UsageError(f"budget: {exc}") from None
    seqs = _unique([_whole("--max-seq", s) for s in lists.get("max_seq", [])]) or (None,)
    tps = _unique([_whole("--tp", t) for t in lists.get("tp", [])]) or (None,)
    max_c = settings.grid.max_candidates
    if not isinstance(max_c, int) or max_c < 1:
        raise UsageError(f"budget: --max-candidates must be a whole number >= 1, got {max_c!r}")
    axes = Axes(tuple(_model_specs(b, fixed)), weights, kvs, seqs, tps, tuple(mems))
    return axes, mems, notes


def run_grid(settings: Any) -> int:
    """Print the screening table (text, --json or --csv) and write --out-dir; 0 when a row fits, 1 when none does."""
    import json
    import sys

    from tui.core.screen import format_screen, screen, screen_csv, screen_doc

    axes, mems, notes = axes_from_args(settings)
    g: Screening = settings.grid
    try:
        s = screen(axes, g.max_candidates)
    except GridTooLarge as exc:
        raise UsageError(f"budget: {exc}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise UsageError(f"budget: bad budget input: {' '.join(str(exc).split())}") from None
    written = _write_out_dir(g.out_dir, s) if g.out_dir else []
    devices = [m.how for m in mems]
    if g.csv:
        sys.stdout.write(screen_csv(s))
    elif settings.json:
        doc = screen_doc(s, devices)
        doc["matched"] = notes
        if g.out_dir:
            doc["out_dir"] = {"dir": g.out_dir, "files": written}
        print(json.dumps(doc, indent=2))
    else:
        extra = {"matched": "; ".join(notes)} if notes else {}
        if g.out_dir:
            extra["wrote"] = f"{len(written)} budget files into {g.out_dir} (one per fitting row, named by its id)"
        sys.stdout.write(format_screen(s, mems, extra=extra))
    return s.exit_code


def _write_out_dir(folder: str, s: Any) -> list[str]:
    """One budget JSON per fitting row, ``DIR/<row id>.json`` (loadable with ``--budget FILE``)."""
    from tui.core.budget.serialize import budget_to_json
    from tui.sources.outfiles import write_text_atomic

    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"budget: cannot create {folder}: {exc.strerror or exc}") from None
    written = []
    for r in s.rows:
        if not r.fits:
            continue
        path = out / f"{r.id}.json"
        try:
            write_text_atomic(path, budget_to_json(r.budget) + "\n")
        except OSError as exc:
            raise UsageError(f"budget: cannot write {path}: {exc.strerror or exc}") from None
        written.append(str(path))
    return written
