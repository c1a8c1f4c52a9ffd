"""The command line's shared vocabulary (standard library + ``tui.core`` only): the help formatter, the path
roles, the argparse value types, and the settings blocks and flags several commands declare (acceptance target
and SLOs, HTTP credentials and headers, the one-flag declarations such as ``--run`` or ``--server-log``).

Every placeholder name comes from one vocabulary (``FILE``, ``DIR``, ``URL``, ``NAME``, ``NAME=FILE``, ``MS``, ``SECONDS``,
``MINUTES``, ``DATE``, ``FRACTION``, ``N``, ``LIST``, ``GIB``, ``TOKENS``, ``FACTOR``, ``USD``, ``VAR``, ``FORMAT``,
``DTYPE``, ``LEVEL``, ``N|MIN-MAX``, ``'NAME: VALUE'``, ``NAME=VAR``, ``START-END``), and every option's help states its default (or that it
has none): :class:`HelpFormatter` appends ``(default: X)`` where the text does not say it already.

Every float type refuses ``nan`` and ``inf`` (and negatives where a negative means nothing) with one line.
Contradictory flags (``--speed`` with ``--max-speed``, ``--rolling-seconds`` with ``--rolling-requests``) are
mutually exclusive sets: argparse refuses them with one line and exit 2.

Flags are declared as fields of settings dataclasses (``tui.cli.declare``); the blocks here are shared by several
commands: :class:`Acceptance` (the verdict's settings: SLOs, target, alpha, window, count), :class:`Headers` and
:class:`Http` (credentials, extra headers, TLS).
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from dataclasses import dataclass
from typing import Any

import tui.core.defaults as D
from tui.cli.declare import (  # noqa: F401 (the roles and Given re-exported for the command modules)
    APPEND,
    GIVEN,
    INPUT,
    INPUT_DIR,
    OUTPUT,
    OUTPUT_DIR,
    PATH_ROLES,
    CoreDefault,
    CoreText,
    Given,
    Settings,
    block,
    custom,
    flag,
    path,
    switch,
)
from tui.core.exitcodes import EXIT_CODES_DOC, UsageError  # noqa: F401 (re-exported for the command modules)
from tui.core.lengths import LengthDist, parse_lengths
from tui.core.slos import SLO_TABLE, TTFT_OF, Slos
from tui.core.thinktime import ThinkDist, parse_think_time
from tui.core.verdict_settings import TARGET_USAGE_FLOOR, JudgeAt


def given_flags() -> Any:
    """A settings field holding the verdict settings the user gave as flags (what ``Given`` recorded)."""
    return custom(None, lambda ns: frozenset(vars(ns).get(GIVEN, frozenset())), frozenset)


def judge_at_from_args(slos: Slos, given: frozenset[str], *, target: float | None = None,
                       alpha: float | None = None, min_window_minutes: float | None = None,
                       min_requests: int | None = None, required_level: float | None = None,
                       fields: tuple[str, ...] | None = None) -> JudgeAt:
    """What a reader's flags ask (``tui.core.verdict_settings.JudgeAt``): every setting's value (the defaults
    where not given) and which were given (``given``: what the ``Given`` action recorded). ``fields``: the settings
    the command judges on (default: all)."""
    from tui.core.verdict_settings import FIELDS, VerdictSettings

    window = D.MIN_WINDOW_MINUTES if min_window_minutes is None else min_window_minutes
    values = VerdictSettings(slos=slos, target=D.TARGET if target is None else target,
                             alpha=D.ALPHA if alpha is None else alpha, min_window_s=window * 60.0,
                             min_requests=min_requests, required_level=required_level)
    return JudgeAt(values=values, given=given, fields=fields or FIELDS)

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

# the path roles (what a path flag is to its command) are declared with the flag: ``tui.cli.declare`` (re-exported
# here: INPUT, OUTPUT, APPEND, OUTPUT_DIR, INPUT_DIR, PATH_ROLES)


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


# ------------------------------------------------------------------ HTTP: credentials, TLS, headers


@dataclass(frozen=True, kw_only=True)
class Headers(Settings):
    """--header, --header-file and --header-env (run, live, sweep, quality, watch): :func:`extra_headers`."""

    headers: list[tuple[str, str]] = flag(
        "--header", action="append", type=header_arg, default=[], metavar="'NAME: VALUE'",
        help="extra request header, repeatable; visible in ps: prefer --header-env or --header-file for a secret "
             "(default: none; values never recorded)")
    header_envs: list[tuple[str, str]] = flag(
        "--header-env", action="append", type=header_env_arg, default=[], metavar="NAME=VAR",
        help="extra request header NAME with the value of environment variable VAR, repeatable (default: none; "
             "values never recorded)")
    header_files: list[str] = path(
        "--header-file", role=INPUT, action="append", default=[], metavar="FILE",
        help="extra request headers from FILE, one 'Name: value' per line (# comments); refused when other users "
             "may read it: chmod 600 (default: none; values never recorded)")


@dataclass(frozen=True, kw_only=True)
class Http(Settings):
    """Credentials, extra headers and TLS, as `run`, `live`, `sweep` and `quality` take them (the group's title
    and its other flags are the command's)."""

    api_key_env: str | None = flag(
        "--api-key-env", default=CoreDefault("API_KEY_ENV"), metavar="VAR", into="api_key_env",
        help=CoreText("environment variable holding the API key, sent as Authorization: Bearer "
                      "(default {API_KEY_ENV}; never recorded)"))
    url_credentials_env: str | None = flag(
        "--url-credentials-env", default=None, metavar="VAR",
        help="user:password for the URL's Basic authentication, read from environment variable VAR "
             "(user:password@ in --url is visible in ps; never recorded) (default: none)")
    extra: Headers = block(Headers)
    insecure: bool = flag(
        "--insecure", action="store_true", default=False, into="insecure",
        help="do not verify TLS certificates (recorded; SSL_CERT_FILE / SSL_CERT_DIR add trusted CAs)")


def extra_headers(h: Headers) -> list[tuple[str, str]]:
    """Every extra request header the flags give: ``--header`` (visible in ``ps``), ``--header-file FILE`` and
    ``--header-env NAME=VAR`` (not visible), in that order (a later one replaces an earlier one of the same name)."""
    out = list(h.headers or [])
    for file in h.header_files or []:
        out += read_header_file(file)
    for name, var in h.header_envs or []:
        value = env_value(var, "--header-env")
        if any(c in value for c in "\r\n\x00"):
            raise UsageError(f"--header-env {name}={var}: the value holds a line break or NUL")
        out.append((name, value.strip()))
    return out


def url_credentials(var: str | None, flag: str = "--url-credentials-env") -> str | None:
    """``user:password`` from the variable ``--url-credentials-env VAR`` names (None without the flag); UsageError
    when the variable is not set or holds no ``:``."""
    if not var:
        return None
    value = env_value(var, flag)
    if ":" not in value:
        raise UsageError(f"{flag} {var}: expected user:password in {var}")
    return value


# ------------------------------------------------------------------ acceptance target (SLO and verdict)


def ms_or_off(text: str) -> float | None:
    """An SLO in milliseconds (> 0), or ``off`` (None: not judged)."""
    if text.strip().lower() == "off":
        return None
    return positive_float(text)


def _slo_dest(kind: Any) -> str:
    """The namespace attribute of an SLO flag: its flag's name (``--slo-ttft-ms``: ``slo_ttft_ms``)."""
    return str(kind.flag).removeprefix("--").replace("-", "_")


def slos_from_args(args: argparse.Namespace) -> Slos:
    """The SLOs the acceptance flags give (one ``--slo-KIND-ms MS|off`` per row of the SLO table,
    ``tui.core.slos.SLO_TABLE``, and ``--ttft-of``): the one place they become ``tui.core.slos.Slos`` (the reader
    of the ``slos`` setting that ``add_slo_arguments`` declares)."""
    try:
        given = vars(args)  # one value per row of the SLO table, under its flag's name (add_slo_arguments)
        dests = {k.key: _slo_dest(k) for k in SLO_TABLE}
        for dest in dests.values():
            if dest not in given:  # a namespace without the flag: a bug, never an SLO silently off
                raise AttributeError(dest)
        return Slos.of({key: given[dest] for key, dest in dests.items()}, ttft_of=args.ttft_of)
    except ValueError as exc:
        raise UsageError(exc) from None


def embeddings_slos(acceptance: Acceptance) -> Slos:
    """The SLOs of an ``--api embeddings`` load run: no tokens are streamed, so E2E is the SLO (``--slo-e2e-ms``,
    default ``EMBEDDINGS_SLO_E2E_MS``); any other SLO of the table given is bad usage (it could never be judged)."""
    given, slos = acceptance.given, acceptance.slos
    bad = [k.flag for k in SLO_TABLE if k.key != "e2e" and k.json_key in given and slos.limit(k.key) is not None]
    if bad:
        raise UsageError(f"{', '.join(bad)}: --api embeddings streams no tokens, so TTFT, TPOT and ITL cannot be "
                         f"judged; E2E is the SLO (--slo-e2e-ms MS, default {D.EMBEDDINGS_SLO_E2E_MS:g})")
    e2e = slos.limit("e2e") if "e2e_ms" in given else D.EMBEDDINGS_SLO_E2E_MS
    try:
        return Slos.of({"e2e": e2e}, ttft_of=slos.ttft_of)
    except ValueError as exc:
        raise UsageError(exc) from None


def add_slo_arguments(g: argparse._ActionsContainer) -> None:
    """The SLO flags (``slos_from_args`` turns them into ``Slos``): one per row of the SLO table
    (``tui.core.slos.SLO_TABLE``: its flag, help and JSON key, the verdict setting the ``Given`` action records),
    and ``--ttft-of``; the ``slos`` setting of :class:`Acceptance`, and `compare`'s."""
    on = {"ttft": D.SLO_TTFT_MS}  # the kinds on by default (the one home's value, read now); the others: off
    for kind in SLO_TABLE:
        g.add_argument(kind.flag, dest=_slo_dest(kind), type=ms_or_off, default=on.get(kind.key), metavar="MS",
                       action=Given, setting=kind.json_key, help=kind.help)
    g.add_argument("--ttft-of", choices=TTFT_OF, default="answer", action=Given, setting="ttft_of",
                   help="what the TTFT SLO judges on a reasoning model: the first answer token (answer, the "
                        "stricter: fast reasoning must not look fast) or the first token of any kind (any, when "
                        "the product shows the reasoning) (default answer)")


def slo_flags() -> Any:
    """The ``slos`` setting: the SLO flags (``add_slo_arguments``), read by ``slos_from_args``."""
    return custom(add_slo_arguments, slos_from_args, lambda: Slos(ttft_ms=D.SLO_TTFT_MS))


@dataclass(frozen=True, kw_only=True)
class Acceptance(Settings):
    """The SLO / verdict flags shared by report, replay, run, live, sweep, accept, plan and watch; ``given``: the
    verdict settings given as flags (issue 35: those re-judge a file)."""

    GROUP = "acceptance target"

    slos: Slos = slo_flags()
    target: float = flag(
        "--target", type=target_fraction, default=CoreDefault("TARGET"), metavar="FRACTION", verdict="target",
        help=CoreText(f"required good fraction, at least {TARGET_USAGE_FLOOR:g} (default {{TARGET:g}})"))
    alpha: float = flag(
        "--alpha", type=fraction, default=CoreDefault("ALPHA"), metavar="FRACTION", verdict="alpha",
        help=CoreText("error level of the anytime-valid verdict test (default {ALPHA:g})"))
    min_window_minutes: float = flag(
        "--min-window-minutes", type=non_negative_float, default=CoreDefault("MIN_WINDOW_MINUTES"),
        metavar="MINUTES", verdict="min_window_s",
        help=CoreText("minimum observation time before PASS can be declared (default {MIN_WINDOW_MINUTES:g})"))
    min_requests: int | None = flag(
        "--min-requests", type=positive_int, default=None, metavar="N", verdict="min_requests",
        help="minimum measured requests (default: the fewest with which PASS is possible)")
    given: frozenset[str] = given_flags()

    def judge_at(self, required_level: float | None = None, fields: tuple[str, ...] | None = None) -> JudgeAt:
        """What these flags ask of a file (``judge_at_from_args``)."""
        return judge_at_from_args(self.slos, self.given, target=self.target, alpha=self.alpha,
                                  min_window_minutes=self.min_window_minutes, min_requests=self.min_requests,
                                  required_level=required_level, fields=fields)

    def monitor_config(self, rolling_s: float | None = None, rolling_n: int | None = None, **extra: Any) -> Any:
        """The Monitor's settings (``tui.core.monitor.MonitorConfig``) from these flags, with a console's rolling
        window where given."""
        from tui.core.monitor import MonitorConfig

        kw: dict[str, Any] = dict(
            slos=self.slos,
            target=self.target, alpha=self.alpha, min_window_s=self.min_window_minutes * 60.0,
            min_requests=self.min_requests)
        if rolling_s:
            kw["rolling_s"] = rolling_s
        if rolling_n:
            kw["rolling_n"] = rolling_n
        kw.update(extra)
        return MonitorConfig(**kw)


def add_acceptance_arguments(parser: argparse.ArgumentParser) -> None:
    """The acceptance flags (:class:`Acceptance`) on ``parser``, in their group."""
    from tui.cli.declare import build

    build(parser, _AcceptanceOnly)


@dataclass(frozen=True, kw_only=True)
class _AcceptanceOnly(Settings):
    acceptance: Acceptance = block(Acceptance)


# ------------------------------------------------------------------ flags several commands declare


def required_level_flag() -> Any:
    """--required-level (alias --level): the level the measured verdict judges. Same flag in report and accept."""
    return flag("--required-level", "--level", type=positive_float, default=None, metavar="LEVEL",
                verdict="required_level",
                help="the load the deployment must carry (concurrency or req/s); the measured verdict judges this "
                     "level (default: the highest level tested); a level not in the file is refused (exit 2). "
                     "--level is an alias")


def run_flag(*, several_files: bool = False) -> Any:
    """--run N: the run of a record file to judge (``run --record`` appends; several runs are never merged)."""
    return flag("--run", type=positive_int, default=None, metavar="N",
                help="judge run N (1-based) of a record file holding several runs (default: none; a file with "
                     "several runs is refused, exit 2, with the list of its runs)"
                     + ("; applies to every file given" if several_files else ""))


def _percentiles(text: str) -> tuple[float, ...]:
    from tui.core.stats import parse_percentiles

    try:
        return parse_percentiles(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--percentiles: ")) from None


def percentiles_flag() -> Any:
    """``--percentiles LIST`` (issue 41): the latency percentiles read and shown, one choice for the whole command
    (``tui.cli.main`` sets ``tui.core.stats.selected``); the last field of every command of
    ``tui.cli.PERCENTILE_COMMANDS``."""
    return flag("--percentiles", type=_percentiles, default=None, metavar="LIST",
                help="the latency percentiles read and shown, such as 50,90,95,99,99.9 (default 50,95,99); each "
                     "is supported only with n >= log(0.05)/log(q) requests (P90 29, P99.9 2,995: "
                     "docs/statistics.md), else shown with the * mark; JSON keys p50, p90, p99.9")


def teaching_flag() -> Any:
    """``--teaching``: show the teaching case's budget beside a run (views only; never a default)."""
    return switch("--teaching",
                  help="show the teaching case's budget (7B bf16 on a 24 GiB GPU: an example, not your model) beside "
                       "the run; without budget flags, --teaching or a budget record in the file the budget is "
                       "unknown")


def server_log_flag() -> Any:
    """``--server-log FILE``: the engine's own startup log (vLLM's "Maximum concurrency for N tokens per request")."""
    return path("--server-log", role=INPUT, default=None, metavar="FILE",
                help="the serving engine's log (vLLM): its \"KV cache size: N tokens\" and \"Maximum concurrency for "
                     "N tokens per request: Xx\" lines are shown beside the memory-only candidate (default: none)")


def details_flag() -> Any:
    """``--details``: the long text report (report, run)."""
    return switch("--details",
                  help="the long text report: each latency metric, token accounting per level, budget assumptions, "
                       "server timing, prefix cache (default: the short report; --json has all)")


def html_flag(what: str) -> Any:
    """``--html FILE``: also write ``what`` as one HTML page (report, compare)."""
    return path("--html", role=OUTPUT, metavar="FILE", default=None,
                help=f"also write {what} as one self-contained HTML page with charts to FILE (opens from file://, "
                     "fetches nothing; default: none)")
