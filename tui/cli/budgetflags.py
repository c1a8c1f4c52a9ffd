"""The budget flags (``--params``, ``--gpu-gib``, ``--config``, ``--budget`` ...) and the budget they describe:
`servewatch budget` prints it, and report, replay, run, live, sweep, accept, plan and the no-argument console show
it beside a run (``view_budget``). Standard library and ``tui.core`` only (``servewatch budget`` stays light).

Each flag is declared once, in :class:`BudgetFlags`: its ``kind`` says how its text is read into the
``tui.core.budget.inputs.BudgetInputs`` field of the same name (the flags keep their text until the budget reads
them, so a bad value is said as the budget says it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.cli.declare import Settings, declared_args, flag, path
from tui.cli.options import INPUT, UsageError
from tui.core.budget.arithmetic import compute_budget, teaching_case
from tui.core.budget.formats import KV_DTYPES, WEIGHT_FORMATS
from tui.core.budget.hf_config import inputs_from_hf_config
from tui.core.budget.inputs import MAX_GIB, BudgetInputs
from tui.core.budget.memory import MemoryMissing
from tui.core.budget.results import BudgetResult
from tui.core.budget.vocab import GIB, BudgetError
from tui.core.budgetview import ORIGIN_TEACHING
from tui.sources.budget_files import load_budget, load_hf_config


@dataclass(frozen=True, kw_only=True)
class BudgetFlags(Settings):
    """Budget flags.  All default to None: nothing given means the teaching case (`budget`) or unknown (beside a
    run)."""

    GROUP = ("memory budget (`servewatch budget` with nothing given: the teaching case, 7B bf16 on 24 GiB; beside a "
             "run, nothing given: unknown)")

    params: str | None = flag("--params", default=None, metavar="N", kind="count",
                              help="parameter count, e.g. 7e9, 8B, 270M (default: 7B, the teaching case)")
    weights: str | None = flag("--weights", default=None, metavar="FORMAT", kind="text",
                               help="weight format: " + ", ".join(WEIGHT_FORMATS) + " (default: bf16)")
    gpu_gib: str | None = flag("--gpu-gib", default=None, metavar="GIB", kind="float",
                               help="memory of one GPU in GiB (default: 24)")
    margin_gib: str | None = flag("--margin-gib", default=None, metavar="GIB", kind="float",
                                  help="runtime margin per GPU in GiB (default: 3)")
    layers: str | None = flag("--layers", default=None, metavar="N", kind="int",
                              help="layers holding a KV cache (default: 32, the teaching case's)")
    kv_heads: str | None = flag("--kv-heads", default=None, metavar="N", kind="int",
                                help="KV heads of the model (default: 8, the teaching case's)")
    head_dim: str | None = flag("--head-dim", default=None, metavar="N", kind="int",
                                help="elements per head (default: 128, the teaching case's)")
    max_seq: str | None = flag("--max-seq", default=None, metavar="TOKENS", kind="int",
                               help="tokens per sequence (default: 4096)")
    kv_dtype: str | None = flag("--kv-dtype", default=None, metavar="DTYPE", kind="text",
                                help="KV cache: " + ", ".join(KV_DTYPES) + " (default: bf16)")
    tp: str | None = flag("--tp", default=None, metavar="N", kind="int", help="tensor-parallel GPUs (default: 1)")
    block_size: str | None = flag("--block-size", default=None, metavar="TOKENS", kind="int",
                                  help="paged KV block (default: 16)")
    kv_cache_gib: str | None = flag(
        "--kv-cache-gib", default=None, metavar="GIB",
        help="the KV cache space per GPU in GiB, given directly (e.g. vLLM's VLLM_CPU_KVCACHE_SPACE): the cache "
             "budget IS this space, and `servewatch budget` predicts the engine's KV blocks, tokens and concurrency "
             "for it (default: none: GPU memory - weights - margin)")
    max_num_batched_tokens: str | None = flag(
        "--max-num-batched-tokens", default=None, metavar="TOKENS",
        help="the engine's scheduler chunk (vLLM --max-num-batched-tokens): the blocks a sliding-window layer group "
             "needs per request depend on it (default: unknown: the concurrency is a range)")
    config: str | None = path("--config", role=INPUT, default=None, metavar="FILE",
                              help="Hugging Face config.json; other flags override it (default: none)")
    budget: str | None = path("--budget", role=INPUT, default=None, metavar="FILE",
                              help="load, recompute and verify a saved budget JSON (default: none)")

    def tp_value(self) -> int | None:
        """``--tp`` as a whole number >= 1 (None when not given); bad: UsageError."""
        if self.tp is None:
            return None
        try:
            tp = int(self.tp)
        except (TypeError, ValueError):
            raise UsageError(f"--tp must be a whole number >= 1, got {self.tp!r}") from None
        if tp < 1:
            raise UsageError(f"--tp must be a whole number >= 1, got {self.tp!r}")
        return tp


#: what `servewatch budget`'s list flags add to their help (the screening table, ``tui.cli.budget_grid``)
_MANY = " (a comma list makes the screening table)"


@dataclass(frozen=True, kw_only=True)
class BudgetListFlags(BudgetFlags):
    """`servewatch budget`'s budget flags: ``--config`` repeatable and comma lists for ``--weights``,
    ``--kv-dtype``, ``--max-seq``, ``--tp`` and ``--gpu-gib`` (the screening table, ``tui.cli.budget_grid``);
    elsewhere each takes one value (:class:`BudgetFlags`)."""

    weights: str | None = flag("--weights", default=None, metavar="FORMAT", kind="text",
                               help="weight format: " + ", ".join(WEIGHT_FORMATS) + _MANY + " (default: bf16)")
    gpu_gib: str | None = flag("--gpu-gib", default=None, metavar="GIB", kind="float",
                               help="memory of one GPU in GiB" + _MANY + " (default: 24)")
    max_seq: str | None = flag("--max-seq", default=None, metavar="TOKENS", kind="int",
                               help="tokens per sequence" + _MANY + " (default: 4096)")
    kv_dtype: str | None = flag("--kv-dtype", default=None, metavar="DTYPE", kind="text",
                                help="KV cache: " + ", ".join(KV_DTYPES) + _MANY + " (default: bf16)")
    tp: str | None = flag("--tp", default=None, metavar="N", kind="int",
                          help="tensor-parallel GPUs" + _MANY + " (default: 1)")
    config: list[str] | None = path(  # type: ignore[assignment]
        "--config", role=INPUT, default=None, action="append", metavar="FILE",
        help="Hugging Face config.json; other flags override it; repeat it for several models (the screening table) "
             "(default: none)")


#: the flags `servewatch budget` takes as comma lists (the screening table); elsewhere they take one value
LIST_ATTRS = ("weights", "kv_dtype", "max_seq", "tp", "gpu_gib")


def _one_value(name: str, shown: str, raw: Any) -> None:
    if name in LIST_ATTRS and isinstance(raw, str) and "," in raw:
        raise ValueError(f"{shown} takes one value here, got {raw!r}: comma lists are `servewatch budget`'s (the "
                         "screening table)")


#: the budget flags kept as text and read into BudgetInputs fields of the same name: (field, flag, kind)
_READ = tuple((f.name, arg.flags[0], arg.kind) for f, arg in declared_args(BudgetFlags) if arg.kind is not None)

_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def _parse_value(name: str, raw: Any, kind: str) -> float | int:
    if isinstance(raw, bool):
        raise ValueError(f"{name} must be a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        value: float = raw
    else:
        text = str(raw).strip().replace(",", "").replace("_", "")
        scale = 1.0
        if kind == "count" and text and text[-1].lower() in _SUFFIXES:
            scale = _SUFFIXES[text[-1].lower()]
            text = text[:-1]
        try:
            value = float(text) * scale
        except ValueError:
            raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {raw!r}")
    if kind == "int":
        if not float(value).is_integer():
            raise ValueError(f"{name} must be a whole number, got {raw!r}")
        return int(value)
    if kind == "count" and float(value).is_integer():
        return int(value)
    return value


def given_fields(b: BudgetFlags) -> dict[str, Any]:
    """BudgetInputs fields the user gave on the command line."""
    out: dict[str, Any] = {}
    values = vars(b)
    for name, shown, kind in _READ:
        raw = values[name]
        if raw is not None:
            _one_value(name, shown, raw)
            out[name] = str(raw) if kind == "text" else _parse_value(shown, raw, kind)
    if b.kv_cache_gib is not None:  # --kv-cache-gib: the KV cache space itself (BudgetInputs.kv_space_bytes)
        gib = _parse_value("--kv-cache-gib", b.kv_cache_gib, "float")
        if not 0 < gib <= MAX_GIB:
            raise ValueError(f"--kv-cache-gib must be > 0 and <= {MAX_GIB:g}, got {b.kv_cache_gib!r}")
        out["kv_space_bytes"] = max(1, round(gib * GIB))
    return out


def memory_given(given: dict[str, Any]) -> bool:
    """True when the memory the budget divides was given (--gpu-gib or --kv-cache-gib)."""
    return "gpu_gib" in given or "kv_space_bytes" in given


#: the note a budget carries when --teaching filled in the memory nobody gave
TEACHING_MEMORY_NOTE = ("memory from the teaching case (--teaching): a 24 GiB GPU and a 3 GiB runtime margin, "
                        "an example, not your GPU")


def budget_given(b: BudgetFlags) -> bool:
    """True when any budget flag (or --config / --budget) was given."""
    return bool(given_fields(b)) or b.budget is not None or b.config is not None


def budget_title(result: BudgetResult) -> str:
    """What the budget is about, e.g. "teaching case (7B params, bf16, 24 GiB GPU)"."""
    return budget_heading(result).removeprefix("Memory budget: ")


def budget_from_args(b: BudgetFlags, teaching: bool = False) -> BudgetResult | MemoryMissing:
    """The budget the flags describe.  Raises ValueError with a readable message on bad input.

    No memory input (--gpu-gib, --kv-cache-gib) beside other budget flags or --config: a :class:`MemoryMissing`
    (the KV figures, no candidate; a view completes it from the run header), never the teaching case's 24 GiB
    GPU and 3 GiB margin, except with ``teaching`` (``--teaching``, labelled). Nothing given at all: the teaching
    case."""
    given = given_fields(b)
    if b.budget is not None:
        if given or b.config is not None:
            flags = sorted("--" + k.replace("_", "-") for k in given) + (["--config"] if b.config else [])
            raise ValueError(f"--budget loads a saved budget as it is; it cannot be combined with {', '.join(flags)}")
        return load_budget(b.budget)
    try:
        if b.config is not None:
            config = load_hf_config(b.config)
            inputs = inputs_from_hf_config(config, **given)
            if inputs.model == BudgetInputs().model or inputs.model != config.get("_name_or_path"):
                parent = Path(b.config).resolve().parent.name
                stem = Path(b.config).stem
                label = parent if stem == "config" and parent else stem
                inputs = inputs.replace(model=f"{label} ({inputs.model})" if inputs.model else label)
        else:
            geometry = {"layers", "kv_heads", "head_dim"}
            if given and not geometry & set(given):
                defaults = BudgetInputs()
                given["notes"] = (
                    f"{GEOMETRY_NOTE_PREFIX}: teaching-case defaults used ({defaults.layers} layers, "
                    f"{defaults.kv_heads} KV heads, head_dim {defaults.head_dim}); give --layers, --kv-heads, "
                    "--head-dim or --config for your model",
                )
            inputs = BudgetInputs(**given)
        if (given or b.config is not None) and not memory_given(given):
            if teaching:
                return compute_budget(inputs.replace(notes=(*inputs.notes, TEACHING_MEMORY_NOTE)))
            return MemoryMissing(inputs, budget_source(b) or "flags", margin_given="margin_gib" in given,
                                 max_seq_given="max_seq" in given, block_size_given="block_size" in given)
        return compute_budget(inputs)
    except BudgetError:
        raise
    except (TypeError, OverflowError) as exc:
        raise ValueError(f"bad budget input: {exc}") from None


def budget_heading(result: BudgetResult) -> str:
    """The budget's first line: "Memory budget: <what>[, per GPU with tp=N][geometry warning]"."""
    i = result.inputs
    if i == BudgetInputs():
        what = "teaching case (7B params, bf16, 24 GiB GPU)"
    elif i.model:
        what = i.model
    else:
        what = f"{i.params / 1e9:g}B params"
    if TEACHING_MEMORY_NOTE in i.notes:  # --teaching filled in the memory: said in the title, not only below
        what += f" [TEACHING CASE memory: {i.gpu_gib:g} GiB GPU, {i.margin_gib:g} GiB margin; an example, not your GPU]"
    per = f", per GPU with tp={i.tp}" if i.tp > 1 else ""
    return f"Memory budget: {what}{per}{geometry_warning(i)}"


