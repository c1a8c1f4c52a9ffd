"""Options shared by several commands, and the argparse value types (standard library + ``tui.core`` only).

Every placeholder name comes from one vocabulary (``FILE``, ``DIR``, ``URL``, ``NAME``, ``MS``, ``SECONDS``,
``MINUTES``, ``FRACTION``, ``N``, ``LIST``, ``GIB``, ``TOKENS``, ``FACTOR``, ``USD``, ``VAR``, ``FORMAT``,
``DTYPE``, ``LEVEL``, ``N|MIN-MAX``, ``'NAME: VALUE'``, ``NAME=VAR``, ``START-END``), and every option's help states its default (or that it
has none): :class:`HelpFormatter` appends ``(default: X)`` where the text does not say it already.

Every float type refuses ``nan`` and ``inf`` (and negatives where a negative means nothing) with one line.
Contradictory flags (``--speed`` with ``--max-speed``, ``--rolling-seconds`` with ``--rolling-requests``) are
mutually exclusive groups: argparse refuses them with one line and exit 2.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from typing import Any

import tui.core.defaults as D
from tui.core.budget.inputs import MAX_GIB
from tui.core.budget.vocab import GIB
from tui.core.exitcodes import EXIT_CODES_DOC, UsageError  # noqa: F401 (re-exported for the command modules)
from tui.core.lengths import LengthDist, parse_lengths
from tui.core.slos import TTFT_OF, Slos
from tui.core.thinktime import ThinkDist, parse_think_time
from tui.core.verdict_settings import TARGET_USAGE_FLOOR, JudgeAt

#: the namespace attribute holding the verdict flags the user GAVE (issue 35: a flag that differs from the run's
#: own setting re-judges; one left at its default does not): set by the ``Given`` action
GIVEN = "verdict_flags_given"
#: each verdict flag's argparse dest -> the setting it sets (``tui.core.verdict_settings.FIELDS``)
DEST_TO_SETTING = {"slo_ttft_ms": "ttft_ms", "slo_tpot_ms": "tpot_ms", "slo_itl_ms": "itl_ms", "slo_e2e_ms": "e2e_ms",
                   "ttft_of": "ttft_of", "target": "target", "alpha": "alpha", "min_window_minutes": "min_window_s",
                   "min_requests": "min_requests", "required_level": "required_level"}


class Given(argparse.Action):
    """Stores the value (as ``store`` does) and remembers that the flag was given (``GIVEN``): the defaults stay
    the values (``--help`` and every reader of ``args.target`` unchanged), and a reader knows which were given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, GIVEN, frozenset(getattr(namespace, GIVEN, frozenset())) | {self.dest})


def given_settings(args: argparse.Namespace) -> frozenset[str]:
    """The verdict settings the user gave as flags (``tui.core.verdict_settings.FIELDS`` names)."""
    return frozenset(DEST_TO_SETTING[d] for d in getattr(args, GIVEN, frozenset()) if d in DEST_TO_SETTING)


def judge_at_from_args(args: argparse.Namespace, fields: tuple[str, ...] | None = None) -> JudgeAt:
    """What a reader's flags ask (``tui.core.verdict_settings.JudgeAt``): every setting's value (the defaults
    where not given) and which were given. ``fields``: the settings the command judges on (default: all)."""
    from tui.core.verdict_settings import FIELDS, VerdictSettings

    slos = slos_from_args(args)
    values = VerdictSettings(slos=slos, target=getattr(args, "target", D.TARGET),
                             alpha=getattr(args, "alpha", D.ALPHA),
                             min_window_s=getattr(args, "min_window_minutes", D.MIN_WINDOW_MINUTES) * 60.0,
                             min_requests=getattr(args, "min_requests", None),
                             required_level=getattr(args, "required_level", None))
    return JudgeAt(values=values, given=given_settings(args), fields=fields or FIELDS)

