"""`servewatch budget`: the memory budget on the command line (argparse glue, standard library only).

    servewatch budget                       # the teaching case
    servewatch budget --config config.json --max-seq 8192 --weights awq --gpu-gib 80
    servewatch budget --budget saved.json   # recompute and verify a saved budget

Also the budget shown beside a run (report, replay, live, accept, the no-argument console): ``view_budget``.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui.cli.options import OUTPUT, UsageError, add_budget_arguments, epilog, path_arg
from tui.core.budget.allocation import KvPrediction, predict_allocation
from tui.core.budget.arithmetic import compute_budget, kv_heads_per_gpu, teaching_case
from tui.core.budget.formats import KV_DTYPES, WEIGHT_FORMATS
from tui.core.budget.hf_config import inputs_from_hf_config
from tui.core.budget.inputs import MAX_GIB, BudgetInputs
from tui.core.budget.memory import MEMORY_FLAGS, MemoryMissing
from tui.core.budget.results import BudgetResult
from tui.core.budget.serialize import budget_to_dict, budget_to_json
from tui.core.budget.vocab import CANDIDATE_NOTE, GIB, BudgetError
from tui.core.budgetview import ORIGIN_TEACHING
from tui.core.exitcodes import ExitCode
from tui.core.textsafe import term
from tui.sources.budget_files import load_budget, load_hf_config

# flag attribute -> BudgetInputs field, and how to read it
_NUMERIC_FLAGS = {
    "params": ("params", "count"),
    "gpu_gib": ("gpu_gib", "float"),
    "margin_gib": ("margin_gib", "float"),
    "layers": ("layers", "int"),
    "kv_heads": ("kv_heads", "int"),
    "head_dim": ("head_dim", "int"),
    "max_seq": ("max_seq", "int"),
    "tp": ("tp", "int"),
    "block_size": ("block_size", "int"),
}
_TEXT_FLAGS = {"weights": "weights", "kv_dtype": "kv_dtype"}

_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def _parse_value(flag: str, raw: Any, kind: str) -> float | int:
    name = "--" + flag.replace("_", "-")
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


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """BudgetInputs fields the user gave on the command line."""
    out: dict[str, Any] = {}
    for flag, (field, kind) in _NUMERIC_FLAGS.items():
        raw = getattr(args, flag, None)
        if raw is not None:
            out[field] = _parse_value(flag, raw, kind)
    for flag, field in _TEXT_FLAGS.items():
        raw = getattr(args, flag, None)
        if raw is not None:
            out[field] = str(raw)
    raw = getattr(args, "kv_cache_gib", None)  # --kv-cache-gib: the KV cache space itself (BudgetInputs.kv_space_bytes)
    if raw is not None:
        gib = _parse_value("kv_cache_gib", raw, "float")
        if not 0 < gib <= MAX_GIB:
            raise ValueError(f"--kv-cache-gib must be > 0 and <= {MAX_GIB:g}, got {raw!r}")
        out["kv_space_bytes"] = max(1, round(gib * GIB))
    return out


def memory_given(given: dict[str, Any]) -> bool:
    """True when the memory the budget divides was given (--gpu-gib or --kv-cache-gib)."""
    return "gpu_gib" in given or "kv_space_bytes" in given


#: the note a budget carries when --teaching filled in the memory nobody gave
TEACHING_MEMORY_NOTE = ("memory from the teaching case (--teaching): a 24 GiB GPU and a 3 GiB runtime margin, "
                        "an example, not your GPU")


def budget_given(args: argparse.Namespace) -> bool:
    """True when any budget flag (or --config / --budget) was given."""
    return (bool(_given(args)) or getattr(args, "budget", None) is not None
            or getattr(args, "config", None) is not None)


def budget_title(result: BudgetResult) -> str:
    """What the budget is about, e.g. "teaching case (7B params, bf16, 24 GiB GPU)"."""
    return _title(result).removeprefix("Memory budget: ")


def budget_from_args(args: argparse.Namespace) -> BudgetResult | MemoryMissing:
    """The budget the flags describe.  Raises ValueError with a readable message on bad input.

    No memory input (--gpu-gib, --kv-cache-gib) beside other budget flags or --config: a :class:`MemoryMissing`
    (the KV figures, no candidate; a view completes it from the run header), never the teaching case's 24 GiB
    GPU and 3 GiB margin, except with ``--teaching`` (labelled). Nothing given at all: the teaching case."""
    given = _given(args)
    teaching = bool(getattr(args, "teaching", False))
    budget_file = getattr(args, "budget", None)
    config_path = getattr(args, "config", None)
    if budget_file is not None:
        if given or config_path is not None:
            flags = sorted("--" + k.replace("_", "-") for k in given) + (["--config"] if config_path else [])
            raise ValueError(f"--budget loads a saved budget as it is; it cannot be combined with {', '.join(flags)}")
        return load_budget(budget_file)
    try:
        if config_path is not None:
            config = load_hf_config(config_path)
            inputs = inputs_from_hf_config(config, **given)
            if inputs.model == BudgetInputs().model or inputs.model != config.get("_name_or_path"):
                parent = Path(config_path).resolve().parent.name
                stem = Path(config_path).stem
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
        if (given or config_path is not None) and not memory_given(given):
            if teaching:
                return compute_budget(inputs.replace(notes=(*inputs.notes, TEACHING_MEMORY_NOTE)))
            return MemoryMissing(inputs, budget_source(args) or "flags", margin_given="margin_gib" in given,
                                 max_seq_given="max_seq" in given, block_size_given="block_size" in given)
        return compute_budget(inputs)
    except BudgetError:
        raise
    except (TypeError, OverflowError) as exc:
        raise ValueError(f"bad budget input: {exc}") from None


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def _gib(x: float) -> str:
    return f"{x:.2f} GiB"


def _title(result: BudgetResult) -> str:
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


def geometry_warning(inputs: Any) -> str:
    """" [KV GEOMETRY OF THE TEACHING CASE ...]" for the first line of a budget whose KV geometry nobody gave (the
    teaching case's 32 layers x 8 KV heads x head_dim 128 stood in: a 70B model has about 80 layers); "" otherwise."""
    notes = getattr(inputs, "notes", ()) or ()
    if not any(str(n).startswith(GEOMETRY_NOTE_PREFIX) for n in notes) or inputs.params == BudgetInputs().params:
        return ""  # (the teaching case's own 7B with its own geometry is the teaching case, titled as such)
    return (f" [KV geometry: the TEACHING CASE's {inputs.layers} layers x {inputs.kv_heads} KV heads x head_dim "
            f"{inputs.head_dim}, not your model's]")


def _kv_formula(result: BudgetResult) -> str:
    i = result.inputs
    nbytes = KV_DTYPES[i.kv_dtype]
    if i.mla_latent_dim:
        per_layer = f"1 MLA latent x {i.mla_latent_dim} elements x {nbytes} B ({i.kv_dtype})"
    else:
        per_layer = (
            f"2 (K,V) x {kv_heads_per_gpu(i)} KV heads x {i.head_dim} head_dim x {nbytes} B ({i.kv_dtype})"
        )
    full_layers = i.layers - i.sliding_layers
    tokens = result.kv_tokens_per_seq
    if i.sliding_layers:
        window_tokens = -(-min(i.max_seq, i.sliding_window) // i.block_size) * i.block_size
        layer_part = f"({full_layers} layers x {tokens} tokens + {i.sliding_layers} window layers x {window_tokens} tokens)"
    else:
        layer_part = f"{i.layers} layers x {tokens} tokens"
    return f"{per_layer} x {layer_part}"


def format_budget_text(result: BudgetResult) -> str:
    """A plain-text budget: the figures (name=value), the variants table, the assumptions, the note."""
    i = result.inputs
    fmt = WEIGHT_FORMATS[i.weights]
    lines = [_title(result), ""]
    if fmt.quantized and i.unquantized_params:
        weights_how = (
            f"{i.params - i.unquantized_params:,.0f} params x {fmt.bits_per_weight:g} bits ({fmt.name}) "
            f"+ {i.unquantized_params:,.0f} params x 2 B (bf16)"
        )
    else:
        weights_how = f"{i.params:,.0f} params x {fmt.bits_per_weight / 8:g} B ({fmt.name})"
    if i.tp > 1:
        weights_how = f"({weights_how}) / tp {i.tp}"
    given_space = i.kv_space_bytes > 0
    rows = [
        ("gpu_memory=not used" if given_space else f"gpu_memory={_gib(i.gpu_gib)}",
         ("the KV space was given: no GPU size enters this budget" if given_space else
          "one GPU" if i.tp == 1 else f"each of the {i.tp} GPUs (tensor parallel)")),
        (f"weights={_gib(result.weights_gib)}", weights_how),
        ("runtime_margin=not used" if given_space else f"runtime_margin={_gib(result.margin_gib)}",
         "the KV space was given: no margin is subtracted from it" if given_space else "allowance, not measured"),
        (f"cache_budget={_gib(result.cache_budget_gib)}",
         f"the KV space given ({i.kv_space_bytes:,} B)" if given_space else "gpu_memory - weights - runtime_margin"),
        (f"kv_per_seq={_gib(result.kv_per_seq_gib)}", _kv_formula(result)),
        (
            f"memory_only_candidate={result.candidate} sequences",
            "floor(cache_budget / kv_per_seq): a number to load-test, not a limit",
        ),
    ]
    width = max(len(a) for a, _ in rows) + 3
    lines += [f"  {a:<{width}}{b}" for a, b in rows]
    lines += ["", "verdict: " + result.verdict, ""]

    header = ("variant", "weights GiB", "KV/seq GiB", "cache budget GiB", "candidate")
    table = [("base", result.weights_gib, result.kv_per_seq_gib, result.cache_budget_gib, result.candidate)]
    table += [(v.name, v.weights_gib, v.kv_per_seq_gib, v.cache_budget_gib, v.candidate) for v in result.variants]
    name_w = max(len(header[0]), *(len(r[0]) for r in table))
    lines.append(
        f"  {header[0]:<{name_w}}  {header[1]:>11}  {header[2]:>10}  {header[3]:>16}  {header[4]:>9}"
    )
    for name, w, kv, cache, cand in table:
        lines.append(f"  {name:<{name_w}}  {w:>11.2f}  {kv:>10.2f}  {cache:>16.2f}  {cand:>9d}")
    lines += ["", "Assumptions (not measured):"]
    lines += [f"  - {a}" for a in result.assumptions]
    lines += ["", CANDIDATE_NOTE]
    return "\n".join(term(line) for line in lines) + "\n"  # a config's strings stay on their line


# --------------------------------------------------------------------------------------------
# Command
# --------------------------------------------------------------------------------------------


DESCRIPTION = ("Memory budget: weights + runtime margin + KV cache per sequence -> a memory-only concurrency "
               "candidate. " + CANDIDATE_NOTE)
EPILOG = epilog("servewatch budget --params 8B --weights awq --gpu-gib 80 --max-seq 8192",
                "servewatch budget --config config.json --tp 2 --json --out budget.json",
                "servewatch budget --config model/config.json --kv-cache-gib 1 --block-size 128 --max-seq 2048",
                codes="exit codes: 0 fits, 1 does not fit, 3 unknown (no memory given), 2 bad usage or unreadable input")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servewatch budget` (light: imports nothing beyond the standard library and tui.core)."""
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    add_budget_arguments(parser)
    parser.add_argument("--teaching", action="store_true",
                        help="fill the memory inputs not given (--gpu-gib, --margin-gib) from the teaching case "
                             "(24 GiB GPU, 3 GiB margin), labelled; without it and without --gpu-gib/--kv-cache-gib "
                             "a model's budget shows its KV figures and no candidate")
    parser.add_argument("--json", action="store_true", help="print the budget as JSON (loadable with --budget FILE)")
    path_arg(parser, "--out", role=OUTPUT, default=None, metavar="FILE",
             help="also save the budget JSON to FILE (default: none)")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def format_allocation_text(pred: KvPrediction) -> str:
    """The engine's KV allocation predicted for the KV space given (`servewatch budget --kv-cache-gib`)."""
    lo, hi = pred.max_concurrency
    groups = ", ".join(f"{g.count} {g.kind}" + (f" (window {g.window})" if g.window else "") for g in pred.groups)
    rows = [
        (f"kv_bytes_per_token={pred.bytes_per_token:,} B",
         f"{pred.page_bytes // pred.block_size:,} B per layer x {pred.layers_per_group * pred.n_groups - pred.padding_layers} layers"
         f" ({pred.kv_dtype}, {pred.element_bytes} B per element)"),
        (f"kv_space={pred.kv_space_bytes:,} B", f"{pred.kv_space_bytes / 2**30:.3f} GiB (--kv-cache-gib)"),
        (f"page={pred.page_bytes:,} B", f"one block of {pred.block_size} tokens of one layer"),
        (f"groups={pred.n_groups}", f"{pred.layout} layout: {groups}; {pred.layers_per_group} layers per group"),
        (f"blocks={pred.num_blocks:,}", f"floor(kv_space / (page x {pred.layers_per_group} layers per group))"),
        (f"kv_cache_tokens={pred.tokens:,}" + ("" if pred.concurrency_exact else f"-{pred.tokens_range[1]:,}"),
         "int(max_concurrency x max_model_len), as vLLM 0.32 reports it"
         + (f" (older vLLM: blocks // {pred.n_groups} groups x {pred.block_size} = {pred.group_tokens:,})"
            if pred.n_groups > 1 else "")),
        (f"memory_only_tokens={pred.raw_tokens:,}", "kv_space / kv_bytes_per_token, before whole blocks"),
        (f"blocks_per_request={pred.blocks_per_request[0]}" + (
            "" if pred.concurrency_exact else f"-{pred.blocks_per_request[1]}"),
         f"one request of max_model_len={pred.max_model_len:,} tokens"),
        (f"max_concurrency={lo:.2f}x" + ("" if pred.concurrency_exact else f"-{hi:.2f}x"),
         "blocks / blocks_per_request (vLLM's \"Maximum concurrency for N tokens per request\")"),
    ]
    width = max(len(a) for a, _ in rows) + 3
    lines = ["", "KV allocation predicted for this KV space (vLLM's paged layout; a prediction, not a measurement)"]
    lines += [f"  {a:<{width}}{b}" for a, b in rows]
    lines += [f"  - {n}" for n in pred.notes]
    if not pred.concurrency_exact:
        lines.append("  - sliding-window groups need cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), "
                     "block) + 1 blocks per request: give --max-num-batched-tokens for one figure")
    return "\n".join(term(line) for line in lines) + "\n"  # a config's strings stay on their line


def run(args: argparse.Namespace) -> int:
    """Print the budget (text, or JSON with --json); save JSON with --out.  0 on success; bad input: UsageError.

    ``--kv-cache-gib G``: the cache budget is that space, and the engine's KV allocation for it is predicted
    (``tui.core.budget.allocation``: bytes per token, blocks, tokens, concurrency)."""
    from tui.cli.options import kv_space_from_args, max_num_batched_tokens_from_args

    space = kv_space_from_args(args)
    mnbt = max_num_batched_tokens_from_args(args)
    if space is not None and getattr(args, "budget", None) is not None:
        raise UsageError("budget: --budget loads a saved budget as it is; it cannot be combined with --kv-cache-gib")
    try:
        result = budget_from_args(args)
        if space is not None and not result.inputs.kv_space_bytes:  # budget_from_args may already have it
            result = compute_budget(result.inputs.replace(kv_space_bytes=space))
        space = space or result.inputs.kv_space_bytes or None
        pred = predict_allocation(result.inputs, space, max_num_batched_tokens=mnbt) if space else None
    except (ValueError, OSError) as exc:
        raise UsageError(f"budget: {_one_line(exc)}") from None
    if isinstance(result, MemoryMissing):
        return _print_memory_missing(result, args)
    text = budget_to_json(result)
    if pred is not None:
        text = json.dumps({**budget_to_dict(result), "kv_allocation": pred.as_dict()}, indent=2)
    out = getattr(args, "out", None)
    if out:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(out, text + "\n")
        except OSError as exc:
            raise UsageError(f"budget: cannot write {out}: {_one_line(exc)}") from None
    if getattr(args, "json", False):
        print(text)
    else:
        print(format_budget_text(result), end="")
        if pred is not None:
            print(format_allocation_text(pred), end="")
            if getattr(args, "block_size", None) is None:  # a default standing in: said, not hidden
                print(f"  - --block-size not given: blocks of {pred.block_size} tokens assumed (vLLM's default on a "
                      "GPU; its CPU backend uses 128): give the engine's block size for its figures")
        if out:
            print(f"saved budget JSON to {out}")
    return budget_exit(result)


def budget_exit(result: BudgetResult) -> int:
    """0 when the budget fits, 1 when it does not (`budget` answers the question "does it fit?")."""
    return int(ExitCode.PASS if result.fits else ExitCode.FAIL)


WHY_NOT_GIVEN = "neither --gpu-gib nor --kv-cache-gib was given"


def format_memory_missing_text(m: MemoryMissing) -> str:
    """The budget of a model whose memory input is missing: the KV figures, the missing input, no candidate."""
    i = m.inputs
    title = i.model or f"{i.params / 1e9:g}B params"
    per = f", per GPU with tp={i.tp}" if i.tp > 1 else ""
    lines = [f"Memory budget: {title}{per}{geometry_warning(i)}", "",
             f"  kv_per_token={m.kv_bytes_per_token:,} B          all {i.layers} layers, one token",
             f"  kv_per_seq={m.kv_per_seq_bytes:,} B ({m.kv_per_seq_bytes / GIB:.3f} GiB)   {i.max_seq} tokens "
             f"in blocks of {i.block_size}",
             "  memory_only_candidate=unknown   the memory input is missing",
             "", f"memory input missing: {WHY_NOT_GIVEN}; give {MEMORY_FLAGS} for a memory-only candidate "
             "(`servewatch budget` with nothing given, or --teaching, shows the teaching case's 24 GiB GPU).",
             "No candidate is computed from a GPU size nobody gave.", ""]
    return "\n".join(term(line) for line in lines) + "\n"  # a config's strings stay on their line


def _print_memory_missing(m: MemoryMissing, args: argparse.Namespace) -> int:
    """Exit 3: the model's KV cost is answered, but "does it fit?" is unknown without the memory (said so, never
    made up). --out refuses (exit 2): a budget without its memory cannot be saved and reloaded with --budget FILE."""
    if getattr(args, "out", None):
        raise UsageError(f"budget: nothing to save to {args.out}: the memory input is missing ({WHY_NOT_GIVEN}); "
                         f"give {MEMORY_FLAGS}")
    if getattr(args, "json", False):
        import json

        print(json.dumps(m.as_dict(WHY_NOT_GIVEN), indent=2))
    else:
        print(format_memory_missing_text(m), end="")
    return int(ExitCode.INSUFFICIENT)


# --------------------------------------------------------------------------------------------
# The budget shown beside a run (report, replay, live, accept, the no-argument console)
# --------------------------------------------------------------------------------------------


def budget_source(args: argparse.Namespace) -> str | None:
    """Where the flags' budget comes from, in words (None when no budget flag was given)."""
    if getattr(args, "budget", None):
        return f"file: {args.budget}"
    if getattr(args, "config", None):
        return f"model config: {args.config} (+ flags)"
    given = [k for k in ("params", "weights", "gpu_gib", "kv_cache_gib", "margin_gib", "layers", "kv_heads",
                         "head_dim", "max_seq", "kv_dtype", "tp", "block_size") if getattr(args, k, None) is not None]
    if given:
        return "flags: " + ", ".join("--" + k.replace("_", "-") for k in given)
    return None


def is_teaching_log(path: Any) -> bool:
    """True when ``path`` holds the bundled teaching log (sample_logs/seed.jsonl, byte for byte)."""
    try:
        from tui.samples import sample_path

        seed = Path(sample_path("seed.jsonl"))
        p = Path(path)
        return p.is_file() and p.stat().st_size == seed.stat().st_size and p.read_bytes() == seed.read_bytes()
    except (ImportError, OSError, ValueError, TypeError):
        return False


def view_budget(args: argparse.Namespace,
                paths: Sequence[Any] = ()) -> tuple[BudgetResult | MemoryMissing | None, str | None]:
    """The budget a view shows beside a run, and where it came from.

    Budget flags / --config / --budget FILE: that budget; without a memory input (--gpu-gib, --kv-cache-gib) a
    :class:`MemoryMissing` the Monitor completes from the run header (NVML's GPU, else the engine's own KV space)
    or leaves unknown with the missing input named. ``--teaching``, or every file is the bundled teaching
    log: the teaching case, labelled. Otherwise (None, None): unknown, unless the record file carries a budget
    record (the Monitor reads it). Raises ValueError / OSError on bad budget input."""
    teaching = bool(getattr(args, "teaching", False))
    if budget_given(args):
        if teaching:
            raise ValueError("--teaching shows the teaching case; it cannot be combined with budget flags")
        return budget_from_args(args), budget_source(args)
    if teaching:
        return teaching_case(), f"{ORIGIN_TEACHING}, asked for with --teaching"
    if paths and all(is_teaching_log(p) for p in paths):
        return teaching_case(), f"{ORIGIN_TEACHING}, shown for the bundled teaching log"
    return None, None