#: the start of the note a budget carries when --params came without the KV geometry (budget_from_args)
GEOMETRY_NOTE_PREFIX = "KV geometry not given"


def geometry_warning(inputs: BudgetInputs) -> str:
    """" [KV GEOMETRY OF THE TEACHING CASE ...]" for the first line of a budget whose KV geometry nobody gave (the
    teaching case's 32 layers x 8 KV heads x head_dim 128 stood in: a 70B model has about 80 layers); "" otherwise."""
    notes = inputs.notes or ()
    if not any(str(n).startswith(GEOMETRY_NOTE_PREFIX) for n in notes) or inputs.params == BudgetInputs().params:
        return ""  # (the teaching case's own 7B with its own geometry is the teaching case, titled as such)
    return (f" [KV geometry: the TEACHING CASE's {inputs.layers} layers x {inputs.kv_heads} KV heads x head_dim "
            f"{inputs.head_dim}, not your model's]")


def budget_source(b: BudgetFlags) -> str | None:
    """Where the flags' budget comes from, in words (None when no budget flag was given)."""
    if b.budget:
        return f"file: {b.budget}"
    if b.config:
        return f"model config: {b.config} (+ flags)"
    values = vars(b)
    named = [(name, shown) for name, shown, _kind in _READ] + [("kv_cache_gib", "--kv-cache-gib")]
    given = [shown for name, shown in _source_order(named) if values[name] is not None]
    if given:
        return "flags: " + ", ".join(given)
    return None