# ------------------------------------------------------------------ help


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's line breaks (examples) and states each option's default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or "default" in text.lower() or "%(default)" in text:
            return text
        if action.default is None or action.default is argparse.SUPPRESS or isinstance(action.default, bool):
            return text
        if isinstance(action.default, (list, tuple)) and not action.default:
            return text
        return text + " (default: %(default)s)"


def epilog(*examples: str, codes: str = EXIT_CODES_DOC) -> str:
    """The epilog of a command: its examples, then its exit codes."""
    lines = ["example:" if len(examples) == 1 else "examples:"] + [f"  {e}" for e in examples]
    return "\n".join(lines) + "\n\n" + codes


# ------------------------------------------------------------------ path flags and their roles

#: what a path flag is to its command (the own-input guard, ``tui.cli.guard``, reads the roles from the parser, so
#: a path flag declared without one fails tests/cli/test_outputs.py and a new one cannot be forgotten)
INPUT = "input"  # read
OUTPUT = "output"  # written whole (replaced)
APPEND = "append"  # appended to (a record file)
OUTPUT_DIR = "output-dir"  # a folder the command writes files into
INPUT_DIR = "input-dir"  # a folder the command reads files from
PATH_ROLES = (INPUT, OUTPUT, APPEND, OUTPUT_DIR, INPUT_DIR)


def path_arg(container: argparse._ActionsContainer, *flags: str, role: str, files: tuple[str, ...] = (),
             default_from: Any = None, **kw: Any) -> argparse.Action:
    """Declare a path flag (``add_argument``) with its ``role`` (one of ``PATH_ROLES``): the one list of what each
    command reads and writes. ``files``: for an OUTPUT_DIR, the names written inside it; ``default_from``: for an
    output whose default is derived from other flags (``import``'s ``FILE.servewatch.jsonl``), ``f(args) -> path``."""
    if role not in PATH_ROLES:
        raise ValueError(f"unknown path role {role!r}")
    action = container.add_argument(*flags, **kw)
    setattr(action, "path_role", role)  # noqa: B010 (an attribute argparse does not declare)
    setattr(action, "path_files", tuple(files))  # noqa: B010
    setattr(action, "path_default", default_from)  # noqa: B010
    return action


# ------------------------------------------------------------------ value types


