"""`servewatch budget`: the memory budget on the command line (argparse glue, standard library only).

    servewatch budget                       # the teaching case
    servewatch budget --config config.json --max-seq 8192 --weights awq --gpu-gib 80
    servewatch budget --budget saved.json   # recompute and verify a saved budget
    servewatch budget --config a.json --config b.json --max-seq 4096,8192 --gpu L4,H100-SXM   # screening table

The screening table (lists: several models, comma lists of weights, KV dtypes, lengths, TP and memories) is
``tui.cli.budget_grid`` over ``tui.core.screen``.

Also the budget shown beside a run (report, replay, live, accept, the no-argument console): ``view_budget``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tui.cli.budget_grid import Screening
from tui.cli.budgetflags import BudgetListFlags, budget_from_args, budget_heading, geometry_warning
from tui.cli.declare import Settings, block, path, switch
from tui.cli.options import OUTPUT, UsageError, epilog
from tui.core.budget.allocation import KvPrediction, predict_allocation
from tui.core.budget.arithmetic import compute_budget, kv_heads_per_gpu
from tui.core.budget.formats import KV_DTYPES, WEIGHT_FORMATS
from tui.core.budget.memory import MEMORY_FLAGS, MemoryMissing
from tui.core.budget.results import BudgetResult
from tui.core.budget.serialize import budget_to_dict, budget_to_json
from tui.core.budget.vocab import CANDIDATE_NOTE, GIB
from tui.core.exitcodes import ExitCode
from tui.core.textsafe import term

# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def _gib(x: float) -> str:
    return f"{x:.2f} GiB"


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
    lines = [budget_heading(result), ""]
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
                "servewatch budget --config a.json --config b.json --weights bf16,awq --max-seq 4096,8192 --gpu L4,H100-SXM",
                codes="exit codes: 0 fits, 1 does not fit, 3 unknown (no memory given), 2 bad usage or unreadable input; "
                      "a screening table (lists): 0 when at least one row fits, 1 when none does, 2 bad usage "
                      "(a grid larger than --max-candidates)")


@dataclass(frozen=True, kw_only=True)
class BudgetSettings(Settings):
    """`servewatch budget` (light: imports nothing beyond the standard library and tui.core)."""

    DESCRIPTION = DESCRIPTION
    EPILOG = EPILOG

    budget: BudgetListFlags = block(BudgetListFlags)  # comma lists and --config repeated: the screening table
    grid: Screening = block(Screening)
    teaching: bool = switch(
        "--teaching", help="fill the memory inputs not given (--gpu-gib, --margin-gib) from the teaching case (24 GiB "
                           "GPU, 3 GiB margin), labelled; without it and without --gpu-gib/--kv-cache-gib a model's "
                           "budget shows its KV figures and no candidate")
    json: bool = switch("--json", help="print the budget as JSON (loadable with --budget FILE)")
    out: str | None = path("--out", role=OUTPUT, default=None, metavar="FILE",
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


def run(settings: BudgetSettings) -> int:
    """Print the budget (text, or JSON with --json); save JSON with --out.  0 on success; bad input: UsageError.

    ``--kv-cache-gib G``: the cache budget is that space, and the engine's KV allocation for it is predicted
    (``tui.core.budget.allocation``: bytes per token, blocks, tokens, concurrency)."""
    from tui.cli.budget_grid import grid_requested, run_grid, single_values
    from tui.cli.budgetflags import kv_space_from_args, max_num_batched_tokens_from_args

    if grid_requested(settings):  # lists: the screening table (issue 40)
        return run_grid(settings)
    flags = single_values(settings.budget)
    space = kv_space_from_args(flags)
    mnbt = max_num_batched_tokens_from_args(flags)
    if space is not None and flags.budget is not None:
        raise UsageError("budget: --budget loads a saved budget as it is; it cannot be combined with --kv-cache-gib")
    try:
        result = budget_from_args(flags, settings.teaching)
        if space is not None and not result.inputs.kv_space_bytes:  # budget_from_args may already have it
            result = compute_budget(result.inputs.replace(kv_space_bytes=space))
        space = space or result.inputs.kv_space_bytes or None
        pred = predict_allocation(result.inputs, space, max_num_batched_tokens=mnbt) if space else None
    except (ValueError, OSError) as exc:
        raise UsageError(f"budget: {_one_line(exc)}") from None
    if isinstance(result, MemoryMissing):
        return _print_memory_missing(result, settings)
    text = budget_to_json(result)
    if pred is not None:
        text = json.dumps({**budget_to_dict(result), "kv_allocation": pred.as_dict()}, indent=2)
    out = settings.out
    if out:
        try:
            from tui.sources.outfiles import write_text_atomic

            write_text_atomic(out, text + "\n")
        except OSError as exc:
            raise UsageError(f"budget: cannot write {out}: {_one_line(exc)}") from None
    if settings.json:
        print(text)
    else:
        print(format_budget_text(result), end="")
        if pred is not None:
            print(format_allocation_text(pred), end="")
            if flags.block_size is None:  # a default standing in: said, not hidden
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


def _print_memory_missing(m: MemoryMissing, settings: BudgetSettings) -> int:
    """Exit 3: the model's KV cost is answered, but "does it fit?" is unknown without the memory (said so, never
    made up). --out refuses (exit 2): a budget without its memory cannot be saved and reloaded with --budget FILE."""
    if settings.out:
        raise UsageError(f"budget: nothing to save to {settings.out}: the memory input is missing ({WHY_NOT_GIVEN}); "
                         f"give {MEMORY_FLAGS}")
    if settings.json:
        print(json.dumps(m.as_dict(WHY_NOT_GIVEN), indent=2))
    else:
        print(format_memory_missing_text(m), end="")
    return int(ExitCode.INSUFFICIENT)