def _source_order(named: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The flags in declaration order, the two memory inputs named together (--gpu-gib, then --kv-cache-gib)."""
    rest = [n for n in named if n[0] != "kv_cache_gib"]
    memory = [n for n in named if n[0] == "kv_cache_gib"]
    at = next((i + 1 for i, n in enumerate(rest) if n[0] == "gpu_gib"), len(rest))
    return rest[:at] + memory + rest[at:]


def is_teaching_log(p: Any) -> bool:
    """True when ``p`` holds the bundled teaching log (sample_logs/seed.jsonl, byte for byte)."""
    try:
        from tui.samples import sample_path

        seed = Path(sample_path("seed.jsonl"))
        f = Path(p)
        return f.is_file() and f.stat().st_size == seed.stat().st_size and f.read_bytes() == seed.read_bytes()
    except (ImportError, OSError, ValueError, TypeError):
        return False


def view_budget(b: BudgetFlags, teaching: bool = False,
                paths: Sequence[Any] = ()) -> tuple[BudgetResult | MemoryMissing | None, str | None]:
    """The budget a view shows beside a run, and where it came from.

    Budget flags / --config / --budget FILE: that budget; without a memory input (--gpu-gib, --kv-cache-gib) a
    :class:`MemoryMissing` the Monitor completes from the run header (NVML's GPU, else the engine's own KV space)
    or leaves unknown with the missing input named. ``teaching`` (``--teaching``), or every file is the bundled
    teaching log: the teaching case, labelled. Otherwise (None, None): unknown, unless the record file carries a
    budget record (the Monitor reads it). Raises ValueError / OSError on bad budget input."""
    if budget_given(b):
        if teaching:
            raise ValueError("--teaching shows the teaching case; it cannot be combined with budget flags")
        return budget_from_args(b, teaching), budget_source(b)
    if teaching:
        return teaching_case(), f"{ORIGIN_TEACHING}, asked for with --teaching"
    if paths and all(is_teaching_log(p) for p in paths):
        return teaching_case(), f"{ORIGIN_TEACHING}, shown for the bundled teaching log"
    return None, None


# ------------------------------------------------------------------ the KV-allocation flags (bad values: UsageError)


def _flag_number(name: str, raw: Any) -> float:
    text = str(raw).strip().replace(",", "").replace("_", "")
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{name} must be a finite number, got {raw!r}")
    return value


def kv_space_from_args(b: BudgetFlags) -> int | None:
    """``--kv-cache-gib G`` in bytes (G x 2**30 rounded, at least 1), or None when not given. Raises UsageError."""
    raw = b.kv_cache_gib
    if raw is None:
        return None
    gib = _flag_number("--kv-cache-gib", raw)
    if not 0 < gib <= MAX_GIB:
        raise UsageError(f"--kv-cache-gib must be > 0 and <= {MAX_GIB:g} GiB, got {raw!r}")
    return max(1, round(gib * GIB))  # as the budget beside a run counts it (_given)


def max_num_batched_tokens_from_args(b: BudgetFlags) -> int | None:
    """``--max-num-batched-tokens N`` (a whole number >= 1), or None. Raises UsageError."""
    raw = b.max_num_batched_tokens
    if raw is None:
        return None
    value = _flag_number("--max-num-batched-tokens", raw)
    if not value.is_integer() or value < 1:
        raise UsageError(f"--max-num-batched-tokens must be a whole number >= 1, got {raw!r}")
    return int(value)


def server_log_from_args(log_path: str | None, b: BudgetFlags) -> dict | None:
    """``--server-log FILE`` parsed (``tui.sources.server_log``), with ``--max-num-batched-tokens`` winning over
    the log's; None when neither is given. An unreadable file: UsageError."""
    mnbt = max_num_batched_tokens_from_args(b)
    if log_path is None:
        if mnbt is None:
            return None
        return {"max_concurrency": None, "concurrency_tokens": None, "kv_cache_size_tokens": None,
                "max_num_batched_tokens": mnbt, "lines": 0, "source": "--max-num-batched-tokens"}
    from tui.sources.server_log import read_server_log

    try:
        log = read_server_log(log_path)
    except OSError as exc:
        raise UsageError(f"--server-log: cannot read {log_path}: {exc.strerror or exc}") from None
    if mnbt is not None:
        log["max_num_batched_tokens"] = mnbt
    return log