def _number(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return v


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def positive_float(text: str) -> float:
    v = _number(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def non_negative_float(text: str) -> float:
    v = _number(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


def fraction(text: str) -> float:
    """Strictly between 0 and 1 (a target, an error level)."""
    v = positive_float(text)
    if not v < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return v


def target_fraction(text: str) -> float:
    """``--target``: from 0.5 up to below 1 (a good fraction under one half is no target: bad usage everywhere)."""
    v = _number(text)
    if not TARGET_USAGE_FLOOR <= v < 1:
        raise argparse.ArgumentTypeError(f"must be at least {TARGET_USAGE_FLOOR:g} and below 1 (a good fraction under "
                                         f"one half is no target), got {text}")
    return v


def margin_fraction(text: str) -> float:
    """From 0 (inclusive) up to 1 (a quality margin)."""
    v = non_negative_float(text)
    if not v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 0 and < 1 (a fraction, e.g. 0.05), got {text}")
    return v


def share(text: str) -> float:
    """From 0 to 1, both included (a share of rows that may be bad)."""
    v = _number(text)
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 1, got {text!r}")
    return v


def positive_int(text: str) -> int:
    v = _whole(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def non_negative_int(text: str) -> int:
    v = _whole(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


def levels(kind: type):
    """A comma-separated list of load levels (``1,2,4,8``), each > 0 and finite."""

    def parse(text: str) -> list[float]:
        out = []
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                v = kind(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"not a {'whole number' if kind is int else 'number'}: {part!r}") from None
            if not v > 0 or v != v or v == float("inf"):
                raise argparse.ArgumentTypeError(f"levels must be > 0, got {part!r}")
            out.append(float(v))
        if not out:
            raise argparse.ArgumentTypeError("give at least one level, e.g. 1,2,4,8")
        return out

    return parse


def token_lengths(text: str) -> LengthDist:
    """--input-tokens / --output-tokens: ``N``, ``A-B`` or a named distribution (:func:`tui.core.lengths.parse_lengths`)."""
    try:
        return parse_lengths(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def think_time(text: str) -> ThinkDist:
    """``--think-time``: seconds or a distribution (:func:`tui.core.thinktime.parse_think_time`)."""
    try:
        return parse_think_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def header_arg(text: str) -> tuple[str, str]:
    """``'Name: value'`` (the value is never echoed in an error)."""
    name, sep, value = str(text).partition(":")
    name = name.strip()
    if not sep or not _header_name_ok(name):
        raise argparse.ArgumentTypeError("expected 'Name: value'")
    return name, value.strip()


def _header_name_ok(name: str) -> bool:
    return bool(name) and not any(c in name for c in " \t\r\n:")


def header_env_arg(text: str) -> tuple[str, str]:
    """``--header-env NAME=VAR``: the header NAME, its value read from the environment variable VAR (when the
    command runs: :func:`extra_headers`)."""
    name, sep, var = str(text).partition("=")
    name, var = name.strip(), var.strip()
    if not sep or not _header_name_ok(name) or not var:
        raise argparse.ArgumentTypeError("expected NAME=VAR (a header name and an environment variable's name)")
    return name, var


HEADER_FILE_MAX_BYTES = 64 * 1024  # a --header-file larger than this is not a header file


def read_header_file(path: str) -> list[tuple[str, str]]:
    """The headers of a ``--header-file``: one ``Name: value`` per line; blank lines and ``#`` comments skipped.

    Refused (UsageError, one line naming the file and the line number, never a value): not a regular file, larger
    than :data:`HEADER_FILE_MAX_BYTES`, readable or writable by other users (``chmod 600 FILE``: a file of secrets
    every user of the machine can read is no safer than the command line; group access is allowed, for a team's
    shared secret), not UTF-8, a line that is not ``Name: value``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise UsageError(f"--header-file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"--header-file {path}: not a regular file")
        if os.name == "posix" and st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
            raise UsageError(f"--header-file {path}: readable or writable by every user (mode "
                             f"{stat.S_IMODE(st.st_mode):04o}): chmod 600 {path}, or pass the value with --header-env")
        if st.st_size > HEADER_FILE_MAX_BYTES:
            raise UsageError(f"--header-file {path}: larger than {HEADER_FILE_MAX_BYTES // 1024} KiB")
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(HEADER_FILE_MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--header-file {path}: not UTF-8 text") from None
    out: list[tuple[str, str]] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append(header_arg(line))
        except argparse.ArgumentTypeError:
            raise UsageError(f"--header-file {path}:{i}: expected 'Name: value'") from None
    return out


def env_value(var: str, flag: str) -> str:
    """The value of environment variable ``var`` for ``flag``; UsageError (naming the variable, never a value)
    when it is not set or empty."""
    value = os.environ.get(var)
    if not value:
        raise UsageError(f"{flag} {var}: the environment variable {var} is not set or empty")
    return value


def extra_headers(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every extra request header the flags give: ``--header`` (visible in ``ps``), ``--header-file FILE`` and
    ``--header-env NAME=VAR`` (not visible), in that order (a later one replaces an earlier one of the same name)."""
    out = list(getattr(args, "headers", None) or [])
    for path in getattr(args, "header_files", None) or []:
        out += read_header_file(path)
    for name, var in getattr(args, "header_envs", None) or []:
        value = env_value(var, "--header-env")
        if any(c in value for c in "\r\n\x00"):
            raise UsageError(f"--header-env {name}={var}: the value holds a line break or NUL")
        out.append((name, value.strip()))
    return out


def url_credentials(args: argparse.Namespace, attr: str = "url_credentials_env",
                    flag: str = "--url-credentials-env") -> str | None:
    """``user:password`` from the variable ``--url-credentials-env VAR`` names (None without the flag); UsageError
    when the variable is not set or holds no ``:``."""
    var = getattr(args, attr, None)
    if not var:
        return None
    value = env_value(var, flag)
    if ":" not in value:
        raise UsageError(f"{flag} {var}: expected user:password in {var}")
    return value


# ------------------------------------------------------------------ acceptance target (SLO and verdict)


def add_acceptance_arguments(parser: argparse.ArgumentParser) -> None:
    """The SLO / verdict flags shared by report, replay, run, live, sweep and accept."""
    g = parser.add_argument_group("acceptance target")
    add_slo_arguments(g)
    g.add_argument("--target", type=target_fraction, default=D.TARGET, metavar="FRACTION", action=Given,
                   help=f"required good fraction, at least {TARGET_USAGE_FLOOR:g} (default {D.TARGET:g})")
    g.add_argument("--alpha", type=fraction, default=D.ALPHA, metavar="FRACTION", action=Given,
                   help=f"error level of the anytime-valid verdict test (default {D.ALPHA:g})")
    g.add_argument("--min-window-minutes", type=non_negative_float, default=D.MIN_WINDOW_MINUTES, metavar="MINUTES",
                   action=Given,
                   help=f"minimum observation time before PASS can be declared (default {D.MIN_WINDOW_MINUTES:g})")
    g.add_argument("--min-requests", type=positive_int, default=None, metavar="N", action=Given,
                   help="minimum measured requests (default: the fewest with which PASS is possible)")


def ms_or_off(text: str) -> float | None:
    """An SLO in milliseconds (> 0), or ``off`` (None: not judged)."""
    if text.strip().lower() == "off":
        return None
    return positive_float(text)


def slos_from_args(args: argparse.Namespace) -> Slos:
    """The SLOs the acceptance flags give (``--slo-ttft-ms MS|off``, ``--slo-tpot-ms``, ``--slo-itl-ms``,
    ``--slo-e2e-ms``, ``--ttft-of``): the one place they become ``tui.core.slos.Slos``."""
    try:
        return Slos(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms, itl_ms=args.slo_itl_ms,
                    e2e_ms=args.slo_e2e_ms, ttft_of=args.ttft_of)
    except ValueError as exc:
        raise UsageError(exc) from None


def add_slo_arguments(g: argparse._ActionsContainer) -> None:
    """The SLO flags (``slos_from_args`` turns them into ``Slos``): in ``add_acceptance_arguments``, and `compare`."""
    g.add_argument("--slo-ttft-ms", type=ms_or_off, default=D.SLO_TTFT_MS, metavar="MS", action=Given,
                   help="a request is good when it completes AND meets every SLO given: time to first (answer) "
                        f"token at most this (default {D.SLO_TTFT_MS:g}; off: not judged)")
    g.add_argument("--slo-tpot-ms", type=ms_or_off, default=None, metavar="MS", action=Given,
                   help="time per output token at most this: (last token - first token) / (tokens - 1), per request "
                        "(default: off)")
    g.add_argument("--slo-itl-ms", type=ms_or_off, default=None, metavar="MS", action=Given,
                   help="the largest gap between two consecutive tokens at most this (a stall the user sees; "
                        "default: off)")
    g.add_argument("--slo-e2e-ms", type=ms_or_off, default=None, metavar="MS", action=Given,
                   help="request sent to last token at most this (default: off; MS or off)")
    g.add_argument("--ttft-of", choices=TTFT_OF, default="answer", action=Given,
                   help="what the TTFT SLO judges on a reasoning model: the first answer token (answer, the "
                        "stricter: fast reasoning must not look fast) or the first token of any kind (any, when "
                        "the product shows the reasoning) (default answer)")


def add_required_level_argument(parser: argparse.ArgumentParser) -> None:
    """--required-level (alias --level): the level the measured verdict judges. Same flag in report and accept."""
    parser.add_argument("--required-level", "--level", dest="required_level", type=positive_float, default=None,
                        metavar="LEVEL", action=Given,
                        help="the load the deployment must carry (concurrency or req/s); the measured verdict judges "
                             "this level (default: the highest level tested); a level not in the file is refused "
                             "(exit 2). --level is an alias")


def add_run_argument(parser: argparse.ArgumentParser, *, several_files: bool = False) -> None:
    """--run N: the run of a record file to judge (``run --record`` appends; several runs are never merged)."""
    parser.add_argument("--run", dest="run", type=positive_int, default=None, metavar="N",
                        help="judge run N (1-based) of a record file holding several runs (default: none; a file "
                             "with several runs is refused, exit 2, with the list of its runs)"
                             + ("; applies to every file given" if several_files else ""))


# ------------------------------------------------------------------ memory budget


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """Budget flags.  All default to None: nothing given means the teaching case (`budget`) or unknown (beside a run)."""
    from tui.core.budget.formats import KV_DTYPES, WEIGHT_FORMATS

    g = parser.add_argument_group("memory budget (`servewatch budget` with nothing given: the teaching case, 7B bf16 on "
                                  "24 GiB; beside a run, nothing given: unknown)")
    g.add_argument("--params", default=None, metavar="N",
                   help="parameter count, e.g. 7e9, 8B, 270M (default: 7B, the teaching case)")
    g.add_argument("--weights", default=None, metavar="FORMAT",
                   help="weight format: " + ", ".join(WEIGHT_FORMATS) + " (default: bf16)")
    g.add_argument("--gpu-gib", dest="gpu_gib", default=None, metavar="GIB",
                   help="memory of one GPU in GiB (default: 24)")
    g.add_argument("--margin-gib", dest="margin_gib", default=None, metavar="GIB",
                   help="runtime margin per GPU in GiB (default: 3)")
    g.add_argument("--layers", default=None, metavar="N",
                   help="layers holding a KV cache (default: 32, the teaching case's)")
    g.add_argument("--kv-heads", dest="kv_heads", default=None, metavar="N",
                   help="KV heads of the model (default: 8, the teaching case's)")
    g.add_argument("--head-dim", dest="head_dim", default=None, metavar="N",
                   help="elements per head (default: 128, the teaching case's)")
    g.add_argument("--max-seq", dest="max_seq", default=None, metavar="TOKENS",
                   help="tokens per sequence (default: 4096)")
    g.add_argument("--kv-dtype", dest="kv_dtype", default=None, metavar="DTYPE",
                   help="KV cache: " + ", ".join(KV_DTYPES) + " (default: bf16)")
    g.add_argument("--tp", default=None, metavar="N", help="tensor-parallel GPUs (default: 1)")
    g.add_argument("--block-size", dest="block_size", default=None, metavar="TOKENS",
                   help="paged KV block (default: 16)")
    g.add_argument("--kv-cache-gib", dest="kv_cache_gib", default=None, metavar="GIB",
                   help="the KV cache space per GPU in GiB, given directly (e.g. vLLM's VLLM_CPU_KVCACHE_SPACE): the "
                   "cache budget IS this space, and `servewatch budget` predicts the engine's KV blocks, tokens and "
                   "concurrency for it (default: none: GPU memory - weights - margin)")
    g.add_argument("--max-num-batched-tokens", dest="max_num_batched_tokens", default=None, metavar="TOKENS",
                   help="the engine's scheduler chunk (vLLM --max-num-batched-tokens): the blocks a sliding-window "
                   "layer group needs per request depend on it (default: unknown: the concurrency is a range)")
    path_arg(g, "--config", role=INPUT, default=None, metavar="FILE",
             help="Hugging Face config.json; other flags override it (default: none)")
    path_arg(g, "--budget", role=INPUT, default=None, metavar="FILE",
                   help="load, recompute and verify a saved budget JSON (default: none)")


def add_server_log_argument(parser: argparse.ArgumentParser) -> None:
    """``--server-log FILE``: the engine's own startup log (vLLM's "Maximum concurrency for N tokens per request")."""
    path_arg(
        parser, "--server-log", role=INPUT, dest="server_log", default=None, metavar="FILE",
        help="the serving engine's log (vLLM): its \"KV cache size: N tokens\" and \"Maximum concurrency for N "
        "tokens per request: Xx\" lines are shown beside the memory-only candidate (default: none)",
    )


# ------------------------------------------------------------------ the KV-allocation flags (bad values: UsageError)


def _flag_number(flag: str, raw: Any) -> float:
    text = str(raw).strip().replace(",", "").replace("_", "")
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {raw!r}")
    return value


def kv_space_from_args(args: argparse.Namespace) -> int | None:
    """``--kv-cache-gib G`` in bytes (G x 2**30 rounded, at least 1), or None when not given. Raises UsageError."""
    raw = getattr(args, "kv_cache_gib", None)
    if raw is None:
        return None
    gib = _flag_number("--kv-cache-gib", raw)
    if not 0 < gib <= MAX_GIB:
        raise UsageError(f"--kv-cache-gib must be > 0 and <= {MAX_GIB:g} GiB, got {raw!r}")
    return max(1, round(gib * GIB))  # as the budget beside a run counts it (tui.cli.budget)


def max_num_batched_tokens_from_args(args: argparse.Namespace) -> int | None:
    """``--max-num-batched-tokens N`` (a whole number >= 1), or None. Raises UsageError."""
    raw = getattr(args, "max_num_batched_tokens", None)
    if raw is None:
        return None
    value = _flag_number("--max-num-batched-tokens", raw)
    if not value.is_integer() or value < 1:
        raise UsageError(f"--max-num-batched-tokens must be a whole number >= 1, got {raw!r}")
    return int(value)


def server_log_from_args(args: argparse.Namespace) -> dict | None:
    """``--server-log FILE`` parsed (``tui.sources.server_log``), with ``--max-num-batched-tokens`` winning over
    the log's; None when neither is given. An unreadable file: UsageError."""
    path = getattr(args, "server_log", None)
    mnbt = max_num_batched_tokens_from_args(args)
    if path is None:
        if mnbt is None:
            return None
        return {"max_concurrency": None, "concurrency_tokens": None, "kv_cache_size_tokens": None,
                "max_num_batched_tokens": mnbt, "lines": 0, "source": "--max-num-batched-tokens"}
    from tui.sources.server_log import read_server_log

    try:
        log = read_server_log(path)
    except OSError as exc:
        raise UsageError(f"--server-log: cannot read {path}: {exc.strerror or exc}") from None
    if mnbt is not None:
        log["max_num_batched_tokens"] = mnbt
    return log


def add_teaching_argument(parser: argparse.ArgumentParser) -> None:
    """``--teaching``: show the teaching case's budget beside a run (views only; never a default)."""
    parser.add_argument(
        "--teaching", action="store_true",
        help="show the teaching case's budget (7B bf16 on a 24 GiB GPU: an example, not your model) beside the run; "
        "without budget flags, --teaching or a budget record in the file the budget is unknown",
    )


# ------------------------------------------------------------------ the console


def add_console_arguments(parser: argparse.ArgumentParser) -> None:
    """Console options shared by `replay`, `live` and the no-argument console."""
    g = parser.add_argument_group("console")
    g.add_argument("--theme", default=None, metavar="NAME",
                   help="dark, light, high-contrast or one from --themes-dir (default: dark)")
    path_arg(g, "--themes-dir", role=INPUT_DIR, dest="themes_dir", default=None, metavar="DIR",
                   help="extra theme TOML files (default: none)")
    path_arg(g, "--export-dir", role=OUTPUT_DIR, dest="export_dir", default=D.EXPORT_DIR, metavar="DIR",
                   help=f"where ctrl+s writes the SVG screenshot and JSON snapshot (default ./{D.EXPORT_DIR})")


def add_rolling_arguments(parser: argparse.ArgumentParser) -> None:
    """The console's rolling window (`replay`, `live`): seconds or requests, not both."""
    g = parser.add_argument_group("rolling window (one of)")
    m = g.add_mutually_exclusive_group()
    m.add_argument("--rolling-seconds", dest="rolling_seconds", type=positive_float, default=None, metavar="SECONDS",
                   help="rolling window length in record time (default 60)")
    m.add_argument("--rolling-requests", dest="rolling_requests", type=positive_int, default=None, metavar="N",
                   help="rolling window = the last N requests instead (default: off, the window is in seconds)")


def add_speed_arguments(parser: argparse.ArgumentParser, default_text: str) -> None:
    """--speed FACTOR or --max-speed (not both)."""
    g = parser.add_argument_group("replay speed (one of)")
    m = g.add_mutually_exclusive_group()
    m.add_argument("--speed", type=positive_float, default=None, metavar="FACTOR",
                   help=f"replay FACTOR times faster than recorded; +/- change it while running ({default_text})")
    m.add_argument("--max-speed", dest="max_speed", action="store_true", help="replay as fast as possible")


def add_console_default_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments accepted by `servewatch` with no command (the console on the bundled sample run)."""
    add_speed_arguments(parser, "default: fast enough to show the whole sample in about a minute")
    add_console_arguments(parser)
    add_teaching_argument(parser)
    # the acceptance settings of the console on the sample run: the one home's defaults (no flags for them here)
    parser.set_defaults(slo_ttft_ms=D.SLO_TTFT_MS, slo_tpot_ms=None, slo_itl_ms=None, slo_e2e_ms=None,
                        ttft_of="answer", target=D.TARGET, alpha=D.ALPHA, min_window_minutes=D.MIN_WINDOW_MINUTES,
                        min_requests=None)


# ------------------------------------------------------------------ HTTP: endpoint, credentials, TLS, headers


def add_header_arguments(c: argparse._ArgumentGroup) -> None:
    """--header, --header-file and --header-env (run, live, sweep, quality, watch): :func:`extra_headers`."""
    c.add_argument("--header", dest="headers", action="append", type=header_arg, default=[], metavar="'NAME: VALUE'",
                   help="extra request header, repeatable; visible in ps: prefer --header-env or --header-file for "
                        "a secret (default: none; values never recorded)")
    c.add_argument("--header-env", dest="header_envs", action="append", type=header_env_arg, default=[],
                   metavar="NAME=VAR", help="extra request header NAME with the value of environment variable VAR, "
                                            "repeatable (default: none; values never recorded)")
    path_arg(c, "--header-file", role=INPUT, dest="header_files", action="append", default=[], metavar="FILE",
                   help="extra request headers from FILE, one 'Name: value' per line (# comments); refused when "
                        "other users may read it: chmod 600 (default: none; values never recorded)")


def add_http_arguments(parser: argparse.ArgumentParser, *, title: str = "connection") -> argparse._ArgumentGroup:
    """Credentials, extra headers and TLS, as `run`, `live`, `sweep` and `quality` take them."""
    c = parser.add_argument_group(title)
    c.add_argument("--api-key-env", default=D.API_KEY_ENV, metavar="VAR",
                   help="environment variable holding the API key, sent as Authorization: Bearer "
                        f"(default {D.API_KEY_ENV}; never recorded)")
    c.add_argument("--url-credentials-env", default=None, metavar="VAR",
                   help="user:password for the URL's Basic authentication, read from environment variable VAR "
                        "(user:password@ in --url is visible in ps; never recorded) (default: none)")
    add_header_arguments(c)
    c.add_argument("--insecure", action="store_true",
                   help="do not verify TLS certificates (recorded; SSL_CERT_FILE / SSL_CERT_DIR add trusted CAs)")
    return c
